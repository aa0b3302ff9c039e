"""The GPU device builds its programs in child processes (build servers): a compiler crash there is a KernelBuildError,
not the end of this process; a kernel's first launch here compiles nothing (the child launched it first); PoCL's kernel
cache is a checked folder of the user's own."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import device_problem

from specgrad import Context, Device, Tensor, Variable
from specgrad.cache import folder_tag
from specgrad.codegen.linearizer import Program, linearize
from specgrad.device import Compiled, GlobalCounters, KernelBuildError
from specgrad.helpers import prod
from specgrad.ops import BufferOps
from specgrad.runtime import ops_gpu
from specgrad.schedule import create_schedule

ROOT = Path(__file__).resolve().parents[1]
POCL = "Portable Computing Language"
# NOTE: a build server whose compiler aborts (as PoCL's LLVM did) on any source holding the marker
MARKER = "SG_TEST_ABORT"
ABORTING_CHILD = f"""
import os, sys
from specgrad.runtime import ops_gpu
build = ops_gpu.compile_cl
ops_gpu.compile_cl = lambda ctx, src, launch=None: os.abort() if {MARKER!r} in src else build(ctx, src, launch)
ops_gpu.serve_builds(int(sys.argv[1]))
"""


@pytest.fixture
def gpu() -> Compiled:
    if problem := device_problem("GPU"):
        pytest.skip(f"GPU unavailable: {problem}")
    return Device["GPU"]  # type: ignore[return-value]


@pytest.fixture
def servers(gpu: Compiled, monkeypatch: pytest.MonkeyPatch) -> Iterator[ops_gpu.BuildServers]:
    """Fresh build servers as the GPU device's compile function, with none of the device's kernels known yet."""
    ret = ops_gpu.BuildServers(gpu.compiler.compile.index)
    monkeypatch.setattr(gpu.compiler, "compile", ret)
    monkeypatch.setattr(gpu, "runners", {})
    yield ret
    ret.close()


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("POCL_")}  # NOTE: this process set its own
    res = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=300,
                         cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return res


# *** a crash costs the child ***


def test_a_compiler_crash_is_an_error_naming_the_kernel_and_the_next_kernel_builds(
    gpu: Compiled, servers: ops_gpu.BuildServers, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ops_gpu, "SERVER_CHILD", ABORTING_CHILD)
    render, marked = gpu.render, [True]
    monkeypatch.setattr(gpu, "render", lambda prg: render(prg) + (f"\n// {MARKER}" if marked[0] else ""))
    with Context(CACHEDIR=str(tmp_path), COMPILE_CACHE=0):
        with pytest.raises(KernelBuildError) as e:
            (Tensor([1.0, 2.0], device="GPU") * 3).realize()
        msg = str(e.value)
        assert "the GPU device (OpenCL on" in msg and "could not build kernel E_2" in msg, msg
        assert "crashed (SIGABRT)" in msg and "this process is unharmed" in msg, msg
        saved = next((tmp_path / "failed").iterdir())
        assert saved.name.startswith("E_2-") and saved.suffix == ".cl" and MARKER in saved.read_text()
        (crashed,) = servers.servers
        assert crashed.proc.returncode == -6
        pid = crashed.proc.pid
        marked[0] = False
        np.testing.assert_array_equal((Tensor([1.0, 2.0, 3.0], device="GPU") + 5).numpy(), [6.0, 7.0, 8.0])
    assert servers.servers == [crashed] and crashed.proc.pid != pid, "the server was started again"


def test_a_build_error_comes_back_from_the_server(servers: ops_gpu.BuildServers) -> None:
    with pytest.raises(ops_gpu.BuildFailed, match="error"):
        servers("__kernel void k(__global float* x) { this is not C; }")
    assert servers(f"__kernel void k(__global float* x) {{ x[0] = 1.0f; }} // {MARKER}")
    assert len(servers.servers) == 1 and servers.servers[0].proc.poll() is None, "a build error does not end it"


# *** the child launches the kernel first ***

COLD_RUN = """
import json, os
import numpy as np
from specgrad import Device, Tensor
x = np.arange(4096, dtype=np.float32)
ys = [(Tensor(x, device="GPU") * 2 + 1).numpy(), Tensor(x, device="GPU").reshape(64, 64).sum(1).numpy()]
right = np.array_equal(ys[0], x * 2 + 1) and np.allclose(ys[1], x.reshape(64, 64).sum(1))
print(json.dumps([bool(right), len(Device["GPU"].compiler.compile.servers), os.environ.get("POCL_KERNEL_CACHE")]))
"""


def is_pocl(gpu: Compiled) -> bool:
    return POCL in gpu.description


@pytest.mark.parametrize("cache", [1, 0])
def test_a_kernel_built_by_the_server_computes_right_and_is_not_compiled_here(
    gpu: Compiled, cache: int, tmp_path: Path
) -> None:
    """PoCL compiles each work-group size at a kernel's first launch, so the server launches it first: this process
    then only loads machine code (PoCL's debug output says which), from the binary itself where PoCL's cache is off."""
    if not is_pocl(gpu):
        pytest.skip("PoCL's debug output is how this test sees where a work-group size is compiled")
    env = {"CACHEDIR": str(tmp_path), "COMPILE_CACHE": str(cache), "POCL_DEBUG": "general", "CL_VECTOR_WIDTH": "1"}
    res = run_python(COLD_RUN, env)
    right, started, kernel_cache = json.loads(res.stdout.splitlines()[-1])
    assert right and started >= 1 and kernel_cache == (None if cache else "0")
    used, built = wg_functions(res.stderr)
    if not used and not built:
        pytest.skip("this PoCL prints no debug output")
    assert not built, f"a work-group size was compiled in this process: {built}"
    assert len(used) == 2, res.stderr[-3000:]
    if cache:
        (pocl,) = tmp_path.glob("pocl-*")  # NOTE: named by the user's key (cache.folder_tag)
        assert all(str(pocl) in line for line in used), used
        shutil.rmtree(pocl)
        res = run_python(COLD_RUN, env)
        assert json.loads(res.stdout.splitlines()[-1])[:2] == [True, 0], "a warm run started a build server"
        used, built = wg_functions(res.stderr)
        assert len(used) == 2 and not built, "the cached binary lacks the work-group machine code"


def wg_functions(stderr: str) -> tuple[list[str], list[str]]:
    """PoCL's debug lines for the work-group functions this process loaded, and for those it compiled."""
    lines = stderr.splitlines()
    return [s for s in lines if "Using a cached WG function" in s], [s for s in lines if "Built a specialized WG" in s]


# *** a disk cache hit starts no child ***


def test_a_disk_cache_hit_starts_no_build_server(
    gpu: Compiled, servers: ops_gpu.BuildServers, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with Context(CACHEDIR=str(tmp_path), CL_VECTOR_WIDTH=1):
        opened = ops_gpu.GPUDevice()
        assert opened.compiler.compile.servers == [], "opening the device started a build server"
        (Tensor([1.0, 2.0, 3.0], device="GPU") * 7).realize()
        assert len(servers.servers) == 1
        fresh = ops_gpu.BuildServers(servers.index)
        monkeypatch.setattr(gpu.compiler, "compile", fresh)
        monkeypatch.setattr(gpu, "runners", {})
        GlobalCounters.reset()
        np.testing.assert_array_equal((Tensor([1.0, 2.0, 3.0], device="GPU") * 7).numpy(), [7.0, 14.0, 21.0])
    assert GlobalCounters.cache_hits == 1 and GlobalCounters.compile_count == 0
    assert fresh.servers == [], "a disk cache hit started a build server"


# *** how the child launches a kernel ***


def programs(t: Tensor, gpu: Compiled) -> list[tuple[Program, list[int]]]:
    """Each kernel of `t` as the GPU device linearizes it, with its buffers' sizes in bytes."""
    ret = []
    for si in create_schedule([t.lazydata]):
        if si.ast.op is BufferOps.STORE:
            ret.append((linearize(si.ast, gpu.opts), [prod(b.shape) * b.dtype.itemsize for b in (si.out, *si.inputs)]))
    return ret


def test_the_launch_covers_every_buffer_the_kernel_reaches(gpu: Compiled) -> None:
    rng = np.random.default_rng(0)
    a, b = (Tensor(rng.standard_normal(s).astype(np.float32), device="GPU") for s in ((32, 48), (48, 16)))
    graphs = [a * 2 + 1, a.sum(1), a @ b, a.pad(((1, 2), (0, 3))).permute(1, 0) * 3, a.reshape(-1)[5:900:3]]
    for t in graphs:
        for prg, sizes in programs(t, gpu):
            launch = ops_gpu.launch_of(prg, 256)
            assert launch is not None and launch.name == prg.name
            assert launch.global_size == tuple(prg.global_size)
            assert launch.local_size == ops_gpu.local_size(launch.global_size, 256)
            index = {idx: i for i, (idx, _) in enumerate(prg.buffers)}
            assert len(launch.nbytes) == len(prg.buffers)
            for idx, i in index.items():
                assert launch.nbytes[i] >= sizes[idx], (prg.name, idx, launch.nbytes, sizes)
            assert sum(launch.nbytes) <= 4 * sum(sizes) + 64, "scratch far beyond what the kernel reaches"


def test_no_launch_where_it_depends_on_a_variable_or_is_too_large(gpu: Compiled) -> None:
    i = Variable("i", 1, 16).bind(5)
    x = Tensor(np.arange(15, dtype=np.float32), device="GPU").reshape(3, 5).reshape(3, i)
    ((prg, _),) = programs(x * 2, gpu)
    assert prg.vars and ops_gpu.launch_of(prg, 256) is None
    ((prg, sizes),) = programs(Tensor(np.ones((1024, 1024), dtype=np.float32), device="GPU") * 2, gpu)
    assert ops_gpu.launch_of(prg, 256) is not None
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ops_gpu, "WARMUP_MAX_BYTES", sum(sizes) - 1)
        assert ops_gpu.launch_of(prg, 256) is None


def test_a_launch_the_device_refuses_does_not_fail_the_build(gpu: Compiled) -> None:
    ctx = ops_gpu.CLContext()
    src = "__kernel void k(__global float* x) { x[get_global_id(0)] = 1.0f; }"
    assert ops_gpu.compile_cl(ctx, src, ops_gpu.Launch("k", (6,), (4,), (24,)))  # NOTE: 4 does not divide 6


# *** PoCL's kernel cache is the user's own ***

ENV_RUN = """
import json, os
from specgrad.runtime.ops_gpu import CLContext
CLContext()
print(json.dumps([os.environ.get("POCL_CACHE_DIR"), os.environ.get("POCL_KERNEL_CACHE")]))
"""


def pocl_env(gpu: Compiled, **env: str) -> tuple[str | None, str | None, str]:
    res = run_python(ENV_RUN, env)
    folder, kernel_cache = json.loads(res.stdout.splitlines()[-1])
    return folder, kernel_cache, res.stderr


def test_pocl_cache_is_a_private_folder_in_cachedir(gpu: Compiled, tmp_path: Path) -> None:
    key = tmp_path / "key"
    folder, kernel_cache, _ = pocl_env(gpu, CACHEDIR=str(tmp_path / "cache"), CACHE_SECRET=str(key))
    # NOTE: named by the user's key (cache.folder_tag): tests/test_cache_security.py has the copied cache's PoCL folder
    assert folder == str(tmp_path / "cache" / f"pocl-{folder_tag(key.read_bytes(), 'pocl')}") and kernel_cache is None
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_pocl_cache_the_user_chose_is_left_alone(gpu: Compiled, tmp_path: Path) -> None:
    folder, kernel_cache, _ = pocl_env(gpu, CACHEDIR=str(tmp_path / "cache"), POCL_CACHE_DIR=str(tmp_path / "mine"))
    assert folder == str(tmp_path / "mine") and kernel_cache is None
    assert not (tmp_path / "cache" / "pocl").exists()


@pytest.mark.parametrize("why", ["refused", "off"])
def test_pocl_cache_is_off_where_the_cache_is_refused_or_off(gpu: Compiled, why: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    if why == "refused":
        cache.chmod(0o777)
    folder, kernel_cache, stderr = pocl_env(gpu, CACHEDIR=str(cache), COMPILE_CACHE="0" if why == "off" else "1")
    assert kernel_cache == "0" and not (cache / "pocl").exists()
    assert folder is not None and folder.startswith(os.path.realpath(tempfile.gettempdir())), folder
    assert ("not using the kernel cache" in stderr) == (why == "refused"), stderr
