"""The CPU device: numpy behind an op -> function table. The reference the compiled devices are tested against.

Imports dtype, ops, shape and device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from specgrad.device import HostAllocator, Interpreted, RunFn, timed
from specgrad.dtype import DType
from specgrad.ops import BinaryOps, BufferOps, LazyOp, Op, ReduceOps, TernaryOps, UnaryOps
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import Variable, sym_infer
from specgrad.shape.view import View


def _concrete(view: View, var_vals: dict[Variable, int]) -> tuple[tuple[int, ...], tuple[int, ...], int, Any]:
    """A view's shape, strides, offset and mask with bound Variables replaced by their values."""

    def val(x: Any) -> int:
        return sym_infer(x, var_vals)

    mask = None if view.mask is None else tuple((val(b), val(e)) for b, e in view.mask)
    return tuple(val(s) for s in view.shape), tuple(val(s) for s in view.strides), val(view.offset), mask


def _apply_view(flat: np.ndarray, view: View, var_vals: dict[Variable, int]) -> np.ndarray:
    """Read `flat` through one view: strided where valid, 0 where masked."""
    shape, strides, offset, mask = _concrete(view, var_vals)
    valid = mask if mask is not None else tuple((0, s) for s in shape)
    valid_shape = tuple(e - b for b, e in valid)
    out = np.zeros(shape, dtype=flat.dtype)
    if 0 in valid_shape or 0 in shape:
        return out
    start = offset + sum(b * st for (b, _), st in zip(valid, strides))
    # NOTE: as_strided reads relative to flat[start]; negative strides reach back into the same array
    base = flat[start:]
    itemsize = flat.dtype.itemsize
    region = np.lib.stride_tricks.as_strided(base, valid_shape, tuple(st * itemsize for st in strides))
    if mask is None:
        return region
    out[tuple(slice(b, e) for b, e in valid)] = region
    return out


def load_st(flat: np.ndarray, st: ShapeTracker, var_vals: dict[Variable, int]) -> np.ndarray:
    """The array a ShapeTracker describes over a flat buffer (each view reads the one before it)."""
    x = flat
    for view in st.views:
        x = _apply_view(np.ascontiguousarray(x).reshape(-1), view, var_vals)
    return x


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # NOTE: integer division truncates toward zero, as in C, so every device agrees; x / 0 is 0
    if a.dtype.kind in "iub":
        safe_b = np.where(b == 0, 1, b)
        q = np.floor_divide(a, safe_b)
        q = np.where((np.remainder(a, safe_b) != 0) & ((a < 0) != (safe_b < 0)), q + 1, q)
        return np.where(b == 0, 0, q).astype(a.dtype)
    return a / b


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iub":
        return np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b))).astype(a.dtype)
    return np.fmod(a, b)


def _reduce(fn: Callable) -> Callable:
    def run(x: np.ndarray, new_shape: tuple[int, ...]) -> np.ndarray:
        axis = tuple(i for i, (s, n) in enumerate(zip(x.shape, new_shape)) if s != n)
        return fn(x, axis=axis, keepdims=True).astype(x.dtype) if axis else x

    return run


def _cast(x: np.ndarray, dtype: DType) -> np.ndarray:
    return x.astype(dtype.np)


FXN_FOR_OP: dict[Op, Callable] = {
    UnaryOps.EXP2: np.exp2,
    UnaryOps.LOG2: np.log2,
    UnaryOps.CAST: _cast,
    UnaryOps.SIN: np.sin,
    UnaryOps.SQRT: np.sqrt,
    UnaryOps.RECIP: lambda x: np.reciprocal(x) if x.dtype.kind == "f" else _div(np.ones_like(x), x),
    UnaryOps.NEG: lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.negative(x),
    BinaryOps.ADD: lambda a, b: np.logical_or(a, b) if a.dtype == np.bool_ else a + b,
    BinaryOps.SUB: lambda a, b: a - b,
    BinaryOps.MUL: lambda a, b: np.logical_and(a, b) if a.dtype == np.bool_ else a * b,
    BinaryOps.DIV: _div,
    BinaryOps.MAX: np.maximum,
    BinaryOps.MOD: _mod,
    BinaryOps.CMPLT: np.less,
    TernaryOps.WHERE: lambda c, a, b: np.where(c, a, b),
    TernaryOps.MULACC: lambda a, b, c: a * b + c,
    ReduceOps.SUM: _reduce(np.sum),
    ReduceOps.MAX: _reduce(np.max),
}


def to_runner(ast: LazyOp, table: dict[Op, Callable]) -> RunFn:
    """Turn an ast into a function of the raw (byte) buffers, evaluated node by node with `table`."""
    if ast.op is not BufferOps.STORE:
        raise ValueError(f"a kernel ast must end in a STORE, got {ast.op}")

    def evaluate(x: LazyOp, bufs: list[np.ndarray], var_vals: dict[Variable, int], memo: dict) -> np.ndarray:
        if x in memo:
            return memo[x]
        if x.op is BufferOps.LOAD:
            ret = load_st(bufs[x.arg.idx].view(x.arg.dtype.np), x.arg.st, var_vals)
        elif x.op is BufferOps.CONST:
            ret = load_st(np.array([x.arg.val], dtype=x.arg.dtype.np), x.arg.st, var_vals)
        elif isinstance(x.op, ReduceOps):
            new_shape = tuple(sym_infer(s, var_vals) for s in x.arg)
            ret = table[x.op](evaluate(x.src[0], bufs, var_vals, memo), new_shape)
        else:
            srcs = [evaluate(s, bufs, var_vals, memo) for s in x.src]
            ret = table[x.op](*srcs, x.arg) if x.op is UnaryOps.CAST else table[x.op](*srcs)
        memo[x] = ret
        return ret

    def compute(bufs: list[np.ndarray], var_vals: dict[Variable, int]) -> None:
        with np.errstate(all="ignore"):
            out = evaluate(ast.src[0], bufs, var_vals, {})
        flat = np.broadcast_to(out, out.shape).astype(ast.arg.dtype.np, copy=False).reshape(-1)
        # NOTE: a symbolic shape's buffer has room for its largest values; the store fills the front
        bufs[0].view(ast.arg.dtype.np)[: flat.size] = flat

    return lambda bufs, var_vals, wait: timed(lambda: compute(bufs, var_vals))


def CPUDevice() -> Interpreted:
    return Interpreted("CPU", HostAllocator(), FXN_FOR_OP, to_runner)
