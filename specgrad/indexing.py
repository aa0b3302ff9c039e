"""Indexing a Tensor: x[...] (ints, slices, None, Ellipsis, lists, arrays, integer Tensors, masks) and gather.

Basic indices are views (shrink, flip, stride, reshape); advanced ones are one-hot gathers, masked sums over the
indexed axes, so every index is differentiable and no op reads memory at data-dependent addresses.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from specgrad import mlops
from specgrad.dtype import dtypes
from specgrad.helpers import InvalidArgument, OutOfRange, flatten, prod
from specgrad.shape.symbolic import sint
from specgrad.tensor import Tensor, broadcast_shape


def gather(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """x.gather: the index Tensor and the int dim, positional in either order (PyTorch's gather(dim, index), the
    seed's gather(idx, dim)) or by keyword: dim, and index (PyTorch) or idx (the seed)."""
    if unknown := set(kwargs) - {"dim", "index", "idx"}:
        raise TypeError(f"gather() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if "index" in kwargs and "idx" in kwargs:
        raise TypeError("gather() takes index or idx (the same argument), not both")
    given = [*args, *kwargs.values()]
    if len(given) != 2:
        raise TypeError(f"gather() takes an index Tensor and an int dim, got {len(given)} arguments")
    index = kwargs.get("index", kwargs.get("idx"))
    dim = kwargs.get("dim")
    for a in args:  # NOTE: positional ones fill what the keywords left, by type
        if isinstance(a, Tensor) and index is None:
            index = a
        elif dim is None and not isinstance(a, Tensor):
            dim = a
    if not isinstance(dim, int) or isinstance(dim, bool) or not isinstance(index, Tensor):
        raise TypeError(f"gather needs an int dim and a Tensor index, got {[type(a).__name__ for a in given]}")
    if not dtypes.is_int(index.dtype):
        raise TypeError(f"gather index must be an integer tensor, got {index.dtype}")
    d = x._dim(dim)
    if index.ndim != x.ndim or any(i > s for k, (i, s) in enumerate(zip(index.shape, x.shape)) if k != d):
        raise InvalidArgument(f"gather index of shape {index.shape} does not fit input of shape {x.shape} in dim {dim}")
    src = x.shrink([None if k == d else (0, s) for k, s in enumerate(index.shape)])
    src = src.unsqueeze(-1).transpose(d, -1)  # (..., 1 at d, ..., n)
    idx, valid = _wrap_index(index, x.shape[d])  # NOTE: negatives count from the end, as numpy's take_along_axis
    return _nan_outside(_select(src, onehot(idx, x.shape[d])), valid)


def onehot(index: Tensor, n: int) -> Tensor:
    """(*index.shape, n) bool: True where the last axis equals the index."""
    return index.unsqueeze(-1) == Tensor.arange(n, device=index.device)


def _select(x: Tensor, mask: Tensor) -> Tensor:
    """The element of x's last axis where `mask` holds (0 where none does), in x's dtype. A where-sum, not
    (x * mask).sum(): an inf or nan elsewhere on the axis would make every result nan (inf * 0)."""
    picked = mask.where(x, False if x.dtype == dtypes.bool else 0)
    # NOTE: at most one term is nonzero, so a sum in x's own dtype cannot overflow (Tensor.sum widens small ints)
    return picked._reduce(mlops.Max if x.dtype == dtypes.bool else mlops.Sum, -1, keepdim=False)


def _wrap_index(t: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
    """A lazy integer index for an axis of size n as int32 in [0, n) (negatives count from the end), and where its
    values are in range [-n, n): None when every value of its dtype is. Out-of-range values become -1."""
    info = np.iinfo(t.dtype.np)
    checks = ([t >= -n] if -n > info.min else []) + ([t < n] if n <= info.max else [])
    valid = checks[0] & checks[1] if len(checks) == 2 else (checks[0] if checks else None)
    w = t.cast(dtypes.default_int)  # NOTE: after the checks: a wide value must not wrap into range
    w = w if dtypes.is_unsigned(t.dtype) else (w < 0).where(w + n, w)
    return (w if valid is None else valid.where(w, -1)), valid


def _nan_outside(ret: Tensor, valid: Tensor | None) -> Tensor:
    """nan where an index was out of range (float results; ints and bools keep the 0 of no match)."""
    return valid.where(ret, math.nan) if valid is not None and dtypes.is_float(ret.dtype) else ret


def _index_item(idx: Any) -> Any:
    """One index as None, Ellipsis, an int, a slice, an integer Tensor, or a numpy array of ints or bools."""
    if idx is None or idx is Ellipsis or isinstance(idx, slice):
        return idx
    if isinstance(idx, (bool, np.bool_)):
        return np.array(bool(idx))  # NOTE: a 0-d mask: a new axis of size 1 (True) or 0 (False), as numpy
    if isinstance(idx, (int, np.integer)):
        return int(idx)
    if isinstance(idx, Tensor):
        if idx.dtype == dtypes.bool:
            raise OutOfRange(
                f"a bool Tensor mask {idx.shape} selects a data-dependent number of elements: index with "
                "mask.numpy() (a concrete mask), or use mask.where(x, 0)"
            )
        if not dtypes.is_int(idx.dtype):
            raise OutOfRange(f"tensor indices must be integers, got {idx.dtype}")
        return idx
    if isinstance(idx, (list, tuple, np.ndarray)):
        return _index_array(idx)
    raise OutOfRange(f"unsupported index {idx!r} of type {type(idx).__name__}")


def _index_array(idx: list | tuple | np.ndarray) -> np.ndarray | int:
    """A list or array index as a numpy array of ints or bools (a 0-d int array is an int, as in numpy)."""
    stack = [idx]
    while stack:  # NOTE: np.asarray would read a Tensor element by element through __getitem__
        item = stack.pop()
        if isinstance(item, Tensor):
            raise OutOfRange("a list index holds ints or bools, not Tensors: combine them with Tensor.stack")
        if isinstance(item, (list, tuple)):
            stack.extend(item)
    try:
        arr = np.asarray(idx)
    except ValueError:
        raise OutOfRange(f"a list index must be rectangular, like a numpy array, got {idx!r}") from None
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.int64)  # NOTE: [] is an empty integer index, as in numpy
    if arr.dtype.kind not in "biu":
        raise OutOfRange(f"list and array indices must be integers or bools, got dtype {arr.dtype}")
    return int(arr) if arr.ndim == 0 and arr.dtype.kind in "iu" else arr


def _is_mask(idx: Any) -> bool:
    return isinstance(idx, np.ndarray) and idx.dtype == np.bool_


def _fill_ellipsis(x: Tensor, items: list) -> list:
    """The items with Ellipsis (or the missing trailing axes) as whole slices; a k-d mask indexes k axes."""
    at = [i for i, idx in enumerate(items) if idx is Ellipsis]  # NOTE: not .index(): Tensor == is elementwise
    if len(at) > 1:
        raise OutOfRange("an index can only have a single ellipsis (...)")
    used = sum(idx.ndim if _is_mask(idx) else int(idx is not None and idx is not Ellipsis) for idx in items)
    if used > x.ndim:
        raise OutOfRange(f"too many indices ({used}) for a tensor of shape {x.shape}")
    fill = [slice(None)] * (x.ndim - used)
    return items[: at[0]] + fill + items[at[0] + 1 :] if at else items + fill


def _concrete_index(arr: np.ndarray, x: Tensor, dim: int) -> Tensor:
    """A list or array index checked against its axis now (IndexError, as numpy), as an int32 Tensor in [0, size)."""
    size = x.shape[dim]
    bad = arr[(arr < -size) | (arr >= size)]
    if bad.size:
        raise OutOfRange(f"index {bad.flat[0]} is out of range for dim {dim} of size {size} (shape {x.shape})")
    return Tensor(np.where(arr < 0, arr + size, arr).astype(np.int32), device=x.device)


def getitem(x: Tensor, indices: tuple) -> Tensor:
    """Basic indexing (ints, slices, None, Ellipsis) as views, then the advanced indices (lists, arrays, integer
    Tensors, masks) as one gather over the axes they index."""
    shrink, flips, strides = [], [], []
    out: list[int | None] = []  # the view's axes: a dim of x, or None for a new axis of size 1
    adv: list[tuple[int, Tensor, bool]] = []  # (axis of the view, index, checked already)
    dim = 0
    for idx in _fill_ellipsis(x, [_index_item(i) for i in indices]):
        if idx is None or (_is_mask(idx) and idx.ndim == 0):
            if idx is not None:
                adv.append((len(out), Tensor(np.arange(int(idx), dtype=np.int32), device=x.device), True))
            out.append(None)
            continue
        if _is_mask(idx) and idx.shape != tuple(x.shape[dim : dim + idx.ndim]):
            axes = f"{dim}..{dim + idx.ndim - 1}"
            raise OutOfRange(f"mask of shape {idx.shape} does not match axes {axes} of shape {x.shape}")
        for part in np.nonzero(idx) if _is_mask(idx) else (idx,):
            (b, e), flip, stride = _basic_index(part, x.shape[dim], dim, x.shape)
            shrink.append((b, e))
            flips.append(flip)
            strides.append(stride)
            if not isinstance(part, int):
                if not isinstance(part, slice):
                    checked = isinstance(part, np.ndarray)
                    adv.append((len(out), _concrete_index(part, x, dim) if checked else part.to(x.device), checked))
                out.append(dim)
            dim += 1
    ret = x.shrink(shrink)
    if any(flips):
        ret = ret.flip(tuple(i for i, f in enumerate(flips) if f))
    if any(s != 1 for s in strides):
        ret = _stride(ret, strides)
    # NOTE: ints drop their axis and None adds one; the advanced indices are gathered afterwards
    ret = ret.reshape(tuple(1 if d is None else ret.shape[d] for d in out))
    if not adv:
        return ret
    return _gather_tensor_indices(ret, [p for p, _, _ in adv], [t for _, t, _ in adv], [c for _, _, c in adv])


def _basic_index(idx: Any, size: sint, dim: int, shape: tuple[sint, ...]) -> tuple[tuple[int, int], bool, int]:
    """The (begin, end) range, flip and stride that an int, a slice, or an advanced index (whole axis) takes."""
    if isinstance(idx, int):
        if not -size <= idx < size:
            raise OutOfRange(f"index {idx} is out of range for dim {dim} of size {size} (shape {shape})")
        i = idx + size if idx < 0 else idx
        return (i, i + 1), False, 1
    if not isinstance(idx, slice):
        return (0, size), False, 1
    start, stop, step = idx.indices(size)
    if step > 0:
        return (start, max(start, stop)), False, step
    return (stop + 1, max(stop + 1, start + 1)), True, -step


def _stride(x: Tensor, strides: list[int]) -> Tensor:
    """Every s-th element on each axis, via pad + reshape + shrink (no new op needed)."""
    padded = x.pad([(0, (-sz) % s) for s, sz in zip(strides, x.shape)])
    split = padded.reshape(flatten((sz // s, s) for s, sz in zip(strides, padded.shape)))
    picked = split.shrink(flatten(((0, sz // s), (0, 1)) for s, sz in zip(strides, padded.shape)))
    return picked.reshape(tuple(sz // s for s, sz in zip(strides, padded.shape)))


def _gather_tensor_indices(x: Tensor, positions: list[int], idxs: list[Tensor], checked: list[bool]) -> Tensor:
    """x indexed by integer tensors on the axes at `positions` (the other axes whole). The index tensors broadcast
    together; the result's index axes go where PyTorch puts them: in place when the positions are adjacent, else
    first. A one-hot gather: every result element is a masked sum over the indexed axes, so the work is (result
    size) * prod(indexed sizes). An out-of-range value of a lazy index gives nan (0 in an int or bool result)."""
    try:
        bshape = broadcast_shape(*[t.shape for t in idxs])
    except ValueError:
        raise OutOfRange(f"index tensors of shapes {[t.shape for t in idxs]} do not broadcast together") from None
    sizes = [x.shape[p] for p in positions]
    flat, valid = None, None
    for t, n, ok in zip(idxs, sizes, checked):
        t, in_range = (t.cast(dtypes.default_int), None) if ok else _wrap_index(t, n)
        flat = t if flat is None else flat * n + t
        if in_range is not None:
            valid = in_range if valid is None else valid & in_range
    if valid is not None:
        flat = valid.where(flat, -1)  # NOTE: one bad index matches nothing, instead of landing in the next row
    others = [i for i in range(x.ndim) if i not in positions]
    xt = x.permute(*others, *positions).reshape(*[x.shape[i] for i in others], *[1] * len(bshape), prod(sizes))
    ret = _nan_outside(_select(xt, onehot(flat.expand(bshape), prod(sizes))), valid)  # (*others, *bshape)
    # NOTE: a 0-d index takes its axis away like an int (PyTorch); an axis kept whole between the others sends
    # their result axes first
    lead = [p for p, t in zip(positions, idxs) if t.ndim] or positions[:1]
    before = 0 if any(lead[0] < i < lead[-1] for i in others) else sum(1 for i in others if i < lead[0])
    n = len(others)
    return ret.permute([*range(before), *range(n, n + len(bshape)), *range(before, n)])
