"""Layers a spec can name: each entry's arguments (schema), its static shape rule, parameter count and FLOPs.

Shapes here are per example (no batch axis). Imports modelspec.schema only; building models from these lives in
spec/builder.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specgrad.helpers import prod
from specgrad.modelspec.schema import REQUIRED, Entry, Field, Section

Shape = tuple[int, ...]


class ShapeMismatch(ValueError):
    """A layer that cannot take the shape it is given; the message says what it needs."""


@dataclass(frozen=True)
class LayerDef:
    entry: Entry
    infer: Callable[[Shape, dict[str, Any]], Shape]
    params: Callable[[Shape, dict[str, Any]], int] = lambda shape, a: 0
    flops: Callable[[Shape, Shape, dict[str, Any]], int] = lambda i, o, a: prod(o)


def _size(desc: str, default: Any = REQUIRED, lo: int = 1) -> Field:
    return Field("int", desc, default, min=lo, max=1 << 20)


def _pair(x: int | list[int]) -> tuple[int, int]:
    return (x, x) if isinstance(x, int) else (x[0], x[1])


def _spatial(in_hw: tuple[int, ...], k: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...],
             d: tuple[int, ...]) -> tuple[int, ...]:  # fmt: skip
    out = tuple((i + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for i, kk, ss, pp, dd in zip(in_hw, k, s, p, d))
    if any(o <= 0 for o in out):
        window, size = "x".join(map(str, k)), "x".join(map(str, in_hw))
        raise ShapeMismatch(f"needs a window that fits the input: {window} does not fit {size}")
    return out


def _needs(shape: Shape, n: int, what: str) -> None:
    if len(shape) != n:
        raise ShapeMismatch(f"needs {what}, got shape {list(shape)}")


# *** the layers ***


def _linear_infer(shape: Shape, a: dict) -> Shape:
    if not shape:
        raise ShapeMismatch("needs at least one axis of features, got a scalar")
    return (*shape[:-1], a["out"])


def _conv2d_infer(shape: Shape, a: dict) -> Shape:
    _needs(shape, 3, "a (channels, height, width) input")
    if shape[0] % a["groups"] or a["out"] % a["groups"]:
        raise ShapeMismatch(f"groups={a['groups']} must divide the {shape[0]} input and {a['out']} output channels")
    hw = _spatial(shape[1:], _pair(a["kernel"]), _pair(a["stride"]), _pair(a["padding"]), _pair(a["dilation"]))
    return (a["out"], *hw)


def _conv2d_params(shape: Shape, a: dict) -> int:
    return a["out"] * (shape[0] // a["groups"]) * prod(_pair(a["kernel"])) + (a["out"] if a["bias"] else 0)


def _pool_infer(shape: Shape, a: dict) -> Shape:
    _needs(shape, 3, "a (channels, height, width) input")
    k = _pair(a["kernel"])
    s = _pair(a["stride"]) if a["stride"] is not None else k
    return (shape[0], *_spatial(shape[1:], k, s, (0, 0), (1, 1)))


def _norm_infer(shape: Shape, a: dict) -> Shape:
    if not shape:
        raise ShapeMismatch("needs at least a channel axis, got a scalar")
    return shape


def _embedding_infer(shape: Shape, a: dict) -> Shape:
    return (*shape, a["dim"])


def _reshape_infer(shape: Shape, a: dict) -> Shape:
    new = tuple(a["shape"])
    if prod(new) != prod(shape):
        raise ShapeMismatch(f"cannot reshape {list(shape)} ({prod(shape)} values) to {list(new)} ({prod(new)} values)")
    return new


def _attention_infer(shape: Shape, a: dict) -> Shape:
    _needs(shape, 2, "a (sequence, features) input")
    if shape[1] % a["heads"]:
        raise ShapeMismatch(f"needs features divisible by heads={a['heads']}, got {shape[1]}")
    return shape


def _attention_flops(i: Shape, o: Shape, a: dict) -> int:
    t, c = i
    return 2 * t * c * 4 * c + 4 * t * t * c  # NOTE: q, k, v and output projections, then scores and mixing


def _sequence_infer(shape: Shape, a: dict) -> Shape:
    _needs(shape, 2, "a (sequence, features) input")
    return shape


def _last_axis(shape: Shape, a: dict) -> Shape:
    if not shape:
        raise ShapeMismatch("needs at least one axis of features, got a scalar")
    return shape


KERNEL = Field("int", "window size (one number for a square window)", REQUIRED, min=1, max=1024)
ACTIVATIONS = ("relu", "gelu", "tanh", "sigmoid", "silu", "softplus", "elu", "mish", "hardswish", "relu6")


def _activation(name: str) -> LayerDef:
    return LayerDef(Entry(name, f"the {name} activation, elementwise", Section(name, "no arguments")), lambda s, a: s)


LAYERS: dict[str, LayerDef] = {
    d.entry.name: d
    for d in [
        LayerDef(Entry("linear", "fully connected layer on the last axis", Section("linear", "arguments", {
            "out": _size("number of output features"),
            "bias": Field("bool", "add a learned bias", True)}), shorthand="out"),
            _linear_infer, lambda s, a: s[-1] * a["out"] + (a["out"] if a["bias"] else 0),
            lambda i, o, a: 2 * prod(i) * a["out"]),
        LayerDef(Entry("conv2d", "2-d convolution over (channels, height, width)", Section("conv2d", "arguments", {
            "out": _size("number of output channels"),
            "kernel": KERNEL,
            "stride": Field("int", "step between windows", 1, min=1, max=1024),
            "padding": Field("int", "zeros added on each side", 0, min=0, max=1024),
            "dilation": Field("int", "spacing between window elements", 1, min=1, max=1024),
            "groups": Field("int", "split channels into this many independent groups", 1, min=1, max=1 << 16),
            "bias": Field("bool", "add a learned bias per output channel", True)})),
            _conv2d_infer, _conv2d_params,
            lambda i, o, a: 2 * prod(o) * (i[0] // a["groups"]) * prod(_pair(a["kernel"]))),
        LayerDef(Entry("maxpool", "maximum over windows of each channel", Section("maxpool", "arguments", {
            "kernel": KERNEL, "stride": Field("int", "step between windows (default: the kernel)", None, min=1)}),
            shorthand="kernel"), _pool_infer, flops=lambda i, o, a: prod(i)),
        LayerDef(Entry("avgpool", "mean over windows of each channel", Section("avgpool", "arguments", {
            "kernel": KERNEL, "stride": Field("int", "step between windows (default: the kernel)", None, min=1)}),
            shorthand="kernel"), _pool_infer, flops=lambda i, o, a: prod(i)),
        LayerDef(Entry("flatten", "all axes of an example into one", Section("flatten", "no arguments")),
                 lambda s, a: (prod(s),), flops=lambda i, o, a: 0),
        LayerDef(Entry("reshape", "the same values in a new shape", Section("reshape", "arguments", {
            "shape": Field("list", "the new per-example shape", REQUIRED, item=_size("an axis length"))}),
            shorthand="shape"), _reshape_infer, flops=lambda i, o, a: 0),
        LayerDef(Entry("dropout", "zero a random fraction of values while training", Section("dropout", "arguments", {
            "p": Field("float", "fraction of values dropped", 0.5, min=0.0, max=1.0)}), shorthand="p"),
            lambda s, a: s),
        LayerDef(Entry("batchnorm", "normalise each channel (axis 0) over the batch", Section("batchnorm", "args", {
            "eps": Field("float", "added to the variance", 1e-5, min=0.0, max=1.0),
            "momentum": Field("float", "running statistics update rate", 0.1, min=0.0, max=1.0)})),
            _norm_infer, lambda s, a: 2 * s[0], lambda i, o, a: 4 * prod(i)),
        LayerDef(Entry("layernorm", "normalise the last axis of each example", Section("layernorm", "arguments", {
            "eps": Field("float", "added to the variance", 1e-5, min=0.0, max=1.0)})),
            _norm_infer, lambda s, a: 2 * s[-1], lambda i, o, a: 5 * prod(i)),
        LayerDef(Entry("embedding", "a learned vector per integer token", Section("embedding", "arguments", {
            "vocab": _size("number of distinct tokens"),
            "dim": _size("length of each vector")})),
            _embedding_infer, lambda s, a: a["vocab"] * a["dim"], lambda i, o, a: 0),
        LayerDef(Entry("self_attention", "multi-head self-attention over a (sequence, features) input",
            Section("self_attention", "arguments", {
                "heads": _size("number of attention heads (must divide the features)"),
                "causal": Field("bool", "each position sees only itself and earlier ones", False),
                "dropout": Field("float", "dropout on the attention weights while training", 0.0, min=0.0, max=1.0)})),
            _attention_infer, lambda s, a: 4 * s[1] * s[1] + 4 * s[1], _attention_flops),
        LayerDef(Entry("mlp", "two linear layers with an activation between, on the last axis", Section("mlp", "args", {
            "hidden": _size("width of the hidden layer"),
            "activation": Field("str", "the activation in between", "gelu", choices=ACTIVATIONS)})),
            _last_axis, lambda s, a: 2 * s[-1] * a["hidden"] + a["hidden"] + s[-1],
            lambda i, o, a: 4 * prod(i) * a["hidden"]),
        LayerDef(Entry("positional", "adds a learned vector per position to a (sequence, features) input",
            Section("positional", "no arguments")),
            _sequence_infer, lambda s, a: prod(s)),
        *[_activation(n) for n in ACTIVATIONS],
    ]
}  # fmt: skip
