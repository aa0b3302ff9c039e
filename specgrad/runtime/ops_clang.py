"""The CLANG device: kernels rendered to C, compiled to a shared object by clang (or the system cc), loaded with
ctypes and run on host memory. Imports flags, codegen, renderer and device.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.cache import DiskCache, Refused, private_folder
from specgrad.codegen.linearizer import LinearizerOptions, Program, linearize
from specgrad.device import (
    BuildFailed,
    Compiled,
    Compiler,
    DeviceUnavailable,
    HostAllocator,
    HostMemory,
    KernelBuildError,
    abi_warning,
    code_fingerprint,
    signal_name,
    timed,
)
from specgrad.dtype import DType, dtypes
from specgrad.flags import CC, CPU_TARGET, DEBUG, THREADS
from specgrad.helpers import cores, prod
from specgrad.ops import BinaryOps, BufferOps, ConstBuffer, LazyOp, MemBuffer, ReduceOps, TernaryOps, UnaryOps
from specgrad.renderer.cstyle import C_DIALECT, KERNEL_MARK, render
from specgrad.runtime.throughput import Throughput, cached_throughput, compile_tiles, measured_throughput
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import Variable, sym_infer

# NOTE: no -ffast-math: it lets the compiler assume there is no inf or nan, and results for them must stay correct.
# -ffp-contract=off keeps a*b+c two roundings, as numpy computes it; -fwrapv makes signed overflow wrap, as the
# kernels (and numpy) expect. -march comes from the CPU_TARGET flag (target_flags).
CFLAGS = ("-shared", "-fPIC", "-O2", "-fno-math-errno", "-ffp-contract=off", "-fwrapv", "-pthread")
INSTALL_HINT = "install clang (apt-get install clang) or gcc, or point the CC flag at a C compiler"


def find_compiler() -> str:
    """The compiler's path: the CC flag if set, else clang, else the system cc."""
    names = [str(CC.value)] if CC.value else ["clang", "cc"]
    for name in names:
        if path := shutil.which(name):
            return path
    raise DeviceUnavailable(f"no C compiler found for the CLANG device (looked for {', '.join(names)}): {INSTALL_HINT}")


@functools.cache
def compiler_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise DeviceUnavailable(f"the C compiler {path} does not run ({e}): {INSTALL_HINT}") from None
    return out.splitlines()[0].strip() if out else path


@functools.cache
def cpu_identity() -> str:
    """What -march=native depends on: the machine and the CPU's model and feature flags."""
    try:
        info = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    except OSError:
        info = platform.processor()
    return f"{platform.machine()} {hashlib.sha256(info.encode()).hexdigest()[:16]}"


def target_flags(target: str) -> tuple[str, ...]:
    return (f"-march={target}",)


