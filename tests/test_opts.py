"""Kernel opts: random legal opts applied to the kernels of random small graphs, compiled for CLANG and GPU and
compared with the same kernel on the CPU device; and the opts the rules pick for the kernels that matter most."""

from __future__ import annotations

import numpy as np
import pytest
from test_fuzz_graphs import _step

from specgrad import Tensor, dtypes
from specgrad.codegen.kernel import Kernel, Opt
from specgrad.codegen.linearizer import LinearizerOptions, linearize
from specgrad.codegen.opts import choose_opts, vector_width
from specgrad.device import Buffer, Device, DeviceUnavailable
from specgrad.lazy import LazyBuffer
from specgrad.ops import BufferOps, ScheduleItem
from specgrad.realize import run_schedule
from specgrad.schedule import create_schedule

# NOTE: twice the accumulators the rules ever pick (codegen/opts.py): more adds no case, only code (8*16*2 upcast
# outputs rendered 2,565 lines that PoCL took 90 s to build)
MAX_EXPANSION = 32


def random_opts(k: Kernel, rng: np.random.Generator, vector_bytes: int) -> list[Opt]:
    """Up to four opts that are legal for `k` on a device whose vectors hold up to `vector_bytes`: a split must divide
    its axis; VECTOR takes 2, 4, 8 or 16 lanes of a kernel whose ops and dtypes have a vector form, once, no wider than
    the device proved (PoCL without avx512f warns that float16 changes the ABI); UPCAST and UNROLL together expand
    the loop body up to MAX_EXPANSION times; INNER moves any output loop innermost."""
    opts: list[Opt] = []
    expansion = 1
    for _ in range(int(rng.integers(0, 5))):
        axes = [a for a in range(k.first_expanded) if isinstance(k.full_shape[a], int) and k.full_shape[a] > 1]
        if not axes:
            break
        axis = int(rng.choice(axes))
        if axis < k.first_reduce and rng.integers(5) == 0:
            opts.append(Opt("INNER", axis, 0))
            k = k.apply(opts[-1])
            continue
        size = k.full_shape[axis]
        vector = k.vector_axis is None and rng.integers(2) == 1
        amounts = [a for a in ((2, 4, 8, 16) if vector else (2, 3, 4, 8)) if size % a == 0]  # type: ignore[operator]
        if not amounts:
            continue
        amount = int(rng.choice(amounts))
        itemsize = k.ast.arg.dtype.itemsize
        if vector and (amount * itemsize > vector_bytes or vector_width(k, amount * itemsize) != amount):
            vector = False
        if not vector and (expansion := expansion * amount) > MAX_EXPANSION:
            break
        op = "VECTOR" if vector else "UPCAST" if axis < k.first_reduce else "UNROLL"
        opts.append(Opt(op, axis, amount))
        k = k.apply(opts[-1])
    return opts


def run_kernel(device: str, si: ScheduleItem, opts: list[Opt]) -> np.ndarray:
    """The kernel of `si` with `opts` on `device`, on copies of the inputs the CPU device computed."""
    dev = Device[device]
    prg = linearize(si.ast, dev.opts, opts)
    fxn = dev.runtime(prg, dev.compiler.compile_cached(dev.render(prg)))
    out = Buffer(device, si.out.st.size(), si.out.dtype)
    ins = [Buffer(device, x.realized.size, x.dtype).copyin(memoryview(x.realized.numpy())) for x in si.inputs]
    fxn([b._buf for b in [out, *ins]], {}, False)
    dev.synchronize()
    return out.numpy()


