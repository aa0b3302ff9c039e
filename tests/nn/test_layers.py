"""specgrad.nn layers on every device: forward vs numpy references and gradients vs finite differences (check_op),
outputs and gradients vs torch.nn with copied weights, PyTorch default inits, BatchNorm running statistics, state dicts.

A layer is Tensor ops that tests/test_ops.py checks on the GPU one by one, so in the fast tier the GPU runs the layers
whose kernels models spend their time in (linear, conv2d, batchnorm2d, layernorm, embedding, causal attention); the
other layers run on the GPU in the slow tier (SLOW_ON_GPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import SLOW_ON_GPU, check_op, gpu_keeps

from specgrad import Tensor, TinyJit, nn
from specgrad.nn import get_parameters, get_state_dict
from specgrad.nn.state import load_state_dict

try:
    import torch
except ImportError:  # NOTE: torch is a test-only extra; torch comparisons skip without it
    torch = None


def with_params(layer: Any, **params: Tensor) -> Any:
    """`layer` with the given tensors as its parameters (check_op makes them from seeded arrays)."""
    for name, t in params.items():
        setattr(layer, name, t)
    return layer


# ***** small numpy references (they run in float64 for finite differences) *****


def per_axis(v: Any, n: int) -> tuple[int, ...]:
    return (v,) * n if isinstance(v, int) else tuple(v)


def np_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Gather form: out[o] = sum over kernel offsets k of x[o * stride + k * dilation] * w[k], per group."""
    n, k = x.ndim - 2, w.shape[2:]
    s_, p_, d_ = (per_axis(v, n) for v in (stride, padding, dilation))
    x = np.pad(x, [(0, 0), (0, 0), *[(p, p) for p in p_]])
    out_ = [(i - d * (kk - 1) - 1) // s + 1 for i, kk, s, d in zip(x.shape[2:], k, s_, d_)]
    xg = x.reshape(x.shape[0], groups, -1, *x.shape[2:])  # (N, G, Cin/G, *spatial)
    wg = w.reshape(groups, -1, *w.shape[1:])  # (G, Cout/G, Cin/G, *k)
    out = 0
    for kidx in np.ndindex(*k):
        sl = tuple(slice(ki * d, ki * d + s * (o - 1) + 1, s) for ki, d, s, o in zip(kidx, d_, s_, out_))
        out = out + np.einsum("ngc...,goc->ngo...", xg[(Ellipsis, *sl)], wg[(Ellipsis, *kidx)])
    out = out.reshape(x.shape[0], w.shape[0], *out_)
    return out if b is None else out + b.reshape(1, -1, *[1] * n)


def np_conv_transpose(x, w, b=None, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
    """Scatter form: x[i] * w[k] adds to out[i * stride + k * dilation - padding], per group."""
    n, k, i_ = x.ndim - 2, w.shape[2:], x.shape[2:]
    s_, p_, op_, d_ = (per_axis(v, n) for v in (stride, padding, output_padding, dilation))
    full = [(i - 1) * s + d * (kk - 1) + 1 + op for i, kk, s, d, op in zip(i_, k, s_, d_, op_)]
    out = np.zeros((x.shape[0], groups, w.shape[1], *full), dtype=np.result_type(x, w))
    xg, wg = x.reshape(x.shape[0], groups, -1, *i_), w.reshape(groups, -1, *w.shape[1:])
    for kidx in np.ndindex(*k):
        sl = tuple(slice(ki * d, ki * d + s * (i - 1) + 1, s) for ki, i, s, d in zip(kidx, i_, s_, d_))
        out[(slice(None), slice(None), slice(None), *sl)] += np.einsum("ngc...,gco->ngo...", xg, wg[(Ellipsis, *kidx)])
    out = out.reshape(x.shape[0], -1, *full)[(Ellipsis, *[slice(p, f - p) for f, p in zip(full, p_)])]
    return out if b is None else out + b.reshape(1, -1, *[1] * n)


def np_normalize(x, axes, eps=1e-5):
    mean = x.mean(axes, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(axes, keepdims=True) + eps)


def np_affine(y, w, b):
    """Per-channel (axis 1) scale and shift."""
    shape = (1, -1) + (1,) * (y.ndim - 2)
    return y * w.reshape(shape) + b.reshape(shape)


def np_groupnorm(x, groups, w=None, b=None, eps=1e-5):
    y = np_normalize(x.reshape(x.shape[0], groups, -1), -1, eps).reshape(x.shape)
    return y if w is None else np_affine(y, w, b)


def np_mha(x, in_w, in_b, out_w, out_b, heads, causal=False):
    (bs, t, c), hd = x.shape, x.shape[2] // heads
    q, k, v = (a.reshape(bs, t, heads, hd).transpose(0, 2, 1, 3) for a in np.split(x @ in_w.T + in_b, 3, -1))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
    if causal:
        scores = np.where(np.tri(t, dtype=bool), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    y = (p / p.sum(-1, keepdims=True)) @ v  # (B, H, T, hd)
    return y.transpose(0, 2, 1, 3).reshape(bs, t, c) @ out_w.T + out_b


# ***** forward vs numpy, gradients vs finite differences *****


def test_linear(dev: str) -> None:
    lin = nn.Linear(5, 3)
    ref = lambda x, w, b: x @ w.T + b
    check_op([(2, 4, 5), (3, 5), (3,)], ref, lambda x, w, b: with_params(lin, weight=w, bias=b)(x), device=dev)
    lin = nn.Linear(5, 3, bias=False)
    assert lin.bias is None
    check_op([(4, 5), (3, 5)], lambda x, w: x @ w.T, lambda x, w: with_params(lin, weight=w)(x), device=dev)


CONVS = {  # layer class, input shape, constructor args (in, out, kernel, ...)
    "conv1d": (nn.Conv1d, (2, 4, 9), dict(stride=2, padding=1, groups=2)),
    "conv2d": (nn.Conv2d, (1, 4, 7, 6), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    "conv2d_groups": (nn.Conv2d, (2, 4, 5, 5), dict(padding=1, groups=4)),
}


@pytest.mark.parametrize("case", gpu_keeps(CONVS, {"conv2d"}))
def test_conv(case: tuple, dev: str) -> None:
    cls, xs, kw = case
    kw = {"kernel_size": 3, **kw}
    conv = cls(xs[1], 6 if kw.get("groups", 1) < 4 else 4, **kw)
    ref_kw = {k: v for k, v in kw.items() if k != "kernel_size"}
    check_op(
        [xs, conv.weight.shape, conv.bias.shape],
        lambda x, w, b: np_conv(x, w, b, **ref_kw),
        lambda x, w, b: with_params(conv, weight=w, bias=b)(x),
        device=dev,
        atol=1e-5,
        grad_atol=1e-3,
    )


@SLOW_ON_GPU
def test_conv_padding_same(dev: str) -> None:
    """Even kernels pad one more after than before, as PyTorch does."""
    conv = nn.Conv2d(2, 3, (2, 3), padding="same", bias=False)
    ref = lambda x, w: np_conv(np.pad(x, [(0, 0), (0, 0), (0, 1), (1, 1)]), w)
    check_op([(1, 2, 4, 5), (3, 2, 2, 3)], ref, lambda x, w: with_params(conv, weight=w)(x), device=dev, atol=1e-5)
    assert nn.Conv1d(2, 3, 3, padding="valid").padding == (0,)
    with pytest.raises(ValueError, match="stride 1"):
        nn.Conv2d(2, 3, 3, stride=2, padding="same")


@SLOW_ON_GPU
def test_conv_transpose(dev: str) -> None:
    kw = dict(stride=2, padding=1, output_padding=1, groups=2)
    conv = nn.ConvTranspose2d(4, 6, 3, **kw)
    assert conv.weight.shape == (4, 3, 3, 3) and conv.bias.shape == (6,)
    check_op(
        [(2, 4, 3, 3), (4, 3, 3, 3), (6,)],
        lambda x, w, b: np_conv_transpose(x, w, b, **kw),
        lambda x, w, b: with_params(conv, weight=w, bias=b)(x),
        device=dev,
        atol=1e-5,
        grad_atol=1e-3,
    )
    conv = nn.ConvTranspose1d(2, 3, 2, dilation=2, bias=False)
    check_op(
        [(1, 2, 5), (2, 3, 2)],
        lambda x, w: np_conv_transpose(x, w, dilation=2),
        lambda x, w: with_params(conv, weight=w)(x),
        device=dev,
        atol=1e-5,
    )


@pytest.mark.parametrize("shape", gpu_keeps({"2d": (3, 2, 2, 2), "1d_NC": (4, 3), "1d_NCL": (2, 2, 3)}, {"2d"}))
def test_batchnorm_train_forward_backward(shape: tuple, dev: str) -> None:
    """Training mode normalises with the (biased) batch statistics and differentiates through them."""
    bn = nn.BatchNorm2d(shape[1]) if len(shape) == 4 else nn.BatchNorm1d(shape[1])
    ref = lambda x, w, b: np_affine(np_normalize(x, (0, *range(2, x.ndim))), w, b)
    with Tensor.train():
        check_op([shape, shape[1:2], shape[1:2]], ref, lambda x, w, b: with_params(bn, weight=w, bias=b)(x), device=dev)


def test_batchnorm_eval_forward_backward(dev: str) -> None:
    bn = nn.BatchNorm2d(3)
    rng = np.random.default_rng(0)
    mean, var = rng.uniform(-1, 1, 3), rng.uniform(0.5, 2, 3)
    ref = lambda x, w, b, m, v: np_affine((x - m.reshape(1, -1, 1, 1)) / np.sqrt(v.reshape(1, -1, 1, 1) + 1e-5), w, b)
    check_op(
        [(2, 3, 2, 2), (3,), (3,), mean, var],
        ref,
        lambda x, w, b, m, v: with_params(bn, weight=w, bias=b, running_mean=m, running_var=v)(x),
        device=dev,
    )


def test_layernorm(dev: str) -> None:
    ln = nn.LayerNorm((3, 4))
    ref = lambda x, w, b: np_normalize(x, (-2, -1)) * w + b
    check_op([(2, 3, 4), (3, 4), (3, 4)], ref, lambda x, w, b: with_params(ln, weight=w, bias=b)(x), device=dev)
    ln = nn.LayerNorm(5, eps=0.1, elementwise_affine=False)
    check_op([(2, 5)], lambda x: np_normalize(x, -1, 0.1), ln, device=dev, name="LayerNorm")
    with pytest.raises(ValueError, match="LayerNorm"):
        ln(Tensor.ones(2, 4))


@SLOW_ON_GPU
def test_groupnorm(dev: str) -> None:
    gn = nn.GroupNorm(2, 6)
    sg = lambda x, w, b: with_params(gn, weight=w, bias=b)(x)
    check_op([(2, 6, 3, 2), (6,), (6,)], lambda x, w, b: np_groupnorm(x, 2, w, b), sg, device=dev)
    check_op([(2, 6, 3), (6,), (6,)], lambda x, w, b: np_groupnorm(x, 2, w, b), sg, device=dev)


@SLOW_ON_GPU
def test_instancenorm(dev: str) -> None:
    norm = nn.InstanceNorm2d(3)
    assert norm.weight is None and get_state_dict(norm) == {}
    check_op([(2, 3, 3, 2)], lambda x: np_normalize(x, (2, 3)), norm, device=dev, name="InstanceNorm2d")
    norm = nn.InstanceNorm1d(3, affine=True)
    ref = lambda x, w, b: np_affine(np_normalize(x, 2), w, b)
    check_op([(2, 3, 4), (3,), (3,)], ref, lambda x, w, b: with_params(norm, weight=w, bias=b)(x), device=dev)
    with pytest.raises(ValueError, match="InstanceNorm1d"):
        norm(Tensor.ones(2, 3, 4, 4))


@SLOW_ON_GPU
def test_layernorm2d(dev: str) -> None:
    """tinygrad's LayerNorm2d: LayerNorm over the channels of each pixel of (N, C, H, W)."""
    ln = nn.LayerNorm2d(3)
    assert ln.weight.shape == ln.bias.shape == (3,)
    ref = lambda x, w, b: np_affine(np_normalize(x, 1), w, b)
    check_op([(2, 3, 4, 2), (3,), (3,)], ref, lambda x, w, b: with_params(ln, weight=w, bias=b)(x), device=dev)
    ln = nn.LayerNorm2d(2, eps=0.1, elementwise_affine=False)
    assert get_state_dict(ln) == {}
    check_op([(1, 2, 3, 3)], lambda x: np_normalize(x, 1, 0.1), ln, device=dev, name="LayerNorm2d")


@SLOW_ON_GPU
def test_instancenorm_any_rank(dev: str) -> None:
    """tinygrad's InstanceNorm: any (N, C, *) input, affine by default."""
    norm = nn.InstanceNorm(2)
    assert norm.weight.shape == (2,)
    sg = lambda x, w, b: with_params(norm, weight=w, bias=b)(x)
    for shape in ((2, 2, 5), (1, 2, 2, 3, 2)):
        ref = lambda x, w, b: np_affine(np_normalize(x, tuple(range(2, x.ndim))), w, b)
        check_op([shape, (2,), (2,)], ref, sg, device=dev)


@SLOW_ON_GPU
def test_layernorm_without_bias(dev: str) -> None:
    ln = nn.LayerNorm(4, bias=False)
    assert ln.bias is None and list(get_state_dict(ln)) == ["weight"]
    sg = lambda x, w: with_params(ln, weight=w)(x)
    check_op([(3, 4), (4,)], lambda x, w: np_normalize(x, -1) * w, sg, device=dev)


@SLOW_ON_GPU
def test_conv_padding_per_side(dev: str) -> None:
    """tinygrad's padding form: two per axis in pad2d order (left, right, top, bottom)."""
    conv = nn.Conv2d(2, 3, 3, padding=(1, 2, 0, 1), bias=False)
    ref = lambda x, w: np_conv(np.pad(x, [(0, 0), (0, 0), (0, 1), (1, 2)]), w)
    check_op([(1, 2, 4, 3), (3, 2, 3, 3)], ref, lambda x, w: with_params(conv, weight=w)(x), device=dev, atol=1e-5)


def test_embedding(dev: str) -> None:
    emb = nn.Embedding(7, 4)
    for idx in (np.array([[1, 6, 0], [3, 3, 2]], np.int32), np.array([[[5]], [[5]]], np.int32), np.array(2, np.int32)):
        check_op([idx, (7, 4)], lambda i, w: w[i], lambda i, w: with_params(emb, weight=w)(i), device=dev)
    with pytest.raises(TypeError, match="integer"):
        emb(Tensor([1.0]))


@pytest.mark.parametrize("causal", gpu_keeps({"False": False, "True": True}, {"True"}))
def test_multi_head_attention(causal: bool, dev: str) -> None:
    mha = nn.MultiHeadAttention(4, 2, causal=causal)

    def sg_mha(x: Tensor, in_w: Tensor, in_b: Tensor, out_w: Tensor, out_b: Tensor) -> Tensor:
        with_params(mha.out_proj, weight=out_w, bias=out_b)
        return with_params(mha, in_proj_weight=in_w, in_proj_bias=in_b)(x)

    check_op(
        [(2, 3, 4), (12, 4), (12,), (4, 4), (4,)],
        lambda x, *ps: np_mha(x, *ps, heads=2, causal=causal),
        sg_mha,
        device=dev,
        atol=1e-5,
    )


def test_dropout(dev: str) -> None:
    Tensor.manual_seed(0)
    drop = nn.Dropout(0.25)
    x = Tensor.ones(4000, requires_grad=True)
    np.testing.assert_array_equal(drop(x).numpy(), np.ones(4000))  # eval: identity
    with Tensor.train():
        out = drop(x)
        out.sum().backward()
        assert nn.Dropout(0.0)(x) is x
        np.testing.assert_array_equal(nn.Dropout(1.0)(x).numpy(), np.zeros(4000))
    got = out.numpy()
    assert set(np.unique(got)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((got == 0).mean() - 0.25) < 0.03
    np.testing.assert_allclose(x.grad.numpy(), got)  # the gradient uses the same mask and scale
    with pytest.raises(ValueError, match="dropout probability"):
        nn.Dropout(1.5)


BAD_ARGUMENTS = {  # a misuse, the exception, the message it must carry
    "linear_float_size": (lambda: nn.Linear(5.0, 3), TypeError, r"in_features must be an int, got float"),
    "linear_input": (lambda: nn.Linear(5, 3)(Tensor.ones(2, 4)), ValueError, r"last axis is 5, got \(2, 4\)"),
    "linear_not_tensor": (lambda: nn.Linear(5, 3)([1.0] * 5), TypeError, r"Linear takes a Tensor, got list"),
    "conv_channels": (lambda: nn.Conv2d(3, 4, 3)(Tensor.ones(1, 2, 5, 5)), ValueError, r"Conv2d expects an \(N, 3,"),
    "conv_ndim": (lambda: nn.Conv2d(3, 4, 3)(Tensor.ones(3, 5, 5)), ValueError, r"Conv2d expects a 4-d input"),
    "conv1d_kernel": (lambda: nn.Conv1d(3, 4, (3, 3)), ValueError, r"kernel_size must be an int or 1 ints"),
    "conv_groups": (lambda: nn.Conv2d(4, 6, 3, groups=4), ValueError, r"out_channels 6 must divide by groups 4"),
    "conv_groups_zero": (lambda: nn.Conv2d(4, 4, 3, groups=0), ValueError, r"groups must be at least 1"),
    "conv_stride": (lambda: nn.Conv2d(3, 4, 3, stride=0), ValueError, r"stride must be at least 1, got 0"),
    "conv_padding": (lambda: nn.Conv2d(3, 4, 3, padding=(1, 2, 3)), ValueError, r"padding must be an int or 2 or 4"),
    "conv_padding_word": (lambda: nn.Conv2d(3, 4, 3, padding="full"), ValueError, r"'valid' or 'same', got 'full'"),
    "conv_small_input": (lambda: nn.Conv2d(3, 4, 3)(Tensor.ones(1, 3, 2, 2)), ValueError, r"larger than the input"),
    "conv_transpose_channels": (
        lambda: nn.ConvTranspose2d(3, 4, 3)(Tensor.ones(1, 4, 5, 5)),
        ValueError,
        r"ConvTranspose2d expects an \(N, 3,",
    ),
    "conv_transpose_output_padding": (
        lambda: nn.ConvTranspose2d(2, 2, 3, stride=2, output_padding=2),
        ValueError,
        r"output_padding \(2, 2\) must",
    ),
    "batchnorm_channels": (lambda: nn.BatchNorm2d(3)(Tensor.ones(2, 4, 2, 2)), ValueError, r"BatchNorm2d .*\(N, 3,"),
    "batchnorm1d_ndim": (lambda: nn.BatchNorm1d(3)(Tensor.ones(2, 3, 2, 2)), ValueError, r"2 or 3-d input"),
    "batchnorm_eps": (lambda: nn.BatchNorm2d(3, eps=-1e-5), ValueError, r"eps must be a finite non-negative"),
    "batchnorm_eps_type": (lambda: nn.BatchNorm2d(3, eps="small"), TypeError, r"eps must be a number, got str"),
    "batchnorm_momentum": (lambda: nn.BatchNorm2d(3, momentum=1.5), ValueError, r"momentum must be in \[0, 1\]"),
    "layernorm_eps_nan": (lambda: nn.LayerNorm(4, eps=float("nan")), ValueError, r"eps must be a finite"),
    "layernorm_shape": (lambda: nn.LayerNorm((3, 4))(Tensor.ones(2, 4, 3)), ValueError, r"LayerNorm over \(3, 4\)"),
    "layernorm2d_ndim": (lambda: nn.LayerNorm2d(3)(Tensor.ones(2, 3, 4)), ValueError, r"LayerNorm2d expects a 4-d"),
    "layernorm2d_channels": (lambda: nn.LayerNorm2d(3)(Tensor.ones(1, 4, 2, 2)), ValueError, r"\(N, 3, \.\.\.\)"),
    "groupnorm_zero_groups": (lambda: nn.GroupNorm(0, 4), ValueError, r"num_groups must be at least 1, got 0"),
    "groupnorm_groups": (lambda: nn.GroupNorm(3, 4), ValueError, r"num_channels 4 must divide by num_groups 3"),
    "groupnorm_channels": (lambda: nn.GroupNorm(2, 4)(Tensor.ones(2, 6, 3)), ValueError, r"GroupNorm .*\(N, 4,"),
    "instancenorm_channels": (lambda: nn.InstanceNorm1d(3)(Tensor.ones(2, 4, 5)), ValueError, r"\(N, 3, \.\.\.\)"),
    "instancenorm_running_stats": (
        lambda: nn.InstanceNorm2d(3, track_running_stats=True),
        ValueError,
        r"track_running_stats=True\) is not supp",
    ),
    "embedding_float": (lambda: nn.Embedding(7, 4)(Tensor([1.0])), TypeError, r"integer indices, got .*float32"),
    "embedding_size": (lambda: nn.Embedding(0, 4), ValueError, r"num_embeddings must be at least 1, got 0"),
    "dropout_type": (lambda: nn.Dropout("0.5"), TypeError, r"dropout probability must be a number, got str"),
    "dropout_range": (lambda: nn.Dropout(1.5), ValueError, r"dropout probability must be in \[0, 1\], got 1.5"),
}


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS.values()), ids=list(BAD_ARGUMENTS))
def test_bad_arguments(case: tuple) -> None:
    """Misuse raises TypeError or ValueError (never an AssertionError or ZeroDivisionError) saying what is wrong."""
    misuse, error, message = case
    with pytest.raises(error, match=message):
        misuse()


def test_empty_linear() -> None:
    """in_features 0, as PyTorch allows: the output is the bias."""
    lin = nn.Linear(0, 3)
    np.testing.assert_allclose(lin(Tensor.ones(2, 0)).numpy(), np.broadcast_to(lin.bias.numpy(), (2, 3)))


# ***** vs torch.nn, with the weights copied by state dict key *****


def randomize(layer: Any, seed: int = 0) -> None:
    """Give every trainable parameter random values (in place), so affine parts and biases are exercised."""
    rng = np.random.default_rng(seed)
    for t in get_parameters(layer):
        if t.requires_grad:
            t.assign(Tensor(rng.uniform(-1, 1, t.shape).astype(np.float32), device=t.device))


def to_torch(layer: Any, tlayer: Any) -> Any:
    """Load `layer`'s state into `tlayer`; strict, so names and shapes must match PyTorch's."""
    tlayer.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in get_state_dict(layer).items()})
    return tlayer


def torch_mha(embed: int, heads: int, causal: bool = False, bias: bool = True) -> tuple[Any, Callable]:
    m = torch.nn.MultiheadAttention(embed, heads, bias=bias, batch_first=True)

    def call(x):
        mask = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), 1) if causal else None
        return m(x, x, x, need_weights=False, attn_mask=mask)[0]

    return m, call


