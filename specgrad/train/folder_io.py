"""Files inside a run or sweep folder, read and written without leaving it.

The folder itself is the one the user named (or `train`/`sweep` made), and it is followed like any path the user
types. Everything below it is specgrad's own: a run folder specgrad wrote holds no links and no special files. So
every entry below the folder (a subfolder such as checkpoints/ or logs/, a trial's folder, the file itself) is opened
one component at a time by descriptor with O_NOFOLLOW: a symbolic link, FIFO, socket or device anywhere below the
folder is refused by name, never followed, never waited on; a file is read only up to a cap, checked before its bytes
are. Errors name the path and what is there, never what a file holds (a link may lead to a secret).

Writes go through helpers' atomic writer and appender, run inside the folder reached the same way. Imports helpers
and modelspec.errors.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import Any

from specgrad.helpers import WriteError, check_regular_output, kind_of, write_at
from specgrad.modelspec.errors import SpecError

MIB = 1 << 20
STATE_CAP = 16 * MIB  # NOTE: sweep.json, results.json, evaluation JSON: a few KiB when specgrad writes them
LOG_CAP = 1024 * MIB  # NOTE: metrics.jsonl of a run of 10^6 steps is about 150 MiB
REMOVE_HINT = ("specgrad writes no links or special files into its folders: remove it (or restore the folder), then "
               "run again")  # fmt: skip
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_BELOW = _DIR | os.O_NOFOLLOW


def _parts(rel: str | PurePath) -> tuple[str, ...]:
    parts = PurePath(rel).parts
    if not parts or PurePath(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{rel!r} is not a plain relative path inside a folder")  # NOTE: a caller's bug
    return parts


def _what(dir_fd: int, name: str) -> str | None:
    """What is at `name` in the open folder, when it is not a regular file (None: a regular file or nothing)."""
    try:
        return kind_of(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return None


def _refuse(path: Path, what: str, wanted: str = "a regular file") -> SpecError:
    return SpecError.at(None, f"{path} is {what}, not {wanted}", REMOVE_HINT)


@contextlib.contextmanager
def folder_of(folder: Path, rel: str | PurePath, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder that holds `folder/rel`, every folder below `folder` opened without following a
    link (and made, 0777 less the umask, when `create`). A link or a file in a folder's place is a SpecError; a folder
    that is missing is FileNotFoundError."""
    with _descend(folder, _parts(rel)[:-1], create) as fd:
        yield fd


@contextlib.contextmanager
def subfolder(folder: Path, rel: str | PurePath) -> Iterator[int]:
    """A descriptor of the folder `folder/rel` itself, reached as folder_of reaches one (a missing one:
    FileNotFoundError)."""
    with _descend(folder, _parts(rel), False) as fd:
        yield fd