def random_graph(rng: np.random.Generator) -> list[LazyBuffer]:
    """Up to three outputs of 8 random ops (reduces over any axis, broadcasts, pads...) on CPU tensors."""
    base = [rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16,), (4, 8, 16), ()]]
    pool = [(Tensor(a, device="CPU").realize(), a) for a in base]
    for _ in range(8):
        t, a = _step(rng, pool)
        if 0 < a.size <= 8192:
            pool.append((t, a))
    return [(t * 1.5).lazydata for t, _ in pool[len(base) :][-3:]] or [(pool[0][0] * 1.5).lazydata]


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("target", ["CLANG", "GPU"])
def test_random_opts_match_the_cpu_device(seed: int, target: str) -> None:
    try:
        Device[target]
    except DeviceUnavailable as e:
        pytest.skip(f"{target} unavailable: {e}")
    rng = np.random.default_rng(seed)
    schedule = create_schedule(random_graph(rng))
    run_schedule(list(schedule))
    checked = 0
    for si in schedule:
        if si.ast.op is not BufferOps.STORE:
            continue
        opts = random_opts(Kernel.from_ast(si.ast), rng, Device[target].opts.vector_bytes)
        want = si.out.realized.numpy()
        got = run_kernel(target, si, opts)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"seed {seed}, opts {opts}")
        checked += 1
    assert checked


def kernel_of(t: Tensor) -> Kernel:
    (ast,) = [si.ast for si in create_schedule([t.lazydata]) if si.ast.op is BufferOps.STORE]
    return Kernel.from_ast(ast)


C_TARGET = LinearizerOptions(optimize=True, vector_bytes=64, threads=True)


def test_matmul_gets_vector_lanes_and_a_register_tile() -> None:
    a, b = Tensor.rand(64, 32, device="CPU").realize(), Tensor.rand(32, 48, device="CPU").realize()
    opts = choose_opts(kernel_of(a @ b), C_TARGET)
    assert opts[0] == Opt("VECTOR", 1, 16), "lanes along the output's contiguous axis, where b is contiguous too"
    assert any(o.op == "UPCAST" for o in opts), f"no register tile: {opts}"


def test_row_sum_vectorizes_its_reduce() -> None:
    x = Tensor.rand(8, 256, device="CPU").realize()
    assert choose_opts(kernel_of(x.sum(axis=1)), C_TARGET)[0] == Opt("VECTOR", 1, 16)


def test_where_with_a_comparison_vectorizes_but_bool_outputs_and_logic_stay_scalar() -> None:
    x = Tensor.rand(64, device="CPU").realize()
    assert Opt("VECTOR", 0, 16) in choose_opts(kernel_of((x < 0.5).where(x, 0.0)), C_TARGET)
    for scalar in [(x < 0.5), (x < 0.5).cast(dtypes.float32), ((x < 0.2) | (x > 0.8)).where(x, 1.0)]:
        assert all(o.op != "VECTOR" for o in choose_opts(kernel_of(scalar), C_TARGET)), scalar


def test_masked_where_matches_numpy(device: str) -> None:
    rng = np.random.default_rng(0)
    x_np, m_np = rng.standard_normal((8, 64)).astype(np.float32), rng.random((8, 64)) < 0.5
    x, m = Tensor(x_np, device=device), Tensor(m_np, device=device)
    np.testing.assert_array_equal(m.where(x * 2, -np.inf).numpy(), np.where(m_np, x_np * 2, -np.inf))
    np.testing.assert_array_equal((x < 0.1).where(x, x * 3).numpy(), np.where(x_np < 0.1, x_np, x_np * 3))
    np.testing.assert_array_equal(m[:, :1].where(x, 0.5).numpy(), np.where(m_np[:, :1], x_np, np.float32(0.5)))
    np.testing.assert_array_equal(m.T.contiguous().T.where(x, 0.5).numpy(), np.where(m_np, x_np, np.float32(0.5)))


def test_vector_opt_refused_where_there_is_no_vector_form() -> None:
    x = Tensor.rand(64, device="CPU").realize()
    ast = next(si.ast for si in create_schedule([(x < 0.5).lazydata]) if si.ast.op is BufferOps.STORE)
    with pytest.raises(ValueError, match="no vector form"):
        linearize(ast, C_TARGET, [Opt("VECTOR", 0, 16)])


def test_bad_split_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot apply"):
        kernel_of(Tensor.rand(10, device="CPU").realize() + 1).apply(Opt("UPCAST", 0, 4))


