"""Neural network layers (PyTorch names, weight layouts and default initialisations; tinygrad 0.8's layers too). A model
is a plain Python object. Constructors check their arguments and calls check their input's shape: TypeError for a
wrong type, ValueError for a bad value, each naming it.

Imports tensor, dtype, helpers and nn.state.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from specgrad.dtype import dtypes
from specgrad.helpers import prod
from specgrad.nn.state import get_parameters, get_state_dict
from specgrad.tensor import Tensor

__all__ = [
    "get_parameters",
    "get_state_dict",
    "Linear",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "LayerNorm",
    "LayerNorm2d",
    "GroupNorm",
    "InstanceNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "Embedding",
    "Dropout",
    "MultiHeadAttention",
    "LSTM",
    "GRU",
]


# ***** parameters *****


def _kaiming(*shape: int) -> Tensor:
    """PyTorch's default weight init, kaiming_uniform(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in =
    prod(shape[1:])."""
    if prod(shape) == 0:  # NOTE: nothing to draw (and a fan_in of 0 has no bound), as PyTorch's no-op init
        return Tensor.zeros(*shape, requires_grad=True)
    return Tensor.kaiming_uniform(*shape, a=math.sqrt(5), requires_grad=True)


def _uniform_bias(n: int, fan_in: int) -> Tensor:
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return Tensor.uniform(n, low=-bound, high=bound, requires_grad=True)


def _buffer(values: np.ndarray, requires_grad: bool = False) -> Tensor:
    """A parameter or running statistic in a buffer of its own from the start.

    NOTE: not Tensor.zeros/ones: a constant is folded into the kernels that read it, and the lazy cache gives equal
    ones one shared buffer, so neither an in-place update (assign, load_state_dict) nor a TinyJit replay would reach
    it until it had been replaced once."""
    return Tensor(values, requires_grad=requires_grad).realize()


def _affine(shape: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Trainable scale (ones) and shift (zeros)."""
    float_np = dtypes.default_float.np
    return _buffer(np.ones(shape, float_np), requires_grad=True), _buffer(np.zeros(shape, float_np), requires_grad=True)


# ***** argument and input checks *****


def _check_int(name: str, v: Any, low: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(v).__name__} {v!r}")
    if v < low:
        raise ValueError(f"{name} must be {'at least 1' if low == 1 else 'non-negative'}, got {v}")
    return int(v)


def _per_axis(name: str, v: Any, dims: int, low: int = 1, lengths: tuple[int, ...] = ()) -> tuple[int, ...]:
    """An int for every axis, or a tuple of `dims` ints (or of one of `lengths`), each at least `low`."""
    if isinstance(v, (list, tuple)):
        if len(v) not in (dims, *lengths):
            want = " or ".join(map(str, (dims, *lengths)))
            raise ValueError(f"{name} must be an int or {want} ints for a {dims}-d layer, got {tuple(v)}")
        return tuple(_check_int(name, x, low) for x in v)
    return (_check_int(name, v, low),) * dims


def _check_eps(eps: Any) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)):
        raise TypeError(f"eps must be a number, got {type(eps).__name__} {eps!r}")
    if not 0 <= eps < math.inf:
        raise ValueError(f"eps must be a finite non-negative number, got {eps}")
    return float(eps)


def _check_groups(in_channels: int, out_channels: int, groups: Any) -> int:
    groups = _check_int("groups", groups)
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"in_channels {in_channels} and out_channels {out_channels} must divide by groups {groups}")
    return groups


def _check_tensor(layer: object, x: Any) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{type(layer).__name__} takes a Tensor, got {type(x).__name__}")


def _check_ndim(layer: object, x: Tensor, allowed: tuple[int, ...]) -> None:
    _check_tensor(layer, x)
    if x.ndim not in allowed:
        raise ValueError(f"{type(layer).__name__} expects a {' or '.join(map(str, allowed))}-d input, got {x.shape}")


def _check_channels(layer: object, x: Tensor, channels: int) -> None:
    """`x` is (N, C, *) with C == channels."""
    _check_tensor(layer, x)
    if x.ndim < 2 or x.shape[1] != channels:
        raise ValueError(f"{type(layer).__name__} expects an (N, {channels}, ...) input, got {x.shape}")


