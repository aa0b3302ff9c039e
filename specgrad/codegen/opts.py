"""Which opts a kernel gets: hand-written rules that look at each buffer's strides, fast enough to run on every
kernel. The rules, in order:

1. VECTOR: the lanes of a vector type go on the last output axis that the output and every load walk with stride 1
   or 0 (a broadcast), else on a reduce axis the loads walk that way (the lanes then add up after the loop); the
   widest vector whose lanes divide such an axis, halving down to 16 bytes. Only where no width fits either, a
   reduce kernel takes them on an output axis its loads walk that way but its output does not (a convolution's out
   channels over packed weights): the stores go lane by lane, once per reduce.
2. UPCAST (reduce kernels): register tiling. An output axis along which some load does not move (stride 0) is
   unrolled, so that load is read once for several outputs, up to the accumulators the CPU was measured to keep
   busy best (runtime/throughput.py), else MAX_ACCUMULATORS (by register count); where the lanes are on a reduce
   axis, a convolution's window over a load (a weight gradient's ky, kx) counts as saving that load,
   leaving the first output loop at least 2 long where threads would split it.
3. INNER: where the vector loads read a packed panel (Tensor._dot_packed), the output loop along which they do not
   move runs innermost, so the panel stays in cache from one iteration to the next.
4. UNROLL: a short last reduce loop (a 3x3 window) is unrolled whole, a long one by 4.

On a GPU (LinearizerOptions.work_groups, from the device's queries) a reduce kernel with loads that some output axes
do not move along (a matmul's or convolution's operands) takes a work-group shape instead of rule 1: LOCAL makes
those axes' inner parts the work-group's local ids (32 to max_items items), UPCAST gives each item a register tile
whose elements are a work-group apart (neighbouring items touch neighbouring addresses; 4, else 2), and TILE splits
the last reduce loop so the work-group first copies its shared loads into local memory at each step (within half
the local memory, so two groups fit per compute unit). A register tile is dropped where it would leave fewer groups
than compute units.

Imports dtype, ops and codegen.kernel.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from specgrad.codegen.kernel import Kernel, Opt
from specgrad.dtype import dtypes
from specgrad.helpers import prod
from specgrad.ops import BinaryOps, BufferOps, LazyOp, ReduceOps, TernaryOps, UnaryOps

if TYPE_CHECKING:
    from specgrad.codegen.linearizer import LinearizerOptions, WorkGroups

# NOTE: every renderer can apply these to vectors lane by lane; a kernel using any other op stays scalar
VECTOR_OPS = {BinaryOps.ADD, BinaryOps.SUB, BinaryOps.MUL, BinaryOps.DIV, BinaryOps.MAX, UnaryOps.NEG,
              UnaryOps.EXP2, UnaryOps.LOG2, UnaryOps.SQRT, UnaryOps.SIN, UnaryOps.RECIP, BinaryOps.CMPLT,
              TernaryOps.WHERE}  # fmt: skip
# NOTE: a register tile keeps at most half the vector registers as accumulators: AVX-512 (64-byte vectors) has 32,
# AVX2 and SSE 16
MAX_ACCUMULATORS = {64: 16}
MAX_FULL_UNROLL = 8  # a last reduce loop this short is unrolled whole
PARALLEL_MIN_WORK = 1 << 14  # iterations of a whole kernel before its first output loop is worth handing to threads
PANEL_STRIDE = 64  # elements between reduce steps of a vector load that reads a packed panel
LOCAL_SIDES = (16, 8, 4, 2)  # local ids along one axis of a work-group, widest first
MAX_GROUP_ITEMS = 256  # work items per group, at most (enough to hide latency; more only strains registers)
MIN_GROUP_ITEMS = 32  # work items per group, at least (a warp); a smaller shape is left to the runtime
GROUP_UPCAST = 4  # a GPU work item's register tile along each local axis
MAX_TILE_STEPS = 16  # reduce steps staged in local memory at once
MIN_TILE_STEPS = 8  # fewer steps per copy than this, and the barriers cost more than the loads they save


def choose_opts(k: Kernel, opts: LinearizerOptions) -> list[Opt]:
    if not all(isinstance(s, int) for s in k.full_shape):
        return []  # NOTE: symbolic shapes keep plain loops: splits need sizes known when compiling
    if opts.work_groups is not None and (group_opts := work_group_opts(k, opts.work_groups)):
        return group_opts
    chosen: list[Opt] = []

    def apply(opt: Opt) -> None:
        nonlocal k
        k = k.apply(opt)
        chosen.append(opt)

    # NOTE: a narrower vector where the widest divides no axis, down to 16 bytes (56-wide rows take 8 floats on
    # AVX-512, where scalar code ran a 64-channel 3x3 convolution at a seventh of PyTorch's speed)
    widest = vector_width(k, opts.vector_bytes)
    widths = [w for w in (16, 8, 4, 2) if w <= widest and w * k.ast.arg.dtype.itemsize >= 16]
    # NOTE: contiguous stores at any width before stores lane by lane
    for scattered, width in itertools.product((False, True), widths):
        if (axis := _vector_axis(k, width, scattered)) is not None:
            apply(Opt("VECTOR", axis, width))
            break
    if k.reduceop is not None:
        accumulators, upcast = 1, set()
        budget = opts.accumulators or MAX_ACCUMULATORS.get(opts.vector_bytes, 8)
        # NOTE: threads split the first output loop: a register tile that leaves it one iteration long (a layer
        # norm's weight gradient, 128 outputs as 16 lanes x 8) runs the whole kernel on one thread
        work = prod(k.full_shape)  # type: ignore[arg-type]
        keep_first = 2 if opts.threads and work >= PARALLEL_MIN_WORK and k.first_reduce > 0 else 1
        while (pick := _upcast_axis(k, budget // accumulators, upcast, keep_first)) is not None:
            apply(Opt("UPCAST", *pick))
            accumulators *= pick[1]
            upcast.add(pick[0])
        if (inner := _panel_axis(k)) is not None:
            apply(Opt("INNER", inner, 0))
        if k.reduce_shape:
            last = k.first_expanded - 1
            size = k.full_shape[last]
            if 1 < size <= MAX_FULL_UNROLL:  # type: ignore[operator]
                apply(Opt("UNROLL", last, size))  # type: ignore[arg-type]
            elif size % 4 == 0:  # type: ignore[operator]
                apply(Opt("UNROLL", last, 4))
    return chosen


def vector_width(k: Kernel, vector_bytes: int) -> int:
    """Lanes per vector for this kernel, or 1 when an op or dtype of it has no vector form here."""
    dtype = k.ast.arg.dtype
    width = vector_bytes // dtype.itemsize
    if width not in (2, 4, 8, 16) or dtype not in (dtypes.float32, dtypes.float64):
        return 1
    if k.reduceop is not None and _is_mask(k.reduceop.src[0]):
        return 1
    for x in k.ast.lazyops():
        if x.op is BufferOps.LOAD and x.arg.dtype == dtypes.bool:
            continue  # NOTE: a mask; _is_mask keeps masks out of everything but where's condition
        if x.op in (BufferOps.LOAD, BufferOps.CONST) and x.arg.dtype != dtype:
            return 1
        if x.op in (BufferOps.LOAD, BufferOps.CONST, BufferOps.STORE) or x.op in ReduceOps:
            continue
        masks = [_is_mask(s) for s in x.src]
        if x.op not in VECTOR_OPS or any(masks[1:] if x.op is TernaryOps.WHERE else masks):
            return 1
        if x.op is TernaryOps.WHERE and not masks[0]:
            return 1
    return width


def _is_mask(x: LazyOp) -> bool:
    """A bool value: a comparison or a loaded bool (vector kernels use them only as where's condition)."""
    return x.op is BinaryOps.CMPLT or (x.op in (BufferOps.LOAD, BufferOps.CONST) and x.arg.dtype == dtypes.bool)


def _loads(k: Kernel) -> list[int]:
    return [i for i, b in enumerate(k.bufops) if b.op is BufferOps.LOAD]


def _vector_axis(k: Kernel, width: int, scattered: bool = False) -> int | None:
    strides = [k.strides(i) for i in range(len(k.sts))]
    loads = _loads(k)

    def fits(axis: int) -> bool:
        size = k.full_shape[axis]
        return isinstance(size, int) and size % width == 0 and all(strides[i][axis] in (0, 1) for i in loads)

    outputs = [a for a in range(k.first_reduce) if strides[0][a] == 1 and fits(a)]
    if outputs and not scattered:
        return outputs[-1]
    if scattered:
        # NOTE: lanes across an output axis the output is not contiguous along (a convolution's out channels over
        # packed weights): its stores go lane by lane, which pays only once per reduce of many multiply-adds
        if k.reduceop is None:
            return None
        axes = [a for a in range(k.first_reduce) if fits(a) and any(strides[i][a] == 1 for i in loads)]
        return axes[-1] if axes else None
    reduces = [a for a in range(k.first_reduce, k.first_expanded)
               if fits(a) and any(strides[i][a] == 1 for i in loads)]  # fmt: skip
    return reduces[-1] if reduces else None


def _upcast_axis(k: Kernel, budget: int, done: set[int], keep_first: int = 1) -> tuple[int, int] | None:
    """The output loop axis that saves the most loads when unrolled (one not unrolled yet first), and by how much,
    leaving the first output loop at least keep_first long; None when none does."""
    strides = [k.strides(i) for i in range(len(k.sts))]
    windows = _window_strides(k, strides)
    best: tuple[int, int, int, int] | None = None  # (saved loads, not unrolled yet, axis, amount)
    for axis in range(k.first_local):
        size = k.full_shape[axis]
        least = keep_first if axis == 0 else 1
        amount = next((a for a in (4, 3, 2) if a <= budget and isinstance(size, int) and size % a == 0
                       and size // a >= least), None)  # fmt: skip
        if amount is None:
            continue
        saved = sum(1 for i in _loads(k) if strides[i][axis] == 0 or strides[i][axis] in windows[i])
        score = (saved, axis not in done)
        if saved and (best is None or score > best[:2]):
            best = (*score, axis, amount)
    return (best[2], best[3]) if best else None


def _window_strides(k: Kernel, strides: list[tuple]) -> list[set[int]]:
    """Per buffer, the strides an output axis may walk it with and count as a saved load: in a kernel whose vector
    lanes are on a reduce axis, the buffer's own nonzero strides along the reduce axes. Such an output axis is a
    convolution's window over that buffer (a weight gradient's ky and kx over the input, which the reduce's oy and ox
    walk the same way): unrolled, its loads re-read rows the tile has just read, from L1. The 32x16x3x3 weight
    gradient of the bench went 7.3 -> 4.5 ms at 1 thread with its 3x3 window as the tile instead of 4 x 4 channels;
    where the lanes are on an output axis (a forward convolution, an input gradient) the channel tile measured faster,
    so nothing counts there."""
    lanes_on_reduce = k.vector_axis is not None and k.expanded[k.vector_axis - k.first_expanded] == "unroll"
    if not lanes_on_reduce:
        return [set() for _ in strides]
    reduce_axes = [*range(k.first_reduce, k.first_expanded), k.vector_axis]
    return [{s for a in reduce_axes if isinstance(s := st[a], int) and s != 0} for st in strides]


def _panel_axis(k: Kernel) -> int | None:
    """The output loop to run innermost when the vector loads read a packed panel (consecutive reduce steps are
    close in memory): the one along which they do not move, so the panel stays in cache across its iterations."""
    if k.vector_axis is None or not k.reduce_shape:
        return None
    strides = [k.strides(i) for i in range(len(k.sts))]
    wide = [i for i in _loads(k) if strides[i][k.vector_axis] == 1]
    reduce_steps = [strides[i][k.first_expanded - 1] for i in wide]
    if not wide or not all(isinstance(s, int) and 0 < s <= PANEL_STRIDE for s in reduce_steps):
        return None
    axes = [a for a in range(k.first_reduce) if k.full_shape[a] != 1 and all(strides[i][a] == 0 for i in wide)]
    return axes[-1] if axes and axes[-1] != k.first_reduce - 1 else None


def work_group_opts(k: Kernel, groups: WorkGroups) -> list[Opt]:
    """A GPU reduce kernel's work-group shape, register tile and local-memory tile (the module's last paragraph),
    or [] where no output axis is shared by a load (the kernel then takes the rules above)."""
    if k.reduceop is None or not k.reduce_shape:
        return []
    strides = [k.strides(i) for i in range(len(k.sts))]
    loads = _loads(k)
    shared = [a for a in range(k.first_reduce) if k.full_shape[a] != 1 and any(strides[i][a] == 0 for i in loads)]
    if not shared:
        return []
    # NOTE: the last output axis first where a load shares it (neighbouring items store neighbouring outputs); then
    # the axis that shares most of the loads moving along the first
    first = shared[-1]
    moving = [i for i in loads if strides[i][first] != 0]
    rest = [a for a in shared if a != first]
    axes = [first, *([max(rest, key=lambda a: (sum(strides[i][a] == 0 for i in moving), a))] if rest else [])]
    budget, local = min(groups.max_items, MAX_GROUP_ITEMS), []
    for a in axes:
        side = next((s for s in LOCAL_SIDES if s <= budget and k.full_shape[a] % s == 0), None)  # type: ignore[operator]
        if side is not None:
            local.append((a, side))
            budget //= side
    if prod(side for _, side in local) < MIN_GROUP_ITEMS:
        return []  # NOTE: a group of 4 items (a pool's 2x2 window) fills an eighth of a warp; the runtime picks better
    # NOTE: the last LOCAL becomes local id 0, the one neighbouring work items differ in
    chosen = [Opt("LOCAL", a, side) for a, side in reversed(local)]
    ups = [Opt("UPCAST", a, n) for a, side in local
           if (n := next((u for u in (GROUP_UPCAST, 2) if k.full_shape[a] // side % u == 0), 0))]  # type: ignore[operator]  # fmt: skip
    group_count = prod(k.full_shape[: k.first_reduce]) // prod(side for _, side in local)  # type: ignore[arg-type]
    if group_count // prod(o.amount for o in ups) >= groups.compute_units:
        chosen += ups
    for opt in chosen:
        k = k.apply(opt)
    last = k.first_expanded - 1
    steps = k.full_shape[last]
    for tile in (t for t in range(min(MAX_TILE_STEPS, steps), MIN_TILE_STEPS - 1, -1) if steps % t == 0):  # type: ignore[operator]
        tiled = k.apply(Opt("TILE", last, tile))
        staged = tiled.staged_loads()
        group = prod(tiled.full_shape[tiled.first_local : tiled.first_reduce])
        nbytes = sum(tiled.copy_rounds(axes) * group * k.bufops[i].arg.dtype.itemsize for i, axes in staged.items())
        if staged and nbytes <= groups.local_bytes // 2:
            chosen.append(Opt("TILE", last, tile))
            k = tiled
            break
    last = k.first_expanded - 1
    if k.full_shape[last] % 4 == 0 and k.full_shape[last] > 4:  # type: ignore[operator]
        chosen.append(Opt("UNROLL", last, 4))
    return chosen
