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
    native_vectors: bool = False  # OpenCL's floatN types, vloadN/vstoreN and math on vectors; else GCC vector types

    def vector_type(self, dtype: DType, width: int) -> str:
        name = self.type_names[dtype]
        return f"{name}{width}" if self.native_vectors else f"sg_{name}{width}"

    def broadcast(self, dtype: DType, width: int, x: str) -> str:
        vt = self.vector_type(dtype, width)
        # NOTE: an initializer of copies, not {}+x: adding +0.0 is not a no-op (-0.0 + 0.0 is +0.0), so it would cost
        # an add before every broadcast
        return f"(({vt})({x}))" if self.native_vectors else f"(({vt}){{{','.join([x] * width)}}})"

    def vectorize(self, dtype: DType, width: int, xs: list[str]) -> str:
        vt = self.vector_type(dtype, width)
        return f"(({vt})({','.join(xs)}))" if self.native_vectors else f"(({vt}){{{','.join(xs)}}})"

    def lane(self, x: str, i: int) -> str:
        return f"{x}.s{i:x}" if self.native_vectors else f"{x}[{i}]"

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
    native_vectors=True,
)  # fmt: skip


# *** vector helpers for C (GCC vector types: both gcc and clang have them) ***

PARALLEL_GLOBAL = "sg_parallel_fn sg_parallel_for = 0;"
PARALLEL_HEADER = f"""typedef void (*sg_body_fn)(void*, int, int);
typedef void (*sg_parallel_fn)(sg_body_fn, void*, int);
{PARALLEL_GLOBAL} /* set by the runtime after loading; unset: one thread */"""


def c_vector_helpers(dtype: DType, width: int, maths: set[str]) -> list[str]:
    """The typedefs and helpers one C kernel needs for vectors of `width` `dtype`s (each its own header chunk)."""
    name, size = C_DIALECT.type_names[dtype], dtype.itemsize * width
    vt, mask = f"sg_{name}{width}", f"sg_mask_{name}{width}"
    mask_name = "int" if dtype.itemsize == 4 else "long long"
    chunks = [
        f"typedef {name} {vt} __attribute__((vector_size({size})));\n"
        f"typedef {mask_name} {mask} __attribute__((vector_size({size})));",
        # NOTE: memcpy is how C reads a vector at any alignment; compilers make it one unaligned load
        f"static inline {vt} {vt}_load(const {name}* p) {{ {vt} v; __builtin_memcpy(&v, p, sizeof(v)); return v; }}\n"
        f"static inline void {vt}_store({name}* p, {vt} v) {{ __builtin_memcpy(p, &v, sizeof(v)); }}\n"
        # NOTE: nan wins, as in numpy.maximum
        f"static inline {vt} {vt}_max({vt} a, {vt} b) {{ {mask} m = (a != a) | (a > b); "
        f"return ({vt})((({mask})a & m) | (({mask})b & ~m)); }}",
        # NOTE: bools are bytes in memory; as a mask they are lanes of all ones or zeros, as comparisons give
        f"static inline {mask} {mask}_from_bytes(const unsigned char* p) {{ "
        f"unsigned char v __attribute__((vector_size({width}))); __builtin_memcpy(&v, p, sizeof(v)); "
        f"return __builtin_convertvector(v != 0, {mask}); }}",
    ]
    suffix = C_DIALECT.float_suffix[dtype]
    x86 = X86_VECTORS.get((dtype, width))
    for fn in sorted(maths):
        if dtype == dtypes.float32 and fn == "exp2":
            chunks.append(VECTOR_EXP2F.replace("VT", vt).replace("MT", mask))
        elif fn == "sqrt" and x86 is not None:
            # NOTE: libm's sqrt per lane is one scalar instruction each; the vector one rounds the same (correctly)
            guard, bits, kind = x86
            reg = f"__m{bits or 128}{'d' if kind == 'pd' else ''}"
            fallback = f"for (int i = 0; i < {width}; i++) x[i] = sqrt{suffix}(x[i]);\n  return x;"
            fast = f"return ({vt})_mm{bits}_sqrt_{kind}(({reg})x);"
            chunks.append(f"static inline {vt} {vt}_sqrt({vt} x) {{\n#if defined({guard})\n  {fast}\n#else\n"
                          f"  {fallback}\n#endif\n}}")  # fmt: skip
        elif fn == "hadd":
            chunks.append(_hadd(vt, name, width))
        elif fn == "fma":
            body = "  return a * b + c;"
            if x86 is not None:
                _, bits, kind = x86
                reg = f"__m{bits or 128}{'d' if kind == 'pd' else ''}"
                guard = "__AVX512F__" if bits == "512" else "__FMA__"
                fused = f"return ({vt})_mm{bits}_fmadd_{kind}(({reg})a, ({reg})b, ({reg})c);"
                body = f"#if defined({guard})\n  {fused}\n#else\n{body}\n#endif"
            chunks.append(f"static inline {vt} {vt}_fma({vt} a, {vt} b, {vt} c) {{\n{body}\n}}")
        else:
            chunks.append(f"static inline {vt} {vt}_{fn}({vt} x) {{ for (int i = 0; i < {width}; i++) "
                          f"x[i] = {fn}{suffix}(x[i]); return x; }}")  # fmt: skip
    return chunks


