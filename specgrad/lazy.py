"""LazyBuffer: the lazy graph. Builds nodes and views, folds constants, deduplicates; makes no fusion decisions.

A LazyBuffer is either a base (it owns an op and its sources, or a realized Buffer) or a view (a ShapeTracker
over a base: every movement op is a view, zero copy). Imports helpers, dtype, flags, shape, ops and device.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from specgrad.device import Buffer
from specgrad.dtype import DType, dtypes
from specgrad.flags import LAZYCACHE
from specgrad.helpers import InvalidArgument, all_int
from specgrad.ops import BinaryOps, LoadOps, Op, ReduceOps, TernaryOps, UnaryOps
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import sint

_lazycache: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _cache_key_arg(arg: Any) -> Any:
    # NOTE: -0.0 == 0.0 but 1/-0.0 != 1/0.0, so the sign is part of a float constant's identity
    return ("float", arg, math.copysign(1.0, arg)) if isinstance(arg, float) else arg


def create_lazybuffer(
    device: str,
    st: ShapeTracker,
    dtype: DType,
    op: Op | None = None,
    arg: Any = None,
    srcs: tuple[LazyBuffer, ...] = (),
    base: LazyBuffer | None = None,
    cache: bool = True,
) -> LazyBuffer:
    """Make a node, or return the live identical one (same op, arg, sources or base, view)."""
    if not (cache and LAZYCACHE):
        return LazyBuffer(device, st, dtype, op, arg, srcs, base)
    key = (device, st, dtype, op, _cache_key_arg(arg), tuple(weakref.ref(s) for s in srcs), base and weakref.ref(base))
    if (hit := _lazycache.get(key)) is not None:
        # NOTE: only a base handed out twice aliases two tensors; a view reads its base's buffer, cached or not
        if hit._base is None:
            hit.shared = True
        return hit
    _lazycache[key] = ret = LazyBuffer(device, st, dtype, op, arg, srcs, base)
    return ret


# Every live object that holds a LazyBuffer for the user (each Tensor registers itself): a value one of them can still
# read is a value an assign must not leave reading a buffer it overwrites (schedule.py, _add_assign_readers)
HOLDERS: weakref.WeakSet[Any] = weakref.WeakSet()


def held_bases() -> set[LazyBuffer]:
    """The unrealized bases that a live holder's LazyBuffer is, or is a view of."""
    return {b for h in list(HOLDERS) if (b := h.lazydata.base).realized is None}


