"""One C-style renderer for a linearized Program. All that C (clang/cc) and OpenCL C print differently is one table
per dialect, C_DIALECT and OPENCL_DIALECT (a CDialect each); the renderer reads the table, never the dialect's name.

Nothing from a user reaches the source: buffers are data0.., shape variables var0.., values alu0.., and numbers are
printed exactly (hex floats, INFINITY, NAN). Imports dtype, ops, shape and codegen.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specgrad.codegen.linearizer import Program
from specgrad.codegen.uops import UOp, UOps
from specgrad.dtype import DType, dtypes
from specgrad.ops import BinaryOps, TernaryOps, UnaryOps
from specgrad.shape.symbolic import AndNode, DivNode, LtNode, ModNode, MulNode, Node, NumNode, SumNode, Variable

# *** C text the C dialect includes: half in float, vector helpers, the thread pool's hook ***


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
}"""

# NOTE: a float `c ? a : b` compiles to a branch (x86 has no scalar float cmov), and a kernel whose comparisons go
# either way at random (relu and max pooling on real data) then mispredicts about every other element: a CNN's
# pooling gradient ran 2.9 ms instead of 1.1. Selecting the bits with a mask has no branch.
SCALAR_SELECTS = {
    "float": ("sg_self", "unsigned int"),
    "double": ("sg_seld", "unsigned long long"),
}


def _scalar_select(t: str) -> tuple[str, str]:
    name, bits = SCALAR_SELECTS[t]
    src = (
        f"static inline {t} {name}(int c, {t} a, {t} b) {{ union {{ {t} f; {bits} u; }} x = {{ a }}, y = {{ b }}; "
        f"{bits} m = -({bits})(c != 0); x.u = (x.u & m) | (y.u & ~m); return x.f; }}"
    )
    return name, src


PARALLEL_GLOBAL = "sg_parallel_fn sg_parallel_for = 0;"
PARALLEL_HEADER = f"""typedef void (*sg_body_fn)(void*, int, int);
typedef void (*sg_parallel_fn)(sg_body_fn, void*, int);
{PARALLEL_GLOBAL} /* set by the runtime after loading; unset: one thread */"""


def c_vector_helpers(dtype: DType, width: int, maths: set[str]) -> list[str]:
    """The typedefs and helpers one C kernel needs for vectors of `width` `dtype`s (each its own header chunk)."""
    d, size = C_DIALECT, dtype.itemsize * width
    name, mask_name = d.type_names[dtype], d.mask_lane_type(dtype)
    vt, mask = d.vector_type_of(dtype, width), d.mask_type_of(dtype, width)
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
    suffix = d.math_suffix[dtype]
    x86 = X86_VECTORS.get((dtype, width))
    for fn in sorted(maths):
        if dtype == dtypes.float32 and fn == "exp2":
            chunks.append(VECTOR_EXP2F.replace("VT", vt).replace("MT", mask))
        elif fn == "sqrt":
            # NOTE: libm's sqrt per lane is one scalar instruction each; the vector one rounds the same (correctly)
            fallback = f"  for (int i = 0; i < {width}; i++) x[i] = sqrt{suffix}(x[i]);\n  return x;"
            chunks.append(f"static inline {vt} {vt}_sqrt({vt} x) {{\n{_x86_sqrt(x86, width, fallback)}\n}}")
        elif fn == "hadd":
            chunks.append(_hadd(vt, name, width))
        elif fn == "fma":
            chunks.append(f"static inline {vt} {vt}_fma({vt} a, {vt} b, {vt} c) {{\n{_x86_fma(x86, width)}\n}}")
        else:
            chunks.append(f"static inline {vt} {vt}_{fn}({vt} x) {{ for (int i = 0; i < {width}; i++) "
                          f"x[i] = {fn}{suffix}(x[i]); return x; }}")  # fmt: skip
    return chunks


