"""Layers that move values: flatten and reshape, and upsample (nearest repeats values, bilinear blends each with a
neighbour)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from specgrad import Tensor
from specgrad.helpers import prod
from specgrad.modelspec.layers.base import Example, Layer, LayerDef, Shape, ShapeMismatch, needs, size_field
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


# *** upsample ***


def _nearest(x: Tensor, s: int) -> Tensor:
    n, c, h, w = x.shape
    return x.reshape(n, c, h, 1, w, 1).expand(n, c, h, s, w, s).reshape(n, c, h * s, w * s)


def _tent(n: int, s: int) -> np.ndarray:
    """(n * s, n): row j blends the two inputs nearest to position (j + 0.5) / s - 0.5, clamped to the ends, as
    PyTorch's bilinear with align_corners=False."""
    at = np.clip((np.arange(n * s) + 0.5) / s - 0.5, 0, n - 1)
    return np.maximum(0, 1 - np.abs(at[:, None] - np.arange(n)[None, :])).astype(np.float32)


def _bilinear(x: Tensor, s: int) -> Tensor:
    # NOTE: as two matrix products: a per-axis sum of shifted slices builds a graph that schedules far slower
    h, w = x.shape[2:]
    return Tensor(_tent(h, s), device=x.device) @ (x @ Tensor(_tent(w, s).T, device=x.device))


def _upsample_infer(shape: Shape, a: dict) -> Shape:
    needs(shape, 3, "a (channels, height, width) input")
    return (shape[0], shape[1] * a["scale"], shape[2] * a["scale"])


def _upsample(shape: Shape, a: dict) -> Layer:
    s = a["scale"]
    if a["mode"] == "nearest":
        return lambda x: _nearest(x, s)
    return lambda x: _bilinear(x, s)


def _upsample_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    scales = g.const([1.0, 1.0, s.args["scale"], s.args["scale"]])
    if s.args["mode"] == "bilinear":
        g.node("Resize", g.to_float(x), "", scales, out=out, mode="linear", coordinate_transformation_mode="half_pixel")
        return
    modes = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    t = g.types[x]
    if t in _resizable(g):  # NOTE: nearest moves values: it keeps their type, as specgrad does
        g.node("Resize", x, "", scales, out=out, dtype=t, **modes)
        return
    g.node("Cast", g.node("Resize", g.to_float(x), "", scales, **modes), out=out, to=t, dtype=t)


def _resizable(g: OnnxGraph) -> tuple[int, ...]:
    """Element types onnxruntime's Resize takes (int64 and bool go through float32)."""
    tp = g.onnx.TensorProto
    return (tp.FLOAT, tp.FLOAT16, tp.INT32, tp.UINT8)


UPSAMPLE = LayerDef(
    Entry("upsample", "grow the height and width of (channels, height, width) by a whole factor",
          Section("upsample", "arguments", {
              "scale": Field("int", "factor for the height and the width", 2, min=1, max=64),
              "mode": Field("str", "nearest: repeat each value; bilinear: blend the nearest four", "nearest",
                            choices=("nearest", "bilinear"))}), shorthand="scale"),
    infer=_upsample_infer,
    build=_upsample,
    onnx=_upsample_onnx,
    examples=(Example({"scale": 2}, (2, 3, 4), (2, 6, 8), 0), Example({"scale": 3}, (1, 2, 3), (1, 6, 9), 0),
              Example({"scale": 2}, (1, 2, 3), (1, 4, 6), 0, "int32"),
              Example({"scale": 2}, (1, 2, 3), (1, 4, 6), 0, "int64"),
              Example({"scale": 2, "mode": "bilinear"}, (2, 3, 4), (2, 6, 8), 0),
              Example({"scale": 3, "mode": "bilinear"}, (2, 4, 1), (2, 12, 3), 0)),
    flops=lambda i, o, a: 0 if a["mode"] == "nearest" else 2 * prod(i) * o[2] + 2 * prod(o) * i[1],
    notes="PyTorch's `nn.Upsample(scale_factor=scale, mode=...)`: bilinear is align_corners=False (output pixel j "
    "samples input position (j + 0.5) / scale - 0.5, clamped to the edges). The ONNX export is one Resize "
    "(half_pixel linear, or asymmetric nearest rounding down).",
)  # fmt: skip

DEFS = [FLATTEN, RESHAPE, UPSAMPLE]
