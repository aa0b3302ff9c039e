"""The Linearizer: a Kernel's ast lowered to a linear list of UOps, with index and validity expressions from the
ShapeTrackers. Target capabilities arrive as LinearizerOptions. Imports dtype, helpers, ops, shape and codegen.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specgrad.codegen.kernel import Kernel, Opt, check_int_size
from specgrad.codegen.opts import PARALLEL_MIN_WORK, choose_opts, vector_width
from specgrad.codegen.uops import UOp, UOps
from specgrad.dtype import DType, dtypes
from specgrad.helpers import prod
from specgrad.ops import BinaryOps, BufferOps, LazyOp, ReduceOps, TernaryOps, UnaryOps
from specgrad.shape.symbolic import Node, NumNode, Variable, sint, sym_and, sym_lt


@dataclass(frozen=True)
class LinearizerOptions:
    """Target capabilities. global_dims = 0: loop over the output axes (C); n > 0: up to n hardware global ids
    (OpenCL). optimize: choose opts per kernel (codegen/opts.py). vector_bytes: the widest vector type worth using
    (0: none). threads: the first output loop may be split across threads (C). work_groups: a GPU's work-group
    limits, where kernels may take work-group shapes and local-memory tiles (None: the runtime picks group sizes).
    accumulators: a register tile's most accumulators, as measured on the CPU (0: by register count)."""

    global_dims: int = 0
    optimize: bool = False
    vector_bytes: int = 0
    threads: bool = False
    work_groups: WorkGroups | None = None
    accumulators: int = 0


@dataclass(frozen=True)
class WorkGroups:
    """What a GPU's queries say about its work-groups, for kernels that share loads through local memory (a CPU
    OpenCL device has none of this: its caches do that work). max_items: work items per group; local_bytes: local
    memory per group; compute_units: groups that run at once, at least."""

    max_items: int
    local_bytes: int
    compute_units: int


@dataclass(frozen=True)
class Program:
    """A linearized kernel: what the renderer prints and the runtime launches."""

    name: str
    uops: tuple[UOp, ...]
    buffers: tuple[tuple[int, DType], ...]  # (MemBuffer idx, dtype) in argument order; 0 is the output
    vars: tuple[Variable, ...]  # int arguments after the buffers, in this order
    global_size: tuple[sint, ...] | None  # launch size per global id (None: the kernel loops itself)
    output_shape: tuple[sint, ...]  # the output loops after merging and opts (what DEBUG=2 shows for C kernels)
    opts: tuple[Opt, ...] = ()  # the opts applied, for DEBUG output
    local_size: tuple[int, ...] | None = None  # the work-group shape it needs (None: any the runtime picks)


def linearize(ast: LazyOp, opts: LinearizerOptions, kernel_opts: Sequence[Opt] | None = None) -> Program:
    """Lower `ast`; `kernel_opts` overrides the opts chosen for the target (used by tests and searches)."""
    k = Kernel.from_ast(ast)
    if kernel_opts is None:
        kernel_opts = choose_opts(k, opts) if opts.optimize else ()
    for opt in kernel_opts:
        if opt.op == "VECTOR" and vector_width(k, opt.amount * k.ast.arg.dtype.itemsize) != opt.amount:
            raise ValueError(f"{opt}: this kernel's ops or dtypes have no vector form")
        k = k.apply(opt)
    return _Linearizer(k, opts, tuple(kernel_opts)).run()


def reduce_identity(op: ReduceOps, dtype: DType) -> Any:
    if op is ReduceOps.SUM:
        return False if dtype == dtypes.bool else 0.0 if dtypes.is_float(dtype) else 0
    if dtypes.is_float(dtype):
        return -math.inf
    return False if dtype == dtypes.bool else int(np.iinfo(dtype.np).min)


def alu_dtype(op: Any, srcs: list[UOp], arg: Any = None) -> DType:
    if op is UnaryOps.CAST:
        return arg
    if op is BinaryOps.CMPLT:
        return dtypes.bool
    return srcs[1].dtype if op is TernaryOps.WHERE else srcs[-1].dtype  # type: ignore[return-value]


def _key(arg: Any) -> Any:
    # NOTE: -0.0 == 0.0 and nan != nan, so constants are compared by their repr
    if isinstance(arg, tuple):
        return tuple(_key(a) for a in arg)
    return ("float", repr(arg)) if isinstance(arg, float) else arg


