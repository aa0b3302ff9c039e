"""Fully connected layers on the last axis: linear, and mlp (linear -> activation -> linear)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specgrad import Tensor, nn
from specgrad.helpers import prod
from specgrad.modelspec.layers.base import (
    Example,
    LayerDef,
    Shape,
    needs_features,
    onnx_linear,
    per_position_on_features,
    size_field,
    with_bias,
)
from specgrad.modelspec.layers.elementwise import ACTIVATIONS
from specgrad.modelspec.schema import Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step

BIAS = Field("bool", "add a learned bias", True)


def _linear_infer(shape: Shape, a: dict) -> Shape:
    needs_features(shape)
    return (*shape[:-1], a["out"])


LINEAR = LayerDef(
    Entry("linear", "fully connected layer on the last axis", Section("linear", "arguments", {
        "out": size_field("number of output features"),
        "bias": BIAS}), shorthand="out"),
    infer=_linear_infer,
    build=lambda shape, a: nn.Linear(shape[-1], a["out"], bias=a["bias"]),
    onnx=lambda g, s, p, x, out: onnx_linear(g, g.to_float(x), len(s.in_shapes[0]) + 1, p + "weight", p + "bias",
                                             out),
    examples=(Example({"out": 7}, (5,), (7,), 42), Example({"out": 3, "bias": False}, (2, 4, 6), (2, 4, 3), 18)),
    weights=lambda s, a: with_bias({"weight": (a["out"], s[-1])}, a["bias"], ("bias", (a["out"],))),
    flops=lambda i, o, a: 2 * prod(i) * a["out"],
    decode=per_position_on_features,
)  # fmt: skip


class MLP:
    """linear -> activation -> linear on the last axis, back to the input width."""

    def __init__(self, width: int, hidden: int, activation: str, bias: bool = True):
        self.fc1, self.fc2 = nn.Linear(width, hidden, bias=bias), nn.Linear(hidden, width, bias=bias)
        self.activation = activation

    def __call__(self, x: Tensor) -> Tensor:
        return self.fc2(getattr(self.fc1(x), self.activation)())


def _mlp_infer(shape: Shape, a: dict) -> Shape:
    needs_features(shape)
    return shape


def _mlp_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    ndim = len(s.in_shapes[0]) + 1
    hidden = ACTIVATIONS[s.args["activation"]](g, onnx_linear(g, g.to_float(x), ndim, p + "fc1.weight", p + "fc1.bias"))
    onnx_linear(g, hidden, ndim, p + "fc2.weight", p + "fc2.bias", out)


MLP_LAYER = LayerDef(
    Entry("mlp", "two linear layers with an activation between, on the last axis", Section("mlp", "arguments", {
        "hidden": size_field("width of the hidden layer"),
        "activation": Field("str", "the activation in between", "gelu", choices=tuple(ACTIVATIONS)),
        "bias": Field("bool", "add a learned bias in both linear layers", True)})),
    infer=_mlp_infer,
    build=lambda shape, a: MLP(shape[-1], a["hidden"], a["activation"], a["bias"]),
    onnx=_mlp_onnx,
    examples=(Example({"hidden": 8, "activation": "silu"}, (3, 5), (3, 5), 2 * 5 * 8 + 8 + 5),
              Example({"hidden": 6, "bias": False}, (4,), (4,), 2 * 4 * 6)),
    weights=lambda s, a: with_bias({"fc1.weight": (a["hidden"], s[-1]), "fc2.weight": (s[-1], a["hidden"])},
                                   a["bias"], ("fc1.bias", (a["hidden"],)), ("fc2.bias", (s[-1],))),
    flops=lambda i, o, a: 4 * prod(i) * a["hidden"],
    saved=lambda i, o, a: 2 * prod(i[:-1]) * a["hidden"] + prod(o),  # NOTE: the hidden layer before and after its act
    decode=per_position_on_features,
)  # fmt: skip

DEFS = [LINEAR, MLP_LAYER]
