"""Build a model from a validated spec with specgrad.nn: each layer step from its kind's builder in the registry
(modelspec.layers), each op from _OPS below.

Imports the public API (Tensor, nn), modelspec.layers and modelspec.validate.
"""

from __future__ import annotations

from collections.abc import Callable

from specgrad import Tensor
from specgrad.modelspec.layers import LAYERS, Layer
from specgrad.modelspec.validate import ValidSpec


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
    steps = [(s.name, LAYERS[s.what].build(s.in_shapes[0], s.args) if s.kind == "layer" else None, s.what, s.srcs)
             for s in spec.steps]  # fmt: skip
    axes = {s.name: s.args["axis"] for s in spec.steps if s.kind == "op" and "axis" in s.args}
    return Model(steps, tuple(spec.inputs), spec.outputs, axes)
