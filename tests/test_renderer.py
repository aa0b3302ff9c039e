"""Layer contract for the renderer: golden kernel sources, no user text in any source, and exact constants.

tests/golden/<graph>.c and <graph>.cl hold the C and OpenCL source of every kernel of that graph's schedule, in
schedule order, rendered without a device. After an intended codegen change, rewrite them with
`UPDATE_GOLDEN=1 python -m pytest -q tests/test_renderer.py` and review the diff like code.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from specgrad import Device, Tensor, dtypes
from specgrad.codegen.linearizer import LinearizerOptions, linearize
from specgrad.device import Buffer, DeviceUnavailable
from specgrad.dtype import DType
from specgrad.ops import BinaryOps, BufferOps, ConstBuffer, LazyOp, MemBuffer, TernaryOps
from specgrad.renderer.cstyle import (
    C_DIALECT,
    KERNEL_MARK,
    OPENCL_DIALECT,
    CDialect,
    render,
    render_const,
    render_index,
)
from specgrad.schedule import create_schedule
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import Variable

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN", "") not in ("", "0")
# NOTE: what the CLANG and GPU devices pass to the linearizer; test_golden_options_match_devices keeps them honest
TARGETS: dict[str, tuple[LinearizerOptions, CDialect]] = {
    # NOTE: the widest vector and the thread split depend on the machine; the goldens fix them to AVX-512 and threads
    "c": (LinearizerOptions(optimize=True, vector_bytes=64, threads=True), C_DIALECT),
    "cl": (LinearizerOptions(global_dims=3, optimize=True, vector_bytes=16), OPENCL_DIALECT),
}
EVIL = 'evil; system("rm -rf /")'


def arange(*shape: int, dtype: type = np.float32, start: int = 0) -> Tensor:
    return Tensor(np.arange(start, start + int(np.prod(shape))).reshape(shape).astype(dtype), device="CPU")


def symbolic_ast() -> LazyOp:
    """data0 = data1 * 2 over a (n, 4) shape whose Variable has a hostile name."""
    st = ShapeTracker.from_shape((Variable(EVIL, 1, 10), 4))
    load = LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtypes.float32, st))
    two = LazyOp(BufferOps.CONST, (), ConstBuffer(2.0, dtypes.float32, st))
    return LazyOp(BufferOps.STORE, (LazyOp(BinaryOps.MUL, (load, two)),), MemBuffer(0, dtypes.float32, st))


def int_divmod() -> tuple[Tensor, Tensor]:
    a, b = arange(4, 4, dtype=np.int32, start=-8), arange(4, dtype=np.int32, start=-2)
    return a // b, a % b


def schedule_asts(*outs: Tensor) -> list[LazyOp]:
    return [si.ast for si in create_schedule([t.lazydata for t in outs]) if si.ast.op is BufferOps.STORE]


# graph name -> the kernel asts; every input is realized first, so only the graph's own kernels are scheduled
GRAPHS: dict[str, Callable[[], list[LazyOp]]] = {
    "elementwise_chain": lambda: schedule_asts((arange(4, 4) * arange(4, 4, start=3) + arange(4, 4, start=-8)).relu()),
    "broadcast_add": lambda: schedule_asts(arange(4, 4) + arange(4)),
    "reduce_axis": lambda: schedule_asts(arange(4, 6).sum(axis=1)),
    "reduce_full": lambda: schedule_asts(arange(4, 6).sum()),
    "matmul": lambda: schedule_asts(arange(4, 8) @ arange(8, 3)),
    "softmax": lambda: schedule_asts(arange(4, 6).softmax()),
    "pad_masked": lambda: schedule_asts(arange(4, 4).pad(((1, 1), (2, 0))) * 3),
    "permute": lambda: schedule_asts(arange(2, 3, 4).permute(2, 0, 1).contiguous()),
    "flip": lambda: schedule_asts(arange(4, 4).flip(0).contiguous()),
    "stride_shrink": lambda: schedule_asts(arange(6, 6)[::2, 1:5].contiguous()),
    "cast_half": lambda: schedule_asts(arange(4, 4).cast(dtypes.float16) + 1),
    "where_negative_const": lambda: schedule_asts((arange(4, 4) < arange(4)).where(arange(4, 4), -1.5)),
    "max_reduce": lambda: schedule_asts(arange(4, 6).max(axis=0)),
    "int_divmod": lambda: schedule_asts(*int_divmod()),
    "bool_compare": lambda: schedule_asts((arange(4, 4) < 5) != (arange(4, 4) > arange(4))),
    "symbolic_shape": lambda: [symbolic_ast()],
    # NOTE: big enough for the opts: vector lanes, register tiles, unrolling and (C) the thread split
    "matmul_tiled": lambda: schedule_asts(arange(32, 32) @ arange(32, 32)),
    "sum_rows_vector": lambda: schedule_asts(arange(4, 64).sum(axis=1)),
    "exp_vector": lambda: schedule_asts((arange(64) * 0.1).exp() / (arange(64) + 1).sqrt()),
}
EXPECTED_KERNELS = {"softmax": 3, "int_divmod": 2}


def render_graph(name: str, target: str) -> str:
    opts, dialect = TARGETS[target]
    asts = GRAPHS[name]()
    assert len(asts) == EXPECTED_KERNELS.get(name, 1), f"{name}: {len(asts)} kernels"
    return "\n".join(render(linearize(ast, opts), dialect) for ast in asts)


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_golden_source(name: str, target: str) -> None:
    got, path = render_graph(name, target), GOLDEN / f"{name}.{target}"
    assert got == render_graph(name, target), f"{name}: rendering is not deterministic"
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        if not path.exists() or path.read_text() != got:
            path.write_text(got)
        return
    if not path.exists():
        pytest.fail(f"no golden file {path}; create it with UPDATE_GOLDEN=1 python -m pytest -q {__file__}")
    want = path.read_text()
    if got != want:
        diff = difflib.unified_diff(want.splitlines(), got.splitlines(), f"golden/{path.name}", "rendered", lineterm="")
        pytest.fail(f"{name} ({target}) differs from {path} (UPDATE_GOLDEN=1 rewrites it if intended):\n" +
                    "\n".join(diff), pytrace=False)  # fmt: skip


def test_no_stray_golden_files() -> None:
    expected = {f"{name}.{target}" for name in GRAPHS for target in TARGETS}
    stray = sorted(p.name for p in GOLDEN.iterdir() if p.suffix in (".c", ".cl")) if GOLDEN.exists() else []
    assert set(stray) <= expected, f"golden files with no graph: {sorted(set(stray) - expected)}"


@pytest.mark.parametrize("name, target", [("CLANG", "c"), ("GPU", "cl")])
def test_golden_options_match_devices(name: str, target: str) -> None:
    try:
        dev = Device[name]
    except DeviceUnavailable as e:
        pytest.skip(f"{name} unavailable: {e}")
    want = TARGETS[target][0]
    # NOTE: these depend on the machine (work-groups: on a GPU, or where CL_WORK_GROUPS=1; test_work_groups.py)
    got = replace(
        dev.opts,
        vector_bytes=want.vector_bytes,
        threads=want.threads,
        work_groups=want.work_groups,
        accumulators=want.accumulators,
    )  # NOTE: the register tile is measured (test_throughput.py)
    assert got == want, f"{name} linearizes with {dev.opts}; the goldens use {want}"


# *** nothing from the user reaches the source ***

KEYWORDS = {"void", "const", "restrict", "for", "int", "float", "double", "half", "char", "short", "long", "unsigned",
            "uchar", "ushort", "uint", "ulong", "union", "static", "inline", "return", "if", "include", "math", "h",
            "pragma", "OPENCL", "EXTENSION", "STDC", "FP_CONTRACT", "OFF", "enable", "cl_khr_fp16", "cl_khr_fp64",
            "__kernel", "__global", "get_global_id", "INFINITY", "NAN", "typedef", "struct", "else", "sizeof",
            "__attribute__", "vector_size", "__builtin_memcpy", "select", "vload4", "vstore4", "p", "v", "m", "x",
            "i", "b", "a", "kernel", "float4", "double4", "s0", "s1", "s2", "s3"}  # fmt: skip
MATH = {"fma", "exp2", "log2", "sin", "sqrt", "fmod", "fabs", "rintf", "exp2f", "log2f", "sinf", "sqrtf", "fmodf"}
# NOTE: preprocessor tests for instruction sets and builtins, and the builtins the helpers use, are fixed text too
GENERATED = re.compile(
    r"(data|var|val|alu|acc|vec|gidx|ridx|lo|hi)\d+|[Er](_(\d+|n))+(_args|_body)?|sg_\w+|[a-z]|__has_builtin"
    r"|__builtin_(elementwise_(fma|sqrt)|ia32_(vfmadd|sqrt)p[sd]\d*(_mask)?)|__(SSE|SSE2|AVX|AVX512F|FMA|aarch64|clang)__"
    r"|defined|elif|endif|define|__builtin_fmaf?|__builtin_convertvector"
    r"|convert_(int|long)\d+|int\d+|long\d+|float\d+|as_(int|float)\d*"
)


def identifiers(src: str) -> set[str]:
    """Every C identifier (numbers, including hex floats like 0x1.8p+0f, are not identifiers)."""
    src = re.sub(r"/\*.*?\*/", " ", src)  # NOTE: the renderer's own comments
    return set(re.findall(r"\b[A-Za-z_]\w*", re.sub(r"\b0x[0-9a-fA-F.]+p[+-]?\d+f?", " ", src)))


def test_every_identifier_is_generated() -> None:
    """Names in any golden source are the renderer's own: data0.., var0.., alu0.., kernel names, C/OpenCL words."""
    for name in GRAPHS:
        for target in TARGETS:
            src = render_graph(name, target)
            odd = {w for w in identifiers(src) if w not in KEYWORDS | MATH and not GENERATED.fullmatch(w)}
            assert not odd, f"{name} ({target}): unexpected identifiers {sorted(odd)}"


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_variable_name_never_rendered(target: str) -> None:
    src = render_graph("symbolic_shape", target)
    assert "evil" not in src and "system" not in src and "rm -rf" not in src
    assert "const int var0" in src
    if target == "c":
        assert "gidx0 < (var0*4)" in src