def permuted(m: Any) -> tuple[Any, Callable]:
    """A channels-last torch layer applied to (N, C, H, W)."""
    return m, lambda x: m(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def padded(m: Any, pad: tuple[int, ...]) -> tuple[Any, Callable]:
    return m, lambda x: m(torch.nn.functional.pad(x, pad))


TORCH_CASES = {  # specgrad layer, torch layer (or (module, call)), input shape (or int index array)
    "linear": (lambda: nn.Linear(5, 3), lambda: torch.nn.Linear(5, 3), (2, 4, 5)),
    "linear_nobias": (lambda: nn.Linear(5, 3, bias=False), lambda: torch.nn.Linear(5, 3, bias=False), (4, 5)),
    "conv1d": (lambda: nn.Conv1d(4, 6, 3, 2, 1, groups=2), lambda: torch.nn.Conv1d(4, 6, 3, 2, 1, groups=2), (2, 4, 9)),
    "conv2d": (
        lambda: nn.Conv2d(2, 4, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
        lambda: torch.nn.Conv2d(2, 4, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
        (2, 2, 7, 6),
    ),
    "conv2d_same": (
        lambda: nn.Conv2d(3, 2, (2, 3), padding="same"),
        lambda: torch.nn.Conv2d(3, 2, (2, 3), padding="same"),
        (1, 3, 5, 4),
    ),
    "conv_transpose2d": (
        lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
        lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
        (2, 4, 3, 3),
    ),
    "conv_transpose2d_dilation": (
        lambda: nn.ConvTranspose2d(3, 2, (2, 3), stride=(1, 2), dilation=(2, 1), bias=False),
        lambda: torch.nn.ConvTranspose2d(3, 2, (2, 3), stride=(1, 2), dilation=(2, 1), bias=False),
        (1, 3, 3, 4),
    ),
    "batchnorm2d_eval": (lambda: nn.BatchNorm2d(3), lambda: torch.nn.BatchNorm2d(3).eval(), (2, 3, 2, 2)),
    "layernorm": (lambda: nn.LayerNorm((3, 4)), lambda: torch.nn.LayerNorm((3, 4)), (2, 3, 4)),
    "groupnorm": (lambda: nn.GroupNorm(2, 6), lambda: torch.nn.GroupNorm(2, 6), (2, 6, 3, 2)),
    "instancenorm1d": (
        lambda: nn.InstanceNorm1d(3, affine=True),
        lambda: torch.nn.InstanceNorm1d(3, affine=True),
        (2, 3, 5),
    ),
    "instancenorm2d": (lambda: nn.InstanceNorm2d(3), lambda: torch.nn.InstanceNorm2d(3), (2, 3, 3, 3)),
    "instancenorm_5d": (lambda: nn.InstanceNorm(2), lambda: torch.nn.InstanceNorm3d(2, affine=True), (2, 2, 3, 2, 2)),
    "layernorm2d": (lambda: nn.LayerNorm2d(3), lambda: permuted(torch.nn.LayerNorm(3)), (2, 3, 4, 5)),
    "layernorm_nobias": (lambda: nn.LayerNorm(5, bias=False), lambda: torch.nn.LayerNorm(5, bias=False), (3, 5)),
    "batchnorm1d_eval": (lambda: nn.BatchNorm1d(3), lambda: torch.nn.BatchNorm1d(3).eval(), (4, 3, 2)),
    "conv2d_pad_per_side": (
        lambda: nn.Conv2d(2, 3, 3, padding=(1, 2, 0, 1)),
        lambda: padded(torch.nn.Conv2d(2, 3, 3), (1, 2, 0, 1)),
        (2, 2, 4, 3),
    ),
    "embedding": (lambda: nn.Embedding(7, 4), lambda: torch.nn.Embedding(7, 4), np.array([[1, 6, 0], [3, 3, 2]])),
    "mha": (lambda: nn.MultiHeadAttention(8, 2), lambda: torch_mha(8, 2), (2, 5, 8)),
    "mha_causal": (lambda: nn.MultiHeadAttention(8, 4, causal=True), lambda: torch_mha(8, 4, causal=True), (2, 5, 8)),
    "mha_nobias": (lambda: nn.MultiHeadAttention(4, 1, bias=False), lambda: torch_mha(4, 1, bias=False), (1, 3, 4)),
}


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
@pytest.mark.parametrize("case", list(TORCH_CASES.values()), ids=list(TORCH_CASES))
def test_vs_torch(case: tuple, dev: str) -> None:
    """Same weights, same input: outputs, input gradients and parameter gradients match torch.nn."""
    pytest.importorskip("torch")
    make, make_torch, xs = case
    layer, tlayer = make(), make_torch()
    tlayer, call = tlayer if isinstance(tlayer, tuple) else (tlayer, tlayer)
    randomize(layer)
    to_torch(layer, tlayer)
    rng = np.random.default_rng(1)
    x_np = xs.astype(np.int32) if isinstance(xs, np.ndarray) else rng.uniform(-2, 2, xs).astype(np.float32)
    is_float = x_np.dtype.kind == "f"
    x, tx = Tensor(x_np, requires_grad=is_float or None), torch.tensor(x_np, requires_grad=is_float)
    out, tout = layer(x), call(tx if is_float else tx.long())
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=1e-5, rtol=1e-4)
    w = rng.standard_normal(tout.shape).astype(np.float32)
    (out * Tensor(w)).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    if is_float:
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-4, rtol=1e-3)
    tparams = dict(tlayer.named_parameters())
    for name, t in get_state_dict(layer).items():
        if t.requires_grad:
            np.testing.assert_allclose(t.grad.numpy(), tparams[name].grad.numpy(), atol=1e-4, rtol=1e-3, err_msg=name)


# ***** BatchNorm statistics over training steps *****


def np_batchnorm_steps(xs: list[np.ndarray], momentum: float, eps: float = 1e-5) -> tuple:
    """Outputs (weight 1, bias 0) and the running statistics after each training step, as PyTorch computes them."""
    mean, var, outs, stats = 0.0, 1.0, [], []
    for x in xs:
        axes = (0, *range(2, x.ndim))
        n = x.size // x.shape[1]
        outs.append(np_normalize(x, axes, eps))
        mean = (1 - momentum) * mean + momentum * x.mean(axes)
        var = (1 - momentum) * var + momentum * x.var(axes) * n / (n - 1)
        stats.append((mean, var))
    return outs, stats


@pytest.mark.parametrize("shape", gpu_keeps({"2d": (4, 3, 2, 2), "1d_NC": (5, 3), "1d_NCL": (2, 3, 4)}, {"2d"}))
def test_batchnorm_running_stats(shape: tuple, dev: str) -> None:
    bn = nn.BatchNorm2d(3, momentum=0.3) if len(shape) == 4 else nn.BatchNorm1d(3, momentum=0.3)
    running_mean, running_var = bn.running_mean, bn.running_var
    rng = np.random.default_rng(0)
    xs = [rng.normal(i, 1 + i, shape).astype(np.float32) for i in range(3)]
    outs, stats = np_batchnorm_steps(xs, 0.3)
    for x, want, (mean, var) in zip(xs, outs, stats):
        with Tensor.train():
            np.testing.assert_allclose(bn(Tensor(x)).numpy(), want, atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(bn.running_mean.numpy(), mean, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(bn.running_var.numpy(), var, atol=1e-5, rtol=1e-5)
    assert bn.running_mean is running_mean and bn.running_var is running_var  # updated in place
    assert bn.num_batches_tracked.numpy() == 3 and not bn.running_mean.requires_grad
    mean, var = stats[-1]
    cs = (1, -1) + (1,) * (len(shape) - 2)
    want = (xs[0] - mean.reshape(cs)) / np.sqrt(var.reshape(cs) + 1e-5)
    np.testing.assert_allclose(bn(Tensor(xs[0])).numpy(), want, atol=1e-4, rtol=1e-4)  # eval: running stats
    assert bn.num_batches_tracked.numpy() == 3  # eval leaves the statistics alone


@pytest.mark.parametrize("momentum", [0.2, None], ids=["momentum", "cumulative"])
def test_batchnorm_train_eval_vs_torch(momentum: float | None, dev: str) -> None:
    pytest.importorskip("torch")
    bn, tbn = nn.BatchNorm2d(3, momentum=momentum), torch.nn.BatchNorm2d(3, momentum=momentum)
    randomize(bn)
    to_torch(bn, tbn)
    rng = np.random.default_rng(0)
    for step in range(3):
        x_np = rng.normal(step, 2, (3, 3, 2, 2)).astype(np.float32)
        x, tx = Tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
        with Tensor.train():
            out = bn(x)
        tout = tbn.train()(tx)
        np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=1e-4, rtol=1e-4)
        out.square().sum().backward()
        tout.square().sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-3, rtol=1e-3)
        np.testing.assert_allclose(bn.weight.grad.numpy(), tbn.weight.grad.numpy(), atol=1e-3, rtol=1e-3)
        tbn.weight.grad = tbn.bias.grad = None
        bn.weight.grad = bn.bias.grad = None
        for name, t in tbn.state_dict().items():
            np.testing.assert_allclose(get_state_dict(bn)[name].numpy(), t.numpy(), atol=1e-5, rtol=1e-5, err_msg=name)
    x_np = rng.normal(0, 1, (2, 3, 2, 2)).astype(np.float32)
    np.testing.assert_allclose(bn(Tensor(x_np)).numpy(), tbn.eval()(torch.tensor(x_np)).detach().numpy(), atol=1e-5)


@SLOW_ON_GPU
def test_batchnorm_without_running_stats(dev: str) -> None:
    """track_running_stats=False: no buffers, batch statistics in eval too (as PyTorch)."""
    bn = nn.BatchNorm1d(3, affine=False, track_running_stats=False)
    assert get_state_dict(bn) == {}
    check_op([(4, 3)], lambda x: np_normalize(x, 0), bn, device=dev, name="BatchNorm1d")
    with pytest.raises(ValueError, match="more than 1 value"):
        bn(Tensor.ones(1, 3))


def test_batchnorm_jit_replays_running_stats(dev: str) -> None:
    """A captured training step (calls 3 and 4 are replays) repeats the in-place running-stat update."""
    bn = nn.BatchNorm1d(2)
    step = TinyJit(lambda x: bn(x).realize())
    rng = np.random.default_rng(0)
    xs = [rng.normal(i, 1, (4, 2)).astype(np.float32) for i in range(4)]
    with Tensor.train():
        for x in xs:
            step(Tensor(x))
    mean, var = np_batchnorm_steps(xs, 0.1)[1][-1]
    np.testing.assert_allclose(bn.running_mean.numpy(), mean, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), var, atol=1e-5, rtol=1e-5)
    assert bn.num_batches_tracked.numpy() == 4


