"""The fusion rules: which LazyBuffers become kernels, and the ast of each kernel, as ScheduleItems.

Rules: elementwise ops fuse into their consumers; elementwise ops fuse into the reduce that consumes them;
one reduce fuses into the elementwise kernel after it when that kernel is its only consumer and sees it
through a plain reshape; movement ops are views folded into the loads' ShapeTrackers, except that a base is
computed on its own when a view would recompute it (an expand) or when padding would change it (f(0) != 0).
Then each kernel's ast is rewritten where the graph asks for it: a repeated read through a reshape of a permuted
view is copied once (_flatten_reads), a long reduce is cut in two (_split_reduce), a large column-walked matmul
operand is packed into panels (_pack_operand).
Imports helpers, flags, shape, ops and lazy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from specgrad.dtype import DType
from specgrad.flags import DEBUG
from specgrad.helpers import dedup, prod
from specgrad.lazy import LazyBuffer, held_bases
from specgrad.ops import (
    UNSAFE_PAD_OPS,
    BufferOps,
    ConstBuffer,
    LazyOp,
    LoadOps,
    MemBuffer,
    ReduceOps,
    ScheduleItem,
    get_lazyop_info,
)
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import Variable, sint
from specgrad.shape.view import View

# NOTE: a kernel's ast is a tree as deep as its longest chain of fused ops, and later stages (hashing, linearizing,
# the C compiler) walk it recursively: a chain longer than this is cut into kernels, so no walk grows with a graph
MAX_KERNEL_DEPTH = 128


def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
    """The kernels that realize `outs`, each after the kernels it reads from."""
    realizes = {x.base: None for x in outs if x.base.realized is None}
    if not realizes:
        return []
    allbufs = _walk_graph(list(realizes), realizes)
    _add_assign_readers(allbufs, realizes)
    _cap_depth(allbufs, realizes)
    reduce_for = _pair_reduces(allbufs, realizes)
    schedule: list[ScheduleItem] = []
    done: set[LazyBuffer] = set()
    for out in list(realizes):
        _schedule_base(out, realizes, reduce_for, schedule, done)
    copies: dict[tuple, LazyBuffer] = {}
    schedule = _order_assigns([item for si in schedule for item in _rewrite_reduce_kernel(si, copies)])
    if DEBUG >= 1 and schedule:
        print(f"scheduled {len(schedule)} kernel(s) for {len(outs)} output(s)")
    return schedule


# *** deciding what to realize ***


def _walk_graph(roots: list[LazyBuffer], realizes: dict[LazyBuffer, None]) -> dict[LazyBuffer, None]:
    """Visit every unrealized node; mark the bases that must be kernels of their own. Returns the bases seen."""
    allbufs: dict[LazyBuffer, None] = {}
    pads: list[LazyBuffer] = []
    seen: set[LazyBuffer] = set()
    stack = list(roots)
    while stack:
        lb = stack.pop()
        if lb in seen or lb.base.realized is not None:
            continue
        seen.add(lb)
        if lb.base is not lb:
            _mark_view(lb, realizes, pads)
            stack.append(lb.base)
            continue
        allbufs[lb] = None
        if lb.forced_realize or (lb.op in LoadOps and lb.op is not LoadOps.CONST):
            realizes[lb] = None
        if lb.op is LoadOps.FROM:
            realizes.setdefault(lb.srcs[0].base, None)
        stack.extend(lb.srcs)
    for base in pads:
        if base not in realizes and not _is_pad_safe(base, realizes):
            realizes[base] = None
    return allbufs


def _add_assign_readers(allbufs: dict[LazyBuffer, None], realizes: dict[LazyBuffer, None]) -> None:
    """An assign overwrites its target's buffer, so every live value still reading the old contents is computed and
    stored in this schedule too, before the write (see _order_assigns). The values that can still be read are the
    ones a Tensor holds: from the target, each unrealized reader is followed through its readers until one is held
    or stored by this schedule. A held one is stored now; the rest are garbage or fused into what is. So a loss, the
    logits or a gradient realized after `opt.step()` is the value from before the step (the held one may be fused
    into this schedule's kernels too, as the loss into its gradient: it is still stored, for later reads)."""
    pending = [lb for lb in allbufs if lb.assign_target is not None]
    held = held_bases() if pending else set()
    while pending:
        stack = [c for w in pending for c in w.assign_target.children]  # type: ignore[union-attr]
        seen: set[LazyBuffer] = set()
        found: list[LazyBuffer] = []
        while stack:
            c = stack.pop()
            if c in seen or c.realized is not None or c.assign_target is not None or c in realizes:
                continue
            seen.add(c)
            if c in held:
                found.append(c)
            else:
                stack.extend(c.children)
        for c in found:
            realizes[c] = None
        new = _walk_graph(found, realizes)
        pending = [lb for lb in new if lb.assign_target is not None and lb not in allbufs]
        allbufs.update(new)


def _order_assigns(schedule: list[ScheduleItem]) -> list[ScheduleItem]:
    """Dependency order in which every kernel reading an assign's target buffer runs before the assign writes it.
    In the rare cycle (one kernel reads both the old and the new value) the assign gets a fresh buffer instead."""
    writers = [i for i, si in enumerate(schedule) if si.out.assign_target is not None]
    if not writers:
        return schedule
    pos = {id(si.out): i for i, si in enumerate(schedule)}
    preds = [{pos[id(x)] for x in si.inputs if id(x) in pos} for si in schedule]
    for w in writers:
        target = schedule[w].out.assign_target.realized  # type: ignore[union-attr]
        preds[w] |= {i for i, si in enumerate(schedule) if i != w and any(x.realized is target for x in si.inputs)}
    order, placed = [], set()
    while len(order) < len(schedule):
        ready = next((i for i in range(len(schedule)) if i not in placed and preds[i] <= placed), None)
        if ready is None:
            for w in writers:
                schedule[w].out.assign_target = None
            return schedule
        order.append(ready)
        placed.add(ready)
    return [schedule[i] for i in order]


def _cap_depth(allbufs: dict[LazyBuffer, None], realizes: dict[LazyBuffer, None]) -> None:
    """Realize a base wherever its chain of fused ops reaches MAX_KERNEL_DEPTH (iterative: the graph may be deep)."""
    depth: dict[LazyBuffer, int] = {}
    for root in allbufs:
        stack = [root]
        while stack:
            lb = stack[-1]
            if lb in depth:
                stack.pop()
                continue
            pending = [s.base for s in lb.srcs if s.base in allbufs and s.base not in depth]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            d = 1 + max((depth.get(s.base, 0) for s in lb.srcs), default=0)
            if d >= MAX_KERNEL_DEPTH:
                realizes[lb] = None
            depth[lb] = 0 if lb in realizes else d


def _mark_view(view: LazyBuffer, realizes: dict[LazyBuffer, None], pads: list) -> None:
    base = view.base
    if base.op is LoadOps.CONST:
        return
    masks = [v.mask for v in view.st.views if v.mask is not None]
    if masks:
        valid = prod(e - b for b, e in masks[0])
        if len(view.st.views) == 1 and _known_le(valid, base.size):
            pads.append(base)
        else:
            realizes[base] = None
    elif not _known_le(view.size, base.size):
        realizes[base] = None  # NOTE: an expanded view would recompute every element of the base many times


def _known_le(a: object, b: object) -> bool:
    return isinstance(a, int) and isinstance(b, int) and a <= b


def _is_pad_safe(base: LazyBuffer, realizes: dict[LazyBuffer, None]) -> bool:
    """True when every op fused into `base` maps 0 to 0, so padding after it equals padding before it."""
    stack, seen = [base], set()
    while stack:
        lb = stack.pop().base
        if lb in seen or lb.realized is not None or lb.op is LoadOps.CONST or (lb in realizes and lb is not base):
            continue
        seen.add(lb)
        if lb.op in UNSAFE_PAD_OPS or isinstance(lb.op, ReduceOps):
            return False
        stack.extend(lb.srcs)
    return True


def _pair_reduces(allbufs: dict[LazyBuffer, None], realizes: dict[LazyBuffer, None]) -> dict[LazyBuffer, LazyBuffer]:
    """For each kernel root, the reduce fused into it. A reduce that cannot fuse down becomes a kernel itself."""
    reduce_for: dict[LazyBuffer, LazyBuffer] = {}
    for r in allbufs:
        if not isinstance(r.op, ReduceOps) or r in realizes:
            continue
        target = _reduce_target(r, allbufs, realizes)
        if target is None or target in reduce_for:
            realizes[r] = None
        else:
            reduce_for[target] = r
    for r in realizes:
        if isinstance(r.op, ReduceOps):
            reduce_for[r] = r
    return reduce_for


def _reduce_target(
    r: LazyBuffer, allbufs: dict[LazyBuffer, None], realizes: dict[LazyBuffer, None]
) -> LazyBuffer | None:
    """The single kernel root that reads `r` only through unrealized elementwise ops and a plain reshape."""
    frontier: dict[LazyBuffer, ShapeTracker] = {r: r.st}
    found: dict[LazyBuffer, ShapeTracker] = {}
    # NOTE: every node reached, with the view it sees r through: paths of different lengths can meet (x.flip(0) and
    # x both feeding one sum), and a node that sees r through two views cannot fuse it
    reached: dict[LazyBuffer, ShapeTracker] = {r: r.st}
    while frontier:
        nxt: dict[LazyBuffer, ShapeTracker] = {}
        for lb, st in frontier.items():
            if lb in realizes:
                found[lb] = st
                continue
            for child in lb.children:
                if child not in allbufs or child.realized is not None:
                    continue
                if isinstance(child.op, ReduceOps):
                    return None  # NOTE: one reduce per kernel
                views = dedup(s for s in child.srcs if s.base is lb)
                if len(views) != 1 or reached.get(child, st + views[0].st) != st + views[0].st:
                    return None
                nxt[child] = reached[child] = st + views[0].st
        frontier = nxt
    if len(found) != 1:
        return None
    target, st = next(iter(found.items()))
    return target if st.contiguous and st.size() == r.size else None


# *** building each kernel's ast ***


def _schedule_base(out: LazyBuffer, realizes: dict, reduce_for: dict, schedule: list, done: set) -> None:
    stack: list[tuple[LazyBuffer, ScheduleItem | None]] = [(out, None)]
    while stack:
        lb, item = stack.pop()
        if item is not None:
            if lb not in done:
                done.add(lb)
                schedule.append(item)
            continue
        if lb in done or lb.realized is not None:
            continue
        item = _lower(lb, realizes, reduce_for)
        stack.append((lb, item))
        stack.extend((x, None) for x in reversed(item.inputs) if x not in done and x.realized is None)


def _lower(out: LazyBuffer, realizes: dict, reduce_for: dict) -> ScheduleItem:
    """The ScheduleItem computing base `out`."""
    if out.op in (LoadOps.EMPTY, LoadOps.FROM, LoadOps.CUSTOM):
        loads = tuple(LazyOp(BufferOps.LOAD, (), MemBuffer(i + 1, s.dtype, s.st)) for i, s in enumerate(out.srcs))
        return ScheduleItem(LazyOp(out.op, loads, out.arg), out, tuple(s.base for s in out.srcs))
    reduce = reduce_for.get(out)
    kernel_shape = reduce.shape if reduce is not None else out.shape
    builder = _AstBuilder(out, realizes, reduce)
    ast = builder.build(out, ShapeTracker.from_shape(kernel_shape))
    store = LazyOp(
        BufferOps.STORE, (ast,), MemBuffer(0, out.dtype, builder.unbind(ShapeTracker.from_shape(kernel_shape)))
    )
    return ScheduleItem(store, out, tuple(builder.inputs), builder.var_vals)


class _AstBuilder:
    """Inline every unrealized node under `root` into one ast; realized ones become LOADs."""

    def __init__(self, root: LazyBuffer, realizes: dict, reduce: LazyBuffer | None):
        self.root, self.realizes, self.reduce = root, realizes, reduce
        self.inputs: list[LazyBuffer] = []
        self.var_vals: dict[Variable, int] = {}
        self.cache: dict[tuple[LazyBuffer, ShapeTracker], LazyOp] = {}

    def unbind(self, st: ShapeTracker) -> ShapeTracker:
        st, var_vals = st.simplify().unbind()
        self.var_vals.update(var_vals)
        return st

    def build(self, lb: LazyBuffer, st: ShapeTracker) -> LazyOp:
        """`st` maps the kernel's index space onto `lb`."""
        if lb.base is not lb:
            st, lb = lb.st + st, lb.base
        key = (lb, st)
        if key not in self.cache:
            self.cache[key] = self._build_base(lb, st)
        return self.cache[key]

    def _build_base(self, lb: LazyBuffer, st: ShapeTracker) -> LazyOp:
        if lb.realized is None and lb.op is LoadOps.CONST:
            return LazyOp(BufferOps.CONST, (), ConstBuffer(lb.arg, lb.dtype, self.unbind(st)))
        if lb.realized is not None or (lb in self.realizes and lb is not self.root):
            if lb not in self.inputs:
                self.inputs.append(lb)
            return LazyOp(BufferOps.LOAD, (), MemBuffer(self.inputs.index(lb) + 1, lb.dtype, self.unbind(st)))
        if lb.op is LoadOps.CONTIGUOUS:
            return self.build(lb.srcs[0], st)
        if isinstance(lb.op, ReduceOps):
            if lb is not self.reduce or st.simplify() != ShapeTracker.from_shape(lb.shape):
                raise RuntimeError(f"internal fusion error: reduce {lb} reached kernel {self.root} through {st}")
            src_st = ShapeTracker.from_shape(lb.srcs[0].shape)
            return LazyOp(lb.op, (self.build(lb.srcs[0], src_st),), lb.arg)
        return LazyOp(lb.op, tuple(self.build(s, st) for s in lb.srcs), lb.arg)


# *** operand packing ***
# NOTE: a matmul reads its right operand w (K, N) by columns, so a row-major w is walked one cache line per element,
# and when N is a power of two every element of a column maps to one cache set and evicts the last. BLAS copies such
# an operand into panels of PACK_PANEL columns first, each one contiguous block; so does the scheduler, for any
# SUM kernel that reads a large operand that way: the copy is one pass over w, repaid when many rows read it.
# A transposed operand (x @ w.T, as nn.Linear computes with its (out, in) weight) is read along K with stride 1, so
# the kernel could only put its vector lanes on the reduce and add each accumulator's lanes up at the end; its panels
# are the same layout, copied across, and then the kernel runs as a plain matmul. That pays wherever the product is
# PACK_T_WORK multiply-adds or more, whatever K: at 1 thread, 1.5-2.3x for K from 512 to 4096 (a bound of K <= 256,
# on the guess that a long K amortizes the final adds, had left the MLP's 784 inputs at 30 GFLOP/s). PACK_MIN: a
# 256 matmul packed runs at 101 against 87 GFLOP/s at 1 thread and 189 against 164 at 2 (through the jit); at 128 the
# copy costs more than it saves (63 -> 57 GFLOP/s at 1 thread, 96 -> 56 at 2).
PACK_PANEL, PACK_MIN, PACK_T_WORK = 32, 256, 2**22


def _pack_operand(si: ScheduleItem) -> list[ScheduleItem]:
    """[a kernel copying the operand into panels, si reading the panels] where packing pays; else [si]."""
    if (plan := _pack_plan(si.ast)) is None:
        return [si]
    load, axis, red = plan
    n, k, p = si.ast.arg.st.shape[axis], load.arg.st.shape[red], PACK_PANEL
    view = load.arg.st.views[0]
    # the panels (N/P, K, P), contiguous: element (n1, k, j) is w's column n1*P + j at row k
    src = View.create((n // p, k, p), (p * view.strides[axis], view.strides[red], view.strides[axis]), view.offset)
    operand = si.inputs[load.arg.idx - 1]
    panels = _scratch(operand, (n // p, k, p), load.arg.dtype)
    copy = LazyOp(BufferOps.STORE, (LazyOp(BufferOps.LOAD, (), MemBuffer(1, load.arg.dtype, ShapeTracker((src,)))),),
                  MemBuffer(0, load.arg.dtype, ShapeTracker.from_shape((n // p, k, p))))  # fmt: skip
    # the kernel with its `axis` split in (N/P, P), reading the panels where it read w
    buffer_ops = (BufferOps.LOAD, BufferOps.CONST, BufferOps.STORE)
    sts = {x: _split_st(x.arg.st, axis) for x in si.ast.lazyops() if x.op in buffer_ops}
    if any(st is None for st in sts.values()):
        return [si]
    strides = [0] * (len(view.shape) + 1)
    strides[axis], strides[axis + 1], strides[red + (red > axis)] = k * p, 1, p
    packed = MemBuffer(len(si.inputs) + 1, load.arg.dtype,
                       ShapeTracker((View.create(_split_shape(view.shape, axis), tuple(strides)),)))  # fmt: skip

    def rebuild(x: LazyOp, srcs: tuple[LazyOp, ...]) -> LazyOp:
        if x == load:
            return LazyOp(BufferOps.LOAD, (), packed)
        if x in sts:
            return LazyOp(x.op, srcs, replace(x.arg, st=sts[x]))
        return LazyOp(x.op, srcs, _split_shape(x.arg, axis) if isinstance(x.op, ReduceOps) else x.arg)

    ast, inputs = _renumber(_rewrite(si.ast, rebuild), (*si.inputs, panels))
    return [ScheduleItem(copy, panels, (operand,)), ScheduleItem(ast, si.out, inputs, si.var_vals)]


def _pack_plan(ast: LazyOp) -> tuple[LazyOp, int, int] | None:
    """(the LOAD to pack, the output axis N along which its panels run, the reduce axis K) for a SUM kernel with a
    single reduce axis, N a multiple of the panel and the output's contiguous axis: an operand walked with stride 1
    along N where rows, K and N are all at least PACK_MIN, or, where every operand walks K with stride 1 (x @ w.T),
    one walked along N by rows, where rows x K x N is at least PACK_T_WORK."""
    reduces = [x for x in ast.lazyops() if isinstance(x.op, ReduceOps)]
    if len(reduces) != 1 or reduces[0].op is not ReduceOps.SUM:
        return None
    loads = [x for x in reduces[0].src[0].lazyops() if x.op is BufferOps.LOAD]
    full, out = loads[0].arg.st.shape if loads else (), reduces[0].arg
    red_axes = [i for i, (f, o) in enumerate(zip(full, out)) if f != o]
    if not loads or len(red_axes) != 1 or not all(isinstance(s, int) for s in full):
        return None
    red = red_axes[0]
    out_strides = ast.arg.st.views[-1].strides if ast.op is BufferOps.STORE else ()
    # NOTE: the dot form: every operand walks K with stride 1, so no output axis can take the vector lanes
    dot_form = all(len(x.arg.st.views) == 1 and x.arg.st.views[0].strides[red] == 1 for x in loads)
    for load in loads:
        if len(load.arg.st.views) != 1 or (view := load.arg.st.views[0]).mask is not None:
            continue
        for axis, (size, stride) in enumerate(zip(view.shape, view.strides)):
            rows = prod(s for i, s in enumerate(full) if i not in (axis, red))
            # NOTE: only along the output's contiguous axis: the panels are for the vector lanes to go there (packing
            # h in h @ W.T along its rows left no axis for them, and the kernel ran as scalar code)
            if (
                axis == red
                or size % PACK_PANEL
                or len(out_strides) != len(full)
                or out_strides[axis] != 1
                or any(st != 0 for i, st in enumerate(view.strides) if i not in (axis, red))
            ):
                continue
            by_columns = stride == 1 and view.strides[red] not in (0, 1) and min(size, full[red], rows) >= PACK_MIN
            # NOTE: a product: another operand is the same for every n (a plain row sum has no second operand, and
            # copying its input would only add a pass)
            other = dot_form and any(x is not load and x.arg.st.views[0].strides[axis] == 0 for x in loads)
            transposed = other and stride not in (0, 1) and rows * size * full[red] >= PACK_T_WORK
            if by_columns or transposed:
                return load, axis, red
    return None


def _split_shape(shape: tuple, axis: int) -> tuple:
    return (*shape[:axis], shape[axis] // PACK_PANEL, PACK_PANEL, *shape[axis + 1 :])


def _split_st(st: ShapeTracker, axis: int) -> ShapeTracker | None:
    """`st` with `axis` split in (N/P, P), or None where that is no longer one view per view (a mask across it)."""
    ret = st.reshape(_split_shape(st.shape, axis))
    return ret if len(ret.views) == len(st.views) else None


def _rewrite_reduce_kernel(si: ScheduleItem, copies: dict[tuple, LazyBuffer]) -> list[ScheduleItem]:
    """si as the kernels the passes below make of it; only a reduce kernel has anything they change."""
    if si.ast.op is not BufferOps.STORE or not any(isinstance(x.op, ReduceOps) for x in si.ast.lazyops()):
        return [si]
    flat = [y for x in _pad_reads(si, copies) for y in _flatten_reads(x, copies)]
    return [item for x in flat for split in _split_reduce(x) for item in _pack_operand(split)]


# *** reads through padding ***
# NOTE: a buffer read through a pad (a convolution's input) is a masked load: each element is checked against the
# pad's bounds, and no vector load can serve it, as the lanes at an edge fall partly outside. Inside a reduce that
# reads each element many times (every output channel reads the input again) that cost is paid on every read, so the
# padded layout is copied once, zeros included, and the kernel reads the copy without a mask. One copy serves every
# kernel of the schedule that reads the buffer through the same pad.


def _pad_reads(si: ScheduleItem, copies: dict[tuple, LazyBuffer]) -> list[ScheduleItem]:
    """[copy kernels for the padded reads that need one, si reading the copies] or [si]; `copies` is the schedule's."""
    reduces = [x for x in si.ast.lazyops() if isinstance(x.op, ReduceOps)]
    loads = [x for r in reduces for x in r.src[0].lazyops() if x.op is BufferOps.LOAD and _padded(x.arg.st)]
    if not loads:
        return [si]
    items, inputs, unmasked = [], list(si.inputs), {}
    for load in dedup(loads):
        first, dtype = load.arg.st.views[0], load.arg.dtype
        kept = [d for d, stride in enumerate(first.strides) if stride != 0]
        layout = View.create([first.shape[d] for d in kept], [first.strides[d] for d in kept], first.offset,
                             [first.full_mask()[d] for d in kept])  # fmt: skip
        operand = si.inputs[load.arg.idx - 1]
        if (key := (operand, layout, dtype)) not in copies:
            copies[key] = _scratch(operand, layout.shape, dtype)
            read = LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtype, ShapeTracker((layout,))))
            copy = LazyOp(BufferOps.STORE, (read,), MemBuffer(0, dtype, ShapeTracker.from_shape(layout.shape)))
            items.append(ScheduleItem(copy, copies[key], (operand,), si.var_vals))
        inputs.append(copies[key])
        strides = dict(zip(kept, View.create(layout.shape).strides))
        plain = View.create(first.shape, [strides.get(d, 0) for d in range(len(first.shape))])
        st = ShapeTracker((plain, *load.arg.st.views[1:])).simplify()
        unmasked[load] = LazyOp(BufferOps.LOAD, (), MemBuffer(len(inputs), dtype, st))
    ast, used = _renumber(_rewrite(si.ast, lambda x, srcs: unmasked.get(x) or LazyOp(x.op, srcs, x.arg)), tuple(inputs))
    return [*items, ScheduleItem(ast, si.out, used, si.var_vals)]


def _padded(st: ShapeTracker) -> bool:
    """The first view is a pad (masked) of a layout, repeated only along unmasked axes, and the kernel reads each
    element of it several times: copying the padded layout costs one pass over what the kernel reads many times."""
    first = st.views[0]
    if first.mask is None or not all(isinstance(x, int) for v in st.views for x in (*v.shape, *v.strides, v.offset)):
        return False
    if any(stride == 0 and (lo, hi) != (0, size) for size, stride, (lo, hi) in zip(first.shape, first.strides,
                                                                                   first.mask)):  # fmt: skip
        return False
    layout = prod(size for size, stride in zip(first.shape, first.strides) if stride != 0)
    return prod(st.shape) >= PAD_COPY_REPEATS * layout


PAD_COPY_REPEATS = 4  # NOTE: reads per element of the padded layout from which its copy repays its pass


# *** reads through a reshape of a permuted view ***
# NOTE: a buffer read through two views or more (a reshape that strides cannot express on a permuted layout, such as
# attention's heads joined back into channels) costs divisions and modulos per index, and no vector load can serve
# it. Inside a reduce that reads it again along an expanded axis (a matmul operand) that cost is paid many times per
# element, so the inner views are copied once into the layout they describe, contiguous, and the kernel reads that
# copy through its last view alone. One copy serves every kernel of the schedule that reads the buffer the same way.


def _flatten_reads(si: ScheduleItem, copies: dict[tuple, LazyBuffer]) -> list[ScheduleItem]:
    """[copy kernels for the reads that need one, si reading the copies] or [si]; `copies` is the schedule's."""
    reduces = [x for x in si.ast.lazyops() if isinstance(x.op, ReduceOps)] if si.ast.op is BufferOps.STORE else []
    loads = [x for r in reduces for x in r.src[0].lazyops() if x.op is BufferOps.LOAD and _is_repeated_view(x.arg.st)]
    if not loads:
        return [si]
    items, inputs, single = [], list(si.inputs), {}
    for load in dedup(loads):
        inner, last, dtype = load.arg.st.views[:-1], load.arg.st.views[-1], load.arg.dtype
        operand = si.inputs[load.arg.idx - 1]
        if (key := (operand, inner, dtype)) not in copies:
            copies[key] = _scratch(operand, inner[-1].shape, dtype)
            read = LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtype, ShapeTracker(inner)))
            copy = LazyOp(BufferOps.STORE, (read,), MemBuffer(0, dtype, ShapeTracker.from_shape(inner[-1].shape)))
            items.append(ScheduleItem(copy, copies[key], (operand,), si.var_vals))
        inputs.append(copies[key])
        single[load] = LazyOp(BufferOps.LOAD, (), MemBuffer(len(inputs), dtype, ShapeTracker((last,))))
    ast, used = _renumber(_rewrite(si.ast, lambda x, srcs: single.get(x) or LazyOp(x.op, srcs, x.arg)), tuple(inputs))
    return [*items, ScheduleItem(ast, si.out, used, si.var_vals)]


def _is_repeated_view(st: ShapeTracker) -> bool:
    """Two views or more, the last one unmasked, expanded, and reading the whole layout before it at least once (a
    permutation of it, or overlapping windows of it): copying the inner views costs one pass over what the kernel
    reads several times."""
    if len(st.views) < 2 or (last := st.views[-1]).mask is not None:
        return False
    if not all(isinstance(s, int) for v in st.views for s in v.shape):
        return False
    axes = list(zip(last.shape, last.strides))
    read = prod(s for s, stride in axes if stride != 0)
    return read >= prod(st.views[-2].shape) and any(stride == 0 and s > 1 for s, stride in axes)


# *** splitting long reductions ***
# NOTE: a kernel holds one reduce and runs only its output loop in parallel, so few outputs of many elements each
# would be one long serial chain: such a reduce is cut in two kernels, (S, R/S) chunks of the axis reduced first
# into S partials, then the partials. It splits when each output reduces at least SPLIT_MIN elements and the outputs
# are few (or the reduce is very long); S is the largest divisor of one reduced axis in [16, 256] that keeps the
# first part at least S long. S depends on the shapes only (never on threads or the machine), so results are
# identical run to run.
SPLIT_MIN, SPLIT_MAX_OUTPUTS, SPLIT_LONG, SPLIT_RANGE = 32768, 256, 2**20, (16, 256)


def _split_reduce(si: ScheduleItem) -> list[ScheduleItem]:
    """[the partials' kernel, si reducing the partials] for a long reduce; else [si]."""
    reduces = [x for x in si.ast.lazyops() if isinstance(x.op, ReduceOps)] if si.ast.op is BufferOps.STORE else []
    if len(reduces) != 1:
        return [si]
    reduce = leaf = reduces[0]
    while leaf.src:  # NOTE: a leaf of the reduce's input (a LOAD or CONST) has the input's full shape
        leaf = leaf.src[0]
    if (split := _split_reduce_axis(full := leaf.arg.st.shape, reduce.arg)) is None:
        return [si]
    axis, s = split
    chunked = (*full[:axis], s, full[axis] // s, *full[axis + 1 :])
    partial_shape = (*reduce.arg[:axis], s, 1, *reduce.arg[axis + 1 :])

    def chunk(x: LazyOp, srcs: tuple[LazyOp, ...]) -> LazyOp:
        if x.op in (BufferOps.LOAD, BufferOps.CONST):
            return LazyOp(x.op, (), replace(x.arg, st=x.arg.st.reshape(chunked)))
        return LazyOp(x.op, srcs, x.arg)

    dtype = get_lazyop_info(reduce.src[0]).dtype
    partials = _scratch(si.out, partial_shape, dtype)
    first, first_inputs = _renumber(
        LazyOp(BufferOps.STORE, (LazyOp(reduce.op, (_rewrite(reduce.src[0], chunk),), partial_shape),),
               MemBuffer(0, dtype, ShapeTracker.from_shape(partial_shape))), si.inputs)  # fmt: skip
    read = ShapeTracker.from_shape(partial_shape).reshape((*reduce.arg[:axis], s, *reduce.arg[axis + 1 :]))
    load = LazyOp(BufferOps.LOAD, (), MemBuffer(len(si.inputs) + 1, dtype, read))

    def second(x: LazyOp, srcs: tuple[LazyOp, ...]) -> LazyOp:
        return LazyOp(reduce.op, (load,), reduce.arg) if x == reduce else LazyOp(x.op, srcs, x.arg)

    ast, inputs = _renumber(_rewrite(si.ast, second), (*si.inputs, partials))
    return [ScheduleItem(first, partials, first_inputs, si.var_vals), ScheduleItem(ast, si.out, inputs, si.var_vals)]


def _split_reduce_axis(shape: tuple[sint, ...], new_shape: tuple[sint, ...]) -> tuple[int, int] | None:
    """(axis, S) to reduce `shape` to `new_shape` in two kernels, or None to keep one (small or symbolic)."""
    if not all(isinstance(s, int) for s in shape):
        return None
    outputs = prod(new_shape)
    per_output = prod(shape) // outputs
    if per_output < SPLIT_MIN or (outputs > SPLIT_MAX_OUTPUTS and per_output < SPLIT_LONG):
        return None
    lo, hi = SPLIT_RANGE
    candidates = [
        (d, -i)  # the largest S, then the outermost axis (contiguous chunks for a contiguous input)
        for i, (size, new) in enumerate(zip(shape, new_shape))
        if size != new
        for d in range(lo, min(hi, size) + 1)
        if size % d == 0 and per_output // d >= d
    ]
    if not candidates:
        return None
    s, neg_axis = max(candidates)
    return -neg_axis, s


def _scratch(like: LazyBuffer, shape: tuple[sint, ...], dtype: DType) -> LazyBuffer:
    """A buffer between two kernels the scheduler made of one: no node of the lazy graph computes it."""
    return LazyBuffer(like.device, ShapeTracker.from_shape(shape), dtype, LoadOps.EMPTY)


def _renumber(ast: LazyOp, inputs: tuple[LazyBuffer, ...]) -> tuple[LazyOp, tuple[LazyBuffer, ...]]:
    """`ast` reading only the inputs it uses, numbered 1.. in order of first use, and those inputs."""
    used = dedup(x.arg.idx for x in ast.lazyops() if x.op is BufferOps.LOAD)
    new_idx = {old: i + 1 for i, old in enumerate(used)}

    def rebuild(x: LazyOp, srcs: tuple[LazyOp, ...]) -> LazyOp:
        return (
            LazyOp(x.op, (), replace(x.arg, idx=new_idx[x.arg.idx]))
            if x.op is BufferOps.LOAD
            else LazyOp(x.op, srcs, x.arg)
        )

    return _rewrite(ast, rebuild), tuple(inputs[i - 1] for i in used)


def _rewrite(ast: LazyOp, fn: Callable[[LazyOp, tuple[LazyOp, ...]], LazyOp]) -> LazyOp:
    """`ast` rebuilt bottom-up, `fn(node, its rewritten sources)` making each node. A subtree shared in the ast is
    rewritten once: a kernel's ast is a DAG (x*x reads x twice), and a plain tree walk is exponential in its depth."""
    memo: dict[LazyOp, LazyOp] = {}

    def walk(x: LazyOp) -> LazyOp:
        if x not in memo:
            memo[x] = fn(x, tuple(walk(src) for src in x.src))
        return memo[x]

    return walk(ast)
