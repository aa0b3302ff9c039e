"""How a hostile case runs: the files it plants (in a project folder, in a folder beside it, and reading a sentinel
folder elsewhere), the command run as a user runs it (a child process with a time limit and memory limits),
and what is checked afterwards: the exit code, the message, no traceback, no secret printed, and nothing changed
outside the paths the command may write (names, sizes, mtimes, modes, owners, file types, link targets)."""

from __future__ import annotations

import contextlib
import os
import pty
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from specgrad.flags import REGISTRY

SECRET = "SECRET-hostile-7f3a-never-printed"  # NOTE: in every file outside the project; no output may hold it
LIMIT_S = 60  # NOTE: a guard against hangs, not a speed test
LIMIT_DATA = 4 << 30  # bytes of memory the command may allocate (RLIMIT_DATA: heap and anonymous mappings)
LIMIT_AS = 64 << 30  # bytes of address space, files mapped read-only included (a 10 GB weights file may be mapped)
REPO = Path(__file__).resolve().parents[2]
# NOTE: one kernel cache key per session, put in every case's HOME where specgrad looks for it (CACHE_SECRET's
# default): no case makes one (a change the snapshots would see), and the session's cache verifies in every case
CACHE_KEY = os.urandom(32)

# NOTE: the command as the `specgrad` script runs it; PATCH plants an engine bug or a failing disk first
BOOT = "import sys\n{patch}\nfrom specgrad.cli.main import app\napp(prog_name='specgrad')\n"

TINY = """\
specgrad: 1
name: tiny
seed: 0
input: {shape: [2]}
model:
  - linear: 8
  - relu
  - linear: 2
data: {source: spirals, samples: 64, batch_size: 16}
train: {epochs: 1, lr: 0.01}
"""
TABLE = """\
specgrad: 1
name: table
input: {shape: [1]}
model: [{linear: 1}]
data: {source: csv, path: d.csv, target: y, batch_size: 2}
train: {loss: mse}
"""
ROWS = "x,y\n" + "".join(f"{i},{2 * i + 1}\n" for i in range(10))


# *** what a case plants: a path relative to the project folder (../outside/... reaches the folder beside it) ***


@dataclass(frozen=True)
class Fifo:
    """A named pipe nobody writes to: reading it would wait forever."""


@dataclass(frozen=True)
class Link:
    """A symbolic link to `target` (placeholders filled in)."""

    target: str


@dataclass(frozen=True)
class Sparse:
    """A file of `size` bytes that takes no disk: `head`, then holes (zeros)."""

    size: int
    head: bytes = b""


@dataclass(frozen=True)
class Folder:
    mode: int = 0o755


@dataclass(frozen=True)
class Asset:
    """A copy of a file or folder the session made once (Assets.NAMES)."""

    name: str


@dataclass(frozen=True)
class Made:
    """Made by a function of (its path, the assets)."""

    make: Callable[[Path, Assets], None]


@dataclass(frozen=True)
class Case:
    """One hostile input. `files` are planted in a copy of the base project (tiny.yaml, table.yaml, d.csv, x.npy,
    w.safetensors); `cmd` is the specgrad command line (or the exported C program's, with `program="runner"`);
    `writes` are the project paths it may change; `bullet` names the line of issue 14 it covers."""

    id: str
    bullet: str
    files: dict[str, Any]
    cmd: tuple[str, ...]
    code: int
    says: str
    writes: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    patch: str = ""
    program: str = "specgrad"
    stdin: bytes = b""
    needs: tuple[str, ...] = ()  # "root", "nonroot", "clang"
    mounts: dict[str, str] = field(default_factory=dict)  # project path -> tmpfs options (root only)
    slow: bool = False
    times: int = 1  # copies of the command run at once
    tty: bool = False  # output to a terminal (TERM=dumb), where nothing strips an escape sequence from a message
    check: Callable[[Folders], None] | None = None


@dataclass
class Folders:
    """The folders of one case: `project` (the current folder), `outside` beside it, `sentinel` elsewhere (shared,
    read-only for the session), `home` and `tmp` (HOME and TMPDIR of the command), `cache` (the session's kernel
    cache unless the case plants its own)."""

    root: Path
    sentinel: Path
    cache: Path
    scratch: Path
    assets: Assets

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    def fill(self, text: str) -> str:
        for name, path in (("project", self.project), ("outside", self.outside), ("sentinel", self.sentinel),
                           ("cache", self.cache)):  # fmt: skip
            text = text.replace(f"<{name}>", str(path))
        return text


