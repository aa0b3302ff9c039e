"""Devices: the registry, Buffer, allocators, the compiler over the disk cache, and the two kinds of backend
(Interpreted, Compiled).

Imports helpers, dtype, flags, cache, shape, ops, codegen and renderer. Backends live in runtime/ops_*.py and are
reached only through `Device[name]`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextvars import copy_context
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from specgrad.cache import DiskCache, lock_name, write_entry
from specgrad.codegen.kernel import Kernel
from specgrad.codegen.linearizer import LinearizerOptions, Program, linearize
from specgrad.codegen.uops import render_uops
from specgrad.dtype import DType, dtypes
from specgrad.flags import CACHEDIR, CLANG, COMPILE_CACHE, COMPILE_JOBS, CPU, DEBUG, DEVICE, GPU, LRU, OPT
from specgrad.helpers import DeviceUnavailable, InvalidArgument, cores
from specgrad.ops import LazyOp, Op, get_lazyop_info
from specgrad.shape.symbolic import Variable, sint, sym_infer

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

# NOTE: one explicit table from device name to its module and factory; nothing scans for modules.
DEVICE_TABLE: dict[str, tuple[str, str]] = {
    "CLANG": ("specgrad.runtime.ops_clang", "ClangDevice"),
    "GPU": ("specgrad.runtime.ops_gpu", "GPUDevice"),
    "CPU": ("specgrad.runtime.ops_cpu", "CPUDevice"),
    "DISK": ("specgrad.runtime.ops_disk", "DiskDevice"),  # NOTE: named with its file, "DISK:/path"; computes nothing
}
_DEVICE_FLAGS = {"CPU": CPU, "CLANG": CLANG, "GPU": GPU}


class KernelBuildError(DeviceUnavailable):
    """A kernel its device's compiler refused, crashed on, or built with a warning that it would compute wrong (an
    ABI change); the message names the kernel and the device and says where its source was saved."""


class BuildFailed(Exception):
    """Raised by a compile function with the compiler's log; Compiler turns it into a KernelBuildError."""


def abi_warning(log: str) -> bool:
    """Whether a build log warns that a vector type changes the calling convention: gcc/clang's -Wpsabi, and PoCL's
    'AVX vector return of type float16 without avx512f enabled changes the ABI'. A kernel built so can compute wrong
    values (PoCL summed 8 of 16 lanes), so such a build counts as a failure."""
    return "changes the ABI" in log or "-Wpsabi" in log


def signal_name(number: int) -> str:
    """SIGABRT for 6: how a crashed compiler's exit reads in an error."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class DTypeUnavailable(DeviceUnavailable):
    """A device that cannot hold or compute a dtype (an OpenCL device without half, say)."""


def check_dtype(device: Interpreted | Compiled, dtype: DType) -> None:
    if device.supported_dtypes is not None and dtype not in device.supported_dtypes:
        raise DTypeUnavailable(f"the {device.name} device{device.description} does not support {dtype.name}")


class _DeviceRegistry:
    """`Device["CLANG"]` gives the backend object; `Device.DEFAULT` is where new tensors go."""

    def __init__(self) -> None:
        self._default: str | None = None

    @staticmethod
    def canonicalize(name: str) -> str:
        ret, _, path = name.partition(":")
        ret = ret.upper()
        if ret not in DEVICE_TABLE:
            raise DeviceUnavailable(f"unknown device {name!r}; known devices: {', '.join(DEVICE_TABLE)}")
        return f"{ret}:{Path(path).absolute()}" if ret == "DISK" and path else ret

    def __getitem__(self, name: str) -> Interpreted | Compiled:
        return self._open(self.canonicalize(name))

    @functools.cache  # noqa: B019 (one registry per process)
    def _open(self, name: str) -> Interpreted | Compiled:
        kind, _, path = name.partition(":")
        module, factory = DEVICE_TABLE[kind]
        return getattr(importlib.import_module(module), factory)(*([path] if path else []))

    def is_available(self, name: str) -> bool:
        try:
            self[name]
        except DeviceUnavailable:
            return False
        return True

    @property
    def DEFAULT(self) -> str:
        if self._default is None:
            self._default = self._default_from_flags()
        return self._default

    @DEFAULT.setter
    def DEFAULT(self, name: str) -> None:
        self[name]  # NOTE: fail now, with the reason, rather than at the first tensor
        self._default = self.canonicalize(name)

    def _default_from_flags(self) -> str:
        chosen = [str(DEVICE.value)] if DEVICE.value else [name for name, f in _DEVICE_FLAGS.items() if f]
        if chosen:
            self[chosen[0]]
            return self.canonicalize(chosen[0])
        # NOTE: the best device that works here: a C compiler, else an OpenCL platform, else numpy
        return next(name for name in DEVICE_TABLE if self.is_available(name))


Device = _DeviceRegistry()


def is_compute_device(name: str) -> bool:
    """A device name training can run on (a checkpoint or a sweep plan records one): a known device, not a file's
    DISK device, and no longer than any device's name."""
    try:
        return len(name) <= 64 and not Device.canonicalize(name).startswith("DISK")
    except DeviceUnavailable:
        return False