def _hadd(vt: str, name: str, width: int) -> str:
    """The sum of a vector's lanes as a tree of half-width adds (a few instructions, where lane by lane takes one
    extract and one add per lane); the order is fixed, so the result is too."""
    lines = [f"static inline {name} {vt}_hadd({vt} v) {{"]
    src, n = "v", width
    while n > 2:
        n //= 2
        half = f"sg_{name}_h{n}"
        lines += [f"  typedef {name} {half} __attribute__((vector_size({n} * sizeof({name}))));",
                  f"  {half} lo{n}, hi{n};",
                  f"  __builtin_memcpy(&lo{n}, &{src}, sizeof(lo{n}));",
                  f"  __builtin_memcpy(&hi{n}, (const char*)&{src} + sizeof(lo{n}), sizeof(hi{n}));",
                  f"  lo{n} = lo{n} + hi{n};"]  # fmt: skip
        src = f"lo{n}"
    return "\n".join([*lines, f"  return {src}[0] + {src}[1];", "}"])


# x86 vector registers per (dtype, lanes): (the macro that says the instructions exist, the register width in the
# intrinsic names, ps/pd); elsewhere the helpers fall back to portable code
X86_VECTORS = {(dtypes.float32, 16): ("__AVX512F__", "512", "ps"), (dtypes.float32, 8): ("__AVX__", "256", "ps"),
               (dtypes.float32, 4): ("__SSE__", "", "ps"), (dtypes.float64, 8): ("__AVX512F__", "512", "pd"),
               (dtypes.float64, 4): ("__AVX__", "256", "pd"), (dtypes.float64, 2): ("__SSE2__", "", "pd")}  # fmt: skip
X86_HEADER = "#if defined(__SSE__)\n#include <immintrin.h>\n#endif"
# NOTE: a reduce's multiply-add is fused where the hardware has it (as BLAS does): one rounding instead of two
FMA_HEADER = """#if defined(__FMA__) || defined(__aarch64__)
#define sg_fmaf(a, b, c) __builtin_fmaf(a, b, c)
#define sg_fma(a, b, c) __builtin_fma(a, b, c)
#else
#define sg_fmaf(a, b, c) ((a) * (b) + (c))
#define sg_fma(a, b, c) ((a) * (b) + (c))
#endif"""


