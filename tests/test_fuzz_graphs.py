"""Random op graphs, computed by specgrad (fused by the scheduler) and by numpy side by side."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import SLOW_ON_GPU

from specgrad import Tensor

UNARY = [
    (lambda t: t.relu(), lambda a: np.maximum(a, 0)),
    (lambda t: t.exp(), lambda a: np.exp(a)),
    (lambda t: (t.abs() + 1).log(), lambda a: np.log(np.abs(a) + 1)),
    (lambda t: t.sin(), np.sin),
    (lambda t: -t, np.negative),
    (lambda t: t * 0.5, lambda a: a * np.float32(0.5)),
    (lambda t: 1 / (t.abs() + 1), lambda a: 1 / (np.abs(a) + 1)),
    (lambda t: t.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
]
BINARY = [
    (lambda a, b: a + b, np.add),
    (lambda a, b: a * b, np.multiply),
    (lambda a, b: a - b, np.subtract),
    (lambda a, b: a.maximum(b), np.maximum),
    (lambda a, b: (a < b).where(a, b), lambda a, b: np.where(a < b, a, b)),
]


def _movement(rng: np.random.Generator, t: Tensor, a: np.ndarray) -> tuple[Tensor, np.ndarray]:
    kind = rng.integers(6)
    if kind == 0 and a.ndim >= 2:
        order = tuple(rng.permutation(a.ndim).tolist())
        return t.permute(order), a.transpose(order)
    if kind == 1:
        return t.reshape(-1), a.reshape(-1)
    if kind == 2 and a.ndim:
        pads = [(int(rng.integers(0, 2)), int(rng.integers(0, 2))) for _ in range(a.ndim)]
        return t.pad(pads), np.pad(a, pads)
    if kind == 3 and a.shape and a.shape[0] > 1:
        return t[1:], a[1:]
    if kind == 4 and a.ndim:
        return t.flip(0), a[::-1]
    if kind == 5 and a.ndim and a.shape[-1] > 2:
        return t[..., ::2], a[..., ::2]
    return t, a


def _broadcasts(s1: tuple[int, ...], s2: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(s1, s2) == s1
    except ValueError:
        return False


def _step(rng: np.random.Generator, pool: list[tuple[Tensor, np.ndarray]]) -> tuple[Tensor, np.ndarray]:
    t, a = pool[rng.integers(len(pool))]
    kind = rng.integers(5)
    if kind == 0:
        f, g = UNARY[rng.integers(len(UNARY))]
        return f(t), g(a).astype(np.float32)
    if kind == 1:
        same = [(u, b) for u, b in pool if _broadcasts(a.shape, b.shape)]
        u, b = same[rng.integers(len(same))]
        f, g = BINARY[rng.integers(len(BINARY))]
        return f(t, u), g(a, b).astype(np.float32)
    if kind == 2 and a.ndim:
        axis = int(rng.integers(a.ndim))
        if rng.integers(2):
            return t.sum(axis), a.sum(axis)
        return t.max(axis, keepdim=True), a.max(axis, keepdims=True)
    if kind == 3 and a.ndim:
        return t.reshape(*a.shape, 1).expand(*a.shape, 3), np.broadcast_to(a[..., None], (*a.shape, 3))
    return _movement(rng, t, a)


@pytest.mark.parametrize("seed", [pytest.param(s, marks=SLOW_ON_GPU if s >= 8 else ()) for s in range(25)])
def test_random_graph_matches_numpy(seed: int, device: str) -> None:
    rng = np.random.default_rng(seed)
    base = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4,), (2, 3, 4), ()]]
    pool = [(Tensor(a, device=device), a) for a in base]
    for _ in range(12):
        t, a = _step(rng, pool)
        if a.size == 0 or a.size > 4096:
            continue
        pool.append((t, a))
    outs = pool[len(base) :][-4:]
    Tensor.corealize([t for t, _ in outs])
    for t, a in outs:
        np.testing.assert_allclose(t.numpy(), a, rtol=1e-4, atol=1e-5, err_msg=f"seed {seed} on {device}")