def test_render_index_uses_given_names_only() -> None:
    v, w = Variable(EVIL, 1, 10), Variable("*/ x; /*", 0, 5)
    assert render_index(v * 4 + w, {v: "var0", w: "var1"}) == "((var0*4)+var1)"
    assert render_index((v * 3 + 2) // 2, {v: "var0"}) == "(((var0*3)/2)+1)"
    with pytest.raises(RuntimeError, match="no name"):
        render_index(v + 1, {})


# *** constants, exactly ***


def const_select_ast(vals: list, dtype: DType) -> LazyOp:
    """data0[i] = vals[i]: a WHERE chain over masked bool constants, so each literal is stored without arithmetic."""
    n, full = len(vals), ShapeTracker.from_shape((len(vals),))
    one = ShapeTracker.from_shape((1,))

    def const(val: object, dt: DType, st: ShapeTracker) -> LazyOp:
        return LazyOp(BufferOps.CONST, (), ConstBuffer(val, dt, st))

    ret = const(vals[-1], dtype, full)
    for i in reversed(range(n - 1)):
        at_i = const(True, dtypes.bool, one.pad(((i, n - 1 - i),)))
        ret = LazyOp(TernaryOps.WHERE, (at_i, const(vals[i], dtype, full), ret))
    return LazyOp(BufferOps.STORE, (ret,), MemBuffer(0, dtype, full))


def const_values(dtype: DType, n: int = 48) -> np.ndarray:
    """Specials and edges of `dtype`, then seeded random bit patterns (denormals and huge values included)."""
    rng = np.random.default_rng(7)
    if dtype == dtypes.bool:
        return np.array([True, False, True], dtype=np.bool_)
    if dtypes.is_float(dtype):
        info = np.finfo(dtype.np)
        tiny = np.array(1, dtype=f"u{dtype.itemsize}").view(dtype.np)  # the smallest denormal
        specials = [np.inf, -np.inf, np.nan, -0.0, 0.0, tiny, -tiny, info.tiny, info.max, info.min, info.eps, 0.1]
        bits = rng.integers(0, 2 ** (8 * dtype.itemsize), n, dtype=np.uint64).astype(f"u{dtype.itemsize}")
        rand = bits.view(dtype.np)
        return np.concatenate([np.array(specials, dtype=dtype.np), rand[~np.isnan(rand)]])
    info = np.iinfo(dtype.np)
    edges = [0, 1, info.max, info.min, info.max - 1, info.min + 1] + ([-1] if info.min < 0 else [])
    rand = rng.integers(int(info.min), int(info.max), n, dtype=dtype.np, endpoint=True)
    return np.concatenate([np.array(edges, dtype=dtype.np), rand])


def assert_same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if want.dtype.kind == "f":
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), f"{what}: nan at {np.flatnonzero(np.isnan(got) != nan)}"
        got, want = got[~nan], want[~nan]
    ubits = f"u{want.dtype.itemsize}" if want.dtype.kind != "b" else "u1"
    bad = np.flatnonzero(got.view(ubits) != want.view(ubits))
    assert bad.size == 0, f"{what}: {[(want[i], got[i]) for i in bad[:8]]} (wanted, got)"


