"""Kernel: an ast's buffers and their ShapeTrackers on one shared iteration space, with dimensions simplified.

Output (global) axes come first and reduce axes last; adjacent axes merge wherever every buffer allows it. An Opt
then splits an axis and moves its inner part to the end as an expanded axis: unrolled in the generated code (UPCAST
for an output axis, UNROLL for a reduce axis) or, for at most one axis, the lanes of a vector type (VECTOR).
Axis order after opts: [output loops][reduce loops][expanded axes, in the order they were made].
Imports helpers, dtype, ops and shape.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    base_name: str = ""  # the name before opts, so a kernel keeps its name whatever the opts
    expanded: tuple[str, ...] = ()  # kind of each trailing expanded axis: "upcast" (output) or "unroll" (reduce)
    vector_axis: int | None = None  # the expanded axis whose elements are vector lanes

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
        sts, full_shape, reduce_axes = _split_dims([x.arg.st for x in bufops], full_shape, reduce_axes)
        order = [i for i in range(len(full_shape)) if i not in reduce_axes] + reduce_axes
        sts = [st.permute(tuple(order)) for st in sts]
        full = tuple(full_shape[i] for i in order)
        sts, full, first_reduce = _merge_dims(sts, full, len(full) - len(reduce_axes))
        dims = "_".join(str(s) if isinstance(s, int) else "n" for s in full) or "1"
        name = f"{'r' if reduceop is not None else 'E'}_{dims}"
        return Kernel(ast, bufops, tuple(sts), full, first_reduce, reduceop, name)

    @property
    def first_expanded(self) -> int:
        return len(self.full_shape) - len(self.expanded)

    @property
    def output_shape(self) -> tuple[sint, ...]:
        """The output loops (before opts: every output axis)."""
        return self.full_shape[: self.first_reduce]

    @property
    def reduce_shape(self) -> tuple[sint, ...]:
        """The reduce loops."""
        return self.full_shape[self.first_reduce : self.first_expanded]

    def name(self) -> str:
        """E_ (elementwise) or r_ (with a reduce), then the output dims and the reduce dims: r_16_16_16."""
        return self.base_name

    def strides(self, i: int) -> tuple[sint | None, ...]:
        """Buffer i's stride along every axis (None where it is not one fixed step)."""
        return self.sts[i].real_strides()

    def apply(self, opt: Opt) -> Kernel:
        """Split loop axis opt.axis by opt.amount and move the inner part to the end as an expanded axis."""
        axis, amount = opt.axis, opt.amount
        if opt.op == "INNER":
            return self._innermost(axis)
        size = self.full_shape[axis] if axis < self.first_expanded else None
        if not isinstance(size, int) or amount < 2 or size % amount:
            raise ValueError(f"cannot apply {opt} to a kernel of shape {self.full_shape}")
        if opt.op == "VECTOR" and self.vector_axis is not None:
            raise ValueError(f"a kernel has one vector axis: cannot apply {opt}")
        split = self.full_shape[:axis] + (size // amount, amount) + self.full_shape[axis + 1 :]
        order = [i for i in range(len(split)) if i != axis + 1] + [axis + 1]
        sts = []
        for st in self.sts:
            parts = (st.shape[axis] // amount, amount) if st.shape[axis] != 1 else (1, 1)
            sts.append(st.reshape(st.shape[:axis] + parts + st.shape[axis + 1 :]))
        kind = "upcast" if axis < self.first_reduce else "unroll"
        return replace(
            self,
            sts=tuple(st.permute(tuple(order)) for st in sts),
            full_shape=tuple(split[i] for i in order),
            expanded=(*self.expanded, kind),
            vector_axis=len(split) - 1 if opt.op == "VECTOR" else self.vector_axis,
        )

    def _innermost(self, axis: int) -> Kernel:
        """Make output loop `axis` the innermost output loop (loop order, for cache reuse)."""
        if not 0 <= axis < self.first_reduce:
            raise ValueError(f"INNER({axis}) needs an output loop axis; this kernel has {self.first_reduce}")
        order = [i for i in range(len(self.full_shape)) if i != axis]
        order.insert(self.first_reduce - 1, axis)
        vector = order.index(self.vector_axis) if self.vector_axis is not None else None
        return replace(self, sts=tuple(st.permute(tuple(order)) for st in self.sts),
                       full_shape=tuple(self.full_shape[i] for i in order), vector_axis=vector)  # fmt: skip


@dataclass(frozen=True)
class Opt:
    """UPCAST/UNROLL: unroll `amount` elements of loop axis `axis`; VECTOR: make them the lanes of a vector type;
    INNER: make output loop `axis` the innermost output loop (amount unused)."""

    op: str
    axis: int
    amount: int

    def __repr__(self) -> str:
        return f"{self.op}({self.axis}, {self.amount})"


def _split_dims(
    sts: list[ShapeTracker], full: tuple[sint, ...], reduce_axes: list[int]
) -> tuple[list[ShapeTracker], tuple[sint, ...], list[int]]:
    """Split axes where that folds a buffer's two views into one, while no buffer gains a view.

    A pooling gradient reads the pooled (N, C, 14, 1, 14, 1) values expanded to (N, C, 14, 2, 14, 2) and reshaped to
    (N, C, 28, 28): two views, so every index divides and takes remainders (a 7x slower kernel). On the split space
    (N, C, 14, 2, 14, 2) it is one view with plain strides, and the other buffers split for free."""
    while all(isinstance(s, int) for s in full):
        for st in sts:
            if len(st.views) < 2 or len(st.shape) != len(full):
                continue
            groups = _refine(full, st.views[-2].shape)  # type: ignore[arg-type]
            if groups is None or all(len(g) == 1 for g in groups):
                continue
            new = [_split_st(s, groups) for s in sts]
            if sum(len(s.views) for s in new) < sum(len(s.views) for s in sts) and all(
                len(n.views) <= len(s.views) for n, s in zip(new, sts)
            ):
                starts = [sum(len(g) for g in groups[:i]) for i in range(len(groups))]
                reduce_axes = [starts[a] + j for a in reduce_axes for j in range(len(groups[a]))]
                sts, full = new, tuple(d for g in groups for d in g)
                break
        else:
            break
    return sts, full, reduce_axes


def _refine(shape: tuple[int, ...], inner: tuple[int, ...]) -> list[tuple[int, ...]] | None:
    """Each dim of shape as the dims of the coarsest shape that both shape and inner (same size) reshape from, or
    None when the two do not nest (28 and 14x2 nest, 6 and 4 do not)."""
    if 0 in shape:
        return None
    other = [d for d in inner if d != 1]
    groups: list[tuple[int, ...]] = []
    for dim in shape:
        group: list[int] = []
        while dim > 1:
            if not other or dim % other[0] and other[0] % dim:
                return None
            part = min(dim, other[0])
            group.append(part)
            dim //= part
            other[0] //= part
            if other[0] == 1:
                other.pop(0)
        groups.append(tuple(group) or (1,))
    return groups if not other else None


def _split_st(st: ShapeTracker, groups: list[tuple[int, ...]]) -> ShapeTracker:
    """st reshaped to the split dims (a size-1 dim, a broadcast or reduced axis, splits into ones)."""
    shape = tuple(d for s, g in zip(st.shape, groups) for d in (g if s != 1 else (1,) * len(g)))
    return st.reshape(shape).simplify()


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
