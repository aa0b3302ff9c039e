"""Layers for sequences of tokens: embedding (token ids -> vectors), positional (a learned vector per position) and
self_attention. A sequence is (sequence, features) per example; the batch axis comes first when built."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from specgrad import Tensor, nn
from specgrad.helpers import prod
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.layers.base import (
    Example,
    Layer,
    LayerDef,
    Shape,
    ShapeMismatch,
    Stepper,
    at_position,
    needs,
    onnx_linear,
    per_position,
    size_field,
    state_zeros,
    with_bias,
    words,
)
from specgrad.modelspec.schema import Entry, Field, Section

if TYPE_CHECKING:
    from specgrad.export.onnx import OnnxGraph
    from specgrad.modelspec.graph import Step


def _embedding_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    tp = g.onnx.TensorProto
    if g.types[x] in (tp.FLOAT, tp.FLOAT16):
        got = tp.DataType.Name(g.types[x])
        raise SpecError.at(s.loc, f"{words(s.name, s.what)} needs integer token ids, got a {got} input")
    idx = x if g.types[x] in (tp.INT32, tp.INT64) else g.node("Cast", x, to=tp.INT64, dtype=tp.INT64)
    # TODO: specgrad's one-hot lookup gives zeros for ids outside [0, vocab); Gather rejects them (or counts from
    # the end when negative)
    g.node("Gather", g.param(p + "weight"), idx, out=out, axis=0)


EMBEDDING = LayerDef(
    Entry("embedding", "a learned vector per integer token", Section("embedding", "arguments", {
        "vocab": size_field("number of distinct tokens"),
        "dim": size_field("length of each vector")})),
    infer=lambda s, a: (*s, a["dim"]),
    build=lambda shape, a: nn.Embedding(a["vocab"], a["dim"]),
    onnx=_embedding_onnx,
    examples=(Example({"vocab": 8, "dim": 5}, (6,), (6, 5), 40, "int32"),),
    weights=lambda s, a: {"weight": (a["vocab"], a["dim"])},
    flops=lambda i, o, a: 0,
    decode=per_position,
)  # fmt: skip


class Positional:
    """A learned vector per position, added to a (batch, sequence, features) input."""

    def __init__(self, length: int, width: int):
        self.weight = Tensor.normal(length, width, std=0.02, requires_grad=True)

    def __call__(self, x: Tensor) -> Tensor:
        return x + self.weight


class _PositionalStep(Stepper):
    """The new position's vector added (a one-hot sum over the rows: exact, and one shape at every position)."""

    def __init__(self, layer: Positional):
        self.layer = layer

    def __call__(self, x: Tensor, pos: Tensor) -> Tensor:
        w = self.layer.weight
        return x + at_position(w.shape[0], pos).reshape(-1, 1).where(w, 0).sum(0)


def _sequence(shape: Shape, a: dict) -> Shape:
    needs(shape, 2, "a (sequence, features) input")
    return shape


POSITIONAL = LayerDef(
    Entry("positional", "adds a learned vector per position to a (sequence, features) input",
          Section("positional", "no arguments")),
    infer=_sequence,
    build=lambda shape, a: Positional(*shape),
    onnx=lambda g, s, p, x, out: g.node("Add", g.to_float(x), g.param(p + "weight"), out=out),
    examples=(Example({}, (6, 4), (6, 4), 24),),
    weights=lambda s, a: {"weight": s},
    decode=lambda layer, shape, a, batch: _PositionalStep(layer),  # type: ignore[arg-type]
)  # fmt: skip


def _attention_infer(shape: Shape, a: dict) -> Shape:
    needs(shape, 2, "a (sequence, features) input")
    if shape[1] % a["heads"]:
        raise ShapeMismatch(f"needs features divisible by heads={a['heads']}, got {shape[1]}")
    return shape


