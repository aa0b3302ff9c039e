"""Layers that move values without computing: flatten and reshape."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from specgrad.helpers import prod
from specgrad.modelspec.layers.base import Example, LayerDef, Shape, ShapeMismatch, size_field
from specgrad.modelspec.schema import REQUIRED, Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step

FLATTEN = LayerDef(
    Entry("flatten", "all axes of an example into one", Section("flatten", "no arguments")),
    infer=lambda s, a: (prod(s),),
    build=lambda shape, a: lambda x: x.flatten(1),
    onnx=lambda g, s, p, x, out: g.node("Flatten", x, out=out, dtype=g.types[x], axis=1),
    examples=(Example({}, (2, 3, 4), (24,), 0),),
    flops=lambda i, o, a: 0,
)  # fmt: skip


def _reshape_infer(shape: Shape, a: dict) -> Shape:
    new = tuple(a["shape"])
    if prod(new) != prod(shape):
        raise ShapeMismatch(f"cannot reshape {list(shape)} ({prod(shape)} values) to {list(new)} ({prod(new)} values)")
    return new


def _reshape_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    g.node("Reshape", x, g.const([-1, *s.args["shape"]], np.int64), out=out, dtype=g.types[x])


RESHAPE = LayerDef(
    Entry("reshape", "the same values in a new shape", Section("reshape", "arguments", {
        "shape": Field("list", "the new per-example shape", REQUIRED, item=size_field("an axis length"))}),
        shorthand="shape"),
    infer=_reshape_infer,
    build=lambda shape, a: lambda x: x.reshape(x.shape[0], *a["shape"]),
    onnx=_reshape_onnx,
    examples=(Example({"shape": [4, 6]}, (2, 12), (4, 6), 0),),
    flops=lambda i, o, a: 0,
)  # fmt: skip

DEFS = [FLATTEN, RESHAPE]
