"""GPU work-groups: the shapes and local-memory tiles the opts pick from a device's queries, the kernels they lower
to, and their values on the GPU device (PoCL's CPU device runs work-groups, local memory and barriers as a GPU
does, so the tiles are forced on there) against float64 numpy, forward and backward, at sizes where they engage."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from specgrad import Tensor
from specgrad.codegen.kernel import Kernel, Opt
from specgrad.codegen.linearizer import LinearizerOptions, WorkGroups, linearize
from specgrad.codegen.opts import GROUP_UPCAST, choose_opts
from specgrad.codegen.uops import UOps
from specgrad.device import Device, DeviceUnavailable
from specgrad.flags import Context
from specgrad.ops import BufferOps
from specgrad.realize import run_schedule
from specgrad.renderer.cstyle import C_DIALECT, OPENCL_DIALECT, render
from specgrad.schedule import create_schedule

A_GPU = WorkGroups(max_items=256, local_bytes=48 * 1024, compute_units=2)
GPU_TARGET = LinearizerOptions(global_dims=3, optimize=True, vector_bytes=16, work_groups=A_GPU)


def kernels_of(t: Tensor) -> list[Kernel]:
    return [Kernel.from_ast(si.ast) for si in create_schedule([t.lazydata]) if si.ast.op is BufferOps.STORE]


def matmul_kernel(m: int, k: int, n: int) -> Kernel:
    a, b = Tensor.rand(m, k, device="CPU").realize(), Tensor.rand(k, n, device="CPU").realize()
    return [k for k in kernels_of(a @ b) if k.reduceop is not None][-1]


# *** what the opts pick ***


def test_matmul_takes_a_work_group_a_register_tile_and_a_local_memory_tile() -> None:
    opts = choose_opts(matmul_kernel(256, 512, 128), GPU_TARGET)
    assert opts[:2] == [Opt("LOCAL", 0, 16), Opt("LOCAL", 1, 16)], "16x16 items, the output's last axis on local id 0"
    assert Opt("UPCAST", 1, GROUP_UPCAST) in opts and Opt("UPCAST", 0, GROUP_UPCAST) in opts
    assert Opt("TILE", 4, 16) in opts and all(o.op != "VECTOR" for o in opts)
    prg = linearize(matmul_kernel(256, 512, 128).ast, GPU_TARGET)
    assert prg.local_size == (16, 16) and prg.global_size == (128 // 4, 256 // 4), "2 x 4 groups of 16 x 16"
    local = [u.arg[1] for u in prg.uops if u.uop is UOps.DEFINE_LOCAL]
    assert local == [64 * 16, 16 * 64], "each operand's tile: 64 rows or columns by 16 reduce steps"
    assert [u.uop for u in prg.uops].count(UOps.BARRIER) == 2
    src = render(prg, OPENCL_DIALECT)
    assert "__local float lmem0[1024];" in src and "barrier(CLK_LOCAL_MEM_FENCE);" in src and "get_local_id(0)" in src


def test_a_cpu_opencl_device_keeps_its_opts() -> None:
    cpu = replace(GPU_TARGET, work_groups=None)
    opts = choose_opts(matmul_kernel(256, 512, 128), cpu)
    assert opts[0].op == "VECTOR" and all(o.op not in ("LOCAL", "TILE") for o in opts)
    assert linearize(matmul_kernel(256, 512, 128).ast, cpu).local_size is None


def test_kernels_that_share_no_load_keep_the_usual_opts() -> None:
    x = Tensor.rand(64, 256, device="CPU").realize()
    for t in (x * 2 + 1, x.sum(axis=1), x.exp().max(axis=0)):
        (k,) = kernels_of(t)
        assert all(o.op not in ("LOCAL", "TILE") for o in choose_opts(k, GPU_TARGET)), t


def test_fewer_groups_than_compute_units_drop_the_register_tile() -> None:
    many = replace(GPU_TARGET, work_groups=replace(A_GPU, compute_units=132))
    assert all(o.op != "UPCAST" for o in choose_opts(matmul_kernel(256, 512, 128), many)), "128 groups < 132 units"
    assert any(o.op == "UPCAST" for o in choose_opts(matmul_kernel(2048, 512, 1024), many))


def test_local_memory_bounds_the_tile() -> None:
    small = replace(GPU_TARGET, work_groups=replace(A_GPU, local_bytes=2 * 8 * 64 * 4 * 2))  # two 64x8 tiles in half
    assert Opt("TILE", 4, 8) in choose_opts(matmul_kernel(256, 512, 128), small)
    none = replace(GPU_TARGET, work_groups=replace(A_GPU, local_bytes=1024))
    opts = choose_opts(matmul_kernel(256, 512, 128), none)
    assert opts[0].op == "LOCAL" and all(o.op != "TILE" for o in opts), "work-groups still, without local memory"


def test_the_group_never_exceeds_the_device() -> None:
    for items in (64, 128, 1024):
        target = replace(GPU_TARGET, work_groups=replace(A_GPU, max_items=items))
        opts = choose_opts(matmul_kernel(256, 512, 128), target)
        sides = [o.amount for o in opts if o.op == "LOCAL"]
        assert np.prod(sides) <= min(items, 256), (items, opts)


def test_a_bias_read_after_the_reduce_is_not_copied_to_local_memory() -> None:
    x, w = Tensor.rand(256, 512, device="CPU").realize(), Tensor.rand(512, 128, device="CPU").realize()
    b = Tensor.rand(128, device="CPU").realize()
    (k,) = [k for k in kernels_of(x @ w + b) if k.reduceop is not None]
    prg = linearize(k.ast, GPU_TARGET)
    assert [u.arg[1] for u in prg.uops if u.uop is UOps.DEFINE_LOCAL] == [64 * 16, 16 * 64], "the operands only"


def test_a_group_smaller_than_a_warp_is_left_to_the_runtime() -> None:
    # NOTE: a 2x2 max pool over relu(conv + bias) shared only its bias along the window: 4-item groups before
    x, bias = Tensor.rand(64, 32, 8, 8, device="CPU").realize(), Tensor.rand(32, 1, 1, device="CPU").realize()
    (k,) = kernels_of((x + bias).relu().max_pool2d(2))
    assert all(o.op not in ("LOCAL", "TILE") for o in choose_opts(k, GPU_TARGET)), choose_opts(k, GPU_TARGET)


def test_a_packed_matmul_keeps_a_register_tile_on_both_axes() -> None:
    # NOTE: the scheduler's 32-column panels leave 2 per item along them after 16 local ids: the tile takes 2 there
    k = matmul_kernel(1024, 1024, 1024)
    opts = choose_opts(k, replace(GPU_TARGET, work_groups=replace(A_GPU, compute_units=132)))
    assert sorted(o.amount for o in opts if o.op == "UPCAST") == [2, 4] and any(o.op == "TILE" for o in opts)


def test_vector_lanes_and_a_local_memory_tile_are_refused_together() -> None:
    # NOTE: staged loads are read from local memory one scalar at a time; lanes there failed with a KeyError
    k = matmul_kernel(64, 64, 64).apply(Opt("LOCAL", 0, 16))
    with pytest.raises(ValueError, match="no local-memory tile"):
        k.apply(Opt("VECTOR", 1, 4)).apply(Opt("TILE", 3, 8))
    with pytest.raises(ValueError, match="one vector axis"):
        k.apply(Opt("TILE", 3, 8)).apply(Opt("VECTOR", 1, 4))


def test_a_c_kernel_cannot_use_work_groups() -> None:
    prg = linearize(matmul_kernel(64, 64, 64).ast, GPU_TARGET)
    with pytest.raises(ValueError, match="no work-groups"):
        render(prg, C_DIALECT)


def test_a_copy_the_group_does_not_split_evenly_is_masked() -> None:
    # NOTE: 6 x 16 items copy a 6 x 8 tile of `a` in one round, half of them nothing, and an 8 x 16 tile of `b` in
    # two rounds, the second a third full
    k = matmul_kernel(48, 64, 96)
    opts = [Opt("LOCAL", 0, 6), Opt("LOCAL", 1, 16), Opt("TILE", 4, 8)]
    prg = linearize(k.ast, replace(GPU_TARGET, work_groups=A_GPU), opts)
    assert [u.arg[1] for u in prg.uops if u.uop is UOps.DEFINE_LOCAL] == [96, 192]
    src = render(prg, OPENCL_DIALECT).replace(" ", "")
    assert "<48)" in src and "<128)" in src, "the copy past the end of a tile reads nothing"


# *** values on the GPU device, work-groups forced on ***


@pytest.fixture
def gpu_groups() -> Iterator[None]:
    """The GPU device with work-groups and local-memory tiles on, whatever its kind."""
    try:
        dev = Device["GPU"]
    except DeviceUnavailable as e:
        pytest.skip(f"GPU unavailable: {e}")
    before = dev.opts
    dev.opts = replace(before, work_groups=A_GPU)  # type: ignore[union-attr]
    yield
    dev.opts = before  # type: ignore[union-attr]


def tiled_kernels(t: Tensor) -> int:
    """How many of t's kernels the GPU device's opts give a local-memory tile."""
    opts = Device["GPU"].opts  # type: ignore[union-attr]
    return sum(any(o.op == "TILE" for o in choose_opts(k, opts)) for k in kernels_of(t))


def grads_close(got: list[np.ndarray], want: list[np.ndarray], terms: list[int]) -> None:
    for g, w, n in zip(got, want, terms):
        np.testing.assert_allclose(g, w, rtol=0, atol=2e-6 * np.sqrt(n) * max(1.0, np.abs(w).max()))


@pytest.mark.parametrize("shape", [(256, 512, 128), (100, 30, 70), (1, 256, 256), (48, 96, 80), (256, 9, 32)])
def test_matmul_forward_and_backward_with_work_groups(gpu_groups: None, shape: tuple[int, int, int]) -> None:
    m, k, n = shape
    rng = np.random.default_rng(m + k + n)
    a, b, g = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    x, w = Tensor(a, device="GPU", requires_grad=True), Tensor(b, device="GPU", requires_grad=True)
    out = x @ w
    if shape == (256, 512, 128):
        assert tiled_kernels(out) == 1
    (out * Tensor(g, device="GPU")).sum().backward()
    a64, b64, g64 = a.astype(np.float64), b.astype(np.float64), g.astype(np.float64)
    grads_close([out.numpy(), x.grad.numpy(), w.grad.numpy()], [a64 @ b64, g64 @ b64.T, a64.T @ g64], [k, n, m])  # type: ignore[union-attr]


def test_batched_matmul_with_work_groups(gpu_groups: None) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 64, 96)).astype(np.float32), rng.standard_normal((3, 96, 64)).astype(np.float32)
    out = Tensor(a, device="GPU") @ Tensor(b, device="GPU")
    assert tiled_kernels(out) == 1
    grads_close([out.numpy()], [a.astype(np.float64) @ b], [96])


@pytest.mark.parametrize("case", [(2, 8, 16, 14, 3, 1, 1), (2, 16, 16, 9, 3, 2, 1), (4, 32, 32, 16, 3, 1, 1)])
def test_conv2d_forward_and_backward_with_work_groups(gpu_groups: None, case: tuple[int, ...]) -> None:
    n, ci, co, hw, k, stride, pad = case
    rng = np.random.default_rng(sum(case))
    x_np, w_np = rng.standard_normal((n, ci, hw, hw)).astype(np.float32), rng.standard_normal((co, ci, k, k))
    w_np = w_np.astype(np.float32)
    x, w = Tensor(x_np, device="GPU", requires_grad=True), Tensor(w_np, device="GPU", requires_grad=True)
    out = x.conv2d(w, stride=stride, padding=pad)
    g_np = rng.standard_normal(out.shape).astype(np.float32)
    (out * Tensor(g_np, device="GPU")).sum().backward()
    want = conv2d_reference(x_np, w_np, g_np, stride, pad)
    terms = [ci * k * k, co * k * k, n * out.shape[2] * out.shape[3]]
    grads_close([out.numpy(), x.grad.numpy(), w.grad.numpy()], list(want), terms)  # type: ignore[union-attr]


def conv2d_reference(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int, pad: int) -> tuple[np.ndarray, ...]:
    """conv2d's output and its input and weight gradients for output gradient g, in float64 numpy (im2col)."""
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    n, ci, _, _ = x.shape
    co, _, k, _ = w.shape
    xp = np.pad(x64, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = g.shape[2], g.shape[3]
    cols = np.empty((n, ci, k, k, oh, ow))
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride]
    out = np.einsum("ncijyx,ocij->noyx", cols, w64)
    dw = np.einsum("ncijyx,noyx->ocij", cols, g64)
    dcols = np.einsum("ocij,noyx->ncijyx", w64, g64)
    dxp = np.zeros_like(xp)
    for i in range(k):
        for j in range(k):
            dxp[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride] += dcols[:, :, i, j]
    return out, dxp[:, :, pad : pad + x.shape[2], pad : pad + x.shape[3]], dw


