"""Tensor.assign writes into the existing buffer, and every value still reading the old contents sees them."""

from __future__ import annotations

import numpy as np

from specgrad import Tensor


def test_assign_keeps_the_buffer(device: str) -> None:
    w = Tensor(np.arange(6, dtype=np.float32), device=device).realize()
    buf = w.lazydata.base.realized
    for _ in range(3):
        w.assign(w * 2 - 1).realize()
    assert w.lazydata.base.realized is buf
    np.testing.assert_equal(w.numpy(), ((np.arange(6) * 2 - 1) * 2 - 1) * 2 - 1)


def test_readers_of_the_old_value_run_before_the_write(device: str) -> None:
    w = Tensor(np.arange(4, dtype=np.float32), device=device).realize()
    old_times_two = w * 2  # lazy: reads the buffer w is about to overwrite
    w.assign(w + 10).realize()
    np.testing.assert_equal(old_times_two.numpy(), np.arange(4) * 2)
    np.testing.assert_equal(w.numpy(), np.arange(4) + 10)


def test_assign_of_a_permuted_read_is_correct(device: str) -> None:
    w = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device).realize()
    buf = w.lazydata.base.realized
    w.assign(w.flip(1) + w).realize()
    assert w.lazydata.base.realized is buf
    np.testing.assert_equal(w.numpy(), np.arange(6).reshape(2, 3)[:, ::-1] + np.arange(6).reshape(2, 3))


def test_one_kernel_reading_old_and_new_values(device: str) -> None:
    w = Tensor(np.ones(3, dtype=np.float32), device=device).realize()
    old = w * 3
    w.assign(w + 1)
    both = old + w  # reads the old contents (through old) and the new (through w) in one kernel
    np.testing.assert_equal(both.numpy(), np.full(3, 5.0))
    np.testing.assert_equal(w.numpy(), np.full(3, 2.0))


def test_assign_on_unrealized_tensor_is_plain_replacement(device: str) -> None:
    w = Tensor.ones(3, device=device) * 2
    w.assign(w + 1)
    np.testing.assert_equal(w.numpy(), np.full(3, 3.0))


def test_inplace_operators(device: str) -> None:
    w = Tensor(np.ones(3, dtype=np.float32), device=device).realize()
    buf = w.lazydata.base.realized
    w += 2
    w *= 3
    w.realize()
    assert w.lazydata.base.realized is buf
    np.testing.assert_equal(w.numpy(), np.full(3, 9.0))


def test_views_made_twice_do_not_stop_in_place_assign(device: str) -> None:
    # NOTE: an evaluation between two training steps builds the same views of the weights again (the lazy cache hands
    # out the first ones): the next assign must still write into the weights' own buffer, or a TinyJit capture
    # records a write into a new buffer and its replays no longer update the weights
    w = Tensor(np.arange(6, dtype=np.float32), device=device).realize()
    buf = w.lazydata.base.realized
    first, again = w.reshape(2, 3).T, w.reshape(2, 3).T
    assert again.lazydata is first.lazydata
    w.assign(w + 1).realize()
    assert w.lazydata.base.realized is buf
    np.testing.assert_equal(first.numpy(), np.arange(6).reshape(2, 3).T + 1)


def test_a_base_handed_out_twice_is_not_assigned_in_place(device: str) -> None:
    a = Tensor([1.0, 2.0], device=device).contiguous()
    b = Tensor([1.0, 2.0], device=device).contiguous()
    a.realize()
    b.assign(b + 1).realize()
    np.testing.assert_equal(a.numpy(), [1.0, 2.0])
    np.testing.assert_equal(b.numpy(), [2.0, 3.0])


def test_values_fused_into_the_step_are_read_as_before_it(dev: str) -> None:
    """A loss, the model's output and a gradient, realized after opt.step(), are what they were before it: each is
    fused into the step's kernels (the loss into its own gradient) and reads the weights the step overwrites, so the
    step stores them first. Before, the loss came out computed with the updated bias (issue 29's bench rows)."""
    from specgrad.nn import Linear
    from specgrad.nn.optim import SGD
    from specgrad.nn.state import get_parameters

    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    l1, l2 = Linear(8, 16), Linear(16, 4)
    x, y = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((5, 8), (5, 4)))
    opt = SGD(get_parameters([l1, l2]), lr=0.5)

    def forward() -> tuple[Tensor, Tensor]:
        out = l2(l1(x).gelu())
        loss = ((out - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        return out, loss

    out, loss = forward()
    want = [t.numpy() for t in (out, loss, l1.weight.grad, l2.bias.grad)]
    out, loss = forward()
    opt.step()
    got = [t.numpy() for t in (out, loss, l1.weight.grad, l2.bias.grad)]
    for name, g, w in zip(("output", "loss", "l1.weight.grad", "l2.bias.grad"), got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7, err_msg=f"{name} after the step")
    assert not np.allclose(l2(l1(x).gelu()).numpy(), want[0], atol=1e-3), "the step changed nothing"