class LazyBuffer:
    def __init__(
        self,
        device: str,
        st: ShapeTracker,
        dtype: DType,
        op: Op | None = None,
        arg: Any = None,
        srcs: tuple[LazyBuffer, ...] = (),
        base: LazyBuffer | None = None,
    ):
        self.device, self.st, self.dtype, self.shape = device, st, dtype, st.shape
        self._base = base
        if base is None:
            self.op, self.arg, self.srcs = op, arg, srcs
            self._realized: Buffer | None = None
            self.forced_realize = False
            # NOTE: an assign writes its result into the buffer of `assign_target` (a realized base) in place
            self.assign_target: LazyBuffer | None = None
            self.shared = False  # handed out twice by the dedup cache: two tensors own it, so never assign in place
            self.children: weakref.WeakSet[LazyBuffer] = weakref.WeakSet()
            for s in srcs:
                s.base.children.add(self)
        elif base._base is not None:
            raise InvalidArgument("a view's base must be a base LazyBuffer")

    def __repr__(self) -> str:
        what = f"view of {self.base!r}" if self._base is not None else (self._realized or self.op)
        return f"<LB {self.device} {self.shape} {self.dtype} {what}>"

    @property
    def base(self) -> LazyBuffer:
        return self._base if self._base is not None else self

    @property
    def realized(self) -> Buffer | None:
        return self.base._realized

    @realized.setter
    def realized(self, buf: Buffer) -> None:
        if self._base is not None:
            raise InvalidArgument("only a base LazyBuffer can be realized")
        self._realized = buf
        self.srcs, self.assign_target = (), None  # NOTE: drop the graph behind a realized buffer so it can be freed

    @property
    def size(self) -> sint:
        return self.st.size()

    def is_unrealized_const(self) -> bool:
        return self.base._realized is None and self.base.op is LoadOps.CONST

    def const_value(self) -> Any:
        """The value of an unrealized constant that is the same everywhere (no padding), else None."""
        if self.is_unrealized_const() and all(v.mask is None for v in self.st.views):
            return self.base.arg
        return None

    # *** creation ***

    @staticmethod
    def loadop(
        op: LoadOps,
        shape: tuple[sint, ...],
        dtype: DType,
        device: str,
        arg: Any = None,
        srcs: tuple[LazyBuffer, ...] = (),
    ) -> LazyBuffer:
        cache = op in (LoadOps.CONST, LoadOps.FROM, LoadOps.CONTIGUOUS)
        return create_lazybuffer(device, ShapeTracker.from_shape(shape), dtype, op, arg, srcs, cache=cache)

    @staticmethod
    def of_buffer(buf: Buffer, shape: tuple[int, ...]) -> LazyBuffer:
        """A new realized node over an existing buffer (never the lazy cache's: nodes computed from an older node over
        the same buffer, which may hold other values by now, are not this one's)."""
        ret = LazyBuffer.loadop(LoadOps.EMPTY, shape, buf.dtype, buf.device)
        ret.realized = buf
        return ret

    @staticmethod
    def from_numpy(x: np.ndarray, device: str) -> LazyBuffer:
        """A realized buffer holding a copy of `x` on `device`."""
        dtype = dtypes.from_np(x.dtype)
        ret = LazyBuffer.loadop(LoadOps.EMPTY, x.shape, dtype, device)
        ret.realized = Buffer(device, x.size, dtype).copyin(np.ascontiguousarray(x).reshape(-1).data)
        return ret

    def const(self, val: Any, shape: tuple[sint, ...] | None = None, dtype: DType | None = None) -> LazyBuffer:
        """A constant with this buffer's device and dtype (unless given), broadcast to `shape`."""
        dtype, shape = dtype or self.dtype, self.shape if shape is None else shape
        return full_const(val, shape, dtype, self.device)

    def contiguous(self) -> LazyBuffer:
        if not self.st.contiguous or self.size != self.base.size or self.is_unrealized_const():
            return LazyBuffer.loadop(LoadOps.CONTIGUOUS, self.shape, self.dtype, self.device, srcs=(self,))
        self.base.forced_realize = True
        return self

    def assign(self, target: LazyBuffer) -> LazyBuffer:
        """Self's value, computed into the buffer `target` already has (in place): buffers keep their identity across
        training steps, which is what lets a captured step (TinyJit) replay. Needs a realized, contiguous target."""
        if not target.st.contiguous or target.size != target.base.size:
            return self
        # NOTE: assigning again before realizing writes into the same buffer as the pending assign
        buffer_owner = target.base if target.realized is not None else target.base.assign_target
        if buffer_owner is None or buffer_owner.shared:
            return self
        st = ShapeTracker.from_shape(self.shape)
        ret = LazyBuffer(self.device, st, self.dtype, LoadOps.CONTIGUOUS, None, (self,))
        ret.assign_target = buffer_owner
        return ret

    @property
    def output_buffer(self) -> Buffer | None:
        """The buffer this node must be computed into (an assign), if any."""
        return self.base.assign_target.realized if self.base.assign_target is not None else None

    def copy_to_device(self, device: str) -> LazyBuffer:
        if device == self.device:
            return self
        if (val := self.const_value()) is not None:
            return full_const(val, self.shape, self.dtype, device)
        base = self.base
        if base._realized is None and base.op is LoadOps.FROM and base.srcs[0].device == device and self.st.contiguous:
            return base.srcs[0].reshape(self.shape)
        return LazyBuffer.loadop(LoadOps.FROM, self.shape, self.dtype, device, srcs=(self.contiguous(),))

    def cast(self, dtype: DType) -> LazyBuffer:
        return self if dtype == self.dtype else self.e(UnaryOps.CAST, arg=dtype)

    # *** compute ***

    def e(self, op: UnaryOps | BinaryOps | TernaryOps, *in_srcs: LazyBuffer, arg: Any = None) -> LazyBuffer:
        """An elementwise op over buffers of one shape."""
        srcs = (self, *in_srcs)
        if any(s.shape != self.shape for s in srcs):
            raise InvalidArgument(f"{op.name} needs one shape, got {[s.shape for s in srcs]}")
        if any(s.device != self.device for s in srcs):
            raise InvalidArgument(f"{op.name} needs one device, got {[s.device for s in srcs]}")
        out_dtype = arg if op is UnaryOps.CAST else dtypes.bool if op is BinaryOps.CMPLT else srcs[-1].dtype
        if (folded := _fold(op, srcs, out_dtype)) is not None:
            return folded
        if 0 in self.shape:
            return self.const(0, dtype=out_dtype)
        return create_lazybuffer(self.device, ShapeTracker.from_shape(self.shape), out_dtype, op, arg, srcs)

    def r(self, op: ReduceOps, new_shape: tuple[sint, ...]) -> LazyBuffer:
        """Reduce the axes where `new_shape` has 1 and self.shape does not (same number of dims)."""
        new_shape = tuple(new_shape)
        if len(new_shape) != len(self.shape) or any(n not in (1, s) for s, n in zip(self.shape, new_shape)):
            raise InvalidArgument(f"cannot reduce shape {self.shape} to {new_shape}")
        if self.shape == new_shape:
            return self
        if 0 in self.shape or 0 in new_shape:
            return self.const(_reduce_identity(op, self.dtype), new_shape)
        return self._reduce(op, new_shape)

    def _reduce(self, op: ReduceOps, new_shape: tuple[sint, ...]) -> LazyBuffer:
        return create_lazybuffer(self.device, ShapeTracker.from_shape(new_shape), self.dtype, op, new_shape, (self,))

    # *** movement: views over the base, zero copy ***

    def _view(self, st: ShapeTracker) -> LazyBuffer:
        if all_int(st.shape) and 0 in st.shape and not self.is_unrealized_const():
            return self.const(0, st.shape)  # NOTE: an empty tensor needs no memory: a constant of its shape
        if st.contiguous and st.shape == self.base.shape:
            return self.base
        return create_lazybuffer(self.device, st, self.dtype, base=self.base)

    def reshape(self, arg: tuple[sint, ...]) -> LazyBuffer:
        return self if self.shape == tuple(arg) else self._view(self.st.reshape(tuple(arg)))

    def permute(self, arg: tuple[int, ...]) -> LazyBuffer:
        return self if tuple(arg) == tuple(range(len(self.shape))) else self._view(self.st.permute(tuple(arg)))

    def expand(self, arg: tuple[sint, ...]) -> LazyBuffer:
        return self if self.shape == tuple(arg) else self._view(self.st.expand(tuple(arg)))

    def pad(self, arg: tuple[tuple[sint, sint], ...]) -> LazyBuffer:
        return self if all(b == 0 and e == 0 for b, e in arg) else self._view(self.st.pad(tuple(arg)))

    def shrink(self, arg: tuple[tuple[sint, sint], ...]) -> LazyBuffer:
        unchanged = all(b == 0 and e == s for (b, e), s in zip(arg, self.shape))
        return self if unchanged and len(arg) == len(self.shape) else self._view(self.st.shrink(tuple(arg)))

    def stride(self, arg: tuple[int, ...]) -> LazyBuffer:
        return self if all(a == 1 for a in arg) else self._view(self.st.stride(tuple(arg)))


