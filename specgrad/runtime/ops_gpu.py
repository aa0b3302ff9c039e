"""The GPU device: kernels rendered to OpenCL C, built in child processes (build servers) and run with pyopencl on any
OpenCL platform (PoCL from pip gives a CPU one). Imports flags, dtype, cache, codegen, renderer and device; pyopencl is
an optional dependency.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.cache import DiskCache, Refused, cache_secret, folder_tag, open_namespace, private_folder
from specgrad.codegen.linearizer import LinearizerOptions, Program, WorkGroups
from specgrad.codegen.uops import UOps
from specgrad.device import (
    BuildFailed,
    Compiled,
    Compiler,
    DeviceUnavailable,
    LRUAllocator,
    abi_warning,
    signal_name,
    sizes_with,
)
from specgrad.dtype import DType, dtypes
from specgrad.flags import CL_VECTOR_WIDTH, CL_WORK_GROUPS, COMPILE_CACHE, DEBUG
from specgrad.renderer.cstyle import OPENCL_DIALECT, render
from specgrad.shape.symbolic import Node, Variable, sym_infer

INSTALL_HINT = "pip install 'pyopencl[pocl]' (PoCL gives a CPU OpenCL device), or install your GPU's OpenCL driver"

try:
    import pyopencl as cl
except ImportError:  # NOTE: only this device needs pyopencl; the others work without it
    cl = None


@functools.cache
def use_own_pocl_cache() -> None:
    """Point PoCL's kernel cache, whose files it loads unchecked, at CACHEDIR/pocl-<tag>, checked and made 0700 as the
    compile cache's folders are, its tag one only the user's key gives (cache.folder_tag): PoCL's files cannot be
    signed one by one, so a cache copied from another user or machine brings a PoCL folder of another name, never
    used. Where that cache is refused, off (COMPILE_CACHE=0) or without a key, turn PoCL's off (POCL_KERNEL_CACHE=0)
    and give it this process's private folder for the files it still writes. A POCL_CACHE_DIR the user set is theirs
    and left alone. Once per process, before PoCL starts (the first cl.get_platforms()); build servers inherit it."""
    # NOTE: the environment is PoCL's only knob (read when it starts), so this sets it rather than reading a flag
    if "POCL_CACHE_DIR" in os.environ:
        return
    secret = cache_secret() if COMPILE_CACHE else None
    if secret is not None and (folder := open_namespace(f"pocl-{folder_tag(secret, 'pocl')}", True)) is not None:
        os.close(folder[0])
        os.environ["POCL_CACHE_DIR"] = folder[1]
        return
    os.environ["POCL_KERNEL_CACHE"] = "0"
    with contextlib.suppress(Refused, OSError):
        os.environ["POCL_CACHE_DIR"] = private_folder()


class CLContext:
    """The chosen OpenCL device (a GPU if there is one), its context and its profiling queue. A build server passes its
    parent's `index`, and runs in the environment its parent set."""

    def __init__(self, index: int | None = None) -> None:
        if cl is None:
            raise DeviceUnavailable(f"the GPU device needs pyopencl, which is not installed: {INSTALL_HINT}")
        if index is None:
            use_own_pocl_cache()
        try:
            devices = [d for p in cl.get_platforms() for d in p.get_devices()]
        except cl.Error as e:
            raise DeviceUnavailable(f"no OpenCL platform found ({e}): {INSTALL_HINT}") from None
        if not devices:
            raise DeviceUnavailable(f"no OpenCL device found: {INSTALL_HINT}")
        gpu = next((i for i, d in enumerate(devices) if d.type & cl.device_type.GPU), 0)
        self.index = gpu if index is None else index
        self.device = devices[self.index]
        self.context = cl.Context(devices=[self.device])
        # NOTE: no pyopencl build cache (Program.build reads the context's cache_dir): where the driver has no cache of
        # its own, pyopencl keeps one in ~/.cache/pyopencl and unpickles what it finds there, unchecked; DiskCache
        # keeps the binaries instead
        self.context.cache_dir = False
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.name = f"{self.device.name.strip()} ({self.device.platform.name.strip()})"
        self.max_work_group = min(int(self.device.max_work_group_size), 256)
        # NOTE: program builds and loads (and the get_info after them) one at a time per process: PoCL crashed
        # (SIGSEGV) building several programs at once on the compile threads
        self.build_lock = threading.Lock()
        dev = self.device
        self.identity = f"{dev.platform.name} {dev.platform.version} {dev.name} {dev.driver_version}"

    @property
    def is_gpu(self) -> bool:
        return bool(self.device.type & cl.device_type.GPU)

    def work_groups(self) -> WorkGroups | None:
        """The device's work-group limits, where kernels should take work-group shapes and local-memory tiles: on a
        GPU with local memory of its own (CL_WORK_GROUPS=1: on any device, to test them on a CPU), else None."""
        dev, wanted = self.device, int(CL_WORK_GROUPS)
        dedicated = dev.local_mem_type == cl.device_local_mem_type.LOCAL
        if wanted == 0 or (wanted < 0 and not (self.is_gpu and dedicated)):
            return None
        return WorkGroups(self.max_work_group, int(dev.local_mem_size), int(dev.max_compute_units))

    @property
    def has_fp64(self) -> bool:
        return "cl_khr_fp64" in self.device.extensions.split() or bool(self.device.double_fp_config)

    def supported_dtypes(self) -> frozenset[DType]:
        """Every dtype, less half and double where the device lacks them (PoCL's CPU device has no half)."""
        ext = self.device.extensions.split()
        missing = {dtypes.float16} if "cl_khr_fp16" not in ext else set()
        if not self.has_fp64:
            missing.add(dtypes.float64)
        return frozenset(d for d in dtypes.fields().values() if d not in missing)


