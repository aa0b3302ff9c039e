"""Models as graphs: named nodes that take their inputs `from:` the spec's inputs or nodes above them, reusable
blocks expanded `repeat` times, and static shape inference through the whole graph. A sequential layer list is
the graph in which each layer takes the one before it. Once blocks are expanded a model has at most MAX_STEPS layers
and ops.

Imports modelspec (errors, layers, loader, ops, resolve, schema).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from specgrad.helpers import prod
from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.layers import LAYERS, Shape, ShapeMismatch
from specgrad.modelspec.layers.base import words
from specgrad.modelspec.loader import YNode
from specgrad.modelspec.ops import OPS
from specgrad.modelspec.resolve import substitute_in
from specgrad.modelspec.schema import (
    REQUIRED,
    Field,
    Section,
    check_section,
    describe,
    did_you_mean,
    unknown_key_hint,
    with_defaults,
)

NODE_KEYS = ("name", "from", "layer", "op", "block", "repeat", "with")
BLOCK_NODE_KEYS = ("name", "from", "block", "repeat", "with")
MAX_STEPS = 10_000  # NOTE: layers and ops of the expanded model: repeat inside repeat multiplies
MAX_BLOCK_DEPTH = 8  # NOTE: blocks inside blocks
MAX_NAME = 64  # NOTE: characters of a node's or an input's name
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
NAME_HINT = f"use letters, digits, '_' and '-' (not first), at most {MAX_NAME} characters, e.g. attn_1"
BLOCK = Section("block", "a reusable piece of graph", {
    "params": Field("list", "names the block's graph can use as $name", [],
                    item=Field("str", "a parameter name", REQUIRED)),
    "graph": Field("list", "the block's nodes; 'in' is the block's input and the node named 'out' its output",
                   REQUIRED)})  # fmt: skip
REPEAT = Section("node", "a block node", {"repeat": Field("int", "how many copies, one after another", 1, min=1,
                                                         max=1000)})  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One computation of the expanded model: a layer or an op on the outputs of earlier steps or inputs."""

    name: str
    kind: str  # "layer" or "op"
    what: str  # the layer or op name
    args: dict[str, Any]
    srcs: tuple[str, ...]
    loc: Location
    in_shapes: tuple[Shape, ...] = ()
    out_shape: Shape = ()
    params: int = 0
    flops: int = 0
    saved: int = 0  # values one example keeps for the backward pass


@dataclass(frozen=True)
class _Node:
    name: str
    kind: str  # "layer", "op" or "block"
    what: str
    args: dict[str, Any]
    srcs: tuple[tuple[str, Location], ...]
    loc: Location
    repeat: int = 1
    with_: dict[str, YNode] | None = None


def sequential_nodes(model: YNode) -> tuple[list[_Node], list[Problem]]:
    """A layer list: each entry is a layer name, or `name: arguments`, or `name: shorthand value`."""
    nodes, problems = [], []
    for i, item in enumerate(model.value):
        where = f"model[{i}]"
        if item.kind == "scalar" and isinstance(item.value, str):
            name, args_node = item.value, None
        elif item.kind == "map" and len(item.value) == 1:
            name, args_node = next(iter(item.value.items()))
        else:
            problems.append(Problem(f"{where} must be a layer name or 'name: arguments', got {describe(item)}",
                                    item.loc, "write one layer per list item, e.g. '- linear: {out: 10}'"))  # fmt: skip
            continue
        args, found = _layer_args(name, args_node, where, item.loc)
        problems += found
        src = "input" if i == 0 else str(i - 1)
        nodes.append(_Node(str(i), "layer", name, args, ((src, item.loc),), item.loc))
    return nodes, problems


def name_problem(name: str, loc: Location, what: str) -> Problem | None:
    """A node's or an input's name names values in messages, the summary table and the ONNX graph, and the copies of a
    block's nodes are named <node>.<copy>.<name>: so letters, digits, '_' and '-' only, and short."""
    if NAME.fullmatch(name) and len(name) <= MAX_NAME:
        return None
    bad = next((c for c in name if not (c.isascii() and (c.isalnum() or c in "_-"))), None)
    if not name:
        why = "is empty"
    elif len(name) > MAX_NAME:
        why = f"is {len(name):,} characters long, over {MAX_NAME}"
    elif bad == ".":
        why = "holds '.', which separates the copies of a block's nodes (body.0.attn)"
    elif bad is not None:
        why = f"holds {excerpt(bad)!r}"
    else:
        why = "starts with '-'"
    return Problem(f"{what} name '{excerpt(name)}' {why}", loc, NAME_HINT)


