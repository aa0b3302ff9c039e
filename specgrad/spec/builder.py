"""Build a model from a validated spec with specgrad.nn; one builder per layer name in spec/layers.py.

Imports the public API (Tensor, nn) and spec.validate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specgrad import Tensor, nn
from specgrad.spec.layers import ACTIVATIONS, Shape
from specgrad.spec.validate import ValidSpec

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
    **{name: _activation(name) for name in ACTIVATIONS},
}  # fmt: skip


class SequentialModel:
    """The spec's layers applied in order to a batch; its parameters are the layers' tensors."""

    def __init__(self, layers: list[Layer]):
        self.layers = layers

    def __call__(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def build_model(spec: ValidSpec, seed: int | None = None) -> SequentialModel:
    """Fresh layers for a validated spec, initialised from its seed."""
    Tensor.manual_seed(spec.values["seed"] if seed is None else seed)
    return SequentialModel([BUILDERS[r.name](r.in_shape, r.args) for r in spec.rows])
