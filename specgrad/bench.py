"""`specgrad bench`: kernel and training workloads timed against numpy (and PyTorch where installed) in one run.

Every figure is a ratio to a reference measured in the same run at the same thread count, never an absolute time
(the command rows time whole processes: `specgrad train` against a PyTorch script); each workload also checks its
result against the reference once. Compute-bound rows also give their share of the CPU's peak. Imports the public API
(Tensor, nn, Device, TinyJit, flags) and the CLANG runtime's CPU facts; the command rows also the trainer.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import itertools
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specgrad import Context, Device, Tensor, TinyJit, nn
from specgrad.device import DeviceUnavailable
from specgrad.flags import CPU_TARGET, THREADS
from specgrad.helpers import cores
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.files import read_data
from specgrad.nn.optim import Adam
from specgrad.nn.state import get_parameters, get_state_dict
from specgrad.runtime.ops_clang import find_compiler, target_macros, thread_count

# ***** models *****


class MLP:
    """784-256-10, the classic MNIST-sized MLP."""

    def __init__(self) -> None:
        self.l1, self.l2 = nn.Linear(784, 256), nn.Linear(256, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x.flatten(1)).relu())


class CNN:
    """Two 3x3 convolutions with max pooling, then a linear classifier, for (N, 1, 28, 28) inputs."""

    def __init__(self) -> None:
        self.c1, self.c2 = nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.c1(x).relu().max_pool2d(2)
        x = self.c2(x).relu().max_pool2d(2)
        return self.fc(x.flatten(1))


class Block:
    """A pre-norm transformer block: causal self-attention and a 4x GELU MLP, each added to its input."""

    def __init__(self, d: int, heads: int) -> None:
        self.ln1, self.attn = nn.LayerNorm(d), nn.MultiHeadAttention(d, heads, causal=True)
        self.ln2, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(self.fc1(self.ln2(x)).gelu())


class GPT:
    """A character-level GPT: token and position embeddings, `layers` blocks, a final norm and the vocabulary head."""

    def __init__(self, vocab: int = 65, d: int = 128, heads: int = 4, context: int = 64, layers: int = 2) -> None:
        self.tok, self.pos = nn.Embedding(vocab, d), Tensor.normal(context, d, std=0.02, requires_grad=True)
        self.blocks = [Block(d, heads) for _ in range(layers)]
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def __call__(self, idx: Tensor) -> Tensor:
        x = self.tok(idx) + self.pos  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))  # (B, T, vocab)


class ResNetBlock:
    """ResNet's basic block: two 3x3 convolutions with batch norm, relu, and the input added back."""

    def __init__(self, c: int) -> None:
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def __call__(self, x: Tensor) -> Tensor:
        return (self.bn2(self.conv2(self.bn1(self.conv1(x)).relu())) + x).relu()


class LSTMLM:
    """A character language model on an LSTM: embedding, one LSTM layer, the vocabulary head."""

    def __init__(self, vocab: int = 65, hidden: int = 256) -> None:
        self.tok, self.lstm, self.head = nn.Embedding(vocab, hidden), nn.LSTM(hidden, hidden), nn.Linear(hidden, vocab)

    def __call__(self, idx: Tensor) -> Tensor:
        return self.head(self.lstm(self.tok(idx))[0])


MODELS: dict[str, Callable[..., Any]] = {"MLP": MLP, "CNN": CNN, "GPT": GPT, "ResNet": ResNetBlock,
                                         "Block": Block, "LSTM": LSTMLM}  # fmt: skip


