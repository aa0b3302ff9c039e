"""Widths left to the data: `input.shape: auto` and `out: auto` on the layer that sets the output's width. The spec
tree gets placeholders while its other keys are checked, then the numbers the data gives (train.data.data_widths),
written where `auto` was, so the validated spec (and a run folder's spec.resolved.yaml) holds numbers only.

Imports modelspec (errors, layers, loader).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from specgrad.modelspec.errors import Location, Problem
from specgrad.modelspec.layers import LAYERS
from specgrad.modelspec.loader import YNode

AUTO = "auto"


@dataclass(frozen=True)
class Auto:
    """One `auto` in a spec: the input's shape ("shape"), a layer's out ("out") or a named input's shape ("inputs",
    a problem), and where it is written."""

    what: str
    loc: Location
    path: tuple[Any, ...]  # keys and list positions from the spec's root to the value


@dataclass(frozen=True)
class DataWidths:
    """What the data gives the autos: the input's shape, the output's width, the data keys that chose the inputs
    (written into the resolved spec, so a run never infers them again) and, per auto, how it came about (for
    validate)."""

    shape: tuple[int, ...]
    out: int
    data: dict[str, Any] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)  # "shape"/"out" -> e.g. "13 numeric columns (...)"


def is_auto(node: YNode | None) -> bool:
    return node is not None and node.kind == "scalar" and node.value == AUTO


def find_autos(root: YNode) -> tuple[list[Auto], list[Problem]]:
    """Every `auto` the spec may hold: input.shape, and the out of a layer of a list of layers or a graph node;
    `auto` as an input of a graph with several (inputs.<name>.shape) is a problem."""
    autos, problems = [], []
    one = root.get("input")
    if one is not None and is_auto(one.get("shape")):
        autos.append(Auto("shape", one.get("shape").loc, ("input", "shape")))
    named = root.get("inputs")
    for k, v in named.value.items() if named is not None and named.kind == "map" else ():
        if v.kind == "map" and is_auto(v.get("shape")):  # NOTE: a placeholder too: one problem, not a type error
            autos.append(Auto("inputs", v.get("shape").loc, ("inputs", k, "shape")))
            problems.append(Problem(f"inputs.{k}.shape is auto, which is for a model with one input (input:)",
                                    v.get("shape").loc, "write each input's shape, e.g. shape: [13]"))  # fmt: skip
    model = root.get("model")
    if model is not None and model.kind == "seq":
        for i, item in enumerate(model.value):
            if item.kind == "map" and len(item.value) == 1:
                name, args = next(iter(item.value.items()))
                if name in LAYERS and is_auto(args) and LAYERS[name].entry.shorthand == "out":
                    autos.append(Auto("out", args.loc, ("model", i, name)))
                elif name in LAYERS and args is not None and args.kind == "map" and is_auto(args.get("out")):
                    autos.append(Auto("out", args.get("out").loc, ("model", i, name, "out")))
    graph = model.get("graph") if model is not None and model.kind == "map" else None
    for i, item in enumerate(graph.value if graph is not None and graph.kind == "seq" else ()):
        if item.kind == "map" and "layer" in item.value and is_auto(item.get("out")):
            autos.append(Auto("out", item.get("out").loc, ("model", "graph", i, "out")))
    return autos, problems


def placeheld(root: YNode, autos: list[Auto]) -> YNode:
    """The spec with each auto a placeholder (a shape [1], out 1), so its other keys are checked as written."""
    return with_values(root, {a.path: 1 if a.what == "out" else [1] for a in autos})


def with_widths(root: YNode, autos: list[Auto], got: DataWidths) -> YNode:
    """The spec with each auto the data's number, and the data keys the data chose."""
    ret = with_values(root, {a.path: list(got.shape) if a.what == "shape" else got.out for a in autos})
    data = ret.get("data")
    if got.data and data is not None and data.kind == "map":
        loc = next(a.loc for a in autos if a.what == "shape")  # NOTE: what input.shape: auto chose is said there
        added = {k: _node(v, loc) for k, v in got.data.items()}
        data = replace(data, value={**data.value, **added}, key_locs={**(data.key_locs or {}), **dict.fromkeys(
            added, loc)})  # fmt: skip
        ret = replace(ret, value={**ret.value, "data": data})
    return ret


