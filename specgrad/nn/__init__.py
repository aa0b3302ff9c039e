"""Neural network layers (PyTorch names, weight layouts and default initialisations). A model is a plain Python object.

Imports tensor, dtype, helpers and nn.state.
"""

from __future__ import annotations

import math

from specgrad.dtype import dtypes
from specgrad.helpers import make_pair, prod
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
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "Embedding",
    "Dropout",
    "MultiHeadAttention",
]


def _kaiming(*shape: int) -> Tensor:
    """PyTorch's default weight init, kaiming_uniform(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in =
    prod(shape[1:])."""
    return Tensor.kaiming_uniform(*shape, a=math.sqrt(5), requires_grad=True)


def _uniform_bias(n: int, fan_in: int) -> Tensor:
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return Tensor.uniform(n, low=-bound, high=bound, requires_grad=True)


def _channel_shape(ndim: int) -> tuple[int, ...]:
    """Broadcast shape for a per-channel (axis 1) vector against an (N, C, *spatial) input."""
    return (1, -1) + (1,) * (ndim - 2)


def _check_groups(in_channels: int, out_channels: int, groups: int) -> None:
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"in_channels {in_channels} and out_channels {out_channels} must divide by groups {groups}")


def _check_ndim(layer: object, x: Tensor, allowed: tuple[int, ...]) -> None:
    if x.ndim not in allowed:
        raise ValueError(f"{type(layer).__name__} expects a {' or '.join(map(str, allowed))}-d input, got {x.shape}")


# ***** linear and convolution *****


class Linear:
    """y = x @ weight.T + bias, weight (out_features, in_features) as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        self.weight = _kaiming(out_features, in_features)
        self.bias = _uniform_bias(out_features, in_features) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight.T, self.bias)


class Conv2d:
    """2-d convolution over (N, C, H, W); weight (out_channels, in_channels/groups, kh, kw) as in PyTorch."""

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
        _check_groups(in_channels, out_channels, groups)
        self.kernel_size = make_pair(kernel_size, self.dims)
        self.stride, self.dilation, self.groups = make_pair(stride, self.dims), make_pair(dilation, self.dims), groups
        self.padding = _conv_padding(padding, self.kernel_size, self.stride, self.dilation)
        self.weight = _kaiming(out_channels, in_channels // groups, *self.kernel_size)
        self.bias = _uniform_bias(out_channels, prod(self.weight.shape[1:])) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        _check_ndim(self, x, (self.dims + 2,))
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
    return make_pair(padding, len(kernel))


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
        _check_groups(in_channels, out_channels, groups)
        self.kernel_size, self.groups = make_pair(kernel_size, self.dims), groups
        self.stride, self.padding = make_pair(stride, self.dims), make_pair(padding, self.dims)
        self.output_padding, self.dilation = make_pair(output_padding, self.dims), make_pair(dilation, self.dims)
        # NOTE: PyTorch's fan_in for this layout is weight.shape[1] * prod(kernel), i.e. out_channels/groups based
        self.weight = _kaiming(in_channels, out_channels // groups, *self.kernel_size)
        self.bias = _uniform_bias(out_channels, prod(self.weight.shape[1:])) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        _check_ndim(self, x, (self.dims + 2,))
        return x.conv_transpose2d(
            self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding, self.output_padding
        )


class ConvTranspose1d(ConvTranspose2d):
    """Transposed 1-d convolution; weight (in_channels, out_channels/groups, k) as in PyTorch."""

    dims = 1


# ***** normalisation *****


class BatchNorm2d:
    """Batch normalisation over (N, C, H, W): batch statistics in training (updating the running ones in place),
    running statistics in eval."""

    input_dims: tuple[int, ...] = (4,)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        affine: bool = True,
        track_running_stats: bool = True,
        momentum: float = 0.1,
    ):
        self.eps, self.momentum = eps, momentum
        self.weight = Tensor.ones(num_features, requires_grad=True) if affine else None
        self.bias = Tensor.zeros(num_features, requires_grad=True) if affine else None
        if track_running_stats:
            self.running_mean = Tensor.zeros(num_features, requires_grad=False)
            self.running_var = Tensor.ones(num_features, requires_grad=False)
            self.num_batches_tracked = Tensor.zeros((), dtype=dtypes.int64, requires_grad=False)
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def __call__(self, x: Tensor) -> Tensor:
        _check_ndim(self, x, self.input_dims)
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
        m = self.momentum
        self.running_mean.assign((1 - m) * self.running_mean + m * mean)
        self.running_var.assign((1 - m) * self.running_var + (m * n / (n - 1)) * var)  # unbiased, as PyTorch
        self.num_batches_tracked.assign(self.num_batches_tracked + 1)
        # NOTE: optimizers realize only trainable params; left lazy, these would grow a graph across steps and be
        # missing from a TinyJit capture (which records only what runs during the call)
        Tensor.corealize([self.running_mean, self.running_var, self.num_batches_tracked])


class BatchNorm1d(BatchNorm2d):
    """Batch normalisation over (N, C) or (N, C, L)."""

    input_dims = (2, 3)


class LayerNorm:
    """Normalise over the trailing `normalized_shape` axes, then scale by weight and shift by bias."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True):
        self.normalized_shape, self.eps = make_pair(normalized_shape, 1), eps
        self.weight = Tensor.ones(*self.normalized_shape, requires_grad=True) if elementwise_affine else None
        self.bias = Tensor.zeros(*self.normalized_shape, requires_grad=True) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        n = len(self.normalized_shape)
        if tuple(x.shape[-n:]) != self.normalized_shape:
            raise ValueError(f"LayerNorm over {self.normalized_shape} got an input of shape {x.shape}")
        y = x.layernorm(tuple(range(-n, 0)), self.eps)
        return y if self.weight is None else y * self.weight + self.bias


