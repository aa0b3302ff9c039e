"""Compiling a schedule's new kernels together: on COMPILE_JOBS threads, in order, with the counters and errors of
compiling them one by one."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import device_problem

import specgrad.device as device_module
from specgrad import Context, Device, Tensor
from specgrad.device import BuildFailed, Compiler, GlobalCounters, KernelBuildError
from specgrad.flags import CACHEDIR

DATA = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
_FRESH = itertools.count(1)


def fresh_constant() -> float:
    """A constant no earlier test used (exact in float32), so the kernels built with it are new to the process."""
    return 1.0 + next(_FRESH) / 64


def three_kernels(device: str, c: float) -> list[Tensor]:
    x = Tensor(DATA, device=device)
    return [(x * c).exp(), (x + c).sum(0), (x - c).max(1)]


def check_values(outs: list[Tensor], c: float) -> None:
    want = [np.exp(DATA * np.float32(c)), (DATA + np.float32(c)).sum(0), (DATA - np.float32(c)).max(1)]
    for out, ref in zip(outs, want):
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.fixture(params=["CLANG", "GPU"])
def compiled_device(request: pytest.FixtureRequest) -> str:
    if problem := device_problem(request.param):
        pytest.skip(f"{request.param} unavailable: {problem}")
    return request.param


def wrap_compile(monkeypatch: pytest.MonkeyPatch, device: str, wrapper: Callable[[Callable, str], bytes]) -> None:
    compiler = Device[device].compiler
    real = compiler.compile
    monkeypatch.setattr(compiler, "compile", lambda src: wrapper(real, src))


# *** a schedule on a compiled device ***


@pytest.mark.parametrize("jobs", [1, 3])
def test_new_kernels_of_a_schedule_compile_once_each(compiled_device: str, jobs: int, tmp_path: Path) -> None:
    c = fresh_constant()
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=jobs):
        GlobalCounters.reset()
        outs = three_kernels(compiled_device, c)
        Tensor.corealize(outs)
        kernels = GlobalCounters.kernel_count
        assert kernels >= 3 and (GlobalCounters.compile_count, GlobalCounters.cache_hits) == (kernels, 0)
        check_values(outs, c)
        GlobalCounters.reset()
        again = three_kernels(compiled_device, c)
        Tensor.corealize(again)
        assert GlobalCounters.kernel_count == kernels
        assert (GlobalCounters.compile_count, GlobalCounters.cache_hits) == (0, 0), "a known kernel was looked up again"
    check_values(again, c)


def test_new_kernels_of_a_schedule_compile_at_once(
    compiled_device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    barrier, held = threading.Barrier(3, timeout=60), itertools.count()

    def together(real: Callable, src: str) -> bytes:
        if next(held) < 3:
            barrier.wait()  # NOTE: passes only when three kernels are being compiled at the same time
        return real(src)

    wrap_compile(monkeypatch, compiled_device, together)
    monkeypatch.setattr(device_module, "KERNELS_PER_RUN", 1)  # NOTE: CLANG would build them together (tested below)
    c = fresh_constant()
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=3):
        outs = three_kernels(compiled_device, c)
        Tensor.corealize(outs)
    check_values(outs, c)


def test_compile_error_in_one_kernel_is_the_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if problem := device_problem("CLANG"):
        pytest.skip(problem)
    broken = threading.Event()

    def break_one(real: Callable, src: str) -> bytes:
        if broken.is_set():
            return real(src)
        broken.set()
        return real("#error planted by the test\n" + src)

    wrap_compile(monkeypatch, "CLANG", break_one)
    monkeypatch.setattr(device_module, "KERNELS_PER_RUN", 1)  # NOTE: one kernel a run (a group's failure: below)
    c = fresh_constant()
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=3):
        with pytest.raises(RuntimeError, match="planted by the test"):
            Tensor.corealize(three_kernels("CLANG", c))
        monkeypatch.undo()
        GlobalCounters.reset()
        outs = three_kernels("CLANG", c)
        Tensor.corealize(outs)
        assert GlobalCounters.compile_count >= 1, "the kernel that failed was not built again"
        assert GlobalCounters.compile_count + GlobalCounters.cache_hits == GlobalCounters.kernel_count
    check_values(outs, c)


# *** Compiler.compile_many with a stand-in compiler ***


class FakeCompile:
    """Uppercases the source (with the CACHEDIR its thread sees); records each source and the most calls that ran at
    once; raises for sources that start with 'bad' (or joined with '|', with a part that does). `wait` holds each
    call until that many run together."""

    def __init__(self, wait: int = 0):
        self.calls: list[str] = []
        self.running, self.most_at_once, self.lock = 0, 0, threading.Lock()
        self.barrier = threading.Barrier(wait, timeout=60) if wait else None

    def __call__(self, src: str) -> bytes:
        with self.lock:
            self.calls.append(src)
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            if self.barrier is not None:
                self.barrier.wait()
            time.sleep(0.01)  # NOTE: long enough for a second job, when allowed, to overlap this one
            if any(part.startswith("bad") for part in src.split("|")):
                raise BuildFailed(f"cannot compile {src}")
            return f"{src.upper()} in {CACHEDIR.value}".encode()
        finally:
            with self.lock:
                self.running -= 1


def binary(src: str, cache: Path) -> bytes:
    return f"{src.upper()} in {cache}".encode()


def named(srcs: list[str] | str) -> list[tuple[str, str]]:
    """Sources as compile_many takes them: each with its kernel's name."""
    return [(f"k_{src}", src) for src in srcs]


