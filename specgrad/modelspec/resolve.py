"""Resolve a spec before it is validated: merge it over the spec it `extends`, apply `--set` overrides, then replace
`$name` variables and arithmetic such as `4 * $d`. Every value keeps where it was written (its own file, a base file,
or an override's pseudo-file); nothing is evaluated as Python. Imports errors, files, loader and
schema.

Merging: mappings merge key by key, the child's value winning; a list or a scalar replaces the base's value whole.
A base must lie in the allowed folders (modelspec.files); a chain holds at most MAX_EXTENDS bases, and all its files
together at most the loader's MAX_BYTES, MAX_NODES and MAX_TEXT, as if they were one file.
Arithmetic: + - * / // % with parentheses and unary minus over numbers and $variables. Results of whole numbers stay
whole; `/` gives a whole number when it divides exactly (`$d / 2` with d = 64 is 64/2 = 32) and a float otherwise;
`//` and `%` round towards minus infinity, as in Python. Any float operand gives a float.
A string is an expression when it holds a `$name`; then all of it must be one. `$$` writes a literal `$`.
"""

from __future__ import annotations

import math
import operator
import os
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.files import named_file
from specgrad.modelspec.loader import MAX_BYTES, MAX_DEPTH, YNode, load_yaml, measure, parse_yaml, resolve_scalar
from specgrad.modelspec.schema import describe, did_you_mean

MAX_INT = 2**63 - 1  # NOTE: larger results are refused, so variables built from variables cannot grow without bound
MAX_PARENS = 32  # NOTE: bounds the parser's recursion
MAX_EXTENDS = 32  # NOTE: bases in one extends chain (each one a file to read and a merge)
MAX_EXPR = 256  # NOTE: characters of one expression: arithmetic over variables is a line, not a program
SET_HINT = "write --set key.path=value, e.g. --set train.lr=0.01 or --set model.1.linear.out=64"
EXPR_HINT = ("a value that uses a $variable holds only that variable, or arithmetic such as 4 * $d or ($a + 1) // 2 "
             "(numbers, $variables, + - * / // % and parentheses); write $$ for a $ in text")  # fmt: skip


