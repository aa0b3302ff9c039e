"""Kernel: an ast's buffers and their ShapeTrackers on one shared iteration space, with dimensions simplified.

Output (global) axes come first and reduce axes last; adjacent axes merge wherever every buffer allows it.
Imports helpers, dtype, ops and shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from specgrad.ops import BufferOps, LazyOp, ReduceOps, get_lazyop_info
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import sint


@dataclass(frozen=True)
class Kernel:
    """`bufops[i]` reads or writes through `sts[i]`; each st has `full_shape` or the output shape (1 on reduce axes)."""

    ast: LazyOp
    bufops: tuple[LazyOp, ...]
    sts: tuple[ShapeTracker, ...]
    full_shape: tuple[sint, ...]
    first_reduce: int
    reduceop: LazyOp | None

    @staticmethod
    def from_ast(ast: LazyOp) -> Kernel:
        if ast.op is not BufferOps.STORE:
            raise ValueError(f"a kernel ast must end in a STORE, got {ast.op}")
        reduces = [x for x in ast.lazyops() if x.op in ReduceOps]
        if len(reduces) > 1:
            raise ValueError(f"a kernel may hold one reduce, this ast has {len(reduces)}")
        reduceop = reduces[0] if reduces else None
        bufops = (ast, *[x for x in ast.lazyops() if x.op in (BufferOps.LOAD, BufferOps.CONST)])
        out_shape = ast.arg.st.shape
        full_shape = get_lazyop_info(reduceop.src[0]).shape if reduceop is not None else out_shape
        reduce_axes = [i for i, (f, o) in enumerate(zip(full_shape, out_shape)) if f != o]
        order = [i for i in range(len(full_shape)) if i not in reduce_axes] + reduce_axes
        sts = [x.arg.st.permute(tuple(order)) for x in bufops]
        full = tuple(full_shape[i] for i in order)
        sts, full, first_reduce = _merge_dims(sts, full, len(full) - len(reduce_axes))
        return Kernel(ast, bufops, tuple(sts), full, first_reduce, reduceop)

    @property
    def output_shape(self) -> tuple[sint, ...]:
        return self.full_shape[: self.first_reduce]

    @property
    def reduce_shape(self) -> tuple[sint, ...]:
        return self.full_shape[self.first_reduce :]

    def name(self) -> str:
        """E_ (elementwise) or r_ (with a reduce), then the output dims and the reduce dims: r_16_16_16."""
        dims = "_".join(str(s) if isinstance(s, int) else "n" for s in self.full_shape) or "1"
        return f"{'r' if self.reduceop is not None else 'E'}_{dims}"


def _merge_dims(
    sts: list[ShapeTracker], full: tuple[sint, ...], first_reduce: int
) -> tuple[list[ShapeTracker], tuple[sint, ...], int]:
    """Merge axis i into i+1 (same group, output or reduce) wherever every tracker keeps its view count."""
    i = len(full) - 2
    while i >= 0:
        if (i < first_reduce) == (i + 1 < first_reduce):
            merged = [_try_merge(st, i) for st in sts]
            if all(m is not None for m in merged):
                sts = merged  # type: ignore[assignment]
                full = full[:i] + (full[i] * full[i + 1],) + full[i + 2 :]
                first_reduce -= 1 if i + 1 < first_reduce else 0
        i -= 1
    return sts, full, first_reduce


def _try_merge(st: ShapeTracker, i: int) -> ShapeTracker | None:
    shape = st.shape
    new = st.reshape(shape[:i] + (shape[i] * shape[i + 1],) + shape[i + 2 :])
    return new if len(new.views) == len(st.views) else None


def check_int_size(st: ShapeTracker) -> None:
    """Kernels index with 32-bit ints; refuse buffers too large for that rather than overflow silently."""
    size = st.real_size()
    if size > 2**31 - 1:
        raise ValueError(f"a buffer of {size} elements is too large for 32-bit indexing (shape {st.shape})")