def _x86_fma(x86: tuple[str, str, str] | None, width: int) -> str:
    """The body of a vector fma helper: one fused instruction where the target has it, else a*b+c rounded twice."""
    fallback = "  return a * b + c;"
    if x86 is None:
        return fallback
    _, bits, kind = x86
    guard = "__AVX512F__" if bits == "512" else "__FMA__"
    args = f"_mask(a, b, c, {_MASK[width]}-1, 4)" if bits == "512" else "(a, b, c)"
    ia32 = f"__builtin_ia32_vfmadd{kind}{bits}{args}"
    return _x86_builtin(guard, "__builtin_elementwise_fma(a, b, c)", ia32, ia32, fallback)


def _x86_sqrt(x86: tuple[str, str, str] | None, width: int, fallback: str) -> str:
    """The body of a vector sqrt helper: one instruction where the target has it, else libm per lane."""
    if x86 is None:
        return fallback
    guard, bits, kind = x86
    if bits == "512":  # NOTE: the two compilers' builtins differ here
        clang = f"__builtin_ia32_sqrt{kind}512(x, 4)"
        gcc = f"__builtin_ia32_sqrt{kind}512_mask(x, x, {_MASK[width]}-1, 4)"
    else:
        clang = gcc = f"__builtin_ia32_sqrt{kind}{bits}(x)"
    return _x86_builtin(guard, "__builtin_elementwise_sqrt(x)", clang, gcc, fallback)


_MASK = {16: "(unsigned short)", 8: "(unsigned char)"}  # NOTE: an AVX-512 lane mask, all lanes on


def _x86_builtin(guard: str, generic: str, clang: str, gcc: str, fallback: str) -> str:
    """Where `guard` says the instruction exists: clang's generic builtin where it has one (clang 17 on) or its x86
    one, gcc's x86 one (what <immintrin.h> would call: including it took 150 of the 200 ms a typical kernel took to
    compile); elsewhere `fallback`."""
    return (f"#if defined({guard}) && defined(__clang__)\n#if __has_builtin({generic.split('(')[0]})\n"
            f"  return {generic};\n#else\n  return {clang};\n#endif\n#elif defined({guard})\n  return {gcc};\n"
            f"#else\n{fallback}\n#endif")  # fmt: skip


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


# x86 vector registers per (dtype, lanes): (the macro that says the instructions exist, the register width, ps/pd);
# elsewhere the helpers fall back to portable code
X86_VECTORS = {(dtypes.float32, 16): ("__AVX512F__", "512", "ps"), (dtypes.float32, 8): ("__AVX__", "256", "ps"),
               (dtypes.float32, 4): ("__SSE__", "", "ps"), (dtypes.float64, 8): ("__AVX512F__", "512", "pd"),
               (dtypes.float64, 4): ("__AVX__", "256", "pd"), (dtypes.float64, 2): ("__SSE2__", "", "pd")}  # fmt: skip
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
# NOTE: the scalar twin of VECTOR_EXP2F, operation for operation, so a value computed lane by lane in one kernel and
# in a vector in another has the same bits: backward rules compare recomputed values with the forward's (max's
# x == max mask), and libm's exp2f rounding differently from the polynomial made that mask empty (0/0, issue 29)
SCALAR_EXP2F = """static inline float sg_exp2f(float x) {
  x = x > 128.0f ? 128.0f : x < -151.0f ? -151.0f : x;
  float t = x + 0x1.8p+23f, f = x - (t - 0x1.8p+23f);
  union { float f; int i; } sg_t = { t }, sg_two_k, sg_two_n_k;
  int n = x == x ? sg_t.i - 0x4b400000 : 0, k = n >> 1;
  float p = f * 0x1.41fbbcp-13f + 0x1.5f3e54p-10f;
  p = p * f + 0x1.3b2d4cp-7f;
  p = p * f + 0x1.c6aee8p-5f;
  p = p * f + 0x1.ebfbdcp-3f;
  p = p * f + 0x1.62e43p-1f;
  p = p * f + 1.0f;
  sg_two_k.i = (k + 127) << 23;
  sg_two_n_k.i = (n - k + 127) << 23;
  return p * sg_two_k.f * sg_two_n_k.f;
}"""
# NOTE: the same exp2 in OpenCL, one source for scalars and vectors (select and as_ take both; a scalar comparison
# is 1 where a vector's is -1, and select reads either as true). The builtin exp2 of PoCL rounds differently on
# scalars and vectors, and a kernel's compiler may vectorize scalar code across work-items; contraction is off, as in
# C, so the bits are the same whatever the device fuses.
OPENCL_EXP2 = """VT sg_exp2_VT(VT x) {
  #pragma OPENCL FP_CONTRACT OFF
  x = select(x, (VT)(128.0f), x > 128.0f);
  x = select(x, (VT)(-151.0f), x < -151.0f);
  VT t = x + 0x1.8p+23f, f = x - (t - 0x1.8p+23f);
  IT n = select((IT)(0), as_IT(t) - 0x4b400000, x == x), k = n >> 1;
  VT p = f * 0x1.41fbbcp-13f + 0x1.5f3e54p-10f;
  p = p * f + 0x1.3b2d4cp-7f;
  p = p * f + 0x1.c6aee8p-5f;
  p = p * f + 0x1.ebfbdcp-3f;
  p = p * f + 0x1.62e43p-1f;
  p = p * f + 1.0f;
  return p * as_VT((k + 127) << 23) * as_VT((n - k + 127) << 23);
}"""