def with_values(node: YNode, values: dict[tuple[Any, ...], Any]) -> YNode:
    """`node` with the value at each path replaced (a new tree: nodes are shared with the old one elsewhere)."""
    if () in values:
        return _node(values[()], node.loc)
    heads = {p[0] for p in values}
    if node.kind == "seq":
        items = list(node.value)
        for i in heads:
            items[i] = with_values(items[i], {p[1:]: v for p, v in values.items() if p[0] == i})
        return replace(node, value=items)
    children = dict(node.value)
    for k in heads:
        children[k] = with_values(children[k], {p[1:]: v for p, v in values.items() if p[0] == k})
    return replace(node, value=children)


def _node(value: Any, loc: Location) -> YNode:
    """A plain value as a located node (every part of it at `loc`)."""
    if isinstance(value, dict):
        return YNode({k: _node(v, loc) for k, v in value.items()}, loc, "map", key_locs=dict.fromkeys(value, loc))
    if isinstance(value, (list, tuple)):
        return YNode([_node(v, loc) for v in value], loc, "seq")
    return YNode(value, loc, "scalar", text=str(value))


def width_setter(nodes: list[Any], outputs: tuple[str, ...]) -> str | None:
    """The node that sets the width of the model's one output: the output node, or the last node before it with an
    `out` when layers without one (activations) follow it; None for a model with several outputs."""
    if len(outputs) > 1 or not nodes:
        return None
    by_name = {n.name: n for n in nodes}
    node, seen = by_name.get(outputs[0] if outputs else nodes[-1].name), set()
    while node is not None and "out" not in node.args and len(node.srcs) == 1 and node.srcs[0][0] in by_name:
        if node.name in seen:  # NOTE: a node taking its own name (an error reported elsewhere) is no chain
            return None
        seen.add(node.name)
        node = by_name[node.srcs[0][0]]
    return node.name if node is not None and "out" in node.args else None


def misplaced(autos: list[Auto], nodes: list[Any], outputs: tuple[str, ...], inputs: int) -> list[Problem]:
    """An out: auto must set the width of the model's only output, in a model with one input."""
    setter, problems = width_setter(nodes, outputs), []
    at = {n.loc.line: n.name for n in nodes}
    for a in (a for a in autos if a.what == "out"):
        if inputs != 1 or len(outputs) > 1:
            problems.append(Problem("out: auto is for a model with one input and one output", a.loc,
                                    "write the width of each output layer"))  # fmt: skip
        elif setter is None or _node_name(a, nodes) != setter:
            problems.append(Problem(f"out: auto takes the width of the model's output from the data, but this layer "
                                    f"({at.get(a.loc.line, 'here')}) does not set it", a.loc,
                                    "write its width: auto is for the last layer with an out"))  # fmt: skip
    return problems


def _node_name(a: Auto, nodes: list[Any]) -> str | None:
    """The node an `out: auto` belongs to: model[i] is node str(i), model.graph[i] the i-th graph node."""
    i = a.path[1] if a.path[1] != "graph" else a.path[2]
    if a.path[1] != "graph":
        return str(i)
    return nodes[i].name if i < len(nodes) else None


def unresolved(autos: list[Auto]) -> list[Problem]:
    """Autos where the data is not read (a spec file given to run or export, or a check of a spec's shape only)."""
    hint = ("give the run folder instead of the spec file: its spec.resolved.yaml holds the numbers training took "
            "from the data; or write the number")  # fmt: skip
    what = {"shape": "input.shape is auto: the input's width comes from the data",
            "out": "out is auto: the output's width (classes, or 1 value) comes from the data"}  # fmt: skip
    return [Problem(f"{what[a.what]}, which is not read here", a.loc, hint) for a in autos]