@pytest.mark.parametrize("dtype", list(dtypes.fields().values()), ids=str)
@pytest.mark.parametrize("name", ["CLANG", "GPU"])
def test_const_literals_are_exact(name: str, dtype: DType) -> None:
    """Each literal, compiled by the device's real compiler, reproduces numpy's bits (nan: any nan)."""
    try:
        dev = Device[name]
    except DeviceUnavailable as e:
        pytest.skip(f"{name} unavailable: {e}")
    vals = const_values(dtype)
    buf = Buffer(name, len(vals), dtype)
    dev.get_runner(const_select_ast(vals.tolist(), dtype)).exec([buf])
    assert_same_bits(buf.numpy(), vals, f"{dtype} literals on {name}")


F32 = np.finfo(np.float32)
SPECIALS = [(v, dtypes.float32) for v in (np.inf, -np.inf, np.nan, -0.0, float(F32.smallest_subnormal), float(F32.max))]
SPECIALS += [(-0.0, dtypes.float64), (5e-324, dtypes.float64), (-(2**63), dtypes.int64)]


@pytest.mark.parametrize("val, dtype", SPECIALS, ids=lambda x: str(x))
def test_full_stores_exact_bits(device: str, val: float, dtype: DType) -> None:
    # NOTE: an unusual shape, so no other test's +0.0 kernel answers for -0.0 (see test_numerics' zero sign xfail)
    got = Tensor.full((3, 1, 7), val, dtype=dtype, device=device).numpy()
    assert_same_bits(got.reshape(-1), np.full(21, val, dtype=dtype.np), f"Tensor.full({val}, {dtype}) on {device}")