def _opencl_math(fn: str, dtype: DType, width: int) -> tuple[str, str] | None:
    """OpenCL's own function for math `fn` on `width` `dtype`s: exp2 on floats is ours; the other transcendentals
    take the builtin lane by lane on vectors, so they round as on scalars (PoCL's vector sin also returned 0.01 for
    sin(1e-30), its vector double exp2 differs from its scalar one); sqrt and fma stay builtins (one rounding each)."""
    t = OPENCL_DIALECT.type_names[dtype]
    vt = t if width == 1 else f"{t}{width}"
    if (fn, dtype) == ("exp2", dtypes.float32):
        return f"sg_exp2_{vt}", OPENCL_EXP2.replace("VT", vt).replace("IT", "int" if width == 1 else f"int{width}")
    if fn not in ("exp2", "log2", "sin") or width == 1:
        return None
    lanes = ", ".join(f"{fn}(x.s{i:x})" for i in range(width))
    return f"sg_{fn}_{vt}", f"{vt} sg_{fn}_{vt}({vt} x) {{ return ({vt})({lanes}); }}"


# *** the dialects: one table each ***


@dataclass(frozen=True)
class CDialect:
    """Everything one C dialect prints its own way. Templates are str.format strings; the comment beside each names
    its fields: {t} a scalar type's name, {n} a lane count, {vt} a vector type, {mt} a mask type (a vector of bools),
    {x} a value, {ptr}+{at} an element's address, {a} {b} {c} operands."""

    name: str
    # the kernel function
    kernel_prefix: str
    buffer_qualifier: str  # of each buffer argument
    global_id: str  # hardware global id {axis} as an int; a kernel that loops over its output has none
    group_id: str  # work-group id {axis} as an int ("": the dialect has no work-groups)
    local_id: str  # local id {axis} within the work-group as an int
    local_memory: str  # a work-group's array {name} of {n} {t}s
    barrier: str  # every work item of the group waits, local memory writes seen
    # scalars
    type_names: dict[DType, str]  # as stored: arguments, loads and stores
    compute_types: dict[DType, str]  # dtypes computed in another type than the one they are stored in
    load_as: dict[DType, str]  # {x}: a loaded value, converted to its compute type
    store_as: dict[DType, str]  # {x}: a value converted to its stored type
    round_to: dict[DType, str]  # {x}: every result of that dtype, rounded to its precision
    casts: dict[tuple[DType, DType], str]  # (from, to) -> {x} cast in a form of its own
    math_suffix: dict[DType, str]  # per float dtype: expf or exp
    own_math: Callable[[str, DType, int], tuple[str, str] | None]  # (fn, dtype, lanes) -> (our function, its source)
    fused_mulacc: str  # float32/float64 a*b+c, fused where the hardware has it: {a} {b} {c} {suffix}
    scalar_select: Callable[[str], tuple[str, str]] | None  # float type -> (our branch-free select, its source)
    # the chunks before the kernel, in this order, each only where the kernel needs it
    header: str  # always
    extensions: dict[DType, str]  # where the dtype is used
    no_contract: str  # where a half a*b+c is: stops it becoming one fma (it must round twice)
    fma_header: str  # where any other a*b+c is
    dtype_helpers: dict[DType, str]  # where the dtype is used
    vector_helpers: Callable[[DType, int, set[str]], list[str]]  # per vector type used: (dtype, lanes, helpers used)
    # vectors
    vector_type: str  # {t} {n}
    mask_type: str  # lanes as wide as the kernel's float {t}: {i} the int type that size, {n}
    broadcast: str  # {vt} {x}; {lanes}: x, n times
    vectorize: str  # {vt} {lanes}
    mask_zero: str  # {vt}
    lane: str  # lane {i} of {x}
    vector_load: str  # {vt} {n} {ptr} {at}
    mask_load: str  # bools are bytes in memory: {mt} {n} {ptr} {at}
    vector_store: str  # {x} {vt} {n} {ptr} {at}
    select: str  # lane by lane {cond} ? {a} : {b}; {vt} {mt}
    vector_max: str  # nan wins, as in numpy.maximum: {vt} {a} {b}
    vector_call: str  # a math function or fma on vectors: {vt} {fn} {args}; {scalar}: the op as on scalars
    vector_sum: str  # the sum of {x}'s lanes: {vt}; {lanes}: the lanes joined by +

    def storage_type(self, dtype: DType) -> str:
        return self.type_names[dtype]

    def value_type(self, dtype: DType) -> str:
        return self.compute_types.get(dtype, self.type_names[dtype])

    def vector_type_of(self, dtype: DType, width: int) -> str:
        return self.vector_type.format(t=self.type_names[dtype], n=width)

    def mask_lane_type(self, dtype: DType) -> str:
        return self.type_names[dtypes.int32 if dtype.itemsize == 4 else dtypes.int64]

    def mask_type_of(self, dtype: DType, width: int) -> str:
        return self.mask_type.format(t=self.type_names[dtype], i=self.mask_lane_type(dtype), n=width)


