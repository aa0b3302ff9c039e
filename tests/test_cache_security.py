"""The kernel cache holds only the user's own files: a cache folder or entry that is someone else's, that others can
write, a link, a pipe or a folder where an entry should be is refused with one warning, nothing planted there is
loaded, and the program computes right without the cache (docs/devices.md, "The kernel cache"). Entries of the user's
own made with another key (copied from another user or machine) or under another name are rebuilt, never loaded, and
a key that is not safely the user's own turns the cache off."""

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

# NOTE: planted entries carry a good MAC under the key the program uses, so what refuses them is the check under test
KEY = os.urandom(32)

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


def entry(path: Path, payload: bytes, key: bytes = KEY) -> bytes:
    """The cache entry at `path` (CACHEDIR/<namespace>/<key>.bin) holding `payload`, made with `key`: it passes the MAC
    check there when `key` is the program's."""
    return cache.sign(key, path.parent.name, path.name.removesuffix(".bin"), payload) + payload


def write_key(folder: Path, key: bytes = KEY) -> Path:
    """A key file as specgrad makes one (0600 in a 0700 folder)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    (path := folder / "cache-secret").write_bytes(key)
    path.chmod(0o600)
    return path


@dataclass
class Warm:
    """A cache the CLANG program filled, and what a planted one holds instead."""

    path: Path
    key_file: Path  # the programs' key (CACHE_SECRET), holding KEY
    verdict: str  # the width the probe proved here, in bytes
    pool: str  # the thread pool's entry, loaded when the device opens
    planted: bytes  # the planted library
    planted_verdict: bytes  # a width verdict the probe did not give


@dataclass
class Run:
    result: list[float] | None  # None where the program failed
    stdout: str
    stderr: str
    warnings: list[str]


def run_program(cache: Path, marker: Path, key_file: Path) -> Run:
    env = {**os.environ, "CACHEDIR": str(cache), "PLANTED_MARKER": str(marker), "DEBUG": "1",
           "CACHE_SECRET": str(key_file)}  # fmt: skip
    res = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120,
                         cwd=ROOT)  # fmt: skip
    result = next((line for line in res.stdout.splitlines() if line.startswith("result ")), None)
    return Run(json.loads(result[7:]) if result else None, res.stdout, res.stderr, warnings_in(res.stderr))


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The programs' key (CACHE_SECRET), holding KEY."""
    return write_key(tmp_path_factory.mktemp("key") / "config")


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory, key_file: Path) -> Warm:
    if problem := device_problem("CLANG"):
        pytest.skip(f"CLANG unavailable: {problem}")
    folder = tmp_path_factory.mktemp("warm")
    compiler = shutil.which("cc") or shutil.which("clang") or "cc"
    subprocess.run([compiler, "-shared", "-fPIC", "-x", "c", "-", "-o", str(folder / "planted.so")], input=PLANTED_C,
                   text=True, check=True, capture_output=True)  # fmt: skip
    run = run_program(folder / "cache", folder / "marker", key_file)
    assert run.result == EXPECTED and not run.warnings, run.stderr[-3000:]
    verdict = next((folder / "cache" / "clang-widths").iterdir()).read_bytes()[32:].decode()
    pool = next(f.name for f in (folder / "cache" / "clang").iterdir() if b"sg_pool_start" in f.read_bytes())
    other = b"0" if verdict != "0" else b"16"
    return Warm(folder / "cache", key_file, verdict, pool, (folder / "planted.so").read_bytes(), other)


def plant_everywhere(cache: Path, warm: Warm, key: bytes = KEY) -> None:
    """Every entry becomes the planted library, and the width verdict one the probe did not give, made with `key`."""
    for f in cache.rglob("*.bin"):
        f.write_bytes(entry(f, warm.planted_verdict if f.parent.name.endswith("-widths") else warm.planted, key))


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
        f.write_bytes(entry(f, warm.planted))
    (cache / "clang").chmod(0o777)
    return cache, [f"{cache / 'clang'} is writable by its group and others", f"chmod 700 {cache / 'clang'}"]