def test_loaded_weights_reach_a_captured_step(dev: str) -> None:
    """Norm weights live in buffers from the start (not constants folded into kernels), so load_state_dict after a
    capture, which assigns in place, changes what the replays compute."""
    ln = nn.LayerNorm(4)
    step = TinyJit(lambda x: ln(x).realize())
    x_np = np.random.default_rng(0).normal(0, 1, (2, 4)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(step(Tensor(x_np)).numpy(), np_normalize(x_np, -1), atol=1e-5)
    w, b = np.arange(4, dtype=np.float32), np.full(4, 0.5, np.float32)
    load_state_dict(ln, {"weight": Tensor(w), "bias": Tensor(b)})
    np.testing.assert_allclose(step(Tensor(x_np)).numpy(), np_normalize(x_np, -1) * w + b, atol=1e-5)


# ***** default initialisation *****


def bound_of(t: Tensor) -> float:
    return float(np.abs(t.numpy()).max())


def assert_uniform(t: Tensor, bound: float) -> None:
    """Looks like U(-bound, bound): inside the bound, nearly reaching it, with the uniform's std."""
    v = t.numpy()
    assert np.abs(v).max() <= bound * (1 + 1e-6) and np.abs(v).max() > 0.9 * bound
    assert abs(v.std() - bound / math.sqrt(3)) < 0.1 * bound / math.sqrt(3)
    assert abs(v.mean()) < 0.1 * bound


def test_default_init() -> None:
    Tensor.manual_seed(0)
    lin = nn.Linear(64, 300)
    assert_uniform(lin.weight, 1 / 8)
    assert_uniform(lin.bias, 1 / 8)
    conv = nn.Conv2d(8, 32, 3, groups=2)  # fan_in = 8 / 2 * 9
    assert_uniform(conv.weight, 1 / 6)
    assert abs(bound_of(conv.bias) - 1 / 6) < 0.03 and bound_of(conv.bias) <= 1 / 6
    convt = nn.ConvTranspose2d(32, 16, 3)  # PyTorch's fan_in for this layout: 16 * 9
    assert_uniform(convt.weight, 1 / 12)
    assert bound_of(convt.bias) <= 1 / 12
    emb = nn.Embedding(100, 50)
    assert abs(emb.weight.numpy().std() - 1) < 0.05 and abs(emb.weight.numpy().mean()) < 0.05
    mha = nn.MultiHeadAttention(32, 4)
    assert_uniform(mha.in_proj_weight, math.sqrt(6 / (32 + 96)))
    assert_uniform(mha.out_proj.weight, 1 / math.sqrt(32))
    assert not mha.in_proj_bias.numpy().any() and not mha.out_proj.bias.numpy().any()
    for norm in (nn.BatchNorm2d(4), nn.LayerNorm(4), nn.GroupNorm(2, 4), nn.InstanceNorm1d(4, affine=True)):
        np.testing.assert_array_equal(norm.weight.numpy(), np.ones(4))
        np.testing.assert_array_equal(norm.bias.numpy(), np.zeros(4))
    bn = nn.BatchNorm1d(4)
    np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(4))
    np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(4))
    assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.numpy() == 0