@pytest.mark.parametrize("jobs", [0, 1, 3])
def test_compile_many_matches_compiling_one_by_one(jobs: int, tmp_path: Path) -> None:
    srcs = ["a", "b", "a", "c"]
    fake = FakeCompile()
    one_by_one, many = Compiler("fake-seq", "fake 1", FakeCompile()), Compiler("fake-par", "fake 1", fake)
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=jobs):
        GlobalCounters.reset()
        want = [one_by_one.compile_cached(src) for src in srcs]
        counters = (GlobalCounters.compile_count, GlobalCounters.cache_hits)
        GlobalCounters.reset()
        assert many.compile_many(named(srcs)) == want == [binary(src, tmp_path) for src in srcs]
        assert (GlobalCounters.compile_count, GlobalCounters.cache_hits) == counters == (3, 1)
        assert sorted(fake.calls) == ["a", "b", "c"]
        GlobalCounters.reset()
        assert many.compile_many(named(srcs)) == want
        assert (GlobalCounters.compile_count, GlobalCounters.cache_hits) == (0, 4)
        assert sorted(p.name for p in (tmp_path / "fake-seq").iterdir()) == sorted(
            p.name for p in (tmp_path / "fake-par").iterdir()
        )


def test_compile_many_without_the_cache_compiles_each_source_once(tmp_path: Path) -> None:
    compiler = Compiler("fake", "fake 1", FakeCompile())
    with Context(CACHEDIR=str(tmp_path), COMPILE_CACHE=0, COMPILE_JOBS=2):
        GlobalCounters.reset()
        assert compiler.compile_many(named(["a", "b", "a"])) == [binary(s, tmp_path) for s in "aba"]
        assert (GlobalCounters.compile_count, GlobalCounters.cache_hits) == (2, 0)
    assert not (tmp_path / "fake").exists()


def test_compile_jobs_1_compiles_one_at_a_time(tmp_path: Path) -> None:
    fake = FakeCompile()
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=1):
        assert Compiler("fake", "fake 1", fake).compile_many(named(["a", "b", "c"])) == [
            binary(s, tmp_path) for s in "abc"
        ]
    assert fake.calls == ["a", "b", "c"] and fake.most_at_once == 1


