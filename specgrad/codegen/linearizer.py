"""The Linearizer: a Kernel's ast lowered to a linear list of UOps, with index and validity expressions from the
ShapeTrackers. Target capabilities arrive as LinearizerOptions. Imports dtype, helpers, ops, shape and codegen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from specgrad.codegen.kernel import Kernel, check_int_size
from specgrad.codegen.uops import UOp, UOps
from specgrad.dtype import DType, dtypes
from specgrad.helpers import prod
from specgrad.ops import BinaryOps, BufferOps, LazyOp, ReduceOps, TernaryOps, UnaryOps
from specgrad.shape.symbolic import Node, NumNode, Variable, sint


@dataclass(frozen=True)
class LinearizerOptions:
    """global_dims = 0: loop over the output axes (C); n > 0: up to n hardware global ids (OpenCL)."""

    global_dims: int = 0


@dataclass(frozen=True)
class Program:
    """A linearized kernel: what the renderer prints and the runtime launches."""

    name: str
    uops: tuple[UOp, ...]
    buffers: tuple[tuple[int, DType], ...]  # (MemBuffer idx, dtype) in argument order; 0 is the output
    vars: tuple[Variable, ...]  # int arguments after the buffers, in this order
    global_size: tuple[sint, ...] | None  # launch size per global id (None: the kernel loops itself)
    output_shape: tuple[sint, ...]  # the output axes after merging (what DEBUG=2 shows for looping kernels)


def linearize(ast: LazyOp, opts: LinearizerOptions) -> Program:
    return _Linearizer(Kernel.from_ast(ast), opts).run()


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
    def __init__(self, k: Kernel, opts: LinearizerOptions):
        self.k, self.opts = k, opts
        self.uops: list[UOp] = []
        self.cache: dict[tuple, UOp] = {}
        self.globals: dict[int, UOp] = {}
        self.reduce_value: UOp | None = None

    def uop(self, uop: UOps, dtype: DType | None, vin: tuple[UOp, ...] = (), arg: Any = None) -> UOp:
        key = (uop, dtype, tuple(id(v) for v in vin), _key(arg))
        if uop in (UOps.LOAD, UOps.CONST, UOps.ALU, UOps.DEFINE_GLOBAL) and key in self.cache:
            return self.cache[key]
        ret = UOp(uop, dtype, vin, arg)
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
        out_idxs, loops, global_size = self._global_indices()
        reduce_value = self._reduce(out_idxs) if k.reduceop is not None else None
        post_idxs = out_idxs + [NumNode(0)] * len(k.reduce_shape)
        self.reduce_value = reduce_value
        value = self._lower(k.ast.src[0], post_idxs, {})
        idx, _ = k.sts[0].expr_idxs(_st_idxs(k.sts[0].shape, post_idxs))
        self.uop(UOps.STORE, None, (self.globals[0], value), idx)
        for loop in reversed(loops):
            self._end_loop(loop)
        return Program(k.name(), tuple(self.uops), tuple(buffers), variables, global_size, k.output_shape)

    # *** loops and ids ***

    def _loop(self, name: str, size: sint) -> tuple[Node, UOp | None]:
        if isinstance(size, int) and size == 1:
            return NumNode(0), None
        var = Variable(name, 0, (size if isinstance(size, int) else size.max) - 1)
        return var, self.uop(UOps.LOOP, None, (), (var, size))

    def _end_loop(self, loop: UOp) -> None:
        self.uop(UOps.ENDLOOP, None, (loop,))
        # NOTE: values made inside the loop are out of scope after it
        start = next(i for i, u in enumerate(self.uops) if u is loop)
        inside = {id(u) for u in self.uops[start:]}
        self.cache = {key: u for key, u in self.cache.items() if id(u) not in inside}

    def _global_indices(self) -> tuple[list[Node], list[UOp], tuple[sint, ...] | None]:
        shape = self.k.output_shape
        if not self.opts.global_dims:
            pairs = [self._loop(f"_gidx{i}", s) for i, s in enumerate(shape)]
            return [v for v, _ in pairs], [u for _, u in pairs if u is not None], None
        return self._specials(shape)

    def _specials(self, shape: tuple[sint, ...]) -> tuple[list[Node], list[UOp], tuple[sint, ...]]:
        """GPU ids: id 0 walks the last axis; with more axes than ids, the leading axes share the last id."""
        n = self.opts.global_dims
        own = list(shape[-(n - 1) :]) if n > 1 and len(shape) > n else list(shape)
        lead = list(shape[: len(shape) - len(own)])
        sizes = ([prod(lead)] if lead else []) + own
        ids: list[Node] = []
        for axis, size in enumerate(reversed(sizes)):
            if isinstance(size, int) and size == 1:
                ids.append(NumNode(0))
                continue
            var = Variable(f"_gidx{axis}", 0, (size if isinstance(size, int) else size.max) - 1)
            self.uop(UOps.SPECIAL, dtypes.int32, (), (axis, var))
            ids.append(var)
        ids = ids[::-1]
        idxs: list[Node] = []
        if lead:
            flat, rest = ids[0], lead
            for i, s in enumerate(rest):
                stride = prod(rest[i + 1 :])
                idxs.append((flat // stride) % s if i else flat // stride)
            ids = ids[1:]
        return idxs + ids, [], tuple(reversed(sizes)) if sizes else (1,)

    # *** the reduce loop ***

    def _reduce(self, out_idxs: list[Node]) -> UOp:
        k = self.k
        op: ReduceOps = k.reduceop.op  # type: ignore[union-attr]
        pairs = [self._loop(f"_ridx{i}", s) for i, s in enumerate(k.reduce_shape)]
        dtype = self._dtype_of(k.reduceop.src[0])  # type: ignore[union-attr]
        acc = self.uop(UOps.DEFINE_ACC, dtype, (), reduce_identity(op, dtype))
        # NOTE: the accumulator is defined before its loops, so move it there
        self.uops.remove(acc)
        first_loop = next((u for _, u in pairs if u is not None), None)
        self.uops.insert(self.uops.index(first_loop) if first_loop is not None else len(self.uops), acc)
        value = self._lower(k.reduceop.src[0], out_idxs + [v for v, _ in pairs], {})  # type: ignore[union-attr]
        combine = BinaryOps.ADD if op is ReduceOps.SUM else BinaryOps.MAX
        self.uop(UOps.ASSIGN, dtype, (acc, self.uop(UOps.ALU, dtype, (acc, value), combine)))
        for _, loop in reversed(pairs):
            if loop is not None:
                self._end_loop(loop)
        return acc

    def _dtype_of(self, x: LazyOp) -> DType:
        if x.op in (BufferOps.LOAD, BufferOps.CONST):
            return x.arg.dtype
        if x.op is UnaryOps.CAST:
            return x.arg
        if x.op is BinaryOps.CMPLT:
            return dtypes.bool
        return self._dtype_of(x.src[1] if x.op is TernaryOps.WHERE else x.src[-1])

    # *** the ast, node by node ***

    def _lower(self, x: LazyOp, idxs: list[Node], memo: dict[int, UOp]) -> UOp:
        # NOTE: memo is keyed by identity: LazyOp equality takes 0.0 for -0.0 (ConstBuffer compares floats with ==);
        # equal subtrees that are distinct objects still become one UOp through the uop cache
        if id(x) in memo:
            return memo[id(x)]
        if x.op in ReduceOps:
            ret = self.reduce_value  # NOTE: a kernel holds one reduce, lowered before the rest
        elif x.op in (BufferOps.LOAD, BufferOps.CONST):
            st = self.k.sts[self.k.bufops.index(x)]
            idx, valid = st.expr_idxs(_st_idxs(st.shape, idxs))
            if x.op is BufferOps.CONST or valid == 0:
                val = x.arg.val if valid != 0 else reduce_identity(ReduceOps.SUM, x.arg.dtype)
                ret = self.uop(UOps.CONST, x.arg.dtype, (), (val, valid))
            else:
                ret = self.uop(UOps.LOAD, x.arg.dtype, (self.globals[x.arg.idx],), (idx, valid))
        else:
            srcs = [self._lower(s, idxs, memo) for s in x.src]
            ret = self.uop(UOps.ALU, alu_dtype(x.op, srcs, x.arg), tuple(srcs), x.op)
        memo[id(x)] = ret
        return ret


def _st_idxs(shape: tuple[sint, ...], idxs: list[Node]) -> list[Node]:
    """The kernel's indices for a tracker: 0 on the axes where the tracker has size 1."""
    return [NumNode(0) if isinstance(s, int) and s == 1 else i for s, i in zip(shape, idxs)]