C_DIALECT = CDialect(
    name="C",
    kernel_prefix="",
    buffer_qualifier="",
    global_id="",
    group_id="",
    local_id="",
    local_memory="",
    barrier="",
    type_names={dtypes.bool: "unsigned char", dtypes.float16: "unsigned short", dtypes.float32: "float",
                dtypes.float64: "double", dtypes.int8: "char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
                dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int",
                dtypes.int64: "long long", dtypes.uint64: "unsigned long long"},
    # half: its 16 bits in memory, computed in float (see HALF_HELPERS)
    compute_types={dtypes.float16: "float"},
    load_as={dtypes.float16: "sg_h2f({x})"},
    store_as={dtypes.float16: "sg_f2h({x})"},
    round_to={dtypes.float16: "sg_rh({x})"},
    casts={(dtypes.float64, dtypes.float16): "sg_d2f_odd({x})"},  # NOTE: then rounded to half, as every half result
    math_suffix={dtypes.float16: "f", dtypes.float32: "f", dtypes.float64: ""},
    own_math=lambda fn, dtype, width: ("sg_exp2f", SCALAR_EXP2F) if (fn, dtype, width) == ("exp2", dtypes.float32, 1)
    else None,  # NOTE: on vectors, c_vector_helpers has it
    fused_mulacc="sg_fma{suffix}({a},{b},{c})",
    scalar_select=_scalar_select,
    header="#include <math.h>",
    extensions={},
    no_contract="#pragma STDC FP_CONTRACT OFF",
    fma_header=FMA_HEADER,
    dtype_helpers={dtypes.float16: HALF_HELPERS},
    vector_helpers=c_vector_helpers,
    # GCC vector types (gcc and clang have them), with helpers for what they lack
    vector_type="sg_{t}{n}",
    mask_type="sg_mask_{t}{n}",
    # NOTE: an initializer of copies, not {}+x: adding +0.0 is not a no-op (-0.0 + 0.0 is +0.0), so it would cost
    # an add before every broadcast
    broadcast="(({vt}){{{lanes}}})",
    vectorize="(({vt}){{{lanes}}})",
    mask_zero="(({vt}){{}})",
    lane="{x}[{i}]",
    vector_load="{vt}_load({ptr}+{at})",
    mask_load="{mt}_from_bytes({ptr}+{at})",
    vector_store="{vt}_store({ptr}+{at}, {x});",
    select="(({vt})((({mt}){a}&{cond})|(({mt}){b}&~{cond})))",
    vector_max="{vt}_max({a},{b})",
    vector_call="{vt}_{fn}({args})",
    vector_sum="{vt}_hadd({x})",
)  # fmt: skip

