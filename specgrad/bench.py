"""Training-step benchmarks: steps/s with and without TinyJit, and PyTorch's where it is installed.

Run `python -m specgrad.bench [--steps N] [--device NAME]`, or `--validate specs/` to time validating each spec.
It prints figures measured in the same run; nothing here asserts on time. Imports the public API only.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specgrad import Device, Tensor, TinyJit, nn
from specgrad.nn.optim import Adam
from specgrad.nn.state import get_parameters


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


@dataclass
class Workload:
    name: str
    model: Callable[[], object]
    batch_shape: tuple[int, ...]


WORKLOADS = [Workload("MLP 784-256-10, batch 128, Adam", MLP, (128, 784)),
             Workload("CNN 2 convs + pools + linear, batch 64, Adam", CNN, (64, 1, 28, 28))]  # fmt: skip


def specgrad_steps_per_s(w: Workload, steps: int, jit: bool) -> float:
    Tensor.manual_seed(0)
    model = w.model()
    opt = Adam(get_parameters(model), lr=1e-3)

    def step(x: Tensor, y: Tensor) -> Tensor:
        with Tensor.train():
            loss = model(x).sparse_categorical_crossentropy(y)  # type: ignore[operator]
            opt.zero_grad()
            loss.backward()
            opt.step()
        return loss.realize()

    run = TinyJit(step) if jit else step
    rng = np.random.default_rng(0)
    batches = [(Tensor(rng.standard_normal(w.batch_shape, dtype=np.float32)),
                Tensor(rng.integers(0, 10, w.batch_shape[0]).astype(np.int32))) for _ in range(4)]  # fmt: skip
    for x, y in batches[:3]:  # NOTE: warm-up: compile every kernel (and let the jit capture) before timing
        run(x, y).item()
    start = time.perf_counter()
    for i in range(steps):
        loss = run(*batches[i % len(batches)])
    loss.item()
    return steps / (time.perf_counter() - start)


def torch_steps_per_s(w: Workload, steps: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if w.model is MLP:
        model = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
        )
    else:
        model = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                    torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                    torch.nn.Flatten(), torch.nn.Linear(16 * 7 * 7, 10))  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(*w.batch_shape), torch.randint(0, 10, (w.batch_shape[0],))

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - start)


def validation_seconds(paths: list[Path]) -> list[tuple[str, float]]:
    """How long `specgrad validate` takes per spec (best of three, in this process)."""
    from specgrad.spec.validate import validate_file

    ret = []
    for path in paths:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            validate_file(path)
            times.append(time.perf_counter() - start)
        ret.append((path.name, min(times)))
    return ret


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--device", default=None, help="CLANG, GPU or CPU (default: the best available)")
    parser.add_argument("--validate", type=Path, default=None, help="time validating every spec in this folder instead")
    args = parser.parse_args(argv)
    if args.validate is not None:
        for name, seconds in validation_seconds(sorted(args.validate.glob("*.yaml"))):
            print(f"validate {name:28s} {seconds * 1e3:8.1f} ms")
        return
    if args.device:
        Device.DEFAULT = args.device
    print(f"training steps/s on {Device.DEFAULT} ({args.steps} timed steps after warm-up)")
    print(f"{'workload':46s} {'no jit':>9s} {'TinyJit':>9s} {'jit gain':>9s} {'torch 1t':>9s} {'vs torch':>9s}")
    for w in WORKLOADS:
        eager, jit = specgrad_steps_per_s(w, args.steps, False), specgrad_steps_per_s(w, args.steps, True)
        ref = torch_steps_per_s(w, args.steps)
        torch_cols = f"{ref:9.1f} {jit / ref:8.2f}x" if ref else f"{'-':>9s} {'-':>9s}"
        print(f"{w.name:46s} {eager:9.1f} {jit:9.1f} {jit / eager:8.2f}x {torch_cols}")


if __name__ == "__main__":
    main()