@contextlib.contextmanager
def _descend(folder: Path, parts: tuple[str, ...], create: bool) -> Iterator[int]:
    try:
        fd = os.open(folder, _DIR)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise WriteError(folder, f"cannot open the folder ({e.strerror})", e.errno) from None
    try:
        at = folder
        for part in parts:
            at = at / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                below = os.open(part, _BELOW, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refuse(at, _what(fd, part) or "a file", "a folder") from None
                raise WriteError(at, f"cannot open the folder ({e.strerror})", e.errno) from None
            os.close(fd)
            fd = below
        yield fd
    finally:
        os.close(fd)


def entry_kind(folder: Path, rel: str | PurePath) -> str | None:
    """What `folder/rel` is, never following a link: "file", "folder", "missing", or the words for anything else
    ("a symbolic link", "a FIFO (named pipe)"...; a link or file on the way is "a symbolic link"/"not a folder")."""
    try:
        with folder_of(folder, rel) as fd:
            st = os.lstat(_parts(rel)[-1], dir_fd=fd)
    except FileNotFoundError:
        return "missing"
    except SpecError:
        return "a symbolic link or file where a folder belongs"
    except OSError as e:
        return (e.strerror or str(e)).lower()
    if stat.S_ISREG(st.st_mode):
        return "file"
    return "folder" if stat.S_ISDIR(st.st_mode) else kind_of(st.st_mode)


def regular_file(folder: Path, rel: str | PurePath) -> Path | None:
    """`folder/rel` when it is a regular file reached without following a link, for a reader that opens the path
    itself (the spec loader, safetensors); None when it is missing. A link, FIFO, folder or device there, or in a
    folder's place on the way, is a SpecError naming it. NOTE: checked when called; a folder made by someone else is
    input, not a process racing specgrad."""
    try:
        with folder_of(folder, rel) as fd:
            mode = os.lstat(_parts(rel)[-1], dir_fd=fd).st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(mode):
        raise _refuse(folder / rel, kind_of(mode) or "not a regular file")
    return folder / rel


def files_in(folder: Path, rel: str | PurePath, suffix: str = "") -> list[str]:
    """The sorted names in the subfolder `folder/rel` that end with `suffix`, hidden names (a writer's temporary files)
    left out; [] when the subfolder is missing. Each is a regular file: anything else is a SpecError naming it."""
    try:
        with subfolder(folder, rel) as fd:
            names = sorted(n for n in os.listdir(fd) if n.endswith(suffix) and not n.startswith("."))
            for name in names:
                with contextlib.suppress(FileNotFoundError):  # NOTE: removed meanwhile (a pruned checkpoint)
                    if (what := kind_of(os.lstat(name, dir_fd=fd).st_mode)) is not None:
                        raise _refuse(folder / rel / name, what)
    except FileNotFoundError:
        return []
    return names


def _open_regular_in(folder: Path, rel: str | PurePath) -> tuple[int, os.stat_result] | None:
    """A descriptor for reading the regular file `folder/rel` and its stat (never through a link, never a wait); None
    when it is missing. Anything else at that name is a SpecError that names it."""
    path = folder / rel
    try:
        with folder_of(folder, rel) as dir_fd:
            name = _parts(rel)[-1]
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except FileNotFoundError:
                raise
            except OSError as e:
                if (what := _what(dir_fd, name)) is not None:
                    raise _refuse(path, what) from None
                raise SpecError.at(None, f"cannot read {path}: {(e.strerror or str(e)).lower()}") from None
    except FileNotFoundError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # NOTE: before fdopen, which refuses a folder with an IsADirectoryError
        os.close(fd)
        raise _refuse(path, kind_of(st.st_mode) or "not a regular file")
    return fd, st


def read_in(folder: Path, rel: str | PurePath, cap: int, missing_ok: bool = False) -> bytes | None:
    """The bytes of the regular file `folder/rel` (_open_regular_in), at most `cap` bytes; None when it is missing
    and `missing_ok`."""
    path = folder / rel
    if (opened := _open_regular_in(folder, rel)) is None:
        if missing_ok:
            return None
        raise SpecError.at(None, f"{path} is missing", "was the folder made by specgrad, and is it complete?")
    fd, st = opened
    with os.fdopen(fd, "rb") as f:
        if st.st_size > cap:
            raise SpecError.at(None, f"{path} is {st.st_size / MIB:,.1f} MiB, more than specgrad writes there "
                               f"(at most {cap / MIB:,.0f} MiB)", "it is not a file specgrad wrote: remove or "
                               "replace it")  # fmt: skip
        data = f.read(st.st_size + 1)
    if len(data) > st.st_size:
        raise SpecError.at(None, f"{path} grew while it was read", "wait for the process writing it, then run again")
    return data


def read_tail_in(folder: Path, rel: str | PurePath, size: int) -> bytes:
    """The last `size` bytes of the regular file `folder/rel` (a log of any length: only its end is read), opened as
    read_in opens it; a missing file is b""."""
    if (opened := _open_regular_in(folder, rel)) is None:
        return b""
    fd, st = opened
    with os.fdopen(fd, "rb") as f:
        f.seek(max(0, st.st_size - size))
        return f.read(size)


def parse_json(data: bytes, path: Path) -> Any:
    """A JSON document specgrad wrote into one of its folders: UTF-8, bounded in depth (by json's own recursion
    guard) and number length; anything else is a SpecError naming the file and the position, never quoting it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError.at(None, f"{path} is not UTF-8 text (byte {e.start + 1})", _DAMAGED) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError.at(None, f"{path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})",
                           _DAMAGED) from None  # fmt: skip
    except RecursionError:  # NOTE: json's parser recurses once per level of [ and {
        raise SpecError.at(None, f"{path} is nested too deep to be JSON specgrad wrote", _DAMAGED) from None
    except ValueError:  # NOTE: an integer past Python's 4,300-digit limit
        raise SpecError.at(None, f"{path} holds a number too long to be one specgrad wrote", _DAMAGED) from None


_DAMAGED = "it is damaged or was not written by specgrad: restore it, or remove it"


def read_json_in(folder: Path, rel: str | PurePath, cap: int = STATE_CAP, missing_ok: bool = False) -> Any:
    """A JSON state file in a folder (read_in, then parse_json); None when missing and `missing_ok`."""
    data = read_in(folder, rel, cap, missing_ok)
    return None if data is None else parse_json(data, folder / rel)


def json_lines(data: bytes) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSON-lines file specgrad appends to (metrics.jsonl); the
    value is None for a line specgrad could not have written: cut short by a crash, damaged, not UTF-8, nested
    deeper than json's recursion limit or holding a number too long to convert."""
    for n, line in enumerate(io.BytesIO(data), 1):
        if line.strip():
            try:
                yield n, json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):  # NOTE: UnicodeDecodeError and JSONDecodeError are ValueErrors
                yield n, None


def write_in(folder: Path, rel: str | PurePath, data: bytes, create: bool = False) -> None:
    """helpers.atomic_write of `folder/rel`, its folders below `folder` reached without following a link (made when
    `create`)."""
    path = folder / rel
    try:
        with folder_of(folder, rel, create) as dir_fd:
            write_at(dir_fd, path, data)
    except FileNotFoundError as e:
        raise WriteError(path, "its folder does not exist", errno.ENOENT) from e


def open_append_in(folder: Path, rel: str | PurePath, create: bool = False) -> int:
    """A descriptor for appending to the regular file `folder/rel` (created 0666 less the umask when missing), never
    through a link, never into a FIFO or device; the caller closes it. A file with other hard links (a file outside
    the folder linked in, or a snapshot made with cp -al) is first replaced by a copy of its own, so what is appended
    changes this name only."""
    path = folder / rel
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(2):
        try:
            with folder_of(folder, rel, create) as dir_fd:
                name = _parts(rel)[-1]
                try:
                    fd = os.open(name, flags, 0o666, dir_fd=dir_fd)
                except OSError as e:
                    if (what := _what(dir_fd, name)) is not None:
                        raise _refuse(path, what) from None
                    raise WriteError(path, e.strerror or str(e), e.errno) from None
                try:
                    st = os.fstat(fd)
                    check_regular_output(path, st)
                    os.set_blocking(fd, True)
                except BaseException:
                    os.close(fd)
                    raise
                if st.st_nlink == 1:
                    return fd
                os.close(fd)
                write_at(dir_fd, path, read_in(folder, rel, LOG_CAP) or b"")  # NOTE: a new inode of its own
        except FileNotFoundError as e:
            raise WriteError(path, "its folder does not exist", errno.ENOENT) from e
    raise SpecError.at(None, f"{path} keeps gaining hard links while it is written", REMOVE_HINT)
