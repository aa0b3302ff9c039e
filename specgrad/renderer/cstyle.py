"""One C-style renderer for a linearized Program; the C (clang/cc) and OpenCL C dialects are data (CDialect).

Nothing from a user reaches the source: buffers are data0.., shape variables var0.., values alu0.., and numbers are
printed exactly (hex floats, INFINITY, NAN). Imports dtype, ops, shape and codegen.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from specgrad.codegen.linearizer import Program
from specgrad.codegen.uops import UOp, UOps
from specgrad.dtype import DType, dtypes
from specgrad.ops import BinaryOps, TernaryOps, UnaryOps
from specgrad.shape.symbolic import AndNode, DivNode, LtNode, ModNode, MulNode, Node, NumNode, SumNode, Variable

_INT_NAMES = {
    dtypes.int8: "char", dtypes.uint8: "unsigned char", dtypes.int16: "short", dtypes.uint16: "unsigned short",
    dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long", dtypes.uint64: "unsigned long long",
}  # fmt: skip
_CL_NAMES = {
    dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort",
    dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong",
}  # fmt: skip

# NOTE: C has no portable half type (clang 14 on x86 refuses _Float16), so C kernels store half as its 16 bits,
# compute in float and round every half result back to half precision, which matches numpy's float16 arithmetic
# (float has 2*11+2 significand bits, so rounding twice is exact for + - * / sqrt). A double is first rounded to
# float with round-to-odd (sg_d2f_odd), since double -> float -> half rounding would go wrong at half's ties.
HALF_HELPERS = """static inline float sg_h2f(unsigned short h) {
  unsigned int s = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  union { unsigned int u; float f; } r;
  if (e == 0) { float f = (float)m * 0x1p-24f; return s ? -f : f; }
  r.u = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112u) << 23) | (m << 13));
  return r.f;
}
static inline unsigned short sg_f2h(float f) {
  union { float f; unsigned int u; } x = { f };
  unsigned int s = (x.u >> 16) & 0x8000u, a = x.u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u);
  if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);
  if (a < 0x38800000u) {
    union { unsigned int u; float f; } y = { a };
    return (unsigned short)(s | (unsigned int)rintf(y.f * 0x1p24f));
  }
  a -= 0x38000000u;
  return (unsigned short)(s | ((a + 0xfffu + ((a >> 13) & 1u)) >> 13));
}
static inline float sg_rh(float f) { return sg_h2f(sg_f2h(f)); }
static inline float sg_d2f_odd(double d) {
  union { float f; unsigned int u; } x = { (float)d };
  if ((double)x.f == d || d != d) return x.f;
  if (fabs((double)x.f) > fabs(d)) x.u -= 1u;
  x.u |= 1u;
  return x.f;
}
"""


@dataclass(frozen=True)
class CDialect:
    """What differs between C and OpenCL C: qualifiers, type names, math function names, the global id."""

    name: str
    kernel_prefix: str
    buffer_qualifier: str
    type_names: dict[DType, str]
    float_suffix: dict[DType, str]  # math function suffix per float dtype: expf vs exp
    global_id: str  # format with {axis}; unused when the kernel loops itself
    half_as_bits: bool  # store half as 16 bits and compute in float (C), or use the native half type
    no_contract: str  # the pragma that stops a*b+c becoming one fused multiply-add (it must round twice)
    header: str = ""
    extensions: dict[DType, str] = field(default_factory=dict)  # a pragma needed when a dtype is used

    def storage_type(self, dtype: DType) -> str:
        return "unsigned short" if dtype == dtypes.float16 and self.half_as_bits else self.type_names[dtype]

    def value_type(self, dtype: DType) -> str:
        return "float" if dtype == dtypes.float16 and self.half_as_bits else self.type_names[dtype]


C_DIALECT = CDialect(
    name="C",
    kernel_prefix="",
    buffer_qualifier="",
    type_names={dtypes.bool: "unsigned char", dtypes.float16: "unsigned short", dtypes.float32: "float",
                dtypes.float64: "double", **_INT_NAMES},
    float_suffix={dtypes.float16: "f", dtypes.float32: "f", dtypes.float64: ""},
    global_id="",
    half_as_bits=True,
    no_contract="#pragma STDC FP_CONTRACT OFF",
    header="#include <math.h>\n",
)  # fmt: skip

OPENCL_DIALECT = CDialect(
    name="OpenCL",
    kernel_prefix="__kernel ",
    buffer_qualifier="__global ",
    type_names={dtypes.bool: "uchar", dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double",
                **_CL_NAMES},
    float_suffix={dtypes.float16: "", dtypes.float32: "", dtypes.float64: ""},
    global_id="(int)get_global_id({axis})",
    half_as_bits=False,
    no_contract="#pragma OPENCL FP_CONTRACT OFF",
    extensions={dtypes.float16: "#pragma OPENCL EXTENSION cl_khr_fp16 : enable",
                dtypes.float64: "#pragma OPENCL EXTENSION cl_khr_fp64 : enable"},
)  # fmt: skip


# *** numbers, exactly ***


def render_const(val: float | int | bool, dtype: DType, d: CDialect) -> str:
    text = _literal(val, dtype, d)
    # NOTE: a bare negative literal after a minus would read as `--`, so negative numbers come parenthesized
    return f"({text})" if text.startswith("-") else text


def _literal(val: float | int | bool, dtype: DType, d: CDialect) -> str:
    if dtype == dtypes.bool:
        return "1" if val else "0"
    if dtypes.is_float(dtype):
        x = float(np.array(val).astype(dtype.np))
        suffix = "f" if dtype != dtypes.float64 else ""
        if math.isnan(x):
            text = "NAN"
        elif math.isinf(x):
            text = "INFINITY" if x > 0 else "-INFINITY"
        else:
            mantissa, exponent = x.hex().split("p")
            text = mantissa.rstrip("0").rstrip(".") + "p" + exponent + suffix
        return f"(({d.value_type(dtype)}){text})" if dtype != dtypes.float32 else text
    x = int(np.array(val).astype(dtype.np))
    if dtypes.is_unsigned(dtype):
        return f"{x}u" + ("ll" if dtype.itemsize == 8 else "")
    if x == int(np.iinfo(dtype.np).min):  # NOTE: -2147483648 is unary minus on an out-of-range literal in C
        return f"{x + 1}{'ll' if dtype.itemsize == 8 else ''}-1"
    return f"{x}ll" if dtype.itemsize == 8 else str(x)


# *** index expressions ***


def _floor_div(n: DivNode, ops: dict, ctx: dict) -> str:
    a, b = n.a.render(ops, ctx), n.b
    # NOTE: C division truncates; index math wants floor, which differs only for a negative numerator
    return f"({a}/{b})" if n.a.min >= 0 else f"((({a})<0)?((({a})-{b - 1})/{b}):(({a})/{b}))"


def _floor_mod(n: ModNode, ops: dict, ctx: dict) -> str:
    a, b = n.a.render(ops, ctx), n.b
    return f"({a}%{b})" if n.a.min >= 0 else f"((({a})%{b}+{b})%{b})"


def _variable(n: Variable, ops: dict, ctx: dict) -> str:
    if n.unbound not in ctx:
        raise RuntimeError(f"internal error: variable {n.expr} has no name in this kernel")
    return ctx[n.unbound]


_INDEX_OPS: dict[type, Callable] = {
    NumNode: lambda n, ops, ctx: str(n.b),
    Variable: _variable,
    MulNode: lambda n, ops, ctx: f"({n.a.render(ops, ctx)}*{n.b if isinstance(n.b, int) else n.b.render(ops, ctx)})",
    DivNode: _floor_div,
    ModNode: _floor_mod,
    LtNode: lambda n, ops, ctx: f"({n.a.render(ops, ctx)}<{n.b if isinstance(n.b, int) else n.b.render(ops, ctx)})",
    SumNode: lambda n, ops, ctx: "(" + "+".join(x.render(ops, ctx) for x in n.nodes) + ")",
    AndNode: lambda n, ops, ctx: "(" + "&&".join(x.render(ops, ctx) for x in n.nodes) + ")",
}


def render_index(node: Node | int, names: dict[Variable, str]) -> str:
    return str(node) if isinstance(node, int) else node.render(_INDEX_OPS, names)


# *** ALU ops: one entry per op ***


def _math(fn: str) -> Callable[[list[str], DType, DType, CDialect], str]:
    return lambda xs, dt, src, d: f"{fn}{d.float_suffix[dt]}({xs[0]})"


def _int_div(op: str) -> Callable[[list[str], DType, DType, CDialect], str]:
    def render(xs: list[str], dt: DType, src: DType, d: CDialect) -> str:
        a, b = xs
        if dtypes.is_float(dt):
            return f"({a}/{b})" if op == "/" else f"fmod{d.float_suffix[dt]}({a},{b})"
        # NOTE: x/0 and INT_MIN/-1 trap in C; the reference (CPU) gives 0 for x/0 and wraps INT_MIN/-1
        t = d.value_type(dt)
        if dtypes.is_unsigned(dt) or dt.itemsize < 8:
            wide = t if dtypes.is_unsigned(dt) else d.type_names[dtypes.int64]
            return f"(({b})==0?0:({t})(({wide}){a}{op}({wide}){b}))"
        neg = f"({t})(({d.type_names[dtypes.uint64]})0-({d.type_names[dtypes.uint64]}){a})" if op == "/" else "0"
        return f"(({b})==0?0:({b})==-1?{neg}:({a}{op}{b}))"

    return render


def _recip(xs: list[str], dt: DType, src: DType, d: CDialect) -> str:
    one = render_const(1, dt, d)
    return f"({one}/{xs[0]})" if dtypes.is_float(dt) else _int_div("/")([one, xs[0]], dt, src, d)


def _cast(xs: list[str], dt: DType, src: DType, d: CDialect) -> str:
    if dt == dtypes.float16 and src == dtypes.float64 and d.half_as_bits:
        return f"sg_d2f_odd({xs[0]})"  # NOTE: alu() rounds the float to half
    return f"({xs[0]}!=0)" if dt == dtypes.bool else f"(({d.value_type(dt)})({xs[0]}))"


def _mulacc(xs: list[str], dt: DType, src: DType, d: CDialect) -> str:
    # NOTE: the product is rounded on its own, as numpy's a*b+c; a half product is rounded to half
    prod_ = f"sg_rh({xs[0]}*{xs[1]})" if dt == dtypes.float16 and d.half_as_bits else f"({xs[0]}*{xs[1]})"
    return f"({prod_}+{xs[2]})"


def _max(xs: list[str], dt: DType, src: DType, d: CDialect) -> str:
    a, b = xs
    # NOTE: nan wins, as in numpy.maximum (fmax would drop it)
    return f"((({a})!=({a})||({a})>({b}))?({a}):({b}))" if dtypes.is_float(dt) else f"((({a})>({b}))?({a}):({b}))"


ALU_OPS: dict[object, Callable[[list[str], DType, DType, CDialect], str]] = {
    UnaryOps.EXP2: _math("exp2"),
    UnaryOps.LOG2: _math("log2"),
    UnaryOps.SIN: _math("sin"),
    UnaryOps.SQRT: _math("sqrt"),
    UnaryOps.RECIP: _recip,
    UnaryOps.NEG: lambda xs, dt, src, d: f"(!{xs[0]})" if dt == dtypes.bool else f"(-{xs[0]})",
    UnaryOps.CAST: _cast,
    BinaryOps.ADD: lambda xs, dt, src, d: f"({xs[0]}||{xs[1]})" if dt == dtypes.bool else f"({xs[0]}+{xs[1]})",
    BinaryOps.SUB: lambda xs, dt, src, d: f"({xs[0]}-{xs[1]})",
    BinaryOps.MUL: lambda xs, dt, src, d: f"({xs[0]}&&{xs[1]})" if dt == dtypes.bool else f"({xs[0]}*{xs[1]})",
    BinaryOps.DIV: _int_div("/"),
    BinaryOps.MOD: _int_div("%"),
    BinaryOps.MAX: _max,
    BinaryOps.CMPLT: lambda xs, dt, src, d: f"({xs[0]}<{xs[1]})",
    TernaryOps.WHERE: lambda xs, dt, src, d: f"({xs[0]}?{xs[1]}:{xs[2]})",
    TernaryOps.MULACC: _mulacc,
}


# *** the program ***


class _Renderer:
    def __init__(self, prg: Program, d: CDialect):
        self.prg, self.d = prg, d
        self.names: dict[int, str] = {}
        self.var_names: dict[Variable, str] = {v.unbound: f"var{i}" for i, v in enumerate(prg.vars)}
        self.lines: list[str] = []
        self.depth = 1
        self.counts: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return f"{prefix}{n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def idx(self, node: Node | int) -> str:
        return render_index(node, self.var_names)

    def load(self, u: UOp) -> str:
        (buf,), (idx, valid) = u.vin, u.arg
        read = f"{self.names[id(buf)]}[{self.idx(idx)}]"
        if u.dtype == dtypes.float16 and self.d.half_as_bits:
            read = f"sg_h2f({read})"
        if valid == 1:
            return read
        return f"({self.idx(valid)}?{read}:{render_const(0, u.dtype, self.d)})"

    def const(self, u: UOp) -> str:
        val, valid = u.arg
        text = render_const(val, u.dtype, self.d)
        return text if valid == 1 else f"({self.idx(valid)}?{text}:{render_const(0, u.dtype, self.d)})"

    def alu(self, u: UOp) -> str:
        vin = u.vin
        if u.arg is BinaryOps.MAX and vin[0].uop is UOps.CONST:
            vin = vin[::-1]  # NOTE: max is symmetric; the nan test belongs on the value that can be nan
        xs = [self.names[id(v)] for v in vin]
        expr = ALU_OPS[u.arg](xs, u.dtype, u.vin[0].dtype, self.d)
        return f"sg_rh({expr})" if u.dtype == dtypes.float16 and self.d.half_as_bits else expr

    def store(self, u: UOp) -> None:
        buf, value = u.vin
        val = self.names[id(value)]
        if value.dtype == dtypes.float16 and self.d.half_as_bits:
            val = f"sg_f2h({val})"
        self.emit(f"{self.names[id(buf)]}[{self.idx(u.arg)}] = {val};")

    def statement(self, u: UOp) -> None:
        d = self.d
        if u.uop is UOps.LOOP:
            var, end = u.arg
            name = self.var_names[var] = var.expr.lstrip("_")
            self.emit(f"for (int {name} = 0; {name} < {self.idx(end)}; {name}++) {{")
            self.depth += 1
        elif u.uop is UOps.ENDLOOP:
            self.depth -= 1
            self.emit("}")
        elif u.uop is UOps.SPECIAL:
            axis, var = u.arg
            name = self.var_names[var] = var.expr.lstrip("_")
            self.emit(f"int {name} = {d.global_id.format(axis=axis)};")
        elif u.uop is UOps.DEFINE_ACC:
            self.names[id(u)] = name = self.fresh("acc")
            self.emit(f"{d.value_type(u.dtype)} {name} = {render_const(u.arg, u.dtype, d)};")
        elif u.uop is UOps.CONST:
            self.names[id(u)] = self.const(u)
        elif u.uop in (UOps.LOAD, UOps.ALU):
            self.names[id(u)] = name = self.fresh("val" if u.uop is UOps.LOAD else "alu")
            self.emit(f"{d.value_type(u.dtype)} {name} = {self.load(u) if u.uop is UOps.LOAD else self.alu(u)};")
        elif u.uop is UOps.ASSIGN:
            self.emit(f"{self.names[id(u.vin[0])]} = {self.names[id(u.vin[1])]};")
        elif u.uop is UOps.STORE:
            self.store(u)

    def arguments(self) -> list[str]:
        d, args = self.d, []
        for u in self.prg.uops:
            if u.uop is UOps.DEFINE_GLOBAL:
                idx, dtype = u.arg
                self.names[id(u)] = f"data{idx}"
                const = "const " if idx else ""
                args.append(f"{d.buffer_qualifier}{const}{d.storage_type(dtype)}* restrict data{idx}")
        return args + [f"const int {self.var_names[v.unbound]}" for v in self.prg.vars]

    def render(self) -> str:
        args = self.arguments()
        for u in self.prg.uops:
            self.statement(u)
        used = {u.dtype for u in self.prg.uops if u.dtype is not None}
        pragmas = [self.d.extensions[t] for t in sorted(used) if t in self.d.extensions]
        if any(u.uop is UOps.ALU and u.arg is TernaryOps.MULACC for u in self.prg.uops):
            pragmas.append(self.d.no_contract)
        header = self.d.header + "".join(p + "\n" for p in pragmas)
        if dtypes.float16 in used and self.d.half_as_bits:
            header += HALF_HELPERS
        signature = f"{self.d.kernel_prefix}void {self.prg.name}({', '.join(args)}) {{"
        return header + "\n".join([signature, *self.lines, "}"]) + "\n"


def render(prg: Program, dialect: CDialect) -> str:
    """The source of one kernel function named prg.name."""
    return _Renderer(prg, dialect).render()