def test_compile_jobs_compile_at_once_and_see_the_callers_flags(tmp_path: Path) -> None:
    fake = FakeCompile(wait=3)
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=3):
        assert Compiler("fake", "fake 1", fake).compile_many(named(["a", "b", "c"])) == [
            binary(s, tmp_path) for s in "abc"
        ]
    assert fake.most_at_once == 3


@pytest.mark.parametrize("jobs", [1, 3])
def test_compile_failure_raises_the_first_error_and_keeps_earlier_binaries(jobs: int, tmp_path: Path) -> None:
    compiler = Compiler("fake", "fake 1", FakeCompile())
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=jobs):
        with pytest.raises(KernelBuildError, match="fake could not build kernel k_bad1:\ncannot compile bad1"):
            compiler.compile_many(named(["a", "bad1", "b", "bad2"]))
        GlobalCounters.reset()
        assert compiler.compile_many(named(["a"])) == [binary("a", tmp_path)]
        assert (GlobalCounters.compile_count, GlobalCounters.cache_hits) == (0, 1)


# *** kernels built together: one compiler run for a group (CLANG's join) ***


def joined(kernels: list[tuple[str, str]]) -> str:
    return "|".join(src for _, src in kernels)


@pytest.mark.parametrize(("kernels", "chars", "runs"), [(1, 99, 1), (3, 99, 1), (8, 99, 1), (10, 99, 2),
                                                    (40, 99, 5), (5, 10, 3), (5, 4, 5)])  # fmt: skip
def test_joined_kernels_build_in_groups_each_cached_under_its_own_key(
    kernels: int, chars: int, runs: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """N missing kernels (of 4 characters each) take a compiler run per KERNELS_PER_RUN (8) kernels or per JOIN_CHARS
    characters of source, whatever COMPILE_JOBS is; each kernel gets its group's binary, cached under its own key,
    and a later compiler finds each one."""
    monkeypatch.setattr(device_module, "JOIN_CHARS", chars)
    srcs = [f"s{i:03d}" for i in range(kernels)]
    for jobs in (1, 3):
        fake = FakeCompile()
        with Context(CACHEDIR=str(tmp_path / str(jobs)), COMPILE_JOBS=jobs):
            GlobalCounters.reset()
            libs = Compiler("fake", "fake 1", fake, join=joined).compile_many(named(srcs))
            assert (GlobalCounters.compile_count, GlobalCounters.cache_hits) == (kernels, 0)
            assert len(fake.calls) == runs and sorted("|".join(fake.calls).split("|")) == sorted(srcs)
            groups = [call.split("|") for call in fake.calls]
            assert max(map(len, groups)) <= device_module.KERNELS_PER_RUN
            assert libs == [binary(next(call for call, g in zip(fake.calls, groups) if s in g), tmp_path / str(jobs))
                            for s in srcs]  # fmt: skip
            GlobalCounters.reset()
            later = Compiler("fake", "fake 1", FakeCompile(), join=joined)
            assert [later.compile_cached(src, f"k_{src}") for src in srcs] == libs
            assert (GlobalCounters.compile_count, GlobalCounters.cache_hits) == (0, kernels)
        assert len(list((tmp_path / str(jobs) / "fake").glob("*.bin"))) == kernels


def test_kernels_of_one_name_are_never_joined(tmp_path: Path) -> None:
    fake = FakeCompile()
    kernels = [("E_1", "a"), ("E_1", "b"), ("r_2", "c"), ("E_1", "d"), ("r_3", "e")]
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=1):
        libs = Compiler("fake", "fake 1", fake, join=joined).compile_many(kernels)
    assert fake.calls == ["a|c|e", "b", "d"]
    assert libs == [binary(call, tmp_path) for call in ("a|c|e", "b", "a|c|e", "d", "a|c|e")]