def plant(ctx: Folders, rel: str, what: Any) -> None:
    path = ctx.project / ctx.fill(rel)
    assert os.path.normpath(path).startswith(str(ctx.root)), f"{rel} would be planted outside the case's folder"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(what, (Fifo, Link)) and os.path.lexists(path):
        path.unlink()  # NOTE: in place of a file an asset holds
    if isinstance(what, str):
        path.write_text(ctx.fill(what))
    elif isinstance(what, bytes):
        path.write_bytes(what)
    elif isinstance(what, Fifo):
        os.mkfifo(path)
    elif isinstance(what, Link):
        path.symlink_to(ctx.fill(what.target))
    elif isinstance(what, Sparse):
        with open(path, "wb") as f:
            f.write(what.head)
            f.truncate(what.size)
    elif isinstance(what, Folder):
        path.mkdir(exist_ok=True)
        path.chmod(what.mode)
    elif isinstance(what, Asset):
        src = ctx.assets.path(what.name)
        if src.is_dir():
            shutil.copytree(src, path, symlinks=True)
        else:
            shutil.copy2(src, path)
    elif isinstance(what, Made):
        what.make(path, ctx.assets)
    else:
        raise TypeError(f"cannot plant {what!r}")


# *** snapshots: what is on disk, never opened or followed ***


def snapshot(*roots: Path) -> dict[str, tuple]:
    """Every path under `roots` (the roots too): type, permission bits, owner, size, mtime, link target, device."""
    ret: dict[str, tuple] = {}
    for root in roots:
        if not os.path.lexists(root):
            continue
        ret[str(root)] = _entry(str(root))
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                ret[os.path.join(folder, name)] = _entry(os.path.join(folder, name))
    return ret


def _entry(path: str) -> tuple:
    st = os.lstat(path)
    target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    device = st.st_rdev if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else None
    return stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_size, st.st_mtime_ns, target, device


def changes(before: dict[str, tuple], after: dict[str, tuple], writes: list[str]) -> list[str]:
    """Paths that changed and are neither under a path in `writes` nor a folder above one (whose size and mtime change
    when an entry is made in it)."""
    found = []
    for p in sorted(set(before) | set(after)):
        if before.get(p) == after.get(p) or any(p == w or p.startswith(w + os.sep) for w in writes):
            continue
        old, new = before.get(p), after.get(p)
        above = any(w.startswith(p + os.sep) for w in writes)
        if above and old is not None and new is not None and old[:3] == new[:3] and old[5:] == new[5:]:
            continue
        found.append(f"{p}: {_describe(old)} -> {_describe(new)}")
    return found


def _describe(e: tuple | None) -> str:
    if e is None:
        return "absent"
    kind = {stat.S_IFREG: "file", stat.S_IFDIR: "folder", stat.S_IFLNK: "link", stat.S_IFIFO: "fifo",
            stat.S_IFCHR: "chardev", stat.S_IFSOCK: "socket", stat.S_IFBLK: "blockdev"}.get(e[0], "?")  # fmt: skip
    return f"{kind} {oct(e[1])} uid {e[2]} {e[3]} bytes mtime {e[4]}" + (f" -> {e[5]}" if e[5] else "")


