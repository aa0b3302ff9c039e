"""Edges a Tensor library must handle (issue 13): zero-size tensors through ops and gradients, deep graphs, and
semantics and misuse errors that match numpy/torch. Every test runs on each device via the `device` fixture."""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import pytest

from specgrad import Tensor

try:
    import torch
except ImportError:  # NOTE: torch is a test-only extra: its comparisons are skipped without it
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def grads(fn: Callable, *arrays: np.ndarray, device: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """fn's forward value and the gradients of sum(fn(...)) for every input."""
    ts = [Tensor(a, device=device, requires_grad=True) for a in arrays]
    out = fn(*ts)
    value = out.numpy()
    out.sum().backward()
    return value, [t.grad.numpy() if t.grad is not None else np.zeros_like(a) for t, a in zip(ts, arrays)]


# *** zero-size tensors: (forward vs numpy, gradient shapes) ***

E = np.zeros((0, 3), np.float32)
ZERO_SIZE_CASES: list[tuple[str, tuple[np.ndarray, ...], Callable, Callable]] = [
    ("add", (E, E), lambda a, b: a + b, lambda a, b: a + b),
    ("exp", (E,), lambda a: a.exp(), np.exp),
    ("mul_scalar", (E,), lambda a: a * 2 + 1, lambda a: a * 2 + 1),
    ("where", (E, E), lambda a, b: (a < b).where(a, b), lambda a, b: np.where(a < b, a, b)),
    ("sum", (E,), lambda a: a.sum(), lambda a: a.sum()),
    ("sum_axis0", (E,), lambda a: a.sum(0), lambda a: a.sum(0)),
    ("sum_axis1", (E,), lambda a: a.sum(1), lambda a: a.sum(1)),
    ("max_axis1", (E,), lambda a: a.max(1), lambda a: a.max(1)),
    ("mean_axis1", (E,), lambda a: a.mean(1), lambda a: a.mean(1)),
    ("softmax", (E,), lambda a: a.softmax(-1), lambda a: a),
    ("cumsum", (E,), lambda a: a.cumsum(1), lambda a: a.cumsum(1)),
    ("reshape", (E,), lambda a: a.reshape(3, 0), lambda a: a.reshape(3, 0)),
    ("permute", (E,), lambda a: a.permute(1, 0), lambda a: a.transpose(1, 0)),
    ("expand", (np.zeros((0, 1), np.float32),), lambda a: a.expand(0, 4), lambda a: np.broadcast_to(a, (0, 4))),
    ("pad", (E,), lambda a: a.pad(((1, 1), (0, 0))), lambda a: np.pad(a, ((1, 1), (0, 0)))),
    ("shrink_to_nothing", (np.ones((3, 3), np.float32),), lambda a: a[1:1], lambda a: a[1:1]),
    ("flip", (E,), lambda a: a.flip(0), lambda a: a[::-1]),
    ("getitem", (E,), lambda a: a[:, 1], lambda a: a[:, 1]),
    ("matmul_K0", (np.zeros((2, 0), np.float32), E), lambda a, b: a @ b, lambda a, b: a @ b),
    ("matmul_M0", (E, np.ones((3, 2), np.float32)), lambda a, b: a @ b, lambda a, b: a @ b),
    ("cat_empty", (E, np.ones((2, 3), np.float32)), lambda a, b: a.cat(b), lambda a, b: np.concatenate([a, b])),
    ("cat_all_empty", (E, E), lambda a, b: a.cat(b, dim=1), lambda a, b: np.concatenate([a, b], 1)),
    ("stack_empty", (E, E), lambda a, b: Tensor.stack([a, b]), lambda a, b: np.stack([a, b])),
    (
        "pad2d_empty",
        (np.zeros((1, 1, 0, 3), np.float32),),
        lambda a: a.pad2d((1, 1, 1, 1)),
        lambda a: np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1))),
    ),  # fmt: skip
    ("repeat_empty", (E,), lambda a: a.repeat(2, 2), lambda a: np.tile(a, (2, 2))),
    ("repeat_zero_times", (np.ones((2, 3), np.float32),), lambda a: a.repeat(0, 2), lambda a: np.tile(a, (0, 2))),
]