def test_a_failing_kernel_in_a_group_is_reported_with_its_own_source(tmp_path: Path) -> None:
    """The joined run fails, so the kernels are built one by one: the error names the first that fails and saves its
    own source; the others are cached."""
    fake = FakeCompile()
    compiler = Compiler("fake", "fake 1", fake, join=joined)
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=2):
        with pytest.raises(KernelBuildError, match="fake could not build kernel k_bad1:\ncannot compile bad1"):
            compiler.compile_many(named(["a", "bad1", "b"]))
        assert fake.calls == ["a|bad1|b", "a", "bad1", "b"]  # NOTE: the joined run, then each alone
        assert [p.read_text() for p in (tmp_path / "failed").iterdir()] == ["bad1"]
        GlobalCounters.reset()
        assert compiler.compile_many(named(["a", "b"])) == [binary("a", tmp_path), binary("b", tmp_path)]
        assert (GlobalCounters.compile_count, GlobalCounters.cache_hits) == (0, 2)


def test_groups_sharing_a_lock_file_build_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two groups whose kernels' keys share a lock file (CACHEDIR/<namespace>/lock-XX) build at the same time: a
    thread does not wait for a lock another thread of its process holds (nor take one file's lock twice)."""
    monkeypatch.setattr(device_module, "KERNELS_PER_RUN", 2)
    compiler = Compiler("fake", "fake 1", FakeCompile(wait=2), join=joined)
    stripe = {compiler._key(f"s{i}")[:2]: f"s{i}" for i in range(400)}
    same = [src for src in (f"s{i}" for i in range(400)) if compiler._key(src)[:2] == compiler._key("s0")[:2]][:3]
    others = [src for src in stripe.values() if src not in same][:1]
    srcs = [same[0], same[1], others[0], same[2]]  # NOTE: groups [s0, x] and [y, z]: the first lock file in both
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=2):
        libs = compiler.compile_many(named(srcs))
    assert sorted(compiler.compile.calls) == sorted([f"{srcs[0]}|{srcs[1]}", f"{srcs[2]}|{srcs[3]}"])
    assert compiler.compile.most_at_once == 2 and len(set(libs)) == 2


def test_threads_of_one_process_build_each_kernel_once(tmp_path: Path) -> None:
    """Two threads compiling the same kernels at once (separate compile_many calls, sharing a CACHEDIR): each kernel is
    built by one of them, and the other waits for it and reads the cache, as another process would."""
    compiler = Compiler("fake", "fake 1", FakeCompile(), join=None)
    srcs, results = [f"s{i}" for i in range(4)], []

    def compile_all() -> None:
        with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=1):
            results.append(compiler.compile_many(named(srcs)))

    threads = [threading.Thread(target=compile_all) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(compiler.compile.calls) == srcs and len(results) == 2 and results[0] == results[1]


class Stop(BaseException):
    """Not an Exception: as a KeyboardInterrupt would, it passes every `except Exception`."""


def test_a_build_that_fails_or_stops_leaves_no_claim_and_the_waiting_thread_builds_itself(tmp_path: Path) -> None:
    """Two threads need the same kernel: where the first one's build fails, both report the error; where it stops
    (a BaseException), the other builds the kernel itself. Either way no claim is left for a third thread to wait on."""
    started: set[str] = set()

    def flaky(src: str) -> bytes:
        if src not in started:
            started.add(src)
            time.sleep(0.2)  # NOTE: long enough for the other thread to find the claim and wait for it
            if src == "stop":
                raise Stop()
        return FakeCompile()(src)

    compiler, outcomes = Compiler("fake", "fake 1", flaky), {}

    def compile_one(src: str, n: int) -> None:
        try:
            with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=1):
                outcomes[src, n] = compiler.compile_many(named([src]))
        except BaseException as e:
            outcomes[src, n] = type(e).__name__

    for src in ("bad1", "stop"):
        threads = [threading.Thread(target=compile_one, args=(src, n)) for n in range(2)]
        for t in threads:
            t.start()
            time.sleep(0.05)
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a thread still waits for a claim"
    assert outcomes["bad1", 0] == outcomes["bad1", 1] == "KernelBuildError"
    assert {str(outcomes["stop", n]) for n in range(2)} == {"Stop", str([binary("stop", tmp_path)])}
    assert not device_module._CLAIMS and not device_module._HELD