# *** running a command ***


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (LIMIT_DATA, LIMIT_DATA))
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def child_env(ctx: Folders, extra: dict[str, str]) -> dict[str, str]:
    """The environment of a case's command: none of specgrad's flags from ours; HOME, TMPDIR and the caches in the
    case's or the session's folders (so a write anywhere else is seen or cannot happen)."""
    env = {k: v for k, v in os.environ.items() if k not in REGISTRY and not k.startswith(("SPECGRAD_", "XDG_"))}
    env.update(HOME=str(ctx.root / "home"), TMPDIR=str(ctx.root / "tmp"), CACHEDIR=str(ctx.cache),
               MPLCONFIGDIR=str(ctx.scratch / "mpl"), PYTHONDONTWRITEBYTECODE="1", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", COLUMNS="160", PYTHONPATH=str(REPO))  # fmt: skip
    env.update({k: ctx.fill(v) for k, v in extra.items()})
    return env


@dataclass
class Result:
    codes: list[int]
    output: str
    seconds: float


def run_command(ctx: Folders, case: Case) -> Result:
    """The case's command (`times` copies at once) in the project folder, each killed when it runs past LIMIT_S."""
    args = [ctx.fill(a) for a in case.cmd]
    if case.program == "runner":
        argv = [str(ctx.project / "runner"), *args]
    else:
        argv = [sys.executable, "-c", BOOT.format(patch=ctx.fill(case.patch)), *args]
    env, started = child_env(ctx, case.env), time.monotonic()
    if case.tty:
        return _run_on_a_terminal(ctx, case, argv, {**env, "TERM": "dumb"}, started)
    procs = [subprocess.Popen(argv, cwd=ctx.project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, preexec_fn=_limit_memory, start_new_session=True)
             for _ in range(case.times)]  # fmt: skip
    outputs, codes = [], []
    for proc in procs:
        try:
            out, _ = proc.communicate(case.stdin, timeout=max(1.0, LIMIT_S - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            for p in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            pytest.fail(f"{case.id}: still running after {LIMIT_S} s (a hang); output so far:\n{_text(out)[-2000:]}")
        outputs.append(_text(out))
        codes.append(proc.returncode)
    return Result(codes, "\n".join(outputs), time.monotonic() - started)


def _run_on_a_terminal(ctx: Folders, case: Case, argv: list[str], env: dict[str, str], started: float) -> Result:
    """The command with its stdout and stderr on a pseudo-terminal: what a person at a terminal would see."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=ctx.project, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            preexec_fn=_limit_memory, start_new_session=True)  # fmt: skip
    os.close(slave)
    chunks = []
    try:
        while (left := LIMIT_S - (time.monotonic() - started)) > 0:
            if not select.select([master], [], [], left)[0]:
                continue
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # NOTE: EIO once the command has exited and its end of the terminal is closed
                break
            if not data:
                break
            chunks.append(data)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"{case.id}: still running after {LIMIT_S} s (a hang)")
        code = proc.wait(timeout=LIMIT_S)
    finally:
        os.close(master)
    return Result([code], _text(b"".join(chunks)).replace("\r\n", "\n"), time.monotonic() - started)


def _text(b: bytes) -> str:
    return b.decode("utf-8", errors="backslashreplace")


def check(ctx: Folders, case: Case) -> Result:
    """Plant the case's files, run it, and check everything the suite promises."""
    for rel, what in case.files.items():
        plant(ctx, rel, what)
    with mounted(ctx, case.mounts):
        watched = (ctx.root, ctx.sentinel)
        before = snapshot(*watched)
        result = run_command(ctx, case)
        after = snapshot(*watched)
    out = result.output
    assert all(c == case.code for c in result.codes), f"exit {result.codes}, expected {case.code}:\n{out}"
    assert case.says in out, f"expected {case.says!r} in:\n{out}"
    assert "Traceback" not in out, out
    assert SECRET not in out, f"a secret from outside the project was printed:\n{out}"
    assert "\x1b" not in out, f"a raw escape sequence reached the terminal:\n{out!r}"
    writes = [os.path.normpath(ctx.project / ctx.fill(w)) for w in case.writes] + [str(ctx.root / "tmp")]
    changed = changes(before, after, writes)
    assert not changed, "changed outside the paths the command may write:\n  " + "\n  ".join(changed)
    left = os.listdir(ctx.root / "tmp")
    assert not left, f"temporary files left in TMPDIR: {left}"
    if case.check is not None:
        case.check(ctx)
    return result


@contextlib.contextmanager
def mounted(ctx: Folders, mounts: dict[str, str]) -> Iterator[None]:
    """Small tmpfs file systems at project paths (full at a few KiB, or read-only), unmounted afterwards."""
    done: list[Path] = []
    try:
        for rel, options in mounts.items():
            path = ctx.project / rel
            path.mkdir(parents=True, exist_ok=True)
            made = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                                  text=True, timeout=LIMIT_S)  # fmt: skip
            if made.returncode != 0:
                pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
            done.append(path)
        yield
    finally:
        for path in reversed(done):
            subprocess.run(["umount", "-l", str(path)], check=False, timeout=LIMIT_S)


# *** what the session makes once ***


class Assets:
    """Files made once per session with the CLI itself, copied into the cases that plant them: `run` (a finished run
    folder of tiny.yaml, trained on CPU), `w` (its model.safetensors), `cache` (a kernel cache warmed by running it on
    CLANG) and `runner` (its exported C program, built with cc)."""

    NAMES = ("run", "w", "cache", "runner")

    def __init__(self, folder: Path, ctx_of: Callable[[Path], Folders]):
        self.folder, self.ctx_of, self.made = folder, ctx_of, {}

    def path(self, name: str) -> Path:
        if name not in self.made:
            self.made[name] = getattr(self, f"_make_{name}")()
        return self.made[name]

    def _cli(self, where: Path, *args: str, env: dict[str, str] | None = None) -> None:
        ctx = self.ctx_of(where)
        ctx.project.mkdir(parents=True, exist_ok=True)
        (ctx.project / "tiny.yaml").write_text(TINY)
        for sub in ("home", "tmp"):
            (ctx.root / sub).mkdir(exist_ok=True)
        give_cache_key(ctx.root / "home")
        case = Case("asset", "", {}, args, 0, "", env=env or {})
        result = run_command(ctx, case)
        assert result.codes == [0], f"making an asset with `specgrad {' '.join(args)}` failed:\n{result.output}"

    def _make_run(self) -> Path:
        where = self.folder / "train"
        self._cli(where, "train", "tiny.yaml", "--device", "CPU", "--out", "runs")
        return where / "project" / "runs" / "tiny-1"

    def _make_w(self) -> Path:
        return self.path("run") / "model.safetensors"

    def _make_cache(self) -> Path:
        where, cache = self.folder / "warm", self.folder / "warm-cache"
        _need_clang()
        (where / "project").mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.path("w"), where / "project" / "w.safetensors")
        _write_examples(where / "project" / "x.npy")
        self._cli(where, "run", "tiny.yaml", "--weights", "w.safetensors", "--input", "x.npy", "--device", "CLANG",
                  env={"CACHEDIR": str(cache)})  # fmt: skip
        return cache

    def _make_runner(self) -> Path:
        where = self.folder / "c"
        _need_clang()
        (where / "project").mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.path("w"), where / "project" / "w.safetensors")
        self._cli(where, "export", "tiny.yaml", "--weights", "w.safetensors", "--format", "c", "--out", "model.c")
        cc = shutil.which("cc") or shutil.which("clang") or shutil.which("gcc")
        binary = where / "runner"
        subprocess.run([cc, "-O2", "-DSPECGRAD_MAIN", "model.c", "-o", str(binary), "-lm"], cwd=where / "project",
                       check=True, timeout=LIMIT_S)  # fmt: skip
        return binary