@pytest.mark.parametrize("dialect", [C_DIALECT, OPENCL_DIALECT], ids=lambda d: d.name)
def test_negative_literals_are_parenthesized(dialect: CDialect) -> None:
    # NOTE: `a - -1` rendered bare is `(a--1)`, a decrement and a syntax error
    for val, dtype in [(-1.0, dtypes.float32), (-5, dtypes.int32), (-np.inf, dtypes.float32), (-(2**31), dtypes.int32)]:
        text = render_const(val, dtype, dialect)
        assert text.startswith("(") and text.endswith(")"), text
    assert render_const(-(2**63), dtypes.int64, dialect) == "(-9223372036854775807ll-1)"
    assert render_const(1.5, dtypes.float32, dialect) == "0x1.8p+0f"
    assert render_const(float("nan"), dtypes.float32, dialect) == "NAN"


@pytest.mark.parametrize("dialect", [C_DIALECT, OPENCL_DIALECT], ids=lambda d: d.name)
def test_dialect_table_names_every_dtype(dialect: CDialect) -> None:
    # NOTE: a dtype missing from a dialect's table would only fail deep in rendering, on the first kernel using it
    every = set(dtypes.fields().values())
    floats = {dt for dt in every if dtypes.is_float(dt)}
    assert every <= set(dialect.type_names), f"{dialect.name}: no type name for {every - set(dialect.type_names)}"
    assert floats <= set(dialect.math_suffix), f"{dialect.name}: no math suffix for {floats - set(dialect.math_suffix)}"


def test_minus_a_negative_constant_compiles(device: str) -> None:
    x = np.array([1.0, -2.0, 0.5], np.float32)
    np.testing.assert_array_equal((Tensor(x, device=device) - (-1.5)).numpy(), x + 1.5)
    i = np.array([3, -4, 0], np.int32)
    np.testing.assert_array_equal((Tensor(i, device=device) - (-5)).numpy(), i + 5)


def scalar_c_source(t: Tensor) -> str:
    """The C source of t's one kernel, rendered without vectors (the scalar path every odd-sized kernel takes)."""
    (si,) = [s for s in create_schedule([t.lazydata]) if s.ast.op is BufferOps.STORE]
    return render(linearize(si.ast, LinearizerOptions(optimize=True, threads=True)), C_DIALECT)


def test_scalar_float_selects_have_no_branch() -> None:
    # NOTE: a float `c?a:b` compiles to a branch that real data (relu, pooling) mispredicts half the time
    x, y = Tensor.empty(5, 7), Tensor.empty(5, 7)
    for t in ((x + 1).relu(), x.maximum(y), (x < y).where(x, y * 2)):
        src = scalar_c_source(t)
        body = src.split(KERNEL_MARK)[1]
        assert "sg_self(" in body and "?" not in body, body
    # a max reduce keeps the one-instruction `a>b?a:b` on its accumulator, the nan test aside
    body = scalar_c_source(x.max(axis=1)).split(KERNEL_MARK)[1]
    assert "((acc0)>(val0))?(acc0):(val0)" in body and "sg_self" not in body, body


SELECT_VALUES = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-40, 3.4e38], np.float32)


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64], ids=lambda d: d.name)
def test_scalar_max_and_where_match_numpy(device: str, dtype: DType) -> None:
    # NOTE: every pair of special values, in a 10x10 shape (rows of 10 take no vectors): nan wins either side
    a = np.repeat(SELECT_VALUES, 10).astype(dtype.np).reshape(10, 10)
    b = np.tile(SELECT_VALUES, 10).astype(dtype.np).reshape(10, 10)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    np.testing.assert_array_equal(ta.maximum(tb).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal((ta < tb).where(ta, tb).numpy(), np.where(a < b, a, b))
    np.testing.assert_array_equal(ta.relu().numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal(ta.max(axis=1).numpy(), a.max(axis=1))
    np.testing.assert_array_equal(tb.max(axis=0).numpy(), b.max(axis=0))