def test_grouped_clang_kernels_compute_as_built_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if problem := device_problem("CLANG"):
        pytest.skip(problem)
    runs: list[str] = []
    wrap_compile(monkeypatch, "CLANG", lambda real, src: runs.append(src) or real(src))
    results = {}
    for per_run in (1, 8):
        monkeypatch.setattr(device_module, "KERNELS_PER_RUN", per_run)
        c = 1.0 + 1 / 1024  # NOTE: the same kernels in both, new to the process (a constant no other test uses)
        with Context(CACHEDIR=str(tmp_path / str(per_run)), COMPILE_JOBS=2):
            Device["CLANG"].runners.clear()
            runs.clear()
            GlobalCounters.reset()
            x = Tensor(DATA, device="CLANG")
            outs = [(x * c).exp(), (x + c).sum(0), (x - c).max(1), (x * x + c).sqrt(), (x / c).relu().sum()]
            Tensor.corealize(outs)
            assert GlobalCounters.compile_count == GlobalCounters.kernel_count == 5
            # NOTE: two kernels of one name go to different runs
            names = Counter(re.search(r"^void (\w+)\(", r.src, re.M)[1] for r in Device["CLANG"].runners.values())
            assert len(runs) == (5 if per_run == 1 else max(names.values())) and max(names.values()) < 5
            results[per_run] = outs
    for alone, together in zip(results[1], results[8]):
        assert alone.numpy().tobytes() == together.numpy().tobytes()
    check_values(results[8][:3], c)


def test_clang_kernel_failing_in_a_group_is_named_with_its_own_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if problem := device_problem("CLANG"):
        pytest.skip(problem)
    from specgrad.renderer.cstyle import KERNEL_MARK

    def break_exp(real: Callable, src: str) -> bytes:
        return real("#error planted by the test\n" + src if "exp" in src else src)

    wrap_compile(monkeypatch, "CLANG", break_exp)
    c = fresh_constant()
    with Context(CACHEDIR=str(tmp_path), COMPILE_JOBS=2):
        with pytest.raises(KernelBuildError, match="planted by the test") as e:
            Tensor.corealize(three_kernels("CLANG", c))
        saved = Path(str(e.value).split("its source is saved in ")[1].split(";")[0])
        src = saved.read_text()
        assert src.count(KERNEL_MARK) == 1 and "exp" in src, "the saved source is not the failing kernel's own"
        assert f"could not build kernel {saved.name.rsplit('-', 1)[0]}:" in str(e.value)
        monkeypatch.undo()
        GlobalCounters.reset()
        outs = three_kernels("CLANG", c)
        Tensor.corealize(outs)
        assert GlobalCounters.compile_count == 1, "the kernels that built alone were not cached"
        assert GlobalCounters.compile_count + GlobalCounters.cache_hits == GlobalCounters.kernel_count
    check_values(outs, c)


def test_joined_sources_keep_shared_header_chunks_once_and_every_body() -> None:
    from specgrad.runtime.ops_clang import KERNEL_MARK, join_sources

    header = "#include <math.h>\n\ntypedef float f4;"
    a = f"{header}\n{KERNEL_MARK}\nvoid a(float* x) {{ x[0] = 1; }}\n"
    b = f"{header}\n\nstatic int helper_b;\n{KERNEL_MARK}\nvoid b(float* x) {{ x[0] = 2; }}\n"
    bare = "void c(float* x) { x[0] = 3; }\n"  # NOTE: no mark: all kernel code, never a crash
    joined = join_sources([("a", a), ("b", b), ("c", bare)])
    assert joined.count("#include <math.h>") == 1 and joined.count("typedef float f4;") == 1
    assert "static int helper_b;" in joined and all(f"void {n}(" in joined for n in "abc")