def _need_clang() -> None:
    """Skip without a C compiler (asked of the PATH: opening the CLANG device here would probe it and write to this
    process's kernel cache, outside the session's folders)."""
    if why := needs_met(("clang",)):
        pytest.skip(why)


def _write_examples(path: Path) -> None:
    import numpy as np

    np.save(path, np.array([[0.5, -0.25], [1.0, 2.0]], dtype=np.float32))


def base_project(ctx: Folders) -> None:
    """The project every case starts from, the folders beside it, and the outside files no case may print."""
    for sub in ("project", "outside", "home", "tmp"):
        (ctx.root / sub).mkdir(parents=True, exist_ok=True)
    give_cache_key(ctx.root / "home")
    p = ctx.project
    (p / "tiny.yaml").write_text(TINY)
    (p / "table.yaml").write_text(TABLE)
    (p / "d.csv").write_text(ROWS)
    _write_examples(p / "x.npy")
    shutil.copy2(ctx.assets.path("w"), p / "w.safetensors")
    write_secrets(ctx.outside)


def give_cache_key(home: Path) -> None:
    """The session's kernel cache key, where specgrad reads it with this HOME (0600 in a 0700 folder)."""
    (folder := home / ".config" / "specgrad").mkdir(mode=0o700, parents=True, exist_ok=True)
    (key := folder / "cache-secret").write_bytes(CACHE_KEY)
    key.chmod(0o600)


def write_secrets(folder: Path) -> None:
    """Files whose contents no command may print: a spec, a CSV, a text file and a weights-like file."""
    (folder / "secret.yaml").write_text(f"{SECRET}: 1\nspecgrad: 1\nname: {SECRET}\n")
    (folder / "secret.csv").write_text(f"{SECRET},y\n1,2\n3,4\n")
    (folder / "secret.txt").write_text(f"{SECRET}\n" * 3)
    (folder / "target.json").write_text(f'["{SECRET}"]\n')


def needs_met(needs: tuple[str, ...]) -> str | None:
    """Why this machine cannot run a case that needs `needs`, or None."""
    for need in needs:
        if need == "root" and os.geteuid() != 0:
            return "needs root (to chown a folder to another user, or to mount a small file system)"
        if need == "nonroot" and os.geteuid() == 0:
            return "needs a user other than root (root writes into read-only folders regardless)"
        if need == "clang" and not (shutil.which("clang") or shutil.which("cc")):
            return "needs a C compiler"
    return None
