"""The CLANG device's register tile, measured on the CPU it runs on.

How many accumulators a reduce kernel keeps in registers (codegen/opts.py, UPCAST) pays off differently by CPU: a
core with two FMA units needs twice the independent chains of one with one unit to stay busy, and a target with 16
vector registers (AVX2, SSE) spills a tile that fits in 32 (AVX-512, NEON). So the device times its own matmul
kernel, in cache, at each candidate tile size and takes the fastest (the register-count rule's size where it is
within TIE of the fastest, so noise does not move it). A tile changes which outputs a kernel computes together, never
the order in which one output adds up, so results are the same bits whichever size wins. The vector width is not
measured: the widest proven one is used, because lanes on a reduce axis change how it adds up.

The same probe also times the kernel with one accumulator, a chain of dependent multiply-adds: it waits out each
one's latency (about 4 cycles on current x86 and Arm cores), where the best tile keeps every FMA unit busy, so how
many times faster the best tile is says about how many units a core has, with no clock to read. `specgrad bench`
prints both as the peak it compares with (a measured peak: the best tile's GFLOP/s on one core, times the threads).

The probe runs in a child process, as the width probes do (a crash costs only the child), on one thread; its verdict
and figures are cached on disk under the compiler, its flags, the CPU and specgrad's source. Imports cache, codegen,
device, ops, renderer, schedule and shape.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from specgrad.cache import DiskCache, private_folder
from specgrad.codegen.linearizer import LinearizerOptions, linearize
from specgrad.codegen.opts import MAX_ACCUMULATORS
from specgrad.device import BuildFailed, code_fingerprint
from specgrad.dtype import dtypes
from specgrad.flags import DEBUG
from specgrad.helpers import cores
from specgrad.ops import BinaryOps, BufferOps, LazyOp, MemBuffer, ReduceOps
from specgrad.renderer.cstyle import C_DIALECT, render
from specgrad.schedule import PACK_PANEL
from specgrad.shape.shapetracker import ShapeTracker

if TYPE_CHECKING:
    from concurrent.futures import Future

CANDIDATES = (8, 16)  # accumulators in a register tile (4 was the slowest with AVX-512 and with AVX2 here)
CHAIN = 1  # one accumulator: the FMA latency probe
FMA_LATENCY = 4  # cycles, on current x86 (Intel since Skylake, AMD Zen 4) and Arm Neoverse cores
PROBE_MATMUL = (128, 512, 256)  # M, K, N: 34 MFLOP, about 0.3 ms a call
REPEATS, ROUNDS = 4, 5  # kernel calls per timing, timings per candidate (the fastest counts)
TIE = 1.05  # the rule's tile stays unless another is faster by more than this

PROBE_CHILD = r"""
import ctypes, json, sys, time
job = json.loads(sys.stdin.read())
bufs = [ctypes.create_string_buffer(n + 64) for n in job["nbytes"]]
args = [ctypes.addressof(b) + (-ctypes.addressof(b)) % 64 for b in bufs]  # NOTE: 64-byte aligned, as the device's
for a, n in list(zip(args, job["nbytes"]))[1:]:
    ctypes.memset(a, 0x3c, n)  # NOTE: every float 0.0115: finite, no subnormals
fns = {name: getattr(ctypes.CDLL(lib), name) for lib, name in job["kernels"]}
best = {name: float("inf") for name in fns}
for _ in range(job["rounds"]):
    for name, fn in fns.items():
        fn.argtypes, fn.restype = [ctypes.c_void_p] * len(args), None
        start = time.perf_counter()
        for _ in range(job["repeats"]):
            fn(*args)
        best[name] = min(best[name], (time.perf_counter() - start) / job["repeats"])
print(json.dumps(best))
"""


@dataclass(frozen=True)
class Throughput:
    """What the probe found: the register tile to use (accumulators), the fastest tile's in-cache matmul GFLOP/s on
    one core, and the one-accumulator chain's."""

    accumulators: int
    gflops: float
    chain_gflops: float

    @property
    def fma_units(self) -> int:
        """FMA units per core, about: how many FMA latencies the best tile fits in the time of one."""
        return max(1, round(self.gflops / self.chain_gflops / FMA_LATENCY))


def rule_accumulators(vector_bytes: int) -> int:
    """The register-count rule's tile (codegen/opts.py), which stays unless another candidate is clearly faster."""
    return MAX_ACCUMULATORS.get(vector_bytes, 8)