class CLAllocator(LRUAllocator):
    def __init__(self, ctx: CLContext, compiler: Compiler | None = None):
        super().__init__()
        self.ctx = ctx
        self.memory = (int(ctx.device.global_mem_size), int(ctx.device.max_mem_alloc_size))  # device.device_memory
        self.gather = RowGather(ctx, compiler) if compiler is not None else None

    def _alloc(self, nbytes: int) -> Any:
        return cl.Buffer(self.ctx.context, cl.mem_flags.READ_WRITE, max(nbytes, 1))

    def copyin(self, dest: Any, src: memoryview) -> None:
        cl.enqueue_copy(self.ctx.queue, dest, np.frombuffer(src, dtype=np.uint8), is_blocking=True)

    def copyout(self, dest: memoryview, src: Any) -> None:
        cl.enqueue_copy(self.ctx.queue, np.frombuffer(dest, dtype=np.uint8), src, is_blocking=True)

    def copy_rows(self, dest: Any, src: Any, index: Any, offset: int, rows: int, row_bytes: int) -> None:
        if self.gather is None:
            raise DeviceUnavailable("this OpenCL allocator was made without a compiler, so it cannot gather rows")
        self.gather(dest, src, index, offset, rows, row_bytes)


# NOTE: a 4-byte word per work-item where rows are whole words (float32, int32, int64 data), else a byte; the row is
# clamped into the source, so a bad index never reads outside it
GATHER_KERNEL = """__kernel void gather_rows_{t}(__global {t}* dest, __global const {t}* src,
  __global const long* index, long offset, long last, long row_words) {{
  long k = get_global_id(1), w = get_global_id(0);
  dest[k * row_words + w] = src[clamp(index[offset + k], 0L, last) * row_words + w];
}}"""
GATHER_SOURCE = "\n".join(GATHER_KERNEL.format(t=t) for t in ("uint", "uchar"))