# *** memory ***


class Allocator:
    """Device memory in bytes. Subclasses implement _alloc, _free, copyin and copyout."""

    def alloc(self, nbytes: int) -> Any:
        if nbytes < 0:  # NOTE: 0 bytes is a zero-size tensor's buffer
            raise InvalidArgument(f"cannot allocate {nbytes} bytes")
        return self._alloc(nbytes)

    def free(self, opaque: Any, nbytes: int) -> None:
        self._free(opaque)

    def _alloc(self, nbytes: int) -> Any:
        raise NotImplementedError

    def _free(self, opaque: Any) -> None:
        pass  # NOTE: Python-owned memory (numpy, pyopencl) is released by the garbage collector

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


HOST_ALIGN = 64


class HostMemory(np.ndarray):
    """A host buffer's bytes (a uint8 array) that carry their address, for a device that calls compiled code with
    pointers: numpy's `a.ctypes.data` takes about 2 us, and a captured training step launches tens of kernels of a few
    buffers each."""

    address: int


def addressed(a: np.ndarray) -> HostMemory:
    """`a` as HostMemory: a view of the same bytes, its address read once."""
    ret = a.view(HostMemory)
    ret.address = a.ctypes.data
    return ret


class HostAllocator(LRUAllocator):
    """Host memory as numpy byte arrays, shared by the CPU and CLANG devices; readable in place. With `addressed`
    (CLANG, which passes pointers to C), each array is HostMemory; the CPU device's numpy ops get plain arrays."""

    def __init__(self, addressed: bool = False):
        super().__init__()
        self.addressed = addressed

    def _alloc(self, nbytes: int) -> np.ndarray:
        # NOTE: aligned to a cache line (64 bytes, one AVX-512 vector): malloc gives 16, and where a buffer starts
        # then changed from run to run, so did a kernel's speed (vector loads across cache lines)
        raw = np.empty(nbytes + HOST_ALIGN, dtype=np.uint8)
        skip = -raw.ctypes.data % HOST_ALIGN
        return self.host(raw[skip : skip + nbytes])

    def host(self, a: np.ndarray) -> np.ndarray:
        """A uint8 array as this allocator's buffers are: HostMemory where the device is called with addresses."""
        return addressed(a) if self.addressed else a

    def as_memoryview(self, opaque: np.ndarray) -> memoryview:
        return memoryview(opaque)

    def copyin(self, dest: np.ndarray, src: memoryview) -> None:
        dest[:] = np.frombuffer(src, dtype=np.uint8)

    def copyout(self, dest: memoryview, src: np.ndarray) -> None:
        np.frombuffer(dest, dtype=np.uint8)[:] = src

    def copy_rows(self, dest: np.ndarray, src: np.ndarray, index: np.ndarray, offset: int, rows: int,
                  row_bytes: int) -> None:  # fmt: skip
        """dest's row k = src's row index[offset + k] (int64), straight between the buffers' memory."""
        # NOTE: mode="clip": an index out of range reads the last row, never past the end (and numpy's default,
        # "raise", copies through a buffer of its own)
        pick = index.view(np.int64)[offset : offset + rows]
        np.take(src.reshape(-1, row_bytes), pick, axis=0, out=dest.reshape(rows, row_bytes), mode="clip")


