"""Pure utilities shared by every layer. Imports nothing from specgrad."""

from __future__ import annotations

import functools
import operator
import os
import tempfile
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
os.umask(_UMASK)  # NOTE: read once at import (os.umask can only be read by setting it)


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, flush it to disk and rename it over `path`: a crash leaves
    the old file or the new one, never half of one. The temporary file is removed if writing fails."""
    path = Path(path)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as f:
        try:
            os.fchmod(f.fileno(), 0o666 & ~_UMASK)  # NOTE: as open() would create it; mkstemp makes it 0600
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        except BaseException:
            f.close()
            os.unlink(f.name)
            raise
    os.replace(f.name, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (where the system allows opening a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
