"""Pure utilities shared by every layer, and the exceptions the CLI maps to exit codes without importing the engine
(cli/errors.py). Imports nothing from specgrad."""

from __future__ import annotations

import contextlib
import errno
import functools
import operator
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def prod(xs: Iterable[Any], start: Any = 1) -> Any:
    """Product of the items; works for ints and symbolic nodes alike."""
    return functools.reduce(operator.mul, xs, start)


def dedup(xs: Iterable[T]) -> list[T]:
    """Items in first-seen order without repeats."""
    return list(dict.fromkeys(xs))


def flatten(xss: Iterable[Iterable[T]]) -> list[T]:
    return [x for xs in xss for x in xs]


def argfix(*x: Any) -> tuple:
    """Accept f(1, 2), f((1, 2)) and f([1, 2]) alike."""
    if x and isinstance(x[0], (tuple, list)):
        if len(x) != 1:
            raise ValueError(f"bad arguments {x}: pass either one sequence or several numbers")
        return tuple(x[0])
    return x


def argsort(xs: Sequence[Any]) -> list[int]:
    return sorted(range(len(xs)), key=xs.__getitem__)


def all_int(xs: Iterable[Any]) -> bool:
    return all(isinstance(x, int) for x in xs)


def merge_dicts(ds: Iterable[dict]) -> dict:
    """Merge dicts, refusing two different values for one key."""
    ret: dict = {}
    for d in ds:
        for k, v in d.items():
            if k in ret and ret[k] != v:
                raise ValueError(f"conflicting values for {k}: {ret[k]} and {v}")
            ret[k] = v
    return ret


def partition(xs: Iterable[T], pred: Callable[[T], bool]) -> tuple[list[T], list[T]]:
    yes: list[T] = []
    no: list[T] = []
    for x in xs:
        (yes if pred(x) else no).append(x)
    return yes, no


def make_pair(x: int | Sequence[int], n: int = 2) -> tuple[int, ...]:
    return (x,) * n if isinstance(x, int) else tuple(x)