class RowGather:
    """Buffer.gather_rows on the GPU device: GATHER_SOURCE, built once per process through the device's compiler (so
    the disk cache keeps its binary: PoCL builds slowly), enqueued on the device's queue after the kernels before it.
    The only transfers are its arguments."""

    def __init__(self, ctx: CLContext, compiler: Compiler):
        self.ctx, self.compiler = ctx, compiler
        self.kernels: dict[int, Any] = {}  # word size -> kernel

    def __call__(self, dest: Any, src: Any, index: Any, offset: int, rows: int, row_bytes: int) -> None:
        if not self.kernels:
            binary = self.compiler.compile_cached(GATHER_SOURCE, "gather_rows")
            with self.ctx.build_lock:
                program = cl.Program(self.ctx.context, [self.ctx.device], [binary]).build()
                self.kernels = {4: program.gather_rows_uint, 1: program.gather_rows_uchar}
        word = 4 if row_bytes % 4 == 0 else 1
        kernel, gs = self.kernels[word], (row_bytes // word, rows)
        last = src.size // row_bytes - 1  # NOTE: cl.Buffer.size: at least 1 byte, as _alloc makes it
        kernel(self.ctx.queue, gs, local_size(gs, self.ctx.max_work_group), dest, src, index, np.int64(offset),
               np.int64(last), np.int64(row_bytes // word))  # fmt: skip


@dataclass(frozen=True)
class Launch:
    """How this process will launch a kernel, for a build server to launch it so once on scratch buffers."""

    name: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    nbytes: tuple[int, ...]  # each buffer argument's scratch, in argument order


def compile_cl(ctx: CLContext, src: str, launch: Launch | None = None) -> bytes:
    """The program binary of `src`, after one launch as `launch` says (PoCL's binary then carries the machine code of
    that work-group size); BuildFailed with the build log if it fails or warns of an ABI change. Run by a build server,
    in a child process."""
    with ctx.build_lock:
        try:
            prog = cl.Program(ctx.context, src).build()
        except cl.Error as e:
            raise BuildFailed(str(e)) from None
        log = prog.get_build_info(ctx.device, cl.program_build_info.LOG) or ""
        if abi_warning(log):
            raise BuildFailed(f"the OpenCL compiler warns that a vector type changes the ABI; the kernel could compute "
                              f"wrong values (CL_VECTOR_WIDTH=4 forces narrower vectors):\n{log}")  # fmt: skip
        if launch is not None:
            warm_up(ctx, prog, launch)
        return prog.get_info(cl.program_info.BINARIES)[0]


def warm_up(ctx: CLContext, prog: Any, launch: Launch) -> None:
    """Run a kernel once on scratch buffers, so PoCL compiles its work-group size now. Every scratch byte is 1: no
    integer division by zero."""
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    bufs = [cl.Buffer(ctx.context, flags, hostbuf=np.ones(n, dtype=np.uint8)) for n in launch.nbytes]
    try:
        getattr(prog, launch.name)(ctx.queue, launch.global_size, launch.local_size, *bufs).wait()
    except cl.Error:
        pass  # NOTE: a launch the device refuses is refused again, with its error, when this process launches it


def local_size(global_size: tuple[int, ...], budget: int) -> tuple[int, ...]:
    """A work-group shape that divides the global size: the largest power of two per axis that fits the budget."""
    ret = []
    for g in global_size:
        size = 1
        while size * 2 <= budget and g % (size * 2) == 0:
            size *= 2
        ret.append(size)
        budget //= size
    return tuple(ret)


WARMUP_MAX_BYTES = 1 << 28  # scratch a build server may allocate to launch a kernel once


def launch_of(prg: Program, max_work_group: int) -> Launch | None:
    """How CLProgram will launch `prg`, each buffer as large as its highest index (an upper bound) reaches; None where
    that depends on a Variable's value or needs more than WARMUP_MAX_BYTES of scratch."""
    if prg.vars or not all(isinstance(s, int) for s in prg.global_size or (1,)):
        return None
    gs = tuple(int(s) for s in prg.global_size or (1,))
    reach: dict[int, int] = {}
    for u in prg.uops:
        if u.uop in (UOps.LOAD, UOps.STORE) and u.vin[0].uop is UOps.DEFINE_GLOBAL:
            idx, buf = u.arg[0] if u.uop is UOps.LOAD else u.arg, u.vin[0].arg[0]
            reach[buf] = max(reach.get(buf, 1), (idx.max if isinstance(idx, Node) else int(idx)) + u.width)
    nbytes = tuple(reach.get(i, 1) * dtype.itemsize for i, dtype in prg.buffers)
    if sum(nbytes) > WARMUP_MAX_BYTES:
        return None
    return Launch(prg.name, gs, prg.local_size or local_size(gs, max_work_group), nbytes)


class CLProgram:
    """One built kernel, launched over the program's global size."""

    def __init__(self, ctx: CLContext, prg: Program, binary: bytes):
        self.ctx, self.global_size, self.vars = ctx, prg.global_size or (1,), prg.vars
        self.local_size = prg.local_size  # NOTE: a kernel with local ids needs its own work-group shape
        with ctx.build_lock:
            program = cl.Program(ctx.context, [ctx.device], [binary]).build()
            self.kernel = getattr(program, prg.name)

    def __call__(self, bufs: list[Any], var_vals: dict[Variable, int], wait: bool) -> float | None:
        gs = sizes_with(self.global_size, var_vals)
        args = [*bufs, *[np.int32(sym_infer(v, var_vals)) for v in self.vars]]
        event = self.kernel(self.ctx.queue, gs, self.local_size or local_size(gs, self.ctx.max_work_group), *args)
        if not wait:
            return None
        event.wait()
        return (event.profile.end - event.profile.start) * 1e-9


# *** builds in child processes ***
# PoCL's LLVM has aborted the whole process compiling a kernel (SIGABRT, "Do not know how to scalarize this operator's
# operand!"), and PoCL compiles machine code for each work-group size at a kernel's first launch. So a program is built
# by a build server, a child process that builds the source, launches it once as this process will (PoCL compiles that
# work-group size there) and answers with the program binary, which then carries that machine code. A crash costs the
# child (started again for the next build) and is a KernelBuildError naming the kernel.

SERVER_CHILD = "import sys; from specgrad.runtime.ops_gpu import serve_builds; serve_builds(int(sys.argv[1]))"
SERVER_LOG_LINES = 40  # of a server's stderr, kept for the error when it dies


def serve_builds(index: int) -> None:
    """A build server's loop, in the child: one JSON job per line on stdin ({"src", "launch"}), one JSON reply per line
    ({"binary": base64} or {"log": why it did not build}); it ends when stdin closes (its parent is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # NOTE: Ctrl-C is the parent's to handle; it closes stdin
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # NOTE: anything else printed here (by the driver, LLVM) goes to stderr, not into the replies
    ctx = CLContext(index)
    for line in sys.stdin:
        job = json.loads(line)
        launch = job.get("launch")
        launch = Launch(**{k: tuple(v) if isinstance(v, list) else v for k, v in launch.items()}) if launch else None
        try:
            reply = {"binary": base64.b64encode(compile_cl(ctx, job["src"], launch)).decode()}
        except BuildFailed as e:
            reply = {"log": str(e)}
        print(json.dumps(reply), file=replies, flush=True)


class BuildServer:
    """One child process running serve_builds, started at its first job and again after it dies."""

    def __init__(self, index: int):
        self.index = index
        self.proc: subprocess.Popen | None = None
        self.log: deque[bytes] = deque(maxlen=SERVER_LOG_LINES)
        self.reader: threading.Thread | None = None

    def _start(self) -> subprocess.Popen:
        # NOTE: the child imports the same specgrad as this process, wherever that is
        path = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")) if p)
        try:
            proc = subprocess.Popen([sys.executable, "-c", SERVER_CHILD, str(self.index)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ,
                                    "PYTHONPATH": path})  # fmt: skip
        except OSError as e:
            raise BuildFailed(f"the build server (a child process) did not start: {e}") from None
        self.log = deque(maxlen=SERVER_LOG_LINES)
        self.reader = threading.Thread(target=self.log.extend, args=(proc.stderr,), daemon=True)
        self.reader.start()
        return proc

    def build(self, job: dict[str, Any]) -> dict[str, Any]:
        """The server's reply to `job`; BuildFailed where it dies first."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(json.dumps(job).encode() + b"\n")
            stdin.flush()
            line = stdout.readline()
        except OSError:  # NOTE: a broken pipe: it died
            line = b""
        if line.endswith(b"\n"):  # NOTE: else it died before or while answering
            return json.loads(line)
        raise BuildFailed(self._death(self.proc))

    def _death(self, proc: subprocess.Popen) -> str:
        code = proc.wait()
        if self.reader is not None:
            self.reader.join(timeout=5)
        how = f"crashed ({signal_name(-code)})" if code < 0 else f"exited with status {code}"
        log = b"".join(self.log).decode(errors="replace")
        return (f"the OpenCL compiler {how} building it or launching it first, in a build server (a child process, "
                f"started again for the next kernel; this process is unharmed); its last output:\n{log}")  # fmt: skip

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # NOTE: the server ends at the end of its input


class BuildServers:
    """The GPU device's compile function: each build goes to an idle build server, or a new one where all are busy, so
    there are as many as builds run at once (Compiler.compile_many runs up to COMPILE_JOBS). None starts before a build
    misses the disk cache."""

    def __init__(self, index: int):
        self.index = index
        self.servers: list[BuildServer] = []
        self.idle: list[BuildServer] = []
        self.lock = threading.Lock()
        # NOTE: source -> how it will be launched, recorded as each kernel is rendered and taken by its build; kept for
        # a kernel found in the disk cache, as its Runner keeps the source
        self.launches: dict[str, Launch] = {}

    def expect(self, src: str, launch: Launch | None) -> None:
        if launch is not None:
            self.launches[src] = launch

    def __call__(self, src: str) -> bytes:
        launch = self.launches.pop(src, None)
        with self.lock:
            if not self.idle:
                self.servers.append(BuildServer(self.index))
                self.idle.append(self.servers[-1])
            server = self.idle.pop()
        try:
            reply = server.build({"src": src, "launch": asdict(launch) if launch is not None else None})
        finally:
            with self.lock:
                self.idle.append(server)
        if "log" in reply:
            raise BuildFailed(reply["log"])
        return base64.b64decode(reply["binary"])

    def close(self) -> None:
        for server in self.servers:
            server.close()


# *** vector widths, proven ***
# A device's preferred vector width is what it advertises, not what its compiler gets right: PoCL on an AVX-512 AMD
# CPU said 16 but compiled for a target without avx512f, so a float16 sum added only 8 of its lanes, and its LLVM
# aborted the whole process compiling a float16 division. So each width is built and run once per device in a child
# process (an abort there costs only that width) and checked against numpy; the widest width that passes, with every
# narrower one, is used. The verdict is cached on disk under the device, its driver and the probe's source.

PROBE_WIDTHS = (4, 8, 16)
PROBE_GROUPS = 64  # vectors per probe kernel
PROBE_CHILD = r"""
import json, sys
import numpy as np
import pyopencl as cl
job = json.loads(sys.stdin.read())
device = [d for p in cl.get_platforms() for d in p.get_devices()][job["device"]]
context = cl.Context(devices=[device])
queue = cl.CommandQueue(context)
mf = cl.mem_flags
for probe in job["probes"]:
    try:
        program = cl.Program(context, probe["src"]).build(cache_dir=False)
        # NOTE: device.abi_warning's rule (this child imports only numpy and pyopencl)
        built = "changes the ABI" not in (program.get_build_info(device, cl.program_build_info.LOG) or "")
    except cl.Error:
        built = False
    if not built:
        print(json.dumps([probe["width"], None]), flush=True)
        break
    results = {}
    for name, (dtype, x) in probe["inputs"].items():
        x = np.array(x, dtype=dtype)
        out, sums = np.zeros_like(x), np.zeros(job["groups"], dtype=dtype)
        bufs = [cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a) for a in (x, out, sums)]
        getattr(program, name)(queue, (job["groups"],), None, *bufs)
        cl.enqueue_copy(queue, out, bufs[1])
        cl.enqueue_copy(queue, sums, bufs[2])
        results[name] = [out.tolist(), sums.tolist()]
    print(json.dumps([probe["width"], results]), flush=True)
"""


def probe_types(width: int, fp64: bool) -> dict[str, tuple[str, int]]:
    """The probe kernels of a width in float lanes: kernel name -> (C type, lanes); doubles get half the lanes, so
    the same bytes, as the renderer gives them."""
    return {"probe_float": ("float", width), **({"probe_double": ("double", width // 2)} if fp64 else {})}


def probe_dtype(t: str) -> type:
    return np.float32 if t == "float" else np.float64


def probe_source(width: int, fp64: bool) -> str:
    """Kernels in the shapes the renderer emits: vload/vstore, a division, max as select, the vector math functions,
    a comparison and a horizontal sum lane by lane."""
    ret = ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"] if fp64 else []
    for name, (t, lanes) in probe_types(width, fp64).items():
        vt, one, hsum = f"{t}{lanes}", f"(({t}{lanes})(1.0))", "+".join(f"v.s{i:x}" for i in range(lanes))
        ret.append(f"""__kernel void {name}(__global const {t}* x, __global {t}* out, __global {t}* sums) {{
  int i = (int)get_global_id(0);
  {vt} v = vload{lanes}(0, x+i*{lanes});
  {vt} r = {one}/(v*v+{one});
  {vt} m = select(r,v,(v!=v)|(v>r));
  {vt} e = exp2(r)+log2(r)+sqrt(r)+sin(v);
  vstore{lanes}(select(m,e,v<(({vt})(0.0))), 0, out+i*{lanes});
  sums[i] = ({hsum});
}}""")
    return "\n".join(ret)


def probe_inputs(lanes: int, dtype: type) -> np.ndarray:
    """Small integers, so every lane matters to a sum and the sums are exact."""
    return ((np.arange(PROBE_GROUPS * lanes) * 7) % 17 - 8).astype(dtype)


def probe_expected(x: np.ndarray, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """What a probe kernel computes, in numpy: its output and the sum of each vector's lanes."""
    r = 1 / (x * x + 1)
    m = np.where(np.isnan(x) | (x > r), x, r)
    return np.where(x < 0, np.exp2(r) + np.log2(r) + np.sqrt(r) + np.sin(x), m), x.reshape(-1, lanes).sum(axis=1)


def is_probe_right(width: int, fp64: bool, results: Mapping[str, Any] | None) -> bool:
    """Whether a probe's outputs (None where it did not build) are numpy's: its sums exactly, the rest closely."""
    for name, (t, lanes) in probe_types(width, fp64).items():
        if not results or name not in results:
            return False
        want_out, want_sums = probe_expected(probe_inputs(lanes, probe_dtype(t)), lanes)
        out, sums = results[name]
        if not (np.allclose(out, want_out, rtol=1e-5, atol=1e-6) and np.array_equal(sums, want_sums)):
            return False
    return True


def proven_width(widths: tuple[int, ...], fp64: bool, results: Mapping[int, Mapping[str, Any] | None]) -> int:
    """The widest of `widths` (ascending) whose probe, and every narrower one's, ran and computed right; else 1."""
    ret = 1
    for width in widths:
        if width not in results or not is_probe_right(width, fp64, results[width]):
            break
        ret = width
    return ret


def run_probes(ctx: CLContext, widths: tuple[int, ...]) -> tuple[dict[int, Any], bool]:
    """Each width's probe outputs from a child process (None where it did not build; missing where the child died
    first), and whether they are a verdict: the child finished or was killed by the device's compiler (a signal), not
    timed out or failed to start."""
    fp64 = ctx.has_fp64
    inputs = {w: {name: (np.dtype(probe_dtype(t)).name, probe_inputs(lanes, probe_dtype(t)).tolist())
                  for name, (t, lanes) in probe_types(w, fp64).items()} for w in widths}  # fmt: skip
    probes = [{"width": w, "src": probe_source(w, fp64), "inputs": inputs[w]} for w in widths]
    job = json.dumps({"device": ctx.index, "groups": PROBE_GROUPS, "probes": probes})
    try:
        res = subprocess.run([sys.executable, "-c", PROBE_CHILD], input=job, capture_output=True, text=True,
                             timeout=300)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        if DEBUG >= 1:
            print(f"GPU device: the vector width probe did not finish ({e})")
        return {}, False
    if res.returncode != 0 and DEBUG >= 1:
        print(f"GPU device: the vector width probe exited with {res.returncode}:\n{res.stderr[-2000:]}")
    ret = {}
    for line in res.stdout.splitlines():
        try:
            width, results = json.loads(line)
        except ValueError:
            continue
        ret[int(width)] = results
    return ret, res.returncode <= 0


def probe_widths(ctx: CLContext) -> tuple[int, ...]:
    """The widths worth proving: float4 at least (memory transactions), wider up to what the device prefers (a CPU
    under PoCL), or up to what CL_VECTOR_WIDTH asks for."""
    asked = int(CL_VECTOR_WIDTH) or max(int(ctx.device.preferred_vector_width_float), 4)
    return tuple(w for w in PROBE_WIDTHS if w <= asked)


def vector_width(ctx: CLContext) -> int:
    """Float lanes for the GPU device's vectors: the widest of probe_widths that the probe proves, else 1."""
    if not (widths := probe_widths(ctx)):
        return 1
    key_src = f"{ctx.identity}\n{cl.VERSION}\n{widths}\n" + "\n".join(probe_source(w, ctx.has_fp64) for w in widths)
    cache, key = DiskCache("opencl-widths"), hashlib.sha256(key_src.encode()).hexdigest()
    if (cached := cache.get(key)) is not None and cached.isdigit() and int(cached) in (1, *widths):
        return int(cached)
    results, conclusive = run_probes(ctx, widths)
    ret = proven_width(widths, ctx.has_fp64, results)
    if conclusive:  # NOTE: a probe that timed out or could not start says nothing about the device: asked again
        cache.put(key, str(ret).encode())
    return ret


def GPUDevice() -> Compiled:
    ctx = CLContext()
    servers = BuildServers(ctx.index)
    # NOTE: "launched": binaries cached before builds launched once in a build server lack the work-group machine code
    compiler = Compiler("opencl", f"{ctx.identity} launched", servers, f"the GPU device (OpenCL on {ctx.name})", ".cl")
    width, groups = vector_width(ctx), ctx.work_groups()
    if DEBUG >= 1:
        print(f"GPU device: OpenCL on {ctx.name}, float{width} vectors (proven by a probe kernel; the device prefers "
              f"float{ctx.device.preferred_vector_width_float}), "
              f"{groups or 'work-groups picked by the runtime'}")  # fmt: skip
    opts = LinearizerOptions(global_dims=3, optimize=True, vector_bytes=4 * width, work_groups=groups)

    def render_cl(prg: Program) -> str:
        src = render(prg, OPENCL_DIALECT)
        servers.expect(src, launch_of(prg, ctx.max_work_group))
        return src

    ret = Compiled("GPU", CLAllocator(ctx, compiler), opts, render_cl, compiler, functools.partial(CLProgram, ctx))
    ret.supported_dtypes, ret.description = ctx.supported_dtypes(), f" (OpenCL on {ctx.name})"
    ret.synchronize = ctx.queue.finish  # type: ignore[method-assign]
    return ret