def _layer_args(name: str, node: YNode | None, where: str, loc: Location) -> tuple[dict, list[Problem]]:
    if name not in LAYERS:
        return {}, [
            Problem(
                f"unknown layer '{excerpt(name)}' in {where}",
                loc,
                did_you_mean(name, list(LAYERS)) or f"known layers: {', '.join(LAYERS)}",
            )
        ]
    entry = LAYERS[name].entry
    if node is not None and (node.kind == "seq" or (node.kind == "scalar" and node.value is not None)):
        if entry.shorthand is None:
            return {}, [Problem(f"{where}.{name} takes named arguments, got {describe(node)}", node.loc,
                                f"write '{name}: {{...}}' with keys {', '.join(entry.args.fields)}")]  # fmt: skip
        node = YNode({entry.shorthand: node}, node.loc, "map", key_locs={entry.shorthand: node.loc})
    if node is None or (node.kind == "scalar" and node.value is None):
        node = YNode({}, loc, "map", key_locs={})
    problems = check_section(node, entry.args, f"{where}.{name}")
    return (with_defaults(node, entry.args) if not problems else {}), problems


def graph_nodes(items: YNode, where: str, blocks: dict[str, YNode]) -> tuple[list[_Node], list[Problem]]:
    """Graph entries: {name, from, and one of layer (+ its arguments), op (+ its arguments), block (+ repeat, with)}."""
    nodes, problems, seen = [], [], {}
    for i, item in enumerate(items.value):
        at = f"{where}[{i}]"
        if item.kind != "map":
            problems.append(Problem(f"{at} must be a node like {{name: ..., layer: ..., from: ...}}, got "
                                    f"{describe(item)}", item.loc))  # fmt: skip
            continue
        node, found = _graph_node(item, at, blocks)
        problems += found
        if node is None:
            continue
        if node.name in seen:
            problems.append(Problem(f"a second node named '{node.name}' in {where} (the first is on line "
                                    f"{seen[node.name].line})", item.value["name"].loc))  # fmt: skip
            continue
        seen[node.name] = item.loc
        nodes.append(node)
    return nodes, problems


def _graph_node(item: YNode, at: str, blocks: dict[str, YNode]) -> tuple[_Node | None, list[Problem]]:
    v = item.value
    name = v.get("name")
    if name is None or name.kind != "scalar" or not isinstance(name.value, str):
        return None, [Problem(f"{at} needs a name (text)", (name or item).loc)]
    if (problem := name_problem(name.value, name.loc, "the node")) is not None:
        return None, [problem]
    at = f"node '{name.value}'"
    kinds = [k for k in ("layer", "op", "block") if k in v]
    if len(kinds) != 1:
        return None, [Problem(f"{at} needs exactly one of layer, op or block, got {', '.join(kinds) or 'none'}",
                              item.loc)]  # fmt: skip
    srcs, problems = _sources(v.get("from"), at, item.loc)
    kind = kinds[0]
    what_node = v[kind]
    if what_node.kind != "scalar" or not isinstance(what_node.value, str):
        return None, problems + [Problem(f"{at}: {kind} must be a name, got {describe(what_node)}", what_node.loc)]
    what = what_node.value
    rest_locs = {k: item.key_locs[k] for k in v if k not in NODE_KEYS} if item.key_locs else None
    rest = YNode({k: x for k, x in v.items() if k not in NODE_KEYS}, item.loc, "map", key_locs=rest_locs)
    problems += [Problem(f"{at}: '{k}' goes with block nodes only", (item.key_locs or {}).get(k, item.loc))
                 for k in ("repeat", "with") if k in v and kind != "block"]  # fmt: skip
    if kind == "layer":
        args, found = _layer_args(what, rest, at, what_node.loc)
        return _Node(name.value, "layer", what, args, srcs, item.loc), problems + found
    if kind == "op":
        if what not in OPS:
            return None, problems + [
                Problem(
                    f"unknown op '{excerpt(what)}' in {at}",
                    what_node.loc,
                    did_you_mean(what, list(OPS)) or f"ops: {', '.join(OPS)}",
                )
            ]
        found = check_section(rest, OPS[what].section, at)
        return _Node(name.value, "op", what, with_defaults(rest, OPS[what].section), srcs, item.loc), problems + found
    if what not in blocks:
        known = f"blocks: {', '.join(blocks)}" if blocks else "define it under blocks:"
        hint = did_you_mean(what, list(blocks)) or known
        return None, problems + [Problem(f"unknown block '{excerpt(what)}' in {at}", what_node.loc, hint)]
    problems += [Problem(f"unknown key '{excerpt(k)}' in {at}", (rest.key_locs or {}).get(k, item.loc),
                         unknown_key_hint(k, BLOCK_NODE_KEYS)) for k in rest.value]  # fmt: skip
    repeat = v.get("repeat")
    found = check_section(YNode({"repeat": repeat}, item.loc, "map", key_locs={"repeat": repeat.loc}),
                          REPEAT, at) if repeat else []  # fmt: skip
    with_ = v.get("with")
    if with_ is not None and with_.kind != "map":
        found.append(Problem(f"{at}: with must be a mapping of block parameters, got {describe(with_)}", with_.loc))
    node = _Node(name.value, "block", what, {}, srcs, item.loc, repeat.value if repeat and not found else 1,
                 with_.value if with_ is not None and with_.kind == "map" else {})  # fmt: skip
    return node, problems + found


