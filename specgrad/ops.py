"""The IR contract: op enums, LazyOp, MemBuffer, ConstBuffer, ScheduleItem and the FlopCounter.

Imports helpers, dtype and shape only; LazyBuffer appears in annotations only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import TYPE_CHECKING, Any

from specgrad.dtype import DType, dtypes
from specgrad.helpers import prod
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import Variable, sint

if TYPE_CHECKING:
    from specgrad.lazy import LazyBuffer


class UnaryOps(Enum):
    EXP2 = auto()
    LOG2 = auto()
    CAST = auto()
    SIN = auto()
    SQRT = auto()
    RECIP = auto()
    NEG = auto()


class BinaryOps(Enum):
    ADD = auto()
    SUB = auto()
    MUL = auto()
    DIV = auto()
    MAX = auto()
    MOD = auto()
    CMPLT = auto()


class ReduceOps(Enum):
    SUM = auto()
    MAX = auto()


class TernaryOps(Enum):
    MULACC = auto()
    WHERE = auto()


class MovementOps(Enum):
    RESHAPE = auto()
    PERMUTE = auto()
    EXPAND = auto()
    PAD = auto()
    SHRINK = auto()
    STRIDE = auto()


class LoadOps(Enum):
    EMPTY = auto()
    CONST = auto()
    FROM = auto()
    CONTIGUOUS = auto()
    CUSTOM = auto()


class BufferOps(Enum):
    LOAD = auto()
    CONST = auto()
    STORE = auto()


Op = UnaryOps | BinaryOps | ReduceOps | TernaryOps | MovementOps | LoadOps | BufferOps
ElementwiseOps = (UnaryOps, BinaryOps, TernaryOps)

# NOTE: f(0) != 0 for these, so a PAD may not be pushed through them (the padded zeros would change).
UNSAFE_PAD_OPS = {UnaryOps.EXP2, UnaryOps.LOG2, UnaryOps.RECIP, BinaryOps.DIV, BinaryOps.MOD, BinaryOps.CMPLT}


@dataclass(frozen=True)
class MemBuffer:
    """A kernel argument: buffer `idx` (0 is the output) read or written through `st`."""

    idx: int
    dtype: DType
    st: ShapeTracker


@dataclass(frozen=True, eq=False)
class ConstBuffer:
    """A constant broadcast through `st` (masked positions read as 0)."""

    val: float | int | bool
    dtype: DType
    st: ShapeTracker

    # NOTE: 0.0 == -0.0 and nan != nan, but a kernel for one is not a kernel for the other: compare by repr
    def _identity(self) -> tuple:
        return (type(self.val), repr(self.val), self.dtype, self.st)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstBuffer) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())


@dataclass(frozen=True, eq=False)
class LazyOp:
    """One node of a kernel's ast. Immutable; equal trees compare and hash equal."""

    op: Op
    src: tuple[LazyOp, ...] = ()
    arg: Any = None

    def __hash__(self) -> int:
        return self._hashval

    @functools.cached_property
    def _hashval(self) -> int:
        # NOTE: from the sources' cached hashes: hashing the nested tree (a DAG: x*x reads x twice) was exponential
        return hash((self.op, tuple(s._hashval for s in self.src), self.arg))

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, LazyOp) and _same_tree(self, other, set()))

    def lazyops(self) -> list[LazyOp]:
        """Every node of the tree, parents after their sources, without repeats."""
        return list(self._lazyops)

    @functools.cached_property
    def _lazyops(self) -> tuple[LazyOp, ...]:
        # NOTE: cached: the scheduler's passes and the kernel optimiser each walk the same kernel's ast
        seen: dict[LazyOp, None] = {}

        def visit(x: LazyOp) -> None:
            if x in seen:
                return
            for s in x.src:
                visit(s)
            seen[x] = None

        visit(self)
        return tuple(seen)

    def vars(self) -> list[Variable]:
        """The shape Variables in this ast's buffers, in a canonical order."""
        found = set().union(*[x.arg.st.vars() for x in self.lazyops() if x.op in BufferOps])
        return sorted(found, key=lambda v: v.expr)