OPENCL_DIALECT = CDialect(
    name="OpenCL",
    kernel_prefix="__kernel ",
    buffer_qualifier="__global ",
    global_id="(int)get_global_id({axis})",
    group_id="(int)get_group_id({axis})",
    local_id="(int)get_local_id({axis})",
    local_memory="__local {t} {name}[{n}];",
    barrier="barrier(CLK_LOCAL_MEM_FENCE);",
    type_names={dtypes.bool: "uchar", dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double",
                dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort",
                dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong"},
    # every dtype is native: stored and computed as itself
    compute_types={},
    load_as={},
    store_as={},
    round_to={},
    casts={},
    math_suffix={dtypes.float16: "", dtypes.float32: "", dtypes.float64: ""},  # overloaded per type
    own_math=lambda fn, dtype, width: _opencl_math(fn, dtype, width),
    # NOTE: OpenCL contracts a*b+c into one fma where the device has it (FP_CONTRACT is on by default), where
    # PoCL's fma() on vectors is 3 times slower than that
    fused_mulacc="(({a}*{b})+{c})",
    scalar_select=None,  # NOTE: OpenCL compilers select without a branch; a GPU branches per warp anyway
    header="",
    extensions={dtypes.float16: "#pragma OPENCL EXTENSION cl_khr_fp16 : enable",
                dtypes.float64: "#pragma OPENCL EXTENSION cl_khr_fp64 : enable"},
    no_contract="#pragma OPENCL FP_CONTRACT OFF",
    fma_header="",
    dtype_helpers={},
    vector_helpers=lambda dtype, width, maths: [],
    # built-in vector types: floatN, vloadN/vstoreN, select, and math functions and operators that take vectors
    vector_type="{t}{n}",
    mask_type="{i}{n}",
    broadcast="(({vt})({x}))",
    vectorize="(({vt})({lanes}))",
    mask_zero="(({vt})(0))",
    lane="{x}.s{i:x}",
    vector_load="vload{n}(0, {ptr}+{at})",
    mask_load="convert_{mt}(vload{n}(0, {ptr}+{at})!=(uchar)0)",
    vector_store="vstore{n}({x}, 0, {ptr}+{at});",
    select="select({b},{a},{cond})",
    vector_max="select({b},{a},({a}!={a})|({a}>{b}))",
    vector_call="{scalar}",
    vector_sum="({lanes})",
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
    return lambda xs, dt, src, d: f"{fn}{d.math_suffix[dt]}({xs[0]})"


def _int_div(op: str) -> Callable[[list[str], DType, DType, CDialect], str]:
    def render(xs: list[str], dt: DType, src: DType, d: CDialect) -> str:
        a, b = xs
        if dtypes.is_float(dt):
            return f"({a}/{b})" if op == "/" else f"fmod{d.math_suffix[dt]}({a},{b})"
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
    if (src, dt) in d.casts:
        return d.casts[(src, dt)].format(x=xs[0])
    return f"({xs[0]}!=0)" if dt == dtypes.bool else f"(({d.value_type(dt)})({xs[0]}))"


def _mulacc(xs: list[str], dt: DType, src: DType, d: CDialect) -> str:
    # NOTE: a*b+c fused where the hardware has it (a reduce's accumulation); half stays two roundings in C
    a, b, c = xs
    if dt in (dtypes.float32, dtypes.float64):
        return d.fused_mulacc.format(a=a, b=b, c=c, suffix=d.math_suffix[dt])
    product = d.round_to.get(dt, "({x})").format(x=f"{a}*{b}")
    return f"({product}+{c})"


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


# the ops a dialect may print on vectors as a call (CDialect.vector_call), and the function's name
_VECTOR_CALLS = {UnaryOps.EXP2: "exp2", UnaryOps.LOG2: "log2", UnaryOps.SIN: "sin", UnaryOps.SQRT: "sqrt",
                TernaryOps.MULACC: "fma"}  # fmt: skip


class _Renderer:
    def __init__(self, prg: Program, d: CDialect):
        self.prg, self.d = prg, d
        self.names: dict[int, str] = {}
        self.var_names: dict[Variable, str] = {v.unbound: f"var{i}" for i, v in enumerate(prg.vars)}
        self.lines: list[str] = []
        self.depth = 1
        self.counts: dict[str, int] = {}
        self.parallel_end: str | None = None  # the parallel loop's trip count, once it is rendered
        self.vector_maths: dict[tuple[DType, int], set[str]] = {}  # vector types used -> the helpers called on them
        self.own_maths: dict[str, str] = {}  # the dialect's own math functions called: name -> source

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
            return self.vector_type(u.dtype, u.width)  # type: ignore[arg-type]
        return self.d.value_type(u.dtype)  # type: ignore[arg-type]

    def vector_type(self, dtype: DType, width: int) -> str:
        self.vector_maths.setdefault((dtype, width), set())
        return self.d.vector_type_of(dtype, width)

    def mask_type(self, width: int) -> str:
        """A vector of bools: integer lanes as wide as the kernel's float lanes, all ones where true (what vector
        comparisons give)."""
        dtype = self.prg.buffers[0][1]  # NOTE: a vector kernel computes one float dtype and stores it
        self.vector_maths.setdefault((dtype, width), set())
        return self.d.mask_type_of(dtype, width)

    def vector_call(self, u: UOp, scalar: str, xs: list[str]) -> str:
        """Op u on vectors as the dialect's call of _VECTOR_CALLS[u.arg], the helper noted for the header."""
        fn = _VECTOR_CALLS[u.arg]
        self.vector_maths.setdefault((u.dtype, u.width), set()).add(fn)  # type: ignore[arg-type]
        return self.d.vector_call.format(vt=self.type_of(u), fn=fn, args=",".join(xs), scalar=scalar)

    def zero(self, u: UOp) -> str:
        if u.width > 1 and u.dtype == dtypes.bool:
            return self.d.mask_zero.format(vt=self.mask_type(u.width))
        zero = render_const(0, u.dtype, self.d)  # type: ignore[arg-type]
        return self.splat(zero, u.dtype, u.width) if u.width > 1 else zero  # type: ignore[arg-type]

    def splat(self, x: str, dtype: DType, width: int) -> str:
        return self.d.broadcast.format(vt=self.vector_type(dtype, width), x=x, lanes=",".join([x] * width))

    def load(self, u: UOp) -> str:
        (buf,), (idx, valid) = u.vin, u.arg
        addr = {"ptr": self.names[id(buf)], "at": self.idx(idx), "n": u.width}
        if u.width > 1 and u.dtype == dtypes.bool:
            read = self.d.mask_load.format(mt=self.mask_type(u.width), **addr)
        elif u.width > 1:
            read = self.d.vector_load.format(vt=self.type_of(u), **addr)
        else:
            read = f"{addr['ptr']}[{addr['at']}]"
        read = self.d.load_as.get(u.dtype, "{x}").format(x=read)  # type: ignore[arg-type]
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
        if (select := self.scalar_select(u, xs)) is not None:
            return select
        expr = self.own_math_call(u, xs) or ALU_OPS[u.arg](xs, u.dtype, u.vin[0].dtype, self.d)
        return self.d.round_to.get(u.dtype, "{x}").format(x=expr)  # type: ignore[arg-type]

    def vector_alu(self, u: UOp, vin: tuple[UOp, ...], xs: list[str]) -> str:
        """Scalars are broadcast first; where with a vector condition and max select lane by lane; math functions
        and fma are the dialect's vector calls."""
        if u.arg is TernaryOps.WHERE:
            cond, (a, b) = xs[0], [self.broadcast(v, x, u.width) for v, x in zip(vin[1:], xs[1:])]
            if vin[0].width == 1:
                return f"({cond}?{a}:{b})"
            return self.d.select.format(vt=self.type_of(u), mt=self.mask_type(u.width), cond=cond, a=a, b=b)
        xs = [self.broadcast(v, x, u.width) for v, x in zip(vin, xs)]
        vt = self.type_of(u)
        if u.arg is BinaryOps.MAX:
            return self.d.vector_max.format(vt=vt, a=xs[0], b=xs[1])
        if own := self.own_math_call(u, xs):
            return own
        scalar = ALU_OPS[u.arg](xs, u.dtype, u.vin[0].dtype, self.d)
        return self.vector_call(u, scalar, xs) if u.arg in _VECTOR_CALLS else scalar

    def scalar_select(self, u: UOp, xs: list[str]) -> str | None:
        """A float max or where without a branch on the comparison, where the dialect has a select."""
        if u.arg not in (BinaryOps.MAX, TernaryOps.WHERE) or self.d.scalar_select is None:
            return None
        if not dtypes.is_float(u.dtype):  # type: ignore[arg-type]
            return None
        if u.arg is BinaryOps.MAX and any(v.uop is UOps.DEFINE_ACC for v in u.vin):
            # NOTE: a max reduce's chain through the accumulator: `a>b?a:b` is one max instruction on x86 (it
            # returns b when either is nan, as the form says), where the bit select below is a slow chain; the nan
            # test is a branch, but one that goes the same way nearly always. nan wins, as in numpy.maximum
            a, b = xs
            return f"((({a})!=({a}))|(({b})!=({b}))?(({a})+({b})):((({a})>({b}))?({a}):({b})))"
        name, self.own_maths[name] = self.d.scalar_select(self.d.value_type(u.dtype))  # type: ignore[arg-type]
        if u.arg is BinaryOps.MAX:
            a, b = xs
            return f"{name}((({a})!=({a}))|(({a})>({b})),{a},{b})"  # NOTE: nan wins, as in numpy.maximum
        return f"{name}({xs[0]},{xs[1]},{xs[2]})"

    def own_math_call(self, u: UOp, xs: list[str]) -> str | None:
        """Op u as a call of the dialect's own function for it (its source noted for the header), if it has one."""
        if u.arg not in _VECTOR_CALLS or (own := self.d.own_math(_VECTOR_CALLS[u.arg], u.dtype, u.width)) is None:  # type: ignore[arg-type]
            return None
        name, self.own_maths[name] = own
        return f"{name}({','.join(xs)})"

    def broadcast(self, v: UOp, x: str, width: int) -> str:
        return x if v.width > 1 else self.splat(x, v.dtype, width)  # type: ignore[arg-type]

    def horizontal(self, u: UOp) -> str:
        (vec,) = u.vin
        x = self.names[id(vec)]
        lanes = [self.d.lane.format(x=x, i=i) for i in range(vec.width)]
        if u.arg is BinaryOps.ADD:
            self.vector_maths.setdefault((vec.dtype, vec.width), set()).add("hadd")  # type: ignore[arg-type]
            return self.d.vector_sum.format(vt=self.type_of(vec), x=x, lanes="+".join(lanes))
        # NOTE: one statement per step: nesting max expressions would repeat each operand, exponentially
        out = self.fresh("alu")
        self.emit(f"{self.type_of(u)} {out} = {lanes[0]};")
        for lane in lanes[1:]:
            self.emit(f"{out} = {ALU_OPS[BinaryOps.MAX]([out, lane], u.dtype, u.dtype, self.d)};")  # type: ignore[arg-type]
        return out

    def store(self, u: UOp) -> None:
        buf, value = u.vin
        val, ptr, at = self.names[id(value)], self.names[id(buf)], self.idx(u.arg)
        if u.width > 1:
            self.emit(self.d.vector_store.format(x=val, vt=self.type_of(value), n=u.width, ptr=ptr, at=at))
            return
        val = self.d.store_as.get(value.dtype, "{x}").format(x=val)  # type: ignore[arg-type]
        self.emit(f"{ptr}[{at}] = {val};")

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
            kind, axis, var = u.arg
            name = self.var_names[var] = var.expr.lstrip("_")
            self.emit(f"int {name} = {self.work_item_id(kind).format(axis=axis)};")
        elif u.uop is UOps.DEFINE_LOCAL:
            self.names[id(u)] = name = self.fresh("lmem")
            self.emit(self.work_group_feature(d.local_memory).format(t=d.storage_type(u.dtype), name=name, n=u.arg[1]))  # type: ignore[arg-type]
        elif u.uop is UOps.BARRIER:
            self.emit(self.work_group_feature(d.barrier))
        elif u.uop is UOps.DEFINE_ACC:
            self.names[id(u)] = name = self.fresh("acc")
            init = render_const(u.arg, u.dtype, d)  # type: ignore[arg-type]
            init = self.splat(init, u.dtype, u.width) if u.width > 1 else init  # type: ignore[arg-type]
            self.emit(f"{self.type_of(u)} {name} = {init};")
        elif u.uop is UOps.CONST:
            self.names[id(u)] = self.const(u)
        elif u.uop is UOps.LANE:
            self.names[id(u)] = d.lane.format(x=self.names[id(u.vin[0])], i=u.arg)
        elif u.uop in (UOps.LOAD, UOps.ALU, UOps.VECTORIZE, UOps.HORIZONTAL):
            self.names[id(u)] = name = self.fresh({UOps.LOAD: "val", UOps.VECTORIZE: "vec"}.get(u.uop, "alu"))
            if u.uop is UOps.LOAD:
                expr = self.load(u)
            elif u.uop is UOps.ALU:
                expr = self.alu(u)
            elif u.uop is UOps.VECTORIZE and u.dtype == dtypes.bool:
                lanes = ",".join(f"({self.names[id(v)]}?-1:0)" for v in u.vin)
                expr = d.vectorize.format(vt=self.mask_type(u.width), lanes=lanes)
            elif u.uop is UOps.VECTORIZE:
                expr = d.vectorize.format(vt=self.type_of(u), lanes=",".join(self.names[id(v)] for v in u.vin))
            else:
                expr = self.horizontal(u)
            self.emit(f"{self.type_of(u)} {name} = {expr};")
        elif u.uop is UOps.ASSIGN:
            self.emit(f"{self.names[id(u.vin[0])]} = {self.names[id(u.vin[1])]};")
        elif u.uop is UOps.STORE:
            self.store(u)

    def work_item_id(self, kind: str) -> str:
        template = {"global": self.d.global_id, "group": self.d.group_id, "local": self.d.local_id}[kind]
        return self.work_group_feature(template)

    def work_group_feature(self, template: str) -> str:
        if not template:
            raise ValueError(f"{self.d.name} kernels have no work-groups: kernel {self.prg.name} needs them")
        return template

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
        d = self.d
        used = sorted({u.dtype for u in self.prg.uops if u.dtype is not None})
        mulaccs = {u.dtype for u in self.prg.uops if u.uop is UOps.ALU and u.arg is TernaryOps.MULACC}
        chunks = [d.header, *(d.extensions[t] for t in used if t in d.extensions)]
        if dtypes.float16 in mulaccs:
            chunks.append(d.no_contract)
        if mulaccs - {dtypes.float16}:
            chunks.append(d.fma_header)
        chunks += [d.dtype_helpers[t] for t in used if t in d.dtype_helpers]
        chunks += [self.own_maths[name] for name in sorted(self.own_maths)]
        for (dtype, width), maths in sorted(self.vector_maths.items(), key=lambda x: (x[0][0], x[0][1])):
            chunks += d.vector_helpers(dtype, width, maths)
        if self.parallel_end is not None:
            chunks.append(PARALLEL_HEADER)
        return [c for c in chunks if c]  # NOTE: "" is a chunk the dialect does without

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
