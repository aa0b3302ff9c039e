"""Hostile input, second round (issue 30), the kernel cache's area: a cache of your own files that was made elsewhere
(restored from a CI cache a pull request's job wrote, a tarball you unpacked), whose entries carry good MACs under
someone else's key or were moved to another name, and a key file that is not safely yours. Each case runs
`specgrad run` on the CLANG device through the CLI (harness.check); every planted library, if loaded, leaves a marker
outside the project from its constructor, so the snapshot check and the case's own check see it."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from specgrad.cache import sign
from tests.hostile.harness import Asset, Assets, Case, Folders, Link, Made, needs_met
from tests.hostile.harness import check as check_case
from tests.test_cache_security import PLANTED_C

CLANG_RUN = ("run", "tiny.yaml", "--weights", "w.safetensors", "--input", "x.npy", "--device", "CLANG")
MARKER = "ran-planted-code"  # NOTE: in <outside>, written by a planted library's constructor
ENV = {"CACHEDIR": "<project>/kc", "PLANTED_MARKER": f"<outside>/{MARKER}"}
THEIR_KEY = os.urandom(32)  # another user's, machine's or CI job's key
KEY_FILE = "../home/.config/specgrad/cache-secret"  # NOTE: where specgrad reads the key with the case's HOME
REFUSED = "not using the kernel cache in this process: its key"


@functools.cache
def planted_library() -> bytes:
    """A shared object whose constructor appends to the file PLANTED_MARKER names (and that passes for the CLANG
    device's thread pool), built once with the system's C compiler."""
    cc = shutil.which("cc") or shutil.which("clang") or "cc"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([cc, "-shared", "-fPIC", "-x", "c", "-", "-o", f"{tmp}/planted.so"], input=PLANTED_C,
                       text=True, check=True, capture_output=True, timeout=60)  # fmt: skip
        return Path(f"{tmp}/planted.so").read_bytes()


def entries_signed(key: Callable[[Assets], bytes] | None, renamed: bool = False) -> Made:
    """Every CLANG kernel entry of the (already planted) cache becomes the planted library, with a good MAC under
    `key` for its own name, or (`renamed`) for another name: an entry someone made elsewhere, copied or moved in. With
    no key, the entry is as a specgrad without keys wrote it (the library's sha256 first), which anyone can make."""

    def make(path: Path, assets: Assets) -> None:
        entries = sorted((path / "clang").glob("*.bin"))
        assert entries, f"the warmed cache {path} holds no CLANG entries"
        lib = planted_library()
        for f in entries:
            name = "0" * 64 if renamed else f.name.removesuffix(".bin")
            mac = hashlib.sha256(lib).digest() if key is None else sign(key(assets), "clang", name, lib)
            f.write_bytes(mac + lib)

    return Made(make)


def session_key(assets: Assets) -> bytes:
    from tests.hostile.harness import CACHE_KEY

    return CACHE_KEY


def their_key(assets: Assets) -> bytes:
    return THEIR_KEY


def nothing_ran(ctx: Folders) -> None:
    assert not (ctx.outside / MARKER).exists(), "a library planted in the kernel cache was loaded"


def rebuilt(ctx: Folders) -> None:
    """Nothing planted ran, and the entries were made again with the case's own key."""
    nothing_ran(ctx)
    lib = planted_library()
    assert not [f for f in (ctx.project / "kc" / "clang").glob("*.bin") if f.read_bytes()[32:] == lib]


# fmt: off
CASES = [
    Case("cache-copied-made-by-anyone", "cache-key",
         {"kc": Asset("cache"), "kc/": entries_signed(None)}, CLANG_RUN, 0, "0: class", env=ENV,
         writes=("kc",), needs=("clang",), check=rebuilt),
    Case("cache-copied-made-with-another-key", "cache-key",
         {"kc": Asset("cache"), "kc/": entries_signed(their_key)}, CLANG_RUN, 0, "0: class", env=ENV,
         writes=("kc",), needs=("clang",), check=rebuilt),
    Case("cache-entry-renamed-to-another-key", "cache-key",
         {"kc": Asset("cache"), "kc/": entries_signed(session_key, renamed=True)}, CLANG_RUN, 0, "0: class", env=ENV,
         writes=("kc",), needs=("clang",), check=rebuilt),
    # NOTE: the cache and the key it was made with, planted together: the key is a link to theirs, so it is refused
    Case("cache-key-a-link-to-their-key", "cache-key",
         {"kc": Asset("cache"), "kc/": entries_signed(their_key), "../outside/their-key": THEIR_KEY,
          KEY_FILE: Link("<outside>/their-key")}, CLANG_RUN, 0, REFUSED, env=ENV, needs=("clang",), check=nothing_ran),
    Case("cache-key-readable-by-others", "cache-key",
         {"kc": Asset("cache"), "kc/": entries_signed(session_key), KEY_FILE: Made(lambda p, a: p.chmod(0o644))},
         CLANG_RUN, 0, "can be read or written by its group and others", env=ENV, needs=("clang",),
         check=nothing_ran),
]
# fmt: on


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_hostile_cache_case(case: Case, folders: Folders) -> None:
    if why := needs_met(case.needs):
        pytest.skip(why)
    check_case(folders, case)


def test_the_planted_library_would_leave_its_marker(folders: Folders) -> None:
    """The cases' checks mean something: loading the planted library does write the marker."""
    if why := needs_met(("clang",)):
        pytest.skip(why)
    lib = folders.scratch / "planted-check.so"
    lib.parent.mkdir(parents=True, exist_ok=True)
    lib.write_bytes(planted_library())
    code = f"import ctypes; ctypes.CDLL({str(lib)!r})"
    env = {**os.environ, "PLANTED_MARKER": str(marker := folders.outside / MARKER)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    assert marker.read_text() == "ran\n"