def torch_model(name: str, **kwargs: int) -> Any:
    """The PyTorch twin of MLP, CNN or GPT, with the same parameter names (so weights load by name)."""
    import torch
    from torch import nn as tnn

    class TorchMLP(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l1, self.l2 = tnn.Linear(784, 256), tnn.Linear(256, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.l2(torch.relu(self.l1(x.flatten(1))))

    class TorchCNN(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1, self.c2 = tnn.Conv2d(1, 8, 3, padding=1), tnn.Conv2d(8, 16, 3, padding=1)
            self.fc = tnn.Linear(16 * 7 * 7, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.max_pool2d(torch.relu(self.c1(x)), 2)
            return self.fc(torch.max_pool2d(torch.relu(self.c2(x)), 2).flatten(1))

    class TorchBlock(tnn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.ln1, self.attn = tnn.LayerNorm(d), tnn.MultiheadAttention(d, heads, batch_first=True)
            self.ln2, self.fc1, self.fc2 = tnn.LayerNorm(d), tnn.Linear(d, 4 * d), tnn.Linear(4 * d, d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h, t = self.ln1(x), x.shape[1]
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)  # NOTE: True hides a position from attention
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.fc2(tnn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class TorchGPT(tnn.Module):
        def __init__(self, vocab: int = 65, d: int = 128, heads: int = 4, context: int = 64, layers: int = 2):
            super().__init__()
            self.tok, self.pos = tnn.Embedding(vocab, d), tnn.Parameter(torch.zeros(context, d))
            self.blocks = tnn.ModuleList([TorchBlock(d, heads) for _ in range(layers)])
            self.ln, self.head = tnn.LayerNorm(d), tnn.Linear(d, vocab)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            x = self.tok(idx) + self.pos
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    class TorchResNetBlock(tnn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = tnn.Conv2d(c, c, 3, padding=1, bias=False), tnn.BatchNorm2d(c)
            self.conv2, self.bn2 = tnn.Conv2d(c, c, 3, padding=1, bias=False), tnn.BatchNorm2d(c)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + x)

    class TorchLSTMLM(tnn.Module):
        def __init__(self, vocab: int = 65, hidden: int = 256) -> None:
            super().__init__()
            self.tok, self.head = tnn.Embedding(vocab, hidden), tnn.Linear(hidden, vocab)
            self.lstm = tnn.LSTM(hidden, hidden, batch_first=True)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            return self.head(self.lstm(self.tok(idx))[0])

    twins = {"MLP": TorchMLP, "CNN": TorchCNN, "GPT": TorchGPT, "ResNet": TorchResNetBlock, "Block": TorchBlock,
             "LSTM": TorchLSTMLM}  # fmt: skip
    return twins[name](**kwargs)


# ***** results and timing *****


@dataclass(frozen=True)
class Result:
    """One workload's figures. `ratio` is specgrad / reference, higher is better. `target` is the ratio to reach,
    except for figures in seconds ("s"), where it is the most seconds allowed, and for `at_most` rows (seconds over
    seconds, lower is better), where it is the highest ratio allowed; `met` is None without a target."""

    name: str
    unit: str
    specgrad: float
    reference: str | None = None
    reference_value: float | None = None
    ratio: float | None = None
    target: float | None = None
    met: bool | None = None
    peak_share: float | None = None  # GFLOP/s rows: specgrad's figure / the CPU's peak (see Peak); None: unknown
    at_most: bool = False  # the ratio is specgrad's seconds / the reference's, and `target` the most it may be

    @staticmethod
    def of(name: str, unit: str, value: float, reference: str | None = None, reference_value: float | None = None,
           ratio: float | None = None, target: float | None = None, at_most: bool = False) -> Result:  # fmt: skip
        if ratio is None and reference_value:
            ratio = value / reference_value
        met = None if target is None else ratio is not None and ratio <= target if at_most else \
            value <= target if unit == "s" else ratio is not None and ratio >= target  # fmt: skip
        return Result(name, unit, value, reference, reference_value, ratio, target, met, at_most=at_most)


QUIET = 0.25  # seconds: longer than a BLAS or OpenMP thread pool spins after its last call


@dataclass(frozen=True)
class Timer:
    """Times a warmed-up function: the best of up to `repeat` calls made within about `seconds` (at least one), after
    a quiet pause of a quarter of `seconds` (at most QUIET): the side timed before leaves worker threads spinning on
    the cores, OpenBLAS's for about 2^28 cycles after each call, and a kernel timed in that window ran at half speed
    on two threads (a 256 matmul: 392 us right after numpy's, 204 us otherwise)."""

    seconds: float = 1.0
    repeat: int = 100

    def best(self, fn: Callable[[], object]) -> float:
        time.sleep(min(QUIET, self.seconds / 4))
        times: list[float] = []
        deadline = time.perf_counter() + self.seconds
        while not times or (len(times) < self.repeat and time.perf_counter() < deadline):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)


def realized(t: Tensor) -> Tensor:
    """Realize `t` and wait for its device, so a timing covers the whole computation."""
    t.realize()
    Device[t.device].synchronize()
    return t


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ",".join(map(str, shape)) + ")"


def _count(n: int) -> str:
    return f"{n >> 20}M" if n % (1 << 20) == 0 else f"{n >> 10}K" if n % (1 << 10) == 0 else str(n)


# ***** the same thread count for every side, and the CPU's peak *****


def _blas_library() -> Any:
    """The OpenBLAS numpy loaded (found among the process's mapped files), or None (another BLAS, or not Linux)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = sorted({line.split()[-1] for line in maps.splitlines() if "openblas" in line.rsplit("/", 1)[-1].lower()})
    return ctypes.CDLL(paths[0]) if paths else None


def _blas_call(lib: Any, verb: str) -> Any:
    """OpenBLAS's openblas_<verb>_num_threads under the names its builds export (numpy's is scipy_openblas...64_)."""
    for name in (f"openblas_{verb}_num_threads", f"scipy_openblas_{verb}_num_threads64_",
                 f"openblas_{verb}_num_threads64_"):  # fmt: skip
        if hasattr(lib, name):
            return getattr(lib, name)
    return None


@contextmanager
def held_threads(n: int) -> Iterator[dict[str, int | None]]:
    """Run specgrad (the CLANG device's THREADS), numpy's BLAS and PyTorch on `n` threads for the block, and restore
    them after; yields the count each side runs at, None where it cannot be set (a BLAS other than OpenBLAS, or no
    torch): the reference then runs at its own default, and the report says so."""
    held: dict[str, int | None] = {"specgrad": n, "numpy": None, "torch": None}
    lib = _blas_library()
    get, put = (_blas_call(lib, "get"), _blas_call(lib, "set")) if lib is not None else (None, None)
    before_blas = get() if get is not None and put is not None else None
    try:
        import torch

        before_torch: int | None = torch.get_num_threads()
    except ImportError:
        before_torch = None
    try:
        if before_blas is not None:
            put(n)
            held["numpy"] = get()
        if before_torch is not None:
            torch.set_num_threads(n)
            held["torch"] = torch.get_num_threads()
        with Context(THREADS=n):
            yield held
    finally:
        if before_blas is not None:
            put(before_blas)
        if before_torch is not None:
            torch.set_num_threads(before_torch)


@dataclass(frozen=True)
class Peak:
    """The CPU's peak float32 GFLOP/s at the bench's thread count. Measured where the CLANG device's probe ran
    (runtime/throughput.py): threads x the fastest register tile's GFLOP/s on one core, with the FMA units per core
    that a dependent FMA chain's speed gives. Else threads x clock x FLOPs per cycle, where FLOPs per cycle are vector
    lanes x 2 pipes x 2 with fused multiply-add (1 without), the two pipes assumed; the lanes are the device's proven
    vector width, FMA what the compiler enables for CPU_TARGET, the clock cpufreq's maximum, else the current clock in
    /proc/cpuinfo."""

    gflops: float
    derivation: str

    @staticmethod
    def of_cpu(threads: int) -> Peak | None:
        """None off the CLANG device's CPU facts (no compiler), or where neither the probe nor the clock is known."""
        try:
            dev = Device["CLANG"]
            lanes = dev.opts.vector_bytes // 4  # type: ignore[attr-defined]
            macros = target_macros(find_compiler(), str(CPU_TARGET.value))
        except DeviceUnavailable:
            return None
        used = min(threads, cores())
        cores_text = f"{used} core{'s' * (used > 1)}"
        if (measured := dev.throughput) is not None:
            units = measured.fma_units
            return Peak(used * measured.gflops,
                        f"{cores_text} x {measured.gflops:.0f} GFLOP/s measured on one core (the fastest register "
                        f"tile of a 128x512x256 matmul, {lanes} float lanes; the device uses "
                        f"{measured.accumulators} accumulators; "
                        f"a chain of dependent FMAs ran {measured.gflops / measured.chain_gflops:.1f}x slower: about "
                        f"{units} FMA unit{'s' * (units > 1)} per core)")  # fmt: skip
        clock = _clock_ghz()
        if clock is None or lanes == 0:
            return None
        fma = "__FMA__" in macros or "__ARM_FEATURE_FMA" in macros
        per_cycle = lanes * 2 * (2 if fma else 1)
        fma_text = f"{lanes} float lanes x 2 FMA units x 2" if fma else f"{lanes} float lanes x 2 pipes (no FMA)"
        return Peak(used * clock[0] * per_cycle,
                    f"{cores_text} x {clock[0]:.2f} GHz ({clock[1]}) x {per_cycle} FLOP/cycle "
                    f"({fma_text}; two units per core assumed)")  # fmt: skip


def _clock_ghz() -> tuple[float, str] | None:
    """(the CPU's clock in GHz, where it was read), or None."""
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1e6, "cpufreq maximum"
    except (OSError, ValueError):
        pass
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    mhz = [float(line.split(":", 1)[1]) for line in lines if line.startswith("cpu MHz")]
    return (mhz[0] / 1e3, "/proc/cpuinfo's current clock") if mhz else None


# ***** kernel workloads: specgrad vs numpy *****


@dataclass(frozen=True)
class Sizes:
    """Every workload's size; QUICK shrinks them so a run takes seconds (the README figures use the defaults)."""

    matmul: tuple[int, ...] = (256, 1024, 2048)
    elementwise: int = 16 << 20
    reduce: int = 16 << 20
    softmax: tuple[int, int] = (4096, 4096)
    conv: tuple[tuple[int, int, int, int], tuple[int, int, int, int]] = ((32, 16, 32, 32), (32, 16, 3, 3))
    batch: tuple[int, int, int] = (128, 64, 16)  # MLP, CNN, GPT
    gpt: tuple[int, int, int] = (128, 4, 64)  # width, heads, context
    # the zoo's shapes: a ResNet basic block, a GPT-2-small layer, an LSTM language model
    resnet: tuple[int, int, int] = (8, 64, 56)  # batch, channels, height and width
    gpt2: tuple[int, int, int, int] = (2, 768, 12, 256)  # batch, width, heads, context
    lstm: tuple[int, int, int] = (32, 256, 64)  # batch, hidden, time steps
    # the `specgrad train` command rows: epochs of digits_mlp and of the generated table; the table's size
    command_epochs: tuple[int, int] = (15, 40)
    csv: tuple[int, int, int] = (600, 8, 3)  # rows, feature columns, classes


DEFAULT = Sizes()
QUICK = Sizes(matmul=(64, 128), elementwise=64 << 10, reduce=64 << 10, softmax=(128, 256),
              conv=((4, 4, 8, 8), (8, 4, 3, 3)), batch=(16, 8, 2), gpt=(32, 4, 16), resnet=(2, 8, 8),
              gpt2=(1, 32, 2, 16), lstm=(2, 16, 8), command_epochs=(1, 2), csv=(160, 4, 3))  # fmt: skip

# the goals (ratios to the reference at the same thread count, higher is better; seconds for start-up; the command
# rows' time ratios at most); the GPU's matmul goal is lower
TARGETS: dict[str, float | None] = {"matmul": 0.8, "matmul GPU": 0.25, "elementwise": 0.9, "sum": 1.0, "softmax": 1.0,
                                    "conv2d": 0.8, "train": 1.0, "start cold": 2.0, "start warm": 1.0, "command": 1.0,
                                    "command captured": 1.3}  # fmt: skip


def compare(name: str, target: float | None, unit: str, timer: Timer, expected: np.ndarray,
            sg: tuple[Callable[..., Tensor], tuple[Tensor, ...], float], ref: tuple[str, Callable[[], object], float],
            rtol: float = 1e-5, atol: float = 1e-6) -> Result:  # fmt: skip
    """Time specgrad's function of realized inputs through TinyJit (call 1 compiles, call 2 captures, later calls
    replay the kernels, as in a training loop) and the numpy reference, then check specgrad's last output against
    `expected`. `sg` is (function, inputs, work), `ref` (name, function, work); work is FLOPs or bytes."""
    step = TinyJit(lambda *xs: sg[0](*xs).realize())
    run = lambda: realized(step(*sg[1]))
    run()  # NOTE: the untimed warm-up compiles; the second call is captured and returns the tensor replays refill
    out = run()
    ref[1]()
    value, ref_value = sg[2] / timer.best(run) / 1e9, ref[2] / timer.best(ref[1]) / 1e9
    np.testing.assert_allclose(out.numpy(), expected, rtol=rtol, atol=atol, err_msg=f"{name} on {Device.DEFAULT}")
    return Result.of(name, unit, value, ref[0], ref_value, target=target)


def bench_matmul(n: int, timer: Timer) -> Result:
    rng = np.random.default_rng(0)
    a_np, b_np = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    a, b = Tensor(a_np).realize(), Tensor(b_np).realize()
    target = TARGETS["matmul GPU" if Device.DEFAULT == "GPU" else "matmul"]
    return compare(f"matmul f32 N={n}", target, "GFLOP/s", timer, a_np @ b_np,
                   (Tensor.matmul, (a, b), 2 * n**3), ("numpy matmul", lambda: a_np @ b_np, 2 * n**3),
                   rtol=1e-3, atol=1e-3 * math.sqrt(n))  # fmt: skip


def bench_elementwise(n: int, timer: Timer) -> Result:
    rng = np.random.default_rng(0)
    a_np, b_np, c_np = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    a, b, c = (Tensor(x).realize() for x in (a_np, b_np, c_np))
    out = np.empty_like(a_np)
    return compare(f"elementwise (a*b+c).relu()*0.5, {_count(n)} floats", TARGETS["elementwise"], "GB/s", timer,
                   np.maximum(a_np * b_np + c_np, 0) * 0.5,
                   (lambda a, b, c: (a * b + c).relu() * 0.5, (a, b, c), 16 * n),
                   ("numpy copyto", lambda: np.copyto(out, a_np), 8 * n))  # fmt: skip


def bench_sum(n: int, timer: Timer) -> Result:
    x_np = np.random.default_rng(0).random(n, dtype=np.float32)
    x = Tensor(x_np).realize()
    return compare(f"sum of {_count(n)} floats", TARGETS["sum"], "GB/s", timer, x_np.sum(dtype=np.float64),
                   (Tensor.sum, (x,), 4 * n), ("numpy sum", lambda: x_np.sum(), 4 * n), rtol=1e-4)  # fmt: skip


def softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return np.divide(e, e.sum(axis=1, keepdims=True), out=e)


def bench_softmax(shape: tuple[int, int], timer: Timer) -> Result:
    x_np = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    x, nbytes = Tensor(x_np).realize(), 2 * 4 * x_np.size
    return compare(f"softmax rows {shape[0]}x{shape[1]}", TARGETS["softmax"], "GB/s", timer, softmax_np(x_np),
                   (Tensor.softmax, (x,), nbytes), ("numpy max/exp/sum/divide", lambda: softmax_np(x_np), nbytes),
                   atol=1e-7, rtol=1e-4)  # fmt: skip


def conv2d_np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """3x3 convolution with padding 1 as im2col + one matmul: (N, C, H, W) * (Cout, C, kh, kw) -> (N, Cout, H, W)."""
    (n, c, h, wd), (cout, _, kh, kw) = x.shape, w.shape
    padded = np.pad(x, ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    cols = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))  # (N, C, H, W, kh, kw)
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * wd, c * kh * kw)
    return (cols @ w.reshape(cout, -1).T).reshape(n, h, wd, cout).transpose(0, 3, 1, 2)


def conv2d_grads_np(x: np.ndarray, w: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The input and weight gradients of conv2d_np for the output gradient g: the im2col matmul's, with the column
    gradients added back into the padded input window by window."""
    (n, c, h, wd), (cout, _, kh, kw) = x.shape, w.shape
    padded = np.pad(x, ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    cols = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * wd, c * kh * kw)
    g2 = g.transpose(0, 2, 3, 1).reshape(n * h * wd, cout)
    dw = (g2.T @ cols).reshape(w.shape)
    dcols = (g2 @ w.reshape(cout, -1)).reshape(n, h, wd, c, kh, kw)
    dpad = np.zeros_like(padded)
    for i in range(kh):
        for j in range(kw):
            dpad[:, :, i : i + h, j : j + wd] += dcols[..., i, j].transpose(0, 3, 1, 2)
    return dpad[:, :, kh // 2 : kh // 2 + h, kw // 2 : kw // 2 + wd], dw


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def bench_conv2d(shapes: tuple[tuple[int, ...], tuple[int, ...]], timer: Timer) -> Result:
    """The forward convolution, against PyTorch's at the same thread count (numpy's im2col + matmul without it)."""
    rng = np.random.default_rng(0)
    x_np, w_np = rng.standard_normal(shapes[0], dtype=np.float32), rng.standard_normal(shapes[1], dtype=np.float32)
    x, w = Tensor(x_np).realize(), Tensor(w_np).realize()
    (n, _, h, wd), (cout, c, kh, kw) = shapes
    flops = 2 * n * cout * h * wd * c * kh * kw
    ref: tuple[str, Callable[[], object], float] = ("numpy im2col+matmul", lambda: conv2d_np(x_np, w_np), flops)
    if (torch := _torch()) is not None:
        tx, tw = torch.from_numpy(x_np), torch.from_numpy(w_np)
        ref = (f"torch conv2d, {_threads(torch.get_num_threads())}", lambda: torch.conv2d(tx, tw, padding=1), flops)
    return compare(f"conv2d {_shape(shapes[0])}*{_shape(shapes[1])} pad 1",
                   TARGETS["conv2d"], "GFLOP/s", timer, conv2d_np(x_np, w_np),
                   (lambda x, w: x.conv2d(w, padding=1), (x, w), flops), ref, rtol=1e-3, atol=1e-3)  # fmt: skip


def bench_conv2d_backward(shapes: tuple[tuple[int, ...], tuple[int, ...]], timer: Timer) -> Result:
    """The input and weight gradients of the same convolution for a given output gradient (twice its forward FLOPs),
    against PyTorch's autograd at the same thread count; checked against numpy's im2col gradients."""
    rng = np.random.default_rng(1)
    (n, _, h, wd), (cout, c, kh, kw) = shapes
    x_np, w_np = rng.standard_normal(shapes[0], dtype=np.float32), rng.standard_normal(shapes[1], dtype=np.float32)
    g_np = rng.standard_normal((n, cout, h, wd), dtype=np.float32)
    x, w = Tensor(x_np, requires_grad=True).realize(), Tensor(w_np, requires_grad=True).realize()
    g = Tensor(g_np).realize()

    def grads(x: Tensor, w: Tensor, g: Tensor) -> list[Tensor]:
        x.grad = w.grad = None
        x.conv2d(w, padding=1).backward(g)
        assert x.grad is not None and w.grad is not None
        Tensor.corealize([x.grad, w.grad])
        return [x.grad, w.grad]

    step = TinyJit(grads)
    run = lambda: [realized(t) for t in step(x, w, g)]
    run()
    out = run()
    flops = 2 * 2 * n * cout * h * wd * c * kh * kw
    value, name = flops / timer.best(run) / 1e9, f"conv2d backward {_shape(shapes[0])}*{_shape(shapes[1])} pad 1"
    for got, want in zip(out, conv2d_grads_np(x_np, w_np, g_np)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-3, atol=1e-3, err_msg=f"{name} on {Device.DEFAULT}")
    if (torch := _torch()) is None:
        return Result.of(name, "GFLOP/s", value, target=TARGETS["conv2d"])
    tx, tw, tg = (torch.from_numpy(a) for a in (x_np, w_np, g_np))
    # NOTE: the gradients alone, as specgrad computes them (its unused forward is never run)
    ref = lambda: (torch.nn.grad.conv2d_input(tx.shape, tw, tg, padding=1),
                   torch.nn.grad.conv2d_weight(tx, tw.shape, tg, padding=1))  # fmt: skip
    ref()
    ref_value = flops / timer.best(ref) / 1e9
    return Result.of(name, "GFLOP/s", value, f"torch conv2d grads, {_threads(torch.get_num_threads())}",
                     ref_value, target=TARGETS["conv2d"])  # fmt: skip


def _threads(n: int) -> str:
    return f"{n} thread{'s' * (n != 1)}"


# ***** training workloads: specgrad with TinyJit vs PyTorch eager at the same thread count *****

CHECK_STEPS = 4  # NOTE: steps 1-2 run for real (2 is captured by the jit), 3-4 replay; their losses are compared


def make_batches(name: str, batch: int, sizes: Sizes, rng: np.random.Generator) -> list[tuple[np.ndarray, ...]]:
    """CHECK_STEPS (input, label) batches for a model: random images, or random characters for the GPT."""
    if name == "GPT":
        tokens = rng.integers(0, 65, (CHECK_STEPS, batch, sizes.gpt[2] + 1)).astype(np.int32)
        return [(t[:, :-1], t[:, 1:]) for t in tokens]
    shape = (batch, 784) if name == "MLP" else (batch, 1, 28, 28)
    return [(rng.standard_normal(shape, dtype=np.float32), rng.integers(0, 10, batch).astype(np.int32))
            for _ in range(CHECK_STEPS)]  # fmt: skip


def specgrad_step(model: Any) -> TinyJit:
    """One Adam training step on a batch, captured by TinyJit; returns the realized loss."""
    opt = Adam(get_parameters(model), lr=1e-3)

    def step(x: Tensor, y: Tensor) -> Tensor:
        with Tensor.train():
            loss = model(x).sparse_categorical_crossentropy(y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return loss.realize()

    return TinyJit(step)


def torch_training(name: str, kwargs: dict[str, int], state: dict[str, np.ndarray], batches: list,
                   timer: Timer) -> tuple[list[float], float] | None:  # fmt: skip
    """PyTorch's losses on `batches` from the same weights, and its steps/s after them; None without torch."""
    if (torch := _torch()) is None:
        return None
    model = torch_model(name, **kwargs)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = [(torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))) for x, y in batches]

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, -2), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    losses = [step(x, y) for x, y in data]
    cycle = itertools.cycle(data)
    return losses, 1 / timer.best(lambda: step(*next(cycle)))


