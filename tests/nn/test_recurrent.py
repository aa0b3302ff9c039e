"""nn.LSTM and nn.GRU: outputs, final states and every gradient vs torch.nn with copied weights (skipped without
torch), PyTorch's names, layouts and init, argument checks, and a schedule whose kernels do not grow with the sequence.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from specgrad import Tensor, nn
from specgrad.nn import get_state_dict
from specgrad.schedule import create_schedule

try:
    import torch
except ImportError:  # NOTE: torch is a test-only extra; torch comparisons skip without it
    torch = None


def randomize(layer: Any, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for t in get_state_dict(layer).values():
        t.assign(Tensor(rng.uniform(-0.5, 0.5, t.shape).astype(np.float32), device=t.device))


# (input size, hidden size, layers, bias, input shape (B, T), with an initial state)
CASES = {
    "training_sizes": (24, 32, 2, True, (4, 16), False),  # NOTE: large enough for the kernel optimiser to work on
    "initial_state": (4, 6, 2, True, (3, 7), True),
}


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_vs_torch_on_every_device(kind: str, dev: str) -> None:
    compare_with_torch(kind, (3, 5, 1, False, (2, 5), False))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_vs_torch(kind: str, case: tuple) -> None:
    """On the default device only: every step compiles kernels of its own, slow on an OpenCL device."""
    compare_with_torch(kind, case)


def compare_with_torch(kind: str, case: tuple) -> None:
    """Same weights, same input (and initial state): the output, the final state, the input's, the initial state's
    and every weight's gradient match torch.nn (batch_first=True)."""
    pytest.importorskip("torch")
    n_in, hidden, layers, bias, (b, t), with_state = case
    layer, tlayer = getattr(nn, kind)(n_in, hidden, layers, bias), getattr(torch.nn, kind)(n_in, hidden, layers, bias,
                                                                                         batch_first=True)  # fmt: skip
    randomize(layer)
    tlayer.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in get_state_dict(layer).items()})
    rng = np.random.default_rng(1)
    x_np = rng.uniform(-2, 2, (b, t, n_in)).astype(np.float32)
    states = [rng.uniform(-1, 1, (layers, b, hidden)).astype(np.float32) for _ in range(2 if kind == "LSTM" else 1)]
    x, tx = Tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    hx, thx = [Tensor(s, requires_grad=True) for s in states], [torch.tensor(s, requires_grad=True) for s in states]
    state = (hx[0] if kind == "GRU" else tuple(hx)) if with_state else None
    tstate = (thx[0] if kind == "GRU" else tuple(thx)) if with_state else None
    (out, final), (tout, tfinal) = layer(x, state), tlayer(tx, tstate)
    final, tfinal = (final, tfinal) if kind == "LSTM" else ((final,), (tfinal,))
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=1e-5, rtol=1e-4)
    for f, tf in zip(final, tfinal):
        np.testing.assert_allclose(f.numpy(), tf.detach().numpy(), atol=1e-5, rtol=1e-4)
    ws = [rng.standard_normal(a.shape).astype(np.float32) for a in (tout, *tfinal)]
    sum(((a * Tensor(w)).sum() for a, w in zip((out, *final), ws)), Tensor(0.0)).backward()
    sum((a * torch.from_numpy(w)).sum() for a, w in zip((tout, *tfinal), ws)).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-4, rtol=1e-3)
    if with_state:
        for h, th in zip(hx, thx):
            np.testing.assert_allclose(h.grad.numpy(), th.grad.numpy(), atol=1e-4, rtol=1e-3)
    tparams = dict(tlayer.named_parameters())
    for name, p in get_state_dict(layer).items():
        np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(), atol=1e-4, rtol=1e-3, err_msg=name)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_names_layouts_and_init_match_torch(kind: str) -> None:
    """PyTorch's state dict (names, shapes, order) and init U(-1/sqrt(hidden), 1/sqrt(hidden)) on every tensor."""
    pytest.importorskip("torch")
    Tensor.manual_seed(0)
    ours, theirs = getattr(nn, kind)(10, 64, 3), getattr(torch.nn, kind)(10, 64, 3, batch_first=True)
    state = get_state_dict(ours)
    assert [(k, tuple(v.shape)) for k, v in state.items()] == [(k, tuple(v.shape)) for k, v in
                                                               theirs.state_dict().items()]  # fmt: skip
    for name, t in state.items():
        v = t.numpy()
        assert t.requires_grad and 0.9 / 8 < np.abs(v).max() <= 1 / 8, name
        assert abs(v.std() - 1 / 8 / math.sqrt(3)) < 0.1 / 8, name


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_without_bias_there_are_no_bias_tensors(kind: str) -> None:
    assert list(get_state_dict(getattr(nn, kind)(3, 4, 2, bias=False))) == [
        "weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"]  # fmt: skip


def test_bad_arguments_and_inputs() -> None:
    with pytest.raises(TypeError, match="hidden_size must be an int"):
        nn.LSTM(3, 4.0)
    with pytest.raises(ValueError, match="num_layers must be at least 1"):
        nn.GRU(3, 4, 0)
    with pytest.raises(ValueError, match=r"expects a 3-d input"):
        nn.LSTM(3, 4)(Tensor.zeros(5, 3))
    with pytest.raises(ValueError, match=r"expects a \(B, T, 3\) input"):
        nn.GRU(3, 4)(Tensor.zeros(2, 5, 4))
    with pytest.raises(ValueError, match=r"initial state of shape \(2, 2, 4\)"):
        nn.GRU(3, 4, 2)(Tensor.zeros(2, 5, 3), Tensor.zeros(1, 2, 4))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_kernels_do_not_grow_with_the_sequence(kind: str) -> None:
    """The training graph's kernels grow linearly with T, not each of them: each step's state (and its gradient) is
    its own kernel, not re-inlined into every later step (without that, the largest kernel of an LSTM grows 4x from
    T=4 to T=16)."""
    layer = getattr(nn, kind)(4, 8, 2)

    def schedule(t: int) -> tuple[int, int]:
        x = Tensor.ones(2, t, 4, requires_grad=True)
        layer(x)[0].sum().backward()
        sched = create_schedule([x.grad.lazydata] + [p.grad.lazydata for p in get_state_dict(layer).values()])
        return len(sched), max(len(list(si.ast.lazyops())) for si in sched)

    (n4, big4), (n16, big16) = schedule(4), schedule(16)
    assert big16 < 1.5 * big4 and n16 < 8 * n4