def block_problems(blocks: dict[str, YNode]) -> list[Problem]:
    """Every problem of each block's definition, found once however often the model uses the block (never included):
    its keys, its nodes, the parameters its block nodes pass, and its 'out' node. A value written with $ is checked
    where the block is used, once the values of its parameters are known (use_problems)."""
    problems = []
    for name, block in blocks.items():
        problems += check_section(block, BLOCK, f"blocks.{name}")
        graph = block.get("graph")
        if graph is None or graph.kind != "seq":
            continue
        deferred = _deferred(graph)
        nodes, found = graph_nodes(graph, f"block '{name}'", blocks)
        problems += [p for p in found if p.loc not in deferred] + [p for n in nodes for p in _with_problems(n, blocks)]
        names = [x.get("name") for x in graph.value if x.get("name") is not None]
        if not any(n.value == "out" or n.loc in deferred for n in names):
            loc = (block.key_locs or {}).get("graph", graph.loc)
            problems.append(Problem(f"block '{excerpt(name)}' has no node named 'out' (its output)", loc,
                                    "name the node that gives the block's value out, e.g. {name: out, op: add, "
                                    "from: [in, h]}"))  # fmt: skip
    return problems


def use_problems(nodes: list[_Node], blocks: dict[str, YNode], variables: dict[str, YNode]) -> list[Problem]:
    """Problems of the model's block nodes: parameters given in `with:` that the block lacks or misses, and values
    that do not fit where the block's graph uses them (its $names filled in). Each distinct use is checked once, and
    only at the $names: the rest of a block is its definition's (block_problems)."""
    problems: list[Problem] = []
    seen: set[tuple] = set()
    for node in nodes:
        problems += _with_problems(node, blocks) or _filled_in_problems(node, blocks, variables, seen, 0)
    # NOTE: the same value problem met through several uses (an unknown $name, say) is reported at its first use
    return list({(p.loc, p.message.rpartition(" (in block ")[0]): p for p in reversed(problems)}.values())[::-1]


def _with_problems(node: _Node, blocks: dict[str, YNode]) -> list[Problem]:
    """`with:` of a block node against its block's parameters (a block with broken params is reported at the block)."""
    params = _params(blocks.get(node.what)) if node.kind == "block" else None
    if params is None or node.with_ is None:
        return []
    problems = [Problem(f"block '{excerpt(node.what)}' has no parameter '{excerpt(k)}'", v.loc,
                        did_you_mean(k, params) or f"its parameters: {', '.join(params) or 'none'}")
                for k, v in node.with_.items() if k not in params]  # fmt: skip
    missing = [p for p in params if p not in node.with_]
    if missing:
        problems.append(Problem(f"block node '{node.name}' needs with: {{{', '.join(f'{p}: ...' for p in missing)}}} "
                                f"for block '{excerpt(node.what)}'", node.loc))  # fmt: skip
    return problems


def _params(block: YNode | None) -> list[str] | None:
    """A block's parameter names, or None when the block or its params are not well formed."""
    if block is None or block.kind != "map" or check_section(block, BLOCK, ""):
        return None
    return [p.value for p in block.value["params"].value] if "params" in block.value else []


