"""Writing output files safely (issue 14): helpers.atomic_write replaces only regular files, follows the umask, syncs
the file and its folder, and on any failure keeps the old file and leaves no temporary; run folders stay inside
--out; a full disk, a link, a pipe or a device as an output ends in a clear message and exit code, never a traceback,
with nothing outside the chosen folder changed."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import socket
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.helpers import BadOutputPath, WriteError, append_file, atomic_write
from specgrad.modelspec.errors import SpecError
from specgrad.nn.state import safe_load_metadata
from specgrad.train.run_folder import MetricsLog, new_run_folder

pytestmark = pytest.mark.xdist_group("writing")  # NOTE: on one worker: run folders made once

SPECS = Path(__file__).resolve().parents[1] / "specs"
MLP = str(SPECS / "digits_mlp.yaml")
FAST = ("--set", "data.batch_size=16", "--set", "vars.hidden=32")
runner = CliRunner()
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def tree(root: Path) -> dict[str, tuple]:
    """Everything under `root` as (kind, inode, link target or content hash, mode): equal trees mean nothing changed."""
    found = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        what: str | None = None
        if stat.S_ISLNK(st.st_mode):
            what = os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            what = hashlib.sha256(path.read_bytes()).hexdigest()
        found[str(path.relative_to(root))] = (stat.S_IFMT(st.st_mode), st.st_ino, what, stat.S_IMODE(st.st_mode))
    return found


def temporaries(folder: Path) -> list[Path]:
    """atomic_write's '.<name>.<random>' files left anywhere under `folder`."""
    return [p for p in folder.rglob(".*") if p.name not in (".lock",)]


# *** a disk that is full ***


