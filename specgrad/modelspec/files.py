"""Reading the files a spec names (extends, data.path, a target .npy): only inside the folder of the spec the user
gave or SPEC_ROOT (unless SPEC_ALLOW_OUTSIDE), symbolic links resolved first; only regular files (never a FIFO,
device, socket or folder, and never a wait); at most MAX_FILE_MB of data. Flags are read when used. Imports flags and
modelspec.errors.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from specgrad.flags import MAX_FILE_MB, SPEC_ALLOW_OUTSIDE, SPEC_ROOT
from specgrad.modelspec.errors import Location, SpecError, excerpt

MIB = 1 << 20
ALLOW_HINT = ("a spec reads files inside its own folder and the project root only; to read this one, pass "
              "--allow-outside, or --root DIR with a folder that holds it")  # fmt: skip
RELATIVE_HINT = "paths are relative to the folder of the spec that names them"
SIZE_HINT = "raise the limit with --max-file-mb <MiB> (or MAX_FILE_MB=<MiB>), or use a smaller file"
# NOTE: what a path holds when it is not a regular file, in words; the first test that matches names it
KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISLNK, "a symbolic link"))  # fmt: skip


def allowed_folders(spec: str) -> list[str]:
    """The real folders a spec's files may lie in: the folder of `spec` (the file the user gave) and SPEC_ROOT (the
    current folder when it is empty)."""
    folders = [os.path.realpath(os.path.dirname(os.path.abspath(spec)))]
    try:
        folders.append(os.path.realpath(str(SPEC_ROOT.value) or os.getcwd()))
    except OSError:  # NOTE: a current folder that was removed: the spec's own folder only
        pass
    return folders


def is_inside(path: str, folder: str) -> bool:
    """Whether the real, absolute `path` is `folder` or lies under it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def named_file(value: str, named_in: str, spec: str, loc: Location | None, key: str) -> str:
    """The real path of the file `value` names, relative to the folder of `named_in` (the spec file that names it);
    refused at `loc` when it leaves the allowed folders of `spec`, unless SPEC_ALLOW_OUTSIDE is 1."""
    return check_inside(os.path.join(os.path.dirname(os.path.abspath(named_in)), value), spec, loc, key, value)


def check_inside(path: str, spec: str, loc: Location | None, key: str, value: str) -> str:
    """The real path of `path` (named `value` in the spec, at `loc`): refused when it leaves the allowed folders of
    `spec`, unless SPEC_ALLOW_OUTSIDE is 1."""
    if "\0" in path:
        raise SpecError.at(loc, f"{key} holds a null character, which no file name can", "remove it")
    path = os.path.abspath(path)
    real = os.path.realpath(path)
    if int(SPEC_ALLOW_OUTSIDE.value) == 1:
        return real
    folders = allowed_folders(spec)
    if any(is_inside(real, f) for f in folders):
        return real
    via = f" (a symbolic link on the way leads to {real})" if real != os.path.normpath(path) else ""
    where = " and ".join(dict.fromkeys(folders))
    raise SpecError.at(loc, f"{key} '{excerpt(value, 300)}' leaves the folders a spec may read from ({where}){via}",
                       ALLOW_HINT)  # fmt: skip


def kind_of(path: str) -> str | None:
    """What is at `path` (without following a last symbolic link) when it is not a regular file; None otherwise."""
    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((name for is_kind, name in KINDS if is_kind(mode)), None if stat.S_ISREG(mode) else "a special file")


def check_regular(path: str, loc: Location | None, key: str, shown: str, missing_hint: str | None = RELATIVE_HINT
                  ) -> None:  # fmt: skip
    """The SpecError open_regular would raise for `path` (called `shown` in it), found without opening it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise SpecError.at(loc, f"{key}: no such file: {shown}", missing_hint) from None
    except (OSError, ValueError) as e:
        why = (getattr(e, "strerror", None) or str(e)).lower()
        raise SpecError.at(loc, f"{key}: cannot read {shown}: {why}") from None
    if not stat.S_ISREG(mode):
        kind = next((name for is_kind, name in KINDS if is_kind(mode)), "a special file")
        raise SpecError.at(loc, f"{key}: cannot read {shown}: it is {kind}, not a regular file")


def open_regular(path: str, loc: Location | None = None, key: str = "", missing_hint: str | None = RELATIVE_HINT
                 ) -> tuple[BinaryIO, int]:  # fmt: skip
    """`path` (symbolic links resolved) opened for reading, and its size, when it is a regular file; a SpecError at
    `loc` saying what it is otherwise (`key` names the spec key or option that names it). Opening never waits
    (O_NONBLOCK: a FIFO with no writer is refused at once, never read)."""
    said = f"{key}: " if key else ""
    real = os.path.realpath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        raise SpecError.at(loc, f"{said}no such file: {path}", (key or None) and missing_hint) from None
    except (OSError, ValueError) as e:
        kind = kind_of(real)
        why = f"it is {kind}, not a regular file" if kind else (getattr(e, "strerror", None) or str(e)).lower()
        raise SpecError.at(loc, f"{said}cannot read {path}: {why}") from None
    mode, size = (st := os.fstat(fd)).st_mode, st.st_size
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for is_kind, name in KINDS if is_kind(mode)), "a special file")
        raise SpecError.at(loc, f"{said}cannot read {path}: it is {kind}, not a regular file")
    return os.fdopen(fd, "rb"), size


def check_size(path: str, size: int, loc: Location | None, what: str = "a data file") -> None:
    """A file over MAX_FILE_MB is refused before any of it is read."""
    limit = int(MAX_FILE_MB.value)
    if size > limit * MIB:
        raise SpecError.at(loc, f"{path} is {size / MIB:,.1f} MiB, over the limit of {limit:,} MiB for {what}",
                           SIZE_HINT)  # fmt: skip


def open_data(path: str, loc: Location | None, key: str, missing_hint: str | None = RELATIVE_HINT
              ) -> tuple[BinaryIO, int]:  # fmt: skip
    """A data file opened for reading (a regular file of at most MAX_FILE_MB), and its size."""
    f, size = open_regular(path, loc, key, missing_hint)
    try:
        check_size(path, size, loc)
    except SpecError:
        f.close()
        raise
    return f, size


def read_data(path: str, loc: Location | None, key: str, missing_hint: str | None = RELATIVE_HINT) -> bytes:
    """A whole data file's bytes (at most MAX_FILE_MB; a file that grows while it is read is refused). `missing_hint`
    is the hint for a file that does not exist (a path from the command line is not relative to a spec)."""
    f, size = open_data(path, loc, key, missing_hint)
    with f:
        data = f.read(size + 1)  # NOTE: a read of n bytes allocates n: never ask for more than the file holds
    if len(data) > size:
        raise SpecError.at(loc, f"{key}: {path} grew while it was read", "read it again once it is complete")
    return data
