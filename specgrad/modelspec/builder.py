"""Build a model from a validated spec with specgrad.nn; one builder per layer name in spec/layers.py.

Imports the public API (Tensor, nn) and modelspec.validate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specgrad import Tensor, nn
from specgrad.modelspec.layers import ACTIVATIONS, Shape
from specgrad.modelspec.validate import ValidSpec

Layer = Callable[[Tensor], Tensor]


def _batchnorm(shape: Shape, a: dict[str, Any]) -> Layer:
    cls = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
    return cls(shape[0], eps=a["eps"], momentum=a["momentum"])


def _pool(kind: str) -> Callable[[Shape, dict[str, Any]], Layer]:
    def build(shape: Shape, a: dict[str, Any]) -> Layer:
        k, s = a["kernel"], a["stride"] if a["stride"] is not None else a["kernel"]
        return lambda x: getattr(x, kind)((k, k), (s, s))

    return build


def _activation(name: str) -> Callable[[Shape, dict[str, Any]], Layer]:
    return lambda shape, a: lambda x: getattr(x, name)()


# NOTE: shapes are per example; the built layers take a batch axis first
BUILDERS: dict[str, Callable[[Shape, dict[str, Any]], Layer]] = {
    "linear": lambda shape, a: nn.Linear(shape[-1], a["out"], bias=a["bias"]),
    "conv2d": lambda shape, a: nn.Conv2d(shape[0], a["out"], a["kernel"], stride=a["stride"], padding=a["padding"],
                                         dilation=a["dilation"], groups=a["groups"], bias=a["bias"]),
    "maxpool": _pool("max_pool2d"),
    "avgpool": _pool("avg_pool2d"),
    "flatten": lambda shape, a: lambda x: x.flatten(1),
    "reshape": lambda shape, a: lambda x: x.reshape(x.shape[0], *a["shape"]),
    "dropout": lambda shape, a: nn.Dropout(a["p"]),
    "batchnorm": _batchnorm,
    "layernorm": lambda shape, a: nn.LayerNorm(shape[-1], eps=a["eps"]),
    "embedding": lambda shape, a: nn.Embedding(a["vocab"], a["dim"]),
    "self_attention": lambda shape, a: nn.MultiHeadAttention(shape[1], a["heads"], dropout=a["dropout"],
                                                             causal=a["causal"]),
    "mlp": lambda shape, a: MLP(shape[-1], a["hidden"], a["activation"]),
    "positional": lambda shape, a: Positional(*shape),
    **{name: _activation(name) for name in ACTIVATIONS},
}  # fmt: skip


class MLP:
    """linear -> activation -> linear on the last axis, back to the input width."""

    def __init__(self, width: int, hidden: int, activation: str):
        self.fc1, self.fc2, self.activation = nn.Linear(width, hidden), nn.Linear(hidden, width), activation

    def __call__(self, x: Tensor) -> Tensor:
        return self.fc2(getattr(self.fc1(x), self.activation)())


class Positional:
    """A learned vector per position, added to a (batch, sequence, features) input."""

    def __init__(self, length: int, width: int):
        self.weight = Tensor.normal(length, width, std=0.02, requires_grad=True)

    def __call__(self, x: Tensor) -> Tensor:
        return x + self.weight


class Model:
    """A spec's model: each step (a layer or an op) applied to the values it takes, in order. Call it with the inputs
    in the order the spec names them; it returns the output, or a tuple of outputs."""

    def __init__(self, steps: list[tuple[str, Layer | None, str, tuple[str, ...]]], inputs: tuple[str, ...],
                 outputs: tuple[str, ...], axes: dict[str, int]):  # fmt: skip
        self.steps = [(name, layer) for name, layer, _, _ in steps]  # NOTE: the only place layers live (state dict)
        self._plan = [(name, op, srcs) for name, _, op, srcs in steps]
        self.input_names, self.output_names, self._axes = inputs, outputs, axes

    def __call__(self, *xs: Tensor) -> Tensor | tuple[Tensor, ...]:
        if len(xs) != len(self.input_names):
            raise ValueError(f"the model takes {len(self.input_names)} inputs ({', '.join(self.input_names)}), "
                             f"got {len(xs)}")  # fmt: skip
        env: dict[str, Tensor] = dict(zip(self.input_names, xs))
        for (name, op, srcs), (_, layer) in zip(self._plan, self.steps):
            args = [env[s] for s in srcs]
            env[name] = layer(args[0]) if layer is not None else _OPS[op](args, self._axes.get(name, -1))
        outs = tuple(env[o] for o in self.output_names)
        return outs[0] if len(outs) == 1 else outs


def _sum(xs: list[Tensor], axis: int) -> Tensor:
    ret = xs[0]
    for x in xs[1:]:
        ret = ret + x
    return ret


def _prod(xs: list[Tensor], axis: int) -> Tensor:
    ret = xs[0]
    for x in xs[1:]:
        ret = ret * x
    return ret


# NOTE: a per-example axis becomes a batch axis one further; negative axes count from the end either way
_OPS: dict[str, Callable[[list[Tensor], int], Tensor]] = {
    "add": _sum,
    "mul": _prod,
    "concat": lambda xs, axis: xs[0].cat(*xs[1:], dim=axis + 1 if axis >= 0 else axis),
}


def build_model(spec: ValidSpec, seed: int | None = None) -> Model:
    """Fresh layers for a validated spec, initialised from its seed."""
    Tensor.manual_seed(spec.values["seed"] if seed is None else seed)
    steps = [(s.name, BUILDERS[s.what](s.in_shapes[0], s.args) if s.kind == "layer" else None, s.what, s.srcs)
             for s in spec.steps]  # fmt: skip
    axes = {s.name: s.args["axis"] for s in spec.steps if s.kind == "op" and "axis" in s.args}
    return Model(steps, tuple(spec.inputs), spec.outputs, axes)
