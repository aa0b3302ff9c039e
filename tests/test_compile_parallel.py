"""Compiling a schedule's new kernels together: on COMPILE_JOBS threads, in order, with the counters and errors of
compiling them one by one."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import device_problem

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
    once; raises for sources that start with 'bad'. `wait` holds each call until that many run together."""

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
            if src.startswith("bad"):
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