def _filled_in_problems(node: _Node, blocks: dict[str, YNode], variables: dict[str, YNode], seen: set[tuple],
                        depth: int) -> list[Problem]:  # fmt: skip
    """The problems at the $names of the block a node uses, with the values it passes, and so on into the blocks that
    block uses; each (block, values) pair once."""
    block = blocks.get(node.what)
    if node.kind != "block" or _params(block) is None or depth > MAX_BLOCK_DEPTH:
        return []
    key = (node.what, tuple((k, repr(v.to_plain())) for k, v in (node.with_ or {}).items()))
    if key in seen:
        return []
    seen.add(key)
    graph = block.value["graph"]
    deferred = _deferred(graph)
    use = f" (in block '{excerpt(node.what)}', with the values node '{node.name}' on line {node.loc.line} passes)"
    try:
        filled = substitute_in(graph, {**variables, **(node.with_ or {})})
    except SpecError as e:
        return [replace(p, message=p.message + use) for p in e.problems]
    nodes, found = graph_nodes(filled, f"block '{node.what}'", blocks)
    problems = [replace(p, message=p.message + use) for p in found if p.loc in deferred]
    for inner in nodes:
        problems += _filled_in_problems(inner, blocks, variables, seen, depth + 1)
    return problems


def _deferred(node: YNode) -> set[Location]:
    """Where a block's graph writes $names: values checked only once a use fills them in."""
    if node.kind == "map":
        return {loc for v in node.value.values() for loc in _deferred(v)}
    if node.kind == "seq":
        return {loc for v in node.value for loc in _deferred(v)}
    return {node.loc} if isinstance(node.value, str) and "$" in node.value else set()


def _sources(node: YNode | None, at: str, loc: Location) -> tuple[tuple[tuple[str, Location], ...], list[Problem]]:
    if node is None:
        return (), [Problem(f"{at} needs 'from:' (the input or node it takes)", loc)]
    items = node.value if node.kind == "seq" else [node]
    bad = [x for x in items if x.kind != "scalar" or not isinstance(x.value, str)]
    if bad or not items:
        return (), [Problem(f"{at}: from must be a node name or a list of them, got {describe(node)}", node.loc)]
    return tuple((x.value, x.loc) for x in items), []


# *** expanding blocks and inferring shapes, in order ***


class _Budget:
    """The steps the expanded model may still have, and the model's node being expanded (where an error points)."""

    def __init__(self) -> None:
        self.left, self.where = MAX_STEPS, None

    def take(self, node: _Node) -> None:
        self.left -= 1
        if self.left < 0:
            raise SpecError([Problem(f"the model has more than {MAX_STEPS:,} layers and ops once its blocks are "
                                     "expanded (repeat copies a block, and a block inside it is copied each time)",
                                     self.where or node.loc, "use fewer or smaller repeats")])  # fmt: skip


def infer(nodes: list[_Node], inputs: dict[str, tuple[Shape, Location]], blocks: dict[str, YNode],
          variables: dict[str, YNode], prefix: str = "", depth: int = 0, budget: _Budget | None = None
          ) -> tuple[list[Step], dict[str, Shape]]:  # fmt: skip
    """Steps in execution order and every name's shape; `from:` may name inputs and nodes above only (no cycles)."""
    shapes: dict[str, Shape] = {k: s for k, (s, _) in inputs.items()}
    origin: dict[str, str] = {k: _input_words(k, loc) for k, (_, loc) in inputs.items()}
    later = {n.name: n.loc for n in nodes}
    steps: list[Step] = []
    budget = budget or _Budget()
    for node in nodes:
        if depth == 0:
            budget.where = node.loc
        if node.name in inputs:
            raise SpecError([Problem(f"node '{node.name}' has the name of an input, so 'from: {node.name}' could mean "
                                     "either", node.loc, "give the node another name")])  # fmt: skip
        in_shapes = []
        for src, loc in node.srcs:
            if src not in shapes:
                raise SpecError([_unknown_source(node, src, loc, shapes, later)])
            in_shapes.append(shapes[src])
        if node.kind == "block":
            new_steps, out = _expand_block(node, in_shapes, blocks, variables, prefix, depth, budget)
            steps += new_steps
        else:
            budget.take(node)
            step = _run_step(node, in_shapes, [origin[s] for s, _ in node.srcs], prefix, set(inputs))
            steps.append(step)
            out = step.out_shape
        shapes[node.name] = out
        origin[node.name] = _node_words(prefix + node.name, node)
        del later[node.name]
    return steps, shapes


def _input_words(name: str, loc: Location) -> str:
    return f"the input (line {loc.line})" if name == "input" else f"input '{name}' (line {loc.line})"


def _node_words(name: str, node: _Node) -> str:
    """How messages name a step: 'layer 2 (relu, line 7)' in a layer list, 'node 'attn' (line 9)' in a graph."""
    return (
        f"layer {name} ({node.what}, line {node.loc.line})"
        if name.isdigit()
        else f"node '{name}' (line {node.loc.line})"
    )