class Buffer:
    """`size` elements of `dtype` in a device's memory."""

    def __init__(self, device: str, size: int, dtype: DType, opaque: Any = None):
        self.device, self.size, self.dtype, self.nbytes = device, size, dtype, size * dtype.itemsize
        check_dtype(Device[device], dtype)
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
        if self.nbytes:
            self.allocator.copyin(self._buf, mv)
        return self

    def copyout(self, mv: memoryview) -> memoryview:
        if self.nbytes:
            self.allocator.copyout(mv.cast("B"), self._buf)
        return mv

    def copy_from(self, src: Buffer) -> Buffer:
        """Copy another device's buffer into this one, through host memory in place where either side is host."""
        if (self.nbytes, self.dtype) != (src.nbytes, src.dtype):
            raise ValueError(f"copy of {src} into {self}: sizes or dtypes differ")
        if hasattr(self.allocator, "as_memoryview"):
            src.copyout(self.allocator.as_memoryview(self._buf))
        elif hasattr(src.allocator, "as_memoryview"):
            self.copyin(src.allocator.as_memoryview(src._buf))
        else:
            self.copyin(memoryview(src.numpy()))
        return self

    def numpy(self) -> np.ndarray:
        """A flat copy of the contents."""
        ret = np.empty(self.size, dtype=self.dtype.np)
        self.copyout(memoryview(ret))
        return ret

    def gather_rows(self, src: Buffer, index: Buffer, offset: int, rows: int) -> Buffer:
        """Fill this buffer with `rows` rows of `src` picked by an int64 `index` from position `offset` (row k is src's
        row index[offset + k]), on the device, with no transfer through the host: how a training batch is taken from
        a dataset held on the device. A row is this buffer's bytes over `rows`. The caller checks the index's values
        when it makes them; a device never reads outside `src` (an index out of range reads its first or last row)."""
        row_bytes = self.nbytes // rows if rows > 0 else 0
        if {src.device, index.device} != {self.device} or index.dtype != dtypes.int64:
            raise InvalidArgument(f"gather_rows into {self} needs a source and an int64 index on {self.device}, got "
                                  f"{src} and {index}")  # fmt: skip
        if rows <= 0 or row_bytes * rows != self.nbytes or src.nbytes % max(row_bytes, 1):
            raise InvalidArgument(f"gather_rows: {self} is not {rows} rows of {src}, or {src} not whole rows")
        if not 0 <= offset <= index.size - rows:
            raise InvalidArgument(f"gather_rows: rows {offset}..{offset + rows} of an index of {index.size}")
        if not hasattr(self.allocator, "copy_rows"):
            raise InvalidArgument(f"the {self.device} device cannot gather rows")
        if row_bytes and src.nbytes:
            self.allocator.copy_rows(self._buf, src._buf, index._buf, offset, rows, row_bytes)
        return self


class HostView(Buffer):
    """A Buffer of a host-memory device (CPU, CLANG) over a contiguous numpy array's own memory, not a copy: a dataset
    the device reads in place. The array must not change while a kernel or a gather reads it."""

    def __init__(self, device: str, array: np.ndarray):
        if not isinstance(Device[device].allocator, HostAllocator) or not array.flags.c_contiguous:
            shape = "a contiguous" if array.flags.c_contiguous else "a non-contiguous"
            raise InvalidArgument(f"a HostView needs a host-memory device (CPU, CLANG) and a contiguous array, got "
                                  f"{device} and {shape} array")  # fmt: skip
        memory = Device[device].allocator.host(array.reshape(-1).view(np.uint8))
        super().__init__(device, array.size, dtypes.from_np(array.dtype), opaque=memory)

    def __del__(self) -> None:
        pass  # NOTE: the memory is the array's: numpy frees it, it never goes into the allocator's cache


def device_memory(name: str) -> tuple[int, int] | None:
    """(bytes in all, bytes in one buffer) of a device with memory of its own (the GPU device, as OpenCL reports
    them); None for a host-memory device, whose buffers are the process's."""
    return getattr(Device[name].allocator, "memory", None)


# *** counters and DEBUG output ***


class GlobalCounters:
    """Totals since the last reset: kernels run, flops, bytes moved, kernel time, compiles and cache hits."""

    kernel_count: int = 0
    global_ops: int = 0
    global_mem: int = 0
    time_sum_s: float = 0.0
    compile_count: int = 0
    cache_hits: int = 0

    @staticmethod
    def reset() -> None:
        GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem = 0, 0, 0
        GlobalCounters.time_sum_s = 0.0
        GlobalCounters.compile_count, GlobalCounters.cache_hits = 0, 0


def update_stats(runner: Runner, var_vals: dict[Variable, int], et: float | None) -> None:
    ops, mem = sym_infer(runner.op_estimate, var_vals), sym_infer(runner.mem_estimate, var_vals)
    GlobalCounters.kernel_count += 1
    GlobalCounters.global_ops += ops
    GlobalCounters.global_mem += mem
    if et is not None:
        GlobalCounters.time_sum_s += et
    if DEBUG >= 2:
        launch = str(list(sizes_with(runner.launch_dims, var_vals))) if runner.launch_dims else ""
        timing = f"{et * 1e6:9.2f} us, {ops / et * 1e-9:8.2f} GFLOP/s, {mem / et * 1e-9:8.2f} GB/s" if et else ""
        print(
            f"*** {runner.device:5s} {GlobalCounters.kernel_count:4d} {runner.name:24s} {launch:14s} {timing}"
            f"  (total {GlobalCounters.time_sum_s * 1e3:8.2f} ms)"
        )


