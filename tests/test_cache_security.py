"""The kernel cache holds only the user's own files: a cache folder or entry that is someone else's, that others can
write, a link, a pipe or a folder where an entry should be is refused with one warning, nothing planted there is
loaded, and the program computes right without the cache (docs/devices.md, "The kernel cache")."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import device_problem

from specgrad import Context, Device, cache
from specgrad.device import BuildFailed, Compiler, DiskCache, KernelBuildError

pytestmark = pytest.mark.xdist_group("cache_security")  # NOTE: on one worker: a warm cache copied by many tests

ROOT = Path(__file__).resolve().parents[1]
WARNING = "specgrad: not using the kernel cache"
OTHER_UID = 12345
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another uid (os.chown)")

PROGRAM = """
import numpy as np
from specgrad import Tensor
x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="CLANG")
print("result", ((x * 2 + 1).relu().sum(1) + x.max(1)).numpy().tolist())
"""
_X = np.arange(12, dtype=np.float32).reshape(3, 4)
EXPECTED = ((_X * 2 + 1).clip(0).sum(1) + _X.max(1)).tolist()

# A library that says it was loaded: its constructor runs at dlopen and appends to the file PLANTED_MARKER names.
PLANTED_C = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
  const char* path = getenv("PLANTED_MARKER");
  int fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
  if (fd >= 0) { write(fd, "ran\n", 4); close(fd); }
}
int sg_pool_start(int threads) { return threads; }
"""


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(WARNING)]


def entry(payload: bytes) -> bytes:
    """A cache entry that passes the digest check."""
    return hashlib.sha256(payload).digest() + payload


@dataclass
class Warm:
    """A cache the CLANG program filled, and what a planted one holds instead."""

    path: Path
    verdict: str  # the width the probe proved here, in bytes
    pool: str  # the thread pool's entry, loaded when the device opens
    planted: bytes  # the planted library as an entry
    planted_verdict: bytes  # a width verdict the probe did not give, as an entry


@dataclass
class Run:
    result: list[float] | None  # None where the program failed
    stdout: str
    stderr: str
    warnings: list[str]


def run_program(cache: Path, marker: Path) -> Run:
    env = {**os.environ, "CACHEDIR": str(cache), "PLANTED_MARKER": str(marker), "DEBUG": "1"}
    res = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120,
                         cwd=ROOT)  # fmt: skip
    result = next((line for line in res.stdout.splitlines() if line.startswith("result ")), None)
    return Run(json.loads(result[7:]) if result else None, res.stdout, res.stderr, warnings_in(res.stderr))


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Warm:
    if problem := device_problem("CLANG"):
        pytest.skip(f"CLANG unavailable: {problem}")
    folder = tmp_path_factory.mktemp("warm")
    compiler = shutil.which("cc") or shutil.which("clang") or "cc"
    subprocess.run([compiler, "-shared", "-fPIC", "-x", "c", "-", "-o", str(folder / "planted.so")], input=PLANTED_C,
                   text=True, check=True, capture_output=True)  # fmt: skip
    run = run_program(folder / "cache", folder / "marker")
    assert run.result == EXPECTED and not run.warnings, run.stderr[-3000:]
    verdict = next((folder / "cache" / "clang-widths").iterdir()).read_bytes()[32:].decode()
    pool = next(f.name for f in (folder / "cache" / "clang").iterdir() if b"sg_pool_start" in f.read_bytes())
    other = b"0" if verdict != "0" else b"16"
    return Warm(folder / "cache", verdict, pool, entry((folder / "planted.so").read_bytes()), entry(other))


def plant_everywhere(cache: Path, warm: Warm) -> None:
    """Every entry becomes the planted library, and the width verdict one the probe did not give."""
    for f in cache.rglob("*.bin"):
        f.write_bytes(warm.planted_verdict if f.parent.name.endswith("-widths") else warm.planted)


def snapshot(folder: Path) -> dict[str, tuple]:
    """What is in a folder: each path's kind, mode, owner and, for a regular file, its bytes."""
    ret = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        ret[str(p.relative_to(folder))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid,
                                           p.read_bytes() if stat.S_ISREG(st.st_mode) else None)  # fmt: skip
    return ret