def ceildiv(a: Any, b: Any) -> Any:
    return -(-a // b)


def cores() -> int:
    """The cores this process may run on (a container or taskset may allow fewer than the machine has)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_UMASK = os.umask(0o022)
os.umask(_UMASK)  # NOTE: read once at import (os.umask can only be read by setting it); os.open applies the live one

# *** writing output files ***

KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"))  # fmt: skip
UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF}  # NOTE: a folder's fsync, where unsupported


class InvalidArgument(ValueError, AssertionError):
    """A shape, axis or argument that does not fit the tensor: a ValueError, as numpy and PyTorch raise, and an
    AssertionError, as the seed's asserts raised (an invalid permute, a non-positive allocation), so code written
    against either catches it."""


class OutOfRange(IndexError, AssertionError):
    """A dimension or index outside the tensor: an IndexError, as numpy and PyTorch raise, and an AssertionError, as
    the seed's asserts raised."""


class DeviceUnavailable(RuntimeError):
    """The environment cannot provide a device; the message says what is missing and how to install it."""


class NonFiniteLoss(RuntimeError):
    """Training produced a nan or inf loss; the message names the step and the last good checkpoint."""


class WriteError(OSError):
    """An output file could not be written: names the file and the cause, keeps the errno (ENOSPC, EACCES, EROFS, ...)
    so `except OSError` still catches it. The previous file, if there was one, is as it was; no temporary is left."""

    def __init__(self, path: str | os.PathLike, why: str, err: int | None = None) -> None:
        super().__init__(err, why)
        self.filename = os.fspath(path).replace("\0", "\\0")

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


class BadOutputPath(WriteError):
    """The path cannot take an output file: something other than a regular file is there, its folder is missing or not
    a folder, or the name holds a NUL byte. Nothing was written."""


def kind_of(mode: int) -> str | None:
    """What a file of this st_mode is, in words; None for a regular file."""
    return None if stat.S_ISREG(mode) else next((what for is_kind, what in KINDS if is_kind(mode)), "an unusual file")


def check_output(path: str | os.PathLike) -> None:
    """Refuse (BadOutputPath) a path that atomic_write would refuse, before any work is done for it."""
    path = Path(path)
    if "\0" in str(path):
        raise BadOutputPath(path, "the name holds a NUL byte")
    if not path.name or path.name in (".", ".."):
        raise BadOutputPath(path, "it names a folder, not a file")
    try:
        folder = os.stat(path.parent)
    except FileNotFoundError:
        raise BadOutputPath(path, f"the folder {path.parent} does not exist", errno.ENOENT) from None
    except NotADirectoryError:
        raise BadOutputPath(path, f"{path.parent} is not a folder", errno.ENOTDIR) from None
    if not stat.S_ISDIR(folder.st_mode):
        raise BadOutputPath(path, f"{path.parent} is not a folder", errno.ENOTDIR)
    with contextlib.suppress(FileNotFoundError):
        check_regular_output(path, os.lstat(path))


def check_regular_output(path: Path, st: os.stat_result | None) -> None:
    if st is not None and (what := kind_of(st.st_mode)) is not None:
        raise BadOutputPath(path, f"it is {what}, not a regular file (only a regular file is replaced)")


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to a new file beside `path`, fsync it, rename it over `path` and fsync the folder: a crash leaves
    the old file or the new one, never half of one. Only a regular file is replaced (a symbolic link, named pipe,
    socket, device or folder at `path` is a BadOutputPath); a replaced file keeps its permission bits, a new one gets
    0666 less the umask. Any failure is a WriteError naming the file, with the old file intact and the temporary
    removed."""
    path = Path(path)
    check_output(path)
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise WriteError(path, f"cannot open its folder ({e.strerror})", e.errno) from None
    try:
        write_at(dir_fd, path, data)
    finally:
        os.close(dir_fd)


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


def write_at(dir_fd: int, path: Path, data: bytes) -> None:
    """atomic_write inside an open folder: every step names the folder by its descriptor, so swapping the folder
    for a link meanwhile does not send the file elsewhere."""
    before = _lstat_at(dir_fd, path.name)
    check_regular_output(path, before)
    tmp, fd = _create_temp(dir_fd, path)
    is_open = True
    try:
        if before is not None:
            os.fchmod(fd, stat.S_IMODE(before.st_mode) & 0o777)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        is_open = False
        os.close(fd)
        _publish(dir_fd, tmp, path, before)
    except BaseException as e:
        if is_open:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        if isinstance(e, OSError) and not isinstance(e, WriteError):
            raise WriteError(path, e.strerror or str(e), e.errno) from None
        raise
    try:
        os.fsync(dir_fd)
    except OSError as e:
        if e.errno not in UNSUPPORTED:
            raise WriteError(path, f"written, but its folder could not be synced ({e.strerror})", e.errno) from None


def _create_temp(dir_fd: int, path: Path) -> tuple[str, int]:
    """'.<name>.<random>' beside the target (run_folder.cleanup_partial_files knows the pattern), created new."""
    stem = path.name if len(os.fsencode(path.name)) <= 200 else path.name[:40]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = f".{stem}.{os.urandom(4).hex()}"
        try:
            return tmp, os.open(tmp, flags, 0o666, dir_fd=dir_fd)  # NOTE: the kernel applies the umask
        except FileExistsError:
            continue
    raise WriteError(path, "no free temporary name beside it", errno.EEXIST)


def _publish(dir_fd: int, tmp: str, path: Path, before: os.stat_result | None) -> None:
    """Move the written temporary to the target name. A new name is linked (link never replaces, so whatever
    appeared there meanwhile stays); an existing name is checked again to hold a regular file, then replaced: a rename
    replaces a directory entry and never writes through a link or into a device."""
    if before is None:
        try:
            os.link(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            before = _lstat_at(dir_fd, path.name)  # NOTE: another writer of the same file (two runs, two caches)
            check_regular_output(path, before)
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
                raise
        else:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            return
    check_regular_output(path, _lstat_at(dir_fd, path.name))
    os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def append_file(path: str | os.PathLike, data: bytes) -> None:
    """Append `data` to the regular file at `path` (created with 0666 less the umask if missing): never through a
    symbolic link, never into a named pipe or device. A failure is a WriteError naming the file."""
    path = Path(path)
    check_output(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):  # NOTE: a link (ELOOP) or a pipe without a reader (ENXIO) said so
            check_regular_output(path, os.lstat(path))
        raise WriteError(path, e.strerror or str(e), e.errno) from None
    try:
        check_regular_output(path, os.fstat(fd))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as e:
        if isinstance(e, WriteError):
            raise
        raise WriteError(path, e.strerror or str(e), e.errno) from None
    finally:
        os.close(fd)