def resolve(path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> YNode:
    """The spec at `path` merged over the specs it extends, with `overrides` applied, then its variables replaced."""
    file = os.fspath(path)
    root = _load_extended(file, (), _Chain(file))
    for text in overrides:
        _check_var_override(root, text)
        root = apply_override(root, text)
    return substitute_vars(root)


def _check_var_override(root: YNode, text: str) -> None:
    """--set vars.NAME=... must name a variable the spec uses ($NAME): a typo would otherwise change nothing."""
    key = text.partition("=")[0]
    parts = [p.strip() for p in key.split(".")]
    if len(parts) < 2 or parts[0] != "vars" or not _NAME.fullmatch(parts[1]):
        return
    vars_node = root.get("vars") if root.kind == "map" else None
    defined = list(vars_node.value) if vars_node is not None and vars_node.kind == "map" else []
    params = _block_params(root)
    if parts[1] in _variables_used(root, params):
        return
    loc = Location(f"--set {text}", 1, len(key) - len(key.lstrip()) + key.index(".") + 2)
    if parts[1] in defined:
        hint = ("a run folder's spec.resolved.yaml has its variables filled in: set the value itself (e.g. --set "
                "model.1.linear=64), or set the variable in the original spec")  # fmt: skip
        raise SpecError.at(loc, f"the variable '{parts[1]}' is used nowhere in the spec, so setting it would change "
                           "nothing", hint)  # fmt: skip
    known = f"its variables are {', '.join(defined)}" if defined else "it defines no variables under vars:"
    blocks = [b for b, names in params.items() if parts[1] in names]
    if blocks:
        known = (f"'{parts[1]}' is a parameter of block '{blocks[0]}', given where the block is used (with: "
                 f"{{{parts[1]}: ...}}); {known}")  # fmt: skip
    raise SpecError.at(loc, f"the spec has no variable '{parts[1]}', so setting it would change nothing",
                       did_you_mean(parts[1], defined) or known)  # fmt: skip


def _block_params(root: YNode) -> dict[str, set[str]]:
    """Each block's parameter names (a $name of a block's own parameter inside it reads the parameter, not vars)."""
    blocks = root.get("blocks") if root.kind == "map" else None
    if blocks is None or blocks.kind != "map":
        return {}
    ret = {}
    for name, block in blocks.value.items():
        listed = block.get("params") if block.kind == "map" else None
        ret[name] = {str(p.value) for p in listed.value} if listed is not None and listed.kind == "seq" else set()
    return ret


def _variables_used(root: YNode, params: dict[str, set[str]]) -> set[str]:
    """The $names that read a variable: all of them, but a block's own parameters inside that block."""
    if root.kind != "map":
        return _references(root)
    blocks = root.get("blocks")
    inside = {n for b, v in (blocks.value.items() if blocks is not None and blocks.kind == "map" else ())
              for n in _references(v) - params.get(b, set())}  # fmt: skip
    return inside | {name for k, v in root.value.items() if k != "blocks" for name in _references(v)}


def _references(node: YNode) -> set[str]:
    """Every $name written anywhere under `node`."""
    if node.kind == "map":
        return {name for v in node.value.values() for name in _references(v)}
    if node.kind == "seq":
        return {name for v in node.value for name in _references(v)}
    return {m.group(1) for m in _REF.finditer(node.value)} - {None} if isinstance(node.value, str) else set()


# ---- extends: a spec merged over its base, recursively


def merge(base: YNode, over: YNode) -> YNode:
    """`over` on top of `base`: mappings merge key by key; a list or a scalar in `over` replaces what `base` has."""
    if base.kind != "map" or over.kind != "map":
        return over
    value, key_locs = dict(base.value), dict(base.key_locs or {})
    for key, node in over.value.items():
        value[key] = merge(base.value[key], node) if key in base.value else node
        key_locs[key] = over.key_locs[key] if over.key_locs else node.loc
    return YNode(value, over.loc, "map", key_locs=key_locs)


@dataclass
class _Chain:
    """A spec and the bases it extends, as they are read: the spec the user gave (whose folder bounds the others), and
    the bytes, values and characters of text read so far, which the loader's limits bound in all."""

    top: str
    bytes: int = 0
    nodes: int = 0
    text: int = 0

    def load(self, file: str, ext: YNode | None) -> YNode:
        """One spec file of the chain; `ext` is the extends value that names it (None for the spec given)."""
        size = _size(file)
        if ext is not None and self.bytes + size > MAX_BYTES:
            raise SpecError.at(ext.loc, f"with {file}, the specs of this extends chain are {self.bytes + size:,} bytes "
                               f"in all, but a spec with its bases may be at most {MAX_BYTES:,} bytes",
                               "keep shared settings in one short base spec")  # fmt: skip
        root = load_yaml(file, counted=(self.nodes, self.text))
        nodes, text = measure(root)
        self.bytes, self.nodes, self.text = self.bytes + size, self.nodes + nodes, self.text + text
        return root


def _size(file: str) -> int:
    try:
        return os.stat(file).st_size
    except (OSError, ValueError):
        return 0  # NOTE: the loader says what is wrong with it


def _load_extended(file: str, chain: tuple[str, ...], specs: _Chain, ext: YNode | None = None) -> YNode:
    """`file` merged over the spec it extends; `chain` holds the files that extend it, outermost first."""
    root = specs.load(file, ext)
    ext = root.get("extends")
    if ext is None:
        return root
    if len(chain) >= MAX_EXTENDS:
        raise SpecError.at(ext.loc, f"extends goes more than {MAX_EXTENDS} specs deep (from {chain[0]})",
                           "a spec needs a base or two, not a long chain: merge some of them")  # fmt: skip
    base_file, chain = _base_file(file, ext, specs.top), (*chain, file)
    real = [os.path.realpath(f) for f in chain]
    if os.path.realpath(base_file) in real:
        cycle = (*chain[real.index(os.path.realpath(base_file)) :], base_file)
        raise SpecError.at(root.key_locs["extends"], f"extends makes a cycle: {' -> '.join(cycle)}",
                           "a spec cannot extend itself, directly or through other specs")  # fmt: skip
    child = YNode({k: v for k, v in root.value.items() if k != "extends"}, root.loc, "map",
                  key_locs={k: loc for k, loc in root.key_locs.items() if k != "extends"})  # fmt: skip
    return merge(_load_base(base_file, ext, chain, specs), child)


def _base_file(file: str, ext: YNode, top: str) -> str:
    """The path `extends` names, relative to the folder of the spec that names it; it must lie in the folders a spec
    may read from (those of `top`, the spec given), symbolic links resolved."""
    if ext.kind != "scalar" or not isinstance(ext.value, str) or not ext.value.strip():
        got = "nothing" if ext.value is None else describe(ext)
        raise SpecError.at(ext.loc, f"extends must name another spec file, got {got}",
                           "e.g. extends: base.yaml (relative to this spec's folder)")  # fmt: skip
    named_file(ext.value, file, top, ext.loc, "extends")
    return os.path.normpath(os.path.join(os.path.dirname(file), ext.value))


def _load_base(base_file: str, ext: YNode, chain: tuple[str, ...], specs: _Chain) -> YNode:
    """The base spec, resolved; a file that cannot be read is reported at the `extends` value."""
    try:
        base = _load_extended(base_file, chain, specs, ext)
    except SpecError as e:
        if all(p.loc is not None for p in e.problems):
            raise
        hint = "the path is relative to the folder of the spec that names it"
        raise SpecError([p if p.loc else Problem(f"extends: {p.message}", ext.loc, p.hint or (
            hint if p.message.startswith("no such file") else None)) for p in e.problems]) from None  # fmt: skip
    if base.kind != "map":
        raise SpecError.at(base.loc, f"{base_file} is extended by another spec, so it must hold 'key: value' lines, "
                                     f"got {describe(base)}")  # fmt: skip
    return base


# ---- --set key.path=value


def apply_override(root: YNode, text: str) -> YNode:
    """`root` with one `key.path=value` set: a key missing from a mapping is created, a list needs a valid index.

    What it sets is located in the pseudo-file '--set <text>', line 1, columns counted in `text` (1-based)."""
    file = f"--set {text}"
    key, eq, value = text.partition("=")
    if not eq:
        raise SpecError.at(Location(file, 1, 1), "this override has no '=' between the key and the value", SET_HINT)
    path = _key_path(key, file)
    return _set(root, path, 0, _override_value(value, len(key) + 2, file))


def _key_path(key: str, file: str) -> list[tuple[str, Location]]:
    """The dot-separated parts of `key`, each with where it starts."""
    parts, col = [], 1
    for part in key.split("."):
        name, loc = part.strip(), Location(file, 1, col + len(part) - len(part.lstrip()))
        if not name:
            said = "the key has an empty part between dots" if key.strip() else "this override has no key before '='"
            raise SpecError.at(loc, said, SET_HINT)
        parts.append((name, loc))
        col += len(part) + 1
    if parts[0][0] == "extends":
        raise SpecError.at(parts[0][1], "extends cannot be set with --set: it is read before overrides apply",
                           "edit extends in the spec file, or write a spec that extends this one")  # fmt: skip
    if len(parts) > MAX_DEPTH:
        raise SpecError.at(parts[MAX_DEPTH][1], f"the key has more than {MAX_DEPTH} parts", SET_HINT)
    return parts


def _override_value(text: str, col: int, file: str) -> YNode:
    """A YAML 1.2 plain scalar; text that starts with [ { or a quote is parsed as YAML: a flow list or map, or text."""
    value, col = text.strip(), col + len(text) - len(text.lstrip())
    if value[:1] in ("[", "{", '"', "'"):
        return parse_yaml(" " * (col - 1) + value, file)  # NOTE: the padding puts its locations at their column
    return YNode(resolve_scalar(value), Location(file, 1, col), "scalar", text=value)


def _set(node: YNode | None, path: list[tuple[str, Location]], i: int, value: YNode) -> YNode:
    """`node` with `value` put at path[i:]; missing or empty (null) values on the way become mappings."""
    if i == len(path):
        return value
    key, loc = path[i]
    if node is None or (node.kind == "scalar" and node.value is None):
        return YNode({key: _set(None, path, i + 1, value)}, loc, "map", key_locs={key: loc})
    if node.kind == "map":
        key_locs = {**(node.key_locs or {}), key: (node.key_locs or {}).get(key, loc)}
        return YNode({**node.value, key: _set(node.value.get(key), path, i + 1, value)}, node.loc, "map",
                     key_locs=key_locs)  # fmt: skip
    where = ".".join(k for k, _ in path[:i]) or "the spec"
    if node.kind == "seq":
        items = list(node.value)
        index = _index(len(items), key, where, loc)
        items[index] = _set(items[index], path, i + 1, value)
        return YNode(items, node.loc, "seq")
    raise SpecError.at(loc, f"{where} is {describe(node)}, not a mapping or a list, so it has no '{key}'", SET_HINT)


def _index(n: int, key: str, where: str, loc: Location) -> int:
    """`key` as an index into a list of `n` items."""
    if re.fullmatch(r"[0-9]{1,9}", key) and int(key) < n:
        return int(key)
    hint = f"items are counted from 0: use 0 to {n - 1}" if n else f"{where} is empty"
    if not re.fullmatch(r"[0-9]+", key):
        raise SpecError.at(loc, f"{where} is a list, so '{key}' must be an item number", hint)
    raise SpecError.at(loc, f"{where} has {n} item{'' if n == 1 else 's'}, so there is no item {key}", hint)


# ---- vars: $name and arithmetic over variables and numbers

_REF = re.compile(r"\$\$|\$([A-Za-z_][A-Za-z0-9_]*)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def substitute_vars(root: YNode) -> YNode:
    """`root` with each $name and each arithmetic over variables replaced; `vars` keeps the variables' values."""
    vars_node = root.get("vars")
    values = _evaluate_vars(_var_defs(vars_node))
    problems: list[Problem] = []
    if root.kind == "map":
        # NOTE: block bodies keep their $names: they are filled in when a block is used, with its parameters
        items = {k: _resolved_vars(v, values) if k == "vars" else v if k == "blocks" else
                 _substitute(v, values, problems) for k, v in root.value.items()}  # fmt: skip
        root = YNode(items, root.loc, "map", key_locs=root.key_locs)
    else:
        root = _substitute(root, values, problems)
    if problems:
        raise SpecError(problems)
    return root


def substitute_in(node: YNode, values: dict[str, YNode]) -> YNode:
    """`node` with its $names and arithmetic evaluated from `values` (a block's body, with its parameters)."""
    problems: list[Problem] = []
    ret = _substitute(node, values, problems)
    if problems:
        raise SpecError(problems)
    return ret


def _var_defs(node: YNode | None) -> dict[str, YNode]:
    """The variables as written, checked: names usable as $name, values a number, text or true/false."""
    if node is None or (node.kind == "scalar" and node.value is None):
        return {}
    if node.kind != "map":
        raise SpecError.at(node.loc, f"vars must be a mapping of names to values, got {describe(node)}",
                           "e.g. vars: {d: 64, heads: 4}")  # fmt: skip
    key_locs = node.key_locs or {}
    problems = [Problem(f"variable name '{k}' cannot be written as ${k}", key_locs.get(k, v.loc),
                        "use letters, digits and '_', starting with a letter or '_'")
                for k, v in node.value.items() if not _NAME.fullmatch(k)]  # fmt: skip
    problems += [Problem(f"vars.{k} must be a number, text or true/false, got {describe(v)}", v.loc)
                 for k, v in node.value.items() if v.kind != "scalar"]  # fmt: skip
    if problems:
        raise SpecError(problems)
    return dict(node.value)


def _evaluate_vars(defs: dict[str, YNode]) -> dict[str, YNode]:
    """Each variable's value, computed after the variables it uses; one problem per variable that fails."""
    values: dict[str, YNode] = {}
    failed: set[str] = set()
    problems: list[Problem] = []
    for name in _dependency_order(defs):
        if any(ref in failed for ref, _ in _refs(defs[name])):
            failed.add(name)  # NOTE: already reported where the variable it uses is defined
            continue
        try:
            values[name] = _evaluate(defs[name], values, defs)
        except SpecError as e:
            problems += e.problems
            failed.add(name)
    if problems:
        raise SpecError(problems)
    return values


def _dependency_order(defs: dict[str, YNode]) -> list[str]:
    """Variable names, each after the ones it uses; a cycle is an error at the reference that closes it."""
    order: list[str] = []
    state: dict[str, str] = {}  # name -> "open" while its uses are visited, then "done"
    problems: list[Problem] = []
    for start in defs:
        if start in state:
            continue
        state[start], stack = "open", [(start, iter(_refs(defs[start])))]
        while stack:
            ref = next(stack[-1][1], None)
            if ref is None:
                name = stack.pop()[0]
                state[name] = "done"
                order.append(name)
            elif ref[0] in defs and state.get(ref[0]) == "open":
                problems.append(_cycle([name for name, _ in stack], ref))
            elif ref[0] in defs and ref[0] not in state:
                state[ref[0]] = "open"
                stack.append((ref[0], iter(_refs(defs[ref[0]]))))
    if problems:
        raise SpecError(problems)
    return order


def _cycle(path: list[str], ref: tuple[str, Location]) -> Problem:
    chain = " -> ".join(f"${n}" for n in (*path[path.index(ref[0]) :], ref[0]))
    return Problem(f"${ref[0]} is defined through itself: {chain}", ref[1],
                   "a variable cannot use itself, directly or through other variables")  # fmt: skip


def _refs(node: YNode) -> list[tuple[str, Location]]:
    """The $names a scalar uses ($$ is an escaped $, not a reference), each with where it is written."""
    if node.kind != "scalar" or not isinstance(node.value, str):
        return []
    return [(m.group(1), _loc_in(node, m.start())) for m in _REF.finditer(node.value) if m.group(1)]


def _loc_in(node: YNode, offset: int) -> Location:
    """Where character `offset` of a one-line scalar is written; a scalar's own location when it spans lines."""
    if node.text is None or "\n" in node.text:
        return node.loc
    return Location(node.loc.file, node.loc.line, node.loc.col + offset + int(node.quoted))


def _resolved_vars(node: YNode, values: dict[str, YNode]) -> YNode:
    if node.kind != "map":
        return node
    return YNode({k: values[k] for k in node.value}, node.loc, "map", key_locs=node.key_locs)


def _substitute(node: YNode, values: dict[str, YNode], problems: list[Problem],
                done: dict[tuple[Location, str], YNode] | None = None) -> YNode:  # fmt: skip
    """A tree with every scalar evaluated; problems are collected, so one run reports all of them. `done` holds the
    expressions evaluated so far by where they are written: an alias's copies are evaluated (and reported) once."""
    done = {} if done is None else done
    if node.kind == "map":
        items = {k: _substitute(v, values, problems, done) for k, v in node.value.items()}
        return YNode(items, node.loc, "map", key_locs=node.key_locs)
    if node.kind == "seq":
        return YNode([_substitute(v, values, problems, done) for v in node.value], node.loc, "seq")
    if not isinstance(node.value, str) or "$" not in node.value:
        return node
    if (key := (node.loc, node.value)) in done:
        return done[key]
    try:
        done[key] = _evaluate(node, values, values)
    except SpecError as e:
        problems += e.problems
        done[key] = node
    return done[key]


def _evaluate(node: YNode, values: dict[str, YNode], known: Collection[str]) -> YNode:
    """A scalar with its variables replaced, at the same location; `known` names the variables for did-you-mean."""
    text = node.value
    if node.kind != "scalar" or not isinstance(text, str) or "$" not in text:
        return node
    if not _refs(node):
        plain = text.replace("$$", "$")
        return YNode(plain, node.loc, "scalar", text=plain, quoted=node.quoted) if plain != text else node
    if len(text) > MAX_EXPR:
        raise SpecError.at(node.loc, f"this expression is {len(text):,} characters long, over the {MAX_EXPR} an "
                           f"expression may have: '{excerpt(text)}'", EXPR_HINT)  # fmt: skip
    ret = _Parser(node, values, known).parse()
    if ret.var is not None:  # NOTE: just a $name: the variable's value, of any type, as it was written
        return YNode(ret.var.value, node.loc, "scalar", text=ret.var.text, quoted=ret.var.quoted)
    return YNode(ret.value, node.loc, "scalar", text=str(ret.value) if isinstance(ret.value, int) else repr(ret.value))


# ---- the arithmetic: tokens, then a recursive-descent parser that computes as it goes


class _Token(NamedTuple):
    kind: str  # num, var, op or end
    text: str
    value: int | float | None
    loc: Location


class _Operand(NamedTuple):
    value: Any
    token: _Token  # where the operand starts
    var: YNode | None  # the variable's node when the operand is just a $name


_TOKEN = re.compile(r"(?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)|(?P<var>\$[A-Za-z_][A-Za-z0-9_]*)"
                    r"|(?P<op>//|[-+*/%()])")  # fmt: skip
_SPACE = re.compile(r"\s*")


def _divide(a: int | float, b: int | float) -> int | float:
    return a // b if isinstance(a, int) and isinstance(b, int) and a % b == 0 else a / b


_OPS: dict[str, Callable[[Any, Any], Any]] = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _divide,
                                              "//": operator.floordiv, "%": operator.mod}  # fmt: skip


def _checked(value: int | float, loc: Location, expr: str) -> int | float:
    """`value`, if it is a number of a usable size."""
    if isinstance(value, float) and math.isnan(value):
        raise SpecError.at(loc, f"'{expr}' does not give a number (NaN)", EXPR_HINT)
    if abs(value) > MAX_INT:
        raise SpecError.at(loc, f"'{expr}' gives a number too large to use (over {MAX_INT:,})")
    return value


def _number(digits: str, loc: Location, expr: str) -> int | float:
    """A number token's value: whole when written without '.' or an exponent."""
    return _checked(int(digits) if digits.isdigit() and len(digits) < 20 else float(digits), loc, expr)


def _what(value: Any) -> str:
    if value is None:
        return "empty (null)"
    return str(value).lower() if isinstance(value, bool) else f"text ('{value}')"


def _tokenize(node: YNode) -> list[_Token]:
    """The tokens of a scalar's text, ending with an 'end' token; anything else is an error at it."""
    text, tokens, pos = node.value, [], _SPACE.match(node.value).end()
    while pos < len(text):
        m, loc = _TOKEN.match(text, pos), _loc_in(node, pos)
        if m is None:
            bad = re.match(r"\$?\w+|\S", text[pos:]).group()
            raise SpecError.at(loc, f"cannot read '{text}': '{bad}' is not a number, a $variable or an operator",
                               EXPR_HINT)  # fmt: skip
        num = _number(m.group(), loc, text) if m.lastgroup == "num" else None
        tokens.append(_Token(m.lastgroup or "op", m.group(), num, loc))
        pos = _SPACE.match(text, m.end()).end()
    return [*tokens, _Token("end", "", None, _loc_in(node, len(text)))]


class _Parser:
    """expr := term (('+' | '-') term)*;  term := unary (('*' | '/' | '//' | '%') unary)*;
    unary := ('-' | '+')* atom;  atom := number | $name | '(' expr ')'."""

    def __init__(self, node: YNode, values: dict[str, YNode], known: Collection[str]) -> None:
        self.text, self.values, self.known = node.value, values, known
        self.tokens, self.i, self.depth = _tokenize(node), 0, 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def next(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += tok.kind != "end"
        return tok

    def parse(self) -> _Operand:
        ret = self.expr()
        if (tok := self.peek()).kind != "end":
            raise self.error(tok, f"'{tok.text}' comes after a complete expression")
        return ret

    def expr(self) -> _Operand:
        return self.binary(self.term, ("+", "-"))

    def term(self) -> _Operand:
        return self.binary(self.unary, ("*", "/", "//", "%"))

    def binary(self, operand: Callable[[], _Operand], ops: tuple[str, ...]) -> _Operand:
        left = operand()
        while self.peek().kind == "op" and self.peek().text in ops:
            op = self.next()
            left = _Operand(self.apply(op, left, operand()), left.token, None)
        return left

    def unary(self) -> _Operand:
        signs = []
        while self.peek().kind == "op" and self.peek().text in ("-", "+"):
            signs.append(self.next())
        ret = self.atom()
        for sign in reversed(signs):
            value = self.number(ret)
            ret = _Operand(_checked(-value if sign.text == "-" else value, sign.loc, self.text), sign, None)
        return ret

    def atom(self) -> _Operand:
        tok = self.next()
        if tok.kind == "num":
            return _Operand(tok.value, tok, None)
        if tok.kind == "var":
            var = self.lookup(tok)
            return _Operand(var.value, tok, var)
        if tok.text == "(":
            return self.parenthesized(tok)
        found = "the end" if tok.kind == "end" else f"'{tok.text}'"
        raise self.error(tok, f"expected a number, a $variable or '(' but found {found}")

    def parenthesized(self, opening: _Token) -> _Operand:
        self.depth += 1
        if self.depth > MAX_PARENS:
            raise self.error(opening, f"more than {MAX_PARENS} parentheses inside each other")
        ret = self.expr()
        if (close := self.next()).text != ")":
            raise self.error(opening if close.kind == "end" else close,
                             "this '(' is never closed" if close.kind == "end" else
                             f"'{close.text}' comes where an operator or ')' is expected")  # fmt: skip
        self.depth -= 1
        return ret

    def lookup(self, tok: _Token) -> YNode:
        name = tok.text[1:]
        if name in self.values:
            return self.values[name]
        names = [f"${k}" for k in self.known]
        hint = did_you_mean(tok.text, names) or (f"define it under vars (defined: {', '.join(names)})" if names else
                                                 f"define it at the top level, e.g. vars: {{{name}: 64}}")  # fmt: skip
        raise SpecError.at(tok.loc, f"unknown variable {tok.text}", hint)

    def number(self, x: _Operand) -> int | float:
        if isinstance(x.value, (int, float)) and not isinstance(x.value, bool):
            return x.value
        where = f"; it is set at {x.var.loc}" if x.var is not None else ""
        raise SpecError.at(x.token.loc, f"{x.token.text} is {_what(x.value)}, not a number, so it cannot be used in "
                                        f"arithmetic", f"use a variable that holds a number{where}")  # fmt: skip

    def apply(self, op: _Token, left: _Operand, right: _Operand) -> int | float:
        a, b = self.number(left), self.number(right)
        if op.text in ("/", "//", "%") and b == 0:
            said = f": {right.token.text} is 0" if right.var is not None else ""
            raise SpecError.at(op.loc, f"division by zero in '{self.text}'{said}")
        return _checked(_OPS[op.text](a, b), op.loc, self.text)

    def error(self, tok: _Token, what: str) -> SpecError:
        return SpecError.at(tok.loc, f"cannot read '{self.text}': {what}", EXPR_HINT)