# NOTE: exp2f per lane is a libm call, which made exp-heavy kernels (softmax) slower than numpy's SIMD exp. This is
# branch-free in GCC vector extensions (gcc and clang, any ISA; exact under -ffp-contract=off, no -ffast-math needed):
# 2^x = 2^n * 2^f with n = round(x) (the 1.5*2^23 trick, so n is in t's low bits) and f = x - n in [-0.5, 0.5]
# exactly; 2^f is a degree 6 relative-minimax polynomial (fit error 2e-9, under 0.04 ulp), so integer x gives 2^n
# exactly. 2^n is applied as two normal factors (k = n >> 1 and n - k), so results in the subnormal range round
# once, at the last multiply. x is clamped to [-151, 128] first (o: over, u: under): 2^128 overflows to inf and
# 2^-151 rounds to +0, so x >= 128, +inf -> inf and x < -150, -inf -> +0; nan lanes get n = 0 and stay nan through
# the polynomial. Within 1 ulp of the correctly rounded result for all 2^32 inputs (checked with gcc 12, clang 14).
VECTOR_EXP2F = """static inline VT VT_exp2(VT x) {
  MT o = x > 128.0f, u = x < -151.0f;
  x = (VT)(((MT)x & ~(o | u)) | (o & (MT)((VT){} + 128.0f)) | (u & (MT)((VT){} - 151.0f)));
  VT t = x + 0x1.8p+23f, f = x - (t - 0x1.8p+23f);
  MT n = ((MT)t - 0x4b400000) & (MT)(x == x), k = n >> 1;
  VT p = f * 0x1.41fbbcp-13f + 0x1.5f3e54p-10f;
  p = p * f + 0x1.3b2d4cp-7f;
  p = p * f + 0x1.c6aee8p-5f;
  p = p * f + 0x1.ebfbdcp-3f;
  p = p * f + 0x1.62e43p-1f;
  p = p * f + 1.0f;
  return p * (VT)((k + 127) << 23) * (VT)((n - k + 127) << 23);
}"""


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
    # NOTE: a*b+c fused where the hardware has it (a reduce's accumulation); half stays two roundings in C
    if dt in (dtypes.float32, dtypes.float64) and d.native_vectors:
        # NOTE: OpenCL contracts a*b+c into one fma where the device has it (FP_CONTRACT is on by default), where
        # PoCL's fma() on vectors is 3 times slower than that
        return f"(({xs[0]}*{xs[1]})+{xs[2]})"
    if dt in (dtypes.float32, dtypes.float64):
        return f"sg_fma{d.float_suffix[dt]}({xs[0]},{xs[1]},{xs[2]})"
    prod_ = f"sg_rh({xs[0]}*{xs[1]})" if dt == dtypes.float16 and d.half_as_bits else f"({xs[0]}*{xs[1]})"
    return f"({prod_}+{xs[2]})"


def _max(xs: list[str], dt: DType, src: DType, d: CDialect) -> str:
    a, b = xs
    if dt == dtypes.bool:
        # NOTE: bools are 0 or 1, so max is or; gcc 12's -O2 -march=native miscompiles the ternary form after `!`
        # (all, min) when it vectorizes unrolled lanes, and this form is correct with every compiler tried
        return f"({a}|{b})"
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


_MATH_NAMES = {UnaryOps.EXP2: "exp2", UnaryOps.LOG2: "log2", UnaryOps.SIN: "sin", UnaryOps.SQRT: "sqrt"}


