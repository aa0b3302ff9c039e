"""The on-disk kernel cache: reuse across processes, concurrent writers, damaged entries, device errors."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import device_problem

import specgrad.device as device_module
from specgrad import Context, Device, Tensor, Variable

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
    """Started together on an empty cache, they compute the same and build each kernel once between them: whichever
    comes second to a kernel waits for the other's build and reads it (as a pytest-xdist worker or a sweep trial
    does)."""
    env = {**os.environ, "CACHEDIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", PROGRAM.format(device=compiled_device)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    lines = [dict(line.split(" ", 1) for line in out.strip().splitlines()) for out, _ in outs]
    assert len({x["result"] for x in lines}) == 1
    counters = [tuple(map(int, x["counters"].split())) for x in lines]
    assert not [f for f in tmp_path.rglob("*") if f.name.startswith(".")], "temporary files left behind"
    _, compiles, kernels = run_program(compiled_device, tmp_path)  # NOTE: every kernel is a hit now
    assert compiles == 0 and sum(c for c, _ in counters) == kernels, f"{kernels} kernels, {counters} (builds, hits)"


def test_damaged_entries_are_rebuilt_not_loaded(compiled_device: str, tmp_path: Path) -> None:
    """Binaries, width and register tile verdicts and lowerings, each cut short or with a flipped bit."""
    first, _, _ = run_program(compiled_device, tmp_path)
    entries = list(tmp_path.rglob("*.bin"))
    # NOTE: a probe's verdict (vector widths; CLANG's register tile too) and a lowering are no kernel
    verdicts = [f for f in entries if f.parent.name.endswith(("-widths", "-tiles"))]
    kernels = [f for f in entries if f not in verdicts and not f.parent.name.endswith("-lowered")]
    lowered = [f for f in entries if f.parent.name.endswith("-lowered")]
    assert kernels and len(lowered) == len(kernels) - (compiled_device == "CLANG")  # NOTE: and the thread pool
    assert len(verdicts) == 1 + (compiled_device == "CLANG")
    assert len(entries) == len(kernels) + len(lowered) + len(verdicts)
    for i, f in enumerate(entries):
        data = f.read_bytes()
        at = min(40, len(data) - 1)
        f.write_bytes(data[: len(data) // 2] if i % 2 else data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :])
    again, compiles, _ = run_program(compiled_device, tmp_path)
    assert again == first and compiles >= len(kernels) - 1  # NOTE: the CLANG thread pool is one of the entries
    _, compiles, _ = run_program(compiled_device, tmp_path)
    assert compiles == 0, "rebuilt entries were written back"


def test_a_cache_made_with_another_key_is_rebuilt_then_used(compiled_device: str, tmp_path: Path) -> None:
    """A cache copied from another user or machine (its entries made with their key): every kernel, lowering and
    verdict is made again and written back with this key, and the next run compiles nothing."""
    theirs, mine = (str(tmp_path / name / "cache-secret") for name in ("theirs", "mine"))
    first, built, _ = run_program(compiled_device, tmp_path / "cache", CACHE_SECRET=theirs)
    entries = {f: f.read_bytes() for f in (tmp_path / "cache").rglob("*.bin")}
    again, rebuilt, hits = run_program(compiled_device, tmp_path / "cache", CACHE_SECRET=mine)
    assert (again, rebuilt, hits) == (first, built, 0), "an entry made with another key was used"
    assert all(f.read_bytes()[:32] != data[:32] for f, data in entries.items()), "an entry was not written back"
    assert run_program(compiled_device, tmp_path / "cache", CACHE_SECRET=mine)[1] == 0


def test_kernels_built_together_are_found_one_by_one_by_a_later_process(tmp_path: Path) -> None:
    """CLANG builds a schedule's new kernels a group per compiler run; each kernel is cached under its own key, so a
    later process finds every one and computes the same."""
    if problem := device_problem("CLANG"):
        pytest.skip(problem)
    program = PROGRAM.format(device="CLANG") + "from specgrad.device import BuildTotals as b\n"
    program += "print('runs', b.runs['clang'], b.count['clang'])\n"
    env = {**os.environ, "CACHEDIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300,
                         cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = dict(line.split(" ", 1) for line in res.stdout.strip().splitlines())
    runs, built = map(int, lines["runs"].split())
    compiles = int(lines["counters"].split()[0])
    assert built == compiles and runs < built
    kernels = [f for f in (tmp_path / "clang").glob("*.bin")]
    assert len(kernels) == built and len({f.read_bytes()[32:] for f in kernels}) < built
    again, compiles, hits = run_program("CLANG", tmp_path)
    assert (again, compiles, hits) == (lines["result"], 0, built)


def test_parallel_compiles_match_one_by_one(compiled_device: str, tmp_path: Path) -> None:
    """COMPILE_JOBS=1 compiles one kernel at a time; 4 compiles a schedule's new kernels at once: same everything."""
    runs = {jobs: run_program(compiled_device, tmp_path / jobs, COMPILE_JOBS=jobs) for jobs in ("1", "4")}
    assert runs["1"] == runs["4"] and runs["1"][1] > 1
    # NOTE: the register tile verdict holds the probe's timings, which differ from run to run
    found = {jobs: [f for f in (tmp_path / jobs).rglob("*.bin") if f.parent.name != "clang-tiles"] for jobs in runs}
    entries = {jobs: {f.name: f.read_bytes() for f in files} for jobs, files in found.items()}
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