def _channel_shape(ndim: int) -> tuple[int, ...]:
    """Broadcast shape for a per-channel (axis 1) vector against an (N, C, *spatial) input."""
    return (1, -1) + (1,) * (ndim - 2)


# ***** linear and convolution *****


class Linear:
    """y = x @ weight.T + bias, weight (out_features, in_features) as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        self.in_features = _check_int("in_features", in_features, low=0)
        self.out_features = _check_int("out_features", out_features, low=0)
        self.weight = _kaiming(out_features, in_features)
        self.bias = _uniform_bias(out_features, in_features) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        _check_tensor(self, x)
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"Linear expects an input whose last axis is {self.in_features}, got {x.shape}")
        return x.linear(self.weight.T, self.bias)


class Conv2d:
    """2-d convolution over (N, C, H, W); weight (out_channels, in_channels/groups, kh, kw) as in PyTorch. padding:
    an int, one per axis, "valid", "same", or (as tinygrad) two per axis in pad2d order (left, right, top, bottom)."""

    dims = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] | str = 0,
        dilation: int | tuple[int, ...] = 1,
        groups: int = 1,
        bias: bool = True,
    ):
        self.in_channels = _check_int("in_channels", in_channels)
        self.out_channels = _check_int("out_channels", out_channels)
        self.groups = _check_groups(in_channels, out_channels, groups)
        self.kernel_size = _per_axis("kernel_size", kernel_size, self.dims)
        self.stride, self.dilation = _per_axis("stride", stride, self.dims), _per_axis("dilation", dilation, self.dims)
        self.padding = _conv_padding(padding, self.kernel_size, self.stride, self.dilation)
        self.weight = _kaiming(out_channels, in_channels // groups, *self.kernel_size)
        self.bias = _uniform_bias(out_channels, prod(self.weight.shape[1:])) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        _check_ndim(self, x, (self.dims + 2,))
        _check_channels(self, x, self.in_channels)
        return x.conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding)


class Conv1d(Conv2d):
    """1-d convolution over (N, C, L); weight (out_channels, in_channels/groups, k) as in PyTorch."""

    dims = 1


def _conv_padding(
    padding: int | tuple[int, ...] | str, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]
) -> tuple[int, ...]:
    """Padding per axis, or pad2d-order pairs for "same" (the odd extra element goes after, as in PyTorch)."""
    if padding == "valid":
        return (0,) * len(kernel)
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError("padding='same' needs stride 1, as in PyTorch")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple(p for t in reversed(totals) for p in (t // 2, t - t // 2))
    if isinstance(padding, str):
        raise ValueError(f"padding must be an int, a tuple, 'valid' or 'same', got {padding!r}")
    return _per_axis("padding", padding, len(kernel), low=0, lengths=(2 * len(kernel),))


class ConvTranspose2d:
    """Transposed 2-d convolution; weight (in_channels, out_channels/groups, kh, kw) as in PyTorch."""

    dims = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] = 0,
        output_padding: int | tuple[int, ...] = 0,
        dilation: int | tuple[int, ...] = 1,
        groups: int = 1,
        bias: bool = True,
    ):
        self.in_channels = _check_int("in_channels", in_channels)
        self.out_channels = _check_int("out_channels", out_channels)
        self.groups = _check_groups(in_channels, out_channels, groups)
        self.kernel_size = _per_axis("kernel_size", kernel_size, self.dims)
        self.stride, self.dilation = _per_axis("stride", stride, self.dims), _per_axis("dilation", dilation, self.dims)
        self.padding = _per_axis("padding", padding, self.dims, low=0)
        self.output_padding = _per_axis("output_padding", output_padding, self.dims, low=0)
        if any(op >= max(s, d) for op, s, d in zip(self.output_padding, self.stride, self.dilation)):
            raise ValueError(f"output_padding {self.output_padding} must be smaller than stride {self.stride} or "
                             f"dilation {self.dilation} on each axis, as in PyTorch")  # fmt: skip
        # NOTE: PyTorch's fan_in for this layout is weight.shape[1] * prod(kernel), i.e. out_channels/groups based
        self.weight = _kaiming(in_channels, out_channels // groups, *self.kernel_size)
        self.bias = _uniform_bias(out_channels, prod(self.weight.shape[1:])) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        _check_ndim(self, x, (self.dims + 2,))
        _check_channels(self, x, self.in_channels)
        return x.conv_transpose2d(
            self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding, self.output_padding
        )


class ConvTranspose1d(ConvTranspose2d):
    """Transposed 1-d convolution; weight (in_channels, out_channels/groups, k) as in PyTorch."""

    dims = 1


# ***** normalisation *****


class BatchNorm2d:
    """Batch normalisation over (N, C, H, W): batch statistics in training (updating the running ones in place),
    running statistics in eval. momentum=None keeps a cumulative average, as in PyTorch."""

    input_dims: tuple[int, ...] = (4,)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        affine: bool = True,
        track_running_stats: bool = True,
        momentum: float | None = 0.1,
    ):
        self.num_features, self.eps = _check_int("num_features", num_features), _check_eps(eps)
        if momentum is not None and (isinstance(momentum, bool) or not isinstance(momentum, (int, float))):
            raise TypeError(f"momentum must be a number or None, got {type(momentum).__name__} {momentum!r}")
        if momentum is not None and not 0 <= momentum <= 1:
            raise ValueError(f"momentum must be in [0, 1] (or None for a cumulative average), got {momentum}")
        self.momentum = momentum
        self.weight, self.bias = _affine((num_features,)) if affine else (None, None)
        if track_running_stats:
            self.running_mean = _buffer(np.zeros(num_features, dtypes.default_float.np))
            self.running_var = _buffer(np.ones(num_features, dtypes.default_float.np))
            self.num_batches_tracked = _buffer(np.zeros((), np.int64))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def __call__(self, x: Tensor) -> Tensor:
        _check_ndim(self, x, self.input_dims)
        _check_channels(self, x, self.num_features)
        if not Tensor.training and self.running_mean is not None:
            return x.batchnorm(self.weight, self.bias, self.running_mean, (self.running_var + self.eps).rsqrt())
        if (n := prod(x.shape) // x.shape[1]) < 2:
            raise ValueError(f"{type(self).__name__} needs more than 1 value per channel for batch stats: {x.shape}")
        axes = (0, *range(2, x.ndim))
        mean = x.mean(axes)
        var = (x - mean.reshape(_channel_shape(x.ndim))).square().mean(axes)  # biased, used to normalise
        if Tensor.training and self.running_mean is not None:
            self._update_running_stats(mean.detach(), var.detach(), n)
        return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())

    def _update_running_stats(self, mean: Tensor, var: Tensor, n: int) -> None:
        """In-place (assign) exponential averages, realized at once, so a TinyJit-captured step replays them."""
        count = self.num_batches_tracked.assign(self.num_batches_tracked + 1)
        m = self.momentum if self.momentum is not None else 1 / count.cast(self.running_mean.dtype)
        self.running_mean.assign((1 - m) * self.running_mean + m * mean)
        self.running_var.assign((1 - m) * self.running_var + (m * n / (n - 1)) * var)  # unbiased, as PyTorch
        # NOTE: optimizers realize only trainable params; left lazy, these would grow a graph across steps and be
        # missing from a TinyJit capture (which records only what runs during the call)
        Tensor.corealize([self.running_mean, self.running_var, self.num_batches_tracked])


class BatchNorm1d(BatchNorm2d):
    """Batch normalisation over (N, C) or (N, C, L)."""

    input_dims = (2, 3)


class LayerNorm:
    """Normalise over the trailing `normalized_shape` axes, then scale by weight and shift by bias."""

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
    ):
        shape = normalized_shape if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
        self.normalized_shape = _per_axis("normalized_shape", shape, len(shape))
        self.eps = _check_eps(eps)
        self.weight, self.bias = _affine(self.normalized_shape) if elementwise_affine else (None, None)
        self.bias = self.bias if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        _check_tensor(self, x)
        n = len(self.normalized_shape)
        if x.ndim < n or tuple(x.shape[-n:]) != self.normalized_shape:
            raise ValueError(f"LayerNorm over {self.normalized_shape} got an input of shape {x.shape}")
        y = x.layernorm(tuple(range(-n, 0)), self.eps)
        y = y if self.weight is None else y * self.weight
        return y if self.bias is None else y + self.bias


class LayerNorm2d:
    """LayerNorm over the channel axis of (N, C, H, W) (tinygrad's LayerNorm2d): each pixel's C values are normalised,
    then scaled and shifted per channel. The same as LayerNorm(C) applied to x.permute(0, 2, 3, 1)."""

    def __init__(self, channels: int, eps: float = 1e-5, elementwise_affine: bool = True):
        self.channels, self.eps = _check_int("channels", channels), _check_eps(eps)
        self.weight, self.bias = _affine((channels,)) if elementwise_affine else (None, None)

    def __call__(self, x: Tensor) -> Tensor:
        _check_ndim(self, x, (4,))
        _check_channels(self, x, self.channels)
        y = x.layernorm(1, self.eps)
        if self.weight is None:
            return y
        return y * self.weight.reshape(_channel_shape(4)) + self.bias.reshape(_channel_shape(4))


class GroupNorm:
    """Normalise each of `num_groups` channel groups of an (N, C, *) input, then a per-channel affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
        self.num_groups = _check_int("num_groups", num_groups)
        self.num_channels, self.eps = _check_int("num_channels", num_channels), _check_eps(eps)
        if num_channels % num_groups:
            raise ValueError(f"num_channels {num_channels} must divide by num_groups {num_groups}")
        self.weight, self.bias = _affine((num_channels,)) if affine else (None, None)

    def __call__(self, x: Tensor) -> Tensor:
        _check_channels(self, x, self.num_channels)
        y = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
        if self.weight is None:
            return y
        return y * self.weight.reshape(_channel_shape(x.ndim)) + self.bias.reshape(_channel_shape(x.ndim))


class InstanceNorm(GroupNorm):
    """tinygrad's InstanceNorm: normalise each channel of each sample of an (N, C, *) input over the other axes,
    then a per-channel affine (on by default, unlike PyTorch's InstanceNorm1d/2d)."""

    input_dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
        super().__init__(_check_int("num_features", num_features), num_features, eps, affine)
        self.num_features = num_features

    def __call__(self, x: Tensor) -> Tensor:
        if self.input_dims:
            _check_ndim(self, x, self.input_dims)
        return super().__call__(x)


class InstanceNorm2d(InstanceNorm):
    """Normalise each channel of each sample of (N, C, H, W) over its spatial axes (PyTorch's arguments and defaults:
    no affine)."""

    input_dims = (4,)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
    ):
        if track_running_stats:
            # TODO: running statistics for eval, as PyTorch's track_running_stats=True
            raise ValueError(f"{type(self).__name__}(track_running_stats=True) is not supported: it normalises each "
                             "sample with its own statistics in training and eval")  # fmt: skip
        super().__init__(num_features, eps, affine)