# *** the compile cache ***


class BuildTotals:
    """Kernels built (not found in the disk cache), the seconds their builds took and the compiler runs, per compiler
    namespace, since the process started. A run that builds a group of kernels counts each of them and its seconds
    once. Nothing resets them: a caller reads the difference over what it measures (the test suite's
    --compile-report, per test)."""

    lock = threading.Lock()
    count: defaultdict[str, int] = defaultdict(int)
    seconds: defaultdict[str, float] = defaultdict(float)
    runs: defaultdict[str, int] = defaultdict(int)

    @staticmethod
    def add(namespace: str, seconds: float, kernels: int = 1) -> None:
        with BuildTotals.lock:
            BuildTotals.count[namespace] += kernels
            BuildTotals.seconds[namespace] += seconds
            BuildTotals.runs[namespace] += 1


# NOTE: a compiler with `join` builds a schedule's new kernels in groups, one compiler run each, closed at
# KERNELS_PER_RUN kernels or JOIN_CHARS characters of source: gcc takes ~50 ms to start and write a shared object
# whatever it holds, about what 8,000 characters of kernels take to compile, so small kernels share a run; a kernel
# that would take a group past JOIN_CHARS closes it and starts another (one of JOIN_CHARS or more compiles alone). The
# groups depend on the kernels the schedule misses, not on COMPILE_JOBS or the cores; each kernel's machine code is
# the same in any group (what a cached entry holds besides it depends on what was missing).
KERNELS_PER_RUN, JOIN_CHARS = 8, 32_000
Member = tuple[str, str, str]  # a kernel to build: (its cache key, its name, its source)
_HELD_LOCK = threading.Lock()  # NOTE: guards _HELD and _CLAIMS
_HELD: set[tuple[str, str, str]] = set()  # (CACHEDIR, namespace, lock file) of build locks this process's threads hold
# NOTE: (CACHEDIR, namespace, key) of each kernel a thread of this process is building -> set when it is done; another
# thread needing it waits for that and reads the cache, so threads never build a kernel twice (a stripe lock this
# process holds is not waited for: see Compiler._building)
Claim = tuple[str, str, str]  # (CACHEDIR, namespace, key)
_CLAIMS: dict[Claim, threading.Event] = {}


def _unhold(held: tuple[str, str, str]) -> None:
    with _HELD_LOCK:
        _HELD.discard(held)


class _Groups:
    """Kernels packed, in the order they come, into groups that one compiler run builds: a group is full at `size`
    kernels or `chars` characters of source, and a kernel that would take it past `chars` closes it and goes to
    another (a big kernel thus compiles alone). Two kernels of one name never share a group: a binary holds one
    function of each name."""

    def __init__(self, size: int, chars: int):
        self.size, self.chars = size, chars
        self.open: list[list[Member]] = []

    def add(self, member: Member) -> list[list[Member]]:
        """The groups this member closes: those it would overflow, and the one it fills."""
        ret: list[list[Member]] = []
        keep: list[list[Member]] = []
        for g in self.open:
            (ret if _chars(g) + len(member[2]) > self.chars else keep).append(g)
        self.open = keep
        group = next((g for g in self.open if all(m[1] != member[1] for m in g)), None)
        if group is None:
            self.open.append(group := [])
        group.append(member)
        if len(group) >= self.size or _chars(group) >= self.chars:
            self.open.remove(group)
            ret.append(group)
        return ret

    def rest(self) -> list[list[Member]]:
        ret, self.open = self.open, []
        return ret


def _chars(group: list[Member]) -> int:
    return sum(len(src) for _, _, src in group)