def bench_training(name: str, label: str, sizes: Sizes, timer: Timer) -> Result:
    Tensor.manual_seed(0)
    kwargs = dict(zip(("d", "heads", "context"), sizes.gpt)) if name == "GPT" else {}
    model = MODELS[name](**kwargs)
    batch = dict(zip(MODELS, sizes.batch))[name]
    batches = make_batches(name, batch, sizes, np.random.default_rng(0))
    state = {k: v.numpy() for k, v in get_state_dict(model).items()}
    step, data = specgrad_step(model), [(Tensor(x).realize(), Tensor(y).realize()) for x, y in batches]
    losses = [step(x, y).item() for x, y in data]  # NOTE: the warm-up: compiles every kernel, the jit captures
    cycle = itertools.cycle(data)
    value = 1 / timer.best(lambda: realized(step(*next(cycle))))
    ref = torch_training(name, kwargs, state, batches, timer)
    if ref is None:
        assert all(math.isfinite(x) for x in losses), f"{name} training on {Device.DEFAULT}: losses {losses}"
        return Result.of(f"train {label}, batch {batch}", "steps/s", value, target=TARGETS["train"])
    np.testing.assert_allclose(losses, ref[0], rtol=2e-3, err_msg=f"{name} training losses on {Device.DEFAULT}")
    torch_threads = _threads(_torch().get_num_threads())
    return Result.of(f"train {label}, batch {batch}", "steps/s", value, f"torch eager, {torch_threads}", ref[1],
                     target=TARGETS["train"])  # fmt: skip