def test_init_is_seeded() -> None:
    Tensor.manual_seed(7)
    a = nn.Conv1d(3, 4, 2)
    Tensor.manual_seed(7)
    b = nn.Conv1d(3, 4, 2)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    np.testing.assert_array_equal(a.bias.numpy(), b.bias.numpy())


def test_init_bounds_match_torch() -> None:
    """The largest |weight| of a big layer approaches the same bound as torch's default init."""
    pytest.importorskip("torch")
    torch.manual_seed(0)
    for ours, theirs in (
        (nn.Linear(30, 400), torch.nn.Linear(30, 400)),
        (nn.Conv1d(6, 300, 5, groups=3), torch.nn.Conv1d(6, 300, 5, groups=3)),
        (nn.ConvTranspose2d(20, 240, 3, groups=2), torch.nn.ConvTranspose2d(20, 240, 3, groups=2)),
        (nn.MultiHeadAttention(24, 3), torch.nn.MultiheadAttention(24, 3)),
    ):
        for name, t in theirs.state_dict().items():
            want = float(t.abs().max())
            got = bound_of(get_state_dict(ours)[name])
            assert (got == want == 0) or abs(got - want) < 0.1 * want, f"{type(ours).__name__}.{name}"


# ***** models as plain objects: parameters and state dicts *****