@dataclass
class Compiler:
    """Source -> binary, cached on disk under the source and `identity` (compiler, flags, target). `compile` raises
    BuildFailed with the compiler's log; `device` names the device and compiler in the error that makes. `join`, where
    one binary can hold several kernels (CLANG's shared objects), makes one source of several (name, source) pairs of
    distinct names: compile_many then builds kernels a group at a time."""

    namespace: str
    identity: str
    compile: Callable[[str], bytes]
    device: str = ""
    suffix: str = ".c"  # of a failed kernel's saved source
    join: Callable[[list[tuple[str, str]]], str] | None = None
    cache: DiskCache = field(init=False)

    def __post_init__(self) -> None:
        self.cache = DiskCache(self.namespace)

    def compile_cached(self, src: str, name: str = "kernel") -> bytes:
        return self.compile_many([(name, src)])[0]

    def cached(self, src: str) -> bytes | None:
        """The binary of `src` from the disk cache, counted as a hit; None where it is missing or the cache is off."""
        if not COMPILE_CACHE or (lib := self.cache.get(self._key(src))) is None:
            return None
        GlobalCounters.cache_hits += 1
        return lib

    def _key(self, src: str) -> str:
        return hashlib.sha256(f"{self.identity}\n{src}".encode()).hexdigest()

    def compile_many(self, kernels: Iterable[tuple[str, str]]) -> list[bytes]:
        """The binary of each (name, source), in order, counted and cached as compile_cached would. Sources missing
        from the disk cache compile on up to COMPILE_JOBS threads (the compiler is a subprocess or releases the GIL),
        as soon as `kernels` yields them, so a generator can render the next meanwhile; one that another process
        sharing the cache is building is waited for and read, not built twice. With `join`, a group of kernels
        (_Groups) builds in one compiler run, and its binary is cached under each kernel's own key. A failure raises
        the first error."""
        keys: list[str] = []
        libs: dict[str, bytes] = {}
        queued: set[str] = set()
        jobs: list[tuple[list[str], Future[list[tuple[bytes, bool]]]]] = []
        pool: ThreadPoolExecutor | None = None
        groups = _Groups(KERNELS_PER_RUN, JOIN_CHARS) if self.join is not None else _Groups(1, 0)
        built = 0

        def submit(group: list[Member]) -> None:
            nonlocal pool
            pool = pool or _compile_pool(self.namespace)
            # NOTE: the job runs in a copy of the caller's context, so flags set with Context hold in its thread
            jobs.append(([key for key, _, _ in group], pool.submit(copy_context().run, self._build, group)))

        try:
            for name, src in kernels:
                keys.append(key := self._key(src))
                if key in libs or key in queued:
                    continue
                if COMPILE_CACHE and (lib := self.cache.get(key)) is not None:
                    libs[key] = lib
                    continue
                queued.add(key)
                for group in groups.add((key, name, src)):
                    submit(group)
            for group in groups.rest():
                submit(group)
            for members, job in jobs:
                for key, (lib, was_built) in zip(members, job.result()):
                    libs[key] = lib
                    built += was_built
                    GlobalCounters.compile_count += was_built
        finally:
            for _, job in jobs:  # NOTE: after a failure, the jobs not yet started are dropped
                job.cancel()
            if pool is not None:
                pool.shutdown()
        if COMPILE_CACHE:  # NOTE: a source repeated in `srcs` counts as a hit, as it would compiled one by one
            GlobalCounters.cache_hits += len(keys) - built
        return [libs[key] for key in keys]

    def _build(self, group: list[Member]) -> list[tuple[bytes, bool]]:
        """The binary of each kernel of a group, and whether it was built here: not when another process sharing the
        cache built it while this one waited for the locks."""
        if not COMPILE_CACHE:
            built = self._compile_group(group)
            return [(built[key], True) for key, _, _ in group]
        mine, theirs, claimed = self._claim(group)
        try:
            with self._building([key for key, _, _ in mine]):
                found = {key: lib for key, _, _ in mine if (lib := self.cache.get(key)) is not None}
                built = self._compile_group([m for m in mine if m[0] not in found])
        finally:
            self._release(claimed)
        ret = {key: (found[key], False) if key in found else (built[key], True) for key, _, _ in mine}
        for (key, name, src), done in theirs:
            done.wait()
            lib = self.cache.get(key)  # NOTE: missing where the other thread's build failed: then built here
            ret[key] = (lib, False) if lib is not None else (self._compile_group([(key, name, src)])[key], True)
        return [ret[key] for key, _, _ in group]

    def _claim(self, group: list[Member]) -> tuple[list[Member], list[tuple[Member, threading.Event]], list[Claim]]:
        """The group's kernels this thread builds (claimed now), those another thread of this process is building (each
        with the event set when it is done), and the claims to release (_release) when this thread's builds end."""
        mine: list[Member] = []
        theirs: list[tuple[Member, threading.Event]] = []
        claimed: list[Claim] = []
        folder = str(CACHEDIR.value)
        with _HELD_LOCK:
            for member in group:
                at = (folder, self.namespace, member[0])
                if (done := _CLAIMS.get(at)) is not None:
                    theirs.append((member, done))
                else:
                    _CLAIMS[at] = threading.Event()
                    mine.append(member)
                    claimed.append(at)
        return mine, theirs, claimed

    @staticmethod
    def _release(claimed: list[Claim]) -> None:
        with _HELD_LOCK:
            for at in claimed:
                _CLAIMS.pop(at).set()

    @contextlib.contextmanager
    def _building(self, keys: list[str]) -> Iterator[None]:
        """Hold the cache's build lock (DiskCache.building) of each key. Locks are taken in the order of their files'
        names, so processes that each take several never wait for each other in a circle; one another thread of this
        process holds is not taken again (that thread builds other kernels: _claim gives each kernel to one thread, and
        a second lock of one file waits for the first even in one process)."""
        by_file, folder = {lock_name(key): key for key in keys}, str(CACHEDIR.value)
        with contextlib.ExitStack() as stack:
            for name in sorted(by_file):
                held = (folder, self.namespace, name)
                with _HELD_LOCK:
                    if held in _HELD:
                        continue
                    _HELD.add(held)
                stack.callback(_unhold, held)
                stack.enter_context(self.cache.building(by_file[name]))
            yield

    def _compile_group(self, group: list[Member]) -> dict[str, bytes]:
        """Build a group's kernels (joined in one compiler run where there are several) and cache each under its own
        key. A joined run that fails is repeated kernel by kernel, so the error names the first kernel that fails and
        saves its own source; the others are still built and cached."""
        lib = self._compile_joined(group) if len(group) > 1 else None
        ret: dict[str, bytes] = {}
        failed: list[KernelBuildError] = []
        for key, name, src in group:
            try:
                ret[key] = lib if lib is not None else self._compile(name, src)
            except KernelBuildError as e:
                failed.append(e)
                continue
            if COMPILE_CACHE:
                self.cache.put(key, ret[key])
        if failed:
            raise failed[0]
        return ret

    def _compile_joined(self, group: list[Member]) -> bytes | None:
        """One binary of the group's kernels; None where the compiler refuses it (or warns)."""
        if self.join is None:
            return None
        start = time.perf_counter()
        try:
            lib = self.compile(self.join([(name, src) for _, name, src in group]))
        except BuildFailed:
            BuildTotals.add(self.namespace, time.perf_counter() - start, kernels=0)
            return None
        BuildTotals.add(self.namespace, time.perf_counter() - start, kernels=len(group))
        return lib

    def _compile(self, name: str, src: str) -> bytes:
        start = time.perf_counter()
        try:
            return self.compile(src)
        except BuildFailed as e:
            raise KernelBuildError(self._failure(name, src, str(e))) from None
        finally:
            BuildTotals.add(self.namespace, time.perf_counter() - start)

    def _failure(self, name: str, src: str, log: str) -> str:
        """The error for a kernel that did not build; its source is saved for a bug report where that can be done."""
        where = self.device or self.namespace
        lines = log.strip().splitlines()
        shown = "\n".join(lines[:40] + ([f"... ({len(lines) - 40} more lines)"] if len(lines) > 40 else []))
        digest = hashlib.sha256(src.encode()).hexdigest()[:12]
        # NOTE: in the cache's checked CACHEDIR/failed, never through a link; not saved where the cache is refused
        path = write_entry("failed", f"{name}-{digest}{self.suffix}", src.encode())
        saved = f"its source is saved in {path}" if path else "its source could not be saved in CACHEDIR/failed"
        return (
            f"{where} could not build kernel {name}:\n{shown}\n{saved}; this is a bug in specgrad or the "
            "compiler, not in your model: please report it, and meanwhile try another device (--device CPU)"
        )


