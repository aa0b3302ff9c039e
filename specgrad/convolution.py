"""Convolution and pooling: sliding windows as views, convolution forward and its two gradients, transposed
convolution, and the pooling windows. Tensor.conv2d, conv_transpose2d, max_pool2d and avg_pool2d call these.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Sequence
from typing import Any

from specgrad import mlops
from specgrad.helpers import InvalidArgument, all_int, ceildiv, flatten, make_pair, prod
from specgrad.lazy import LazyBuffer
from specgrad.shape.symbolic import sint
from specgrad.tensor import Tensor


def pool(x: Tensor, k_: tuple[int, ...], s_: tuple[int, ...], d_: tuple[int, ...]) -> Tensor:
    if len(k_) > x.ndim:
        raise InvalidArgument(f"a {len(k_)}-d window does not fit a tensor of shape {x.shape}")
    lead, i_ = list(x.shape[: x.ndim - len(k_)]), x.shape[x.ndim - len(k_) :]
    o_ = [(i - d * (k - 1) - 1) // s + 1 for i, d, k, s in zip(i_, d_, k_, s_)]
    if any(o <= 0 for o in o_):
        raise InvalidArgument(f"window {k_} (dilation {d_}) is larger than the input {tuple(i_)}")
    none = [None] * len(lead)
    if all(k <= s for k, s in zip(k_, s_)) and all(d == 1 for d in d_):
        # windows do not overlap: pad or crop to o*s, split each axis into (o, s) and keep the first k of each s
        # NOTE: o*s can pass the end when s > k; the padding is never inside a kept window
        xup = x.pad(none + [(0, max(0, o * s - i)) for o, s, i in zip(o_, s_, i_)])
        xup = xup.shrink(none + [(0, o * s) for o, s in zip(o_, s_)])
        xup = xup.reshape(*lead, *flatten((o, s) for o, s in zip(o_, s_)))
        xup = xup.shrink(none + flatten(((0, o), (0, k)) for o, k in zip(o_, k_)))
        n = len(lead)
        return xup.permute(*range(n), *[n + 2 * j for j in range(len(k_))], *[n + 2 * j + 1 for j in range(len(k_))])
    # NOTE: repeat each axis e times, then read it as rows of length r = f*i+d: row a starts a*d further in, so
    # [a, b] is x[a*d + b] (no wrap while b < o*s); then split b into (o, s) and keep s == 0. f > 1 only when a
    # stride longer than the window makes o*s pass i+d.
    r_ = [max(1, ceildiv(o * s - d, i)) * i + d for i, d, o, s in zip(i_, d_, o_, s_)]
    e_ = [ceildiv(k * r, i) for k, i, r in zip(k_, i_, r_)]
    xup = x.reshape(*lead, *flatten((1, i) for i in i_)).expand(*lead, *flatten((e, i) for e, i in zip(e_, i_)))
    xup = xup.reshape(*lead, *[e * i for e, i in zip(e_, i_)])
    xup = xup.shrink(none + [(0, k * r) for k, r in zip(k_, r_)])
    xup = xup.reshape(*lead, *flatten((k, r) for k, r in zip(k_, r_)))
    xup = xup.shrink(none + flatten(((0, k), (0, o * s)) for k, o, s in zip(k_, o_, s_)))
    xup = xup.reshape(*lead, *flatten((k, o, s) for k, o, s in zip(k_, o_, s_)))
    xup = xup.shrink(none + flatten(((0, k), (0, o), (0, 1)) for k, o in zip(k_, o_)))
    xup = xup.reshape(*lead, *flatten((k, o) for k, o in zip(k_, o_)))
    n = len(lead)
    return xup.permute(*range(n), *[n + 2 * j + 1 for j in range(len(k_))], *[n + 2 * j for j in range(len(k_))])


def _conv_padding(padding: int | Sequence[int], n: int) -> list[int]:
    """Padding in pad2d order (last axis first, (before, after) each)."""
    if isinstance(padding, int):
        return [padding] * (2 * n)
    padding = list(padding)
    if len(padding) == 2 * n:
        return padding
    if len(padding) == n:
        return [p for p in reversed(padding) for _ in range(2)]
    raise InvalidArgument(f"padding {padding} must be an int, {n} values or {2 * n} values for a {n}-d convolution")


def check_conv_dims(x: Tensor, weight: Tensor, n: int) -> None:
    if weight.ndim != n + 2:
        raise InvalidArgument(f"conv{n}d needs a {n + 2}-d weight, got shape {weight.shape}")


def conv(
    x: Tensor, weight: Tensor, bias: Tensor | None, groups: int, stride: Any, dilation: Any, padding: Any
) -> Tensor:
    (cout, cin), hw = weight.shape[:2], weight.shape[2:]
    if x.ndim != weight.ndim or groups * cin != x.shape[1] or cout % groups:
        raise InvalidArgument(
            f"conv input {x.shape} does not fit weight {weight.shape} with groups={groups}: need input "
            f"(N, {groups * cin}, ...) with {weight.ndim - 2} spatial axes"
        )
    geometry = _ConvGeometry(groups, make_pair(stride, len(hw)), make_pair(dilation, len(hw)),
                             _conv_padding(padding, len(hw)))  # fmt: skip
    geometry.output_shape(x.shape, weight.shape)  # NOTE: says what is wrong before any graph is built
    ret = Tensor._apply(_Conv, x, weight, geometry=geometry)
    return ret if bias is None else ret + bias.reshape(1, -1, *[1] * len(hw))


def _fold_stride(x: Tensor, weight: Tensor, geometry: _ConvGeometry) -> tuple[Tensor, Tensor, _ConvGeometry]:
    """The same convolution with stride 1 (space to depth): along an axis of stride s, padded input position s*q + r
    becomes position q of channel phase r, and tap s*a + r becomes tap a of that phase. A strided window read walks
    memory s apart, which no vector load serves; the folded one reads rows contiguously like any stride-1 convolution.
    Phases no tap uses (a kernel shorter than the stride) are dropped; a kernel that is not a multiple of the stride
    gets zero taps up to the next multiple."""
    (cout, cin), hw, n = weight.shape[:2], weight.shape[2:], len(weight.shape[2:])
    offsets, phases = _folded_taps(hw, geometry.stride)
    out = geometry.output_shape(x.shape, weight.shape)[2:]
    rows = [o + a - 1 for o, a in zip(out, offsets)]  # q positions the folded convolution reads, per axis
    xp = x.pad2d(geometry.padding)
    xp = xp.pad([None, None, *[(0, q * s - size) for q, s, size in zip(rows, geometry.stride, xp.shape[2:])]])
    xp = xp.reshape(*x.shape[:2], *flatten((q, s) for q, s in zip(rows, geometry.stride)))
    w = weight.pad([None, None, *[(0, a * s - k) for a, s, k in zip(offsets, geometry.stride, hw)]])
    w = w.reshape(cout, cin, *flatten((a, s) for a, s in zip(offsets, geometry.stride)))
    keep = [None, None, *flatten((None, (0, p)) for p in phases)]  # NOTE: (q or a, phase) per axis
    to_channels = [0, 1, *[3 + 2 * i for i in range(n)], *[2 + 2 * i for i in range(n)]]
    xp = xp.shrink(keep).permute(to_channels).reshape(x.shape[0], x.shape[1] * prod(phases), *rows)
    w = w.shrink(keep).permute(to_channels).reshape(cout, cin * prod(phases), *offsets)
    return xp, w, _ConvGeometry(geometry.groups, (1,) * n, (1,) * n, [0] * (2 * n))


def _folded_taps(hw: tuple[sint, ...], stride: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """Per axis, the taps of each phase (kernel k over stride s) and the phases kept."""
    return [ceildiv(k, s) for k, s in zip(hw, stride)], [min(k, s) for k, s in zip(hw, stride)]


def _unfold_weight(w: Tensor, w_shape: tuple[sint, ...], stride: tuple[int, ...]) -> Tensor:
    """A folded weight (or its gradient) back in the convolution's own shape: _fold_stride's weight steps undone."""
    (cout, cin), hw, n = w_shape[:2], w_shape[2:], len(w_shape[2:])
    offsets, phases = _folded_taps(hw, stride)
    w = w.reshape(cout, cin, *phases, *offsets)
    w = w.permute(0, 1, *flatten((2 + n + i, 2 + i) for i in range(n)))  # (cout, cin, a, phase, ...) per axis
    w = w.pad([None, None, *flatten((None, (0, s - p)) for s, p in zip(stride, phases))])
    w = w.reshape(cout, cin, *[a * s for a, s in zip(offsets, stride)])
    return w.shrink([None, None, *[(0, k) for k in hw]])


def _foldable(x_shape: tuple[sint, ...], geometry: _ConvGeometry) -> bool:
    """A strided convolution without dilation, of known sizes: _fold_stride applies."""
    return any(s > 1 for s in geometry.stride) and all(d == 1 for d in geometry.dilation) and all_int(x_shape)


@dataclasses.dataclass(frozen=True)
class _ConvGeometry:
    groups: int
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    padding: list[int]  # pad2d order: last axis first, (before, after) each

    def windows(self, x: Tensor, kernel: tuple[sint, ...]) -> Tensor:
        """(N, C, *out_spatial, *kernel): every window of the padded input."""
        return x.pad2d(self.padding)._pool(tuple(kernel), self.stride, self.dilation)

    def output_shape(self, x_shape: tuple[sint, ...], w_shape: tuple[sint, ...]) -> tuple[sint, ...]:
        pads = self.padding_per_axis()
        padded = [i + before + after for i, (before, after) in zip(x_shape[2:], pads)]
        o_ = [(p - d * (k - 1) - 1) // s + 1 for p, k, s, d in zip(padded, w_shape[2:], self.stride, self.dilation)]
        if any(o <= 0 for o in o_):
            raise InvalidArgument(f"window {tuple(w_shape[2:])} (dilation {self.dilation}) is larger than the input "
                                  f"{tuple(x_shape[2:])} (padded: {tuple(padded)})")  # fmt: skip
        return (x_shape[0], w_shape[0], *o_)

    def padding_per_axis(self) -> list[tuple[int, int]]:
        """(before, after) for each spatial axis, first axis first."""
        return [(self.padding[i], self.padding[i + 1]) for i in range(0, len(self.padding), 2)][::-1]


class _Conv(mlops.Function):
    """Convolution with its own backward. Differentiating the windowed product would give the input gradient as
    col2im: a masked scatter-add per window position, 1 GFLOP/s. Instead it is the transposed convolution of the
    output gradient with the flipped weights, one dense reduce like the forward (the scheduler's pad copy makes its
    reads unmasked)."""

    def forward(self, x: LazyBuffer, weight: LazyBuffer, geometry: _ConvGeometry) -> LazyBuffer:
        self.x, self.weight, self.geometry = x, weight, geometry
        xt, wt = Tensor._wrap(x), Tensor._wrap(weight)
        if _foldable(xt.shape, geometry):
            return _conv_forward(*_fold_stride(xt, wt, geometry)).lazydata
        return _conv_forward(xt, wt, geometry).lazydata

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        x, weight, g = Tensor._wrap(self.x), Tensor._wrap(self.weight), Tensor._wrap(grad)
        dx = dw = None
        if self.needs_input_grad[0]:
            dx = _conv_input_grad(g, weight, x.shape, self.geometry)
        if self.needs_input_grad[1] and _foldable(x.shape, self.geometry):
            # NOTE: the folded input, as the forward read it: the weight gradient's windows read rows contiguously
            xs, ws, folded = _fold_stride(x, weight, self.geometry)
            dw = _unfold_weight(_conv_weight_grad(g, xs, ws.shape, folded), weight.shape, self.geometry.stride)
        elif self.needs_input_grad[1]:
            dw = _conv_weight_grad(g, x, weight.shape, self.geometry)
        return (None if dx is None else dx.lazydata), (None if dw is None else dw.lazydata)


def _conv_forward(x: Tensor, weight: Tensor, geometry: _ConvGeometry) -> Tensor:
    bs, (cout, cin), hw, groups = x.shape[0], weight.shape[:2], weight.shape[2:], geometry.groups
    xw = geometry.windows(x, hw)  # (bs, cin_, *oyx, *hw)
    rcout, oyx = cout // groups, xw.shape[2 : 2 + len(hw)]
    xw = xw.reshape(bs, groups, cin, 1, *oyx, *hw).expand(bs, groups, cin, rcout, *oyx, *hw)
    n = len(oyx)
    xw = xw.permute(0, 1, 3, *[4 + i for i in range(n)], 2, *[4 + n + i for i in range(len(hw))])
    # (bs, groups, rcout, *oyx, cin, *hw) * (1, groups, rcout, 1..., cin, *hw), summed over cin and the window
    w = weight.reshape(groups, rcout, cin, *hw)
    if rcout > 1 and _rows_take_no_lanes(oyx):
        # NOTE: out channels innermost (a copy of the small weight), so the kernel takes vector lanes across them
        w = w.permute(0, 2, *range(3, 3 + n), 1).contiguous().permute(0, 2 + n, 1, *range(2, 2 + n))
    w = w.reshape(1, groups, rcout, *[1] * n, cin, *hw)
    return (xw * w).sum([-1 - i for i in range(1 + len(hw))], keepdim=True).reshape(bs, cout, *oyx)


def _rows_take_no_lanes(oyx: tuple[sint, ...]) -> bool:
    """Output rows of a width no vector divides (a CNN's 14-wide second layer): their kernels run scalar unless the
    lanes go across out channels, which the forward and the weight gradient then make innermost by a copy. Rows of
    other widths keep their contiguous lanes, without the copy (a gradient's copy would fuse into the kernel that
    makes the gradient, with stores 8 elements apart)."""
    return isinstance(oyx[-1], int) and oyx[-1] % 4 != 0


def _conv_weight_grad(g: Tensor, x: Tensor, w_shape: tuple[sint, ...], geometry: _ConvGeometry) -> Tensor:
    """d(loss)/d(weight): each window times its output's gradient, summed over the batch and the output positions."""
    bs, (cout, cin), hw, groups = x.shape[0], w_shape[:2], w_shape[2:], geometry.groups
    xw = geometry.windows(x, hw)  # (bs, cin_, *oyx, *hw)
    rcout, oyx, n = cout // groups, xw.shape[2 : 2 + len(hw)], len(hw)
    xw = xw.reshape(bs, groups, 1, cin, *oyx, *hw)
    g = g.reshape(bs, groups, rcout, *oyx)
    if rcout > 1 and _rows_take_no_lanes(oyx):
        # NOTE: out channels innermost (a copy), so the kernel takes vector lanes across them, as the forward does
        g = g.permute(0, 1, *range(3, 3 + n), 2).contiguous().permute(0, 1, 2 + n, *range(2, 2 + n))
    g = g.reshape(bs, groups, rcout, 1, *oyx, *[1] * n)
    return (xw * g).sum([0, *range(4, 4 + n)]).reshape(cout, cin, *hw)


def _conv_input_grad(g: Tensor, weight: Tensor, x_shape: tuple[sint, ...], geometry: _ConvGeometry) -> Tensor:
    """d(loss)/d(input): the output gradient convolved with the flipped weights (in and out channels swapped within
    each group). With a stride s, input position s*q + r (phase r) is reached only by the taps j whose window start
    r + before - d*j is a multiple of s: each phase is its own stride-1 convolution with those taps, and the phases
    interleave into the input. No zeros are inserted between gradients, so no multiply is spent on them."""
    (cout, cin), hw, groups = weight.shape[:2], weight.shape[2:], geometry.groups
    spatial = zip(x_shape[2:], g.shape[2:], hw, geometry.stride, geometry.dilation, geometry.padding_per_axis())
    axes = [_input_grad_phases(i, o, k, s, d, before) for i, o, k, s, d, (before, _) in spatial]
    trailing = list(range(3, weight.ndim + 1))
    w = weight.reshape(groups, cout // groups, cin, *hw).permute(0, 2, 1, *trailing)  # (groups, cin, cout/groups, *hw)
    rows = [ceildiv(i, s) for i, s in zip(x_shape[2:], geometry.stride)]  # q of s*q + r, per axis
    parts = []
    for phase in itertools.product(*axes):
        if any(p is None for p in phase):
            continue  # NOTE: no tap reaches this phase (a stride longer than the window): its gradient is zero
        taps = w[(slice(None),) * 3 + tuple(slice(p.first, p.last + 1, p.step) for p in phase)].flip(trailing)
        dilation = tuple(p.dilation for p in phase)
        # NOTE: through _conv, so a transposed convolution built on this differentiates with conv's own backward
        part = conv(g.pad([None, None, *[(p.left, p.right) for p in phase]]), taps.flatten(end_dim=1), None, groups,
                     1, dilation, 0)  # fmt: skip
        # NOTE: the phase's q positions become column r of a (q, s) grid per axis, zero in the other columns
        part = part.pad([None, None, *[(0, q - length) for q, length in zip(rows, part.shape[2:])]])
        part = part.reshape(*part.shape[:2], *flatten((q, 1) for q in rows))
        parts.append(part.pad([None, None, *flatten((None, (p.phase, s - 1 - p.phase))
                                                    for p, s in zip(phase, geometry.stride))]))  # fmt: skip
    if not parts:
        # NOTE: every position is padding the stride skips: zeros, still a function of g and the weight (so a
        # transposed convolution built on this keeps its graph and gives both zero gradients), from empty slices of
        # them, which no inf or nan reaches
        g_zeros, w_zeros = (t.shrink([(0, 0)] * t.ndim).pad([(0, size) for size in x_shape]) for t in (g, weight))
        return g_zeros + w_zeros
    dx = functools.reduce(lambda a, b: a + b, parts)
    dx = dx.reshape(*dx.shape[:2], *[q * s for q, s in zip(rows, geometry.stride)])
    return dx.shrink([None, None, *[(0, i) for i in x_shape[2:]]])


@dataclasses.dataclass(frozen=True)
class _Phase:
    """Along one axis, the input positions s*q + phase read gradient positions q - left + dilation*u through the taps
    first, first + step, ..., last of the weight (flipped, so u counts from last down)."""

    phase: int
    first: int
    last: int
    step: int
    dilation: int
    left: int
    right: int


def _input_grad_phases(i: int, o: int, k: int, s: int, d: int, before: int) -> list[_Phase | None]:
    """One entry per phase r < s of an axis of input length i, output length o, kernel k, stride s, dilation d and
    padding `before`: None where no tap reaches it."""
    phases: list[_Phase | None] = []
    for r in range(s):
        taps = [j for j in range(k) if (r + before - d * j) % s == 0]
        if not taps or r >= i:
            phases.append(None)
            continue
        step = taps[1] - taps[0] if len(taps) > 1 else 1
        dilation, length = d * step // s, ceildiv(i - r, s)
        left = -((r + before - d * taps[-1]) // s)  # NOTE: the last tap reads the gradient furthest back
        right = length + dilation * (len(taps) - 1) - o - left
        phases.append(_Phase(r, taps[0], taps[-1], step, dilation, left, right))
    return phases


def conv_transpose(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    groups: int,
    stride: Any,
    dilation: Any,
    padding: Any,
    output_padding: Any,
) -> Tensor:
    """The input gradient of the convolution that `weight` (Cin, Cout/groups, *kernel) maps Cout channels to Cin
    with: the same phases, so no multiply is spent on the zeros a stride would put between inputs."""
    (bs, cin), hw = x.shape[:2], weight.shape[2:]
    if x.ndim != weight.ndim or cin != weight.shape[0] or cin % groups:
        raise InvalidArgument(f"conv_transpose input {x.shape} does not fit weight {weight.shape} with "
                              f"groups={groups}: need input (N, {weight.shape[0]}, ...) with {weight.ndim - 2} "
                              "spatial axes")  # fmt: skip
    s_, d_, p_, op_ = (make_pair(v, len(hw)) for v in (stride, dilation, padding, output_padding))
    out = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, k, s, d, p, op in zip(x.shape[2:], hw, s_, d_, p_, op_)]
    if any(o <= 0 for o in out):
        raise InvalidArgument(f"conv_transpose of input {x.shape} with padding {p_} has no output (size {tuple(out)})")
    ret = _conv_input_grad(x, weight, (bs, weight.shape[1] * groups, *out),
                           _ConvGeometry(groups, s_, d_, _conv_padding(list(p_), len(hw))))  # fmt: skip
    return ret if bias is None else ret + bias.reshape(1, -1, *[1] * len(hw))


def pooling_windows(x: Tensor, kernel_size: Any, stride: Any, dilation: Any, padding: Any, fill: float) -> Tensor:
    """(..., *out_spatial, *kernel) windows of `x` padded with `fill`; stride defaults to the kernel."""
    k = make_pair(kernel_size)
    pads = make_pair(padding, len(k))
    if any(pads):
        x = x.pad([None] * (x.ndim - len(k)) + [(p, p) for p in pads], value=fill)
    return x._pool(k, stride if stride is not None else k, dilation)