class TinyNet:
    def __init__(self) -> None:
        self.layers = [nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Linear(8, 3)]
        self.attn = nn.MultiHeadAttention(4, 2)
        self.drop = nn.Dropout(0.1)


def test_state_dict_keys() -> None:
    net = TinyNet()
    keys = list(get_state_dict(net))
    assert keys == [
        "layers.0.weight",
        "layers.0.bias",
        "layers.1.weight",
        "layers.1.bias",
        "layers.1.running_mean",
        "layers.1.running_var",
        "layers.1.num_batches_tracked",
        "layers.2.weight",
        "layers.2.bias",
        "attn.in_proj_weight",
        "attn.in_proj_bias",
        "attn.out_proj.weight",
        "attn.out_proj.bias",
    ]
    params = get_parameters(net)
    assert len(params) == len(keys)
    frozen = {k for k, t in get_state_dict(net).items() if not t.requires_grad}
    assert frozen == {"layers.1.running_mean", "layers.1.running_var", "layers.1.num_batches_tracked"}


def test_state_dict_keys_match_torch() -> None:
    pytest.importorskip("torch")
    tnet = torch.nn.Module()
    tnet.layers = torch.nn.ModuleList([torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.Linear(8, 3)])
    tnet.attn = torch.nn.MultiheadAttention(4, 2)
    ours = {k: tuple(t.shape) for k, t in get_state_dict(TinyNet()).items()}
    assert ours == {k: tuple(t.shape) for k, t in tnet.state_dict().items()}