def _compile_pool(namespace: str) -> ThreadPoolExecutor:
    # NOTE: imported here: concurrent.futures brings in logging (~7 ms of every start) and only compiling needs it
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(int(COMPILE_JOBS) or cores(), thread_name_prefix=f"compile-{namespace}")


# *** lowered kernels, cached on disk ***


@functools.cache
def code_fingerprint() -> str:
    """A hash of specgrad's own source files: a lowering one version of the code wrote is never read by another."""
    root, h = Path(__file__).resolve().parent, hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(f"{path.relative_to(root)}\0".encode() + path.read_bytes() + b"\0")
    return h.hexdigest()


def ast_text(ast: LazyOp) -> str:
    """The ast, each node once (a DAG's text grows with its nodes, not its paths), as a line naming its sources."""
    nodes = ast.lazyops()
    index = {x: i for i, x in enumerate(nodes)}
    return "\n".join(f"{x.op} {[index[s] for s in x.src]} {x.arg!r}" for x in nodes)


class LoweredCache:
    """Each kernel's linearized and rendered form on disk (CACHEDIR/<namespace>-lowered), so a process that finds it
    skips linearize and render (20 ms a kernel: half of a warm `specgrad train` of the char_gpt example). Keyed by
    specgrad's source, the compiler's identity, the options and the ast; a kernel with symbolic sizes (Variables) is
    lowered every time."""

    def __init__(self, namespace: str, identity: str):
        self.cache, self.identity = DiskCache(f"{namespace}-lowered"), identity

    def key(self, ast: LazyOp, opts: LinearizerOptions) -> str:
        text = f"{code_fingerprint()}\n{self.identity}\n{opts!r}\n{ast_text(ast)}"
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> tuple[Program, str] | None:
        if (data := self.cache.get(key)) is None:
            return None
        try:
            d = json.loads(data)
            buffers = tuple((int(i), dtypes.fields()[t]) for i, t in d["buffers"])
            gs = None if d["global_size"] is None else tuple(int(g) for g in d["global_size"])
            ls = None if d["local_size"] is None else tuple(int(g) for g in d["local_size"])
            prg = Program(str(d["name"]), (), buffers, (), gs, tuple(int(s) for s in d["output_shape"]), (), ls)
            return prg, str(d["src"])
        except (ValueError, KeyError, TypeError):
            return None  # NOTE: an entry of another format: lowered again (and rewritten)

    def put(self, key: str, prg: Program, src: str) -> None:
        sizes = (*(prg.global_size or ()), *prg.output_shape)
        if prg.vars or not all(isinstance(s, int) for s in sizes):
            return
        d = {"name": prg.name, "buffers": [[i, t.name] for i, t in prg.buffers], "output_shape": list(prg.output_shape),
             "global_size": None if prg.global_size is None else list(prg.global_size), "src": src,
             "local_size": None if prg.local_size is None else list(prg.local_size)}  # fmt: skip
        self.cache.put(key, json.dumps(d).encode())


