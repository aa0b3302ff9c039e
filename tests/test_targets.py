"""Device targets: vector widths come from what the compiler (CLANG) or the device's own compiler (GPU) proves it
handles, never from what the CPU or the device advertises; a narrower target can be forced (CPU_TARGET,
CL_VECTOR_WIDTH) and then is what the kernels use."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import device_problem

from specgrad import Context, Device, Tensor
from specgrad.device import BuildFailed, DeviceUnavailable, KernelBuildError
from specgrad.runtime import ops_clang, ops_gpu, throughput
from specgrad.runtime.ops_gpu import PROBE_WIDTHS, probe_expected, probe_inputs, probe_types, proven_width

NARROW = "x86-64-v3"  # AVX2 and FMA, no AVX-512
x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason=f"{NARROW} is an x86-64 target")


def run_python(code: str, **env: str) -> str:
    res = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout


# *** CLANG: the compiler's target ***


@x86_only
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_vector_bytes_come_from_the_compilers_target(cc: str) -> None:
    if (path := shutil.which(cc)) is None:
        pytest.skip(f"{cc} not installed")
    assert ops_clang.target_vector_bytes(ops_clang.target_macros(path, NARROW)) == 32
    assert ops_clang.target_vector_bytes(ops_clang.target_macros(path, "x86-64")) == 16
    native = ops_clang.target_macros(path, "native")
    assert ops_clang.target_vector_bytes(native) == (
        64 if "__AVX512F__" in native else 32 if "__AVX__" in native else 16
    )


def test_no_simd_target_stays_scalar() -> None:
    assert ops_clang.target_vector_bytes(frozenset({"__riscv"})) == 0
    assert ops_clang.target_vector_bytes(frozenset({"__aarch64__", "__ARM_NEON"})) == 16


def test_target_needing_what_this_cpu_lacks_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = {"native": frozenset({"__SSE2__", "__AVX__"}), "big": frozenset({"__SSE2__", "__AVX__", "__AVX512F__"})}
    monkeypatch.setattr(ops_clang, "target_macros", lambda path, target: fake[target])
    with pytest.raises(DeviceUnavailable, match="CPU_TARGET=big needs __AVX512F__, which -march=native here lacks"):
        ops_clang.check_target("cc", "big")
    assert ops_clang.check_target("cc", "native") == fake["native"]


NARROW_RUN = """
import json
import numpy as np
from specgrad import Device, Tensor
from specgrad.codegen.linearizer import linearize
from specgrad.ops import BufferOps
from specgrad.renderer.cstyle import C_DIALECT, render
from specgrad.schedule import create_schedule

dev = Device["CLANG"]
rng = np.random.default_rng(0)
out = {"vector_bytes": dev.opts.vector_bytes, "srcs": [], "got": []}
for dtype in (np.float32, np.float64):
    a, b = rng.standard_normal((32, 64)).astype(dtype), rng.standard_normal((64, 48)).astype(dtype)
    x, y = Tensor(a, device="CLANG"), Tensor(b, device="CLANG")
    t = ((x @ y).relu() + 1).sqrt().exp2() + x.sum(axis=1, keepdim=True)
    out["srcs"] += [render(linearize(si.ast, dev.opts), C_DIALECT) for si in create_schedule([t.lazydata])
                    if si.ast.op is BufferOps.STORE]
    out["got"].append(t.numpy().tolist())