class InstanceNorm1d(InstanceNorm2d):
    """Normalise each channel of each sample of (N, C, L) over L (PyTorch's arguments and defaults: no affine)."""

    input_dims = (3,)


# ***** embedding, dropout, attention *****


class Embedding:
    """Look up rows of weight (num_embeddings, embedding_dim) for an integer index tensor of any shape. An index out
    of [0, num_embeddings) gives a row of zeros (checking would read the indices back from the device)."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        self.num_embeddings = _check_int("num_embeddings", num_embeddings)
        self.embedding_dim = _check_int("embedding_dim", embedding_dim)
        self.weight = Tensor.randn(num_embeddings, embedding_dim, requires_grad=True)

    def __call__(self, idx: Tensor) -> Tensor:
        _check_tensor(self, idx)
        if dtypes.is_float(idx.dtype) or idx.dtype == dtypes.bool:
            raise TypeError(f"Embedding needs integer indices, got {idx.dtype}")
        vocab = Tensor.arange(self.num_embeddings, device=idx.device)
        onehot = (idx.unsqueeze(-1) == vocab).cast(self.weight.dtype)  # (*idx.shape, num_embeddings)
        return onehot @ self.weight


class Dropout:
    """Zero each element with probability p in training (scaling the rest by 1/(1-p)); identity in eval."""

    def __init__(self, p: float = 0.5):
        if isinstance(p, bool) or not isinstance(p, (int, float)):
            raise TypeError(f"dropout probability must be a number, got {type(p).__name__} {p!r}")
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        _check_tensor(self, x)
        return x.dropout(self.p)


class MultiHeadAttention:
    """Batch-first self-attention over (B, T, C), with PyTorch's nn.MultiheadAttention parameter names and init."""

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, dropout: float = 0.0, causal: bool = False):
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} must divide by num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.dropout, self.causal = embed_dim, num_heads, dropout, causal
        self.in_proj_weight = Tensor.glorot_uniform(3 * embed_dim, embed_dim, requires_grad=True)
        self.in_proj_bias = Tensor.zeros(3 * embed_dim, requires_grad=True) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            self.out_proj.bias = Tensor.zeros(embed_dim, requires_grad=True)

    def __call__(self, x: Tensor) -> Tensor:
        _check_ndim(self, x, (3,))
        q, k, v = self.heads(x)
        return self.merge(q.scaled_dot_product_attention(k, v, dropout_p=self.dropout, is_causal=self.causal))

    def heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The queries, keys and values of x (B, T, C), each (B, H, T, C/H): what a key/value cache keeps."""
        (b, t, c), h = x.shape, self.num_heads
        qkv = x.linear(self.in_proj_weight.T, self.in_proj_bias)  # (B, T, 3C)
        qkv = qkv.reshape(b, t, 3, h, c // h).permute(2, 0, 3, 1, 4)  # (3, B, H, T, C/H)
        return qkv[0], qkv[1], qkv[2]

    def merge(self, y: Tensor) -> Tensor:
        """The heads' outputs (B, H, T, C/H) side by side and projected: (B, T, C)."""
        b, h, t, d = y.shape
        return self.out_proj(y.transpose(1, 2).reshape(b, t, h * d))


