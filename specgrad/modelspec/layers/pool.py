"""Pooling over (channels, *spatial) inputs: maxpool and avgpool (sliding windows, PyTorch's padding and ceil_mode),
global_avgpool and adaptive_avgpool (PyTorch's AdaptiveAvgPool2d bins)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from specgrad import Tensor
from specgrad.helpers import prod
from specgrad.modelspec.layers.base import KERNEL, Example, Layer, LayerDef, Shape, ShapeMismatch, needs, size_field
from specgrad.modelspec.schema import REQUIRED, Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step


# *** maxpool and avgpool ***


def _stride(a: dict) -> int:
    return a["stride"] if a["stride"] is not None else a["kernel"]


def _out_len(i: int, k: int, s: int, p: int, ceil: bool) -> int:
    """PyTorch's pooling output length: with ceil_mode, a last window that would start in the right padding is
    dropped."""
    n = i + 2 * p - k
    o = (-(-n // s) if ceil else n // s) + 1
    return o - 1 if ceil and (o - 1) * s >= i + p else o


def _windows(shape: Shape, a: dict) -> list[tuple[int, int, int, int, int]]:
    """Per spatial axis: (input length, kernel, stride, padding, ceil extension), the extension being the values
    past the right padding that ceil_mode's last window reads."""
    k, s, p = a["kernel"], _stride(a), a["padding"]
    return [(i, k, s, p, max(0, (_out_len(i, k, s, p, a["ceil_mode"]) - 1) * s + k - i - 2 * p)) for i in shape[1:]]


def _pool_infer(shape: Shape, a: dict) -> Shape:
    needs(shape, 3, "a (channels, height, width) input")
    k, p = a["kernel"], a["padding"]
    if 2 * p > k:
        raise ShapeMismatch(f"needs padding at most half the kernel (as PyTorch): padding {p} with kernel {k}")
    if any(i + 2 * p < k for i in shape[1:]):
        size = "x".join(str(i + 2 * p) for i in shape[1:])
        raise ShapeMismatch(f"needs a window that fits the input: {k}x{k} does not fit {size}"
                            + (f" (with padding {p})" if p else ""))  # fmt: skip
    return (shape[0], *(_out_len(i, k, s, p, a["ceil_mode"]) for i, k, s, p, _ in _windows(shape, a)))


def _padded(x: Tensor, w: list[tuple[int, int, int, int, int]], fill: float) -> Tensor:
    return x.pad([None, None, *((p, p + e) for _, _, _, p, e in w)], value=fill)


def _maxpool(shape: Shape, a: dict) -> Layer:
    w, k, s = _windows(shape, a), a["kernel"], _stride(a)
    return lambda x: _padded(x, w, -math.inf).max_pool2d((k, k), (s, s))


def _avgpool(shape: Shape, a: dict) -> Layer:
    w, k, s = _windows(shape, a), a["kernel"], _stride(a)
    if not any(e for *_, e in w):
        return lambda x: _padded(x, w, 0.0).avg_pool2d((k, k), (s, s))
    # NOTE: the padding counts in the divisor (count_include_pad), the ceil extension does not (as PyTorch)
    scale = k * k / _counts(w, _pool_infer(shape, a)[1:])
    return lambda x: _padded(x, w, 0.0).avg_pool2d((k, k), (s, s)) * Tensor(scale, device=x.device)


def _counts(w: list[tuple[int, int, int, int, int]], out: Shape) -> np.ndarray:
    """How many values of the padded input (not of the ceil extension) each window holds: (out_h, out_w)."""
    per_axis = [[min(o * s + k, i + 2 * p) - o * s for o in range(n)] for (i, k, s, p, _), n in zip(w, out)]
    return np.outer(*per_axis).astype(np.float32)