# *** running kernels ***

RunFn = Callable[[list[Any], dict[Variable, int], bool], "float | None"]


@dataclass
class Runner:
    """A prepared kernel: `exec` runs it on [output, *inputs] buffers and records its stats."""

    name: str
    ast: LazyOp
    device: str
    fxn: RunFn
    launch_dims: tuple[sint, ...] = ()  # the global size (GPU) or the output loops (C), for DEBUG=2
    src: str = ""  # the generated source, for compiled devices (the C export reuses it)

    def __post_init__(self) -> None:
        info = get_lazyop_info(self.ast)
        self.op_estimate, self.mem_estimate = info.flops, info.mem_estimate

    def exec(self, bufs: list[Buffer], var_vals: dict[Variable, int] | None = None) -> float | None:
        var_vals = var_vals or {}
        et = self.fxn([b._buf for b in bufs], var_vals, DEBUG >= 2)
        update_stats(self, var_vals, et)
        return et


def render_ast(ast: LazyOp, indent: int = 0) -> str:
    """An ast as an indented tree, one node per line (DEBUG=3)."""
    line = " " * indent + f"{ast.op.name}" + (f" {ast.arg}" if ast.arg is not None else "")
    return "\n".join([line, *[render_ast(s, indent + 2) for s in ast.src]])


class Interpreted:
    """A backend that evaluates each ast node with a function from `fxn_for_op` (op -> function)."""

    supported_dtypes: frozenset[DType] | None = None  # None: every dtype
    description = ""

    def __init__(self, name: str, allocator: Allocator, fxn_for_op: dict[Op, Callable],
                 to_runner: Callable[[LazyOp, dict[Op, Callable]], RunFn]):  # fmt: skip
        self.name, self.allocator, self.fxn_for_op, self._to_runner = name, allocator, fxn_for_op, to_runner
        self.runners: dict[LazyOp, Runner] = {}  # NOTE: devices live for the process, and so do their runners

    def get_runner(self, ast: LazyOp) -> Runner:
        if ast not in self.runners:
            name = Kernel.from_ast(ast).name()
            if DEBUG >= 3:
                print(f"{name} on {self.name}:\n{render_ast(ast)}")
            self.runners[ast] = Runner(name, ast, self.name, self._to_runner(ast, self.fxn_for_op))
        return self.runners[ast]

    def get_runners(self, asts: list[LazyOp]) -> list[Runner]:
        return [self.get_runner(ast) for ast in asts]

    def synchronize(self) -> None:
        pass


