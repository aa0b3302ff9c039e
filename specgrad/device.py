"""Devices: the registry, Buffer, allocators, and the two kinds of backend (Interpreted, Compiled).

Imports helpers, dtype, flags, shape and ops. Backends live in runtime/ops_*.py and are reached through `Device[name]`.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from specgrad.dtype import DType
from specgrad.flags import CLANG, CPU, DEBUG, DEVICE, GPU, LRU
from specgrad.ops import BufferOps, LazyOp, Op, get_lazyop_info
from specgrad.shape.symbolic import Variable, sint, sym_infer

# NOTE: one explicit table from device name to its module and factory; nothing scans for modules.
DEVICE_TABLE: dict[str, tuple[str, str]] = {
    "CPU": ("specgrad.runtime.ops_cpu", "CPUDevice"),
}
_DEVICE_FLAGS = {"CPU": CPU, "CLANG": CLANG, "GPU": GPU}


class DeviceUnavailable(RuntimeError):
    """The environment cannot provide a device; the message says what is missing and how to install it."""


class _DeviceRegistry:
    """`Device["CPU"]` gives the backend object; `Device.DEFAULT` is where new tensors go."""

    def __init__(self) -> None:
        self._default: str | None = None

    @staticmethod
    def canonicalize(name: str) -> str:
        ret = name.split(":")[0].upper()
        if ret not in DEVICE_TABLE:
            raise DeviceUnavailable(f"unknown device {name!r}; known devices: {', '.join(DEVICE_TABLE)}")
        return ret

    def __getitem__(self, name: str) -> Interpreted | Compiled:
        return self._open(self.canonicalize(name))

    @functools.cache  # noqa: B019 (one registry per process)
    def _open(self, name: str) -> Interpreted | Compiled:
        module, factory = DEVICE_TABLE[name]
        return getattr(importlib.import_module(module), factory)()

    @property
    def DEFAULT(self) -> str:
        if self._default is None:
            self._default = self._default_from_flags()
        return self._default

    @DEFAULT.setter
    def DEFAULT(self, name: str) -> None:
        self._default = self.canonicalize(name)

    def _default_from_flags(self) -> str:
        if DEVICE.value:
            return self.canonicalize(str(DEVICE.value))
        chosen = [name for name, f in _DEVICE_FLAGS.items() if f]
        return self.canonicalize(chosen[0]) if chosen else next(iter(DEVICE_TABLE))


Device = _DeviceRegistry()


# *** memory ***


class Allocator:
    """Device memory in bytes. Subclasses implement _alloc, _free, copyin and copyout."""

    def alloc(self, nbytes: int) -> Any:
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes")
        return self._alloc(nbytes)

    def free(self, opaque: Any, nbytes: int) -> None:
        self._free(opaque)

    def _alloc(self, nbytes: int) -> Any:
        raise NotImplementedError

    def _free(self, opaque: Any) -> None:
        pass  # NOTE: Python-owned memory (numpy, ctypes) is freed by the garbage collector

    def copyin(self, dest: Any, src: memoryview) -> None:
        raise NotImplementedError

    def copyout(self, dest: memoryview, src: Any) -> None:
        raise NotImplementedError


class LRUAllocator(Allocator):
    """Keeps freed blocks by size and hands them out again, so training steps reuse memory."""

    def __init__(self) -> None:
        self.cache: defaultdict[int, list[Any]] = defaultdict(list)

    def alloc(self, nbytes: int) -> Any:
        if self.cache[nbytes]:
            return self.cache[nbytes].pop()
        try:
            return super().alloc(nbytes)
        except MemoryError:
            self.free_cache()
            return super().alloc(nbytes)

    def free(self, opaque: Any, nbytes: int) -> None:
        if LRU:
            self.cache[nbytes].append(opaque)
        else:
            self._free(opaque)

    def free_cache(self) -> None:
        for blocks in self.cache.values():
            for opaque in blocks:
                self._free(opaque)
        self.cache.clear()


class Buffer:
    """`size` elements of `dtype` in a device's memory."""

    def __init__(self, device: str, size: int, dtype: DType, opaque: Any = None):
        self.device, self.size, self.dtype, self.nbytes = device, size, dtype, size * dtype.itemsize
        self.allocator = Device[device].allocator
        self._buf = opaque if opaque is not None else self.allocator.alloc(self.nbytes)

    def __repr__(self) -> str:
        return f"<Buffer {self.device} {self.size} {self.dtype}>"

    def __del__(self) -> None:
        if hasattr(self, "_buf"):
            self.allocator.free(self._buf, self.nbytes)

    def copyin(self, mv: memoryview) -> Buffer:
        mv = mv.cast("B")
        if mv.nbytes != self.nbytes:
            raise ValueError(f"copyin of {mv.nbytes} bytes into a buffer of {self.nbytes} bytes")
        self.allocator.copyin(self._buf, mv)
        return self

    def copyout(self, mv: memoryview) -> memoryview:
        self.allocator.copyout(mv.cast("B"), self._buf)
        return mv

    def numpy(self) -> np.ndarray:
        """A flat copy of the contents."""
        ret = np.empty(self.size, dtype=self.dtype.np)
        if self.size:
            self.copyout(memoryview(ret))
        return ret


