"""The fusion contract: how many kernels a graph becomes. These counts must hold on every device."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from helpers import SLOW_ON_GPU

from specgrad import Device, Tensor
from specgrad.ops import BufferOps, LoadOps, ReduceOps
from specgrad.realize import run_schedule
from specgrad.schedule import create_schedule


@pytest.fixture(autouse=True)
def on_each_device(device: str) -> Iterator[None]:
    """Every contract below holds, with the same kernel counts, on every device."""
    before = Device.DEFAULT
    Device.DEFAULT = device
    yield
    Device.DEFAULT = before


def realized(*shape: int, seed: int = 0) -> Tensor:
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).realize()


def check_schedule(t: Tensor | list[Tensor], allowed: int) -> list:
    """Schedule `t`, assert the kernel count, run it, and return the schedule."""
    outs = t if isinstance(t, list) else [t]
    sched = create_schedule([x.lazydata for x in outs])
    kernels = [si for si in sched if si.ast.op not in LoadOps]
    assert len(kernels) == allowed, f"expected {allowed} kernels, got {len(kernels)}: {[si.ast.op for si in sched]}"
    run_schedule(sched)
    return kernels


def test_elementwise_chain_is_one_kernel() -> None:
    a, b, c = realized(4, 4, seed=1), realized(4, 4, seed=2), realized(4, 4, seed=3)
    out = (a * b + c).relu()
    check_schedule(out, 1)
    np.testing.assert_allclose(out.numpy(), np.maximum(a.numpy() * b.numpy() + c.numpy(), 0), rtol=1e-6)


def test_elementwise_into_reduce_is_one_kernel() -> None:
    x = realized(8, 8)
    out = (x * 2).sum()
    check_schedule(out, 1)
    np.testing.assert_allclose(out.numpy(), (x.numpy() * 2).sum(), rtol=1e-5)


def test_reduce_then_elementwise_is_one_kernel() -> None:
    x = realized(8, 8)
    out = x.sum() + 1
    (kernel,) = check_schedule(out, 1)
    assert any(op.op in ReduceOps for op in kernel.ast.lazyops())
    np.testing.assert_allclose(out.numpy(), x.numpy().sum() + 1, rtol=1e-5)


def test_reduce_with_keepdim_reshape_fuses() -> None:
    x = realized(4, 6)
    out = (x.sum(axis=1) * 3).relu()
    check_schedule(out, 1)
    np.testing.assert_allclose(out.numpy(), np.maximum(x.numpy().sum(1) * 3, 0), rtol=1e-5)


def test_matmul_is_one_kernel() -> None:
    a, b = realized(4, 8, seed=1), realized(8, 3, seed=2)
    out = a @ b
    check_schedule(out, 1)
    np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-6)


def test_matmul_with_bias_and_relu_is_one_kernel() -> None:
    a, w, bias = realized(4, 8, seed=1), realized(8, 3, seed=2), realized(3, seed=3)
    out = (a @ w + bias).relu()
    check_schedule(out, 1)
    np.testing.assert_allclose(out.numpy(), np.maximum(a.numpy() @ w.numpy() + bias.numpy(), 0), rtol=1e-5, atol=1e-6)


def test_softmax_is_at_most_three_kernels() -> None:
    x = realized(4, 10)
    out = x.softmax(-1)
    kernels = check_schedule(out, 3)
    assert len(kernels) <= 3
    e = np.exp(x.numpy() - x.numpy().max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_two_reduces_are_two_kernels() -> None:
    x = realized(4, 4)
    out = x.sum(1).max()
    check_schedule(out, 2)
    np.testing.assert_allclose(out.numpy(), x.numpy().sum(1).max(), rtol=1e-5)


def test_movement_ops_fold_into_loads() -> None:
    a, b = realized(4, 6, seed=1), realized(6, 4, seed=2)
    out = (a.permute(1, 0) + b).reshape(24)[::2].flip(0)
    check_schedule(out, 1)
    np.testing.assert_allclose(out.numpy(), (a.numpy().T + b.numpy()).reshape(24)[::2][::-1], rtol=1e-6)


def test_permute_of_unrealized_elementwise_fuses() -> None:
    a = realized(4, 6)
    out = ((a + 1).permute(1, 0) * 2).contiguous()
    check_schedule(out, 1)
    np.testing.assert_allclose(out.numpy(), (a.numpy() + 1).T * 2, rtol=1e-6)


def test_pad_through_safe_op_fuses() -> None:
    a = realized(3, 3)
    out = a.relu().pad(((1, 1), (1, 1))) + 1
    check_schedule(out, 1)
    np.testing.assert_allclose(out.numpy(), np.pad(np.maximum(a.numpy(), 0), 1) + 1, rtol=1e-6)


@pytest.mark.parametrize(
    "fn", [lambda a: a.exp(), lambda a: a.reciprocal(), lambda a: 1 / (a.abs() + 1), lambda a: a.log()]
)
def test_pad_through_unsafe_op_realizes_first(fn) -> None:
    a = Tensor(np.random.default_rng(0).uniform(0.5, 2, (3, 3)).astype(np.float32)).realize()
    out = fn(a).pad(((1, 1), (1, 1))) + 1
    check_schedule(out, 2)
    np.testing.assert_allclose(out.numpy(), np.pad(fn(a).numpy(), 1) + 1, rtol=1e-5)


def test_expand_of_unrealized_elementwise_realizes_it() -> None:
    a, b = realized(4, 1, seed=1), realized(4, 5, seed=2)
    out = a.exp().expand(4, 5) * b
    check_schedule(out, 2)
    np.testing.assert_allclose(out.numpy(), np.exp(a.numpy()) * b.numpy(), rtol=1e-5)


def test_identical_subgraphs_are_deduplicated() -> None:
    a, b = realized(4, seed=1), realized(4, seed=2)
    x, y = (a + b).exp(), (a + b).exp()
    assert x.lazydata is y.lazydata
    check_schedule(x * y, 1)


def test_shared_subgraph_with_two_outputs() -> None:
    a = realized(4, 4)
    s = a.sum(1)
    out1, out2 = s + 1, s * 2
    check_schedule([out1, out2], 3)
    np.testing.assert_allclose(out1.numpy(), a.numpy().sum(1) + 1, rtol=1e-5)
    np.testing.assert_allclose(out2.numpy(), a.numpy().sum(1) * 2, rtol=1e-5)


def test_constants_fold() -> None:
    a = realized(4)
    assert (a * 1).lazydata is a.lazydata
    assert (a + 0).lazydata is a.lazydata
    two = Tensor.ones(4) + Tensor.ones(4)
    assert two.lazydata.is_unrealized_const() and two.lazydata.const_value() == 2
    check_schedule(two, 1)
    np.testing.assert_equal(two.numpy(), np.full(4, 2, dtype=np.float32))


def test_realized_tensor_schedules_nothing() -> None:
    a = realized(4)
    assert create_schedule([a.lazydata]) == []


def test_schedule_is_in_dependency_order() -> None:
    a = realized(4, 4)
    out = (a.sum(1, keepdim=True).exp().expand(4, 4) * a).sum()
    sched = create_schedule([out.lazydata])
    outs_so_far: set = set()
    for si in sched:
        for x in si.inputs:
            assert x.realized is not None or x in outs_so_far
        outs_so_far.add(si.out)
    run_schedule(sched)
    ref = (np.exp(a.numpy().sum(1, keepdims=True)) * a.numpy()).sum()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5)


def test_kernel_ast_ends_in_store_with_loads() -> None:
    a, b = realized(3, 3, seed=1), realized(3, 3, seed=2)
    sched = create_schedule([(a + b).lazydata])
    (si,) = sched
    assert si.ast.op is BufferOps.STORE and si.ast.arg.idx == 0
    loads = [x for x in si.ast.lazyops() if x.op is BufferOps.LOAD]
    assert sorted(x.arg.idx for x in loads) == [1, 2]
    assert si.inputs == (a.lazydata, b.lazydata)


def test_backward_graph_schedules_and_matches() -> None:
    x = Tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    w = Tensor(np.random.default_rng(1).standard_normal((4, 2)).astype(np.float32), requires_grad=True)
    (x @ w).relu().sum().backward()
    mask = (x.numpy() @ w.numpy() > 0).astype(np.float32)
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ mask, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), mask @ w.numpy().T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [2**10, 2**20], ids=["one-kernel", "split-reduce"])
def test_deep_chain_reading_each_value_twice_schedules_in_linear_time(n: int) -> None:
    """x = x*x*0.001 + x reads x three times per step: the ast is a DAG of 2**40 paths at 40 steps. Hashing the
    nested tree or rewriting it without sharing (the split reduce, packing) never finished."""
    x0 = np.random.default_rng(0).random(n).astype(np.float32)
    x, want = Tensor(x0, device="CPU"), x0.astype(np.float64)
    for _ in range(40):
        x, want = x * x * 0.001 + x, want * want * 0.001 + want
    np.testing.assert_allclose(x.sum().numpy(), want.sum(), rtol=1e-4)


def _multi_view_reads_in_reduces(sched: list) -> int:
    return sum(len(x.arg.st.views) > 1 for si in sched for r in si.ast.lazyops() if r.op in ReduceOps
               for x in r.src[0].lazyops() if x.op is BufferOps.LOAD)  # fmt: skip


def test_heads_joined_into_channels_are_copied_once_for_every_matmul_reading_them() -> None:
    """(B, H, T, D) -> (B, T, H*D) is no strided view: a matmul reading it would index with divisions and modulos
    in its inner loop. The scheduler copies it once into that layout (what MultiHeadAttention's .contiguous() did by
    hand), and the forward matmul and the weight gradient both read the copy."""
    b, h, t, d = 2, 4, 16, 8
    y_np = np.random.default_rng(0).standard_normal((b, h, t, d)).astype(np.float32)
    w_np = np.random.default_rng(1).standard_normal((h * d, 24)).astype(np.float32)
    y, w = Tensor(y_np, requires_grad=True), Tensor(w_np, requires_grad=True)
    (y.transpose(1, 2).reshape(b, t, h * d) @ w).square().sum().backward()
    sched = create_schedule([y.grad.lazydata, w.grad.lazydata])
    assert _multi_view_reads_in_reduces(sched) == 0
    copies = [si for si in sched if si.ast.op is BufferOps.STORE and si.ast.src[0].op is BufferOps.LOAD
              and si.inputs[0] is y.lazydata.base]  # fmt: skip
    assert len(copies) == 1, "one copy of the joined heads serves the forward matmul and the weight gradient"
    run_schedule(sched)
    joined = y_np.transpose(0, 2, 1, 3).reshape(b, t, h * d).astype(np.float64)
    g = 2 * joined @ w_np
    np.testing.assert_allclose(w.grad.numpy(), joined.reshape(-1, h * d).T @ g.reshape(-1, 24), rtol=1e-4, atol=1e-3)
    want_y = (g @ w_np.T).reshape(b, t, h, d).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(y.grad.numpy(), want_y, rtol=1e-4, atol=1e-3)


def test_multi_view_read_outside_a_repeating_reduce_is_left_alone() -> None:
    """A plain sum of the joined heads reads each element once: a copy would only add a pass."""
    y = realized(2, 4, 16, 8)
    kernels = check_schedule(y.transpose(1, 2).reshape(2, 16, 32).sum(-1), 1)
    assert len(kernels) == 1


def test_multi_head_attention_trains_with_no_strided_fallback_in_its_matmuls() -> None:
    from specgrad import nn

    Tensor.manual_seed(0)
    m = nn.MultiHeadAttention(32, 4, causal=True)
    x = Tensor.randn(2, 8, 32, requires_grad=True)
    m(x).square().mean().backward()
    grads = [x.grad, m.in_proj_weight.grad, m.out_proj.weight.grad]
    assert _multi_view_reads_in_reduces(create_schedule([g.lazydata for g in grads])) == 0


# *** reads through padding ***


def _masked_reads_in_reduces(sched: list) -> int:
    return sum(
        1
        for si in sched
        if any(isinstance(x.op, ReduceOps) for x in si.ast.lazyops())
        for x in si.ast.lazyops()
        if x.op is BufferOps.LOAD and any(v.mask is not None for v in x.arg.st.views)
    )


def _conv_np(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, w.shape[2:], axis=(2, 3))  # (N, C, H, W, kh, kw)
    return np.einsum("nchwij,ocij->nohw", windows, w.astype(np.float64))


def test_a_padded_convolution_reads_its_input_from_one_padded_copy() -> None:
    """Every output channel reads the padded input again: the pad is copied once (zeros included), so the
    convolution's loads carry no bounds checks and can be vector loads."""
    x, w = realized(2, 3, 16, 16), realized(8, 3, 3, 3, seed=1)
    out = x.conv2d(w, padding=1)
    kernels = check_schedule(out, 2)
    assert _masked_reads_in_reduces(kernels) == 0
    np.testing.assert_allclose(out.numpy(), _conv_np(x.numpy(), w.numpy(), 1), rtol=1e-5, atol=1e-5)