def full_const(val: Any, shape: tuple[sint, ...], dtype: DType, device: str) -> LazyBuffer:
    """`val` broadcast to `shape`: one scalar CONST base with an expanded view."""
    base = LazyBuffer.loadop(LoadOps.CONST, (), dtype, device, arg=to_python_scalar(val, dtype))
    return base.reshape((1,) * len(shape)).expand(tuple(shape))


def to_python_scalar(val: Any, dtype: DType) -> Any:
    """The Python value `val` has once stored in `dtype` (ints wrap, floats round)."""
    return np.array(val).astype(dtype.np).item()


def _reduce_identity(op: ReduceOps, dtype: DType) -> Any:
    if op is ReduceOps.SUM:
        return 0
    if dtypes.is_float(dtype):
        return -math.inf
    return False if dtype == dtypes.bool else int(np.iinfo(dtype.np).min)


# *** constant folding: evaluated with numpy scalars so rounding matches the device ***

_FOLD: dict[Op, Callable[..., Any]] = {
    BinaryOps.ADD: lambda a, b: a + b,
    BinaryOps.SUB: lambda a, b: a - b,
    BinaryOps.MUL: lambda a, b: a * b,
    BinaryOps.MAX: np.maximum,
    BinaryOps.CMPLT: lambda a, b: a < b,
    UnaryOps.NEG: lambda a: np.logical_not(a) if a.dtype == np.bool_ else -a,
    TernaryOps.WHERE: lambda c, a, b: a if c else b,
}


def _fold(op: Op, srcs: tuple[LazyBuffer, ...], out_dtype: DType) -> LazyBuffer | None:
    """Fold ops on constants and identities like x+0, x*1; None when nothing folds."""
    vals = [s.const_value() for s in srcs]
    shape, device = srcs[0].shape, srcs[0].device
    if all(v is not None for v in vals):
        if op is UnaryOps.CAST:
            return full_const(vals[0], shape, out_dtype, device)
        if op in _FOLD:
            with np.errstate(all="ignore"):
                res = _FOLD[op](*[np.array(v, dtype=s.dtype.np) for v, s in zip(vals, srcs)])
            return full_const(np.asarray(res).item(), shape, out_dtype, device)
    if op is BinaryOps.CMPLT and srcs[0] is srcs[1] and not dtypes.is_float(srcs[0].dtype):
        return full_const(False, shape, dtypes.bool, device)  # NOTE: x < x is false, except for nan
    if op is TernaryOps.WHERE and vals[0] is not None:
        return srcs[1] if vals[0] else srcs[2]
    if len(srcs) != 2 or srcs[0].dtype != srcs[1].dtype:
        return None
    (a, b), (va, vb) = srcs, vals
    if a.dtype == dtypes.bool and op in (BinaryOps.ADD, BinaryOps.MUL) and (va is not None or vb is not None):
        # NOTE: on bools ADD is or and MUL is and: x|False and x&True are x; x|True and x&False are constants
        const, other = (va, b) if va is not None else (vb, a)
        return other if bool(const) == (op is BinaryOps.MUL) else full_const(bool(const), a.shape, a.dtype, a.device)
    if op is BinaryOps.ADD:
        return b if _is(va, 0) else a if _is(vb, 0) else None
    if op is BinaryOps.SUB:
        return a if _is(vb, 0) else None
    if op is BinaryOps.MUL:
        return b if _is(va, 1) else a if _is(vb, 1) else None
    if op is BinaryOps.DIV:
        return a if _is(vb, 1) else None
    return None


def _is(v: Any, target: int) -> bool:
    return v is not None and not isinstance(v, bool) and v == target
