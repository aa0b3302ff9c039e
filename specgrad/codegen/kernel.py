"""Kernel: an ast's buffers and their ShapeTrackers on one shared iteration space, with dimensions simplified.

Output (global) axes come first and reduce axes last; adjacent axes merge wherever every buffer allows it. An Opt
then splits an axis and moves its inner part to the end as an expanded axis: unrolled in the generated code (UPCAST
for an output axis, UNROLL for a reduce axis) or, for at most one axis, the lanes of a vector type (VECTOR). On a GPU
two more: LOCAL moves the inner part of an output axis to the work-group (local id) axes, and TILE splits a reduce
loop so that each step of the loops outside it first copies the loads the work-group shares into local memory.
Axis order after opts: [output loops: work-group ids, then local ids][reduce loops][expanded axes, in the order they
were made].
Imports helpers, dtype, ops and shape.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specgrad.helpers import prod
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
    local_dims: int = 0  # the last local_dims output axes are local ids within a work-group (a GPU's)
    tiled: bool = False  # the last reduce loop walks a tile that shared loads are first copied to local memory

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

    @property
    def first_local(self) -> int:
        """The first local id axis (first_reduce where there are none): output axes before it are work-group ids."""
        return self.first_reduce - self.local_dims

    def staged_loads(self) -> dict[int, list[int]]:
        """The loads a tiled kernel copies to local memory at each step of its outer reduce loops, each with the axes
        its copy spans (local ids, the last reduce loop, expanded axes: those it moves along), outermost first by
        stride: a load that some local id does not move (the work-group shares it). Empty for a kernel without
        TILE."""
        if not self.tiled:
            return {}
        region = [*range(self.first_local, self.first_reduce), self.first_expanded - 1,
                  *range(self.first_expanded, len(self.full_shape))]  # fmt: skip
        # NOTE: only the reduce's own loads: one read after it (a bias) would be copied at every step, never read
        inside = {id(x) for x in self.reduceop.src[0].lazyops()} if self.reduceop is not None else set()
        ret = {}
        for i, b in enumerate(self.bufops):
            strides = self.strides(i)
            if b.op is not BufferOps.LOAD or id(b) not in inside:
                continue
            if all(strides[a] != 0 for a in range(self.first_local, self.first_reduce)):
                continue
            # NOTE: the stride order makes the copy's neighbouring work items read neighbouring addresses
            axes = [a for a in region if strides[a] != 0]
            ret[i] = sorted(axes, key=lambda a: -s if isinstance(s := strides[a], int) else -(1 << 62))
        return ret

    def copy_rounds(self, axes: list[int]) -> int:
        """Rounds of the work-group's items that copy a staged load spanning `axes` (its local memory holds this
        many times the group's size: the last round may copy past the end, masked)."""
        group = prod(self.full_shape[self.first_local : self.first_reduce])
        return -(-prod(self.full_shape[a] for a in axes) // group)

    def name(self) -> str:
        """E_ (elementwise) or r_ (with a reduce), then the output dims and the reduce dims: r_16_16_16."""
        return self.base_name

    def strides(self, i: int) -> tuple[sint | None, ...]:
        """Buffer i's stride along every axis (None where it is not one fixed step)."""
        return self.sts[i].real_strides()

    def apply(self, opt: Opt) -> Kernel:
        """Split loop axis opt.axis by opt.amount and move the inner part to the end as an expanded axis (LOCAL and
        TILE: to the end of the output axes or reduce loops)."""
        axis, amount = opt.axis, opt.amount
        if opt.op == "INNER":
            return self._innermost(axis)
        size = self.full_shape[axis] if axis < self.first_expanded else None
        if not isinstance(size, int) or amount < 2 or size % amount:
            raise ValueError(f"cannot apply {opt} to a kernel of shape {self.full_shape}")
        if opt.op == "LOCAL":
            if axis >= self.first_local:
                raise ValueError(f"{opt}: LOCAL splits a work-group axis, one of the first {self.first_local}")
            return self._split_to(axis, amount, self.first_reduce, first_reduce=self.first_reduce + 1,
                                  local_dims=self.local_dims + 1)  # fmt: skip
        if opt.op == "TILE":
            if not self.first_reduce <= axis < self.first_expanded or self.tiled:
                raise ValueError(f"{opt}: TILE splits a reduce loop, once")
            if self.vector_axis is not None:  # NOTE: local memory is read one scalar at a time
                raise ValueError(f"{opt}: a kernel with vector lanes takes no local-memory tile")
            return self._split_to(axis, amount, self.first_expanded, tiled=True)
        if opt.op == "VECTOR" and (self.vector_axis is not None or self.tiled):
            raise ValueError(f"a kernel has one vector axis, and none with a local-memory tile: cannot apply {opt}")
        kind = "upcast" if axis < self.first_reduce else "unroll"
        ret = self._split_to(axis, amount, len(self.full_shape), expanded=(*self.expanded, kind))
        return replace(ret, vector_axis=len(self.full_shape)) if opt.op == "VECTOR" else ret

    def _split_to(self, axis: int, amount: int, at: int, **changes: object) -> Kernel:
        """Split loop `axis` into (size // amount, amount) and move the inner part to position `at` of the split
        axes (LOCAL: the end of the output axes, TILE: the end of the reduce loops, the rest: the end); axes from
        there on move up one."""
        size = self.full_shape[axis]
        split = self.full_shape[:axis] + (size // amount, amount) + self.full_shape[axis + 1 :]  # type: ignore[operator]
        order = [i for i in range(len(split)) if i != axis + 1]
        order.insert(at, axis + 1)
        sts = []
        for st in self.sts:
            parts = (st.shape[axis] // amount, amount) if st.shape[axis] != 1 else (1, 1)
            sts.append(st.reshape(st.shape[:axis] + parts + st.shape[axis + 1 :]).permute(tuple(order)))
        vector = self.vector_axis + 1 if self.vector_axis is not None and at <= self.vector_axis else self.vector_axis
        return replace(self, sts=tuple(sts), full_shape=tuple(split[i] for i in order), vector_axis=vector,
                       **changes)  # type: ignore[arg-type]  # fmt: skip

    def _innermost(self, axis: int) -> Kernel:
        """Make output loop `axis` the innermost output loop (loop order, for cache reuse)."""
        if not 0 <= axis < self.first_local:
            raise ValueError(f"INNER({axis}) needs an output loop axis; this kernel has {self.first_local}")
        order = [i for i in range(len(self.full_shape)) if i != axis]
        order.insert(self.first_local - 1, axis)
        vector = order.index(self.vector_axis) if self.vector_axis is not None else None
        return replace(self, sts=tuple(st.permute(tuple(order)) for st in self.sts),
                       full_shape=tuple(self.full_shape[i] for i in order), vector_axis=vector)  # fmt: skip


@dataclass(frozen=True)
class Opt:
    """UPCAST/UNROLL: unroll `amount` elements of loop axis `axis`; VECTOR: make them the lanes of a vector type;
    INNER: make output loop `axis` the innermost output loop (amount unused); LOCAL: make `amount` elements of
    output axis `axis` a work-group's local ids; TILE: split reduce loop `axis` into steps of `amount` (the last
    reduce loop) and stage shared loads in local memory per step."""

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
