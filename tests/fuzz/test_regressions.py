"""Named regression tests for mismatches the differential fuzzer found, each with its minimal graph.

A known engine bug stays `xfail(strict=True)` until fixed, so the fix turns it into an unexpected pass to un-mark;
the fixed ones below are plain tests.
"""

from __future__ import annotations

import numpy as np

from specgrad import Tensor
from tests.fuzz.graphs import Graph, Node, mismatch


def test_sigmoid_log_softmax_gradient_is_finite_on_clang(clang: None) -> None:
    """The gradient of sigmoid().log_softmax(-1) was NaN on CLANG for a row holding 2.486883 (width >= 32): the max's
    backward compared x with a max computed from a sigmoid recomputed in another kernel with other rounding, so no
    element matched (0/0). softmax's max now takes no gradient."""
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 2.486883
    t = Tensor(x, device="CLANG", requires_grad=True)
    t.sigmoid().log_softmax(-1).sum().backward()
    assert np.isfinite(t.grad.numpy()).all(), t.grad.numpy()


def test_fuzz_seed_10177_sigmoid_log_softmax_on_clang(clang: None) -> None:
    g = Graph((Node("input", (), ((3, 1, 7, 48), 1.0)), Node("sigmoid", (0,)), Node("log_softmax", (1,), (3,))), seed=0)
    assert mismatch(g, "CLANG") is None


def test_softmax_then_max_over_axis_0_has_the_float64_gradient_on_clang(clang: None) -> None:
    """Issue 29: the max's backward compared a softmax recomputed lane by lane (libm's exp2f) with the forward's max,
    computed on vectors (the polynomial): no element matched and the gradient was 0/0. Seed 10040 of the slow tier."""
    g = Graph((Node("input", (), ((31, 7, 16), 1.0)), Node("pool", (0,), ("softmax", "max", 0, False))), seed=1)
    assert mismatch(g, "CLANG") is None


def test_a_reduce_seen_through_a_flip_and_directly_is_not_fused(device: str) -> None:
    """Fuzz seeds 10405 and 10442 (slow tier, 8 ops): the gradient of x.flip(0) / (x * x + 1) @ w sums two paths
    from one reduce, one through the flip. They met at one kernel at different depths, the later one's view won, and
    building the kernel raised "internal fusion error"; now a kernel that sees a reduce through two views reads it
    from memory."""
    g = Graph((Node("input", (), ((2, 1), 1.0)), Node("flip", (0,), (0,)), Node("div", (1, 0)),
               Node("input", (), ((1, 2), 1.0)), Node("matmul", (2, 3))), seed=0)  # fmt: skip
    assert mismatch(g, device) is None