# ***** the zoo's shapes: one layer or block each, specgrad with TinyJit vs PyTorch eager *****


def zoo_case(name: str, sizes: Sizes, rng: np.random.Generator) -> tuple[dict[str, int], str, list[tuple]]:
    """(the model's arguments, the row's label, CHECK_STEPS (input, target) batches) of a zoo row."""
    if name == "ResNet":
        n, c, hw = sizes.resnet
        data = [(rng.standard_normal((n, c, hw, hw), dtype=np.float32), rng.standard_normal((n, c, hw, hw),
                 dtype=np.float32)) for _ in range(CHECK_STEPS)]  # fmt: skip
        return {"c": c}, f"ResNet basic block {c}ch {hw}x{hw}, batch {n}, forward+backward", data
    if name == "Block":
        n, d, heads, ctx = sizes.gpt2
        data = [(rng.standard_normal((n, ctx, d), dtype=np.float32), rng.standard_normal((n, ctx, d),
                 dtype=np.float32)) for _ in range(CHECK_STEPS)]  # fmt: skip
        return {"d": d, "heads": heads}, f"train GPT-2-small layer d{d} h{heads} ctx{ctx}, batch {n}, Adam", data
    n, hidden, steps = sizes.lstm
    tokens = rng.integers(0, 65, (CHECK_STEPS, n, steps + 1)).astype(np.int32)
    return (
        {"hidden": hidden},
        f"train LSTM LM h{hidden} {steps} steps, batch {n}, Adam",
        [(t[:, :-1], t[:, 1:]) for t in tokens],
    )