class _Linearizer:
    """Loops for the loop axes; every other value is made once per point of the expanded axes (a dict axis ->
    position), and as a vector when the kernel has a vector axis and the value varies along it."""

    def __init__(self, k: Kernel, opts: LinearizerOptions, kernel_opts: tuple[Opt, ...]):
        self.k, self.opts, self.kernel_opts = k, opts, kernel_opts
        self.uops: list[UOp] = []
        self.cache: dict[tuple, UOp] = {}
        self.globals: dict[int, UOp] = {}
        self.reduce_values: dict[tuple, UOp] = {}
        unrolled = [(a, kind) for a, kind in enumerate(k.expanded, k.first_expanded) if a != k.vector_axis]
        self.upcast_axes = [a for a, kind in unrolled if kind == "upcast"]
        self.unroll_axes = [a for a, kind in unrolled if kind == "unroll"]
        self.width = k.full_shape[k.vector_axis] if k.vector_axis is not None else 1
        self.strides = [k.strides(i) for i in range(len(k.sts))] if k.expanded else []
        self.base_index: dict[tuple, tuple[Node, Node]] = {}
        self.staged = k.staged_loads()  # load -> the axes its local-memory copy spans
        self.locals: dict[int, UOp] = {}  # load -> its DEFINE_LOCAL
        self.local_size: tuple[int, ...] | None = None
        self.in_reduce = False  # lowering the reduce's source, where staged loads read local memory

    def uop(self, uop: UOps, dtype: DType | None, vin: tuple[UOp, ...] = (), arg: Any = None, width: int = 1) -> UOp:
        key = (uop, dtype, tuple(id(v) for v in vin), _key(arg), width)
        # NOTE: a value read from an accumulator changes with each ASSIGN to it, so it is never reused
        reuse = uop in (UOps.LOAD, UOps.CONST, UOps.ALU, UOps.DEFINE_GLOBAL, UOps.VECTORIZE)
        if reuse and not any(v.uop is UOps.DEFINE_ACC for v in vin) and key in self.cache:
            return self.cache[key]
        ret = UOp(uop, dtype, vin, arg, width)
        self.uops.append(ret)
        self.cache[key] = ret
        return ret

    def run(self) -> Program:
        k = self.k
        for st in k.sts:
            check_int_size(st)
        buffers = sorted({(x.arg.idx, x.arg.dtype) for x in k.bufops if x.op is not BufferOps.CONST})
        for idx, dtype in buffers:
            self.globals[idx] = self.uop(UOps.DEFINE_GLOBAL, dtype, (), (idx, dtype))
        variables = tuple(k.ast.vars())
        for v in variables:
            self.uop(UOps.DEFINE_VAR, dtypes.int32, (), v)
        group = prod(k.full_shape[k.first_local : k.first_reduce])
        for i, axes in self.staged.items():
            self.locals[i] = self.uop(UOps.DEFINE_LOCAL, k.bufops[i].arg.dtype, (), (i, k.copy_rounds(axes) * group))
        out_idxs, loops, global_size = self._global_indices()
        if k.reduceop is not None:
            self._reduce(out_idxs)
        loop_idxs = out_idxs + [NumNode(0)] * len(k.reduce_shape)
        vector_out = k.vector_axis is not None and k.expanded[k.vector_axis - k.first_expanded] == "upcast"
        for point in _points(k, self.upcast_axes):
            memo: dict[int, UOp] = {}
            value = self._lower(k.ast.src[0], loop_idxs, point, memo)
            if vector_out and value.width == 1:
                value = self.uop(UOps.VECTORIZE, value.dtype, (value,) * self.width, None, self.width)
            if vector_out and self.strides[0][k.vector_axis] != 1:  # type: ignore[index]
                for lane in range(self.width):  # NOTE: the output is not contiguous along the lanes
                    idx, _ = self._index(0, loop_idxs, point, lane)
                    self.uop(UOps.STORE, None, (self.globals[0], self.uop(UOps.LANE, value.dtype, (value,), lane)), idx)
                continue
            idx, _ = self._index(0, loop_idxs, point, 0)
            self.uop(UOps.STORE, None, (self.globals[0], value), idx, self.width if vector_out else 1)
        for loop in reversed(loops):
            self._end_loop(loop)
        return Program(k.name(), tuple(self.uops), tuple(buffers), variables, global_size, k.output_shape,
                       self.kernel_opts, self.local_size)  # fmt: skip

    # *** loops and ids ***

    def _loop(self, name: str, size: sint, parallel: bool = False) -> tuple[Node, UOp | None]:
        if isinstance(size, int) and size == 1:
            return NumNode(0), None
        var = Variable(name, 0, (size if isinstance(size, int) else size.max) - 1)
        return var, self.uop(UOps.LOOP, None, (), (var, size, parallel))

    def _end_loop(self, loop: UOp) -> None:
        self.uop(UOps.ENDLOOP, None, (loop,))
        # NOTE: values made inside the loop are out of scope after it
        start = next(i for i, u in enumerate(self.uops) if u is loop)
        inside = {id(u) for u in self.uops[start:]}
        self.cache = {key: u for key, u in self.cache.items() if id(u) not in inside}

    def _global_indices(self) -> tuple[list[Node], list[UOp], tuple[sint, ...] | None]:
        shape = self.k.output_shape
        if not self.opts.global_dims:
            work = prod(s if isinstance(s, int) else s.max for s in self.k.full_shape)
            parallel = self.opts.threads and work >= PARALLEL_MIN_WORK
            pairs = [self._loop(f"_gidx{i}", s, parallel and i == 0) for i, s in enumerate(shape)]
            return [v for v, _ in pairs], [u for _, u in pairs if u is not None], None
        return self._specials(shape)

    def _specials(self, shape: tuple[sint, ...]) -> tuple[list[Node], list[UOp], tuple[sint, ...]]:
        """GPU ids: id 0 walks the last axis; with more axes than ids, the leading axes share the last id. A kernel
        with local axes takes them from the local ids (the last one on id 0) and its other axes from the work-group
        ids the same way, so hardware dimension d launches groups_d * local_d items."""
        n, first_local = self.opts.global_dims, self.k.first_local
        group_idxs, groups = self._ids("global" if not self.k.local_dims else "group", shape[:first_local], n)
        if not self.k.local_dims:
            return group_idxs, [], groups
        local_idxs, local = self._ids("local", shape[first_local:], n)
        self.local_size = tuple(int(s) for s in local) + (1,) * (len(groups) - len(local))
        groups = tuple(g * size for g, size in itertools.zip_longest(groups, self.local_size, fillvalue=1))
        return group_idxs + local_idxs, [], groups

    def _ids(self, kind: str, shape: tuple[sint, ...], n: int) -> tuple[list[Node], tuple[sint, ...]]:
        """One index per axis of `shape` from hardware ids of `kind` (global, group or local), and the size each id
        walks, id 0 first."""
        own = list(shape[-(n - 1) :]) if n > 1 and len(shape) > n else list(shape)
        lead = list(shape[: len(shape) - len(own)])
        sizes = ([prod(lead)] if lead else []) + own
        ids: list[Node] = []
        for axis, size in enumerate(reversed(sizes)):
            if isinstance(size, int) and size == 1:
                ids.append(NumNode(0))
                continue
            var = Variable(f"_{kind[0]}idx{axis}", 0, (size if isinstance(size, int) else size.max) - 1)
            self.uop(UOps.SPECIAL, dtypes.int32, (), (kind, axis, var))
            ids.append(var)
        ids = ids[::-1]
        idxs: list[Node] = []
        if lead:
            flat, rest = ids[0], lead
            for i, s in enumerate(rest):
                stride = prod(rest[i + 1 :])
                idxs.append((flat // stride) % s if i else flat // stride)
            ids = ids[1:]
        return idxs + ids, tuple(reversed(sizes)) if sizes else (1,)

    # *** the reduce loop ***

    def _reduce(self, out_idxs: list[Node]) -> None:
        """One accumulator per point of the upcast axes; the unrolled reduce points add into it in order."""
        k = self.k
        op: ReduceOps = k.reduceop.op  # type: ignore[union-attr]
        src = k.reduceop.src[0]  # type: ignore[union-attr]
        dtype = self._dtype_of(src)
        vector_reduce = k.vector_axis is not None and k.expanded[k.vector_axis - k.first_expanded] == "unroll"
        acc_points = list(_points(k, self.upcast_axes))
        accs = {_pkey(p): self.uop(UOps.DEFINE_ACC, dtype, (), reduce_identity(op, dtype), self.width)
                for p in acc_points}  # fmt: skip
        pairs = [self._loop(f"_ridx{i}", s) for i, s in enumerate(k.reduce_shape[:-1])]
        if self.staged:
            self._stage(out_idxs + [v for v, _ in pairs])
        pairs += [self._loop(f"_ridx{len(pairs)}", s) for s in k.reduce_shape[-1:]]
        # NOTE: the accumulators are defined before their loops, so move them there
        first_loop = next((u for _, u in pairs if u is not None), None)
        for acc in accs.values():
            self.uops.remove(acc)
            self.uops.insert(self.uops.index(first_loop) if first_loop is not None else len(self.uops), acc)
        idxs = out_idxs + [v for v, _ in pairs]
        self.in_reduce = True
        combine = BinaryOps.ADD if op is ReduceOps.SUM else BinaryOps.MAX
        # NOTE: a sum of products accumulates with one multiply-add (fused where the hardware has it, as BLAS does)
        fused = op is ReduceOps.SUM and src.op is BinaryOps.MUL and dtype in (dtypes.float32, dtypes.float64)
        for up in acc_points:
            acc = accs[_pkey(up)]
            for un in _points(k, self.unroll_axes):
                memo: dict[int, UOp] = {}
                if fused:
                    a, b = (self._lower(s, idxs, {**up, **un}, memo) for s in src.src)
                    new = self.uop(UOps.ALU, dtype, (a, b, acc), TernaryOps.MULACC, acc.width)
                else:
                    value = self._lower(src, idxs, {**up, **un}, memo)
                    new = self.uop(UOps.ALU, dtype, (acc, value), combine, acc.width)
                self.uop(UOps.ASSIGN, dtype, (acc, new))
        self.in_reduce = False
        for _, loop in reversed(pairs):
            if loop is not None:
                self._end_loop(loop)
        for up in acc_points:
            acc = accs[_pkey(up)]
            self.reduce_values[_pkey(up)] = self.uop(UOps.HORIZONTAL, dtype, (acc,), combine) if vector_reduce else acc

    def _stage(self, idxs: list[Node]) -> None:
        """Copy each staged load's values for this step of the outer reduce loops (`idxs`: the output ids, then the
        outer reduce loops) into its local memory, each of the work-group's items copying one value per round (in
        the last round, those past the end copy nothing); barriers keep the copy from overwriting values still being
        read, and the reads from starting before it is done."""
        k = self.k
        local_axes = list(range(k.first_local, k.first_reduce))
        group = prod(k.full_shape[a] for a in local_axes)
        item = sum((idxs[a] * prod(k.full_shape[b] for b in local_axes[j + 1 :]) for j, a in enumerate(local_axes)),
                   start=NumNode(0))  # fmt: skip
        self.uop(UOps.BARRIER, None)
        for i, axes in self.staged.items():
            sizes = [k.full_shape[a] for a in axes]
            rounds, loop = self._loop(f"_sidx{i}", k.copy_rounds(axes))
            flat = rounds * group + item
            full: list[Node] = [*idxs[: k.first_local], *[NumNode(0)] * (len(k.full_shape) - k.first_local)]
            full[k.first_reduce : len(idxs)] = idxs[k.first_reduce :]
            for j, a in enumerate(axes):
                inner = prod(sizes[j + 1 :])
                full[a] = (flat // inner) % sizes[j] if j else flat // inner
            st = k.sts[i]
            idx, valid = st.expr_idxs(_st_idxs(st.shape, full))
            value = self._scalar_load(k.bufops[i], idx, sym_and([valid, sym_lt(flat, prod(sizes))]), 1)
            self.uop(UOps.STORE, None, (self.locals[i], value), flat)
            if loop is not None:
                self._end_loop(loop)
        self.uop(UOps.BARRIER, None)

    def _local_index(self, i: int, idxs: list[Node], point: dict[int, int]) -> Node:
        """Where staged load i's value at the loop indices and expanded point is in its local memory."""
        axes, ret, inner = self.staged[i], NumNode(0), 1
        for a in reversed(axes):
            ret = ret + (point[a] if a >= self.k.first_expanded else idxs[a]) * inner
            inner *= self.k.full_shape[a]  # type: ignore[assignment]
        return ret

    def _dtype_of(self, x: LazyOp) -> DType:
        if x.op in (BufferOps.LOAD, BufferOps.CONST):
            return x.arg.dtype
        if x.op is UnaryOps.CAST:
            return x.arg
        if x.op is BinaryOps.CMPLT:
            return dtypes.bool
        return self._dtype_of(x.src[1] if x.op is TernaryOps.WHERE else x.src[-1])

    # *** the ast, node by node ***

    def _index(self, i: int, idxs: list[Node], point: dict[int, int], lane: int) -> tuple[Node, Node]:
        """Buffer i's (index, validity) at the loop indices, a point of the expanded axes and a vector lane."""
        at = {**point, self.k.vector_axis: lane} if self.k.vector_axis is not None else point
        steps = [self.strides[i][a] for a in at] if at else []
        if all(isinstance(s, int) for s in steps):
            # NOTE: the buffer moves a fixed step along each expanded axis, and its validity does not change there
            # (real_strides), so every point is the index at position 0 plus an offset: one index expression per
            # buffer instead of one per unrolled element
            key = (i, tuple(idxs))
            if key not in self.base_index:
                self.base_index[key] = self._full_index(i, idxs, {})
            idx, valid = self.base_index[key]
            offset = sum(s * at[a] for s, a in zip(steps, at))  # type: ignore[operator]
            return (idx + offset if offset else idx), valid
        return self._full_index(i, idxs, at)

    def _full_index(self, i: int, idxs: list[Node], at: dict[int, int]) -> tuple[Node, Node]:
        full = list(idxs) + [NumNode(0)] * len(self.k.expanded)
        for axis, pos in at.items():
            full[axis] = NumNode(pos)
        st = self.k.sts[i]
        return st.expr_idxs(_st_idxs(st.shape, full))

    def _lower(self, x: LazyOp, idxs: list[Node], point: dict[int, int], memo: dict[int, UOp]) -> UOp:
        # NOTE: memo is keyed by identity: LazyOp equality takes 0.0 for -0.0 (ConstBuffer compares floats with ==);
        # equal subtrees that are distinct objects still become one UOp through the uop cache
        if id(x) in memo:
            return memo[id(x)]
        if x.op in ReduceOps:
            ret = self.reduce_values[_pkey({a: point[a] for a in self.upcast_axes})]
        elif x.op in (BufferOps.LOAD, BufferOps.CONST):
            ret = self._load(x, idxs, point)
        else:
            srcs = [self._lower(s, idxs, point, memo) for s in x.src]
            width = max(s.width for s in srcs)
            ret = self.uop(UOps.ALU, alu_dtype(x.op, srcs, x.arg), tuple(srcs), x.op, width)
        memo[id(x)] = ret
        return ret

    def _load(self, x: LazyOp, idxs: list[Node], point: dict[int, int]) -> UOp:
        """A scalar where the value is the same in every lane, one vector load where the lanes are consecutive
        elements, else a vector gathered lane by lane."""
        i = self.k.bufops.index(x)
        if self.in_reduce and i in self.locals:
            return self.uop(UOps.LOAD, x.arg.dtype, (self.locals[i],), (self._local_index(i, idxs, point), NumNode(1)))
        stride = self.strides[i][self.k.vector_axis] if self.width > 1 else 0  # type: ignore[index]
        if stride == 0 or stride == 1:
            idx, valid = self._index(i, idxs, point, 0)
            return self._scalar_load(x, idx, valid, self.width if stride == 1 else 1)
        lanes = tuple(self._scalar_load(x, *self._index(i, idxs, point, lane), 1) for lane in range(self.width))
        return self.uop(UOps.VECTORIZE, x.arg.dtype, lanes, None, self.width)

    def _scalar_load(self, x: LazyOp, idx: Node, valid: Node, width: int) -> UOp:
        if x.op is BufferOps.CONST or valid == 0:
            val = x.arg.val if valid != 0 else reduce_identity(ReduceOps.SUM, x.arg.dtype)
            return self.uop(UOps.CONST, x.arg.dtype, (), (val, valid))
        return self.uop(UOps.LOAD, x.arg.dtype, (self.globals[x.arg.idx],), (idx, valid), width)


def _points(k: Kernel, axes: list[int]) -> list[dict[int, int]]:
    """Every combination of positions along the expanded `axes` (one empty point when there are none)."""
    sizes = [range(k.full_shape[a]) for a in axes]  # type: ignore[arg-type]
    return [dict(zip(axes, pos)) for pos in itertools.product(*sizes)]


def _pkey(point: dict[int, int]) -> tuple:
    return tuple(sorted(point.items()))


def _st_idxs(shape: tuple[sint, ...], idxs: list[Node]) -> list[Node]:
    """The kernel's indices for a tracker: 0 on the axes where the tracker has size 1."""
    return [NumNode(0) if isinstance(s, int) and s == 1 else i for s, i in zip(shape, idxs)]
