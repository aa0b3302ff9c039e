"""The spec's JSON Schema, generated from the same definitions the validator uses (`specgrad schema` prints it;
editors use it for completion and hover help): TOP and its sections, the layers, the graph's nodes, ops and blocks.
Imports modelspec.schema, modelspec.layers, modelspec.graph and modelspec.validate.

The schema accepts a spec exactly when the validator's stages before shape inference do, except for what JSON Schema
cannot say: names that refer to other names (a node's `from:`, `outputs`, `block:` naming a block, `with:` keys
against the block's `params`, node names unique in a graph), $variables (that each is defined, what its value and
arithmetic give), the files data.path names, and which layer's `out` may be `auto` (the one that sets the output's
width: any layer's `out` is accepted as auto here). A value written with $ (in a block's graph, or anywhere before
vars are filled in) is accepted wherever a value goes, and a node whose layer, op or block is a $name is checked only
for its name and from.
"""

from __future__ import annotations

from typing import Any

from specgrad.modelspec.auto import AUTO
from specgrad.modelspec.graph import BLOCK, MAX_NAME, NAME, NODE_KEYS, REPEAT
from specgrad.modelspec.layers import LAYERS
from specgrad.modelspec.ops import OPS
from specgrad.modelspec.schema import Field, Section
from specgrad.modelspec.validate import GRAPH_MODEL, INPUT, LOSS, SOURCE_NEEDS, TOP
from specgrad.modelspec.validate import MAX_NAME as MAX_SPEC_NAME

SCHEMA_ID = "urn:specgrad:spec:1"
_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "list": "array", "map": "object"}
DOLLAR = {"type": "string", "pattern": "\\$"}  # NOTE: a $variable or arithmetic over them: "4 * $d"
# NOTE: Python's `$` also matches before a final newline; `(?!\n)` makes it the end, in Python and in editors alike
NODE_NAME = {"type": "string", "pattern": f"^{NAME.pattern}$(?!\\n)", "maxLength": MAX_NAME}
SPEC_NAME = {"type": "string", "pattern": "^\\w[\\w.-]*$(?!\\n)", "maxLength": MAX_SPEC_NAME}
VAR_NAME = {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$(?!\\n)"}
REF = {"layer": {"$ref": "#/$defs/layer"}, "node": {"$ref": "#/$defs/node"}}
AUTO_VALUE = {"const": AUTO, "description": "taken from the data (csv and npz sources)"}


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
    if f.kind in ("int", "float", "bool") or f.choices is not None:
        alternatives.append(DOLLAR)
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
    options: list[dict[str, Any]] = [{"type": "string", "enum": bare}, DOLLAR]
    for name, d in LAYERS.items():
        args, short = _auto_out(section_schema(d.entry.args)), d.entry.shorthand
        value: dict[str, Any] = args if short is None else {
            "anyOf": [args, _or_auto(field_schema(d.entry.args.fields[short]), short)]}  # fmt: skip
        if name in bare:
            value = {"anyOf": [value, {"type": "null"}]}
        options.append({"type": "object", "description": d.entry.description, "additionalProperties": False,
                        "minProperties": 1, "maxProperties": 1, "properties": {name: value}})  # fmt: skip
    return {"anyOf": options}


def node_schema() -> dict[str, Any]:
    """A graph node: name, from, and one of layer (with that layer's arguments), op (with its arguments) or block
    (with repeat and with)."""
    common = {
        "name": {"description": "the node's name, for from: and outputs", "anyOf": [NODE_NAME, DOLLAR]},
        "from": {
            "description": "the input or node it takes, or a list of them",
            "anyOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"type": "string"}}],
        },
    }
    options = [_node(common, "layer", name, d.entry.description, d.entry.args) for name, d in LAYERS.items()]
    options += [_node(common, "op", name, op.section.description, op.section) for name, op in OPS.items()]
    with_ = {"description": "values of the block's params", "anyOf": [{"type": "object"}, DOLLAR]}
    block = {"repeat": field_schema(REPEAT.fields["repeat"]), "with": with_}
    options.append(_node(common, "block", None, "copies of a block's graph, one after another", Section("", ""), block))
    unknown = {"type": "object", "description": "a node whose kind is a $name: checked once it is filled in",
               "properties": common, "required": ["name", "from"],
               "anyOf": [{"properties": {k: DOLLAR}, "required": [k]} for k in ("layer", "op", "block")]}  # fmt: skip
    return {"anyOf": [*options, unknown, DOLLAR]}


def _node(common: dict, kind: str, what: str | None, description: str, args: Section, more: dict | None = None
          ) -> dict[str, Any]:  # fmt: skip
    section = _auto_out(section_schema(args))
    value = {"const": what} if what is not None else {"type": "string"}
    props = {**common, kind: {"description": f"the {kind}", "anyOf": [value, DOLLAR]}, **(more or {}),
             **{k: v for k, v in section["properties"].items() if k not in NODE_KEYS}}  # fmt: skip
    return {"type": "object", "description": description, "additionalProperties": False, "properties": props,
            "required": ["name", "from", kind, *section["required"]]}  # fmt: skip


def _auto_out(section: dict[str, Any]) -> dict[str, Any]:
    """A layer's arguments with `out: auto` allowed."""
    if "out" in section["properties"]:
        section["properties"]["out"] = _or_auto(section["properties"]["out"], "out")
    return section


def _or_auto(schema: dict[str, Any], key: str) -> dict[str, Any]:
    """`schema`, or `auto` when it is a width the data can give (out, input.shape)."""
    if key not in ("out", "shape"):
        return schema
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], AUTO_VALUE]}
    return {"description": schema.get("description", ""), "anyOf": [schema, AUTO_VALUE]}


