"""The spec's JSON Schema, generated from the same definitions the validator uses (`specgrad schema` prints it;
editors use it for completion and hover help). Imports modelspec.schema, modelspec.layers and modelspec.validate.
"""

from __future__ import annotations

from typing import Any

from specgrad.modelspec.layers import LAYERS
from specgrad.modelspec.schema import Field, Section
from specgrad.modelspec.validate import TOP

SCHEMA_ID = "urn:specgrad:spec:1"
_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "list": "array", "map": "object"}


def field_schema(f: Field) -> dict[str, Any]:
    ret: dict[str, Any] = {"description": f.description}
    if f.kind in _TYPES:
        ret["type"] = _TYPES[f.kind]
    if not f.required and f.default is not None:
        ret["default"] = f.default
    if f.min is not None:
        ret["minimum"] = f.min
    if f.max is not None:
        ret["maximum"] = f.max
    if f.choices is not None:
        ret["enum"] = list(f.choices)
    if f.item is not None:
        ret["items"] = field_schema(f.item)
    if f.section is not None:
        ret.update(section_schema(f.section))
    alternatives = [ret]
    if f.kind in ("int", "float", "bool"):  # NOTE: a value may be a variable or arithmetic over them: "4 * $d"
        alternatives.append({"type": "string", "pattern": "\\$"})
    if f.default is None and f.kind in _TYPES:  # NOTE: null sets an optional value back to none
        alternatives.append({"type": "null"})
    return ret if len(alternatives) == 1 else {"description": f.description, "anyOf": alternatives}


def section_schema(section: Section) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False,
            "properties": {k: field_schema(f) for k, f in section.fields.items()},
            "required": [k for k, f in section.fields.items() if f.required]}  # fmt: skip


def layer_schema() -> dict[str, Any]:
    """A model entry: a bare layer name, or {name: arguments} (or {name: shorthand value})."""
    bare = [name for name, d in LAYERS.items() if not any(f.required for f in d.entry.args.fields.values())]
    options: list[dict[str, Any]] = [{"type": "string", "enum": bare}]
    for name, d in LAYERS.items():
        args = section_schema(d.entry.args)
        value: dict[str, Any] = args if d.entry.shorthand is None else {
            "anyOf": [args, field_schema(d.entry.args.fields[d.entry.shorthand])]}  # fmt: skip
        if name in bare:
            value = {"anyOf": [value, {"type": "null"}]}
        options.append({"type": "object", "description": d.entry.description, "additionalProperties": False,
                        "minProperties": 1, "maxProperties": 1, "properties": {name: value}})  # fmt: skip
    return {"anyOf": options}


def spec_json_schema() -> dict[str, Any]:
    ret = section_schema(TOP)
    ret["properties"]["model"] = {"description": TOP.fields["model"].description,
                                  "anyOf": [{"type": "array", "minItems": 1, "items": layer_schema()},
                                            {"type": "object"}]}  # fmt: skip
    # NOTE: a spec that extends another may leave every key but the version to its base
    required = ret.pop("required")
    ret["if"], ret["then"], ret["else"] = {"required": ["extends"]}, {"required": ["specgrad"]}, {"required": required}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, "title": "specgrad spec",
            "description": TOP.description, **ret}  # fmt: skip
