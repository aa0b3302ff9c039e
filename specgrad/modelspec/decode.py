"""A built sequence model run one new position at a time (what `specgrad generate` uses): each step as its kind's
`decode` rule in the registry says (a per-position layer as it is, a positional vector at the new index, a causal
self-attention through its key/value cache, an lstm or gru carrying its state), each op where `per_position` allows.
A model with a step that reads other positions (a convolution along the sequence, a non-causal attention, a flatten)
has no stepwise form: NotStepwise names that step.

Imports the public API (Tensor) and modelspec (builder, layers, ops, validate).
"""

from __future__ import annotations

from collections.abc import Callable

from specgrad import Tensor, no_grad
from specgrad.modelspec.builder import Model
from specgrad.modelspec.layers import LAYERS
from specgrad.modelspec.layers.base import words
from specgrad.modelspec.ops import OPS
from specgrad.modelspec.validate import ValidSpec

StepFn = Callable[[list[Tensor], Tensor], Tensor]  # NOTE: (the step's inputs at the new position, its index) -> output


class NotStepwise(ValueError):
    """A model that cannot compute one position at a time; the message names the step that reads other positions."""


class Decoder:
    """`spec`'s built `model` (one input, a sequence of `length` along axis 0, and one output) computing the output at
    one new position from the token there and the state its layers keep of the earlier positions. Positions are fed
    in order from 0; feeding position 0 again starts a new sequence. The same shapes at every position, so a TinyJit
    capture of one call serves them all."""

    def __init__(self, spec: ValidSpec, model: Model, batch: int = 1):
        if len(spec.inputs) != 1 or len(spec.outputs) != 1:
            raise NotStepwise("a model with one input (a sequence) and one output steps through it; this one has "
                              f"{len(spec.inputs)} inputs and {len(spec.outputs)} outputs")  # fmt: skip
        (self.input, (shape, _)), self.output = next(iter(spec.inputs.items())), spec.outputs[0]
        self.length = shape[0]
        layers = dict(model.steps)
        self.plan: list[tuple[str, StepFn, tuple[str, ...]]] = []
        self.state: list[Tensor] = []
        needed = {self.output}  # NOTE: a step the output does not read is left out, whatever its kind
        for s in reversed(spec.steps):
            if s.name in needed:
                needed |= set(s.srcs)
        for s in (s for s in spec.steps if s.name in needed):
            if s.kind == "layer":
                stepper = LAYERS[s.what].decode(layers[s.name], s.in_shapes[0], s.args, batch)  # type: ignore[arg-type]
                if stepper is None:
                    raise NotStepwise(f"{words(s.name, s.what)} does not compute one position at a time")
                self.state += stepper.state
                self.plan.append((s.name, lambda xs, pos, stepper=stepper: stepper(xs[0], pos), s.srcs))
            else:
                op, args = OPS[s.what], s.args
                if not op.per_position(list(s.in_shapes), args):
                    raise NotStepwise(f"{words(s.name, s.what)} joins values along the sequence")
                self.plan.append((s.name, lambda xs, pos, op=op, args=args: op.build(xs, args), s.srcs))

    @no_grad()  # NOTE: inference; a graph kept alive by a returned tensor would also share its nodes with the next call
    def __call__(self, tokens: Tensor, pos: Tensor) -> Tensor:
        """The output at position `pos` ((1,) int32) for `tokens` (batch, 1) there: (batch, 1, ...), realized with
        the state it updated."""
        env = {self.input: tokens}
        for name, step, srcs in self.plan:
            env[name] = step([env[s] for s in srcs], pos)
        out = env[self.output]
        Tensor.corealize([out, *self.state])
        return out