# *** the cases: each makes a copy of the warm cache someone else's, in one way, and says what the warning names ***

Case = Callable[[Path, Path, Warm], tuple[Path, list[str]]]  # (cache, scratch folder, warm) -> (CACHEDIR, words)


def root_writable(mode: int) -> Case:
    def case(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
        plant_everywhere(cache, warm)
        cache.chmod(mode)
        return cache, [f"{cache} is writable by", "chmod 700"]

    return case


def folder_writable(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    for f in (cache / "clang").iterdir():
        f.write_bytes(warm.planted)
    (cache / "clang").chmod(0o777)
    return cache, [f"{cache / 'clang'} is writable by its group and others", f"chmod 700 {cache / 'clang'}"]


def entry_writable(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    (pool := cache / "clang" / warm.pool).write_bytes(warm.planted)
    pool.chmod(0o664)
    return cache, [f"{pool} is writable by its group", f"chmod 600 {pool}"]


def entry_of_another_uid(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    (pool := cache / "clang" / warm.pool).write_bytes(warm.planted)
    os.chown(pool, OTHER_UID, OTHER_UID)
    return cache, [f"{pool} is owned by uid {OTHER_UID}, not by you"]


def verdict_of_another_uid(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    (verdict := next((cache / "clang-widths").iterdir())).write_bytes(warm.planted_verdict)
    os.chown(verdict, OTHER_UID, OTHER_UID)
    return cache, [f"{verdict} is owned by uid {OTHER_UID}"]


def folder_of_another_uid(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    for f in (cache / "clang").iterdir():
        f.write_bytes(warm.planted)
    os.chown(cache / "clang", OTHER_UID, OTHER_UID)
    return cache, [f"{cache / 'clang'} is owned by uid {OTHER_UID}"]


def root_of_another_uid(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    plant_everywhere(cache, warm)
    os.chown(cache, OTHER_UID, OTHER_UID)
    return cache, [f"{cache} is owned by uid {OTHER_UID}"]


def entry_is_a_link(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    (target := scratch / "valid-looking.bin").write_bytes(warm.planted)
    target.chmod(0o600)
    (pool := cache / "clang" / warm.pool).unlink()
    pool.symlink_to(target)
    return cache, [f"{pool} is a symbolic link, not a regular file"]


def entry_is_a_folder(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    (pool := cache / "clang" / warm.pool).unlink()
    pool.mkdir(mode=0o700)
    return cache, [f"{pool} is a folder, not a regular file", f"rm -r {pool}"]


def root_is_a_link_to_a_folder_others_write(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    plant_everywhere(cache, warm)
    cache.chmod(0o777)
    (link := scratch / "link").symlink_to(cache)
    return link, [f"{cache} is writable by its group and others"]


def root_is_a_link_of_another_uid(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    plant_everywhere(cache, warm)
    (link := scratch / "link").symlink_to(cache)
    os.lchown(link, OTHER_UID, OTHER_UID)
    return link, [f"{link} is a symbolic link owned by uid {OTHER_UID}"]


def root_is_shared_like_tmp(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    plant_everywhere(cache, warm)
    cache.chmod(0o1777)
    return cache, [f"{cache} is writable by its group and others", "leave it as it is"]


def parent_others_can_write(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    plant_everywhere(cache, warm)
    cache.parent.chmod(0o777)  # NOTE: without the sticky bit, anyone could rename the cache away and put theirs there
    return cache, [f"{cache.parent} is writable by its group and others without the sticky bit"]


CASES: dict[str, Case] = {
    "root writable by its group": root_writable(0o770),
    "root writable by others": root_writable(0o707),
    "root like /tmp (sticky, writable by all)": root_is_shared_like_tmp,
    "parent folder writable by all, not sticky": parent_others_can_write,
    "namespace folder writable by all": folder_writable,
    "entry writable by its group": entry_writable,
    "entry a symbolic link to a valid-looking file": entry_is_a_link,
    "entry a folder": entry_is_a_folder,
    "root a link to a folder others can write": root_is_a_link_to_a_folder_others_write,
}
ROOT_CASES: dict[str, Case] = {
    "entry of another uid": entry_of_another_uid,
    "width verdict of another uid": verdict_of_another_uid,
    "namespace folder of another uid": folder_of_another_uid,
    "root of another uid": root_of_another_uid,
    "root a link of another uid": root_is_a_link_of_another_uid,
}


def check_refused(run: Run, marker: Path, warm: Warm, words: list[str]) -> None:
    assert not marker.exists(), "a library planted in the cache was loaded"
    assert f"({warm.verdict}-byte vectors" in run.stdout, "a width verdict planted in the cache was used"
    assert run.result == EXPECTED, run.stderr[-3000:]
    assert len(run.warnings) == 1, run.warnings
    assert all(w in run.warnings[0] for w in words), (words, run.warnings[0])


def refuse_case(case: Case, warm: Warm, tmp_path: Path) -> None:
    (scratch := tmp_path / "scratch").mkdir()
    (home := tmp_path / "home").mkdir(mode=0o700)
    shutil.copytree(warm.path, cache := home / "cache")
    cachedir, words = case(cache, scratch, warm)
    before = snapshot(cache)
    check_refused(run_program(cachedir, marker := tmp_path / "marker"), marker, warm, words)
    assert snapshot(cache) == before, "something was written into a refused cache"


@pytest.mark.parametrize("name", CASES)
def test_a_cache_that_is_not_only_yours_is_refused(name: str, warm: Warm, tmp_path: Path) -> None:
    refuse_case(CASES[name], warm, tmp_path)


@as_root
@pytest.mark.parametrize("name", ROOT_CASES)
def test_a_cache_of_another_uid_is_refused_even_for_root(name: str, warm: Warm, tmp_path: Path) -> None:
    refuse_case(ROOT_CASES[name], warm, tmp_path)


class PipeFeeder(threading.Thread):
    """Writes `data` once into a named pipe, as soon as a reader has it open (unless stopped first)."""

    def __init__(self, path: Path, data: bytes):
        super().__init__(daemon=True)
        self.path, self.data, self.done = path, data, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # NOTE: ENXIO: no reader yet
                time.sleep(0.005)
                continue
            try:
                os.write(fd, self.data)
            except OSError:
                pass
            finally:
                os.close(fd)
            return


def test_a_named_pipe_where_an_entry_should_be_is_refused_without_waiting(warm: Warm, tmp_path: Path) -> None:
    """A reader of the pipe would get the planted library from whoever writes it (here a thread), or wait forever."""
    (home := tmp_path / "home").mkdir(mode=0o700)
    shutil.copytree(warm.path, cache := home / "cache")
    (pool := cache / "clang" / warm.pool).unlink()
    os.mkfifo(pool, 0o600)
    feeder = PipeFeeder(pool, warm.planted)
    feeder.start()
    try:
        run = run_program(cache, marker := tmp_path / "marker")
    finally:
        feeder.done.set()
        feeder.join()
    check_refused(run, marker, warm, [f"{pool} is a named pipe (FIFO), not a regular file"])


def test_cachedir_tmp_itself_is_refused_and_nothing_is_made_there(warm: Warm, tmp_path: Path) -> None:
    names = ("clang", "clang-widths", "opencl", "opencl-widths", "failed")
    there = {name for name in names if os.path.lexists(f"/tmp/{name}")}
    try:
        run = run_program(Path("/tmp"), marker := tmp_path / "marker")
    finally:
        made = {name for name in names if os.path.lexists(f"/tmp/{name}")} - there
        for name in made:  # NOTE: what the code before these checks made there
            shutil.rmtree(f"/tmp/{name}", ignore_errors=True)
    problem = "is writable by its group and others" if os.geteuid() == 0 else "is owned by uid 0"
    check_refused(run, marker, warm, [f"{WARNING} /tmp in this process: /tmp {problem}"])
    assert not made, f"made {sorted(made)} in /tmp"


def test_a_root_that_is_your_link_to_your_folder_is_used(warm: Warm, tmp_path: Path) -> None:
    (home := tmp_path / "home").mkdir(mode=0o700)
    shutil.copytree(warm.path, cache := home / "cache")
    (link := home / "link").symlink_to(cache)
    before = snapshot(cache)
    run = run_program(link, marker := tmp_path / "marker")
    assert run.result == EXPECTED and not run.warnings and not marker.exists(), run.stderr[-3000:]
    assert snapshot(cache) == before, "every kernel came from the cache"


# *** in-process: the cache's folders and files, and the failed kernels' sources ***


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o077])
def test_folders_are_made_0700_and_entries_0600_whatever_the_umask(umask: int, tmp_path: Path) -> None:
    cache = tmp_path / "made" / "here" / "cache"
    old = os.umask(umask)
    try:
        with Context(CACHEDIR=str(cache)):
            DiskCache("ns").put("k", b"payload")
            assert DiskCache("ns").get("k") == b"payload"
    finally:
        os.umask(old)
    for folder in (tmp_path / "made", tmp_path / "made" / "here", cache, cache / "ns"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE((cache / "ns" / "k.bin").stat().st_mode) == 0o600
    assert [f.name for f in (cache / "ns").iterdir()] == ["k.bin"], "no temporary file is left"


def test_a_refused_cache_stays_refused_for_the_process(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    (home := tmp_path / "home").mkdir(mode=0o700)
    with Context(CACHEDIR=str(home / "cache")):
        DiskCache("ns").put("good", b"mine")
        (home / "theirs.bin").write_bytes(entry(b"theirs"))
        (home / "cache" / "ns" / "bad.bin").symlink_to(home / "theirs.bin")
        assert DiskCache("ns").get("good") == b"mine"
        assert DiskCache("ns").get("bad") is None
        assert DiskCache("ns").get("good") is None, "the cache is not used after a refusal"
        DiskCache("ns").put("new", b"mine too")
        assert DiskCache("ns").get("bad") is None
    assert not (home / "cache" / "ns" / "new.bin").exists()
    warnings = warnings_in(capfd.readouterr().err)
    assert len(warnings) == 1 and "bad.bin is a symbolic link" in warnings[0], warnings


def test_a_failed_kernel_source_is_not_written_through_a_linked_folder(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (home := tmp_path / "home").mkdir(mode=0o700)
    (cache := home / "cache").mkdir(mode=0o700)
    (elsewhere := tmp_path / "elsewhere").mkdir()
    (cache / "failed").symlink_to(elsewhere)

    def refuse(src: str) -> bytes:
        raise BuildFailed("error: no")

    with Context(CACHEDIR=str(cache)), pytest.raises(KernelBuildError) as e:
        Compiler("test-failed", "test 1", refuse, "a test device").compile_cached("int x;", "k_bad")
    assert not any(elsewhere.iterdir()), "the source was written where the link points"
    assert "its source could not be saved" in str(e.value)
    warnings = warnings_in(capfd.readouterr().err)
    assert len(warnings) == 1 and f"{cache / 'failed'} is a symbolic link, not a folder" in warnings[0], warnings


# *** GPU: program binaries and the width verdict ***

GPU_PROGRAM = """
import numpy as np
from specgrad import Tensor
print("result", (Tensor(np.arange(4, dtype=np.float32), device="GPU") + 1).numpy().tolist())
"""


def run_gpu(cache: Path) -> tuple[list[float], str, list[str]]:
    env = {**os.environ, "CACHEDIR": str(cache), "DEBUG": "2"}
    res = subprocess.run([sys.executable, "-c", GPU_PROGRAM], env=env, capture_output=True, text=True, timeout=300,
                         cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    result = next(line for line in res.stdout.splitlines() if line.startswith("result "))
    return json.loads(result[7:]), res.stdout, warnings_in(res.stderr)


@pytest.fixture(scope="module")
def gpu_warm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, bytes]:
    """A cache the GPU program filled, the width its probe proved, and a planted binary of its kernel (writing 666)."""
    if problem := device_problem("GPU"):
        pytest.skip(f"GPU unavailable: {problem}")
    result, out, warnings = run_gpu(cache := tmp_path_factory.mktemp("gpu_warm") / "cache")
    assert result == [1.0, 2.0, 3.0, 4.0] and not warnings
    name = next(line.split()[3] for line in out.splitlines() if line.startswith("*** GPU"))
    width = re.search(r"float(\d+) vectors", out).group(1)  # NOTE: "GPU device: OpenCL on ..., float16 vectors"
    planted = Device["GPU"].compiler.compile(
        f"__kernel void {name}(__global float* data0, __global const float* data1) {{ data0[0] = 666.0f; }}"
    )
    return cache, width, entry(planted)


@pytest.mark.parametrize("folder", ["opencl", "opencl-widths"])
def test_gpu_binaries_and_verdicts_in_a_folder_others_write_are_refused(
    folder: str, gpu_warm: tuple[Path, str, bytes], tmp_path: Path
) -> None:
    (home := tmp_path / "home").mkdir(mode=0o700)
    shutil.copytree(gpu_warm[0], cache := home / "cache")
    width, planted = gpu_warm[1:]
    (binary := next((cache / folder).iterdir())).write_bytes(
        planted if folder == "opencl" else entry(b"4" if width != "4" else b"8")
    )
    (cache / folder).chmod(0o777)
    before = snapshot(cache)
    result, out, warnings = run_gpu(cache)
    assert result == [1.0, 2.0, 3.0, 4.0], "a planted program binary ran"
    assert f"float{width} vectors" in out, "a planted width verdict was used"
    assert len(warnings) == 1 and f"{cache / folder} is writable by its group and others" in warnings[0], warnings
    assert snapshot(cache) == before and binary.exists()


def test_gpu_builds_go_around_pyopencls_own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyopencl keeps its own cache of builds where the driver has none (Intel's, AMD's: not PoCL) and unpickles what
    it finds there, unchecked: the GPU device's builds do not use it (its own cache, above, keeps the binaries)."""
    if problem := device_problem("GPU"):
        pytest.skip(f"GPU unavailable: {problem}")
    import pyopencl.characterize

    monkeypatch.setattr(pyopencl.characterize, "has_src_build_cache", lambda dev: None)  # NOTE: a driver without one
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert Device["GPU"].compiler.compile("__kernel void k(__global float* x) { x[0] = 1.0f; }")
    assert not (tmp_path / "pyopencl").exists(), "pyopencl's cache was used"


def test_a_build_lock_held_by_a_stopped_process_is_waited_for_a_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Builds of one kernel wait for each other (cache.locked), but a holder that never lets go (a process stopped
    with Ctrl-Z while it compiles) costs at most LOCK_WAIT_S, then the kernel is built anyway."""
    monkeypatch.setattr(cache, "LOCK_WAIT_S", 0.3)
    with Context(CACHEDIR=str(tmp_path)), cache.locked("clang", "ab12"):
        start = time.monotonic()
        with cache.locked("clang", "abff"):  # NOTE: the same stripe, through another descriptor
            waited = time.monotonic() - start
        start = time.monotonic()
        with cache.locked("clang", "cd34"):  # NOTE: another stripe is free
            free = time.monotonic() - start
    assert 0.3 <= waited < 3 and free < 0.1, (waited, free)
    assert stat.S_IMODE((tmp_path / "clang" / "lock-ab").stat().st_mode) == 0o600


def test_a_lock_file_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    """A link planted where a lock file goes is neither created through nor written: the build runs unlocked."""
    (cache_dir := tmp_path / "cache").mkdir(mode=0o700)
    (cache_dir / "clang").mkdir(mode=0o700)
    (target := tmp_path / "elsewhere").write_text("keep")
    (cache_dir / "clang" / "lock-ab").symlink_to(target)
    (cache_dir / "clang" / "lock-cd").symlink_to(tmp_path / "missing")
    with Context(CACHEDIR=str(cache_dir)):
        for key in ("ab12", "cd34"):
            with cache.locked("clang", key):
                pass
    assert target.read_text() == "keep" and not (tmp_path / "missing").exists()
