"""TinyJit: capture a step once, replay it with new inputs; identical results to running without it."""

from __future__ import annotations

from typing import Any

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
    with pytest.raises(JitError, match=r"'a' was captured as shape \(4,\) float32.*passes shape \(5,\).*reset"):
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


def test_a_symbolic_result_takes_each_calls_size(device: str) -> None:
    """The returned tensor's shape follows the call's Variable: captured at 5 rows, a replay with 8 returned (5, 48)."""
    w = np.random.default_rng(0).standard_normal((16, 12)).astype(np.float32)

    @TinyJit
    def f(a: Tensor, w: Tensor) -> Tensor:
        return (a @ w).relu().realize()

    for n in (3, 5, 8, 2, 7):
        x = np.arange(n * 16, dtype=np.float32).reshape(n, 16) / 50 - 1
        out = f(Tensor(x, device=device).reshape(Variable("i", 1, 8).bind(n), 16), Tensor(w, device=device))
        assert out.shape[0].val == n  # type: ignore[union-attr]
        np.testing.assert_allclose(out.numpy(), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


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


# ***** what a replay checks: every call the captured kernels cannot serve is a JitError, not a wrong result *****


def jit_const(device: str, *values: float) -> Tensor:
    return Tensor(np.array(values, dtype=np.float32), device=device).realize()


def test_non_tensor_argument_that_changes_is_an_error(device: str) -> None:
    @TinyJit
    def f(a: Tensor, scale: float, pads: tuple) -> Tensor:
        return (a * scale).pad(((pads[0], pads[1]),)).realize()

    for i in range(3):
        assert f(jit_const(device, i, 1), 2.0, (1, 0)).numpy().tolist() == [0, 2 * i, 2]
    with pytest.raises(JitError, match=r"argument 'scale' was 2\.0 in the captured call, this call passes 3\.0.*reset"):
        f(jit_const(device, 1, 1), 3.0, (1, 0))
    with pytest.raises(JitError, match=r"argument 'scale' was 2\.0 .* passes 2: "):  # an int is not the float
        f(jit_const(device, 1, 1), 2, (1, 0))
    with pytest.raises(JitError, match=r"argument 'pads\[1\]' was 0 .* passes 1"):
        f(jit_const(device, 1, 1), 2.0, (1, 1))
    with pytest.raises(JitError, match=r"captured argument 'scale' as a float, this call passes a Tensor"):
        f(jit_const(device, 1, 1), jit_const(device, 2), (1, 0))
    f.reset()
    assert f(jit_const(device, 1, 1), 3.0, (0, 1)).numpy().tolist() == [3, 3, 0]


def test_variable_argument_may_change(device: str) -> None:
    """A shape Variable is how a changing size reaches the kernels: passed as an argument, its value may change."""

    @TinyJit
    def f(a: Tensor, n: Variable) -> Tensor:
        return (a * 3).sum(1).realize()

    for n in (3, 5, 2, 4):
        i = Variable("i", 1, 8).bind(n)
        x = np.arange(2 * n, dtype=np.float32).reshape(2, n)
        np.testing.assert_equal(f(Tensor(x, device=device).reshape(2, i), i).numpy(), (x * 3).sum(1))
    with pytest.raises(JitError, match="argument 'n'"):
        f(Tensor(x, device=device).reshape(2, i), Variable("j", 1, 8).bind(4))


def test_method_jit_is_shared_by_instances(device: str) -> None:
    """A TinyJit in a class body captured one instance's weights: another instance is refused, not given them."""

    class Model:
        def __init__(self, w: float) -> None:
            self.w = jit_const(device, w, w)

        @TinyJit
        def __call__(self, x: Tensor) -> Tensor:
            return (x * self.w).realize()

    a, b = Model(2), Model(5)
    for _ in range(3):
        assert a(jit_const(device, 1, 2)).numpy().tolist() == [2, 4]
    with pytest.raises(JitError, match=r"argument 'self' was a Model object.*shared by all instances"):
        b(jit_const(device, 1, 2))


def test_keyword_arguments_in_any_order(device: str) -> None:
    @TinyJit
    def f(a: Tensor, b: Tensor, **extra: Tensor) -> Tensor:
        return (a - 2 * b + 10 * extra["c"]).realize()

    calls = [lambda a, b, c: f(a=a, b=b, c=c), lambda a, b, c: f(c=c, b=b, a=a), lambda a, b, c: f(a, c=c, b=b),
             lambda a, b, c: f(a, b, c=c), lambda a, b, c: f(b=b, a=a, c=c)]  # fmt: skip
    for i, call in enumerate(calls):
        a, b, c = jit_const(device, i), jit_const(device, 1), jit_const(device, i * i)
        assert call(a, b, c).numpy().tolist() == [i - 2 + 10 * i * i], f"call {i}"
    with pytest.raises(JitError, match=r"captured arguments \['a', 'b', 'c'\], this call passes \['a', 'b', 'd'\]"):
        f(a, b, d=c)


def test_tensors_in_lists_and_dicts_are_inputs(device: str) -> None:
    @TinyJit
    def f(xs: list, named: dict) -> Tensor:
        return (xs[0] * xs[1] + named["bias"]).realize()

    for i in range(4):
        out = f([jit_const(device, i), jit_const(device, 3)], {"bias": jit_const(device, 100 * i)})
        assert out.numpy().tolist() == [3 * i + 100 * i]
    with pytest.raises(JitError, match=r"captured arguments \['xs\[0\]', 'xs\[1\]', \"named\['bias'\]\"\]"):
        f([jit_const(device, 1)], {"bias": jit_const(device, 1)})


def test_replaced_captured_tensor_is_an_error(device: str) -> None:
    """A tensor reached through an attribute, replaced by a new Tensor object: a replay would read the old buffer."""

    class Model:
        def __init__(self) -> None:
            self.w = jit_const(device, 1, 1)

    m = Model()
    f = TinyJit(lambda x: (x * m.w).realize())
    for _ in range(3):
        assert f(jit_const(device, 1, 2)).numpy().tolist() == [1, 2]
    m.w = jit_const(device, 3, 3)
    with pytest.raises(JitError, match=r"replaced or deleted since the capture.*\.assign\(\).*reset"):
        f(jit_const(device, 1, 2))
    f.reset()
    for _ in range(3):
        assert f(jit_const(device, 1, 2)).numpy().tolist() == [3, 6]


def test_assign_to_captured_tensor_reaches_replays(device: str) -> None:
    """In place (assign), the documented way to change state a captured step reads: every replay sees the new value."""
    w = jit_const(device, 1, 1)
    f = TinyJit(lambda x: (x * w).realize())
    for i in range(6):
        w.assign(jit_const(device, i, 2 * i)).realize()
        assert f(jit_const(device, 1, 2)).numpy().tolist() == [i, 4 * i]
    assert f.cnt == 6


def test_state_replaced_inside_the_step_is_an_error(device: str) -> None:
    """Rebinding state in the step (instead of assigning into it) would replay from the captured call's value forever.
    Caught at capture when nothing else holds the old value, else at the first replay after the caller drops it."""
    state = {"h": jit_const(device, 0, 0)}

    def step(x: Tensor) -> Tensor:
        state["h"] = (state["h"] * 0.5 + x).realize()
        return (state["h"] * 1.5).realize()

    f = TinyJit(step)
    f(jit_const(device, 1, 1))
    with pytest.raises(JitError, match=r"read a tensor the previous call computed and then dropped it.*\.assign\(\)"):
        f(jit_const(device, 1, 1))
    assert f.cnt == 0  # an error at capture resets the jit

    g = TinyJit(lambda x: (state["h"].assign(state["h"] * 0.5 + x) * 1.5).realize())  # the same step, in place
    state["h"] = jit_const(device, 0, 0)
    for _ in range(5):
        g(jit_const(device, 1, 1))
    np.testing.assert_allclose(state["h"].numpy(), [2 - 2**-4] * 2)


def test_same_tensor_twice(device: str) -> None:
    @TinyJit
    def f(a: Tensor, b: Tensor) -> Tensor:
        return (a * 10 + b).realize()

    x = jit_const(device, 1)
    for _ in range(3):
        assert f(x, x).numpy().tolist() == [11]
    with pytest.raises(JitError, match=r"captured arguments 'a' and 'b' as one tensor and this call passes two"):
        f(jit_const(device, 1), jit_const(device, 2))
    f.reset()
    for i in range(3):
        assert f(jit_const(device, i), jit_const(device, 2)).numpy().tolist() == [10 * i + 2]
    y = jit_const(device, 4)
    assert f(y, y).numpy().tolist() == [44]  # captured as two: one tensor passed twice is served too


def test_input_assigned_in_place_is_replayed_into_the_new_input(device: str) -> None:
    @TinyJit
    def add_into(acc: Tensor, x: Tensor) -> Tensor:
        acc.assign(acc + x).realize()
        return (x * 2).realize()

    accs = [jit_const(device, 10 * i) for i in range(5)]
    for i, acc in enumerate(accs):
        assert add_into(acc, jit_const(device, i)).numpy().tolist() == [2 * i]
    assert [a.numpy().tolist() for a in accs] == [[11 * i] for i in range(5)]


@pytest.mark.parametrize(
    "fn", [lambda a: a, lambda a: (a[1:], (a * 2).realize()), lambda a: a.assign(a + 1).realize()],
    ids=["itself", "a_view", "assigned"],
)  # fmt: skip
def test_returning_an_input_is_an_error(fn: Any, device: str) -> None:
    """A replay returns the captured call's tensors: an argument returned would be the captured call's argument."""
    f = TinyJit(fn)
    with pytest.raises(JitError, match=r"returns its argument 'a'.*the captured call's 'a'"):
        f(jit_const(device, 1, 2))


def test_output_fed_back_as_input(device: str) -> None:
    """h = step(x, h): the input is the buffer the replay writes, so it is copied first (element i reads -1-i)."""
    step = TinyJit(lambda x, h: (h.flip(0) * 0.5 + x).realize())
    h, h_np = Tensor.zeros(16, device=device).contiguous().realize(), np.zeros(16, np.float32)
    for i in range(5):
        x_np = data(i, 16)
        h, h_np = step(Tensor(x_np, device=device), h), h_np[::-1] * 0.5 + x_np
        np.testing.assert_allclose(h.numpy(), h_np, rtol=1e-6, err_msg=f"step {i}")


def test_no_tensor_arguments(device: str) -> None:
    counter = Tensor.zeros(1, device=device).contiguous().realize()
    tick = TinyJit(lambda: counter.assign(counter + 1).realize())
    for _ in range(5):
        tick()
    assert counter.numpy().tolist() == [5]
    times = TinyJit(lambda n: counter.assign(counter * n).realize())
    for _ in range(3):
        times(2)
    assert counter.numpy().tolist() == [40]
    with pytest.raises(JitError, match="argument 'n' was 2"):
        times(3)


def test_non_tensor_return_is_an_error(device: str) -> None:
    f = TinyJit(lambda a: (a * 2).sum().item())
    with pytest.raises(JitError, match=r"returned a float \(as ret\).*\.item\(\)"):
        f(jit_const(device, 1, 2))
    g = TinyJit(lambda a: {"out": (a * 2).realize(), "n": a.shape[0]})
    with pytest.raises(JitError, match=r"returned a int \(as ret\['n'\]\)"):
        g(jit_const(device, 1, 2))
    h = TinyJit(lambda a: ((a * 2).realize(), None))
    for i in range(3):
        out, nothing = h(jit_const(device, i))
        assert out.numpy().tolist() == [2 * i] and nothing is None


def test_nothing_captured_is_an_error(device: str) -> None:
    f = TinyJit(lambda a: None)
    f(jit_const(device, 1))
    with pytest.raises(JitError, match="captured no kernels on call 2"):
        f(jit_const(device, 1))


def test_backward_through_a_replayed_output_is_an_error(device: str) -> None:
    """A replay builds no graph: differentiating its output raises instead of using the captured call's graph."""
    w = Tensor(data(1, 3), device=device, requires_grad=True).realize()
    f = TinyJit(lambda x: (x * w).realize())
    f(Tensor(data(2, 3), device=device)).sum().backward()  # call 1 ran for real: its graph is this call's
    np.testing.assert_allclose(w.grad.numpy(), data(2, 3))
    for i in range(2):
        with pytest.raises(ValueError, match="backward"):
            f(Tensor(data(3 + i, 3), device=device)).sum().backward()