def test_a_read_once_through_a_pad_is_left_alone() -> None:
    """A plain sum of a padded tensor reads each element once: a copy would only add a pass."""
    x = realized(8, 8)
    kernels = check_schedule(x.pad(((0, 0), (2, 2))).sum(-1), 1)
    assert _masked_reads_in_reduces(kernels) == 1


def test_convolution_gradients_share_the_padded_copy() -> None:
    """The forward convolution and the weight gradient read the input through the same pad: one copy serves both,
    and the gradients are right."""
    x, w = Tensor(realized(2, 4, 12, 12).numpy(), requires_grad=True), Tensor(realized(6, 4, 3, 3, seed=1).numpy(),
                                                                            requires_grad=True)  # fmt: skip
    g = realized(2, 6, 12, 12, seed=2)
    out = x.conv2d(w, padding=1)
    (out * g).sum().backward()
    assert w.grad is not None and x.grad is not None
    sched = create_schedule([out.lazydata, w.grad.lazydata])
    pad_copies = [si for si in sched if si.ast.op is BufferOps.STORE and si.out.shape == (2, 4, 14, 14)]
    assert len(pad_copies) == 1 and _masked_reads_in_reduces(sched) == 0
    run_schedule(sched)
    xn, wn, gn = x.numpy().astype(np.float64), w.numpy().astype(np.float64), g.numpy().astype(np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3),
                                                       axis=(2, 3))  # fmt: skip
    np.testing.assert_allclose(w.grad.numpy(), np.einsum("nchwij,nohw->ocij", windows, gn), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.numpy(), _conv_np(xn, wn, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride, reduces", [(1, 1), (2, 4), pytest.param(3, 9, marks=SLOW_ON_GPU)])
def test_a_convolution_input_gradient_is_dense_reduces(stride: int, reduces: int) -> None:
    """The input gradient is a transposed convolution, one stride-1 reduce per stride phase, reading the output
    gradient unmasked: no col2im scatter, and no multiply spent on zeros put between the strided gradients."""
    x = Tensor(realized(2, 4, 12, 12).numpy(), requires_grad=True)
    w = Tensor(realized(6, 4, 3, 3, seed=1).numpy(), requires_grad=True)
    out = x.conv2d(w, stride=stride, padding=1)
    g = realized(*out.shape, seed=2)
    out.backward(g)
    assert x.grad is not None
    sched = create_schedule([x.grad.lazydata])
    assert sum(1 for si in sched if any(isinstance(y.op, ReduceOps) for y in si.ast.lazyops())) == reduces
    assert _masked_reads_in_reduces(sched) == 0
    run_schedule(sched)
    wn, gn = w.numpy().astype(np.float64), g.numpy().astype(np.float64)
    dxp = np.zeros((2, 4, 14, 14))  # NOTE: the scatter form: each window's gradient added back where it read
    o = out.shape[2]
    for i, j in np.ndindex(3, 3):
        dxp[:, :, i : i + stride * (o - 1) + 1 : stride, j : j + stride * (o - 1) + 1 : stride] += np.einsum(
            "nohw,oc->nchw", gn, wn[:, :, i, j]
        )
    np.testing.assert_allclose(x.grad.numpy(), dxp[:, :, 1:-1, 1:-1], rtol=1e-5, atol=1e-5)


def test_a_strided_convolution_reads_rows_contiguously() -> None:
    """A stride-2 convolution is folded into a stride-1 one over phase channels (space to depth), and the scheduler
    copies the folded layout once: the reduce reads each input row with stride 1 along the output row, as a vector
    load does, not 2 apart."""
    x, w = realized(2, 4, 32, 32), realized(8, 4, 3, 3, seed=1)
    out = x.conv2d(w, stride=2, padding=1)
    sched = create_schedule([out.lazydata])
    (reduce,) = [si for si in sched if any(isinstance(y.op, ReduceOps) for y in si.ast.lazyops())]
    row = max(i for i, size in enumerate(reduce.out.shape) if size > 1)  # NOTE: the output row's axis
    loads = [y for y in reduce.ast.lazyops() if y.op is BufferOps.LOAD]
    assert all(len(y.arg.st.views) == 1 and y.arg.st.views[0].mask is None for y in loads)
    assert sorted(y.arg.st.views[0].strides[row] for y in loads) == [0, 1]  # the weight, then the input
    run_schedule(sched)
    np.testing.assert_allclose(out.numpy(), _conv_np(x.numpy(), w.numpy(), 1)[:, :, ::2, ::2], rtol=1e-5, atol=1e-5)
