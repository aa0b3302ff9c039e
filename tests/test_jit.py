"""TinyJit: capture a step once, replay it with new inputs; identical results to running without it."""

from __future__ import annotations

import numpy as np
import pytest

from specgrad import Tensor, TinyJit, Variable
from specgrad.device import GlobalCounters
from specgrad.jit import JitError


def data(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_replay_uses_new_inputs(device: str) -> None:
    @TinyJit
    def f(a: Tensor, b: Tensor) -> Tensor:
        return (a @ b).relu().sum(1).realize()

    for i in range(5):
        a, b = data(i, 4, 3), data(i + 10, 3, 2)
        out = f(Tensor(a, device=device), Tensor(b, device=device))
        np.testing.assert_allclose(out.numpy(), np.maximum(a @ b, 0).sum(1), rtol=1e-5, atol=1e-6)
    assert f.cnt == 5 and f.items


def test_replay_runs_kernels_without_scheduling(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    @TinyJit
    def f(a: Tensor) -> Tensor:
        return (a * 2 + 1).exp().sum().realize()

    for i in range(2):
        f(Tensor(data(i, 8), device=device))
    import specgrad.realize

    def no_scheduling(*args: object) -> None:
        raise AssertionError("a replay scheduled a graph")

    x = Tensor(data(7, 8), device=device)
    GlobalCounters.reset()
    with monkeypatch.context() as patch:
        patch.setattr(specgrad.realize, "create_schedule", no_scheduling)
        out = f(x)
    assert GlobalCounters.kernel_count == len(f.items)
    x = x.numpy()
    np.testing.assert_allclose(out.numpy(), np.exp(x * 2 + 1).sum(), rtol=1e-5)


def train(device: str, steps: int, jit: bool) -> tuple[list[float], list[np.ndarray]]:
    Tensor.manual_seed(0)
    w1 = Tensor(data(1, 4, 8), device=device, requires_grad=True)
    w2 = Tensor(data(2, 8, 3), device=device, requires_grad=True)
    velocity = [Tensor.zeros(4, 8, device=device).contiguous().realize(),
                Tensor.zeros(8, 3, device=device).contiguous().realize()]  # fmt: skip

    def step(x: Tensor, y: Tensor) -> Tensor:
        with Tensor.train():
            loss = x.dot(w1).relu().dropout(0.2).dot(w2).sparse_categorical_crossentropy(y)
        w1.grad = w2.grad = None
        loss.backward()
        for w, v in zip((w1, w2), velocity):
            v.assign(v * 0.9 + w.grad)
            w.assign(w.detach() - v * 0.1)
        Tensor.corealize([w1, w2, *velocity])
        return loss.realize()

    run = TinyJit(step) if jit else step
    losses = []
    for i in range(steps):
        x = Tensor(data(100 + i, 16, 4), device=device)
        y = Tensor(np.random.default_rng(i).integers(0, 3, 16).astype(np.int32), device=device)
        losses.append(run(x, y).item())
    return losses, [w1.numpy(), w2.numpy()]


def test_ten_steps_with_jit_match_ten_without(device: str) -> None:
    losses, weights = train(device, 10, jit=False)
    jit_losses, jit_weights = train(device, 10, jit=True)
    assert losses == jit_losses
    for w, jw in zip(weights, jit_weights):
        np.testing.assert_array_equal(w, jw)
    assert losses[-1] < losses[0]


def test_shape_mismatch_is_a_clear_error(device: str) -> None:
    @TinyJit
    def f(a: Tensor) -> Tensor:
        return (a + 1).realize()

    for _ in range(3):
        f(Tensor.ones(4, device=device).contiguous().realize())
    with pytest.raises(JitError, match=r"input 0 was captured as shape \(4,\) float32.*passes shape \(5,\)"):
        f(Tensor.ones(5, device=device))
    with pytest.raises(JitError, match="int32"):
        f(Tensor.ones(4, dtype="int32", device=device))
    f.reset()
    assert f(Tensor.ones(5, device=device)).numpy().tolist() == [2.0] * 5


def test_views_and_lazy_inputs_are_taken_by_value(device: str) -> None:
    data_all = Tensor(np.arange(40, dtype=np.float32).reshape(10, 4), device=device).realize()

    @TinyJit
    def f(batch: Tensor) -> Tensor:
        return (batch * 2).sum(1).realize()

    for i in range(4):
        out = f(data_all[i * 2 : i * 2 + 2])  # a view at a new offset each call
        np.testing.assert_equal(out.numpy(), (np.arange(40).reshape(10, 4)[i * 2 : i * 2 + 2] * 2).sum(1))


def test_symbolic_dimension_replays_with_new_values(device: str) -> None:
    @TinyJit
    def f(a: Tensor) -> Tensor:
        return (a * 3).sum(1).realize()

    for n in (3, 5, 2, 7, 4):
        i = Variable("i", 1, 8).bind(n)
        x = np.arange(2 * n, dtype=np.float32).reshape(2, n)
        out = f(Tensor(x, device=device).reshape(2, i))
        np.testing.assert_equal(out.numpy(), (x * 3).sum(1))


def test_random_ops_draw_anew_on_each_replay(device: str) -> None:
    @TinyJit
    def f(a: Tensor) -> Tensor:
        return (a + Tensor.rand(64, device=device)).realize()

    outs = [f(Tensor.zeros(64, device=device).contiguous().realize()).numpy().copy() for _ in range(4)]
    assert all(not np.array_equal(outs[i], outs[i + 1]) for i in range(3))


def test_jit_on_a_method(device: str) -> None:
    class Model:
        def __init__(self) -> None:
            self.w = Tensor(data(3, 3, 3), device=device).realize()

        @TinyJit
        def __call__(self, x: Tensor) -> Tensor:
            return (x @ self.w).realize()

    m = Model()
    for i in range(3):
        x = data(i, 2, 3)
        np.testing.assert_allclose(m(Tensor(x, device=device)).numpy(), x @ m.w.numpy(), rtol=1e-5, atol=1e-6)