# ***** recurrent *****


def _bias_rows(bias: Tensor | None, rows: int, weight: Tensor) -> Tensor:
    """`bias` repeated in `rows` rows, or zeros of its shape (weight's rows) without one."""
    if bias is None:
        return Tensor.zeros(rows, weight.shape[0], dtype=weight.dtype, device=weight.device)
    return bias.reshape(1, -1).expand(rows, -1)


class LSTM:
    """Batch-first LSTM over (B, T, input_size) with PyTorch's parameter names, layouts, gate order (i, f, g, o) and
    init U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)): weight_ih_l{k} (4H, in), weight_hh_l{k} (4H, H), bias_ih_l{k},
    bias_hh_l{k} per layer k. Returns (output (B, T, H) of the last layer, (h_n, c_n) each (num_layers, B, H)), as
    PyTorch; the initial state `hx` is (h_0, c_0), zeros when None. Unidirectional only.

    NOTE: a Python loop over the time steps, so the graph (and a TinyJit capture) grows linearly with T."""

    gates = 4

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True):
        self.input_size, self.hidden_size = _check_int("input_size", input_size), _check_int("hidden_size", hidden_size)
        self.num_layers, self.bias = _check_int("num_layers", num_layers), bool(bias)
        bound = 1 / math.sqrt(hidden_size)
        for k in range(num_layers):
            fan_in = input_size if k == 0 else hidden_size
            shapes = {f"weight_ih_l{k}": (self.gates * hidden_size, fan_in),
                      f"weight_hh_l{k}": (self.gates * hidden_size, hidden_size)}  # fmt: skip
            if bias:
                shapes |= {f"bias_ih_l{k}": (self.gates * hidden_size,), f"bias_hh_l{k}": (self.gates * hidden_size,)}
            for name, shape in shapes.items():
                setattr(self, name, Tensor.uniform(*shape, low=-bound, high=bound, requires_grad=True))

    def _layer_weights(self, k: int) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        return tuple(getattr(self, f"{w}_l{k}", None) for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))

    def _initial(self, x: Tensor, hx: Tensor | None) -> Tensor:
        want = (self.num_layers, x.shape[0], self.hidden_size)
        if hx is None:
            return Tensor.zeros(*want, dtype=self.weight_ih_l0.dtype, device=x.device)
        _check_tensor(self, hx)
        if tuple(hx.shape) != want:
            raise ValueError(f"{type(self).__name__} expects an initial state of shape {want}, got {hx.shape}")
        return hx

    def _check_input(self, x: Tensor) -> None:
        _check_ndim(self, x, (3,))
        if x.shape[2] != self.input_size:
            raise ValueError(f"{type(self).__name__} expects a (B, T, {self.input_size}) input, got {x.shape}")

    def _steps(self, x: Tensor, k: int, state: tuple[Tensor, ...], zero: bool) -> tuple[Tensor, tuple[Tensor, ...]]:
        """Layer k over every step of x (B, T, in) from `state` (zeros when `zero`): the outputs (B, T, H) and the last
        state."""
        w_ih, w_hh, b_ih, b_hh = self._layer_weights(k)
        xs = x.linear(w_ih.T, b_ih)  # (B, T, G*H): the input's part of every step at once
        outs = []
        for t in range(x.shape[1]):
            # NOTE: from zeros the first step's hidden part is the bias alone; as a matmul of zeros it would be a kernel
            # reading only weights, which the lazy cache shares between calls and so a TinyJit capture cannot replay
            gh = _bias_rows(b_hh, x.shape[0], w_hh) if zero and t == 0 else state[0].linear(w_hh.T, b_hh)
            # NOTE: each step's state (and its gradient) is a kernel of its own: left to fusion, the recurrence would
            # inline every earlier step into each of its readers, and scheduling grows quadratically with T
            state = tuple(s.contiguous().contiguous_backward() for s in self._cell(xs[:, t], gh, state))
            outs.append(state[0])
        return Tensor.stack(outs, dim=1), state

    @staticmethod
    def _cell(gx: Tensor, gh: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        i, f, g, o = (gx + gh).chunk(4, dim=1)
        c = f.sigmoid() * state[1] + i.sigmoid() * g.tanh()
        return o.sigmoid() * c.tanh(), c

    def __call__(self, x: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        self._check_input(x)
        h0, c0 = (self._initial(x, s) for s in (hx if hx is not None else (None, None)))
        hs, cs = [], []
        for k in range(self.num_layers):
            x, (h, c) = self._steps(x, k, (h0[k], c0[k]), hx is None)
            hs, cs = hs + [h], cs + [c]
        return x, (Tensor.stack(hs), Tensor.stack(cs))


class GRU(LSTM):
    """Batch-first GRU over (B, T, input_size) with PyTorch's parameter names, layouts, gate order (r, z, n), the
    reset gate applied to (W_hn h + b_hn), and init U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)). Returns (output
    (B, T, H) of the last layer, h_n (num_layers, B, H)), as PyTorch; the initial state `hx` is zeros when None.
    Unidirectional only.

    NOTE: a Python loop over the time steps, so the graph (and a TinyJit capture) grows linearly with T."""

    gates = 3

    @staticmethod
    def _cell(gx: Tensor, gh: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        (xr, xz, xn), (hr, hz, hn) = gx.chunk(3, dim=1), gh.chunk(3, dim=1)
        z = (xz + hz).sigmoid()
        n = (xn + (xr + hr).sigmoid() * hn).tanh()
        return ((1 - z) * n + z * state[0],)

    def __call__(self, x: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        self._check_input(x)
        h0, hs = self._initial(x, hx), []
        for k in range(self.num_layers):
            x, (h,) = self._steps(x, k, (h0[k],), hx is None)
            hs.append(h)
        return x, Tensor.stack(hs)
