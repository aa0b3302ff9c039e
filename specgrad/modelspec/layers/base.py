"""What a layer kind is: LayerDef (schema, shape rule, parameter count, FLOPs, builder, ONNX lowering, test cases),
and the small helpers the kinds share. Shapes are per example (no batch axis); built layers take a batch axis first.

Imports the public API (Tensor, nn) and modelspec.schema; the ONNX graph and Step are named for annotations only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from specgrad import Tensor
from specgrad.helpers import prod
from specgrad.modelspec.schema import REQUIRED, Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step

Shape = tuple[int, ...]
Layer = Callable[[Tensor], Tensor]
# NOTE: (graph, step, the step's state-dict key prefix, input value, output value): add nodes computing out from x
OnnxLowering = Callable[["OnnxGraph", "Step", str, str, str], None]


class ShapeMismatch(ValueError):
    """A layer that cannot take the shape it is given; the message says what it needs."""


class Stepper:
    """A built layer of a sequence model computing one new position at a time (specgrad generate): its input is the
    new position, (batch, 1, ...), and `pos`, that position's index, (1,) int32. What it keeps of earlier positions is
    `state`: tensors it updates in place (assign), so a TinyJit capture of a step replays with the state it left."""

    state: tuple[Tensor, ...] = ()

    def __call__(self, x: Tensor, pos: Tensor) -> Tensor:
        raise NotImplementedError


class PerPosition(Stepper):
    """A layer whose output at a position reads only that position: applied to the new position as it is."""

    def __init__(self, layer: Layer):
        self.layer = layer

    def __call__(self, x: Tensor, pos: Tensor) -> Tensor:
        return self.layer(x)


# NOTE: (built layer, per-example input shape, args, batch) -> how it steps, or None where an output position reads
# other positions (then a model steps only through its whole window); the sequence is axis 0 of each example
Decode = Callable[[Layer, Shape, dict[str, Any], int], Stepper | None]


def per_position(layer: Layer, shape: Shape, a: dict[str, Any], batch: int) -> Stepper:
    """An elementwise kind, or one that reads one token at a time (embedding)."""
    return PerPosition(layer)


def per_position_on_features(layer: Layer, shape: Shape, a: dict[str, Any], batch: int) -> Stepper | None:
    """A kind acting on the last axis: per position when that is not the sequence itself."""
    return PerPosition(layer) if len(shape) >= 2 else None


def state_zeros(shape: Shape, like: Tensor) -> Tensor:
    """Zeros of `like`'s dtype and device in a buffer of their own, for a Stepper's state: never one the lazy cache
    could hand to another tensor as well (an assign into such a shared buffer would not be in place)."""
    return Tensor(np.zeros(shape, like.dtype.np), device=like.device)


def at_position(length: int, pos: Tensor) -> Tensor:
    """(length,) bool: True at index `pos` ((1,) int32) alone."""
    return Tensor.arange(length) == pos


WEIGHT_KEYS: dict[str, Field] = {
    "trainable": Field("bool", "train this layer's weights (false: they keep their initial or init: values)", True),
    "lr_scale": Field("float", "multiplies the learning rate of this layer's weights", 1.0, min=0.0, max=1000.0),
    "tie": Field("str", "use the weight of the named layer above (same shape): one tensor, trained and counted once",
                 None),
    "weight_std": Field("float", "draw this layer's weight from a normal distribution with this standard deviation "
                        "(none: the layer's own initialisation, as PyTorch's)", None, min=0.0, max=100.0),
}  # fmt: skip


def defaults(section: Section) -> dict[str, Any]:
    return {k: None if f.required else f.default for k, f in section.fields.items()}


@dataclass(frozen=True)
class Example:
    """A test case of a layer kind: its arguments as a spec writes them, an input shape (and dtype), and what
    validation must find (output shape, parameter count). tests/modelspec/test_registry.py builds, runs and exports
    every example and compares the results."""

    args: dict[str, Any]
    shape: Shape
    out: Shape
    params: int
    dtype: str = "float32"


@dataclass(frozen=True)
class LayerDef:
    """One layer kind, all of it: `entry` (name, description, arguments with types, ranges and docs), `infer` (the
    output shape, or ShapeMismatch), `weights` (the shape of each trainable tensor, by its state-dict key within the
    layer), `flops` (per example; a multiply-add counts 2), `build` (an nn layer or function for a batch), `onnx` (its
    ONNX nodes), `saved` (values one example keeps for backward: the output, and the inner values of a kind that has
    them), `decode` (how a built layer computes one new position of a sequence: a Stepper, or None), `examples` (its
    test cases) and `notes` (longer docs, such as axis conventions). The C export needs nothing per kind: it compiles
    the kernels the built layer runs."""

    entry: Entry
    infer: Callable[[Shape, dict[str, Any]], Shape]
    build: Callable[[Shape, dict[str, Any]], Layer]
    onnx: OnnxLowering
    examples: tuple[Example, ...]
    weights: Callable[[Shape, dict[str, Any]], dict[str, Shape]] = lambda shape, a: {}
    flops: Callable[[Shape, Shape, dict[str, Any]], int] = lambda i, o, a: prod(o)
    # NOTE: values one example keeps for the backward pass (the memory check): the output, unless a kind says more
    saved: Callable[[Shape, Shape, dict[str, Any]], int] = lambda i, o, a: prod(o)
    decode: Decode = lambda layer, shape, a, batch: None
    notes: str = field(default="")

    def __post_init__(self) -> None:
        # NOTE: a kind with weights also takes the keys that say how they train (modelspec/weights.py applies them)
        e = self.examples[0] if self.examples else None
        weights = self.weights(e.shape, {**defaults(self.entry.args), **e.args}) if e is not None else {}
        # NOTE: tie and weight_std act on the tensor named "weight"; a kind without one (mlp, lstm) takes neither
        keys = {k: f for k, f in WEIGHT_KEYS.items() if "weight" in weights or k in ("trainable", "lr_scale")}
        if weights:
            args = replace(self.entry.args, fields={**self.entry.args.fields, **keys})
            object.__setattr__(self, "entry", replace(self.entry, args=args))

    @property
    def name(self) -> str:
        return self.entry.name

    def params(self, shape: Shape, args: dict[str, Any]) -> int:
        """Trainable values of one layer of this kind taking `shape`."""
        return sum(prod(s) for s in self.weights(shape, args).values())


# *** argument fields and shape helpers the kinds share ***


def size_field(desc: str, default: Any = REQUIRED, lo: int = 1) -> Field:
    return Field("int", desc, default, min=lo, max=1 << 20)


KERNEL = Field("int", "window size (one number for a square window)", REQUIRED, min=1, max=1024)


def pair(x: int | list[int]) -> tuple[int, int]:
    return (x, x) if isinstance(x, int) else (x[0], x[1])


def needs(shape: Shape, n: int, what: str) -> None:
    if len(shape) != n:
        raise ShapeMismatch(f"needs {what}, got shape {list(shape)}")


def needs_features(shape: Shape) -> None:
    if not shape:
        raise ShapeMismatch("needs at least one axis of features, got a scalar")


def with_bias(weights: dict[str, Shape], bias: bool, *shapes: tuple[str, Shape]) -> dict[str, Shape]:
    """`weights` plus the bias tensors `shapes` when the layer has a bias."""
    return {**weights, **dict(shapes)} if bias else weights


def words(name: str, what: str | None = None) -> str:
    """How messages name a step: 'layer 3' in a layer list, "node 'attn'" in a graph; with its kind: 'layer 3
    (conv2d)'."""
    at = f"layer {name}" if name.isdigit() else f"node '{name}'"
    return f"{at} ({what})" if what else at


# *** ONNX pieces several kinds use ***


def onnx_linear(g: OnnxGraph, x: str, ndim: int, weight: str, bias: str, out: str | None = None) -> str:
    """x @ weight.T + bias (bias only when the model has it): Gemm on (batch, features), MatMul and Add on more
    axes."""
    b = [g.param(bias)] if g.has(bias) else []
    if ndim == 2:
        return g.node("Gemm", x, g.param(weight), *b, out=out, transB=1)
    y = g.node("MatMul", x, g.node("Transpose", g.param(weight), perm=[1, 0]), out=None if b else out)
    return g.node("Add", y, b[0], out=out) if b else y