def test_clang_links_with_the_linker_its_driver_would_run(tmp_path: Path) -> None:
    """clang's driver costs as much to start again for the link as the compile; the build runs the driver's own ld
    command instead, and what it builds loads and computes."""
    from specgrad.runtime import ops_clang

    if (path := shutil.which("clang")) is None:
        pytest.skip("clang is not installed here")
    flags = (*ops_clang.CFLAGS, *ops_clang.target_flags("native"))
    link = ops_clang.link_command(path, flags)
    assert link is not None and ops_clang.OBJECT_MARK in link and "-shared" in link and os.path.isabs(link[0])
    lib = tmp_path / "k.so"
    lib.write_bytes(ops_clang.compile_c(path, flags, "int sg_twice(int x) { return 2 * x; }"))
    assert ctypes.CDLL(str(lib)).sg_twice(21) == 42


def test_a_driver_whose_link_plan_is_unreadable_links_by_itself(tmp_path: Path) -> None:
    """A compiler that is not clang, or whose `-###` plan is not one plain command, builds in one driver call."""
    from specgrad.runtime import ops_clang

    if (cc := shutil.which("cc")) is None:
        pytest.skip("no system cc on this machine")
    fake = tmp_path / "clang"  # NOTE: says it is clang, plans nothing readable, and otherwise is the system cc
    fake.write_text(f'#!/bin/sh\ncase "$1" in --version) echo "fake clang 1";; -###) echo garbled >&2;; '
                    f'*) exec {cc} "$@";; esac\n')  # fmt: skip
    fake.chmod(0o755)
    flags = (*ops_clang.CFLAGS, *ops_clang.target_flags("native"))
    assert ops_clang.link_command(str(fake), flags) is None
    assert ops_clang.link_command(cc, flags) is None or "clang" in ops_clang.compiler_version(cc).lower()
    lib = tmp_path / "k.so"
    lib.write_bytes(ops_clang.compile_c(str(fake), flags, "int sg_twice(int x) { return 2 * x; }"))
    assert ctypes.CDLL(str(lib)).sg_twice(21) == 42


# *** lowered kernels ***


def realize(device: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list, set[str]]:
    """A few kernels realized as a fresh process would (no runner in memory): the results, the asts this lowered and
    the kernels' sources."""
    dev, lowered, linearize = Device[device], [], device_module.linearize
    x = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6), device=device)
    with monkeypatch.context() as m:
        m.setattr(dev, "runners", {})
        m.setattr(device_module, "linearize", lambda ast, *a: lowered.append(ast) or linearize(ast, *a))
        results = [t.numpy() for t in (((x * 2 + 1).relu().sum(1) + x.max(1)).softmax(0), x @ x.T)]
        return results, lowered, {r.src for r in dev.runners.values()}


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def test_a_kernel_lowered_once_is_read_back_not_lowered_again(
    compiled_device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Context(CACHEDIR=str(tmp_path)):
        first, lowered, srcs = realize(compiled_device, monkeypatch)
        assert lowered
        again, lowered, read_back = realize(compiled_device, monkeypatch)
        assert not lowered and same(first, again)
        with Context(COMPILE_CACHE=0):
            fresh, _, lowered_now = realize(compiled_device, monkeypatch)
    assert read_back == srcs == lowered_now and same(first, fresh), "a lowering read back is what lowering gives"


def test_another_version_of_specgrad_lowers_afresh(
    compiled_device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lowering is keyed by specgrad's own source: an edit to the linearizer must not meet an old lowering."""
    with Context(CACHEDIR=str(tmp_path)):
        first, _, _ = realize(compiled_device, monkeypatch)
        monkeypatch.setattr(device_module, "code_fingerprint", lambda: "another version")
        again, lowered, _ = realize(compiled_device, monkeypatch)
    assert lowered and same(first, again)


def test_a_lowering_whose_binary_is_gone_is_built_from_a_fresh_lowering(
    compiled_device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Context(CACHEDIR=str(tmp_path)):
        first, _, _ = realize(compiled_device, monkeypatch)
        for f in (tmp_path / Device[compiled_device].compiler.namespace).glob("*.bin"):
            f.unlink()
        again, lowered, _ = realize(compiled_device, monkeypatch)
    assert lowered and same(first, again)


def test_a_kernel_with_symbolic_sizes_is_not_kept_lowered(tmp_path: Path) -> None:
    if problem := device_problem("CLANG"):
        pytest.skip(problem)
    with Context(CACHEDIR=str(tmp_path)):
        i = Variable("i", 1, 10).bind(3)
        x = Tensor(np.arange(10, dtype=np.float32), device="CLANG")
        assert (x.shrink(((0, i),)) * 2).sum().item() == 6.0
    assert list((tmp_path / "clang").glob("*.bin")) and not list(tmp_path.glob("clang-lowered/*.bin"))
