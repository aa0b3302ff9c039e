"""`specgrad demo`: train a tiny classifier on generated data, to show the engine end to end."""

from __future__ import annotations

import math
import time

import numpy as np
import typer

from specgrad import Device, Tensor


def make_spirals(n_per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals in 2-d: a small problem a linear model cannot solve."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0.05, 1.0, n_per_class)) * 3 * math.pi
    arms = [np.stack([t * np.cos(t + k * math.pi), t * np.sin(t + k * math.pi)], 1) / (3 * math.pi) for k in (0, 1)]
    x = np.concatenate(arms) + rng.normal(0, 0.02, (2 * n_per_class, 2))
    y = np.concatenate([np.zeros(n_per_class), np.ones(n_per_class)]).astype(np.int32)
    return x.astype(np.float32), y


def train_spirals(steps: int, seed: int, lr: float = 0.1, hidden: int = 32) -> tuple[float, float]:
    """Train a 2-32-32-2 MLP with plain SGD with momentum; returns (final loss, accuracy)."""
    Tensor.manual_seed(seed)
    x_np, y_np = make_spirals(256, seed)
    x, y = Tensor(x_np), Tensor(y_np)
    params = [
        Tensor.kaiming_uniform(2, hidden, requires_grad=True),
        Tensor.zeros(hidden, requires_grad=True),
        Tensor.kaiming_uniform(hidden, hidden, requires_grad=True),
        Tensor.zeros(hidden, requires_grad=True),
        Tensor.kaiming_uniform(hidden, 2, requires_grad=True),
        Tensor.zeros(2, requires_grad=True),
    ]
    velocity = [Tensor.zeros(*p.shape) for p in params]

    def forward(inp: Tensor) -> Tensor:
        w1, b1, w2, b2, w3, b3 = params
        return inp.linear(w1, b1).relu().linear(w2, b2).relu().linear(w3, b3)

    loss = Tensor(0.0)
    for step in range(steps):
        loss = forward(x).sparse_categorical_crossentropy(y)
        for p in params:
            p.grad = None
        loss.backward()
        with_grads = [(p, v, p.grad) for p, v in zip(params, velocity)]
        for i, (p, v, g) in enumerate(with_grads):
            velocity[i] = (v * 0.9 + g).realize()
            p.assign((p.detach() - velocity[i] * lr).realize())
        if step % max(1, steps // 10) == 0 or step == steps - 1:
            typer.echo(f"step {step:4d}  loss {loss.item():.4f}")
    accuracy = (forward(x).argmax(-1) == y).float().mean().item()
    return loss.item(), accuracy


def demo(steps: int, seed: int, device: str | None) -> None:
    """Train a small MLP on two generated spirals and report the loss and accuracy."""
    if device is not None:
        Device.DEFAULT = device
    typer.echo(f"training a 2-32-32-2 MLP on 512 spiral points on {Device.DEFAULT} for {steps} steps")
    start = time.perf_counter()
    loss, accuracy = train_spirals(steps, seed)
    typer.echo(f"done in {time.perf_counter() - start:.1f} s: loss {loss:.4f}, accuracy {accuracy:.1%}")
