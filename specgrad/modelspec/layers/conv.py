"""Convolutions over (channels, *spatial) inputs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specgrad import nn
from specgrad.helpers import prod
from specgrad.modelspec.layers.base import (
    KERNEL,
    Example,
    LayerDef,
    Shape,
    ShapeMismatch,
    needs,
    pair,
    size_field,
    with_bias,
)
from specgrad.modelspec.schema import Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step


def spatial(in_hw: tuple[int, ...], k: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...], d: tuple[int, ...],
            ceil: bool = False) -> tuple[int, ...]:  # fmt: skip
    """Output lengths of a sliding window: floor((i + 2p - d(k-1) - 1) / s) + 1, or ceil with `ceil`."""
    out = tuple(-(-(i + 2 * pp - dd * (kk - 1) - 1) // ss) + 1 if ceil else (i + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                for i, kk, ss, pp, dd in zip(in_hw, k, s, p, d))  # fmt: skip
    if any(o <= 0 for o in out):
        window, size = "x".join(map(str, k)), "x".join(map(str, in_hw))
        raise ShapeMismatch(f"needs a window that fits the input: {window} does not fit {size}")
    return out


def _conv2d_infer(shape: Shape, a: dict) -> Shape:
    needs(shape, 3, "a (channels, height, width) input")
    if shape[0] % a["groups"] or a["out"] % a["groups"]:
        raise ShapeMismatch(f"groups={a['groups']} must divide the {shape[0]} input and {a['out']} output channels")
    hw = spatial(shape[1:], pair(a["kernel"]), pair(a["stride"]), pair(a["padding"]), pair(a["dilation"]))
    return (a["out"], *hw)


def _conv2d_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    a = s.args
    b = [g.param(p + "bias")] if a["bias"] else []
    attrs = {"kernel_shape": [a["kernel"]] * 2, "strides": [a["stride"]] * 2, "pads": [a["padding"]] * 4,
             "dilations": [a["dilation"]] * 2, "group": a["groups"]}  # fmt: skip
    g.node("Conv", g.to_float(x), g.param(p + "weight"), *b, out=out, **attrs)


CONV2D = LayerDef(
    Entry("conv2d", "2-d convolution over (channels, height, width)", Section("conv2d", "arguments", {
        "out": size_field("number of output channels"),
        "kernel": KERNEL,
        "stride": Field("int", "step between windows", 1, min=1, max=1024),
        "padding": Field("int", "zeros added on each side", 0, min=0, max=1024),
        "dilation": Field("int", "spacing between window elements", 1, min=1, max=1024),
        "groups": Field("int", "split channels into this many independent groups", 1, min=1, max=1 << 16),
        "bias": Field("bool", "add a learned bias per output channel", True)})),
    infer=_conv2d_infer,
    build=lambda shape, a: nn.Conv2d(shape[0], a["out"], a["kernel"], stride=a["stride"], padding=a["padding"],
                                     dilation=a["dilation"], groups=a["groups"], bias=a["bias"]),
    onnx=_conv2d_onnx,
    examples=(Example({"out": 4, "kernel": 3}, (2, 7, 6), (4, 5, 4), 4 * 2 * 9 + 4),
              Example({"out": 4, "kernel": 3, "stride": 2, "padding": 2, "dilation": 2, "groups": 2, "bias": False},
                      (2, 9, 9), (4, 5, 5), 4 * 1 * 9)),
    weights=lambda s, a: with_bias({"weight": (a["out"], s[0] // a["groups"], *pair(a["kernel"]))}, a["bias"],
                                   ("bias", (a["out"],))),
    flops=lambda i, o, a: 2 * prod(o) * (i[0] // a["groups"]) * prod(pair(a["kernel"])),
)  # fmt: skip

DEFS = [CONV2D]