def graph_schema(description: str, contains_out: bool) -> dict[str, Any]:
    ret: dict[str, Any] = {"type": "array", "description": description, "items": REF["node"]}
    if contains_out:  # NOTE: a block's output is its node named out
        ret["contains"] = {"type": "object", "required": ["name"],
                           "properties": {"name": {"anyOf": [{"const": "out"}, DOLLAR]}}}  # fmt: skip
    return ret


def model_schema() -> dict[str, Any]:
    graph = section_schema(GRAPH_MODEL)
    graph["properties"]["graph"] = graph_schema(GRAPH_MODEL.fields["graph"].description, False)
    sequential = {"type": "array", "description": "layers applied in order", "minItems": 1, "items": REF["layer"]}
    return {"description": TOP.fields["model"].description, "anyOf": [sequential, graph]}


def blocks_schema() -> dict[str, Any]:
    block = section_schema(BLOCK)
    block["description"] = BLOCK.description
    block["properties"]["graph"] = graph_schema(BLOCK.fields["graph"].description, True)
    return {"type": "object", "description": TOP.fields["blocks"].description, "default": {},
            "additionalProperties": block}  # fmt: skip


def inputs_schema() -> dict[str, Any]:
    named = {"type": "object", "propertyNames": NODE_NAME, "additionalProperties": section_schema(INPUT)}
    return {"description": TOP.fields["inputs"].description, "anyOf": [named, {"type": "null"}]}


def vars_schema() -> dict[str, Any]:
    return {"type": "object", "description": TOP.fields["vars"].description, "default": {}, "propertyNames": VAR_NAME,
            "additionalProperties": {"type": ["string", "number", "boolean", "null"]}}  # fmt: skip


def data_rules() -> list[dict[str, Any]]:
    """The keys each data source needs, given and not null (a tuple of keys: one of them)."""
    return [{"if": {"properties": {"source": {"const": source}}, "required": ["source"]},
             "then": {"allOf": [{"anyOf": [_given(k) for k in (need if isinstance(need, tuple) else (need,))]}
                                for need in needs]}} for source, needs in SOURCE_NEEDS.items()]  # fmt: skip


def _given(key: str) -> dict[str, Any]:
    return {"required": [key], "properties": {key: {"not": {"type": "null"}}}}


def spec_json_schema() -> dict[str, Any]:
    ret = section_schema(TOP)
    props = ret["properties"]
    props["name"] = {"description": TOP.fields["name"].description, "anyOf": [SPEC_NAME, DOLLAR]}
    props["vars"], props["inputs"], props["blocks"] = vars_schema(), inputs_schema(), blocks_schema()
    props["model"] = model_schema()
    init = props["init"]  # NOTE: init: PATH is init: {from: PATH}
    init["anyOf"].insert(1, {"type": "string", "description": "a run folder or weights file: init: {from: PATH}"})
    single = props["input"]["anyOf"][0]["properties"]
    single["shape"] = _or_auto(single["shape"], "shape")
    data = props["data"]["anyOf"][0]
    data["allOf"] = data_rules()
    data["properties"]["features"]["anyOf"][0]["uniqueItems"] = True
    losses = props["train"]["anyOf"][0]["properties"]["losses"]["anyOf"][0]
    losses["additionalProperties"] = section_schema(LOSS)  # NOTE: which names are outputs is the validator's check
    # NOTE: early stopping, and best weights by name, need validation examples
    split_0 = {"type": "object", "required": ["valid_split"], "properties": {"valid_split": {"const": 0}}}
    no_validation = {"properties": {"data": split_0}, "required": ["data"]}
    train = {"properties": {"early_stopping": {"not": {"type": "object"}}, "final_weights": {"not": {"const": "best"}}}}
    needs_validation = {"properties": {"train": train}}
    one_input = {"oneOf": [{"required": ["input"]}, {"required": ["inputs"]}]}
    list_model = {"if": {"required": ["model", "inputs"]},
                  "then": {"properties": {"model": {"not": {"type": "array"}}}}}  # fmt: skip
    # NOTE: a spec that extends another may leave every key but the version to its base
    required = ret.pop("required")
    extends = {"if": {"required": ["extends"]}, "then": {"required": ["specgrad"]},
               "else": {"required": required, **one_input}}  # fmt: skip
    ret["allOf"] = [extends, list_model, {"if": no_validation, "then": needs_validation}]
    defs = {"layer": layer_schema(), "node": node_schema()}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, "title": "specgrad spec",
            "description": TOP.description, **ret, "$defs": defs}  # fmt: skip