def _onnx(op: str) -> Callable[[OnnxGraph, Step, str, str, str], None]:
    def lower(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
        a, w = s.args, _windows(s.in_shapes[0], s.args)
        # NOTE: ceil_mode is lowered as extra padding at the end, not as the ceil_mode attribute: opset 17's shape
        # inference does not drop a last window that starts in the padding, as PyTorch and onnxruntime do
        pads = [pp for *_, pp, _ in w] + [pp + e for *_, pp, e in w]
        attrs = {"kernel_shape": [a["kernel"]] * 2, "strides": [_stride(a)] * 2, "pads": pads}
        if op == "MaxPool":
            g.node(op, g.to_float(x), out=out, **attrs)
            return
        extended = any(e for *_, e in w)
        y = g.node(op, g.to_float(x), out=None if extended else out, count_include_pad=1, **attrs)
        if extended:  # NOTE: AveragePool divided every window by kernel^2; the ceil extension must not count
            g.node("Mul", y, g.const(a["kernel"] ** 2 / _counts(w, s.out_shape[1:])), out=out)

    return lower


def _pool(name: str, what: str, build: Callable[[Shape, dict], Layer], op: str) -> LayerDef:
    return LayerDef(
        Entry(name, f"{what} over windows of each channel", Section(name, "arguments", {
            "kernel": KERNEL,
            "stride": Field("int", "step between windows (default: the kernel)", None, min=1),
            "padding": Field("int", f"{PADDED[op]} added on each side, at most half the kernel", 0, min=0, max=512),
            "ceil_mode": Field("bool", "round the output size up: a last, partial window at the end is kept", False)}),
            shorthand="kernel"),
        infer=_pool_infer,
        build=build,
        onnx=_onnx(op),
        examples=(Example({"kernel": 2}, (3, 6, 5), (3, 3, 2), 0),
                  Example({"kernel": 3, "stride": 1}, (2, 5, 5), (2, 3, 3), 0),
                  Example({"kernel": 3, "stride": 2, "padding": 1}, (2, 8, 7), (2, 4, 4), 0),
                  Example({"kernel": 3, "stride": 2, "ceil_mode": True}, (2, 8, 7), (2, 4, 3), 0),
                  Example({"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (2, 8, 7), (2, 5, 4), 0),
                  Example({"kernel": 2, "stride": 3, "padding": 1, "ceil_mode": True}, (1, 9, 10), (1, 4, 4), 0)),
        flops=lambda i, o, a: prod(o) * a["kernel"] ** 2,
        notes=POOL_NOTES[op],
    )  # fmt: skip


PADDED = {"MaxPool": "-infinity", "AveragePool": "zeros"}
POOL_NOTES = {
    "MaxPool": "Padding reads as -infinity, so it never wins. With `ceil_mode` the output size rounds up, but a last "
    "window that would start in the right padding is dropped, as in PyTorch. ResNet's stem is "
    "`maxpool: {kernel: 3, stride: 2, padding: 1}`.",
    "AveragePool": "The padding counts as zeros in the mean (PyTorch's count_include_pad=True). With `ceil_mode` the "
    "output size rounds up and a last window may reach past the right padding: that part is not counted in the "
    "divisor, and a window that would start in the right padding is dropped, as in PyTorch.",
}


# *** global and adaptive average pooling ***


def _global_infer(shape: Shape, a: dict) -> Shape:
    if len(shape) < 2:
        raise ShapeMismatch(f"needs a (channels, *spatial) input with at least one spatial axis, got {list(shape)}")
    return shape[:1]


def _global_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    g.node("Flatten", g.node("GlobalAveragePool", g.to_float(x)), out=out, axis=1)


GLOBAL_AVGPOOL = LayerDef(
    Entry("global_avgpool", "the mean of each channel over all its spatial axes: (C, *spatial) -> (C,)",
          Section("global_avgpool", "no arguments")),
    infer=_global_infer,
    build=lambda shape, a: lambda x: x.mean(tuple(range(2, x.ndim))),
    onnx=_global_onnx,
    examples=(Example({}, (3, 5, 4), (3,), 0), Example({}, (4, 7), (4,), 0)),
    flops=lambda i, o, a: prod(i),
    notes="The spatial axes are gone from the output, so a classifier head needs no flatten: "
    "`global_avgpool` then `linear: <classes>` (ResNet's and MobileNet's head). For a (C, 1, 1) output write "
    "`adaptive_avgpool: [1, 1]`.",
)  # fmt: skip


def _bins(n_in: int, n_out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive pooling bins: [floor(i * n_in / n_out), ceil((i + 1) * n_in / n_out))."""
    return [(i * n_in // n_out, -(-(i + 1) * n_in // n_out)) for i in range(n_out)]


def _adaptive_infer(shape: Shape, a: dict) -> Shape:
    needs(shape, 3, "a (channels, height, width) input")
    if len(a["size"]) != 2:
        raise ShapeMismatch(f"needs size as two numbers [height, width], got {a['size']}")
    return (shape[0], *a["size"])


def _bin_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in): row i averages bin i."""
    m = np.zeros((n_out, n_in), np.float32)
    for i, (lo, hi) in enumerate(_bins(n_in, n_out)):
        m[i, lo:hi] = 1 / (hi - lo)
    return m


def _adaptive(shape: Shape, a: dict) -> Layer:
    (h_in, w_in), (h, w) = shape[1:], a["size"]
    if h_in % h == 0 and w_in % w == 0:
        return lambda x: x.reshape(*x.shape[:2], h, h_in // h, w, w_in // w).mean((3, 5))
    # NOTE: bins that overlap or differ in length: (h, H) @ x @ (W, w), as the ONNX export computes it
    return lambda x: (
        Tensor(_bin_matrix(h_in, h), device=x.device) @ (x @ Tensor(_bin_matrix(w_in, w).T, device=x.device))
    )


def _adaptive_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    (h_in, w_in), (h, w) = s.in_shapes[0][1:], s.args["size"]
    if h_in % h == 0 and w_in % w == 0:
        k = [h_in // h, w_in // w]
        g.node("AveragePool", g.to_float(x), out=out, kernel_shape=k, strides=k)
        return
    rows = g.node("MatMul", g.to_float(x), g.const(_bin_matrix(w_in, w).T))  # (N, C, H, w)
    g.node("MatMul", g.const(_bin_matrix(h_in, h)), rows, out=out)


ADAPTIVE_AVGPOOL = LayerDef(
    Entry("adaptive_avgpool", "mean over each of size[0] x size[1] bins of each channel, whatever the input size",
          Section("adaptive_avgpool", "arguments", {
              "size": Field("list", "output [height, width]", REQUIRED, item=size_field("an output length"))}),
          shorthand="size"),
    infer=_adaptive_infer,
    build=_adaptive,
    onnx=_adaptive_onnx,
    examples=(Example({"size": [1, 1]}, (3, 5, 4), (3, 1, 1), 0), Example({"size": [2, 3]}, (2, 6, 9), (2, 2, 3), 0),
              Example({"size": [3, 2]}, (2, 7, 5), (2, 3, 2), 0), Example({"size": [4, 3]}, (1, 3, 2), (1, 4, 3), 0)),
    flops=lambda i, o, a: prod(i) if i[1] % o[1] == 0 and i[2] % o[2] == 0 else 2 * prod(i) * o[2] + 2 * prod(o) * i[1],
    notes="The bins are PyTorch's AdaptiveAvgPool2d bins: bin i of an axis of length n covers [floor(i n / size), "
    "ceil((i + 1) n / size)), so when size does not divide n the bins differ in length and may overlap, and a size "
    "larger than the input repeats values.",
)  # fmt: skip

DEFS = [
    _pool("maxpool", "maximum", _maxpool, "MaxPool"),
    _pool("avgpool", "mean", _avgpool, "AveragePool"),
    GLOBAL_AVGPOOL,
    ADAPTIVE_AVGPOOL,
]
