"""The DISK device: a file's bytes, mapped read-only, as tensors that are views into it. It computes nothing: a copy
to a compute device reads only the bytes a view covers. Imports helpers, dtype, ops, shape and device.
"""

from __future__ import annotations

import mmap
import os
import stat
from typing import Any

import numpy as np

from specgrad.device import Allocator, DeviceUnavailable, Interpreted, RunFn, Runner, timed
from specgrad.dtype import DType
from specgrad.helpers import prod
from specgrad.ops import BufferOps, LazyOp, MemBuffer, Op
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import Variable, sint, sym_infer
from specgrad.shape.view import View, strides_for_shape

MOVE_HINT = "move the tensor to a compute device first, e.g. t.to('CLANG')"
_KINDS = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket",
          stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device"}  # fmt: skip


def map_file(path: str) -> np.ndarray:
    """The bytes of the regular file at `path`, mapped read-only (nothing is read until it is used)."""
    try:  # NOTE: O_NONBLOCK, so opening a FIFO returns at once (to be refused below) instead of waiting for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot open it: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for is_kind, name in _KINDS.items() if is_kind(st.st_mode)), "a special file")
            raise ValueError(f"{path} is {kind}, not a regular file")
        if st.st_size == 0:  # NOTE: mmap refuses an empty file
            return np.empty(0, dtype=np.uint8)
        return np.frombuffer(mmap.mmap(fd, 0, access=mmap.ACCESS_READ), dtype=np.uint8)
    finally:
        os.close(fd)


class DiskRegion:
    """A Buffer's bytes on the DISK device: a read-only byte array, a slice of a file's mapping (or, after a strided
    copy, host memory holding the view). `data` is replaced, never written into."""

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray):
        self.data = data


class DiskAllocator(Allocator):
    """Regions of one file. `alloc(n)` is the file's first n bytes; `region` any byte range of a mapping."""

    def __init__(self, path: str):
        self.path = path

    def open(self) -> np.ndarray:
        return map_file(self.path)

    def region(self, data: np.ndarray, offset: int, nbytes: int) -> DiskRegion:
        if offset < 0 or nbytes < 0 or offset + nbytes > data.size:
            raise ValueError(f"{self.path}: bytes [{offset}, {offset + nbytes}) lie outside its {data.size} bytes")
        return DiskRegion(data[offset : offset + nbytes])

    def _alloc(self, nbytes: int) -> DiskRegion:
        data = self.open()
        if nbytes > data.size:
            raise ValueError(f"{self.path} has {data.size} bytes, fewer than the {nbytes} the tensor needs")
        return DiskRegion(data[:nbytes])

    def copyin(self, dest: DiskRegion, src: memoryview) -> None:
        raise ValueError(
            f"cannot write to DISK:{self.path}: the DISK device maps files read-only and nothing was written; "
            "save tensors with specgrad.nn.state.safe_save"
        )

    def copyout(self, dest: memoryview, src: DiskRegion) -> None:
        np.frombuffer(dest, dtype=np.uint8)[:] = src.data


def check_copy(ast: LazyOp, device: str) -> MemBuffer:
    """The one kernel the DISK device runs is a copy of a view that reads the file; anything else is refused."""
    if ast.op is not BufferOps.STORE or ast.src[0].op is not BufferOps.LOAD:
        ops = sorted({x.op.name for x in ast.lazyops() if x.op not in BufferOps}) or ["CONST"]
        raise ValueError(f"the {device} device cannot compute ({', '.join(ops)}): it holds a file's bytes and only "
                         f"copies them; {MOVE_HINT}")  # fmt: skip
    load: MemBuffer = ast.src[0].arg
    for v in load.st.views:
        what = "a pad" if v.mask is not None else "an expand" if any(st == 0 for st in _big_strides(v)) else None
        if what is not None:
            raise ValueError(f"the {device} device copies views that read the file (shrink, reshape, permute, flip, "
                             f"stride), not {what}: {MOVE_HINT}")  # fmt: skip
    return load


def _big_strides(v: View) -> list[sint]:
    """The strides of the dims longer than 1 (a 0 among them is an expand)."""
    return [st for s, st in zip(v.shape, v.strides) if s != 1]


def read_view(data: np.ndarray, dtype: DType, st: ShapeTracker, var_vals: dict[Variable, int]) -> np.ndarray:
    """The bytes of a view of `data` (read-only bytes of `dtype` elements) in C order: a slice of the mapping when the
    view is one byte range (zero copy), else a copy of just the elements the view reads."""
    views = [tuple(tuple(sym_infer(x, var_vals) for x in xs) for xs in (v.shape, v.strides, (v.offset,)))
             for v in st.views]  # fmt: skip
    size = dtype.itemsize
    if len(views) == 1 and views[0][1] == strides_for_shape(views[0][0]):
        start = views[0][2][0] * size
        return data[start : start + prod(views[0][0]) * size]
    x = data.view(dtype.np)
    for shape, strides, (offset,) in views:
        # NOTE: as_strided reads relative to flat[offset]; negative strides (a flip) reach back into the same array
        flat = np.ascontiguousarray(x).reshape(-1)
        x = np.lib.stride_tricks.as_strided(flat[offset:], shape, tuple(s * size for s in strides), writeable=False)
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


def to_runner(ast: LazyOp, table: dict[Op, Any]) -> RunFn:
    load = ast.src[0].arg

    def run(bufs: list[DiskRegion], var_vals: dict[Variable, int]) -> None:
        out, src = bufs
        got = read_view(src.data, load.dtype, load.st, var_vals)
        if got.size != out.data.size:  # NOTE: a symbolic shape's buffer has room for its largest values
            got = np.concatenate([got, np.zeros(out.data.size - got.size, dtype=np.uint8)])
        out.data = got

    return lambda bufs, var_vals, wait: timed(lambda: run(bufs, var_vals))


class DiskDevice(Interpreted):
    """`Device["DISK:/path/to/file"]`: one file. Its only kernel is a copy of a view (see check_copy)."""

    def __init__(self, path: str = ""):
        if not path:
            raise DeviceUnavailable("the DISK device needs a file: device='disk:/path/to/file'")
        super().__init__(f"DISK:{path}", DiskAllocator(path), {}, to_runner)

    def get_runner(self, ast: LazyOp) -> Runner:
        check_copy(ast, self.name)
        return super().get_runner(ast)