print(json.dumps(out))
"""


@x86_only
def test_forced_narrow_target_renders_no_512_bit_vectors_and_computes_right(clang: None) -> None:
    out = json.loads(run_python(NARROW_RUN, CPU_TARGET=NARROW))
    assert out["vector_bytes"] == 32
    src = "\n".join(out["srcs"])
    assert "sg_float8" in src and "sg_double4" in src, "vectors should engage at these sizes"
    assert "sg_float16" not in src and "sg_double8" not in src and "_mm512" not in src
    rng = np.random.default_rng(0)
    for got, dtype in zip(out["got"], (np.float32, np.float64), strict=True):
        a, b = rng.standard_normal((32, 64)).astype(dtype), rng.standard_normal((64, 48)).astype(dtype)
        want = np.exp2(np.sqrt(np.maximum(a @ b, 0) + 1)) + a.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


@x86_only
def test_narrow_kernels_are_psabi_clean(clang: None) -> None:
    """gcc warns (-Wpsabi) when a vector is wider than the target's registers; a narrow target's kernels have none."""
    if (gcc := shutil.which("gcc")) is None:
        pytest.skip("gcc not installed")
    flags = [*ops_clang.CFLAGS, *ops_clang.target_flags(NARROW), "-Werror=psabi", "-c", "-o", os.devnull]
    for src in json.loads(run_python(NARROW_RUN, CPU_TARGET=NARROW))["srcs"]:
        res = subprocess.run([gcc, *flags, "-x", "c", "-"], input=src, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr


# *** CLANG: each width proven by probe kernels ***


def probe_compiler(cc: str, target: str) -> tuple[str, object]:
    if (path := shutil.which(cc)) is None:
        pytest.skip(f"{cc} not installed")
    flags = (*ops_clang.CFLAGS, *ops_clang.target_flags(target))
    return f"{path} {flags} test-{os.getpid()}", lambda src: ops_clang.compile_c(path, flags, src)


@x86_only
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_probe_refuses_vectors_wider_than_the_target(cc: str, tmp_path: Path) -> None:
    """What the target's macros say is only the ceiling: told the widest is 64 bytes on an AVX2 target (a CPU that
    advertises more than its compiler enables), the 64-byte kernels warn of an ABI change and 32 bytes is used."""
    identity, compile_fn = probe_compiler(cc, NARROW)
    with Context(CACHEDIR=str(tmp_path)):
        assert ops_clang.proven_vector_bytes(identity, compile_fn, 64) == 32
        assert ops_clang.proven_vector_bytes(identity, compile_fn, 16) == 16


@x86_only
def test_probe_refuses_a_width_that_computes_wrong_or_crashes(tmp_path: Path) -> None:
    identity, compile_fn = probe_compiler("cc", NARROW)

    def half_sums(src: str) -> bytes:  # NOTE: PoCL's fault, in C: a 32-byte vector's sum adds only its first half
        return compile_fn(src.replace("lo4 = lo4 + hi4;", "lo4 = lo4 + lo4 * 0;") if "sg_float8" in src else src)

    def crashes(src: str) -> bytes:
        return compile_fn(src.replace("{", "{ *(volatile int*)0 = 0;", 1) if "sg_double4" in src else src)

    with Context(CACHEDIR=str(tmp_path)):
        assert ops_clang.proven_vector_bytes(identity + " half", half_sums, 32) == 16
        assert ops_clang.proven_vector_bytes(identity + " crash", crashes, 32) == 16
        assert ops_clang.proven_vector_bytes(identity + " crash", crashes, 32) == 16, "the verdict is cached"
    assert any((tmp_path / "clang-widths").iterdir())


def tile_compiles(compile_fn: Callable[[str], bytes], log: list[tuple[str, bool]]) -> Callable[[str], bytes]:
    """compile_fn, noting each tile probe kernel it builds: (its name, whether it has 32-byte vectors)."""

    def compile_noted(src: str) -> bytes:
        if name := next((f"tile{a}" for a in (1, 8, 16) if f" tile{a}(" in src), None):
            log.append((name, "sg_float8" in src))
        return compile_fn(src)

    return compile_noted


def test_a_cold_start_compiles_the_tile_probe_once_meanwhile(clang: None, tmp_path: Path) -> None:
    """Cold, the tile probe's kernels compile while the widths are probed, at the widest width, which is proven:
    each once, and the device gets what the probes one after the other find."""
    path, target = ops_clang.find_compiler(), "native"
    flags = (*ops_clang.CFLAGS, *ops_clang.target_flags(target))
    identity, widest = f"{path} {flags} cold-{os.getpid()}", ops_clang.target_vector_bytes(
        ops_clang.check_target(path, target))  # fmt: skip
    log: list[tuple[str, bool]] = []
    compile_fn = tile_compiles(lambda src: ops_clang.compile_c(path, flags, src), log)
    with Context(CACHEDIR=str(tmp_path / "together")):
        vector_bytes, tiles = ops_clang.probe_device(identity, compile_fn, widest)
    together = sorted(name for name, _ in log)
    with Context(CACHEDIR=str(tmp_path / "in-turn")):
        assert vector_bytes == ops_clang.proven_vector_bytes(identity, compile_fn, widest) == widest
        alone = ops_clang.measured_throughput(identity, compile_fn, vector_bytes)
    assert (tiles is None) == (alone is None) and (tiles is None or tiles.accumulators in (8, 16))
    assert together == (["tile1", "tile16", "tile8"] if widest else []), "each once"


@x86_only
def test_a_cold_start_compiles_the_tile_probe_again_at_a_narrower_proven_width(tmp_path: Path) -> None:
    identity, compile_fn = probe_compiler("cc", NARROW)

    def half_sums(src: str) -> bytes:  # NOTE: as in the test above: 32-byte vectors compute wrong sums
        return compile_fn(src.replace("lo4 = lo4 + hi4;", "lo4 = lo4 + lo4 * 0;") if "sg_float8" in src else src)

    log: list[tuple[str, bool]] = []
    with Context(CACHEDIR=str(tmp_path)):
        vector_bytes, tiles = ops_clang.probe_device(identity, tile_compiles(half_sums, log), 32)
        assert vector_bytes == 16
        assert tiles is None or ops_clang.cached_throughput(identity, 16) == tiles
        assert ops_clang.cached_throughput(identity, 32) is None, "what was measured is filed under the width used"
    assert sorted(log) == sorted([(n, w) for n in ("tile1", "tile8", "tile16") for w in (True, False)])


def test_a_warm_start_renders_no_probe_kernel(clang: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdicts are found by the compiler, its flags, the CPU and specgrad's source: a warm start renders no
    probe kernel to look them up (that took ~45 ms of every start)."""
    path, flags = ops_clang.find_compiler(), (*ops_clang.CFLAGS, *ops_clang.target_flags("native"))
    identity, widest = f"{path} {flags} warm-{os.getpid()}", 32
    with Context(CACHEDIR=str(tmp_path)):
        cold = ops_clang.probe_device(identity, lambda src: ops_clang.compile_c(path, flags, src), widest)

        def rendered(*args: object) -> object:
            raise AssertionError("a probe kernel was rendered on a warm start")

        monkeypatch.setattr(ops_clang, "probe_sources", rendered)
        monkeypatch.setattr(throughput, "probe_sources", rendered)
        assert ops_clang.probe_device(identity, rendered, widest) == cold  # type: ignore[arg-type]