def entry_writable(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    (pool := cache / "clang" / warm.pool).write_bytes(entry(pool, warm.planted))
    pool.chmod(0o664)
    return cache, [f"{pool} is writable by its group", f"chmod 600 {pool}"]


def entry_of_another_uid(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    (pool := cache / "clang" / warm.pool).write_bytes(entry(pool, warm.planted))
    os.chown(pool, OTHER_UID, OTHER_UID)
    return cache, [f"{pool} is owned by uid {OTHER_UID}, not by you"]


def verdict_of_another_uid(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    (verdict := next((cache / "clang-widths").iterdir())).write_bytes(entry(verdict, warm.planted_verdict))
    os.chown(verdict, OTHER_UID, OTHER_UID)
    return cache, [f"{verdict} is owned by uid {OTHER_UID}"]


def folder_of_another_uid(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    for f in (cache / "clang").iterdir():
        f.write_bytes(entry(f, warm.planted))
    os.chown(cache / "clang", OTHER_UID, OTHER_UID)
    return cache, [f"{cache / 'clang'} is owned by uid {OTHER_UID}"]


def root_of_another_uid(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    plant_everywhere(cache, warm)
    os.chown(cache, OTHER_UID, OTHER_UID)
    return cache, [f"{cache} is owned by uid {OTHER_UID}"]


def entry_is_a_link(cache: Path, scratch: Path, warm: Warm) -> tuple[Path, list[str]]:
    pool = cache / "clang" / warm.pool
    (target := scratch / "valid-looking.bin").write_bytes(entry(pool, warm.planted))
    target.chmod(0o600)
    pool.unlink()
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
    check_refused(run_program(cachedir, marker := tmp_path / "marker", warm.key_file), marker, warm, words)
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
    feeder = PipeFeeder(pool, entry(pool, warm.planted))
    feeder.start()
    try:
        run = run_program(cache, marker := tmp_path / "marker", warm.key_file)
    finally:
        feeder.done.set()
        feeder.join()
    check_refused(run, marker, warm, [f"{pool} is a named pipe (FIFO), not a regular file"])


def test_cachedir_tmp_itself_is_refused_and_nothing_is_made_there(warm: Warm, tmp_path: Path) -> None:
    names = ("clang", "clang-widths", "opencl", "opencl-widths", "failed")
    there = {name for name in names if os.path.lexists(f"/tmp/{name}")}
    try:
        run = run_program(Path("/tmp"), marker := tmp_path / "marker", warm.key_file)
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
    run = run_program(link, marker := tmp_path / "marker", warm.key_file)
    assert run.result == EXPECTED and not run.warnings and not marker.exists(), run.stderr[-3000:]
    assert snapshot(cache) == before, "every kernel came from the cache"


# *** entries of your own that were not made here: another key, another name ***

OTHER_KEY = os.urandom(32)  # another user's, machine's or installation's key


def copied_from_another_key(cache: Path, warm: Warm) -> None:
    """The cache restored from someone else's (a CI cache, a tarball): every entry theirs, with good MACs under their
    key, and files of your own."""
    plant_everywhere(cache, warm, OTHER_KEY)


def renamed(cache: Path, warm: Warm) -> None:
    """An entry made with your key under another name, moved to the thread pool's name."""
    (pool := cache / "clang" / warm.pool).write_bytes(entry(cache / "clang" / f"{'0' * 64}.bin", warm.planted))
    assert pool.read_bytes()[32:] == warm.planted


def moved_from_another_namespace(cache: Path, warm: Warm) -> None:
    """An entry made with your key for the same name in another folder (a lowering's), moved into clang/."""
    (pool := cache / "clang" / warm.pool).write_bytes(entry(cache / "clang-lowered" / warm.pool, warm.planted))
    assert pool.read_bytes()[32:] == warm.planted


def made_before_keys(cache: Path, warm: Warm) -> None:
    """Entries as a specgrad without keys wrote them (the payload's sha256 first), which anyone can make."""
    for f in cache.rglob("*.bin"):
        payload = warm.planted_verdict if f.parent.name.endswith("-widths") else warm.planted
        f.write_bytes(hashlib.sha256(payload).digest() + payload)


NOT_MADE_HERE: dict[str, Callable[[Path, Warm], None]] = {
    "copied from a cache made with another key": copied_from_another_key,
    "renamed to another key": renamed,
    "moved from another namespace": moved_from_another_namespace,
    "made before entries carried a MAC": made_before_keys,
}


@pytest.mark.parametrize("name", NOT_MADE_HERE)
def test_an_entry_not_made_here_under_its_name_is_rebuilt_not_loaded(name: str, warm: Warm, tmp_path: Path) -> None:
    (home := tmp_path / "home").mkdir(mode=0o700)
    shutil.copytree(warm.path, cache := home / "cache")
    NOT_MADE_HERE[name](cache, warm)
    run = run_program(cache, marker := tmp_path / "marker", warm.key_file)
    assert not marker.exists(), "a library planted in the cache was loaded"
    assert f"({warm.verdict}-byte vectors" in run.stdout, "a width verdict planted in the cache was used"
    assert run.result == EXPECTED and not run.warnings, run.stderr[-3000:]
    pool = (cache / "clang" / warm.pool).read_bytes()
    assert b"sg_pool_start" in pool and pool[32:] != warm.planted, "the entry was not rebuilt and written back"
    assert pool == entry(cache / "clang" / warm.pool, pool[32:]), "the rebuilt entry is made with your key"


def key_link(key_file: Path, cache: Path) -> Path:
    (link := cache.parent / "config" / "linked-secret").parent.mkdir(mode=0o700)
    link.symlink_to(key_file)
    return link


def key_readable(key_file: Path, cache: Path) -> Path:
    (path := cache.parent / "config" / "readable-secret").parent.mkdir(mode=0o700)
    shutil.copy(key_file, path)
    path.chmod(0o644)
    return path


UNSAFE_KEYS = {"a symbolic link to a key": (key_link, "is a symbolic link, not a regular file"),
               "readable by others": (key_readable, "can be read or written by its group and others")}  # fmt: skip


@pytest.mark.parametrize("name", UNSAFE_KEYS)
def test_a_cache_signed_with_a_key_that_is_not_safely_yours_is_not_used(name: str, warm: Warm, tmp_path: Path) -> None:
    """Every entry is made with the key the (unsafe) key file holds: were the file used, they would all load."""
    (home := tmp_path / "home").mkdir(mode=0o700)
    shutil.copytree(warm.path, cache := home / "cache")
    plant_everywhere(cache, warm)
    make, problem = UNSAFE_KEYS[name]
    key = make(warm.key_file, cache)
    before = snapshot(cache)
    check_refused(run_program(cache, marker := tmp_path / "marker", key), marker, warm, [f"{key} {problem}"])
    assert snapshot(cache) == before, "something was written into a cache without a key"


def test_a_planted_pocl_folder_is_not_used(tmp_path: Path) -> None:
    """PoCL's kernel cache cannot be signed file by file: its folder's name comes from your key, so a copied cache's
    PoCL folder (CACHEDIR/pocl, or one made with another key) is never PoCL's; without a usable key PoCL's is off."""
    if problem := device_problem("GPU"):
        pytest.skip(f"GPU unavailable: {problem}")
    code = "import json, os\nfrom specgrad.runtime.ops_gpu import CLContext\nCLContext()\n" + (
        "print(json.dumps([os.environ.get('POCL_CACHE_DIR'), os.environ.get('POCL_KERNEL_CACHE')]))")  # fmt: skip
    (home := tmp_path / "home").mkdir(mode=0o700)
    (cache_dir := home / "cache").mkdir(mode=0o700)
    (cache_dir / "pocl").mkdir(mode=0o700)
    (cache_dir / f"pocl-{cache.folder_tag(OTHER_KEY, 'pocl')}").mkdir(mode=0o700)
    found = {}
    for label, key in (("mine", KEY), ("other", OTHER_KEY), ("unsafe", KEY)):
        key_file = write_key(tmp_path / label, key)
        key_file.chmod(0o640 if label == "unsafe" else 0o600)
        env = {k: v for k, v in os.environ.items() if not k.startswith("POCL_")}
        env.update(CACHEDIR=str(cache_dir), CACHE_SECRET=str(key_file))
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                             cwd=ROOT)  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        found[label] = (*json.loads(res.stdout.splitlines()[-1]), warnings_in(res.stderr))
    for label, key in (("mine", KEY), ("other", OTHER_KEY)):
        assert found[label] == (str(cache_dir / f"pocl-{cache.folder_tag(key, 'pocl')}"), None, []), found[label]
    folder, kernel_cache, warnings = found["unsafe"]
    assert kernel_cache == "0" and not folder.startswith(str(cache_dir)) and len(warnings) == 1, found["unsafe"]


# *** in-process: the cache's folders and files, and the failed kernels' sources ***


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o077])
def test_folders_are_made_0700_and_entries_0600_whatever_the_umask(umask: int, tmp_path: Path) -> None:
    cache = tmp_path / "made" / "here" / "cache"
    old = os.umask(umask)
    try:
        with Context(CACHEDIR=str(cache), CACHE_SECRET=str(tmp_path / "config" / "key")):
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
    with Context(CACHEDIR=str(home / "cache"), CACHE_SECRET=str(write_key(home / "config"))):
        DiskCache("ns").put("good", b"mine")
        (home / "theirs.bin").write_bytes(entry(home / "cache" / "ns" / "bad.bin", b"theirs"))
        (home / "cache" / "ns" / "bad.bin").symlink_to(home / "theirs.bin")
        assert DiskCache("ns").get("good") == b"mine"
        assert DiskCache("ns").get("bad") is None
        assert DiskCache("ns").get("good") is None, "the cache is not used after a refusal"
        DiskCache("ns").put("new", b"mine too")
        assert DiskCache("ns").get("bad") is None
    assert not (home / "cache" / "ns" / "new.bin").exists()
    warnings = warnings_in(capfd.readouterr().err)
    assert len(warnings) == 1 and "bad.bin is a symbolic link" in warnings[0], warnings


# *** in-process: the key ***


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o077])
def test_the_key_is_made_0600_in_a_0700_folder_whatever_the_umask(umask: int, tmp_path: Path) -> None:
    path = tmp_path / "config" / "specgrad" / "cache-secret"
    old = os.umask(umask)
    try:
        with Context(CACHEDIR=str(tmp_path / "cache"), CACHE_SECRET=str(path)):
            DiskCache("ns").put("k", b"payload")
            key = cache.cache_secret()
    finally:
        os.umask(old)
    for folder in (tmp_path / "config", path.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_bytes() == key and len(key) == 32
    assert [f.name for f in path.parent.iterdir()] == ["cache-secret"], "no temporary file is left"
    assert (tmp_path / "cache" / "ns" / "k.bin").read_bytes() == cache.sign(key, "ns", "k", b"payload") + b"payload"
    assert not (tmp_path / "cache" / "cache-secret").exists(), "the key is never in the cache"


def test_processes_that_make_the_key_at_once_agree_on_it(tmp_path: Path) -> None:
    code = "from specgrad.cache import cache_secret\nprint(cache_secret().hex())"
    env = {**os.environ, "CACHE_SECRET": str(path := tmp_path / "config" / "cache-secret")}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]  # fmt: skip
    keys = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert keys == {path.read_bytes().hex()}, keys
    assert [f.name for f in path.parent.iterdir()] == ["cache-secret"], "no temporary file is left"