@contextlib.contextmanager
def small_disk(folder: Path, kib: int, monkeypatch: pytest.MonkeyPatch,
               refused: Callable[[str], bool] = lambda name: True) -> Iterator[bool]:  # fmt: skip
    """`folder` on a disk of `kib` KiB: a real tmpfs where this runs as root and may mount one (yields True); elsewhere
    os.write and os.fsync raise ENOSPC for files in `folder` whose name `refused` picks (yields False)."""
    folder.mkdir(exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(folder)]
    mounted = (
        IS_ROOT and shutil.which("mount") is not None and subprocess.run(mount, capture_output=True).returncode == 0
    )
    if not mounted:
        if not Path("/proc/self/fd").is_dir():
            pytest.skip("needs root (a tmpfs) or /proc/self/fd (to tell which file a write is for)")
        real_write, real_fsync, root = os.write, os.fsync, str(folder.resolve())

        def full(fd: int) -> bool:
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                return False
            return target.startswith(root + os.sep) and refused(os.path.basename(target))

        def write(fd: int, data: bytes) -> int:
            if full(fd):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_write(fd, data)

        def fsync(fd: int) -> None:
            if full(fd):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_fsync(fd)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path) -> None:
    """Use up the rest of a tmpfs (a real one: small_disk yielded True)."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)


# *** atomic_write ***


def test_replaces_a_regular_file_and_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    target.chmod(0o600)
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not temporaries(tmp_path)


def test_a_new_file_follows_the_umask_in_force(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        atomic_write(tmp_path / "private.bin", b"x")
    finally:
        os.umask(old)
    atomic_write(tmp_path / "shared.bin", b"x")
    assert stat.S_IMODE((tmp_path / "private.bin").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "shared.bin").stat().st_mode) == 0o666 & ~old


def _make(kind: str, target: Path, elsewhere: Path) -> None:
    if kind == "link to a file":
        target.symlink_to(elsewhere / "secret.txt")
    elif kind == "dangling link":
        target.symlink_to(elsewhere / "not-yet")
    elif kind == "link to a folder":
        target.symlink_to(elsewhere)
    elif kind == "named pipe":
        os.mkfifo(target)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(target))
    elif kind == "folder":
        target.mkdir()
    elif kind == "device":
        if not IS_ROOT:
            pytest.skip("making a device node needs root")
        os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 7))  # NOTE: a copy of /dev/full


KINDS = {"link to a file": "a symbolic link", "dangling link": "a symbolic link", "link to a folder": "a symbolic link",
         "named pipe": "a named pipe (FIFO)", "socket": "a socket", "folder": "a folder",
         "device": "a character device"}  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_only_a_regular_file_is_replaced(tmp_path: Path, kind: str) -> None:
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("keep me")
    _make(kind, here / "out.bin", elsewhere)
    before = tree(tmp_path)
    for write in (atomic_write, append_file):
        with pytest.raises(BadOutputPath) as e:
            write(here / "out.bin", b"data")
        assert str(e.value) == f"cannot write {here / 'out.bin'}: it is {KINDS[kind]}, not a regular file (only a " \
            "regular file is replaced)"  # fmt: skip
        assert tree(tmp_path) == before, "nothing changed, here or where a link points"


def test_a_missing_folder_or_a_nul_byte_is_a_bad_output_path(tmp_path: Path) -> None:
    with pytest.raises(BadOutputPath, match="the folder .*no-such does not exist"):
        atomic_write(tmp_path / "no-such" / "out.bin", b"x")
    (tmp_path / "file").write_text("a file")
    with pytest.raises(BadOutputPath, match="file is not a folder"):
        atomic_write(tmp_path / "file" / "out.bin", b"x")
    with pytest.raises(BadOutputPath, match="the name holds a NUL byte"):
        atomic_write(tmp_path / "out\0.bin", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_the_file_and_its_folder_are_synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced, real_fsync = [], os.fsync

    def fsync(fd: int) -> None:
        synced.append(stat.S_IFMT(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_write(tmp_path / "out.bin", b"x" * 10)
    atomic_write(tmp_path / "out.bin", b"y" * 10)
    assert synced == [stat.S_IFREG, stat.S_IFDIR] * 2


@pytest.mark.parametrize(("call", "err"), [("write", errno.ENOSPC), ("write", errno.EDQUOT), ("write", errno.EIO),
                                           ("fsync", errno.ENOSPC), ("fsync", errno.EROFS)])  # fmt: skip
def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str,
                                           err: int) -> None:  # fmt: skip
    target = tmp_path / "out.bin"
    target.write_bytes(b"old contents")

    def fail(*args: object) -> None:
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(os, call, fail)
    with pytest.raises(WriteError) as e:
        atomic_write(target, b"new contents" * 1000)
    monkeypatch.undo()
    assert e.value.errno == err and str(e.value) == f"cannot write {target}: {os.strerror(err)}"
    assert target.read_bytes() == b"old contents" and [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = tmp_path / "disk"
    with small_disk(disk, 64, monkeypatch) as real:
        (disk / "big").write_bytes(b"old" * 1000)
        with pytest.raises(WriteError) as e:
            atomic_write(disk / "big", b"x" * 200_000)
        assert e.value.errno == errno.ENOSPC and str(e.value) == f"cannot write {disk / 'big'}: No space left on device"
        assert (disk / "big").read_bytes() == b"old" * 1000 and [p.name for p in disk.iterdir()] == ["big"], real


def test_a_swap_after_the_check_is_refused_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process with write access to the folder puts a link (or a pipe) at the target while the data is being
    written: the link is left as it is, the file it points to is untouched, and the write is refused."""
    (tmp_path / "secret.txt").write_text("keep me")
    real_fsync = os.fsync
    for name, swap in (("new.bin", lambda p: p.symlink_to(tmp_path / "secret.txt")),
                       ("old.bin", lambda p: (p.unlink(), os.mkfifo(p)))):  # fmt: skip
        target = tmp_path / name
        if name == "old.bin":
            target.write_bytes(b"old")

        def fsync(fd: int, target: Path = target, swap: Callable = swap) -> None:
            real_fsync(fd)
            if stat.S_ISREG(os.fstat(fd).st_mode) and not target.is_symlink() and not target.is_fifo():
                swap(target)

        monkeypatch.setattr(os, "fsync", fsync)
        with pytest.raises(BadOutputPath, match="not a regular file"):
            atomic_write(target, b"new")
        monkeypatch.undo()
        assert target.is_symlink() or target.is_fifo()
    assert (tmp_path / "secret.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.bin", "old.bin", "secret.txt"]


