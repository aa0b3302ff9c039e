"""Elementwise layers: the activations and dropout. Each activation's Tensor method and ONNX form sit side by side in
ACTIVATIONS, which mlp also uses for its hidden activation."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from specgrad import nn
from specgrad.modelspec.layers.base import Example, LayerDef, per_position
from specgrad.modelspec.schema import Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph

# NOTE: (graph, float32 input value, output value or None for a fresh one) -> the output value
ActivationOnnx = Callable[..., str]


def _gelu(g: OnnxGraph, x: str, out: str | None = None) -> str:
    if g.opset >= 20:
        return g.node("Gelu", x, out=out, approximate="tanh")
    # NOTE: Tensor.gelu's default, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
    cube = g.node("Mul", g.const(0.044715), g.node("Mul", g.node("Mul", x, x), x))
    inner = g.node("Mul", g.const(math.sqrt(2 / math.pi)), g.node("Add", x, cube))
    return g.node("Mul", g.node("Mul", g.const(0.5), x), g.node("Add", g.const(1.0), g.node("Tanh", inner)), out=out)


def _mish(g: OnnxGraph, x: str, out: str | None = None) -> str:
    if g.opset >= 18:
        return g.node("Mish", x, out=out)
    return g.node("Mul", x, g.node("Tanh", g.node("Softplus", x)), out=out)


def _unary(op: str, **attrs: Any) -> ActivationOnnx:
    return lambda g, x, out=None: g.node(op, x, out=out, **attrs)


# name -> its ONNX form; the Tensor method of the same name computes it
ACTIVATIONS: dict[str, ActivationOnnx] = {
    "relu": _unary("Relu"),
    "gelu": _gelu,
    "tanh": _unary("Tanh"),
    "sigmoid": _unary("Sigmoid"),
    "silu": lambda g, x, out=None: g.node("Mul", x, g.node("Sigmoid", x), out=out),
    "softplus": _unary("Softplus"),
    "elu": _unary("Elu", alpha=1.0),
    "mish": _mish,
    "hardswish": _unary("HardSwish"),
    "relu6": lambda g, x, out=None: g.node("Clip", x, g.const(0.0), g.const(6.0), out=out),
}


def _activation(name: str) -> LayerDef:
    return LayerDef(
        Entry(name, f"the {name} activation, elementwise", Section(name, "no arguments")),
        infer=lambda s, a: s,
        build=lambda shape, a: lambda x: getattr(x, name)(),
        onnx=lambda g, s, p, x, out: ACTIVATIONS[name](g, g.to_float(x), out),
        examples=(Example({}, (3, 5), (3, 5), 0),),
        decode=per_position,
    )


DROPOUT = LayerDef(
    Entry("dropout", "zero a random fraction of values while training", Section("dropout", "arguments", {
        "p": Field("float", "fraction of values dropped", 0.5, min=0.0, max=1.0)}), shorthand="p"),
    infer=lambda s, a: s,
    build=lambda shape, a: nn.Dropout(a["p"]),
    onnx=lambda g, s, p, x, out: g.node("Identity", x, out=out, dtype=g.types[x]),  # NOTE: inference: no dropout
    examples=(Example({"p": 0.3}, (4, 6), (4, 6), 0),),
    decode=per_position,  # NOTE: text is generated in inference, where dropout is the identity
)  # fmt: skip

DEFS = [DROPOUT, *(_activation(n) for n in ACTIVATIONS)]