@pytest.mark.parametrize("name,arrays,sg_fn,np_fn", ZERO_SIZE_CASES, ids=[c[0] for c in ZERO_SIZE_CASES])
def test_zero_size(name: str, arrays: tuple, sg_fn: Callable, np_fn: Callable, device: str) -> None:
    value, gs = grads(sg_fn, *arrays, device=device)
    want = np_fn(*arrays)
    assert value.shape == want.shape, f"{name} on {device}: shape {value.shape}, numpy {want.shape}"
    np.testing.assert_allclose(value, want, err_msg=f"{name} on {device}")
    for g, a in zip(gs, arrays):
        assert g.shape == a.shape, f"{name} on {device}: gradient shape {g.shape} for input {a.shape}"


@needs_torch
@pytest.mark.parametrize("name", ["matmul_K0", "cat_empty", "shrink_to_nothing", "sum_axis0"])
def test_zero_size_gradients_match_torch(name: str, device: str) -> None:
    _, arrays, sg_fn, _ = next(c for c in ZERO_SIZE_CASES if c[0] == name)
    _, gs = grads(sg_fn, *arrays, device=device)
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    sg_fn(*tt).sum().backward() if name != "cat_empty" else torch.cat(tt).sum().backward()
    for g, t in zip(gs, tt):
        np.testing.assert_allclose(g, t.grad.numpy(), err_msg=f"{name} on {device}: gradient vs torch")


def test_sum_of_empty_is_zero(device: str) -> None:
    assert Tensor.zeros(0, 3, device=device).sum().item() == 0
    assert Tensor.zeros(0, device=device).any().item() is False
    assert Tensor.zeros(0, device=device).all().item() is True


@pytest.mark.parametrize("fn", [lambda t: t.max(), lambda t: t.min(), lambda t: t.max(0), lambda t: t.argmax(0)])
def test_max_of_empty_raises_like_numpy(fn: Callable, device: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        fn(Tensor.zeros(0, 3, device=device))
    with pytest.raises(ValueError):
        np.zeros((0, 3)).max(0)


def test_cat_of_0d_raises_like_torch(device: str) -> None:
    a, b = Tensor(1.0, device=device), Tensor(2.0, device=device)
    with pytest.raises(ValueError, match="zero-dimensional"):
        a.cat(b)
    assert Tensor.stack([a, b]).numpy().tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):
        np.concatenate([np.float32(1.0), np.float32(2.0)])


def test_pad2d_and_repeat_with_gradients(device: str) -> None:
    x = np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3)
    value, (g,) = grads(lambda t: t.pad2d((1, 2, 0, 1)), x, device=device)
    np.testing.assert_allclose(value, np.pad(x, ((0, 0), (0, 0), (0, 1), (1, 2))))
    np.testing.assert_allclose(g, np.ones_like(x))
    value, (g,) = grads(lambda t: t.repeat(2, 1, 3, 4), x, device=device)
    np.testing.assert_allclose(value, np.tile(x, (2, 1, 3, 4)))
    np.testing.assert_allclose(g, np.full_like(x, 24))
    big = Tensor.ones(2, 3, device=device).repeat(50, 50)
    assert big.shape == (100, 150) and big.sum().item() == 15000


# *** deep graphs: no walk recurses with a graph's depth ***


@pytest.fixture
def low_recursion_limit() -> object:
    """Python's default limit, whatever a library may have raised it to: a deep graph must not need more."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(before)


def test_chain_of_10000_ops_realizes_and_backpropagates(device: str, low_recursion_limit: object) -> None:
    x0 = np.linspace(-1, 1, 4, dtype=np.float32)
    x = Tensor(x0, device=device, requires_grad=True)
    y, want = x, x0.astype(np.float64)
    for i in range(5000):  # 10,000 ops: mul and add alternate, no constant folds away
        y = y * 0.999 + (0.001 if i % 2 else -0.001)
        want = want * 0.999 + (0.001 if i % 2 else -0.001)
    y.sum().backward()
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 0.999**5000), rtol=1e-3)


def test_deep_chain_of_unary_ops(device: str, low_recursion_limit: object) -> None:
    x = Tensor(np.full(3, 0.5, np.float32), device=device, requires_grad=True)
    y = x
    for _ in range(2000):
        y = y.sin().relu()
    y.sum().backward()
    assert np.isfinite(y.numpy()).all() and np.isfinite(x.grad.numpy()).all()