def _attention_onnx(g: OnnxGraph, s: Step, p: str, x: str, out: str) -> None:
    """nn.MultiHeadAttention: in projection, per-head scaled dot products (masked when causal), out projection."""
    (t, c), h = s.in_shapes[0], s.args["heads"]
    qkv = onnx_linear(g, g.to_float(x), 3, p + "in_proj_weight", p + "in_proj_bias")  # (B, T, 3C)
    qkv = g.node("Reshape", qkv, g.const([-1, t, 3, h, c // h], np.int64))
    qkv = g.node("Transpose", qkv, perm=[2, 0, 3, 1, 4])  # (3, B, H, T, C/H)
    q, k, v = (g.node("Gather", qkv, g.const(i, np.int64), axis=0) for i in range(3))
    scores = g.node("MatMul", q, g.node("Transpose", k, perm=[0, 1, 3, 2]))
    scores = g.node("Mul", scores, g.const(1 / math.sqrt(c // h)))  # (B, H, T, T)
    if s.args["causal"]:
        scores = g.node("Add", scores, g.const(np.triu(np.full((t, t), -np.inf), 1)))
    y = g.node("MatMul", g.node("Softmax", scores, axis=-1), v)  # (B, H, T, C/H)
    y = g.node("Reshape", g.node("Transpose", y, perm=[0, 2, 1, 3]), g.const([-1, t, c], np.int64))
    onnx_linear(g, y, 3, p + "out_proj.weight", p + "out_proj.bias", out)


class CachedAttention(Stepper):
    """A causal self_attention one new position at a time: each position's keys and values go into a cache as long
    as the sequence (the state, written in place), and the new query reads the cache up to its own position. Every
    step has the same shapes, so one compiled step serves every position."""

    def __init__(self, layer: nn.MultiHeadAttention, length: int, batch: int):
        h = layer.num_heads
        self.layer, self.length = layer, length
        shape = (batch, h, length, layer.embed_dim // h)
        self.state = (state_zeros(shape, layer.in_proj_weight), state_zeros(shape, layer.in_proj_weight))

    def __call__(self, x: Tensor, pos: Tensor) -> Tensor:
        q, *new = self.layer.heads(x)  # each (B, H, 1, C/H)
        here = at_position(self.length, pos).reshape(1, 1, -1, 1)
        keys, values = (cache.assign(here.where(n, cache)) for cache, n in zip(self.state, new))
        seen = (Tensor.arange(self.length) <= pos).reshape(1, -1)
        return self.layer.merge(q.scaled_dot_product_attention(keys, values, attn_mask=seen))


def _attention_decode(layer: Layer, shape: Shape, a: dict, batch: int) -> Stepper | None:
    """Cached when causal; otherwise a position reads later ones, which do not exist yet."""
    return CachedAttention(layer, shape[0], batch) if a["causal"] else None  # type: ignore[arg-type]


def _attention_flops(i: Shape, o: Shape, a: dict) -> int:
    t, c = i
    return 2 * t * c * 4 * c + 4 * t * t * c  # NOTE: q, k, v and output projections, then scores and mixing


SELF_ATTENTION = LayerDef(
    Entry("self_attention", "multi-head self-attention over a (sequence, features) input",
          Section("self_attention", "arguments", {
              "heads": size_field("number of attention heads (must divide the features)"),
              "causal": Field("bool", "each position sees only itself and earlier ones", False),
              "dropout": Field("float", "dropout on the attention weights while training", 0.0, min=0.0, max=1.0),
              "bias": Field("bool", "add a learned bias in the input and output projections", True)})),
    infer=_attention_infer,
    build=lambda shape, a: nn.MultiHeadAttention(shape[1], a["heads"], bias=a["bias"], dropout=a["dropout"],
                                                 causal=a["causal"]),
    onnx=_attention_onnx,
    examples=(Example({"heads": 2, "causal": True}, (5, 8), (5, 8), 4 * 64 + 4 * 8),
              Example({"heads": 1, "bias": False}, (3, 4), (3, 4), 4 * 16)),
    weights=lambda s, a: with_bias({"in_proj_weight": (3 * s[1], s[1]), "out_proj.weight": (s[1], s[1])}, a["bias"],
                                   ("in_proj_bias", (3 * s[1],)), ("out_proj.bias", (s[1],))),
    flops=_attention_flops,
    # NOTE: q, k and v, the scores and their softmax per head, the mixed values and the output
    saved=lambda i, o, a: 3 * prod(i) + 2 * a["heads"] * i[0] * i[0] + 2 * prod(o),
    decode=_attention_decode,
)  # fmt: skip

DEFS = [EMBEDDING, POSITIONAL, SELF_ATTENTION]