# *** running kernels ***


class GlobalCounters:
    """Totals since the last reset: kernels run, flops, bytes moved, kernel time."""

    kernel_count: int = 0
    global_ops: int = 0
    global_mem: int = 0
    time_sum_s: float = 0.0

    @staticmethod
    def reset() -> None:
        GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem = 0, 0, 0
        GlobalCounters.time_sum_s = 0.0


def update_stats(
    name: str,
    op_estimate: sint,
    mem_estimate: sint,
    var_vals: dict[Variable, int] | None,
    et: float | None,
    device: str,
) -> None:
    ops, mem = sym_infer(op_estimate, var_vals or {}), sym_infer(mem_estimate, var_vals or {})
    GlobalCounters.kernel_count += 1
    GlobalCounters.global_ops += ops
    GlobalCounters.global_mem += mem
    if et is not None:
        GlobalCounters.time_sum_s += et
    if DEBUG >= 2:
        timing = f"{et * 1e6:9.2f} us, {ops / et * 1e-9:8.2f} GFLOP/s, {mem / et * 1e-9:8.2f} GB/s" if et else ""
        print(
            f"*** {device:6s} {GlobalCounters.kernel_count:4d} {name:30s} {timing}"
            f"  (total {GlobalCounters.time_sum_s * 1e3:8.2f} ms)"
        )


@dataclass
class Runner:
    """A prepared kernel: call `exec` with [output, *inputs] buffers."""

    name: str
    ast: LazyOp
    device: str
    fxn: Callable[[list[Any], dict[Variable, int]], None]

    def __post_init__(self) -> None:
        if DEBUG >= 3:
            print(f"{self.name} on {self.device}:\n{render_ast(self.ast)}")
        info = get_lazyop_info(self.ast)
        self.op_estimate, self.mem_estimate = info.flops, info.mem_estimate

    def exec(self, bufs: list[Buffer], var_vals: dict[Variable, int] | None = None) -> float:
        start = time.perf_counter()
        self.fxn([b._buf for b in bufs], var_vals or {})
        et = time.perf_counter() - start
        update_stats(self.name, self.op_estimate, self.mem_estimate, var_vals, et, self.device)
        return et


def render_ast(ast: LazyOp, indent: int = 0) -> str:
    """An ast as an indented tree, one node per line (DEBUG=3)."""
    line = " " * indent + f"{ast.op.name}" + (f" {ast.arg}" if ast.arg is not None else "")
    return "\n".join([line, *[render_ast(s, indent + 2) for s in ast.src]])


def kernel_name(ast: LazyOp) -> str:
    """E_ for elementwise kernels, r_ for reduces, then the output shape: E_4_4."""
    kind = "r" if any(type(x.op).__name__ == "ReduceOps" for x in ast.lazyops()) else "E"
    shape = ast.arg.st.shape if ast.op is BufferOps.STORE else ()
    return f"{kind}_" + "_".join(str(s) for s in shape) if shape else f"{kind}_scalar"


class Interpreted:
    """A backend that evaluates each ast node with a function from `fxn_for_op` (op -> function)."""

    def __init__(
        self,
        name: str,
        allocator: Allocator,
        fxn_for_op: dict[Op, Callable],
        to_runner: Callable[[LazyOp, dict[Op, Callable]], Callable],
    ):
        self.name, self.allocator, self.fxn_for_op, self._to_runner = name, allocator, fxn_for_op, to_runner

    @functools.cache  # noqa: B019 (devices live for the process)
    def get_runner(self, ast: LazyOp) -> Runner:
        return Runner(kernel_name(ast), ast, self.name, self._to_runner(ast, self.fxn_for_op))

    def synchronize(self) -> None:
        pass


class Compiled:
    """A backend that compiles each ast: `render` (ast -> name, source), `compile` (source -> binary), and
    `runtime` (name, binary -> callable taking raw buffers and var_vals). The linearizer and the C and OpenCL
    renderers that feed it are the compiled-devices issue."""

    def __init__(
        self,
        name: str,
        allocator: Allocator,
        render: Callable[[LazyOp], tuple[str, str]],
        compile: Callable[[str], bytes],
        runtime: Callable[[str, bytes], Callable],
    ):
        self.name, self.allocator = name, allocator
        self.render, self.compile, self.runtime = render, compile, runtime

    @functools.cache  # noqa: B019 (devices live for the process)
    def get_runner(self, ast: LazyOp) -> Runner:
        name, src = self.render(ast)
        if DEBUG >= 4:
            print(src)
        return Runner(name, ast, self.name, self.runtime(name, self.compile(src)))

    def synchronize(self) -> None:
        pass