def zoo_loss(name: str, out: Any, target: Any, torch: Any = None) -> Any:
    """The row's loss, in specgrad or (given torch) PyTorch: a weighted sum for the ResNet block (its gradient is the
    target), mean squared error for the transformer layer, cross-entropy for the language model."""
    if name == "ResNet":
        return (out * target).sum()
    if name == "Block":
        return ((out - target) ** 2).mean()
    if torch is None:
        return out.sparse_categorical_crossentropy(target)
    return torch.nn.functional.cross_entropy(out.flatten(0, -2), target.flatten())


def bench_zoo(name: str, sizes: Sizes, timer: Timer) -> Result:
    """One step of a zoo-shaped model: forward and backward (ResNet's block, no optimizer) or a whole Adam training
    step, captured by TinyJit, against PyTorch eager from the same weights on the same batches (losses compared)."""
    Tensor.manual_seed(0)
    kwargs, label, batches = zoo_case(name, sizes, np.random.default_rng(0))
    model = MODELS[name](**kwargs)
    state = {k: v.numpy() for k, v in get_state_dict(model).items()}
    params = get_parameters(model)
    opt = Adam(params, lr=1e-3) if name != "ResNet" else None

    def sg_step(x: Tensor, y: Tensor) -> Tensor:
        with Tensor.train():
            loss = zoo_loss(name, model(x), y)
            for p in params:
                p.grad = None
            loss.backward()
            if opt is not None:
                opt.step()
            else:
                Tensor.corealize([p.grad for p in params if p.grad is not None])
        return loss.realize()

    step, data = TinyJit(sg_step), [(Tensor(x).realize(), Tensor(y).realize()) for x, y in batches]
    losses = [step(x, y).item() for x, y in data]
    cycle = itertools.cycle(data)
    value = 1 / timer.best(lambda: realized(step(*next(cycle))))
    if (torch := _torch()) is None:
        assert all(math.isfinite(x) for x in losses), f"{label} on {Device.DEFAULT}: losses {losses}"
        return Result.of(label, "steps/s", value, target=TARGETS["train"])
    twin = torch_model(name, **kwargs)
    twin.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    twin.train()
    t_opt = torch.optim.Adam(twin.parameters(), lr=1e-3) if opt is not None else None
    t_data = [(torch.from_numpy(x.copy()) if x.dtype != np.int32 else torch.from_numpy(x.astype(np.int64)),
               torch.from_numpy(y.copy()) if y.dtype != np.int32 else torch.from_numpy(y.astype(np.int64)))
              for x, y in batches]  # fmt: skip

    def torch_step(x: Any, y: Any) -> float:
        loss = zoo_loss(name, twin(x), y, torch)
        twin.zero_grad(set_to_none=True)
        loss.backward()
        if t_opt is not None:
            t_opt.step()
        return loss.item()

    ref_losses = [torch_step(x, y) for x, y in t_data]
    np.testing.assert_allclose(losses, ref_losses, rtol=2e-3, err_msg=f"{label} on {Device.DEFAULT}")
    t_cycle = itertools.cycle(t_data)
    ref = 1 / timer.best(lambda: torch_step(*next(t_cycle)))
    return Result.of(label, "steps/s", value, f"torch eager, {_threads(torch.get_num_threads())}", ref,
                     target=TARGETS["train"])  # fmt: skip


# ***** process start to the first training step *****


class BenchError(RuntimeError):
    """A workload could not run (the start-up benchmark's process failed); the message has its error output."""


def first_training_step(device: str, batch: int) -> None:
    """What a fresh process does before its first MLP step finishes (`bench_start` runs it in a subprocess)."""
    Device.DEFAULT = device
    x, y = make_batches("MLP", batch, DEFAULT, np.random.default_rng(0))[0]
    specgrad_step(MLP())(Tensor(x), Tensor(y)).item()


def start_seconds(device: str, batch: int, cachedir: str) -> float:
    """Wall-clock seconds of a new Python process that imports specgrad and finishes one MLP step, then exits."""
    root = str(Path(__file__).resolve().parents[1])  # NOTE: so the child imports this same specgrad
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "CACHEDIR": cachedir, "PYTHONPATH": path, "THREADS": str(THREADS.value)}
    code = f"from specgrad.bench import first_training_step; first_training_step({device!r}, {batch})"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"the start-up benchmark's process failed on {device}:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def bench_start(sizes: Sizes) -> list[Result]:
    batch = sizes.batch[0]
    with tempfile.TemporaryDirectory(prefix="specgrad-bench-") as cachedir:
        cold, warm = start_seconds(Device.DEFAULT, batch, cachedir), start_seconds(Device.DEFAULT, batch, cachedir)
    name = f"start to first MLP step (batch {batch})"
    return [Result.of(f"{name}, cold cache", "s", cold, target=TARGETS["start cold"]),
            Result.of(f"{name}, warm cache", "s", warm, "cold cache", cold, ratio=cold / warm,
                      target=TARGETS["start warm"])]  # fmt: skip


# ***** time to result: the whole `specgrad train` command against a plain PyTorch script *****

COMMAND_ROUNDS = 3  # NOTE: whole processes: this many timed rounds per side (unless --repeat is lower), the median

# NOTE: what an analyst would write: a plain loop with per-epoch validation; run as its own process (imports included)
TORCH_SCRIPT = '''\
"""A plain PyTorch training script with per-epoch validation (`specgrad bench`'s command rows time it)."""
import json
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

config = json.loads(open(sys.argv[1]).read())
torch.set_num_threads(config["threads"])
torch.manual_seed(config["seed"])
data = np.load(config["data"])
x_train, x_valid = (torch.from_numpy(data[k]).flatten(1) for k in ("x_train", "x_valid"))
y_train, y_valid = (torch.from_numpy(data[k]).long() for k in ("y_train", "y_valid"))
(h1, h2), batch, epochs = config["hidden"], config["batch_size"], config["epochs"]
model = nn.Sequential(nn.Linear(x_train.shape[1], h1), nn.ReLU(), nn.Dropout(config["dropout"]), nn.Linear(h1, h2),
                      nn.ReLU(), nn.Linear(h2, config["classes"]))
opt = torch.optim.Adam(model.parameters(), lr=config["lr"])
steps = len(x_train) // batch  # the last partial batch is left out, as specgrad does
for epoch in range(1, epochs + 1):
    model.train()
    order, total = torch.randperm(len(x_train)), 0.0
    for i in range(steps):
        pick = order[i * batch : (i + 1) * batch]
        loss = F.cross_entropy(model(x_train[pick]), y_train[pick])
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
    model.eval()
    valid_loss, hits = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x_valid), batch):
            out, y = model(x_valid[i : i + batch]), y_valid[i : i + batch]
            valid_loss += F.cross_entropy(out, y, reduction="sum").item()
            hits += int((out.argmax(1) == y).sum())
    print(f"epoch {epoch}/{epochs}  train loss {total / steps:.4f}  valid loss {valid_loss / len(x_valid):.4f}  "
          f"valid accuracy {hits / len(x_valid):.4f}", flush=True)
torch.save(model.state_dict(), config["out"])
'''

