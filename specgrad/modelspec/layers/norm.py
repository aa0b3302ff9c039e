"""Normalisation layers: batchnorm (over the batch, per channel) and layernorm (over the last axis)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specgrad import nn
from specgrad.helpers import prod
from specgrad.modelspec.layers.base import Example, Layer, LayerDef, Shape, ShapeMismatch, with_bias
from specgrad.modelspec.schema import Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step

EPS = Field("float", "added to the variance", 1e-5, min=0.0, max=1.0)


def _keep(shape: Shape, a: dict) -> Shape:
    if not shape:
        raise ShapeMismatch("needs at least a channel axis, got a scalar")
    return shape


def _batchnorm(shape: Shape, a: dict) -> Layer:
    cls = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
    return cls(shape[0], eps=a["eps"], momentum=a["momentum"])


def _batchnorm_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    stats = [g.param(p + k) for k in ("weight", "bias", "running_mean", "running_var")]
    g.node("BatchNormalization", g.to_float(x), *stats, out=out, epsilon=s.args["eps"])  # NOTE: eval mode


BATCHNORM = LayerDef(
    Entry("batchnorm", "normalise each channel (axis 0) over the batch", Section("batchnorm", "arguments", {
        "eps": EPS,
        "momentum": Field("float", "running statistics update rate", 0.1, min=0.0, max=1.0)})),
    infer=_keep,
    build=_batchnorm,
    onnx=_batchnorm_onnx,
    examples=(Example({}, (3, 4, 4), (3, 4, 4), 6), Example({"momentum": 0.5, "eps": 0.1}, (5,), (5,), 10),
              Example({}, (4, 6), (4, 6), 8)),
    weights=lambda s, a: {"weight": (s[0],), "bias": (s[0],)},
    flops=lambda i, o, a: 4 * prod(i),
)  # fmt: skip


def _layernorm_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    b = [g.param(p + "bias")] if s.args["bias"] else []
    g.node("LayerNormalization", g.to_float(x), g.param(p + "weight"), *b, out=out, axis=-1, epsilon=s.args["eps"])


LAYERNORM = LayerDef(
    Entry("layernorm", "normalise the last axis of each example", Section("layernorm", "arguments", {
        "eps": EPS,
        "bias": Field("bool", "add a learned shift after the scale", True)})),
    infer=_keep,
    build=lambda shape, a: nn.LayerNorm(shape[-1], eps=a["eps"], bias=a["bias"]),
    onnx=_layernorm_onnx,
    examples=(Example({}, (3, 8), (3, 8), 16), Example({"eps": 0.01, "bias": False}, (6,), (6,), 6)),
    weights=lambda s, a: with_bias({"weight": (s[-1],)}, a["bias"], ("bias", (s[-1],))),
    flops=lambda i, o, a: 5 * prod(i),
)  # fmt: skip

DEFS = [BATCHNORM, LAYERNORM]