def probe_ast() -> LazyOp:
    """out = a @ b at PROBE_MATMUL as the scheduler hands a large matmul to the linearizer: b packed into panels of
    PACK_PANEL columns (schedule.py), the output split to match. (A small unpacked matmul ranks tiles differently
    from the kernels that take a training step's time.)"""
    m, k, n = PROBE_MATMUL
    shape = (m, n // PACK_PANEL, PACK_PANEL, k)
    a = ShapeTracker.from_shape((m, 1, 1, k)).expand(shape)
    b = ShapeTracker.from_shape((n // PACK_PANEL, k, PACK_PANEL)).permute((0, 2, 1)).reshape((1, *shape[1:]))
    loads = [LazyOp(BufferOps.LOAD, (), MemBuffer(i, dtypes.float32, st)) for i, st in ((1, a), (2, b.expand(shape)))]
    total = LazyOp(ReduceOps.SUM, (LazyOp(BinaryOps.MUL, tuple(loads)),), (*shape[:3], 1))
    out = ShapeTracker.from_shape((*shape[:3], 1))
    return LazyOp(BufferOps.STORE, (total,), MemBuffer(0, dtypes.float32, out))


def probe_sources(vector_bytes: int) -> dict[int, str]:
    """The probe kernel at each tile (the chain first), named tile<accumulators>, each a source of its own: they
    compile at once, one per core (in one file they took 0.33 s, most of the probe's time at a cold start)."""
    ret = {}
    for acc in (CHAIN, *CANDIDATES):
        # NOTE: threads=True renders the kernel as the device does (one thread here: the pool is not set)
        opts = LinearizerOptions(optimize=True, vector_bytes=vector_bytes, threads=True, accumulators=acc)
        ret[acc] = render(replace(linearize(probe_ast(), opts), name=f"tile{acc}"), C_DIALECT)
    return ret


def choose(times: dict[int, float], vector_bytes: int) -> Throughput:
    """The rule's tile where it is within TIE of the fastest candidate, else the fastest; with the fastest's and the
    chain's GFLOP/s."""
    m, k, n = PROBE_MATMUL
    fastest = min(CANDIDATES, key=lambda acc: times[acc])
    rule = rule_accumulators(vector_bytes)
    pick = rule if rule in CANDIDATES and times[rule] <= times[fastest] * TIE else fastest
    return Throughput(pick, 2 * m * k * n / times[fastest] / 1e9, 2 * m * k * n / times[CHAIN] / 1e9)


def compile_tiles(compile_fn: Callable[[str], bytes], vector_bytes: int) -> dict[int, bytes]:
    """The probe kernel's shared object at each tile, compiled at once (one per core)."""
    from concurrent.futures import ThreadPoolExecutor  # NOTE: here: it costs every start ~7 ms (see device.py)

    sources = probe_sources(vector_bytes)
    with ThreadPoolExecutor(cores()) as pool:
        return dict(zip(sources, pool.map(compile_fn, sources.values())))


def measure(compile_fn: Callable[[str], bytes], vector_bytes: int, compiled: Future | None = None
            ) -> dict[int, float] | None:  # fmt: skip
    """Seconds per call of the probe kernel at each candidate tile, the fastest of ROUNDS; None where it did not
    build or run. `compiled`: compile_tiles at this width, already started (ops_clang.probe_device)."""
    m, k, n = PROBE_MATMUL
    try:
        libs = compiled.result() if compiled is not None else compile_tiles(compile_fn, vector_bytes)
        with tempfile.TemporaryDirectory(prefix="probe-", dir=private_folder()) as tmp:
            kernels = []
            for acc, lib in libs.items():
                (path := Path(tmp) / f"tile{acc}.so").write_bytes(lib)
                kernels.append([str(path), f"tile{acc}"])
            job = {"kernels": kernels, "repeats": REPEATS, "rounds": ROUNDS,
                   "nbytes": [4 * m * n, 4 * m * k, 4 * k * n]}  # fmt: skip
            # NOTE: -I -S: the child needs only the standard library; without site it starts in 26 ms, not 45
            res = subprocess.run([sys.executable, "-I", "-S", "-c", PROBE_CHILD], input=json.dumps(job),
                                 capture_output=True, text=True, timeout=120)  # fmt: skip
        times = json.loads(res.stdout)
        return {acc: float(times[f"tile{acc}"]) for acc in (CHAIN, *CANDIDATES)}
    except (BuildFailed, OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as e:
        # NOTE: a probe that fails leaves the rule's tile in place; it never stops the device
        if DEBUG >= 1:
            print(f"CLANG device: the register tile probe did not run ({type(e).__name__}: {e}); the rule's tile stays")
        return None


def cached_throughput(identity: str, vector_bytes: int) -> Throughput | None:
    """The register tile measured before for this compiler, flags, CPU and width, or None."""
    if (cached := _cache().get(_key(identity, vector_bytes))) is not None:
        try:
            d = json.loads(cached)
            if int(d["accumulators"]) in CANDIDATES and float(d["gflops"]) > 0 and float(d["chain_gflops"]) > 0:
                return Throughput(int(d["accumulators"]), float(d["gflops"]), float(d["chain_gflops"]))
        except (ValueError, KeyError, TypeError):
            pass  # NOTE: an entry of another form: measured again, and rewritten
    return None


def measured_throughput(identity: str, compile_fn: Callable[[str], bytes], vector_bytes: int,
                        compiled: Future | None = None) -> Throughput | None:  # fmt: skip
    """The register tile for this compiler, flags and CPU, measured once and cached; None without vectors or where
    the probe could not run (the rule's tile is used). `compiled`: as measure takes it."""
    if vector_bytes == 0:
        return None
    if (cached := cached_throughput(identity, vector_bytes)) is not None:
        return cached
    if (times := measure(compile_fn, vector_bytes, compiled)) is None:
        return None
    ret = choose(times, vector_bytes)
    if DEBUG >= 1:
        print(f"CLANG device: register tiles measured: {', '.join(f'{a}: {t * 1e6:.1f} us' for a, t in times.items())}")
    _cache().put(_key(identity, vector_bytes), json.dumps(asdict(ret)).encode())
    return ret


def _cache() -> DiskCache:
    return DiskCache("clang-tiles")


def _key(identity: str, vector_bytes: int) -> str:
    # NOTE: keyed by specgrad's source, not the probe kernels' (rendering them costs every warm start ~30 ms)
    return hashlib.sha256(f"{identity}\n{vector_bytes}\n{code_fingerprint()}".encode()).hexdigest()