def _unknown_source(node: _Node, src: str, loc: Location, shapes: dict, later: dict) -> Problem:
    src = excerpt(src)
    if src == node.name:
        return Problem(f"node '{node.name}' takes its own output: a graph cannot have cycles", loc)
    if src in later:
        return Problem(f"node '{node.name}' takes '{src}', which is defined below it (line {later[src].line}); a node "
                       f"can only take inputs and nodes above it, so the graph has no cycles", loc)  # fmt: skip
    return Problem(
        f"node '{node.name}' takes '{src}', which is not an input or a node above it",
        loc,
        did_you_mean(src, list(shapes)) or f"known here: {', '.join(shapes)}",
    )


def _run_step(node: _Node, in_shapes: list[Shape], from_words: list[str], prefix: str, inputs: set[str]) -> Step:
    name = prefix + node.name
    try:
        if node.kind == "layer":
            if len(in_shapes) != 1:
                raise ShapeMismatch(f"takes one input, got {len(in_shapes)}")
            layer = LAYERS[node.what]
            out = layer.infer(in_shapes[0], node.args)
            params, flops = layer.params(in_shapes[0], node.args), layer.flops(in_shapes[0], out, node.args)
            saved = layer.saved(in_shapes[0], out, node.args)
        else:
            op = OPS[node.what]
            out = op.infer(in_shapes, node.args)
            params, flops, saved = 0, op.flops(in_shapes, out, node.args), prod(out)
    except ShapeMismatch as e:
        met = " and ".join(f"{list(s)} from {w}" for s, w in zip(in_shapes, from_words))
        what = words(name, node.what)
        noun = "shape" if len(in_shapes) == 1 else "shapes"
        raise SpecError([Problem(f"{what} cannot take {noun} {met}: it {e}", node.loc)]) from None
    srcs = tuple(src if src in inputs else prefix + src for src, _ in node.srcs)
    return Step(name, node.kind, node.what, node.args, srcs, node.loc, tuple(in_shapes), out, params, flops, saved)


def _expand_block(node: _Node, in_shapes: list[Shape], blocks: dict[str, YNode], variables: dict[str, YNode],
                  prefix: str, depth: int, budget: _Budget) -> tuple[list[Step], Shape]:  # fmt: skip
    if depth > MAX_BLOCK_DEPTH:
        raise SpecError([Problem(f"blocks nest more than {MAX_BLOCK_DEPTH} deep at node '{node.name}' (does a block "
                                 "use itself?)", node.loc)])  # fmt: skip
    if len(in_shapes) != 1:
        raise SpecError([Problem(f"block node '{node.name}' takes one input, got {len(in_shapes)}", node.loc)])
    block = blocks[node.what]
    params = [p.value for p in block.value["params"].value] if "params" in block.value else []
    unknown = [k for k in (node.with_ or {}) if k not in params]
    if unknown:
        raise SpecError(
            [
                Problem(
                    f"block '{node.what}' has no parameter '{unknown[0]}'",
                    node.with_[unknown[0]].loc,
                    did_you_mean(unknown[0], params) or f"its parameters: {', '.join(params) or 'none'}",
                )
            ]
        )
    missing = [p for p in params if p not in (node.with_ or {})]
    if missing:
        raise SpecError([Problem(f"block node '{node.name}' needs with: {{{missing[0]}: ...}} for block "
                                 f"'{node.what}'", node.loc)])  # fmt: skip
    graph = substitute_in(block.value["graph"], {**variables, **(node.with_ or {})})
    steps: list[Step] = []
    shape, src = in_shapes[0], node.srcs[0][0]
    for i in range(node.repeat):
        copy = f"{prefix}{node.name}.{i}." if node.repeat > 1 else f"{prefix}{node.name}."
        nodes, problems = graph_nodes(graph, f"block '{node.what}'", blocks)
        if problems:
            raise SpecError(problems)
        new_steps, shapes = infer(nodes, {"in": (shape, node.loc)}, blocks, variables, copy, depth + 1, budget)
        if "out" not in shapes:
            raise SpecError([Problem(f"block '{node.what}' has no node named 'out' (its output)", block.loc)])
        steps += [replace(s, srcs=tuple(src if x == "in" else x for x in s.srcs)) for s in new_steps]
        shape, src = shapes["out"], f"{copy}out"
    # NOTE: later nodes refer to the block by its name: make its last step answer to it
    last = steps[-1]
    steps[-1] = replace(last, name=f"{prefix}{node.name}")
    steps = [replace(s, srcs=tuple(f"{prefix}{node.name}" if x == last.name else x for x in s.srcs)) for s in steps]
    return steps, shape