@dataclass(frozen=True)
class ScheduleItem:
    """One kernel to run: `ast` computes `out` from `inputs` (MemBuffer idx i+1 is inputs[i])."""

    ast: LazyOp
    out: LazyBuffer
    inputs: tuple[LazyBuffer, ...]
    var_vals: dict[Variable, int] = field(default_factory=dict)


@dataclass
class FlopCounter:
    """Shape, dtype, flops and bytes touched per buffer of an ast, without running it."""

    shape: tuple[sint, ...]
    dtype: DType
    flops: sint
    mem: dict[int, int]

    @property
    def mem_estimate(self) -> sint:
        return sum(self.mem.values())

    def consume_flops(self) -> sint:
        self.flops, ret = 0, self.flops
        return ret


def _merge_mem(*xs: FlopCounter) -> dict[int, int]:
    return {k: v for x in xs for k, v in x.mem.items()}


def _elementwise(op: Op, *xs: FlopCounter, arg: Any = None) -> FlopCounter:
    if op is UnaryOps.CAST:
        dtype = arg
    elif op is BinaryOps.CMPLT:
        dtype = dtypes.bool
    else:
        dtype = xs[-1].dtype
    flops = sum(x.consume_flops() for x in xs) + prod(xs[0].shape) * (2 if op is TernaryOps.MULACC else 1)
    return FlopCounter(xs[0].shape, dtype, flops, _merge_mem(*xs))


def _reduce(x: FlopCounter, new_shape: tuple[sint, ...]) -> FlopCounter:
    return FlopCounter(new_shape, x.dtype, x.consume_flops() + prod(x.shape), x.mem)


_FLOP_RULES: dict[type, Callable[..., FlopCounter]] = {
    UnaryOps: _elementwise,
    BinaryOps: _elementwise,
    TernaryOps: _elementwise,
}


def _same_tree(a: LazyOp, b: LazyOp, equal: set[tuple[int, int]]) -> bool:
    """Structural equality; each pair of nodes is compared once (two equal DAGs compared path by path would take
    time exponential in their depth). A plain loop, not all(...): this runs on every kernel cache lookup."""
    if a._hashval != b._hashval or a.op is not b.op or len(a.src) != len(b.src):
        return False
    if (key := (id(a), id(b))) in equal:
        return True
    for x, y in zip(a.src, b.src):
        if x is not y and not _same_tree(x, y, equal):
            return False
    if a.arg != b.arg:
        return False
    equal.add(key)
    return True


def get_lazyop_info(ast: LazyOp) -> FlopCounter:
    """Estimate an ast's output shape, dtype, flops and memory traffic (bytes per buffer)."""
    cache: dict[LazyOp, FlopCounter] = {}

    def run(x: LazyOp) -> FlopCounter:
        if x in cache:
            # NOTE: a shared subtree is computed once in a kernel, so its flops count once
            return FlopCounter(cache[x].shape, cache[x].dtype, 0, cache[x].mem)
        if x.op is BufferOps.LOAD:
            ret = FlopCounter(x.arg.st.shape, x.arg.dtype, 0, {x.arg.idx: x.arg.dtype.itemsize * x.arg.st.real_size()})
        elif x.op is BufferOps.CONST:
            ret = FlopCounter(x.arg.st.shape, x.arg.dtype, 0, {})
        elif x.op is BufferOps.STORE:
            src = run(x.src[0])
            out_mem = {x.arg.idx: x.arg.dtype.itemsize * x.arg.st.real_size()}
            ret = FlopCounter(src.shape, x.arg.dtype, src.consume_flops(), {**src.mem, **out_mem})
        elif isinstance(x.op, ReduceOps):
            ret = _reduce(run(x.src[0]), x.arg)
        elif type(x.op) in _FLOP_RULES:
            ret = _FLOP_RULES[type(x.op)](x.op, *[run(s) for s in x.src], arg=x.arg)
        else:
            raise NotImplementedError(f"no flop rule for {x.op}")
        cache[x] = ret
        return ret

    return run(ast)