class GroupNorm:
    """Normalise each of `num_groups` channel groups of an (N, C, *) input, then a per-channel affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
        if num_channels % num_groups:
            raise ValueError(f"num_channels {num_channels} must divide by num_groups {num_groups}")
        self.num_groups, self.eps = num_groups, eps
        self.weight = Tensor.ones(num_channels, requires_grad=True) if affine else None
        self.bias = Tensor.zeros(num_channels, requires_grad=True) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 2:
            raise ValueError(f"{type(self).__name__} expects an (N, C, *) input, got {x.shape}")
        y = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
        if self.weight is None:
            return y
        return y * self.weight.reshape(_channel_shape(x.ndim)) + self.bias.reshape(_channel_shape(x.ndim))


class InstanceNorm2d(GroupNorm):
    """Normalise each channel of each sample of (N, C, H, W) over its spatial axes (PyTorch defaults: no affine)."""

    input_dims: tuple[int, ...] = (4,)

    # TODO: track_running_stats=True (running statistics for eval) is not supported
    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = False):
        super().__init__(num_features, num_features, eps, affine)

    def __call__(self, x: Tensor) -> Tensor:
        _check_ndim(self, x, self.input_dims)
        return super().__call__(x)


class InstanceNorm1d(InstanceNorm2d):
    """Normalise each channel of each sample of (N, C, L) over L (PyTorch defaults: no affine)."""

    input_dims = (3,)


# ***** embedding, dropout, attention *****


class Embedding:
    """Look up rows of weight (num_embeddings, embedding_dim) for an integer index tensor of any shape."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Tensor.randn(num_embeddings, embedding_dim, requires_grad=True)

    def __call__(self, idx: Tensor) -> Tensor:
        if dtypes.is_float(idx.dtype):
            raise TypeError(f"Embedding needs integer indices, got {idx.dtype}")
        vocab = Tensor.arange(self.num_embeddings, device=idx.device)
        onehot = (idx.unsqueeze(-1) == vocab).cast(self.weight.dtype)  # (*idx.shape, num_embeddings)
        return onehot @ self.weight


class Dropout:
    """Zero each element with probability p in training (scaling the rest by 1/(1-p)); identity in eval."""

    def __init__(self, p: float = 0.5):
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
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
        (b, t, c), h = x.shape, self.num_heads
        qkv = x.linear(self.in_proj_weight.T, self.in_proj_bias)  # (B, T, 3C)
        qkv = qkv.reshape(b, t, 3, h, c // h).permute(2, 0, 3, 1, 4)  # (3, B, H, T, C/H)
        y = qkv[0].scaled_dot_product_attention(qkv[1], qkv[2], dropout_p=self.dropout, is_causal=self.causal)
        # NOTE: contiguous before the reshape: the heads' outputs interleaved by a view would reach the projection's
        # matmul as an index with divisions and modulos, which no kernel can read with vector loads
        return self.out_proj(y.transpose(1, 2).contiguous().reshape(b, t, c))
