"""Normalisation layers: batchnorm (over the batch, per channel), layernorm (over the last axis) and groupnorm (over
groups of channels, per example)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from specgrad import Tensor, nn
from specgrad.helpers import prod
from specgrad.modelspec.layers.base import (
    Example,
    Layer,
    LayerDef,
    Shape,
    ShapeMismatch,
    per_position_on_features,
    size_field,
    with_bias,
)
from specgrad.modelspec.schema import Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step

EPS = Field("float", "added to the variance", 1e-5, min=0.0, max=1.0)


def _keep(shape: Shape, a: dict) -> Shape:
    if not shape:
        raise ShapeMismatch("needs at least a channel axis, got a scalar")
    return shape


AFFINE = Field("bool", "learn a per-channel scale (and shift, with bias) after normalising", True)
SHIFT = Field("bool", "learn a per-channel shift after the scale (with affine)", True)


def _affine_weights(c: int, a: dict) -> dict[str, Shape]:
    return with_bias({"weight": (c,)}, a["bias"], ("bias", (c,))) if a["affine"] else {}


def _channels(shape: Shape) -> tuple[int, ...]:
    """The shape that spreads a per-channel vector over a batch of `shape` examples: (C, 1, ..., 1)."""
    return (shape[0], *[1] * (len(shape) - 1))


def _batchnorm(shape: Shape, a: dict) -> Layer:
    cls = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
    bn = cls(shape[0], eps=a["eps"], momentum=a["momentum"], affine=a["affine"])
    if not a["bias"]:
        bn.bias = None
    return bn


def _batchnorm_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    c = s.in_shapes[0][0]
    scale = g.param(p + "weight") if g.has(p + "weight") else g.const(np.ones(c))
    shift = g.param(p + "bias") if g.has(p + "bias") else g.const(np.zeros(c))
    stats = [g.param(p + k) for k in ("running_mean", "running_var")]
    g.node("BatchNormalization", g.to_float(x), scale, shift, *stats, out=out, epsilon=s.args["eps"])  # NOTE: eval


BATCHNORM = LayerDef(
    Entry("batchnorm", "normalise each channel (axis 0) over the batch", Section("batchnorm", "arguments", {
        "eps": EPS,
        "momentum": Field("float", "running statistics update rate", 0.1, min=0.0, max=1.0),
        "affine": AFFINE,
        "bias": SHIFT})),
    infer=_keep,
    build=_batchnorm,
    onnx=_batchnorm_onnx,
    examples=(Example({}, (3, 4, 4), (3, 4, 4), 6), Example({"momentum": 0.5, "eps": 0.1}, (5,), (5,), 10),
              Example({}, (4, 6), (4, 6), 8), Example({"bias": False}, (3, 4, 4), (3, 4, 4), 3),
              Example({"affine": False}, (2, 5), (2, 5), 0)),
    weights=lambda s, a: _affine_weights(s[0], a),
    flops=lambda i, o, a: 4 * prod(i),
    notes="Training normalises with the batch's statistics and updates the running ones; evaluation, `specgrad run` "
    "and the exports use the running statistics. `bias: false` keeps the scale and drops the shift (for a layer "
    "followed by one that adds its own); `affine: false` drops both.",
)  # fmt: skip


class GroupNorm(nn.GroupNorm):
    """nn.GroupNorm whose shift can be left out (bias=False)."""

    def __init__(self, groups: int, channels: int, eps: float, affine: bool, bias: bool):
        super().__init__(groups, channels, eps=eps, affine=affine)
        if not bias:
            self.bias = None

    def __call__(self, x: Tensor) -> Tensor:
        y = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
        per_channel = (1, -1, *[1] * (x.ndim - 2))
        y = y if self.weight is None else y * self.weight.reshape(per_channel)
        return y if self.bias is None else y + self.bias.reshape(per_channel)


def _groupnorm_infer(shape: Shape, a: dict) -> Shape:
    _keep(shape, a)
    if shape[0] % a["groups"]:
        raise ShapeMismatch(f"needs groups={a['groups']} to divide the {shape[0]} channels")
    return shape


def _groupnorm_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    # NOTE: GroupNormalization is opset 21 (18-20 have per-group scale and bias): each group of (N, G, C/G * spatial)
    # is one InstanceNormalization "channel", then the per-channel affine
    shape, groups = s.in_shapes[0], s.args["groups"]
    grouped = g.node("Reshape", g.to_float(x), g.const([0, groups, -1], np.int64))
    normed = g.node("InstanceNormalization", grouped, g.const(np.ones(groups)), g.const(np.zeros(groups)),
                    epsilon=s.args["eps"])  # fmt: skip
    has_bias = g.has(p + "bias")
    y = g.node("Reshape", normed, g.const([0, *shape], np.int64), out=None if s.args["affine"] else out)
    if s.args["affine"]:
        scale = g.node("Reshape", g.param(p + "weight"), g.const(_channels(shape), np.int64))
        y = g.node("Mul", y, scale, out=None if has_bias else out)
    if has_bias:
        g.node("Add", y, g.node("Reshape", g.param(p + "bias"), g.const(_channels(shape), np.int64)), out=out)


GROUPNORM = LayerDef(
    Entry("groupnorm", "normalise each group of channels of each example over the group's channels and all other "
          "axes", Section("groupnorm", "arguments", {
              "groups": size_field("number of channel groups (it must divide the channels)"),
              "eps": EPS,
              "affine": AFFINE,
              "bias": SHIFT}), shorthand="groups"),
    infer=_groupnorm_infer,
    build=lambda shape, a: GroupNorm(a["groups"], shape[0], a["eps"], a["affine"], a["bias"]),
    onnx=_groupnorm_onnx,
    examples=(Example({"groups": 2}, (4, 3, 5), (4, 3, 5), 8), Example({"groups": 3, "eps": 0.01}, (6, 7), (6, 7), 12),
              Example({"groups": 1, "bias": False}, (3, 2, 2, 2), (3, 2, 2, 2), 3),
              Example({"groups": 4, "affine": False}, (4, 5, 3), (4, 5, 3), 0), Example({"groups": 2}, (6,), (6,), 12)),
    weights=lambda s, a: _affine_weights(s[0], a),
    flops=lambda i, o, a: 7 * prod(i),
    notes="Statistics are per example, so training and evaluation compute the same thing and any batch size works. "
    "`groups: 1` normalises each example over everything (LayerNorm over (C, *spatial)); `groups` equal to the "
    "channels is InstanceNorm. The scale and shift are per channel, as PyTorch's GroupNorm.",
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
    decode=per_position_on_features,
)  # fmt: skip

DEFS = [BATCHNORM, LAYERNORM, GROUPNORM]
