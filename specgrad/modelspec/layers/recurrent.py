"""Recurrent layers over a (sequence, features) input: lstm and gru (nn.LSTM and nn.GRU, PyTorch's weights), giving
every step's hidden state or the last one. The batch axis comes first when built; each batch starts from zeros."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from specgrad import Tensor, nn
from specgrad.modelspec.layers.base import (
    Example,
    LayerDef,
    Shape,
    ShapeMismatch,
    Stepper,
    needs,
    size_field,
    state_zeros,
)
from specgrad.modelspec.schema import Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step


class _Output:
    """The spec's view of an nn recurrent layer: its output alone, every step's hidden state or the last one's."""

    states = 1  # NOTE: tensors of state: h (and c for an lstm), each (layers, batch, hidden)

    def __init__(self, features: int, a: dict[str, Any]):
        super().__init__(features, a["hidden"], a["layers"], a["bias"])  # type: ignore[call-arg]
        self.last = a["return"] == "last"

    def __call__(self, x: Tensor) -> Tensor:
        y = super().__call__(x)[0]  # type: ignore[misc]
        return y[:, -1] if self.last else y

    def carried(self, x: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
        """Every step's hidden state of x (batch, steps, features) from `state`, and the state after the last."""
        y, after = super().__call__(x, state if self.states > 1 else state[0])  # type: ignore[misc]
        return y, after if isinstance(after, tuple) else (after,)


class LSTM(_Output, nn.LSTM):
    states = 2


class GRU(_Output, nn.GRU):
    pass


class CarriedState(Stepper):
    """An lstm or gru one new position at a time: the state after the previous position is kept (in place) and read
    by the next; position 0 starts from zeros, as every training window did."""

    def __init__(self, layer: _Output, batch: int):
        self.layer, shape = layer, (layer.num_layers, batch, layer.hidden_size)  # type: ignore[attr-defined]
        w = layer.weight_ih_l0  # type: ignore[attr-defined]
        self.state = tuple(state_zeros(shape, w) for _ in range(layer.states))

    def __call__(self, x: Tensor, pos: Tensor) -> Tensor:
        y, after = self.layer.carried(x, tuple((pos == 0).where(0, s) for s in self.state))
        for s, new in zip(self.state, after):
            s.assign(new)
        return y


MAX_STEPS = 2048  # NOTE: sequence x layers; 1000 x 2 takes a minute and 0.8 GB to capture one training step


def _infer(shape: Shape, a: dict) -> Shape:
    needs(shape, 2, "a (sequence, features) input")
    if shape[0] * a["layers"] > MAX_STEPS:
        raise ShapeMismatch(f"needs at most {MAX_STEPS:,} steps in all (sequence x layers) to train in bounded time "
                            f"and memory, as its cells run one step at a time: {shape[0]:,} x {a['layers']:,} is "
                            f"{shape[0] * a['layers']:,}: use a shorter sequence or fewer layers")  # fmt: skip
    return (shape[0], a["hidden"]) if a["return"] == "sequence" else (a["hidden"],)


def _weights(gates: int) -> Any:
    def weights(shape: Shape, a: dict) -> dict[str, Shape]:
        h, ret = a["hidden"], {}
        for k in range(a["layers"]):
            ret |= {f"weight_ih_l{k}": (gates * h, shape[1] if k == 0 else h), f"weight_hh_l{k}": (gates * h, h)}
            if a["bias"]:
                ret |= {f"bias_ih_l{k}": (gates * h,), f"bias_hh_l{k}": (gates * h,)}
        return ret

    return weights


def _flops(gates: int, cell: int) -> Any:
    """Per step and layer: the gate matmuls (2 (in + hidden) gates hidden) and `cell` elementwise ops per unit."""

    def flops(i: Shape, o: Shape, a: dict) -> int:
        (t, features), h = i, a["hidden"]
        ins = [features] + [h] * (a["layers"] - 1)
        return t * sum(2 * (n + h) * gates * h + cell * h for n in ins)

    return flops


def _onnx(op: str, order: tuple[int, ...], **attrs: Any) -> Any:
    """One ONNX `op` per layer, sequence first (onnxruntime runs only layout=0), its gate blocks reordered from
    PyTorch's into ONNX's by `order` (a Gather on the rows of each weight and bias)."""

    def lower(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
        t, h = s.in_shapes[0][0], s.args["hidden"]
        rows = g.const(np.concatenate([np.arange(i * h, (i + 1) * h) for i in order]), np.int64)
        first = g.const([0], np.int64)

        def gates(key: str) -> str:
            return g.node("Gather", g.param(p + key), rows, axis=0)

        y = g.node("Transpose", g.to_float(x), perm=[1, 0, 2])  # (T, B, features)
        for k in range(s.args["layers"]):
            w, r = (g.node("Unsqueeze", gates(f"{name}_l{k}"), first) for name in ("weight_ih", "weight_hh"))
            b = [g.node("Concat", gates(f"bias_ih_l{k}"), gates(f"bias_hh_l{k}"), axis=0)] if s.args["bias"] else []
            y = g.node(op, y, w, r, *[g.node("Unsqueeze", v, first) for v in b], hidden_size=h, **attrs)
            y = g.node("Squeeze", y, g.const([1], np.int64))  # (T, B, H): one direction
        if s.args["return"] == "last":
            g.node("Gather", y, g.const(t - 1, np.int64), out=out, axis=0)
        else:
            g.node("Transpose", y, out=out, perm=[1, 0, 2])

    return lower


def _decode(layer: Any, shape: Shape, a: dict, batch: int) -> Stepper | None:
    """Every step's state carried; `return: last` gives one output for the whole sequence, not one per position."""
    return CarriedState(layer, batch) if a["return"] == "sequence" else None


def _entry(name: str, what: str) -> Entry:
    return Entry(name, f"{what} over a (sequence, features) input", Section(name, "arguments", {
        "hidden": size_field("size of the hidden state (the output features)"),
        "layers": size_field("number of stacked layers, each reading the previous one's hidden states", 1),
        "bias": Field("bool", "add the learned input and hidden biases (bias_ih, bias_hh) of every gate", True),
        "return": Field("str", "every step's hidden state, (sequence, hidden), or the last step's, (hidden,)",
                        "sequence", choices=("sequence", "last"))}), shorthand="hidden")  # fmt: skip


NOTES = (
    "The input is (sequence, features) per example; built, the batch axis comes first, as in self_attention "
    "(PyTorch's `batch_first=True`). Every batch starts from a zero state and no state is carried from one batch "
    "to the next. `return: sequence` gives every step's hidden state of the last layer, (sequence, hidden): the "
    "shape a language model's `linear` head reads to predict a token at every position; `return: last` gives the "
    "last step's, (hidden,), for a classifier of whole sequences. The weights are PyTorch's: `weight_ih_l<k>` "
    "(gates x hidden, in), `weight_hh_l<k>` (gates x hidden, hidden), `bias_ih_l<k>` and `bias_hh_l<k>` for layer "
    "k, initialised U(-1/sqrt(hidden), 1/sqrt(hidden)); one direction only. FLOPs per example count, per step and "
    "layer, the gate matmuls, 2 x (in + hidden) x gates x hidden (biases not counted, as in linear), plus one per "
    "elementwise op of the cell and hidden unit, a sigmoid or tanh counting 1. The steps run one after another, so "
    "the graph (and a training step's kernels) grows with the sequence length: a few hundred steps is practical, "
    "and validation refuses more than 2,048 in all (sequence x layers). "
    "The ONNX export uses one ONNX {op} node per layer."
)

LSTM_LAYER = LayerDef(
    _entry("lstm", "long short-term memory (LSTM)"),
    infer=_infer,
    build=lambda shape, a: LSTM(shape[1], a),
    onnx=_onnx("LSTM", (0, 3, 1, 2)),  # NOTE: PyTorch's gates are (i, f, g, o), ONNX's (i, o, f, c)
    examples=(Example({"hidden": 6}, (5, 3), (5, 6), 4 * 6 * (3 + 6 + 2)),
              Example({"hidden": 4, "layers": 2, "return": "last"}, (7, 3), (4,), 16 * 9 + 16 * 10),
              Example({"hidden": 5, "bias": False}, (4, 2), (4, 5), 20 * 7)),
    weights=_weights(4),
    flops=_flops(4, 13),
    decode=_decode,
    saved=lambda i, o, a: i[0] * a["layers"] * 7 * a["hidden"],  # NOTE: per step: 4 gates, cell, tanh(cell), state
    notes=NOTES.replace("{op}", "LSTM") + " The gates are PyTorch's (input, forget, cell, output); the cell's 13 "
    "elementwise ops per unit: 4 gate sums, 3 sigmoids, 2 tanh, 3 products and 1 sum.",
)  # fmt: skip

GRU_LAYER = LayerDef(
    _entry("gru", "gated recurrent unit (GRU)"),
    infer=_infer,
    build=lambda shape, a: GRU(shape[1], a),
    # NOTE: PyTorch's gates are (r, z, n), ONNX's (z, r, h); linear_before_reset=1 is PyTorch's r * (W_hn h + b_hn)
    onnx=_onnx("GRU", (1, 0, 2), linear_before_reset=1),
    examples=(Example({"hidden": 6}, (5, 3), (5, 6), 3 * 6 * (3 + 6 + 2)),
              Example({"hidden": 4, "layers": 2, "return": "last"}, (7, 3), (4,), 12 * 9 + 12 * 10),
              Example({"hidden": 5, "bias": False}, (4, 2), (4, 5), 15 * 7)),
    weights=_weights(3),
    flops=_flops(3, 11),
    decode=_decode,
    saved=lambda i, o, a: i[0] * a["layers"] * 6 * a["hidden"],  # NOTE: per step: 3 gates, the new-gate parts, state
    notes=NOTES.replace("{op}", "GRU") + " The gates are PyTorch's (reset, update, new), the reset gate applied to "
    "(W_hn h + b_hn); the cell's 11 elementwise ops per unit: 2 gate sums, 2 sigmoids, the reset product and sum, "
    "1 tanh, then h = (1 - z) n + z h in 4.",
)  # fmt: skip

DEFS = [LSTM_LAYER, GRU_LAYER]
