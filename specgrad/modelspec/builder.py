"""Build a model from a validated spec with specgrad.nn: each layer step from its kind's builder in the registry
(modelspec.layers), each op from its definition (modelspec.ops).

Imports the public API (Tensor, nn.state) and modelspec (layers, validate, weights).
"""

from __future__ import annotations

from typing import Any

from specgrad import Tensor
from specgrad.modelspec.layers import LAYERS, Layer
from specgrad.modelspec.ops import OPS
from specgrad.modelspec.validate import ValidSpec, run_steps
from specgrad.modelspec.weights import given_init, init_tensors, tie_target, weight_names
from specgrad.nn.state import get_state_dict, load_state_dict


class Model:
    """A spec's model: each step (a layer or an op) applied to the values it takes, in order. Call it with the inputs
    in the order the spec names them; it returns the output, or a tuple of outputs."""

    def __init__(self, steps: list[tuple[str, Layer | None, str, tuple[str, ...]]], inputs: tuple[str, ...],
                 outputs: tuple[str, ...], op_args: dict[str, dict[str, Any]]):  # fmt: skip
        self.steps = [(name, layer) for name, layer, _, _ in steps]  # NOTE: the only place layers live (state dict)
        self._plan = [(name, op, srcs) for name, _, op, srcs in steps]
        self.input_names, self.output_names, self._op_args = inputs, outputs, op_args
        self.lr_scales: dict[int, float] = {}  # NOTE: id(weight) -> its learning-rate multiplier, where not 1

    def __call__(self, *xs: Tensor) -> Tensor | tuple[Tensor, ...]:
        if len(xs) != len(self.input_names):
            raise ValueError(f"the model takes {len(self.input_names)} inputs ({', '.join(self.input_names)}), "
                             f"got {len(xs)}")  # fmt: skip
        env: dict[str, Tensor] = dict(zip(self.input_names, xs))
        for (name, op, srcs), (_, layer) in zip(self._plan, self.steps):
            args = [env[s] for s in srcs]
            env[name] = layer(args[0]) if layer is not None else OPS[op].build(args, self._op_args[name])
        outs = tuple(env[o] for o in self.output_names)
        return outs[0] if len(outs) == 1 else outs

    def outputs(self, *xs: Tensor) -> tuple[Tensor, ...]:
        """The outputs in the order the spec names them, a tuple also when there is one."""
        out = self(*xs)
        return out if isinstance(out, tuple) else (out,)


def build_model(spec: ValidSpec, seed: int | None = None, init: bool = False) -> Model:
    """Fresh layers for a validated spec, initialised from its seed, with tied weights shared, frozen weights not
    trainable, and each weight's learning-rate scale in Model.lr_scales. `init` also loads the spec's init: weights
    (training a new run does; running or exporting trained weights does not need them)."""
    Tensor.manual_seed(spec.values["seed"] if seed is None else seed)
    layers = {s.name: LAYERS[s.what].build(s.in_shapes[0], s.args) for s in spec.steps if s.kind == "layer"}
    for s in spec.steps:
        if s.kind == "layer" and (std := s.args.get("weight_std")) is not None:  # NOTE: validated: it has a weight
            shape = LAYERS[s.what].weights(s.in_shapes[0], s.args)["weight"]
            layers[s.name].weight = Tensor.normal(*shape, std=std, requires_grad=True)  # type: ignore[attr-defined]
    ties = {s.name: t for s in spec.steps if s.kind == "layer" and (t := tie_target(s, set(layers))) is not None}
    for name, target in ties.items():
        layers[name].weight = layers[target].weight  # type: ignore[attr-defined]  # NOTE: shapes were validated
    steps = [(s.name, layers.get(s.name), s.what, s.srcs) for s in spec.steps]
    op_args = {s.name: s.args for s in spec.steps if s.kind == "op"}
    model = Model(steps, tuple(spec.inputs), spec.outputs, op_args)
    for s in spec.steps:
        if s.kind != "layer":
            continue
        state = get_state_dict(layers[s.name])
        for key in LAYERS[s.what].weights(s.in_shapes[0], s.args):
            if key == "weight" and s.name in ties:
                continue  # NOTE: a tied weight trains as the layer it is tied to says
            if not s.args.get("trainable", True):
                state[key].requires_grad = False
            if s.args.get("lr_scale", 1.0) != 1.0:
                model.lr_scales[id(state[key])] = s.args["lr_scale"]
    if init and given_init(spec.node("init")) is not None:
        _load_init(spec, model)
    return model


def _load_init(spec: ValidSpec, model: Model) -> None:
    """The init: file's tensors copied into the model's weights (names and shapes were checked by validation)."""
    index = {s.name: i for i, s in enumerate(spec.steps)}
    names = weight_names(spec.steps)
    tensors = init_tensors(spec.node("init"), spec.path, names, run_steps)
    state = {f"steps.{index[names[k][0].name]}.1.{names[k][1]}": v for k, v in tensors.items()}
    load_state_dict(model, state, strict=False)