TABLE_SPEC = """\
specgrad: 1
name: bench-table
seed: 0
input:
  shape: [{features}]
model:
  - linear: 32
  - relu
  - dropout: 0.1
  - linear: 16
  - relu
  - linear: {classes}
data:
  source: csv
  path: table.csv
  features: [{names}]
  target: label
  normalize: true
  valid_split: 0.2
  batch_size: 32
train:
  epochs: {epochs}
  optimizer: adam
  lr: 0.003
  loss: cross_entropy
  metrics: [accuracy]
"""

DIGITS_SPEC = Path(__file__).resolve().parents[1] / "specs" / "digits_mlp.yaml"  # NOTE: in a source checkout


@dataclass(frozen=True)
class Recipe:
    """A training run of the command rows: the spec `specgrad train` runs, and the layers the PyTorch script builds
    for it (flatten, linear hidden[0], relu, dropout, linear hidden[1], relu, linear classes; both sides' final
    weights are compared by shape). Epochs, batch size, learning rate and seed are the validated spec's."""

    label: str
    spec: Path
    epochs: int
    hidden: tuple[int, int]
    dropout: float
    classes: int


def digits_recipe(epochs: int) -> Recipe:
    return Recipe(f"digits_mlp {epochs} epochs", DIGITS_SPEC, epochs, (128, 64), 0.1, 10)


def write_table(folder: Path, rows: int, features: int, classes: int, epochs: int) -> Recipe:
    """A CSV table of `rows` examples, `features` numeric columns and a text label of `classes` classes (overlapping
    Gaussian clusters from seed 0), and a spec of a small MLP for it, written into `folder`."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, classes, rows)
    x = rng.normal(0, 1.5, (classes, features))[labels] + rng.normal(0, 1, (rows, features))
    names = [f"f{i}" for i in range(features)]
    lines = [",".join(names) + ",label", *(",".join(f"{v:.4f}" for v in r) + f",class{c}" for r, c in zip(x, labels))]
    (folder / "table.csv").write_text("\n".join(lines) + "\n")
    spec = folder / "table.yaml"
    spec.write_text(TABLE_SPEC.format(features=features, classes=classes, names=", ".join(names), epochs=epochs))
    return Recipe(f"csv {rows}x{features} {classes} classes {epochs} epochs", spec, epochs, (32, 16), 0.1, classes)


def child_env(threads: int) -> dict[str, str]:
    """The environment of both sides' processes: this specgrad importable, and every thread pool at `threads`."""
    root = str(Path(__file__).resolve().parents[1])  # NOTE: so the child imports this same specgrad
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    n = str(threads)
    return {**os.environ, "PYTHONPATH": path, "THREADS": n, "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n,
            "OPENBLAS_NUM_THREADS": n}  # fmt: skip