def test_an_entry_is_good_only_under_its_name_and_with_its_key(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    with Context(CACHEDIR=str(folder), CACHE_SECRET=str(write_key(tmp_path / "mine"))):
        DiskCache("ns").put("a", b"payload")
        (folder / "other").mkdir(mode=0o700)
        shutil.copy(folder / "ns" / "a.bin", folder / "ns" / "b.bin")
        shutil.copy(folder / "ns" / "a.bin", folder / "other" / "a.bin")
        assert DiskCache("ns").get("a") == b"payload"
        assert DiskCache("ns").get("b") is None and DiskCache("other").get("a") is None
    with Context(CACHEDIR=str(folder), CACHE_SECRET=str(write_key(tmp_path / "theirs", OTHER_KEY))):
        assert DiskCache("ns").get("a") is None, "an entry made with another key was read"
        DiskCache("ns").put("a", b"payload")  # NOTE: rebuilt: overwritten with this key's MAC
        assert DiskCache("ns").get("a") == b"payload"
    assert (folder / "ns" / "a.bin").read_bytes()[:32] == cache.sign(OTHER_KEY, "ns", "a", b"payload")


def key_that_is(what: str) -> Callable[[Path], tuple[Path, str, str]]:
    """Makes an unsafe key file (or its folder) in a folder, and says what the warning reads: what is wrong and how
    to fix it."""

    def make(folder: Path) -> tuple[Path, str, str]:
        (config := folder / "config").mkdir(mode=0o700)
        path = write_key(config)
        if what == "link":
            (target := folder / "elsewhere").write_bytes(KEY)
            target.chmod(0o600)
            path.unlink()
            path.symlink_to(target)
            return path, "is a symbolic link, not a regular file", f"remove it (rm {path})"
        if what == "folder":
            path.unlink()
            path.mkdir(mode=0o700)
            return path, "is a folder, not a regular file", "set CACHE_SECRET to the path of a file"  # NOTE: no rm -r
        if what == "fifo":
            path.unlink()
            os.mkfifo(path, 0o600)
            return path, "is a named pipe (FIFO), not a regular file", f"remove it (rm {path})"
        if what in ("0640", "0666", "0602"):
            path.chmod(int(what, 8))
            who = {"0640": "its group", "0666": "its group and others", "0602": "others"}[what]
            return path, f"can be read or written by {who},", f"To fix it: remove it (rm {path})"
        if what == "short":
            path.write_bytes(b"1234")
            return path, "holds 4 bytes, not a key of 16 to 4096", "a new key is made at the next run"
        if what == "folder others write":
            config.chmod(0o777)
            return path, f"{path}: {config} is writable by its group and others", "make that folder yours"
        if what == "parent others write":
            folder.chmod(0o777)
            return path, f"{path}: {folder} is writable by its group and others without", "set CACHE_SECRET"
        if what == "another uid":
            os.chown(path, OTHER_UID, OTHER_UID)
            return path, f"is owned by uid {OTHER_UID}, not by you", f"remove it (rm {path})"
        raise AssertionError(what)

    return make


UNSAFE = ["link", "folder", "fifo", "0640", "0666", "0602", "short", "folder others write", "parent others write",
          pytest.param("another uid", marks=as_root)]  # fmt: skip


@pytest.mark.parametrize("what", UNSAFE)
def test_a_key_that_is_not_safely_yours_turns_the_cache_off_with_one_warning(
    what: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (folder := tmp_path / "keys").mkdir(mode=0o700)
    path, problem, fix = key_that_is(what)(folder)
    before = snapshot(folder)
    (cache_dir := tmp_path / "cache").mkdir(mode=0o700)
    (cache_dir / "ns").mkdir(mode=0o700)
    (cache_dir / "ns" / "k.bin").write_bytes(entry(cache_dir / "ns" / "k.bin", b"signed with the key in the file"))
    with Context(CACHEDIR=str(cache_dir), CACHE_SECRET=str(path)):
        assert DiskCache("ns").get("k") is None, "an entry was read with a key that is not safely yours"
        DiskCache("ns").put("new", b"payload")
        with DiskCache("ns").building("new"):
            pass
        assert DiskCache("ns").get("new") is None
    assert sorted(f.name for f in (cache_dir / "ns").iterdir()) == ["k.bin"], "the cache was written without a key"
    assert snapshot(folder) == before, "the unsafe key (or its folder) was changed"
    warnings = warnings_in(capfd.readouterr().err)
    assert len(warnings) == 1 and f"its key {path}" in warnings[0], warnings
    assert problem in warnings[0] and fix in warnings[0] and "Kernels are compiled afresh" in warnings[0], warnings


@pytest.mark.parametrize("where", ["in the cache", "in a folder of the cache"])
def test_a_key_inside_the_cache_it_signs_turns_the_cache_off(
    where: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A cache restored from elsewhere would bring such a key with it, and entries it signed would load."""
    (cache_dir := tmp_path / "cache").mkdir(mode=0o700)
    path = cache_dir / "key" if where == "in the cache" else cache_dir / "keys" / "key"
    with Context(CACHEDIR=str(cache_dir), CACHE_SECRET=str(path)):
        DiskCache("ns").put("new", b"payload")
        assert DiskCache("ns").get("new") is None
    assert not path.exists() and not (cache_dir / "ns").exists(), "a key or an entry was written"
    warnings = warnings_in(capfd.readouterr().err)
    assert len(warnings) == 1 and f"its key {path} lies inside the kernel cache" in warnings[0], warnings
    assert "set CACHE_SECRET to a file outside CACHEDIR" in warnings[0], warnings


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


def run_gpu(cache: Path, key_file: Path) -> tuple[list[float], str, list[str]]:
    env = {**os.environ, "CACHEDIR": str(cache), "DEBUG": "2", "CACHE_SECRET": str(key_file)}
    res = subprocess.run([sys.executable, "-c", GPU_PROGRAM], env=env, capture_output=True, text=True, timeout=300,
                         cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    result = next(line for line in res.stdout.splitlines() if line.startswith("result "))
    return json.loads(result[7:]), res.stdout, warnings_in(res.stderr)


@pytest.fixture(scope="module")
def gpu_warm(tmp_path_factory: pytest.TempPathFactory, key_file: Path) -> tuple[Path, str, bytes]:
    """A cache the GPU program filled, the width its probe proved, and a planted binary of its kernel (writing 666)."""
    if problem := device_problem("GPU"):
        pytest.skip(f"GPU unavailable: {problem}")
    result, out, warnings = run_gpu(cache := tmp_path_factory.mktemp("gpu_warm") / "cache", key_file)
    assert result == [1.0, 2.0, 3.0, 4.0] and not warnings
    name = next(line.split()[3] for line in out.splitlines() if line.startswith("*** GPU"))
    width = re.search(r"float(\d+) vectors", out).group(1)  # NOTE: "GPU device: OpenCL on ..., float16 vectors"
    planted = Device["GPU"].compiler.compile(
        f"__kernel void {name}(__global float* data0, __global const float* data1) {{ data0[0] = 666.0f; }}"
    )
    return cache, width, planted


@pytest.mark.parametrize("folder", ["opencl", "opencl-widths"])
def test_gpu_binaries_and_verdicts_in_a_folder_others_write_are_refused(
    folder: str, gpu_warm: tuple[Path, str, bytes], key_file: Path, tmp_path: Path
) -> None:
    (home := tmp_path / "home").mkdir(mode=0o700)
    shutil.copytree(gpu_warm[0], cache := home / "cache")
    width, planted = gpu_warm[1:]
    binary = next((cache / folder).iterdir())
    binary.write_bytes(entry(binary, planted if folder == "opencl" else b"4" if width != "4" else b"8"))
    (cache / folder).chmod(0o777)
    before = snapshot(cache)
    result, out, warnings = run_gpu(cache, key_file)
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
