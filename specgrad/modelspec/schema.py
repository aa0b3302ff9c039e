"""The spec schema, defined once: fields with type, default, range and a one-line description, grouped into sections.

The validator, the JSON Schema and docs/spec.md's reference tables all come from these definitions. Imports
modelspec.errors and modelspec.loader only.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any

from specgrad.modelspec.errors import Problem, excerpt
from specgrad.modelspec.loader import YNode

REQUIRED = object()  # NOTE: the default of a field the user must give

KINDS: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
                                      "list": (list,), "map": (dict,), "any": (object,)}  # fmt: skip
KIND_WORDS = {"int": "a whole number", "float": "a number", "str": "text", "bool": "true or false", "list": "a list",
              "map": "a mapping (key: value lines)", "any": "a value"}  # fmt: skip


@dataclass(frozen=True)
class Field:
    """One key of a section: its kind, default (REQUIRED when it must be given), bounds and description."""

    kind: str
    description: str
    default: Any = None
    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] | None = None
    item: Field | None = None  # for lists: each element's field
    section: Section | None = None  # for maps with a fixed set of keys

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class Section:
    """A mapping with a fixed set of keys."""

    name: str
    description: str
    fields: dict[str, Field] = field(default_factory=dict)


def did_you_mean(word: str, options: list[str] | tuple[str, ...]) -> str | None:
    """'did you mean ...?' with the option closest to `word`, if one is close; `word` is cut to 100 characters
    (difflib's time grows with the product of the lengths, and a spec's word can be a megabyte)."""
    close = difflib.get_close_matches(word[:100], list(options), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def unknown_key_hint(key: str, options: list[str] | tuple[str, ...]) -> str:
    """The hint of an unknown key: the close one if there is one, then every key its section takes (a typo far from
    all of them, or a key of another tool such as early stopping's `monitor`, still shows what to write)."""
    return " ".join(x for x in (did_you_mean(key, options), f"valid keys: {', '.join(options)}") if x)


def kind_of(node: YNode) -> str:
    if node.kind == "map":
        return "map"
    if node.kind == "seq":
        return "list"
    v = node.value
    return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float" if isinstance(v, float) else (
        "null" if v is None else "str")  # fmt: skip


def describe(node: YNode) -> str:
    """The value as the user wrote it, for messages: a short excerpt of it (a value can be a megabyte of text)."""
    if node.kind != "scalar":
        return KIND_WORDS[kind_of(node)]
    return f"'{excerpt(node.text)}'" if node.text is not None else excerpt(repr(node.value))


def check_value(node: YNode, f: Field, where: str) -> list[Problem]:
    """Type, range and choices of one value; YAML surprises explained."""
    k = kind_of(node)
    if node.kind == "scalar" and node.value is None and f.default is None and f.kind != "any":
        return []  # NOTE: null sets an optional value back to none (train.early_stopping: null stops never)
    if f.kind != "any" and not (k == f.kind or (f.kind == "float" and k == "int")):
        return [_type_problem(node, f, where, k)]
    if f.kind in ("int", "float"):
        v = node.value
        if isinstance(v, float) and not math.isfinite(v):
            return [Problem(f"{where} must be a finite number, got {describe(node)}", node.loc)]
        if (f.min is not None and v < f.min) or (f.max is not None and v > f.max):
            return [Problem(f"{where} must be {_range_words(f)}, got {describe(node)}", node.loc)]
    if f.choices is not None and node.value not in f.choices:
        hint = did_you_mean(str(node.value), [str(c) for c in f.choices])
        return [Problem(f"{where} must be one of {', '.join(map(str, f.choices))}; got {describe(node)}", node.loc,
                        hint)]  # fmt: skip
    if f.kind == "list" and f.item is not None:
        return [p for i, x in enumerate(node.value) for p in check_value(x, f.item, f"{where}[{i}]")]
    if f.kind == "map" and f.section is not None:
        return check_section(node, f.section, where)
    return []


def _type_problem(node: YNode, f: Field, where: str, got: str) -> Problem:
    want = KIND_WORDS[f.kind]
    hint = None
    if f.kind == "bool" and got == "str" and str(node.value).lower() in ("yes", "no", "on", "off", "y", "n"):
        hint = "YAML 1.2 reads yes/no/on/off as text: write true or false"
    elif f.kind == "str" and got in ("int", "float", "bool") and node.text is not None:
        text = excerpt(node.text)
        hint = f"{text} was read as {KIND_WORDS[got]}; put it in quotes if you meant text: '{text}'"
    elif f.kind in ("int", "float") and got == "str":
        hint = "numbers are written without quotes"
    elif f.kind == "int" and got == "float":
        hint = "use a whole number"
    return Problem(f"{where} must be {want}, got {describe(node)}", node.loc, hint)


def _range_words(f: Field) -> str:
    if f.min is not None and f.max is not None:
        return f"between {_num(f.min)} and {_num(f.max)}"
    return f"at least {_num(f.min)}" if f.min is not None else f"at most {_num(f.max)}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def check_section(node: YNode, section: Section, where: str) -> list[Problem]:
    """Keys of a mapping: unknown keys (with a did-you-mean), missing required keys, then each value."""
    if node.kind != "map":
        return [Problem(f"{where} must be {KIND_WORDS['map']}, got {describe(node)}", node.loc)]
    problems: list[Problem] = []
    for key, value in node.value.items():
        if key not in section.fields:
            loc = node.key_locs[key] if node.key_locs else value.loc
            place = f"in {where}" if where else "at the top level"
            problems.append(Problem(f"unknown key '{excerpt(key)}' {place}", loc,
                                    unknown_key_hint(key, list(section.fields))))  # fmt: skip
            continue
        problems += check_value(value, section.fields[key], f"{where}.{key}" if where else key)
    for key, f in section.fields.items():
        if f.required and key not in node.value:
            problems.append(Problem(f"{where or 'the spec'} needs the key '{key}' ({f.description})", node.loc))
    return problems


def with_defaults(node: YNode | None, section: Section) -> dict[str, Any]:
    """The section's values as plain Python, with defaults filled in (after it validated); a section given as null
    is all defaults."""
    given = (node.to_plain() if node is not None else None) or {}
    ret = {k: given.get(k, None if f.required else f.default) for k, f in section.fields.items()}
    for k, f in section.fields.items():  # NOTE: a nested section that is given gets its own defaults too
        if f.section is not None and node is not None and isinstance(node.get(k), YNode) and node.get(k).kind == "map":
            ret[k] = with_defaults(node.get(k), f.section)
    return ret


# *** registries: a name -> its arguments (and, elsewhere, its code) ***


@dataclass(frozen=True)
class Entry:
    """A named choice (a layer, optimizer, schedule, loss, metric, dataset, export target) and its arguments.
    `shorthand` names the argument a bare scalar sets (`dropout: 0.1` is `dropout: {p: 0.1}`)."""

    name: str
    description: str
    args: Section
    shorthand: str | None = None