def process_seconds(argv: list[str], env: dict[str, str], what: str) -> float:
    """Wall-clock seconds of a process from its start to its exit; BenchError (with its error output) if it fails."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"{what} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def captured_work(trainer: Any) -> Callable[[], float]:
    """A function timing the run's core work in this process: its steps (epochs x steps_per_epoch replays of the
    trainer's captured step on batches already on the device) and after each epoch the trainer's own validation pass
    (Trainer.evaluate: captured per batch shape, its figures read once). Warmed up here."""
    from specgrad.train.data import batches

    data, size = trainer.data, trainer.spec.batch_size
    train = [trainer.tensors(x, y) for x, y in batches(data.x_train, data.y_train, size, False)]
    Tensor.corealize([t for xs, ys in train for t in (*xs, *ys)])

    def work() -> float:
        start, done = time.perf_counter(), 0
        while done < trainer.total_steps:
            for xs, ys in train[: min(trainer.steps_per_epoch, trainer.total_steps - done)]:
                trainer.step_fn(xs, ys)
                done += 1
            loss = trainer.evaluate()["loss"]  # NOTE: reads the device: the epoch's steps are done
        seconds = time.perf_counter() - start
        assert math.isfinite(loss), f"the validation loss of the captured work is {loss} on {Device.DEFAULT}"
        return seconds

    for xs, ys in train[:3]:  # NOTE: compiles, captures, replays once
        realized(trainer.step_fn(xs, ys))
    trainer.evaluate(), trainer.evaluate()
    return work


def command_rounds(sides: list[Callable[[], float]], timer: Timer) -> list[list[float]]:
    """Each side once untimed (compiled kernels cached, imports in the page cache), then rounds of every side in turn,
    so a noisy moment hurts every side alike: COMMAND_ROUNDS (fewer only when the timer's repeat is lower), more while
    within the timer's seconds and repeat. Returns each side's times."""
    for side in sides:
        side()
    times: list[list[float]] = [[] for _ in sides]
    deadline, least = time.perf_counter() + timer.seconds, min(COMMAND_ROUNDS, timer.repeat)
    while len(times[0]) < least or (len(times[0]) < timer.repeat and time.perf_counter() < deadline):
        for t, side in zip(times, sides):
            t.append(side())
    return times


def torch_side(trainer: Any, recipe: Recipe, folder: Path, env: dict[str, str], threads: int) -> Callable[[], float]:
    """A function timing the PyTorch script's process on the trainer's own split (written as data.npz), with the
    spec's epochs, batch size, learning rate and seed, at `threads` threads; it saves its weights as torch.pt."""
    data, t = trainer.data, trainer.spec.values["train"]
    splits = {"x_train": data.x_train, "y_train": data.y_train, "x_valid": data.x_valid, "y_valid": data.y_valid}
    np.savez(folder / "data.npz", **splits)
    config = {"data": str(folder / "data.npz"), "out": str(folder / "torch.pt"), "threads": threads,
              "seed": trainer.spec.values["seed"], "hidden": recipe.hidden, "dropout": recipe.dropout,
              "classes": recipe.classes, "lr": t["lr"], "batch_size": trainer.spec.batch_size,
              "epochs": recipe.epochs}  # fmt: skip
    (folder / "train_torch.py").write_text(TORCH_SCRIPT)
    (folder / "config.json").write_text(json.dumps(config))
    argv = [sys.executable, str(folder / "train_torch.py"), str(folder / "config.json")]
    return lambda: process_seconds(argv, env, "the PyTorch training script")


def check_torch_weights(torch: Any, path: Path, trainer: Any, recipe: Recipe) -> None:
    """The PyTorch script trained a model of the spec's shape: the same weight shapes, in order."""
    theirs = [tuple(v.shape) for v in torch.load(path).values()]
    ours = [tuple(p.shape) for p in trainer.opt.params]
    assert theirs == ours, f"the PyTorch script's weights for {recipe.label} are {theirs}, specgrad's model's {ours}"


def bench_command(table: bool, sizes: Sizes, timer: Timer) -> list[Result]:
    """`specgrad train` of digits_mlp (or of a generated CSV table) as a whole process: against the PyTorch script
    (where torch is installed) and against its own captured work in this process; each the median of interleaved
    rounds, at the bench's threads."""
    from specgrad.modelspec.validate import validate_file
    from specgrad.train.trainer import Trainer

    threads, device, torch = int(THREADS.value), Device.DEFAULT, _torch()
    with tempfile.TemporaryDirectory(prefix="specgrad-bench-") as tmp:
        folder = Path(tmp)
        recipe = write_table(folder, *sizes.csv, sizes.command_epochs[1]) if table else \
            digits_recipe(sizes.command_epochs[0])  # fmt: skip
        trainer = Trainer.create(validate_file(recipe.spec, [f"train.epochs={recipe.epochs}"]))
        code = "import sys; from specgrad.cli.main import app; sys.exit(app())"  # NOTE: what the `specgrad` script runs
        argv = [sys.executable, "-c", code, "train", str(recipe.spec), "--epochs", str(recipe.epochs), "--device",
                device, "--out", str(folder / "runs")]  # fmt: skip
        env = child_env(threads)
        sides = [lambda: process_seconds(argv, env, f"`specgrad train {recipe.spec.name}`"), captured_work(trainer)]
        if torch is not None:
            sides.append(torch_side(trainer, recipe, folder, env, threads))
        times = command_rounds(sides, timer)
        if torch is not None:
            check_torch_weights(torch, folder / "torch.pt", trainer, recipe)
    command, core, *ref = [float(np.median(t)) for t in times]
    name, median = f"command {recipe.label}", f"median of {len(times[0])}"
    versus = Result.of(name, "s", command, target=None) if not ref else \
        Result.of(name, "s", command, f"torch script, {_threads(threads)}, {median}", ref[0],
                  target=TARGETS["command"], at_most=True)  # fmt: skip
    return [versus, Result.of(f"{name} / captured", "s", command, f"its captured steps + evals, {median}", core,
                              target=TARGETS["command captured"], at_most=True)]  # fmt: skip


# ***** the workload list and a run *****


@dataclass(frozen=True)
class Workload:
    """A named measurement: `run` gives its results (one, or two for start-up) using the timer."""

    name: str
    run: Callable[[Timer], list[Result]]


def workloads(sizes: Sizes) -> list[Workload]:
    """Every workload at these sizes, in the order they run; `--only` matches their names. The digits_mlp command row
    needs the source checkout's specs/ folder."""

    def one(fn: Callable[..., Result], *args: Any) -> Callable[[Timer], list[Result]]:
        return lambda timer: [fn(*args, timer)]

    models = [("MLP", "MLP 784-256-10 Adam"), ("CNN", "CNN 2 convs+pools+linear Adam"),
              ("GPT", "GPT 2 layers d{} h{} ctx{} Adam".format(*sizes.gpt))]  # fmt: skip
    return [*[Workload(f"matmul N={n}", one(bench_matmul, n)) for n in sizes.matmul],
            Workload("elementwise", one(bench_elementwise, sizes.elementwise)),
            Workload("sum", one(bench_sum, sizes.reduce)),
            Workload("softmax", one(bench_softmax, sizes.softmax)),
            Workload("conv2d", one(bench_conv2d, sizes.conv)),
            Workload("conv2d backward", one(bench_conv2d_backward, sizes.conv)),
            *[Workload(f"train {label}", one(bench_training, name, label, sizes)) for name, label in models],
            *[Workload(f"zoo {name}", one(bench_zoo, name, sizes)) for name in ("ResNet", "Block", "LSTM")],
            *([Workload("command digits_mlp", lambda timer: bench_command(False, sizes, timer))]
              if DIGITS_SPEC.exists() else []),
            Workload("command csv", lambda timer: bench_command(True, sizes, timer)),
            Workload("start", lambda timer: bench_start(sizes))]  # fmt: skip


@contextmanager
def default_device(device: str | None) -> Iterator[str]:
    """Make `device` the default for the block (raising DeviceUnavailable, with the reason, when it cannot run)."""
    before = Device.DEFAULT
    Device.DEFAULT = device or before
    try:
        yield Device.DEFAULT
    finally:
        Device.DEFAULT = before


def select(sizes: Sizes, only: list[str] | None) -> list[Workload]:
    """The workloads whose names contain one of `only` (all of them without it)."""
    every = workloads(sizes)
    ret = [w for w in every if not only or any(s.lower() in w.name.lower() for s in only)]
    if not ret:
        raise ValueError(f"no workload matches {', '.join(only or [])}; workloads: {', '.join(w.name for w in every)}")
    return ret


def run(chosen: list[Workload], timer: Timer, on_result: Callable[[Result], None] | None = None) -> list[Result]:
    """Run workloads on Device.DEFAULT; `on_result` sees each result as it comes. Raises AssertionError when a
    result disagrees with its reference, BenchError when the start-up process fails."""
    ret = []
    for w in chosen:
        for result in w.run(timer):
            ret.append(result)
            if on_result is not None:
                on_result(result)
    return ret


def environment(device: str, held: dict[str, int | None], peak: Peak | None) -> dict[str, Any]:
    """What the figures depend on: device, threads of each side, CPU model and peak, library versions."""
    cpu = platform.processor() or platform.machine()
    if Path("/proc/cpuinfo").exists():
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]  # fmt: skip
        cpu = names[0] if names else cpu
    torch = _torch()
    description = Device[device].description.removeprefix(" (").removesuffix(")")
    return {"device": Device.canonicalize(device), "device_description": description,
            "threads": held["specgrad"], "numpy_threads": held["numpy"], "torch_threads": held["torch"],
            "cpu": cpu, "cores": cores(), "peak_gflops": peak.gflops if peak else None,
            "peak_derivation": peak.derivation if peak else None, "python": platform.python_version(),
            "numpy": np.__version__, "torch": torch.__version__ if torch else None}  # fmt: skip


# NOTE: how each row's figure is taken from its timed runs
STATISTIC = "best; the command rows: the median of interleaved rounds"


def to_json(env: dict[str, Any], results: list[Result], timer: Timer, quick: bool,
            changes: list[dict[str, Any]] | None) -> str:  # fmt: skip
    timing = {"seconds": timer.seconds, "repeat": timer.repeat, "statistic": STATISTIC, "quick": quick}
    compared = {} if changes is None else {"changes": changes}
    return json.dumps({**env, **timing, "results": [asdict(r) for r in results], **compared}, indent=2)


# ***** comparing with an earlier run *****


def read_earlier(path: Path) -> dict[str, Any]:
    """A document `--json` wrote, read as any file named on the command line is (a regular file of at most
    MAX_FILE_MB); ValueError (with the file's name and what is wrong) for anything else."""
    try:
        doc = json.loads(read_data(str(path), None, "--compare", None))
        results = {r["name"]: r for r in doc["results"] if isinstance(r["specgrad"], (int, float))}
    except SpecError as e:
        raise ValueError(str(e).removeprefix("error: ")) from None
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise ValueError(f"{path} is not a document `specgrad bench --json` wrote ({type(e).__name__}: {e})") from None
    return {**doc, "results": results}


def changes(earlier: dict[str, Any], results: list[Result]) -> list[dict[str, Any]]:
    """Per workload both runs have: specgrad's figure then and now, and now / then (for seconds, then / now), so
    above 1 is faster in both cases; the ratios to the references of each run."""
    ret = []
    for r in results:
        if (old := earlier["results"].get(r.name)) is None or not old["specgrad"] or old.get("unit") != r.unit:
            continue
        change = old["specgrad"] / r.specgrad if r.unit == "s" else r.specgrad / old["specgrad"]
        ret.append({"name": r.name, "unit": r.unit, "before": old["specgrad"], "now": r.specgrad, "change": change,
                    "ratio_before": old.get("ratio"), "ratio_now": r.ratio})  # fmt: skip
    return ret


