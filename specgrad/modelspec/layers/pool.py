"""Pooling over (channels, height, width) inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from specgrad.helpers import prod
from specgrad.modelspec.layers.base import KERNEL, Example, Layer, LayerDef, Shape, needs, pair
from specgrad.modelspec.layers.conv import spatial
from specgrad.modelspec.schema import Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step


def _stride(a: dict) -> int:
    return a["stride"] if a["stride"] is not None else a["kernel"]


def _pool_infer(shape: Shape, a: dict) -> Shape:
    needs(shape, 3, "a (channels, height, width) input")
    return (shape[0], *spatial(shape[1:], pair(a["kernel"]), pair(_stride(a)), (0, 0), (1, 1)))


def _build(method: str) -> Callable[[Shape, dict], Layer]:
    return lambda shape, a: lambda x: getattr(x, method)(pair(a["kernel"]), pair(_stride(a)))


def _onnx(op: str) -> Callable[[OnnxGraph, Step, str, str, str], None]:
    def lower(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
        g.node(
            op, g.to_float(x), out=out, kernel_shape=list(pair(s.args["kernel"])), strides=list(pair(_stride(s.args)))
        )

    return lower


def _pool(name: str, what: str, method: str, op: str) -> LayerDef:
    return LayerDef(
        Entry(name, f"{what} over windows of each channel", Section(name, "arguments", {
            "kernel": KERNEL, "stride": Field("int", "step between windows (default: the kernel)", None, min=1)}),
            shorthand="kernel"),
        infer=_pool_infer,
        build=_build(method),
        onnx=_onnx(op),
        examples=(Example({"kernel": 2}, (3, 6, 5), (3, 3, 2), 0), Example({"kernel": 3, "stride": 1}, (2, 5, 5),
                                                                               (2, 3, 3), 0)),
        flops=lambda i, o, a: prod(i),
    )  # fmt: skip


DEFS = [_pool("maxpool", "maximum", "max_pool2d", "MaxPool"), _pool("avgpool", "mean", "avg_pool2d", "AveragePool")]