def test_probe_kernels_use_the_width_they_prove(clang: None) -> None:
    """A probe that rendered scalar kernels would prove nothing: each one has the width's vector type."""
    for width in (16, 32, 64):
        for prg, src in ops_clang.probe_sources(width):
            dtype = prg.buffers[0][1]
            assert f"sg_{'float' if dtype.itemsize == 4 else 'double'}{width // dtype.itemsize} " in src


# *** a kernel that does not build: an error naming it and its device ***


@pytest.mark.parametrize("dev_name", ["CLANG", "GPU"])
def test_kernel_that_does_not_build_names_itself_and_the_device(
    dev_name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if (problem := device_problem(dev_name)) is not None:
        pytest.skip(problem)
    dev = Device[dev_name]
    monkeypatch.setattr(dev, "runners", {})
    render = dev.render
    monkeypatch.setattr(dev, "render", lambda prg: render(prg).replace("{", "{ this is not C;", 1))
    with Context(CACHEDIR=str(tmp_path), COMPILE_CACHE=0):
        with pytest.raises(KernelBuildError) as e:
            (Tensor([1.0, 2.0], device=dev_name) * 3).realize()
    msg = str(e.value)
    assert f"the {dev_name} device (" in msg and "could not build kernel E_2" in msg and "error" in msg, msg
    saved = next((tmp_path / "failed").iterdir())
    assert saved.name.startswith("E_2-") and "this is not C" in saved.read_text()
    assert saved.suffix == (".c" if dev_name == "CLANG" else ".cl")
    assert isinstance(e.value, DeviceUnavailable), "the CLI reports it as a device problem (exit 3), no traceback"


@x86_only
def test_c_build_with_an_abi_warning_is_a_failure() -> None:
    """A vector wider than the target's registers is passed in memory, not registers: gcc only warns (-Wpsabi)."""
    if (gcc := shutil.which("gcc")) is None:
        pytest.skip("gcc not installed")
    src = ("typedef float v16 __attribute__((vector_size(64)));\n"
           "v16 twice(v16 a) { return a + a; }\n")  # fmt: skip
    flags = (*ops_clang.CFLAGS, *ops_clang.target_flags(NARROW))
    with pytest.raises(BuildFailed, match="changes the ABI"):
        ops_clang.compile_c(gcc, flags, src)
    assert ops_clang.compile_c(gcc, (*ops_clang.CFLAGS, *ops_clang.target_flags("native")), src)


class FakeProgram:
    """pyopencl's Program as compile_cl uses it: a build sleeps a little and counts how many run at once; its log is
    the class's `log`. Each test uses a subclass of its own (fake_program)."""

    log, active, most = "", 0, 0

    def __init__(self, context: object, src: str) -> None:
        pass

    def build(self) -> FakeProgram:
        cls = type(self)
        cls.active += 1
        cls.most = max(cls.most, cls.active)
        time.sleep(0.02)
        cls.active -= 1
        return self

    def get_build_info(self, device: object, what: object) -> str:
        return type(self).log

    def get_info(self, what: object) -> list[bytes]:
        return [b"binary"]


def fake_program(monkeypatch: pytest.MonkeyPatch) -> tuple[type[FakeProgram], SimpleNamespace]:
    if ops_gpu.cl is None:
        pytest.skip("pyopencl not installed")
    program = type("Program", (FakeProgram,), {})
    monkeypatch.setattr(ops_gpu.cl, "Program", program)
    return program, SimpleNamespace(context=None, device=None, name="fake", build_lock=threading.Lock())


def test_opencl_build_with_an_abi_warning_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """PoCL built float16 for a target without avx512f with only a warning in its log, and summed 8 of 16 lanes."""
    program, ctx = fake_program(monkeypatch)
    program.log = "warning: AVX vector return of type 'float16' without 'avx512f' enabled changes the ABI"
    with pytest.raises(BuildFailed, match="CL_VECTOR_WIDTH=4"):
        ops_gpu.compile_cl(ctx, "__kernel void k() {}")
    program.log = "warning: something harmless"
    assert ops_gpu.compile_cl(ctx, "__kernel void k() {}") == b"binary"


# *** GPU: each width proven by a probe kernel ***


def fake_results(widths: tuple[int, ...], fp64: bool, half_sum_at: int = 0) -> dict:
    """What a device computes for each probe: right, except that at width `half_sum_at` a vector's sum adds only its
    first half of lanes (PoCL compiling float16 for a target without avx512f)."""
    ret: dict = {}
    for width in widths:
        ret[width] = {}
        for name, (t, lanes) in probe_types(width, fp64).items():
            x = probe_inputs(lanes, np.float32 if t == "float" else np.float64)
            out, sums = probe_expected(x, lanes)
            if width == half_sum_at:
                sums = x.reshape(-1, lanes)[:, : lanes // 2].sum(axis=1)
            ret[width][name] = (out.tolist(), sums.tolist())
    return ret


@pytest.mark.parametrize("fp64", [False, True])
def test_probe_rejects_a_width_that_sums_half_the_lanes(fp64: bool) -> None:
    assert proven_width(PROBE_WIDTHS, fp64, fake_results(PROBE_WIDTHS, fp64)) == 16
    assert proven_width(PROBE_WIDTHS, fp64, fake_results(PROBE_WIDTHS, fp64, half_sum_at=16)) == 8
    assert proven_width(PROBE_WIDTHS, fp64, fake_results(PROBE_WIDTHS, fp64, half_sum_at=4)) == 1


def test_probe_width_missing_or_wrong_elementwise_is_not_used() -> None:
    results = fake_results(PROBE_WIDTHS, True)
    aborted = {w: r for w, r in results.items() if w < 16}  # NOTE: the child died building float16
    assert proven_width(PROBE_WIDTHS, True, aborted) == 8
    assert proven_width(PROBE_WIDTHS, True, {**aborted, 16: None}) == 8, "float16 did not build"
    out, sums = results[8]["probe_double"]
    results[8]["probe_double"] = ([v + 1 for v in out], sums)
    assert proven_width(PROBE_WIDTHS, True, results) == 4


def test_probe_survives_a_child_that_aborts(monkeypatch: pytest.MonkeyPatch) -> None:
    child = "import json, os; print(json.dumps([4, {'probe_float': [[1], [2]]}]), flush=True); os.abort()"
    monkeypatch.setattr(ops_gpu, "PROBE_CHILD", child)
    ctx = SimpleNamespace(index=0, has_fp64=False)
    assert ops_gpu.run_probes(ctx, (4, 8)) == ({4: {"probe_float": [[1], [2]]}}, True)
    monkeypatch.setattr(ops_gpu, "PROBE_CHILD", "import sys; print('[4, null]'); sys.exit(1)")
    assert ops_gpu.run_probes(ctx, (4, 8)) == ({4: None}, False), "a child that fails is no verdict"


def gpu_ctx() -> ops_gpu.CLContext:
    try:
        return ops_gpu.CLContext()
    except DeviceUnavailable as e:
        pytest.skip(f"GPU unavailable: {e}")


def test_gpu_uses_the_width_its_probe_proves() -> None:
    ctx = gpu_ctx()
    widths = ops_gpu.probe_widths(ctx)
    results, conclusive = ops_gpu.run_probes(ctx, widths)
    assert conclusive and 4 in results, "float4 should build and run on any OpenCL device"
    assert Device["GPU"].opts.vector_bytes == 4 * proven_width(widths, ctx.has_fp64, results)


def test_gpu_vector_width_can_be_forced_narrower() -> None:
    gpu_ctx()
    code = """
import numpy as np
from specgrad import Device, Tensor
x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
w = np.random.default_rng(1).standard_normal((16, 3, 3, 3)).astype(np.float32)
xt, wt = Tensor(x, device="GPU", requires_grad=True), Tensor(w, device="GPU", requires_grad=True)
bt = Tensor.zeros(16, device="GPU", requires_grad=True)
xt.conv2d(wt, bt).relu().sum().backward()
print(Device["GPU"].opts.vector_bytes, bt.grad.numpy().tolist())
"""
    vector_bytes, grad = run_python(code, CL_VECTOR_WIDTH="8").split(" ", 1)
    assert vector_bytes == "32"
    x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((16, 3, 3, 3)).astype(np.float32)
    out = np.einsum("bchwij,ocij->bohw", np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3)), w)
    np.testing.assert_array_equal(json.loads(grad), (out > 0).sum(axis=(0, 2, 3)))  # NOTE: relu's gradient, summed


def test_opencl_builds_run_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """PoCL crashed (SIGSEGV) building programs on several compile threads at once: builds take the context's lock."""
    program, ctx = fake_program(monkeypatch)
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda src: ops_gpu.compile_cl(ctx, src), ["a", "b", "c", "d"])) == [b"binary"] * 4
    assert program.most == 1