@pytest.mark.parametrize("seed", range(12))
def test_random_work_groups_match_the_cpu_device(gpu_groups: None, seed: int) -> None:
    """Random legal LOCAL, UPCAST, TILE and UNROLL opts on the kernels of random graphs (reduces over any axis,
    broadcasts, pads), against the CPU device."""
    from test_opts import random_graph, run_kernel

    rng = np.random.default_rng(seed)
    a_np, b_np = rng.standard_normal((4, 24, 32)).astype(np.float32), rng.standard_normal((32, 40)).astype(np.float32)
    mm = Tensor(a_np, device="CPU").realize() @ Tensor(b_np, device="CPU").realize()
    schedule = create_schedule([*random_graph(rng), mm.lazydata])
    run_schedule(list(schedule))
    for si in schedule:
        if si.ast.op is not BufferOps.STORE:
            continue
        opts = random_group_opts(Kernel.from_ast(si.ast), rng)
        np.testing.assert_allclose(run_kernel("GPU", si, opts), si.out.realized.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=f"seed {seed}, opts {opts}")  # fmt: skip


def random_group_opts(k: Kernel, rng: np.random.Generator) -> list[Opt]:
    """Up to two LOCALs (at most 256 items), an UPCAST, a TILE of any divisor of the last reduce loop and an UNROLL,
    each where it is legal."""
    opts: list[Opt] = []

    def pick(axes: list[int], amounts: tuple[int, ...]) -> tuple[int, int] | None:
        choices = [(a, n) for a in axes for n in amounts if k.full_shape[a] % n == 0 and k.full_shape[a] > n]  # type: ignore[operator]
        return choices[int(rng.integers(len(choices)))] if choices else None

    items = 1
    for _ in range(int(rng.integers(1, 3))):
        if (got := pick(list(range(k.first_local)), tuple(n for n in (2, 3, 4, 8, 16) if items * n <= 256))) is None:
            break
        opts.append(Opt("LOCAL", *got))
        items *= got[1]
        k = k.apply(opts[-1])
    if rng.integers(2) and (got := pick(list(range(k.first_local)), (2, 4))) is not None:
        opts.append(Opt("UPCAST", *got))
        k = k.apply(opts[-1])
    if k.reduceop is not None and k.local_dims and k.reduce_shape and rng.integers(4):
        if (got := pick([k.first_expanded - 1], (2, 3, 4, 5, 8))) is not None:
            opts.append(Opt("TILE", *got))
            k = k.apply(opts[-1])
            if rng.integers(2) and (got := pick([k.first_expanded - 1], (2, 4))) is not None:
                opts.append(Opt("UNROLL", *got))
    return opts