def test_large_matmul_packs_w_and_runs_the_panel_loop_outside() -> None:
    a, b = Tensor.rand(512, 512, device="CPU").realize(), Tensor.rand(512, 512, device="CPU").realize()
    asts = [si.ast for si in create_schedule([(a @ b).lazydata]) if si.ast.op is BufferOps.STORE]
    assert len(asts) == 2, "one kernel copies b into panels, one multiplies"
    opts = choose_opts(Kernel.from_ast(asts[-1]), C_TARGET)
    assert Opt("VECTOR", 2, 16) in opts and any(o.op == "INNER" for o in opts), opts


def test_packing_is_the_schedulers_decision_for_any_graph() -> None:
    """Not only Tensor.dot: a matmul written as broadcast-multiply-sum, einsum, or the weight gradient x.T @ g read
    their large column-walked operand from panels too (schedule.py); small or odd-sized ones are not packed."""
    a, b = Tensor.rand(512, 512, device="CPU").realize(), Tensor.rand(512, 512, device="CPU").realize()

    def kernels(t: Tensor) -> int:
        return sum(si.ast.op is BufferOps.STORE for si in create_schedule([t.lazydata]))

    assert kernels((a.reshape(512, 1, 512) * b.T.reshape(1, 512, 512)).sum(-1)) == 2
    assert kernels(Tensor.einsum("ij,jk->ik", a, b)) == 2
    assert kernels(a.T @ b) == 2, "x.T @ g, the weight gradient: g is walked by columns"
    assert kernels(a @ b.T) == 2, "b.T is walked along K by both operands: copied across into panels"
    assert kernels(a[:128] @ b) == 1, "128 rows do not repay the copy"
    assert kernels(a[:256, :256] @ b[:256, :256]) == 2, "a 256 matmul does: 87 -> 101 GFLOP/s at 1 thread"
    assert kernels(a @ b[:, :500]) == 1, "500 columns are no whole number of panels"
    x, w = Tensor.rand(1024, 128, device="CPU").realize(), Tensor.rand(512, 128, device="CPU").realize()
    assert kernels(x @ w.T) == 2, "nn.Linear's x @ w.T with a short K: w is copied across into panels"
    long_k = Tensor.rand(64, 4096, device="CPU").realize()
    assert kernels(long_k @ long_k[:512].T) == 2, "a long K (4096) is copied across too: 41 -> 66 GFLOP/s measured"
    assert kernels(a[:256, :128] @ b[:128, :256]) == 1, "a plain matmul's left operand is never packed across"
    rows = Tensor.rand(2048, 4096, device="CPU").realize()
    assert kernels(rows.sum(axis=1)) == 1, "a row sum walks K with stride 1 too, but has no second operand"
    assert kernels((rows * rows).sum(axis=1)) == 1, "nor does a product of one operand with itself along N"
    assert kernels(x[:64, :32] @ w[:64, :32].T) == 1, "too little work to repay a copy"


@pytest.mark.parametrize("rows, k, n", [(1024, 128, 512), (32, 256, 1024)], ids=["projection", "lstm_step"])
def test_linear_packs_its_weight_so_the_output_takes_the_vector_lanes(rows: int, k: int, n: int) -> None:
    """In nn.Linear's x @ w.T both operands walk K with stride 1: w is copied into panels along the output's
    contiguous axis, so the vector lanes go there. Packing x along its rows instead (it passed the size test first)
    left no axis for them: an LSTM step's h @ W_hh.T ran as scalar code at 11 GFLOP/s, 100 after."""
    x, w = Tensor.rand(rows, k, device="CPU").realize(), Tensor.rand(n, k, device="CPU").realize()
    items = [si for si in create_schedule([(x @ w.T).lazydata]) if si.ast.op is BufferOps.STORE]
    assert len(items) == 2 and items[0].inputs[0].realized is w.lazydata.base.realized, "w is the packed one"
    opts = choose_opts(Kernel.from_ast(items[-1].ast), C_TARGET)
    assert any(o.op == "VECTOR" for o in opts), opts