class Compiled:
    """A backend that compiles each ast: linearize (with the device's options) -> render (source) ->
    compiler (binary, cached on disk) -> runtime (a function of raw buffers, var_vals and whether to time it)."""

    supported_dtypes: frozenset[DType] | None = None  # None: every dtype
    description = ""  # where it runs, for error messages: " (OpenCL on ...)"
    throughput: Any = None  # what a CPU device measured of its cores (runtime/throughput.py), for the bench's peak

    def __init__(self, name: str, allocator: Allocator, opts: LinearizerOptions, render: Callable[[Program], str],
                 compiler: Compiler, runtime: Callable[[Program, bytes], RunFn]):  # fmt: skip
        self.name, self.allocator, self.opts = name, allocator, opts
        self.render, self.compiler, self.runtime = render, compiler, runtime
        self.runners: dict[tuple[LazyOp, LinearizerOptions], Runner] = {}
        self.lowered = LoweredCache(compiler.namespace, f"{name} {compiler.identity}")
        self._names: dict[str, int] = {}

    def _display_name(self, name: str) -> str:
        """Kernel names repeat across asts; later ones get a suffix in DEBUG output (n1, n2, ...)."""
        n = self._names.get(name, 0)
        self._names[name] = n + 1
        return name if n == 0 else f"{name}n{n}"

    def get_runner(self, ast: LazyOp) -> Runner:
        return self.get_runners([ast])[0]

    def get_runners(self, asts: list[LazyOp]) -> list[Runner]:
        """The runner of each ast; the kernels new to this process are taken from the disk caches where both their
        lowering and their binary are there, else lowered, then compiled together."""
        # NOTE: the OPT flag is read here, not when the device was made, so Context(OPT=0) takes effect at once
        opts = replace(self.opts, optimize=self.opts.optimize and bool(OPT))
        found = {ast: self.runners.get((ast, opts)) for ast in asts}  # NOTE: one lookup each: ast equality costs
        # NOTE: DEBUG 3 and up show each lowering, so they lower every kernel afresh
        use_cache = bool(COMPILE_CACHE) and DEBUG < 3
        missing = [ast for ast, runner in found.items() if runner is None]
        keys = {ast: self.lowered.key(ast, opts) for ast in missing} if use_cache else {}
        new: list[LazyOp] = []  # NOTE: lowered afresh, and built (a GPU build needs a fresh lowering's launch sizes)
        for ast in missing:
            hit = self.lowered.get(keys[ast]) if use_cache else None
            lib = self.compiler.cached(hit[1]) if hit is not None else None
            if hit is not None and lib is not None:
                found[ast] = self._runner(ast, opts, *hit, lib)
            else:
                new.append(ast)
        programs: list[tuple[Program, str]] = []

        def sources() -> Iterator[tuple[str, str]]:  # NOTE: a generator: each kernel compiles while the next lowers
            for ast in new:
                programs.append(self._lower(ast, opts))
                if use_cache:
                    self.lowered.put(keys[ast], *programs[-1])
                yield programs[-1][0].name, programs[-1][1]

        if new:
            libs = self.compiler.compile_many(sources())
            for ast, (prg, src), lib in zip(new, programs, libs):
                found[ast] = self._runner(ast, opts, prg, src, lib)
        return [found[ast] for ast in asts]  # type: ignore[misc]

    def _runner(self, ast: LazyOp, opts: LinearizerOptions, prg: Program, src: str, lib: bytes) -> Runner:
        dims = prg.global_size if prg.global_size is not None else prg.output_shape
        ret = Runner(self._display_name(prg.name), ast, self.name, self.runtime(prg, lib), dims, src)
        self.runners[(ast, opts)] = ret
        return ret

    def _lower(self, ast: LazyOp, opts: LinearizerOptions) -> tuple[Program, str]:
        """linearize and render one ast, refusing dtypes the device lacks."""
        if DEBUG >= 3:
            print(f"{Kernel.from_ast(ast).name()} on {self.name}:\n{render_ast(ast)}")
        prg = linearize(ast, opts)
        for u in prg.uops:
            if u.dtype is not None:
                check_dtype(self, u.dtype)
        if DEBUG >= 3:
            print(f"opts: {list(prg.opts) or 'none'}\n{render_uops(list(prg.uops))}")
        src = self.render(prg)
        if DEBUG >= 4:
            print(src)
        return prg, src

    def synchronize(self) -> None:
        pass


def timed(fn: Callable[[], None], wait: Callable[[], None] | None = None) -> float:
    """Seconds `fn` takes, after `wait` (a device synchronize) when given."""
    start = time.perf_counter()
    fn()
    if wait is not None:
        wait()
    return time.perf_counter() - start


def sizes_with(sizes: tuple[sint, ...], var_vals: dict[Variable, int]) -> tuple[int, ...]:
    return tuple(sym_infer(s, var_vals) for s in sizes)