def test_work_groups_come_from_the_device_queries() -> None:
    try:
        from specgrad.runtime.ops_gpu import CLContext

        ctx = CLContext()
    except DeviceUnavailable as e:
        pytest.skip(f"GPU unavailable: {e}")
    with Context(CL_WORK_GROUPS=1):
        groups = ctx.work_groups()
    assert groups is not None
    assert groups.max_items == min(int(ctx.device.max_work_group_size), 256)
    assert groups.local_bytes == ctx.device.local_mem_size and groups.compute_units == ctx.device.max_compute_units
    with Context(CL_WORK_GROUPS=0):
        assert ctx.work_groups() is None
    with Context(CL_WORK_GROUPS=-1):
        assert (ctx.work_groups() is not None) == (ctx.is_gpu and ctx.device.local_mem_type == 1), "a GPU's only"


def test_a_masked_copy_computes_right(gpu_groups: None) -> None:
    from test_opts import run_kernel

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((48, 64)).astype(np.float32), rng.standard_normal((64, 96)).astype(np.float32)
    schedule = create_schedule([(Tensor(a, device="CPU").realize() @ Tensor(b, device="CPU").realize()).lazydata])
    (si,) = [si for si in schedule if si.ast.op is BufferOps.STORE]
    got = run_kernel("GPU", si, [Opt("LOCAL", 0, 6), Opt("LOCAL", 1, 16), Opt("TILE", 4, 8)])
    grads_close([got.reshape(48, 96)], [a.astype(np.float64) @ b], [64])