def test_transposed_operand_packed_matches_numpy(device: str) -> None:
    """x @ w.T with K = 128 (a transformer's projection) runs from panels copied across: forward and both gradients
    against float64 numpy."""
    rng = np.random.default_rng(1)
    x_np, w_np = rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((512, 128)).astype(np.float32)
    g_np = rng.standard_normal((256, 512)).astype(np.float32)
    x, w = Tensor(x_np, device=device, requires_grad=True), Tensor(w_np, device=device, requires_grad=True)
    out = x @ w.T
    out.backward(Tensor(g_np, device=device))
    assert x.grad is not None and w.grad is not None
    x64, w64, g64 = x_np.astype(np.float64), w_np.astype(np.float64), g_np.astype(np.float64)
    np.testing.assert_allclose(out.numpy(), x64 @ w64.T, rtol=1e-4, atol=1e-4 * np.sqrt(128))
    np.testing.assert_allclose(x.grad.numpy(), g64 @ w64, rtol=1e-4, atol=1e-4 * np.sqrt(512))
    np.testing.assert_allclose(w.grad.numpy(), g64.T @ x64, rtol=1e-4, atol=1e-4 * np.sqrt(256))


@pytest.mark.parametrize("shape", [(512, 512, 544), (2, 256, 512, 512)], ids=["2d", "batched"])
def test_packed_matmul_forward_and_backward_match_numpy(device: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    # shape: (*batch, rows, k, n); x is (*batch, rows, k), w is (k, n)
    x_np = rng.standard_normal(shape[:-1]).astype(np.float32)
    w_np = rng.standard_normal(shape[-2:]).astype(np.float32)
    x, w = Tensor(x_np, device=device, requires_grad=True), Tensor(w_np, device=device, requires_grad=True)
    out = x @ w
    out.sum().backward()
    k = shape[-2]
    np.testing.assert_allclose(out.numpy(), x_np @ w_np, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    ones = np.ones(out.shape, np.float32)
    np.testing.assert_allclose(x.grad.numpy(), ones @ w_np.T, rtol=1e-4, atol=1e-4 * np.sqrt(shape[-1]))
    want_w = x_np.reshape(-1, k).T @ ones.reshape(-1, shape[-1])
    np.testing.assert_allclose(w.grad.numpy(), want_w, rtol=1e-4, atol=1e-3 * np.sqrt(x_np.size // k))


def conv_kernels(x: Tensor, w: Tensor) -> list[Kernel]:
    """The reduce kernels of a padded 3x3 convolution's forward and of both its gradients."""
    x.requires_grad, w.requires_grad = True, True
    out = x.conv2d(w, padding=1)
    out.backward(Tensor.ones(*out.shape, device="CPU").contiguous())
    asts = [si.ast for si in create_schedule([out.lazydata, x.grad.lazydata, w.grad.lazydata])]  # type: ignore[union-attr]
    return [Kernel.from_ast(a) for a in asts if a.op is BufferOps.STORE and Kernel.from_ast(a).reduceop is not None]


def test_convolution_on_rows_no_vector_divides_takes_lanes_across_out_channels() -> None:
    # NOTE: 14-wide rows (a CNN's second layer): before, every one of these kernels ran scalar at 14 GFLOP/s
    x, w = Tensor.rand(4, 8, 14, 14, device="CPU").realize(), Tensor.rand(16, 8, 3, 3, device="CPU").realize()
    kernels = conv_kernels(x, w)
    assert len(kernels) == 3, [k.name() for k in kernels]
    for k in kernels:
        vector = [o for o in choose_opts(k, C_TARGET) if o.op == "VECTOR"]
        assert vector and vector[0].axis < k.first_reduce, f"{k.name()}: {choose_opts(k, C_TARGET)}"
        assert k.full_shape[vector[0].axis] in (8, 16), f"{k.name()}: lanes not across channels: {vector}"


def test_convolution_on_rows_a_vector_divides_keeps_contiguous_lanes() -> None:
    # NOTE: 28-wide rows take 4 float lanes along the row, contiguous loads and stores, before any channel lanes
    x, w = Tensor.rand(4, 1, 28, 28, device="CPU").realize(), Tensor.rand(8, 1, 3, 3, device="CPU").realize()
    forward = conv_kernels(x, w)[0]
    strides = forward.strides(0)
    (vector,) = [o for o in choose_opts(forward, C_TARGET) if o.op == "VECTOR"]
    assert strides[vector.axis] == 1, f"{forward.name()}: {choose_opts(forward, C_TARGET)}"


def test_a_weight_gradient_tiles_its_window_and_the_other_kernels_their_channels() -> None:
    # NOTE: the bench's 32x16x3x3 weight gradient: its 3x3 window as the register tile re-reads input rows from L1
    # (7.3 -> 4.5 ms at 1 thread); the forward and the input gradient keep the channel tile, measured faster there
    x, w = Tensor.rand(8, 16, 32, 32, device="CPU").realize(), Tensor.rand(32, 16, 3, 3, device="CPU").realize()
    forward, input_grad, weight_grad = conv_kernels(x, w)
    window = [a for a in range(weight_grad.first_reduce) if weight_grad.full_shape[a] == 3]
    assert [o for o in choose_opts(weight_grad, C_TARGET) if o.op == "UPCAST"] == [Opt("UPCAST", a, 3) for a in window]
    for k in (forward, input_grad):
        tiled = {o.axis for o in choose_opts(k, C_TARGET) if o.op == "UPCAST"}
        assert all(k.full_shape[a] in (8, 16, 32) for a in tiled), f"{k.name()}: {choose_opts(k, C_TARGET)}"


@pytest.mark.parametrize("shape", [(8, 8, 14, 14, 16), (4, 16, 7, 7, 32), (4, 1, 28, 28, 8)],
                         ids=["14-wide", "7-wide", "28-wide"])  # fmt: skip
def test_convolution_forward_and_gradients_match_numpy(device: str, shape: tuple[int, ...]) -> None:
    # NOTE: at the sizes where lanes go across channels, against float64 numpy's im2col
    from specgrad.bench import conv2d_grads_np, conv2d_np

    bs, cin, h, wd, cout = shape
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((bs, cin, h, wd)).astype(np.float32)
    w_np = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
    g_np = rng.standard_normal((bs, cout, h, wd)).astype(np.float32)
    x, w = Tensor(x_np, device=device, requires_grad=True), Tensor(w_np, device=device, requires_grad=True)
    out = x.conv2d(w, padding=1)
    out.backward(Tensor(g_np, device=device))
    x64, w64, g64 = (a.astype(np.float64) for a in (x_np, w_np, g_np))
    scale = np.sqrt(cin * 9)
    np.testing.assert_allclose(out.numpy(), conv2d_np(x64, w64), rtol=1e-4, atol=1e-5 * scale)
    dx, dw = conv2d_grads_np(x64, w64, g64)
    np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-4, atol=1e-5 * np.sqrt(cout * 9))  # type: ignore[union-attr]
    np.testing.assert_allclose(w.grad.numpy(), dw, rtol=1e-4, atol=1e-5 * np.sqrt(bs * h * wd))  # type: ignore[union-attr]


def test_register_tile_leaves_the_threads_a_loop_to_split() -> None:
    # NOTE: a layer norm's weight gradient: 128 outputs, each a sum over 1024 tokens. 16 lanes x an 8-wide tile left
    # the first output loop (the one threads split) one iteration long, so it ran on one thread
    x, g = Tensor.rand(16, 64, 128, device="CPU").realize(), Tensor.rand(16, 64, 128, device="CPU").realize()
    mean, rstd = Tensor.rand(16, 64, 1, device="CPU").realize(), Tensor.rand(16, 64, 1, device="CPU").realize()
    k = kernel_of(((x - mean) * rstd * g).sum(axis=(0, 1)))  # NOTE: mean and rstd do not move along the outputs
    for target in (C_TARGET, LinearizerOptions(optimize=True, vector_bytes=64)):
        tiled = k
        for opt in choose_opts(k, target):
            tiled = tiled.apply(opt)
        assert tiled.full_shape[0] >= (2 if target.threads else 1), (target, choose_opts(k, target))
    assert choose_opts(k, LinearizerOptions(optimize=True, vector_bytes=64))[1:3] == [
        Opt("UPCAST", 0, 4),
        Opt("UPCAST", 0, 2),
    ]