# *** run folders stay inside --out ***


@pytest.mark.parametrize("name", ["../escape", "<absolute>", "a/b", "..", ".", "", ".hidden", "-rf", "a\0b", "x" * 101])
def test_a_run_folder_name_cannot_leave_out(tmp_path: Path, name: str) -> None:
    """validate refuses such names with their line; the run folder is checked again where it is made."""
    out, name = tmp_path / "a" / "runs", name.replace("<absolute>", str(tmp_path / "escape"))
    with pytest.raises(SpecError, match="cannot name a run folder") as e:
        new_run_folder(out, name)
    assert "hint: use 1 to 100 letters, digits, '-', '_' and '.'" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_a_run_folder_is_made_inside_out(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    (tmp_path / "elsewhere").mkdir()
    out.mkdir()
    (out / "my-model-1").symlink_to(tmp_path / "elsewhere")  # NOTE: taken: the next number, never through the link
    assert new_run_folder(out, "my-model") == out / "my-model-2"
    assert new_run_folder(out, "café_2.v1") == out / "café_2.v1-1"
    assert list((tmp_path / "elsewhere").iterdir()) == []


# *** the command line ***


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("examples") / "x.npy"
    np.save(path, np.random.default_rng(0).random((3, 1, 8, 8), dtype=np.float32))
    return path


def run_to(weights: Path, examples: Path, output: Path | str) -> object:
    return runner.invoke(app, ["run", MLP, "--weights", str(weights), "--input", str(examples), "--output",
                               str(output)])  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_run_output_is_only_ever_a_regular_file(weights: Path, examples: Path, tmp_path: Path, kind: str) -> None:
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("keep me")
    _make(kind, here / "y.npy", elsewhere)
    before = tree(tmp_path)
    result = run_to(weights, examples, here / "y.npy")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"error: --output {here / 'y.npy'}: it is {KINDS[kind]}, not a regular file" in result.output
    assert tree(tmp_path) == before


def test_run_output_to_dev_full_leaves_the_device(weights: Path, examples: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    result = run_to(weights, examples, "/dev/full")
    assert result.exit_code == 1 and "--output /dev/full: it is a character device, not a regular file" in result.output
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_run_output_on_a_full_disk_exits_3(weights: Path, examples: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    disk = tmp_path / "disk"
    with small_disk(disk, 64, monkeypatch) as real:
        (disk / "y.npy").write_bytes(b"the previous outputs")
        if real:
            fill(disk)
        before = tree(disk)
        result = run_to(weights, examples, disk / "y.npy")
        assert result.exit_code == 3 and "Traceback" not in result.output, result.output
        said = f"error: cannot write {disk / 'y.npy'}: No space left on device\n  hint: the disk is full"
        assert said in result.output
        assert tree(disk) == before, "the previous file is intact and no temporary is left"


def test_output_paths_that_cannot_be_used(weights: Path, examples: Path, tmp_path: Path) -> None:
    result = run_to(weights, examples, tmp_path / "no-such" / "y.npy")
    assert result.exit_code == 1 and f"the folder {tmp_path / 'no-such'} does not exist" in result.output
    result = run_to(weights, examples, tmp_path / "y\0.npy")  # NOTE: a bad command line (exit 2)
    assert result.exit_code == 2 and "null byte" in result.output
    assert "Traceback" not in result.output and list(tmp_path.iterdir()) == []


def export(weights: Path, fmt: str, out: Path | str) -> object:
    return runner.invoke(app, ["export", MLP, "--weights", str(weights), "--format", fmt, "--out", str(out)])


@pytest.mark.parametrize("fmt", ["safetensors", "onnx", "c"])
def test_export_out_must_name_a_file(weights: Path, tmp_path: Path, fmt: str) -> None:
    (tmp_path / "secret.txt").write_text("keep me")
    (tmp_path / f"link.{fmt}").symlink_to(tmp_path / "secret.txt")
    before = tree(tmp_path)
    for out, code, said in ((tmp_path, 1, "is a folder"), (tmp_path / "no-such" / f"m.{fmt}", 1, "does not exist"),
                            (tmp_path / f"m\0.{fmt}", 2, "null byte"),
                            (tmp_path / f"link.{fmt}", 1, "it is a symbolic link, not a regular file")):  # fmt: skip
        result = export(weights, fmt, out)
        assert result.exit_code == code and said in result.output and "Traceback" not in result.output, result.output
    assert tree(tmp_path) == before


def test_the_c_header_is_checked_too(weights: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("keep me")
    (tmp_path / "m.h").symlink_to(tmp_path / "secret.txt")
    before = tree(tmp_path)
    result = export(weights, "c", tmp_path / "m.c")
    assert result.exit_code == 1 and f"the header of --out {tmp_path / 'm.h'}: it is a symbolic link" in result.output
    result = export(weights, "c", tmp_path / "m.h")
    assert result.exit_code == 1 and "the C export writes its header to <name>.h beside the C file" in result.output
    assert tree(tmp_path) == before


def test_export_on_a_full_disk_exits_3(weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = tmp_path / "disk"
    with small_disk(disk, 64, monkeypatch) as real:
        (disk / "m.safetensors").write_bytes(b"the previous export")
        if real:
            fill(disk)
        before = tree(disk)
        result = export(weights, "safetensors", disk / "m.safetensors")
        assert result.exit_code == 3 and "Traceback" not in result.output, result.output
        assert f"error: cannot write {disk / 'm.safetensors'}: No space left on device" in result.output
        assert tree(disk) == before


def test_train_out_that_cannot_be_used(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("a file")
    for out, code, said in ((tmp_path / "file", 1, "is a file, not a folder"), (tmp_path / "r\0uns", 2, "null byte"),
                            (tmp_path / "file" / "runs", 1, "cannot create a run folder there")):  # fmt: skip
        result = runner.invoke(app, ["train", MLP, "--steps", "1", "--out", str(out)])
        assert result.exit_code == code and said in result.output and "Traceback" not in result.output, result.output
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_a_checkpoint_on_a_full_disk_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk has room for the spec and the metrics, not for a checkpoint: a message naming it, exit 3, no
    temporary left, and how to continue."""
    disk = tmp_path / "disk"
    with small_disk(disk, 64, monkeypatch, refused=lambda name: ".safetensors" in name):
        result = runner.invoke(app, ["train", MLP, *FAST, "--steps", "2", "--out", str(disk)])
        assert result.exit_code == 3 and "Traceback" not in result.output, result.output
        folder = disk / "digits-mlp-1"
        assert f"error: cannot write {folder / 'checkpoints'}" in result.output
        assert "No space left on device" in result.output and f"specgrad train --resume {folder}" in result.output
        assert not temporaries(folder), "and the checkpoints that are there are whole:"
        assert all(safe_load_metadata(p)["spec_hash"] for p in (folder / "checkpoints").iterdir())


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    result = runner.invoke(app, ["train", MLP, *FAST, "--steps", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "digits-mlp-1"


@pytest.mark.parametrize("planted", ["checkpoints", "metrics.jsonl", ".lock", "model.safetensors"])
def test_resume_never_writes_through_a_link_in_the_run_folder(finished: Path, tmp_path: Path, planted: str) -> None:
    folder, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    shutil.copytree(finished, folder)
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("keep me")
    if planted == "checkpoints":
        shutil.copytree(folder / "checkpoints", elsewhere / "checkpoints")
        shutil.rmtree(folder / "checkpoints")
        (folder / "checkpoints").symlink_to(elsewhere / "checkpoints")
    else:
        (folder / planted).unlink()
        (folder / planted).symlink_to(elsewhere / ("secret.txt" if planted != ".lock" else "new-file"))
    before = tree(elsewhere)
    result = runner.invoke(app, ["train", "--resume", str(folder)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"{folder / planted}" in result.output and "symbolic link" in result.output
    assert tree(elsewhere) == before and (folder / planted).is_symlink()


def test_metrics_are_never_appended_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("keep me")
    (tmp_path / "metrics.jsonl").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(BadOutputPath, match="it is a symbolic link"):
        MetricsLog(tmp_path).log({"split": "train", "step": 1, "epoch": 1, "loss": 1.0})
    assert (tmp_path / "secret.txt").read_text() == "keep me"
