"""The on-disk kernel cache: reuse across processes, concurrent writers, damaged entries, device errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import device_problem

ROOT = Path(__file__).resolve().parents[1]

# a small program with several kernels; prints its result and the compile counters
PROGRAM = """
import numpy as np
from specgrad import Tensor
from specgrad.device import GlobalCounters
x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="{device}")
out = ((x * 2 + 1).relu().sum(1) + x.max(1)).softmax(0)
print("result", " ".join(f"{{v:.6f}}" for v in out.numpy().tolist()))
print("counters", GlobalCounters.compile_count, GlobalCounters.cache_hits)
"""


def run_program(device: str, cache: Path, **env: str) -> tuple[str, int, int]:
    full_env = {**os.environ, "CACHEDIR": str(cache), **env}
    res = subprocess.run([sys.executable, "-c", PROGRAM.format(device=device)], env=full_env, capture_output=True,
                         text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = dict(line.split(" ", 1) for line in res.stdout.strip().splitlines())
    compiles, hits = map(int, lines["counters"].split())
    return lines["result"], compiles, hits


@pytest.fixture(params=["CLANG", "GPU"])
def compiled_device(request: pytest.FixtureRequest) -> str:
    if problem := device_problem(request.param):
        pytest.skip(f"{request.param} unavailable: {problem}")
    return request.param


def test_second_run_compiles_nothing(compiled_device: str, tmp_path: Path) -> None:
    first, compiles, _ = run_program(compiled_device, tmp_path)
    assert compiles > 0
    second, compiles, hits = run_program(compiled_device, tmp_path)
    assert (compiles, second) == (0, first) and hits > 0


def test_two_processes_share_the_cache_at_once(compiled_device: str, tmp_path: Path) -> None:
    env = {**os.environ, "CACHEDIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", PROGRAM.format(device=compiled_device)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    results = {next(line for line in out.splitlines() if line.startswith("result")) for out, _ in outs}
    assert len(results) == 1
    assert not [f for f in tmp_path.rglob("*") if f.name.startswith(".")], "temporary files left behind"
    _, compiles, _ = run_program(compiled_device, tmp_path)
    assert compiles == 0


def test_damaged_entries_are_rebuilt_not_loaded(compiled_device: str, tmp_path: Path) -> None:
    first, _, _ = run_program(compiled_device, tmp_path)
    entries = list(tmp_path.rglob("*.bin"))
    kernels = [
        f for f in entries if not f.parent.name.endswith("-widths")
    ]  # NOTE: a width probe's verdict is no kernel
    assert kernels and len(entries) == len(kernels) + 1
    for i, f in enumerate(entries):
        data = f.read_bytes()
        at = min(40, len(data) - 1)
        f.write_bytes(data[: len(data) // 2] if i % 2 else data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :])
    again, compiles, _ = run_program(compiled_device, tmp_path)
    assert again == first and compiles >= len(kernels) - 1  # NOTE: the CLANG thread pool is one of the entries
    _, compiles, _ = run_program(compiled_device, tmp_path)
    assert compiles == 0, "rebuilt entries were written back"


def test_parallel_compiles_match_one_by_one(compiled_device: str, tmp_path: Path) -> None:
    """COMPILE_JOBS=1 compiles one kernel at a time; 4 compiles a schedule's new kernels at once: same everything."""
    runs = {jobs: run_program(compiled_device, tmp_path / jobs, COMPILE_JOBS=jobs) for jobs in ("1", "4")}
    assert runs["1"] == runs["4"] and runs["1"][1] > 1
    entries = {jobs: {f.name: f.read_bytes() for f in (tmp_path / jobs).rglob("*.bin")} for jobs in runs}
    if compiled_device == "CLANG":  # NOTE: C compilers give the same bytes for the same source; OpenCL need not
        assert entries["1"] == entries["4"]
    assert entries["1"].keys() == entries["4"].keys()


def test_cache_can_be_turned_off(tmp_path: Path) -> None:
    if problem := device_problem("CLANG"):
        pytest.skip(problem)
    run_program("CLANG", tmp_path)
    _, compiles, hits = run_program("CLANG", tmp_path, COMPILE_CACHE="0")
    assert compiles > 0 and hits == 0


def test_missing_compiler_is_a_clear_error(tmp_path: Path) -> None:
    code = "from specgrad import Device\nDevice['CLANG']"
    env = {**os.environ, "CC": "no-such-compiler-xyz", "CACHEDIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "no C compiler found for the CLANG device" in res.stderr and "apt-get install clang" in res.stderr


def test_default_device_falls_back_without_a_compiler(tmp_path: Path) -> None:
    code = "from specgrad import Device\nprint(Device.DEFAULT)"
    env = {**os.environ, "CC": "no-such-compiler-xyz", "CACHEDIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == ("GPU" if device_problem("GPU") is None else "CPU")


def test_missing_pyopencl_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "pyopencl.py").write_text("raise ImportError('pyopencl hidden by the test')\n")
    code = "from specgrad import Device\nDevice['GPU']"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "the GPU device needs pyopencl" in res.stderr and "pip install 'pyopencl[pocl]'" in res.stderr


CC_PROGRAM = """
import numpy as np
from specgrad import Tensor, dtypes
rng = np.random.default_rng(0)
a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
x, y = Tensor(a, device="CLANG"), Tensor(b, device="CLANG")
np.testing.assert_allclose((x @ y).softmax(-1).numpy(), np.exp(a @ b) / np.exp(a @ b).sum(-1, keepdims=True),
                           rtol=1e-5)
np.testing.assert_allclose(x.half().exp().numpy(), np.exp(a.astype(np.float16)), rtol=2e-3)
ints = Tensor(np.array([-7, 7, 3], dtype=np.int32), device="CLANG")
assert (ints // 2).tolist() == [-4, 3, 1] and (ints % 3).tolist() == [2, 1, 0]
print("ok")
"""


def test_plain_cc_builds_kernels(tmp_path: Path) -> None:
    """Without clang, the CLANG device compiles with the system cc (here forced with the CC flag)."""
    if shutil.which("cc") is None:
        pytest.skip("no system cc on this machine")
    env = {**os.environ, "CC": "cc", "CACHEDIR": str(tmp_path), "DEBUG": "1"}
    res = subprocess.run([sys.executable, "-c", CC_PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "CLANG device: compiling with" in res.stdout and "/cc)" in res.stdout and res.stdout.strip().endswith("ok")
