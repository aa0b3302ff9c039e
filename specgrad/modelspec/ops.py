"""The ops a graph node can be (`op: add`, `op: mul`, `op: concat`): each one OpDef holding its arguments, shape rule,
FLOPs, builder and ONNX lowering, as layer kinds are defined in layers/. graph.py, the JSON Schema, the builder and the
ONNX export read OPS. Shapes are per example; built ops take a batch axis first.

Imports the public API (Tensor) and modelspec (layers.base, schema); the ONNX graph and Step for annotations only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from specgrad import Tensor
from specgrad.helpers import prod
from specgrad.modelspec.layers.base import Shape, ShapeMismatch
from specgrad.modelspec.schema import Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step


@dataclass(frozen=True)
class OpDef:
    """One op: `section` (name, description, arguments), `infer` (the output shape from the input shapes, or
    ShapeMismatch), `build` (the inputs of a batch -> the output), `onnx` (its nodes: graph, step, input values, output
    value), `flops` (per example) and `per_position` (whether an output position reads only that position of the
    inputs, the sequence being axis 0 of each example: then a sequence model steps through it one position at a
    time)."""

    section: Section
    infer: Callable[[list[Shape], dict[str, Any]], Shape]
    build: Callable[[list[Tensor], dict[str, Any]], Tensor]
    onnx: Callable[[OnnxGraph, Step, list[str], str], None]
    flops: Callable[[list[Shape], Shape, dict[str, Any]], int] = lambda shapes, out, a: prod(shapes[0]) * len(shapes)
    per_position: Callable[[list[Shape], dict[str, Any]], bool] = lambda shapes, a: True

    @property
    def name(self) -> str:
        return self.section.name


def _two_or_more(shapes: list[Shape]) -> None:
    if len(shapes) < 2:
        raise ShapeMismatch(f"needs at least two inputs, got {len(shapes)}")


def _same_shape(shapes: list[Shape], a: dict) -> Shape:
    _two_or_more(shapes)
    if len(set(shapes)) != 1:
        raise ShapeMismatch("needs inputs of one shape")
    return shapes[0]


def _one_type(g: OnnxGraph, xs: list[str]) -> list[str]:
    return xs if len({g.types[x] for x in xs}) == 1 else [g.to_float(x) for x in xs]


def _fold(op: str) -> Callable[[OnnxGraph, Step, list[str], str], None]:
    """A left fold, in the order the built op applies it."""

    def lower(g: OnnxGraph, s: Step, xs: list[str], out: str) -> None:
        xs = _one_type(g, xs)
        ret = xs[0]
        for i, x in enumerate(xs[1:], start=2):
            ret = g.node(op, ret, x, out=out if i == len(xs) else None, dtype=g.types[xs[0]])

    return lower


def _concat_infer(shapes: list[Shape], a: dict) -> Shape:
    _two_or_more(shapes)
    ndim = len(shapes[0])
    axis = a["axis"] + ndim if a["axis"] < 0 else a["axis"]
    if not 0 <= axis < ndim:
        raise ShapeMismatch(f"has no axis {a['axis']} in a {ndim}-axis input")
    if any(len(s) != ndim or s[:axis] + s[axis + 1 :] != shapes[0][:axis] + shapes[0][axis + 1 :] for s in shapes):
        raise ShapeMismatch(f"needs inputs that differ only along axis {a['axis']}")
    return (*shapes[0][:axis], sum(s[axis] for s in shapes), *shapes[0][axis + 1 :])


def _batch_axis(axis: int) -> int:
    """A per-example axis as an axis of a batch: one further when counted from the start."""
    return axis + 1 if axis >= 0 else axis


def _concat_onnx(g: OnnxGraph, s: Step, xs: list[str], out: str) -> None:
    xs = _one_type(g, xs)
    g.node("Concat", *xs, out=out, dtype=g.types[xs[0]], axis=_batch_axis(s.args["axis"]))


OPS: dict[str, OpDef] = {
    d.name: d
    for d in [
        OpDef(Section("add", "elementwise sum of inputs of one shape"), _same_shape,
              lambda xs, a: reduce(lambda x, y: x + y, xs), _fold("Add")),
        OpDef(Section("mul", "elementwise product of inputs of one shape"), _same_shape,
              lambda xs, a: reduce(lambda x, y: x * y, xs), _fold("Mul")),
        OpDef(Section("concat", "inputs joined along one axis", {
                  "axis": Field("int", "the axis to join along (negative counts from the end)", -1, min=-8, max=7)}),
              _concat_infer, lambda xs, a: xs[0].cat(*xs[1:], dim=_batch_axis(a["axis"])), _concat_onnx,
              per_position=lambda shapes, a: a["axis"] % len(shapes[0]) != 0),
    ]
}  # fmt: skip