@functools.cache
def target_macros(path: str, target: str) -> frozenset[str]:
    """The macros the compiler predefines for a target: the instruction sets it will really emit (-march=native on
    a CPU newer than the compiler enables less than /proc/cpuinfo lists)."""
    cmd = [path, *target_flags(target), "-dM", "-E", "-x", "c", "-"]
    try:
        res = subprocess.run(cmd, input="", capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise DeviceUnavailable(f"the C compiler {path} does not run ({e}): {INSTALL_HINT}") from None
    if res.returncode != 0:
        raise DeviceUnavailable(f"{path} does not compile for -march={target} (the CPU_TARGET flag): {res.stderr}")
    return frozenset(line.split()[1] for line in res.stdout.splitlines() if line.startswith("#define "))


def target_vector_bytes(macros: frozenset[str]) -> int:
    """The widest vector registers the target has, so the widest GCC vector type that is one register: wider ones
    are split and change the ABI (gcc's -Wpsabi). 0 where no SIMD is known: kernels then stay scalar."""
    if "__AVX512F__" in macros:
        return 64
    if "__AVX__" in macros:
        return 32
    return 16 if "__SSE2__" in macros or "__ARM_NEON" in macros else 0


def check_target(path: str, target: str) -> frozenset[str]:
    """The target's macros, once it is proven to need no instruction set this CPU lacks (that would be SIGILL)."""
    macros = target_macros(path, target)
    if target == "native":
        return macros
    # NOTE: instruction sets are the upper-case macros (__AVX512F__, __ARM_NEON); CPU names are lower-case (__znver3__)
    if missing := sorted(m for m in macros - target_macros(path, "native") if m[2:3].isupper()):
        raise DeviceUnavailable(f"CPU_TARGET={target} needs {', '.join(missing)}, which -march=native here lacks")
    return macros


def join_sources(kernels: list[tuple[str, str]]) -> str:
    """Several kernels' sources (name, source) as one, for one compiler run: the header chunks (includes, typedefs,
    helpers, the sg_parallel_for hook) once each, in the order they first come, then each kernel's own code. The
    names must differ (Compiler.compile_many never joins two kernels of one name)."""
    headers: list[str] = []
    bodies: list[str] = []
    for _, src in kernels:
        # NOTE: a source without the mark (none the renderer writes) is all kernel code
        header, _, body = src.rpartition(KERNEL_MARK + "\n")
        headers += [c for c in header.rstrip("\n").split("\n\n") if c and c not in headers]
        bodies.append(body)
    return "\n\n".join(headers) + "\n" + "\n".join(bodies)


def compile_c(path: str, flags: tuple[str, ...], src: str) -> bytes:
    """The shared object of `src`; BuildFailed with the compiler's messages if it fails, crashes or warns of an ABI
    change (a vector wider than the target's registers)."""
    with tempfile.TemporaryDirectory(prefix="cc-", dir=private_folder()) as tmp:  # NOTE: what we read is what cc wrote
        out, obj = Path(tmp) / "kernel.so", Path(tmp) / "kernel.o"
        if (link := link_command(path, flags)) is None:
            _run_compiler(path, [path, *flags, "-x", "c", "-", "-o", str(out), "-lm"], src, flags)
        else:
            compile_only = [f for f in flags if f != "-shared"]
            _run_compiler(path, [path, *compile_only, "-c", "-x", "c", "-", "-o", str(obj)], src, flags)
            paths = {OBJECT_MARK: str(obj), OUTPUT_MARK: str(out)}
            _run_compiler(link[0], [paths.get(a, a) for a in link], "", flags)
        return out.read_bytes()


def _run_compiler(path: str, cmd: list[str], src: str, flags: tuple[str, ...]) -> None:
    try:
        res = subprocess.run(cmd, input=src, capture_output=True, text=True)
    except OSError as e:
        raise BuildFailed(f"{path} did not start: {e}") from None
    if res.returncode < 0:
        raise BuildFailed(f"{path} crashed ({signal_name(-res.returncode)}):\n{res.stderr}")
    if res.returncode != 0:
        raise BuildFailed(f"{path} exited with status {res.returncode}:\n{res.stderr}")
    if abi_warning(res.stderr):
        raise BuildFailed(f"{path} warns that a vector type changes the ABI for -march of {' '.join(flags)}; "
                          f"the kernel could compute wrong values:\n{res.stderr}")  # fmt: skip


OBJECT_MARK, OUTPUT_MARK = "sg-object-mark.o", "sg-output-mark.so"


@functools.cache
def link_command(path: str, flags: tuple[str, ...]) -> tuple[str, ...] | None:
    """The linker command clang's driver would run to make a kernel's shared object, with OBJECT_MARK and
    OUTPUT_MARK where the paths go; None to let the driver link (gcc, or a driver whose plan is not one plain
    command). Half of clang's time per kernel was its driver starting again to link; ld itself takes 3 ms."""
    if "clang" not in compiler_version(path).lower():
        return None  # NOTE: gcc links through collect2 with a temporary LTO file in its plan, and links fast anyway
    with tempfile.TemporaryDirectory(prefix="cc-", dir=private_folder()) as tmp:
        (Path(tmp) / OBJECT_MARK).touch()  # NOTE: the driver leaves out inputs that do not exist
        try:
            res = subprocess.run([path, "-###", *flags, OBJECT_MARK, "-o", OUTPUT_MARK, "-lm"], cwd=tmp,
                                 capture_output=True, text=True, timeout=60)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
    jobs = [line for line in res.stderr.splitlines() if line.startswith(' "')]
    if res.returncode != 0 or len(jobs) != 1:
        return None
    cmd = tuple(shlex.split(jobs[0]))
    if OBJECT_MARK not in cmd or OUTPUT_MARK not in cmd or not os.path.isabs(cmd[0]) or not os.access(cmd[0], os.X_OK):
        return None
    return cmd


# The thread pool kernels hand their outer loop to: [0, n) cut into one contiguous part per thread, the caller
# running part 0. Every output element is computed whole by one thread, so results do not depend on the thread count.
# Workers spin briefly before sleeping, since kernels come in quick succession.
POOL_SRC = r"""
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
typedef void (*sg_body_fn)(void*, int, int);
#define SG_MAX_THREADS 64
#if defined(__x86_64__) || defined(__i386__)
#define SG_PAUSE() __builtin_ia32_pause()
#else
#define SG_PAUSE() ((void)0)
#endif
/* NOTE: a spinning thread yields now and then, in case the thread it waits for shares its core */
#define SG_SPIN(i) do { if (((i) & 63) == 63) sched_yield(); else SG_PAUSE(); } while (0)
static int sg_threads = 1, sg_started = 0;
static pid_t sg_pid;
static pthread_mutex_t sg_mu = PTHREAD_MUTEX_INITIALIZER, sg_caller = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sg_go = PTHREAD_COND_INITIALIZER, sg_done = PTHREAD_COND_INITIALIZER;
static sg_body_fn sg_fn; static void* sg_ctx; static int sg_n;
static volatile unsigned long sg_gen = 0;
static volatile int sg_pending = 0;

static int sg_active = 1, sg_job_threads = 1; /* threads the caller allows; threads of the job in progress */

void sg_pool_active(int threads) { sg_active = threads < 1 ? 1 : threads > sg_threads ? sg_threads : threads; }

static void sg_part(int t) {
  if (t >= sg_job_threads) return; /* NOTE: a woken worker the job does not use */
  long chunk = ((long)sg_n + sg_job_threads - 1) / sg_job_threads, start = chunk * t, end = start + chunk;
  if (end > sg_n) end = sg_n;
  if (start < end) sg_fn(sg_ctx, (int)start, (int)end);
}

static void* sg_worker(void* arg) {
  int t = (int)(long)arg;
  unsigned long seen = 0;
  for (;;) {
    for (int spin = 0; spin < 20000 && __atomic_load_n(&sg_gen, __ATOMIC_ACQUIRE) == seen; spin++) SG_SPIN(spin);
    pthread_mutex_lock(&sg_mu);
    while (sg_gen == seen) pthread_cond_wait(&sg_go, &sg_mu);
    seen = sg_gen;
    pthread_mutex_unlock(&sg_mu);
    sg_part(t);
    if (__atomic_sub_fetch(&sg_pending, 1, __ATOMIC_ACQ_REL) == 0) {
      pthread_mutex_lock(&sg_mu);
      pthread_cond_signal(&sg_done);
      pthread_mutex_unlock(&sg_mu);
    }
  }
  return 0;
}

int sg_pool_start(int threads) {
  if (threads > SG_MAX_THREADS) threads = SG_MAX_THREADS;
  if (sg_started && sg_pid == getpid()) return sg_threads;
  sg_threads = threads < 1 ? 1 : threads; sg_started = 1; sg_pid = getpid(); sg_active = sg_threads;
  for (int t = 1; t < sg_threads; t++) {
    pthread_t th;
    if (pthread_create(&th, 0, sg_worker, (void*)(long)t) != 0) { sg_threads = t; break; }
    pthread_detach(th);
  }
  return sg_threads;
}

void sg_parallel_for(sg_body_fn fn, void* ctx, int n) {
  /* NOTE: a forked child has no workers: it runs everything on its own thread */
  if (sg_threads <= 1 || sg_active <= 1 || n < 2 || sg_pid != getpid()) { fn(ctx, 0, n); return; }
  pthread_mutex_lock(&sg_caller); /* NOTE: one job at a time, whichever thread calls */
  pthread_mutex_lock(&sg_mu);
  sg_fn = fn; sg_ctx = ctx; sg_n = n; sg_job_threads = sg_active;
  __atomic_store_n(&sg_pending, sg_threads - 1, __ATOMIC_RELEASE);
  __atomic_add_fetch(&sg_gen, 1, __ATOMIC_ACQ_REL);
  pthread_cond_broadcast(&sg_go);
  pthread_mutex_unlock(&sg_mu);
  sg_part(0);
  for (int spin = 0; spin < 20000 && __atomic_load_n(&sg_pending, __ATOMIC_ACQUIRE) != 0; spin++) SG_SPIN(spin);
  pthread_mutex_lock(&sg_mu);
  while (__atomic_load_n(&sg_pending, __ATOMIC_ACQUIRE) != 0) pthread_cond_wait(&sg_done, &sg_mu);
  pthread_mutex_unlock(&sg_mu);
  pthread_mutex_unlock(&sg_caller);
}
"""


_LOADED: weakref.WeakValueDictionary[str, ctypes.CDLL] = weakref.WeakValueDictionary()


def load_library(lib: bytes) -> ctypes.CDLL:
    """dlopen exactly these bytes (checked against their MAC under the user's key when they came from the cache): they
    are written to a new file in the process's private folder, where nobody else can swap or change it before dlopen
    reads it. Bytes loaded before and still in use give that library again: a shared object built for a group of
    kernels is cached under each kernel's key, and is loaded once."""
    digest = hashlib.sha256(lib).hexdigest()
    if (ret := _LOADED.get(digest)) is not None:
        return ret
    with tempfile.NamedTemporaryFile(prefix="lib-", suffix=".so", delete=False, dir=private_folder()) as f:
        f.write(lib)
    try:
        ret = _LOADED[digest] = ctypes.CDLL(f.name)
        return ret
    finally:
        os.unlink(f.name)  # NOTE: the loaded library stays mapped after its file is gone


def thread_count() -> int:
    return int(THREADS.value) if int(THREADS.value) > 0 else cores()


class ThreadPool:
    """The pool's library, started once per process with a thread per core (or THREADS, when more); each parallel
    kernel launch uses as many of them as the THREADS flag says at that moment."""

    def __init__(self, lib: bytes):
        self.dll = load_library(lib)
        self.threads = self.dll.sg_pool_start(ctypes.c_int(max(thread_count(), cores())))
        self.parallel_for = ctypes.cast(self.dll.sg_parallel_for, ctypes.c_void_p).value
        self.active = self.threads

    def use_threads(self) -> None:
        """Hand the pool the THREADS flag's current count (it changes under `with Context(THREADS=n):`)."""
        if (n := min(int(THREADS.value) or self.threads, self.threads)) != self.active:  # NOTE: per launch: no syscall
            self.dll.sg_pool_active(ctypes.c_int(n))
            self.active = n


class ClangProgram:
    """One compiled kernel: a function in a shared object (which may hold other kernels built with it), called with
    buffer pointers and shape variables."""

    def __init__(self, prg: Program, lib: bytes, pool: ThreadPool | None = None):
        self.dll = load_library(lib)
        self.pool = pool if pool is not None and hasattr(self.dll, "sg_parallel_for") else None
        if self.pool is not None:
            ctypes.c_void_p.in_dll(self.dll, "sg_parallel_for").value = self.pool.parallel_for
        self.fn = self.dll[prg.name]  # NOTE: a function object of its own (getattr shares one per name and library)
        self.fn.argtypes = [ctypes.c_void_p] * len(prg.buffers) + [ctypes.c_int] * len(prg.vars)
        self.fn.restype = None
        self.vars: tuple[Variable, ...] = prg.vars

    def __call__(self, bufs: list[Any], var_vals: dict[Variable, int], wait: bool) -> float:
        # NOTE: HostMemory carries its address (CLANG's allocator makes only those); .ctypes.data is the slow way
        args = [b.address if type(b) is HostMemory else b.ctypes.data for b in bufs]
        args += [sym_infer(v, var_vals) for v in self.vars]
        if self.pool is not None:
            self.pool.use_threads()
        return timed(lambda: self.fn(*args))


# *** vector widths, proven ***
# The target's macros say which registers it has; that a kernel of that width compiles without an ABI warning and
# computes right is checked, not assumed: probe kernels (the vector shapes the renderer emits) are
# built as the device builds them for each width up to the target's and run in a child process (a SIGILL or a crash
# costs only the child) against the CPU device's interpreter. The widest width that passes, with every narrower one,
# is used (0: scalar kernels); the verdict is cached under the compiler, its flags, the CPU and specgrad's source.

PROBE_SHAPE = (8, 64)
PROBE_CHILD = r"""
import ctypes, json, sys
for job in json.loads(sys.stdin.read()):
    data = [bytearray(open(path, "rb").read()) for path in job["bufs"]]
    fn = getattr(ctypes.CDLL(job["lib"]), job["name"])
    fn.restype = None
    fn(*[ctypes.c_void_p(ctypes.addressof((ctypes.c_char * len(d)).from_buffer(d))) for d in data])
    open(job["bufs"][0], "wb").write(data[0])
    print(job["name"], flush=True)
"""


def probe_asts() -> list[LazyOp]:
    """Kernels that exercise what a vector width changes: vector loads and stores, a division, max, the vector math
    functions, a comparison and select, horizontal sums and maxes, in float and double (the vector dtypes)."""
    st, out_row = ShapeTracker.from_shape(PROBE_SHAPE), ShapeTracker.from_shape((PROBE_SHAPE[0], 1))

    def load(dtype: DType) -> LazyOp:
        return LazyOp(BufferOps.LOAD, (), MemBuffer(1, dtype, st))

    def const(v: float, dtype: DType) -> LazyOp:
        return LazyOp(BufferOps.CONST, (), ConstBuffer(v, dtype, ShapeTracker.from_shape((1, 1)).expand(PROBE_SHAPE)))

    def alu(op: Any, *srcs: LazyOp) -> LazyOp:
        return LazyOp(op, srcs)

    def store(x: LazyOp, dtype: DType, at: ShapeTracker = st) -> LazyOp:
        return LazyOp(BufferOps.STORE, (x,), MemBuffer(0, dtype, at))

    ret = []
    for dtype in (dtypes.float32, dtypes.float64):
        x, one = load(dtype), const(1.0, dtype)
        r = alu(UnaryOps.RECIP, alu(BinaryOps.ADD, alu(BinaryOps.MUL, x, x), one))
        math = alu(BinaryOps.ADD, alu(BinaryOps.ADD, alu(UnaryOps.EXP2, r), alu(UnaryOps.LOG2, r)),
                   alu(BinaryOps.ADD, alu(UnaryOps.SQRT, r), alu(UnaryOps.SIN, x)))  # fmt: skip
        negative = alu(BinaryOps.CMPLT, x, const(0.0, dtype))
        ret.append(
            store(alu(TernaryOps.WHERE, negative, math, alu(BinaryOps.MAX, alu(BinaryOps.DIV, one, r), x)), dtype)
        )
        ret.append(store(LazyOp(ReduceOps.SUM, (alu(BinaryOps.MUL, x, x),), out_row.shape), dtype, out_row))
        ret.append(store(LazyOp(ReduceOps.MAX, (x,), out_row.shape), dtype, out_row))
    return ret


def probe_input(dtype: DType) -> np.ndarray:
    """Small integers, so every lane matters to a sum and the sums are exact."""
    return ((np.arange(prod(PROBE_SHAPE)) * 7) % 17 - 8).astype(dtype.np)


def probe_sources(vector_bytes: int) -> list[tuple[Program, str]]:
    """Each probe kernel at this width, named probe<i>, and its source as the device renders it."""
    opts = LinearizerOptions(optimize=True, vector_bytes=vector_bytes)
    progs = [replace(linearize(ast, opts), name=f"probe{i}") for i, ast in enumerate(probe_asts())]
    return [(prg, render(prg, C_DIALECT)) for prg in progs]


def probe_file(vector_bytes: int) -> str:
    """Every probe kernel at this width in one source: one compile per width."""
    return join_sources([(prg.name, src) for prg, src in probe_sources(vector_bytes)])


def is_probe_right(compile_fn: Callable[[str], bytes], vector_bytes: int) -> bool:
    """Whether the probe kernels at this width build cleanly and compute what the CPU device's interpreter does."""
    from specgrad.runtime.ops_cpu import FXN_FOR_OP, to_runner  # NOTE: the reference, needed only here

    try:
        lib = compile_fn(probe_file(vector_bytes))
    except BuildFailed as e:
        if DEBUG >= 1:
            print(f"CLANG device: {vector_bytes}-byte vectors fail to build: {e}")
        return False
    with tempfile.TemporaryDirectory(prefix="probe-", dir=private_folder()) as tmp:
        (lib_path := Path(tmp) / "probe.so").write_bytes(lib)
        jobs, want = [], []
        for i, (ast, (prg, _)) in enumerate(zip(probe_asts(), probe_sources(vector_bytes))):
            x = probe_input(next(m.arg.dtype for m in ast.lazyops() if m.op is BufferOps.LOAD))
            out = np.zeros(prod(ast.arg.st.shape), dtype=ast.arg.dtype.np)
            reference = [out.copy().view(np.uint8), x.view(np.uint8)]
            to_runner(ast, FXN_FOR_OP)(reference, {}, False)
            want.append(reference[0].view(out.dtype))
            paths = [Path(tmp) / f"{i}.{j}.bin" for j in range(2)]
            for path, a in zip(paths, (out, x)):
                path.write_bytes(a.tobytes())
            jobs.append({"lib": str(lib_path), "name": prg.name, "bufs": [str(p) for p in paths]})
        try:
            # NOTE: -I -S: the child needs only the standard library; without site it starts in 26 ms, not 45
            res = subprocess.run([sys.executable, "-I", "-S", "-c", PROBE_CHILD], input=json.dumps(jobs),
                                 capture_output=True, text=True, timeout=120)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as e:
            raise DeviceUnavailable(f"the CLANG device's vector probe did not run: {e}") from None
        if res.returncode != 0:
            if DEBUG >= 1:
                print(
                    f"CLANG device: {vector_bytes}-byte vector kernels crashed ({res.returncode}): {res.stderr[-500:]}"
                )
            return False
        for job, expected in zip(jobs, want):
            got = np.frombuffer(Path(job["bufs"][0]).read_bytes(), dtype=expected.dtype)
            if not np.allclose(got, expected, rtol=1e-5, atol=1e-6, equal_nan=True):
                if DEBUG >= 1:
                    print(f"CLANG device: {vector_bytes}-byte vectors compute {job['name']} wrong")
                return False
    return True


def cached_vector_bytes(identity: str, widest: int) -> int | None:
    """The width proven before for this compiler, flags, CPU and widest width, or None."""
    cached = DiskCache("clang-widths").get(_widths_key(identity, widest))
    return int(cached) if cached is not None and cached.isdigit() and int(cached) in (0, *_widths(widest)) else None


def proven_vector_bytes(identity: str, compile_fn: Callable[[str], bytes], widest: int) -> int:
    """The widest vector width up to `widest` bytes whose probe, and every narrower one's, passes; else 0. The
    widths are probed at once (a compiler and a child process each), so a cold start waits for the slowest only."""
    if (cached := cached_vector_bytes(identity, widest)) is not None:
        return cached
    from concurrent.futures import ThreadPoolExecutor  # NOTE: here: it costs every start ~7 ms (see device.py)

    widths = _widths(widest)
    with ThreadPoolExecutor(max(len(widths), 1)) as pool:
        right = list(pool.map(lambda w: is_probe_right(compile_fn, w), widths))
    ret = 0
    for width, ok in zip(widths, right):
        if not ok:
            break
        ret = width
    DiskCache("clang-widths").put(_widths_key(identity, widest), str(ret).encode())
    return ret


def _widths(widest: int) -> list[int]:
    return [w for w in (16, 32, 64) if w <= widest]


def _widths_key(identity: str, widest: int) -> str:
    # NOTE: keyed by specgrad's source, not the probe kernels' (rendering them cost every warm start 15-45 ms)
    return hashlib.sha256(f"{identity}\n{_widths(widest)}\n{code_fingerprint()}".encode()).hexdigest()


def probe_device(identity: str, compile_fn: Callable[[str], bytes], widest: int) -> tuple[int, Throughput | None]:
    """The proven vector width and the register tile measured at it. Where neither is cached (a cold start), the tile
    probe's kernels compile at the widest width while the widths are probed (it is nearly always the one proven; at
    another, they compile again), and are timed once the width probes are over, so nothing else runs meanwhile."""
    if widest == 0 or cached_vector_bytes(identity, widest) is not None or \
            cached_throughput(identity, widest) is not None:  # fmt: skip
        vector_bytes = proven_vector_bytes(identity, compile_fn, widest)
        return vector_bytes, measured_throughput(identity, compile_fn, vector_bytes)
    from concurrent.futures import ThreadPoolExecutor  # NOTE: here: it costs every start ~7 ms (see device.py)

    with ThreadPoolExecutor(1) as pool:
        compiled = pool.submit(compile_tiles, compile_fn, widest)
        vector_bytes = proven_vector_bytes(identity, compile_fn, widest)
        return vector_bytes, measured_throughput(identity, compile_fn, vector_bytes,
                                                 compiled if vector_bytes == widest else None)  # fmt: skip


def ClangDevice() -> Compiled:
    path, target = find_compiler(), str(CPU_TARGET.value)
    try:
        private_folder()
    except (Refused, OSError) as e:
        raise DeviceUnavailable(f"the CLANG device has no private folder to build and load kernels in: {e}; set "
                                "TMPDIR to a folder of your own") from None  # fmt: skip
    version, flags = compiler_version(path), (*CFLAGS, *target_flags(target))
    identity, compile_fn = (
        f"{path} {version} {' '.join(flags)} {cpu_identity()}",
        functools.partial(compile_c, path, flags),
    )
    vector_bytes, throughput = probe_device(identity, compile_fn, target_vector_bytes(check_target(path, target)))
    compiler = Compiler("clang", identity, compile_fn, f"the CLANG device ({version}, -march={target})", ".c",
                        join=join_sources)  # fmt: skip
    try:
        pool_lib = compiler.compile_cached(POOL_SRC, "thread_pool")  # NOTE: also proves it builds shared objects
    except KernelBuildError as e:
        raise DeviceUnavailable(f"the C compiler {path} cannot build shared objects ({e}): {INSTALL_HINT}") from None
    pool = ThreadPool(pool_lib) if max(thread_count(), cores()) > 1 else None
    if DEBUG >= 1:
        tiles = throughput or "by register count (not measured)"
        print(
            f"CLANG device: compiling with {version} ({path}) for -march={target} ({vector_bytes}-byte vectors, "
            f"proven by probe kernels), {pool.threads if pool else 1} thread(s), register tiles: {tiles}"
        )
    accumulators = throughput.accumulators if throughput is not None else 0
    opts = LinearizerOptions(optimize=True, vector_bytes=vector_bytes, threads=pool is not None,
                             accumulators=accumulators)  # fmt: skip
    ret = Compiled("CLANG", HostAllocator(addressed=True), opts, lambda prg: render(prg, C_DIALECT), compiler,
                   functools.partial(ClangProgram, pool=pool))  # fmt: skip
    ret.throughput = throughput
    return ret
