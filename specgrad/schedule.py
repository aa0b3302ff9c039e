"""The fusion rules: which LazyBuffers become kernels, and the ast of each kernel, as ScheduleItems.

Rules: elementwise ops fuse into their consumers; elementwise ops fuse into the reduce that consumes them;
one reduce fuses into the elementwise kernel after it when that kernel is its only consumer and sees it
through a plain reshape; movement ops are views folded into the loads' ShapeTrackers, except that a base is
computed on its own when a view would recompute it (an expand) or when padding would change it (f(0) != 0).
Imports helpers, flags, shape, ops and lazy.
"""

from __future__ import annotations

from specgrad.flags import DEBUG
from specgrad.helpers import dedup, prod
from specgrad.lazy import LazyBuffer
from specgrad.ops import UNSAFE_PAD_OPS, BufferOps, ConstBuffer, LazyOp, LoadOps, MemBuffer, ReduceOps, ScheduleItem
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import Variable

# NOTE: a kernel's ast is a tree as deep as its longest chain of fused ops, and later stages (hashing, linearizing,
# the C compiler) walk it recursively: a chain longer than this is cut into kernels, so no walk grows with a graph
MAX_KERNEL_DEPTH = 128


def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
    """The kernels that realize `outs`, each after the kernels it reads from."""
    realizes = {x.base: None for x in outs if x.base.realized is None}
    allbufs = _walk_graph(list(realizes), realizes)
    _add_assign_readers(allbufs, realizes)
    _cap_depth(allbufs, realizes)
    reduce_for = _pair_reduces(allbufs, realizes)
    schedule: list[ScheduleItem] = []
    done: set[LazyBuffer] = set()
    for out in list(realizes):
        _schedule_base(out, realizes, reduce_for, schedule, done)
    schedule = _order_assigns(schedule)
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
    """An assign overwrites its target's buffer, so every live value still reading the old contents is computed in
    this schedule too, before the write (see _order_assigns)."""
    pending = [lb for lb in allbufs if lb.assign_target is not None]
    while pending:
        readers = [c for w in pending for c in w.assign_target.children  # type: ignore[union-attr]
                   if c.realized is None and c.assign_target is None and c not in allbufs]  # fmt: skip
        for c in readers:
            realizes[c] = None
        new = _walk_graph(readers, realizes)
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
        if lb.op in UNSAFE_PAD_OPS or lb.op in ReduceOps:
            return False
        stack.extend(lb.srcs)
    return True


def _pair_reduces(allbufs: dict[LazyBuffer, None], realizes: dict[LazyBuffer, None]) -> dict[LazyBuffer, LazyBuffer]:
    """For each kernel root, the reduce fused into it. A reduce that cannot fuse down becomes a kernel itself."""
    reduce_for: dict[LazyBuffer, LazyBuffer] = {}
    for r in allbufs:
        if r.op not in ReduceOps or r in realizes:
            continue
        target = _reduce_target(r, allbufs, realizes)
        if target is None or target in reduce_for:
            realizes[r] = None
        else:
            reduce_for[target] = r
    for r in realizes:
        if r.op in ReduceOps:
            reduce_for[r] = r
    return reduce_for


def _reduce_target(
    r: LazyBuffer, allbufs: dict[LazyBuffer, None], realizes: dict[LazyBuffer, None]
) -> LazyBuffer | None:
    """The single kernel root that reads `r` only through unrealized elementwise ops and a plain reshape."""
    frontier: dict[LazyBuffer, ShapeTracker] = {r: r.st}
    found: dict[LazyBuffer, ShapeTracker] = {}
    while frontier:
        nxt: dict[LazyBuffer, ShapeTracker] = {}
        for lb, st in frontier.items():
            if lb in realizes:
                found[lb] = st
                continue
            for child in lb.children:
                if child not in allbufs or child.realized is not None:
                    continue
                if child.op in ReduceOps:
                    return None  # NOTE: one reduce per kernel
                views = dedup(s for s in child.srcs if s.base is lb)
                if len(views) != 1 or (child in nxt and nxt[child] != st + views[0].st):
                    return None
                nxt[child] = st + views[0].st
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
        if lb.op in ReduceOps:
            if lb is not self.reduce or st.simplify() != ShapeTracker.from_shape(lb.shape):
                raise RuntimeError(f"internal fusion error: reduce {lb} reached kernel {self.root} through {st}")
            src_st = ShapeTracker.from_shape(lb.srcs[0].shape)
            return LazyOp(lb.op, (self.build(lb.srcs[0], src_st),), lb.arg)
        return LazyOp(lb.op, tuple(self.build(s, st) for s in lb.srcs), lb.arg)