class _Renderer:
    def __init__(self, prg: Program, d: CDialect):
        self.prg, self.d = prg, d
        self.names: dict[int, str] = {}
        self.var_names: dict[Variable, str] = {v.unbound: f"var{i}" for i, v in enumerate(prg.vars)}
        self.lines: list[str] = []
        self.depth = 1
        self.counts: dict[str, int] = {}
        self.parallel_end: str | None = None  # the parallel loop's trip count, once it is rendered
        self.vector_maths: dict[tuple[DType, int], set[str]] = {}

    def fresh(self, prefix: str) -> str:
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return f"{prefix}{n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def idx(self, node: Node | int) -> str:
        return render_index(node, self.var_names)

    def type_of(self, u: UOp) -> str:
        if u.width > 1 and u.dtype == dtypes.bool:
            return self.mask_type(u.width)
        if u.width > 1:
            self.vector_maths.setdefault((u.dtype, u.width), set())  # type: ignore[arg-type]
            return self.d.vector_type(u.dtype, u.width)  # type: ignore[arg-type]
        return self.d.value_type(u.dtype)  # type: ignore[arg-type]

    def mask_type(self, width: int) -> str:
        """A vector of bools: integer lanes as wide as the kernel's float lanes, all ones where true (what vector
        comparisons give)."""
        dtype = self.prg.buffers[0][1]  # NOTE: a vector kernel computes one float dtype and stores it
        if self.d.native_vectors:
            return f"{'int' if dtype.itemsize == 4 else 'long'}{width}"
        self.vector_maths.setdefault((dtype, width), set())
        return f"sg_mask_{self.d.type_names[dtype]}{width}"

    def zero(self, u: UOp) -> str:
        if u.width > 1 and u.dtype == dtypes.bool:
            mt = self.mask_type(u.width)
            return f"(({mt})(0))" if self.d.native_vectors else f"(({mt}){{}})"
        zero = render_const(0, u.dtype, self.d)  # type: ignore[arg-type]
        return self.d.broadcast(u.dtype, u.width, zero) if u.width > 1 else zero  # type: ignore[arg-type]

    def load(self, u: UOp) -> str:
        (buf,), (idx, valid) = u.vin, u.arg
        ptr, at = self.names[id(buf)], self.idx(idx)
        if u.width > 1 and u.dtype == dtypes.bool:
            mt = self.mask_type(u.width)
            read = (f"convert_{mt}(vload{u.width}(0, {ptr}+{at})!=(uchar)0)" if self.d.native_vectors
                    else f"{mt}_from_bytes({ptr}+{at})")  # fmt: skip
        elif u.width > 1:
            vt = self.type_of(u)
            read = f"vload{u.width}(0, {ptr}+{at})" if self.d.native_vectors else f"{vt}_load({ptr}+{at})"
        else:
            read = f"{ptr}[{at}]"
        if u.dtype == dtypes.float16 and self.d.half_as_bits:
            read = f"sg_h2f({read})"
        if valid == 1:
            return read
        return f"({self.idx(valid)}?{read}:{self.zero(u)})"

    def const(self, u: UOp) -> str:
        val, valid = u.arg
        text = render_const(val, u.dtype, self.d)
        return text if valid == 1 else f"({self.idx(valid)}?{text}:{render_const(0, u.dtype, self.d)})"

    def alu(self, u: UOp) -> str:
        vin = u.vin
        if u.arg is BinaryOps.MAX and vin[0].uop is UOps.CONST:
            vin = vin[::-1]  # NOTE: max is symmetric; the nan test belongs on the value that can be nan
        xs = [self.names[id(v)] for v in vin]
        if u.width > 1:
            return self.vector_alu(u, vin, xs)
        expr = ALU_OPS[u.arg](xs, u.dtype, u.vin[0].dtype, self.d)
        return f"sg_rh({expr})" if u.dtype == dtypes.float16 and self.d.half_as_bits else expr

    def vector_alu(self, u: UOp, vin: tuple[UOp, ...], xs: list[str]) -> str:
        """Scalars are broadcast first; max and (in C) math functions go through helpers; a where with a vector
        condition selects lane by lane."""
        if u.arg is TernaryOps.WHERE:
            cond, (a, b) = xs[0], [self.broadcast(v, x, u.width) for v, x in zip(vin[1:], xs[1:])]
            if vin[0].width == 1:
                return f"({cond}?{a}:{b})"
            if self.d.native_vectors:
                return f"select({b},{a},{cond})"
            mt, vt = self.mask_type(u.width), self.type_of(u)
            return f"(({vt})((({mt}){a}&{cond})|(({mt}){b}&~{cond})))"
        xs = [self.broadcast(v, x, u.width) for v, x in zip(vin, xs)]
        vt = self.type_of(u)
        if u.arg is BinaryOps.MAX:
            a, b = xs
            return f"select({b},{a},({a}!={a})|({a}>{b}))" if self.d.native_vectors else f"{vt}_max({a},{b})"
        if u.arg in _MATH_NAMES and not self.d.native_vectors:
            self.vector_maths[(u.dtype, u.width)].add(_MATH_NAMES[u.arg])  # type: ignore[index]
            return f"{vt}_{_MATH_NAMES[u.arg]}({xs[0]})"
        if u.arg is TernaryOps.MULACC and not self.d.native_vectors:
            self.vector_maths[(u.dtype, u.width)].add("fma")  # type: ignore[index]
            return f"{vt}_fma({xs[0]},{xs[1]},{xs[2]})"
        return ALU_OPS[u.arg](xs, u.dtype, u.vin[0].dtype, self.d)

    def broadcast(self, v: UOp, x: str, width: int) -> str:
        return x if v.width > 1 else self.d.broadcast(v.dtype, width, x)  # type: ignore[arg-type]

    def horizontal(self, u: UOp) -> str:
        (vec,) = u.vin
        lanes = [self.d.lane(self.names[id(vec)], i) for i in range(vec.width)]
        if u.arg is BinaryOps.ADD and not self.d.native_vectors:
            self.vector_maths[(vec.dtype, vec.width)].add("hadd")  # type: ignore[index]
            return f"{self.type_of(vec)}_hadd({self.names[id(vec)]})"
        if u.arg is BinaryOps.ADD:
            return "(" + "+".join(lanes) + ")"
        # NOTE: one statement per step: nesting max expressions would repeat each operand, exponentially
        out = self.fresh("alu")
        self.emit(f"{self.type_of(u)} {out} = {lanes[0]};")
        for lane in lanes[1:]:
            self.emit(f"{out} = {ALU_OPS[BinaryOps.MAX]([out, lane], u.dtype, u.dtype, self.d)};")  # type: ignore[arg-type]
        return out

    def store(self, u: UOp) -> None:
        buf, value = u.vin
        val, ptr = self.names[id(value)], self.names[id(buf)]
        if u.width > 1:
            vt = self.type_of(value)
            at = self.idx(u.arg)
            self.emit(f"vstore{u.width}({val}, 0, {ptr}+{at});" if self.d.native_vectors
                      else f"{vt}_store({ptr}+{at}, {val});")  # fmt: skip
            return
        if value.dtype == dtypes.float16 and self.d.half_as_bits:
            val = f"sg_f2h({val})"
        self.emit(f"{ptr}[{self.idx(u.arg)}] = {val};")

    def statement(self, u: UOp) -> None:
        d = self.d
        if u.uop is UOps.LOOP:
            var, end, parallel = u.arg
            name = self.var_names[var] = var.expr.lstrip("_")
            if parallel:
                self.parallel_end = self.idx(end)
                self.emit(f"for (int {name} = sg_start; {name} < sg_end; {name}++) {{")
            else:
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
            init = render_const(u.arg, u.dtype, d)  # type: ignore[arg-type]
            self.emit(f"{self.type_of(u)} {name} = {d.broadcast(u.dtype, u.width, init) if u.width > 1 else init};")  # type: ignore[arg-type]
        elif u.uop is UOps.CONST:
            self.names[id(u)] = self.const(u)
        elif u.uop is UOps.LANE:
            self.names[id(u)] = d.lane(self.names[id(u.vin[0])], u.arg)
        elif u.uop in (UOps.LOAD, UOps.ALU, UOps.VECTORIZE, UOps.HORIZONTAL):
            self.names[id(u)] = name = self.fresh({UOps.LOAD: "val", UOps.VECTORIZE: "vec"}.get(u.uop, "alu"))
            if u.uop is UOps.LOAD:
                expr = self.load(u)
            elif u.uop is UOps.ALU:
                expr = self.alu(u)
            elif u.uop is UOps.VECTORIZE and u.dtype == dtypes.bool:
                lanes = ",".join(f"({self.names[id(v)]}?-1:0)" for v in u.vin)
                mt = self.mask_type(u.width)
                expr = f"(({mt})({lanes}))" if d.native_vectors else f"(({mt}){{{lanes}}})"
            elif u.uop is UOps.VECTORIZE:
                expr = d.vectorize(u.dtype, u.width, [self.names[id(v)] for v in u.vin])  # type: ignore[arg-type]
            else:
                expr = self.horizontal(u)
            self.emit(f"{self.type_of(u)} {name} = {expr};")
        elif u.uop is UOps.ASSIGN:
            self.emit(f"{self.names[id(u.vin[0])]} = {self.names[id(u.vin[1])]};")
        elif u.uop is UOps.STORE:
            self.store(u)

    def arguments(self) -> list[tuple[str, str, str]]:
        """(type, qualifiers, name) per argument: the buffers, then the shape variables."""
        d, args = self.d, []
        for u in self.prg.uops:
            if u.uop is UOps.DEFINE_GLOBAL:
                idx, dtype = u.arg
                self.names[id(u)] = f"data{idx}"
                const = "const " if idx else ""
                args.append((f"{d.buffer_qualifier}{const}{d.storage_type(dtype)}*", " restrict", f"data{idx}"))
        return args + [("int", "", self.var_names[v.unbound]) for v in self.prg.vars]

    def header(self) -> list[str]:
        """The chunks before the kernel (each self-contained, so a file of several kernels can drop repeats)."""
        used = {u.dtype for u in self.prg.uops if u.dtype is not None}
        pragmas = [self.d.extensions[t] for t in sorted(used) if t in self.d.extensions]
        mulaccs = {u.dtype for u in self.prg.uops if u.uop is UOps.ALU and u.arg is TernaryOps.MULACC}
        if dtypes.float16 in mulaccs:
            pragmas.append(self.d.no_contract)
        chunks = [self.d.header.rstrip("\n")] if self.d.header else []
        chunks += pragmas
        if not self.d.native_vectors and any(m & {"sqrt", "fma"} for m in self.vector_maths.values()):
            chunks.append(X86_HEADER)
        if not self.d.native_vectors and mulaccs - {dtypes.float16}:
            chunks.append(FMA_HEADER)
        if dtypes.float16 in used and self.d.half_as_bits:
            chunks.append(HALF_HELPERS.rstrip("\n"))
        if not self.d.native_vectors:
            for (dtype, width), maths in sorted(self.vector_maths.items(), key=lambda x: (x[0][0], x[0][1])):
                chunks += c_vector_helpers(dtype, width, maths)
        if self.parallel_end is not None:
            chunks.append(PARALLEL_HEADER)
        return chunks

    def render(self) -> str:
        args = self.arguments()
        for u in self.prg.uops:
            self.statement(u)
        name = self.prg.name
        params = ", ".join(f"{t}{q} {n}" if t != "int" else f"const int {n}" for t, q, n in args)
        if self.parallel_end is None:
            body = [f"{self.d.kernel_prefix}void {name}({params}) {{", *self.lines, "}"]
        else:
            # NOTE: the outer loop's range comes from the thread pool, so the kernel is a body over [start, end)
            # called through sg_parallel_for with its arguments in a struct
            fields = " ".join(f"{t} {n};" for t, _, n in args)
            unpack = [f"  {t}{q} {n} = sg_args->{n};" for t, q, n in args]
            body = [f"struct {name}_args {{ {fields} }};",
                    f"static void {name}_body(void* sg_ctx, int sg_start, int sg_end) {{",
                    f"  struct {name}_args* sg_args = (struct {name}_args*)sg_ctx;", *unpack, *self.lines, "}",
                    f"void {name}({params}) {{",
                    f"  struct {name}_args sg_args = {{ {', '.join(n for _, _, n in args)} }};",
                    f"  if (sg_parallel_for) sg_parallel_for({name}_body, &sg_args, {self.parallel_end});",
                    f"  else {name}_body(&sg_args, 0, {self.parallel_end});", "}"]  # fmt: skip
        return "\n\n".join(self.header()) + "\n" + KERNEL_MARK + "\n" + "\n".join(body) + "\n"


# NOTE: the line between the header chunks and the kernel's own code (the C export splits sources there)
KERNEL_MARK = "/* kernel */"


def render(prg: Program, dialect: CDialect) -> str:
    """The source of one kernel function named prg.name."""
    return _Renderer(prg, dialect).render()
