"""Convolutions over (channels, *spatial) inputs: conv1d, conv2d and conv_transpose2d, with PyTorch's arguments and
weight layouts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from specgrad import nn
from specgrad.helpers import prod
from specgrad.modelspec.layers.base import (
    KERNEL,
    Example,
    Layer,
    LayerDef,
    OnnxLowering,
    Shape,
    ShapeMismatch,
    needs,
    size_field,
    with_bias,
)
from specgrad.modelspec.schema import Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step

AXES = {1: "(channels, length)", 2: "(channels, height, width)"}


def spatial(in_hw: Shape, k: int, s: int, p: int, d: int) -> Shape:
    """Output lengths of a sliding window: floor((i + 2p - d(k-1) - 1) / s) + 1."""
    out = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i in in_hw)
    if any(o <= 0 for o in out):
        window, size = "x".join([str(d * (k - 1) + 1)] * len(in_hw)), "x".join(str(i + 2 * p) for i in in_hw)
        raise ShapeMismatch(f"needs a window that fits the input: {window} does not fit {size}"
                            + (f" (with padding {p})" if p else ""))  # fmt: skip
    return out


def _check_groups(shape: Shape, a: dict) -> None:
    if shape[0] % a["groups"] or a["out"] % a["groups"]:
        raise ShapeMismatch(f"needs groups={a['groups']} to divide the {shape[0]} input and {a['out']} output channels")


def _fields(out: str, padding: str) -> dict[str, Field]:
    return {
        "out": size_field(out),
        "kernel": KERNEL,
        "stride": Field("int", "step between windows", 1, min=1, max=1024),
        "padding": Field("int", padding, 0, min=0, max=1024),
        "dilation": Field("int", "spacing between window elements", 1, min=1, max=1024),
        "groups": Field("int", "split channels into this many independent groups", 1, min=1, max=1 << 16),
        "bias": Field("bool", "add a learned bias per output channel", True),
    }


def _weights(weight: Shape, a: dict) -> dict[str, Shape]:
    return with_bias({"weight": weight}, a["bias"], ("bias", (a["out"],)))


def _onnx_attrs(a: dict, dims: int) -> dict:
    return {"kernel_shape": [a["kernel"]] * dims, "strides": [a["stride"]] * dims, "pads": [a["padding"]] * 2 * dims,
            "dilations": [a["dilation"]] * dims, "group": a["groups"]}  # fmt: skip


def _onnx(op: str, dims: int, **more: str) -> OnnxLowering:
    def lower(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
        b = [g.param(p + "bias")] if s.args["bias"] else []
        extra = {k: [s.args[v]] * dims for k, v in more.items()}
        g.node(op, g.to_float(x), g.param(p + "weight"), *b, out=out, **_onnx_attrs(s.args, dims), **extra)

    return lower


# *** conv1d and conv2d ***


def _conv_infer(dims: int) -> Callable[[Shape, dict], Shape]:
    def infer(shape: Shape, a: dict) -> Shape:
        needs(shape, dims + 1, f"a {AXES[dims]} input")
        _check_groups(shape, a)
        return (a["out"], *spatial(shape[1:], a["kernel"], a["stride"], a["padding"], a["dilation"]))

    return infer


def _conv_build(dims: int) -> Callable[[Shape, dict], Layer]:
    cls = nn.Conv1d if dims == 1 else nn.Conv2d

    def build(shape: Shape, a: dict) -> Layer:
        return cls(shape[0], a["out"], a["kernel"], stride=a["stride"], padding=a["padding"], dilation=a["dilation"],
                   groups=a["groups"], bias=a["bias"])  # fmt: skip

    return build


def _conv(dims: int, examples: tuple[Example, ...]) -> LayerDef:
    name = f"conv{dims}d"
    return LayerDef(
        Entry(
            name,
            f"{dims}-d convolution over {AXES[dims]}",
            Section(name, "arguments", _fields("number of output channels", "zeros added on each side")),
        ),
        infer=_conv_infer(dims),
        build=_conv_build(dims),
        onnx=_onnx("Conv", dims),
        examples=examples,
        weights=lambda s, a: _weights((a["out"], s[0] // a["groups"], *[a["kernel"]] * dims), a),
        flops=lambda i, o, a: 2 * prod(o) * (i[0] // a["groups"]) * a["kernel"] ** dims,
        notes=f"The weight is (out, in / groups, {', '.join(['kernel'] * dims)}), as PyTorch's Conv{dims}d.",
    )


CONV1D = _conv(1, (
    Example({"out": 4, "kernel": 3}, (2, 9), (4, 7), 4 * 2 * 3 + 4),
    Example({"out": 6, "kernel": 3, "stride": 2, "padding": 2, "dilation": 2, "groups": 3, "bias": False}, (3, 11),
            (6, 6), 6 * 1 * 3),
))  # fmt: skip

CONV2D = _conv(2, (
    Example({"out": 4, "kernel": 3}, (2, 7, 6), (4, 5, 4), 4 * 2 * 9 + 4),
    Example({"out": 4, "kernel": 3, "stride": 2, "padding": 2, "dilation": 2, "groups": 2, "bias": False}, (2, 9, 9),
            (4, 5, 5), 4 * 1 * 9),
))  # fmt: skip


# *** conv_transpose2d ***


def _transpose_len(i: int, a: dict) -> int:
    return (i - 1) * a["stride"] - 2 * a["padding"] + a["dilation"] * (a["kernel"] - 1) + a["output_padding"] + 1


def _transpose_infer(shape: Shape, a: dict) -> Shape:
    needs(shape, 3, f"a {AXES[2]} input")
    _check_groups(shape, a)
    if a["output_padding"] >= max(a["stride"], a["dilation"]):
        raise ShapeMismatch(f"needs output_padding smaller than the stride or the dilation (as PyTorch): "
                            f"output_padding {a['output_padding']} with stride {a['stride']} and dilation "
                            f"{a['dilation']}")  # fmt: skip
    out = tuple(_transpose_len(i, a) for i in shape[1:])
    if any(o <= 0 for o in out):
        raise ShapeMismatch(f"needs less padding: padding {a['padding']} leaves an output of {'x'.join(map(str, out))}")
    return (a["out"], *out)


CONV_TRANSPOSE2D = LayerDef(
    Entry("conv_transpose2d", "transposed 2-d convolution over (channels, height, width): the gradient of conv2d, "
          "which grows the image by its stride", Section("conv_transpose2d", "arguments", {
              **_fields("number of output channels", "removed from each side of the output (conv2d's padding)"),
              "output_padding": Field("int", "added to one side of the output (smaller than stride or dilation)", 0,
                                      min=0, max=1024)})),
    infer=_transpose_infer,
    build=lambda shape, a: nn.ConvTranspose2d(shape[0], a["out"], a["kernel"], stride=a["stride"],
                                              padding=a["padding"], output_padding=a["output_padding"],
                                              dilation=a["dilation"], groups=a["groups"], bias=a["bias"]),
    onnx=_onnx("ConvTranspose", 2, output_padding="output_padding"),
    examples=(Example({"out": 3, "kernel": 3}, (2, 4, 5), (3, 6, 7), 2 * 3 * 9 + 3),
              Example({"out": 4, "kernel": 2, "stride": 2}, (3, 4, 3), (4, 8, 6), 3 * 4 * 4 + 4),
              Example({"out": 4, "kernel": 3, "stride": 2, "padding": 1, "output_padding": 1, "dilation": 2,
                       "groups": 2, "bias": False}, (2, 5, 4), (4, 12, 10), 2 * 2 * 9)),
    weights=lambda s, a: _weights((s[0], a["out"] // a["groups"], a["kernel"], a["kernel"]), a),
    flops=lambda i, o, a: 2 * prod(i) * (a["out"] // a["groups"]) * a["kernel"] ** 2,
    notes="Each output length is (in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1, so "
    "`{kernel: 2, stride: 2}` or `{kernel: 3, stride: 2, padding: 1, output_padding: 1}` doubles the height and width. "
    "The weight is (in, out / groups, kernel, kernel), as PyTorch's ConvTranspose2d.",
)  # fmt: skip

DEFS = [CONV1D, CONV2D, CONV_TRANSPOSE2D]