def differences(earlier: dict[str, Any], env: dict[str, Any]) -> list[str]:
    """What differs between the two runs' machines and settings (their figures compare badly then)."""
    keys = ("device", "cpu", "threads", "numpy_threads", "torch_threads", "numpy", "torch")
    return [f"{k} {earlier.get(k)} then, {env[k]} now" for k in keys if k in earlier and earlier[k] != env[k]]


def change_rows(path: Path, found: list[dict[str, Any]], differ: list[str]) -> list[str]:
    widths = (48, 16, 16, 8, 20)
    cells = [("workload", "before", "now", "change", "ratio to reference")]
    for c in found:
        ratios = "-" if c["ratio_before"] is None or c["ratio_now"] is None else \
            f"{c['ratio_before']:.3g}x -> {c['ratio_now']:.3g}x"  # fmt: skip
        cells.append((c["name"], _figure(c["before"], c["unit"]), _figure(c["now"], c["unit"]),
                      f"{c['change']:.3g}x", ratios))  # fmt: skip
    lines = [f"compared with {path} (change: now / before, above 1 is faster)", *[f"note: {d}" for d in differ]]
    if not found:
        return [*lines, f"no workload of this run is in {path}"]
    return lines + ["  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths)).rstrip() for row in cells]


# ***** text output *****

COLUMNS = (("workload", 48), ("specgrad", 16), ("reference", 48), ("ratio", 8), ("target", 14), ("peak", 6))


def _figure(value: float, unit: str) -> str:
    return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"


def header() -> str:
    return "  ".join(f"{name:<{width}}" for name, width in COLUMNS).rstrip()


def row(r: Result) -> str:
    ref = f"{_figure(r.reference_value, r.unit)} {r.reference}" if r.reference_value is not None else "-"
    ratio = f"{r.ratio:.3g}x" if r.ratio is not None else "-"
    target = "-" if r.target is None else f"<= {r.target:g}x" if r.at_most else f"<= {r.target:g} s" if r.unit == "s" \
        else f">= {r.target:g}x"  # fmt: skip
    target += "" if r.met is None else " met" if r.met else " missed"
    peak = f"{r.peak_share:.0%}" if r.peak_share is not None else "-"
    cells = (r.name, _figure(r.specgrad, r.unit), ref, ratio, target, peak)
    return "  ".join(f"{cell:<{width}}" for cell, (_, width) in zip(cells, COLUMNS)).rstrip()


def title(env: dict[str, Any], timer: Timer) -> list[str]:
    threads = env["threads"]
    sides = [f"specgrad {_threads(threads)}" if env["device"] == "CLANG" else "specgrad"]
    sides.append(f"numpy's BLAS {_threads(env['numpy_threads'])}" if env["numpy_threads"] else
                 "numpy's BLAS at its own count (not OpenBLAS: cannot be set)")  # fmt: skip
    if env["torch"]:
        sides.append(f"torch {_threads(env['torch_threads'])}")
    torch_text = f", torch {env['torch']}" if env["torch"] else ", torch not installed"
    where = env["device_description"] or env["cpu"]
    lines = [f"specgrad bench on {env['device']} ({where}), numpy {env['numpy']}{torch_text}; best of up to "
             f"{timer.repeat} runs in {timer.seconds:g} s each",
             f"threads: {', '.join(sides)}"]  # fmt: skip
    if env["peak_gflops"]:
        lines.append(f"peak: {env['peak_gflops']:.0f} GFLOP/s = {env['peak_derivation']}")
    return lines


# ***** python -m specgrad.bench *****


def validation_seconds(paths: list[Path]) -> list[tuple[str, float]]:
    """How long `specgrad validate` takes per spec (best of three, in this process)."""
    from specgrad.modelspec.validate import validate_file

    ret = []
    for path in paths:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            validate_file(path)
            times.append(time.perf_counter() - start)
        ret.append((path.name, min(times)))
    return ret


Echo = Callable[..., None]  # (text, err=False), like typer.echo


def report(device: str | None, only: list[str] | None, quick: bool, seconds: float | None, repeat: int,
           as_json: bool, echo: Echo, threads: int | None = None, earlier: Path | None = None) -> int:  # fmt: skip
    """Run the chosen workloads on `device` with every side on `threads` threads (default: the THREADS flag, or
    every core) and echo a table, row by row, or one JSON document; with `earlier` (a document --json wrote), also
    each workload's change since then. Returns the exit code: 0 whether or not targets are met, 1 a result
    disagrees with its reference, 2 a bad command line (`only` matches no workload, `earlier` is not such a
    document), 3 the device cannot run here."""
    timer = Timer(seconds if seconds is not None else 0.1 if quick else 1.0, repeat)
    try:
        chosen = select(QUICK if quick else DEFAULT, only)
        before = read_earlier(earlier) if earlier is not None else None
    except ValueError as e:
        echo(f"error: {e}", err=True)
        return 2
    try:
        with default_device(device) as name, held_threads(threads or thread_count()) as held:
            peak = Peak.of_cpu(held["specgrad"] or 1) if Device.canonicalize(name) == "CLANG" else None
            env = environment(name, held, peak)
            if not as_json:
                for line in title(env, timer):
                    echo(line)
                echo(header())

            def judged(r: Result) -> Result:
                # NOTE: the targets are for the default sizes; --quick's tiny ones only check that everything runs
                share = r.specgrad / peak.gflops if peak is not None and r.unit == "GFLOP/s" else None
                return dataclasses.replace(r, peak_share=share, **({"target": None, "met": None} if quick else {}))

            results = [judged(r) for r in run(chosen, timer, None if as_json else lambda r: echo(row(judged(r))))]
    except DeviceUnavailable as e:
        echo(f"error: {e}", err=True)
        return 3
    except (AssertionError, BenchError) as e:
        echo(f"error: {e}", err=True)
        return 1
    found = changes(before, results) if before is not None else None
    if as_json:
        echo(to_json(env, results, timer, quick, found))
    elif before is not None and earlier is not None and found is not None:
        echo("")
        for line in change_rows(earlier, found, differences(before, env)):
            echo(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m specgrad.bench`: the same run as `specgrad bench`; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="CLANG, GPU or CPU (default: the best available)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    parser.add_argument("--only", action="append", default=None, help="run the workloads whose name contains this")
    parser.add_argument("--quick", action="store_true", help="small sizes: seconds instead of minutes")
    parser.add_argument("--seconds", type=float, default=None, help="seconds of timed runs per side (default 1)")
    parser.add_argument("--repeat", type=int, default=100, help="at most this many timed runs per side")
    parser.add_argument("--threads", type=int, default=None, help="threads of every side (default: every core)")
    parser.add_argument("--compare", type=Path, default=None, help="a --json document of an earlier run")
    parser.add_argument("--validate", type=Path, default=None, help="time validating every spec in this folder instead")
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.validate is None:
        echo = lambda text, err=False: print(text, file=sys.stderr if err else sys.stdout, flush=True)
        return report(args.device, args.only, args.quick, args.seconds, args.repeat, args.json, echo, args.threads,
                      args.compare)  # fmt: skip
    for name, seconds in validation_seconds(sorted(args.validate.glob("*.yaml"))):
        print(f"validate {name:28s} {seconds * 1e3:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
