"""Edges a Tensor library must handle (issue 13): zero-size tensors through ops and gradients, deep graphs, and
semantics and misuse errors that match numpy/torch. Every test runs on each device via the `device` fixture; on the GPU
the fast tier leaves the deep graphs (which test lowering that the GPU shares with CLANG) to the slow tier. Every
integer type runs everywhere: each has a type name of its own in each dialect, and a wrong one (short written ushort)
only shows in that type's arithmetic."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import numpy as np
import pytest
from helpers import SLOW_ON_GPU

from specgrad import Tensor, dtypes

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


@SLOW_ON_GPU
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


@SLOW_ON_GPU
def test_deep_chain_of_unary_ops(device: str, low_recursion_limit: object) -> None:
    x = Tensor(np.full(3, 0.5, np.float32), device=device, requires_grad=True)
    y = x
    for _ in range(2000):
        y = y.sin().relu()
    y.sum().backward()
    assert np.isfinite(y.numpy()).all() and np.isfinite(x.grad.numpy()).all()


# *** semantics that match torch/numpy ***


@pytest.mark.parametrize("exponent", [0.2, -1.5, 2.5])
def test_fractional_pow_of_negative_base_has_nan_gradient(exponent: float, device: str) -> None:
    x0 = np.array([-1.0, 2.0, 0.5, -3.0], np.float32)
    value, (g,) = grads(lambda t: t**exponent, x0, device=device)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(value, x0.astype(np.float64) ** exponent, rtol=1e-5)
        np.testing.assert_allclose(
            g, np.where(x0 < 0, np.nan, exponent * x0.astype(np.float64) ** (exponent - 1)), 1e-5
        )
    if torch is not None:
        tx = torch.tensor(x0, requires_grad=True)
        (tx**exponent).sum().backward()
        np.testing.assert_allclose(g, tx.grad.numpy(), rtol=1e-5)


def test_pow_of_tensors_negative_base_gradient_matches_torch(device: str) -> None:
    x0, y0 = np.array([-1.0, 2.0, 0.5, -3.0], np.float32), np.array([0.2, 2.0, 1.5, 3.0], np.float32)
    value, (gx, gy) = grads(lambda a, b: a**b, x0, y0, device=device)
    assert np.isnan(value[0]) and np.isnan(gx[0]) and np.isnan(gy[0])
    np.testing.assert_allclose(value[1:], x0[1:].astype(np.float64) ** y0[1:], rtol=1e-5)
    if torch is not None:
        tx, ty = torch.tensor(x0, requires_grad=True), torch.tensor(y0, requires_grad=True)
        (tx**ty).sum().backward()
        np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-5)
        np.testing.assert_allclose(gy[:3], ty.grad.numpy()[:3], rtol=1e-5)  # NOTE: d/dy at a negative base: see docs


def test_integer_division_matches_torch(device: str) -> None:
    a0, b0 = np.array([7, -7, 7, -7, 0, 6], np.int32), np.array([2, 2, -2, -2, 3, 3], np.int32)
    a, b = Tensor(a0, device=device), Tensor(b0, device=device)
    true_div, floor_div = (a / b).numpy(), (a // b).numpy()
    assert true_div.dtype.kind == "f" and floor_div.dtype == np.int32
    np.testing.assert_allclose(true_div, a0 / b0)
    np.testing.assert_array_equal(floor_div, a0 // b0)
    np.testing.assert_array_equal((a // 2).numpy(), a0 // 2)
    if torch is not None:
        ta, tb = torch.tensor(a0), torch.tensor(b0)
        np.testing.assert_allclose(true_div, (ta / tb).numpy())
        np.testing.assert_array_equal(floor_div, (ta // tb).numpy())


INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: d.__name__)
def test_integer_floordiv_and_mod_floor_like_python(dtype: type, device: str) -> None:
    """// rounds towards minus infinity and % takes the divisor's sign, in the tensor's own dtype: numpy and torch
    agree on that. Dividing by 0 gives 0 (numpy's result, with its warning; torch raises ZeroDivisionError). An
    unsigned type's values reach past the signed type's range, where its signed twin would divide differently."""
    info = np.iinfo(dtype)
    signed = info.min < 0
    a0 = np.array([7, -7, 7, -7, 0, 6, -1, 100, -128, 127, 5] if signed else [7, 0, 6, 255, info.max - 2, 13, 5], dtype)
    b0 = np.array([2, 2, -2, -2, 3, -3, 4, -7, -1, 1, 0] if signed else [2, 3, 4, 16, 3, 1, 0], dtype)
    a, b = Tensor(a0, device=device), Tensor(b0, device=device)
    with np.errstate(divide="ignore", over="ignore"):
        want_div, want_mod = a0 // b0, a0 % b0
    for got, want in ((a // b, want_div), (a % b, want_mod)):
        assert got.dtype.np == np.dtype(dtype), f"{got.dtype} for {np.dtype(dtype)}"
        np.testing.assert_array_equal(got.numpy(), want)
    # NOTE: torch raises for the 0 divisor (compare the rest) and has no // for uint16 and wider
    if torch is not None and dtype not in (np.uint16, np.uint32, np.uint64):
        ta, tb = torch.tensor(a0[:-1]), torch.tensor(b0[:-1])
        np.testing.assert_array_equal((a // b).numpy()[:-1], (ta // tb).numpy())
        np.testing.assert_array_equal((a % b).numpy()[:-1], (ta % tb).numpy())
    np.testing.assert_array_equal((a // 3).numpy(), a0 // dtype(3))
    np.testing.assert_array_equal((a % 3).numpy(), a0 % dtype(3))


def test_integer_true_division_and_powers(device: str) -> None:
    a0 = np.array([7, -7, 1, 0], np.int32)
    a = Tensor(a0, device=device)
    assert (a / 2).dtype == dtypes.float32 and (a / a.abs().maximum(1)).dtype == dtypes.float32  # numpy: float64
    np.testing.assert_allclose((a / 2).numpy(), a0 / 2)
    assert (a**2).dtype == dtypes.int32 and (a**2).numpy().tolist() == [49, 49, 1, 0]
    assert (a**0.5).dtype == dtypes.float32
    b0, e0 = np.array([7, -3, 2, 0, -1, 2], np.int32), np.array([11, 3, -1, 0, -3, 30], np.int32)
    p = Tensor(b0, device=device) ** Tensor(e0, device=device)  # NOTE: exact, and a negative power truncates to 0
    assert p.dtype == dtypes.int32 and p.numpy().tolist() == [7**11, -27, 0, 1, -1, 2**30]
    assert (2 ** Tensor([2, -3, 4], device=device)).numpy().tolist() == [4, 0, 16]
    if torch is not None:
        assert (torch.tensor(a0) / 2).dtype == torch.float32
        assert (torch.tensor(b0) ** torch.tensor(e0)).tolist() == p.numpy().tolist()
        assert (2 ** torch.tensor([2, -3, 4])).tolist() == [4, 0, 16]
        with pytest.raises(RuntimeError, match="negative integer powers"):
            torch.tensor(a0) ** -1
    with pytest.raises(ValueError, match="negative integer powers"):
        np.array([2]) ** -1


def test_nan_propagates_through_max_and_min_at_vector_sizes(device: str) -> None:
    """A NaN anywhere in a max or min is a NaN out, as in numpy, at a size where the kernels are vectorized (a vector
    max is a compare and select of its own, apart from the scalar one)."""
    x0 = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    x0[3, 5] = x0[10, ::7] = x0[63, 63] = np.nan
    x = Tensor(x0, device=device)
    cases = {"relu": (x.relu(), np.maximum(x0, 0)), "maximum": (x.maximum(0.5), np.maximum(x0, 0.5)),
             "minimum": (x.minimum(-0.5), np.minimum(x0, -0.5)), "max(1)": (x.max(1), x0.max(1)),
             "max(0)": (x.max(0), x0.max(0)), "min(1)": (x.min(1), x0.min(1))}  # fmt: skip
    for name, (got, want) in cases.items():
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)  # NOTE: NaN equals NaN here


def test_asinh_of_large_negative_values_does_not_cancel(device: str) -> None:
    x0 = np.array([-1e4, -30.0, 0.0, 30.0, 1e4], np.float32)
    value, (g,) = grads(lambda t: t.asinh(), x0, device=device)
    np.testing.assert_allclose(value, np.arcsinh(x0.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(g, 1 / np.sqrt(x0.astype(np.float64) ** 2 + 1), rtol=1e-5)


def test_creation_takes_what_torch_takes(device: str) -> None:
    assert Tensor.full([2, 3], 1.5, device=device).numpy().tolist() == [[1.5] * 3] * 2
    assert Tensor.full(2, np.float32(0.5), device=device).dtype == dtypes.float32
    assert Tensor.full((2,), np.int64(3), device=device).numpy().tolist() == [3, 3]
    assert Tensor.full((), True, device=device).dtype == dtypes.bool
    assert Tensor([1.0], device=device.lower()).device == device
    assert [t.tolist() for t in Tensor([[1, 2], [3, 4]], device=device)] == [[1, 2], [3, 4]]
    assert abs(Tensor([-2, 3], device=device)).tolist() == [2, 3]


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int64])
def test_xor_of_integers_is_bitwise(dtype: type, device: str) -> None:
    info = np.iinfo(dtype)
    vals = np.array([0, 1, 5, 3, info.max, info.min, info.max // 3, 0], dtype)
    others = np.array([0, 1, 1, 6, info.min, info.min, info.max, info.max], dtype)
    got = (Tensor(vals, device=device) ^ Tensor(others, device=device)).numpy()
    np.testing.assert_array_equal(got, vals ^ others)
    np.testing.assert_array_equal((Tensor(vals, device=device) ^ 1).numpy(), vals ^ dtype(1))


def test_xor_of_bools(device: str) -> None:
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    np.testing.assert_array_equal((Tensor(a, device=device) ^ Tensor(b, device=device)).numpy(), a ^ b)


def test_gather_takes_index_by_keyword(device: str) -> None:
    x0, idx0 = np.arange(12, dtype=np.float32).reshape(3, 4), np.array([[0, 3], [1, 1], [2, 0]], np.int32)
    x, idx = Tensor(x0, device=device), Tensor(idx0, device=device)
    want = np.take_along_axis(x0, idx0, 1)
    for got in (x.gather(1, idx), x.gather(1, index=idx), x.gather(dim=1, index=idx), x.gather(index=idx, dim=1)):
        np.testing.assert_array_equal(got.numpy(), want)
    if torch is not None:
        np.testing.assert_array_equal(want, torch.tensor(x0).gather(1, index=torch.tensor(idx0).long()).numpy())


# *** advanced indexing: what numpy and torch would raise, and what a lazy index cannot check ***


def test_list_index_out_of_range_raises_at_once(device: str) -> None:
    x = Tensor.ones(4, 5, device=device)
    for idx, message in [([0, 4], "index 4 .* dim 0 of size 4"), ((slice(None), [[-6]]), "-6 .* dim 1 of size 5")]:
        with pytest.raises(IndexError, match=message):
            x[idx]
        with pytest.raises(IndexError):
            np.ones((4, 5))[idx]
    with pytest.raises(IndexError, match="index 2 .* dim 0 of size 2"):
        x[np.array([True, False, True, False]), [0, 1]][2]


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int64])
def test_tensor_index_out_of_range_is_nan_not_a_value(dtype: type, device: str) -> None:
    """A lazy index is not read when the graph is built: an out-of-range value gives nan in a float result, and
    matches nothing (0) in an int one, never a neighbour's value (x[0, 5] of a (4, 5) tensor is not x[1, 0])."""
    x0 = np.arange(20, dtype=np.float32).reshape(4, 5) + 1
    bad = np.array([0, 7, 2, 200 if dtype == np.uint8 else 5], dtype)
    rows = np.array([0, 1, 3, 0], dtype)
    x = Tensor(x0, device=device, requires_grad=True)
    got = x[Tensor(rows, device=device), Tensor(bad, device=device)].numpy()
    assert np.isnan(got[[1, 3]]).all() and got[[0, 2]].tolist() == [x0[0, 0], x0[3, 2]]
    got = x[Tensor(bad, device=device)[:2]]
    assert (got.numpy()[0] == x0[0]).all() and np.isnan(got.numpy()[1]).all()
    got.sum().backward()  # NOTE: the gradient reaches the row that was in range, nothing else
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(np.arange(4) == 0, 5).reshape(4, 5))
    ints = Tensor(x0.astype(np.int32), device=device)[Tensor(rows, device=device), Tensor(bad, device=device)]
    assert ints.numpy().tolist() == [1, 0, 18, 0]
    gathered = x.gather(1, Tensor(bad.reshape(4, 1), device=device)).numpy()
    assert np.isnan(gathered[[1, 3]]).all() and gathered[[0, 2], 0].tolist() == [x0[0, 0], x0[2, 2]]


def test_inf_and_nan_elsewhere_do_not_leak_into_a_gather(device: str) -> None:
    x0 = np.array([[np.inf, 1.0], [np.nan, 2.0], [-np.inf, 3.0]], np.float32)
    x, t = Tensor(x0, device=device), lambda v: Tensor(v, device=device)
    np.testing.assert_array_equal(x[[1, 2], 1].numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(x[t([0, 2]), t([1, 0])].numpy(), [1.0, -np.inf])
    np.testing.assert_array_equal(x.gather(1, t([[1], [1], [0]])).numpy().ravel(), [1.0, 2.0, -np.inf])


@SLOW_ON_GPU
def test_repeated_indices_accumulate_gradients_like_torch(device: str) -> None:
    x0 = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    idx0 = np.array([[4, 1, 4], [1, 1, -1]])
    w0 = np.random.default_rng(1).standard_normal((2, 3, 3)).astype(np.float32)
    x = Tensor(x0, device=device, requires_grad=True)
    (x[Tensor(idx0, device=device)] * Tensor(w0, device=device)).sum().backward()
    want = np.zeros_like(x0)
    np.add.at(want, idx0 % 5, w0)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-6)
    if torch is not None:
        tx = torch.tensor(x0, requires_grad=True)
        (tx[torch.tensor(idx0)] * torch.tensor(w0)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


MASK_2D = np.array([[True, False], [False, True], [True, True]])


@pytest.mark.parametrize("mask", [[True, False, True], pytest.param(MASK_2D, marks=SLOW_ON_GPU)])
def test_concrete_bool_masks_select_like_numpy(mask: object, device: str) -> None:
    x0 = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    value, (g,) = grads(lambda t: t[mask], x0, device=device)
    np.testing.assert_array_equal(value, x0[mask])
    want = np.zeros_like(x0)
    want[mask] = 1
    np.testing.assert_array_equal(g, want)
    x = Tensor(x0, device=device)
    for idx in (True, False, ([0, 2], True), (..., True), (True, [0, 1]), (slice(None), True, [0]), ([1], ..., True)):
        assert x[idx].shape == x0[idx].shape, f"x[{idx}]: {x[idx].shape}, numpy {x0[idx].shape}"
        np.testing.assert_array_equal(x[idx].numpy(), x0[idx])
    assert x[1, ..., False].shape == (2, 2, 0)  # NOTE: the int applies first, as torch (numpy: (0, 2, 2))


def test_large_gather_builds_nothing_of_size_rows_times_vocab_times_width(device: str) -> None:
    """1000 rows of a 5000 x 64 tensor, forward and backward: the one-hot is (1000, 5000) bools; nothing of
    1000 x 5000 x 64 is ever stored (the CPU device, a numpy interpreter, holds one while it runs a reduce)."""
    from specgrad.schedule import create_schedule

    x = Tensor.rand(5000, 64, device=device, requires_grad=True)
    y = x[Tensor.randint(1000, low=-5000, high=5000, device=device)]
    (y * y).sum().backward()
    sched = create_schedule([y.lazydata, x.grad.lazydata])
    biggest = max(math.prod(si.out.shape) for si in sched)
    assert biggest <= 1000 * 5000, f"a gather stored {biggest} elements: {[si.out.shape for si in sched]}"


@pytest.mark.slow
def test_large_gather_runs(device: str) -> None:
    rng = np.random.default_rng(0)
    n, k = (5000, 1000) if device != "CPU" else (1000, 200)  # NOTE: CPU holds k * n * 64 floats while it reduces
    x0, idx0 = rng.standard_normal((n, 64)).astype(np.float32), rng.integers(-n, n, k)
    x = Tensor(x0, device=device, requires_grad=True)
    y = x[Tensor(idx0, device=device)]
    (y * 2).sum().backward()
    want = np.zeros_like(x0)
    np.add.at(want, idx0 % n, 2.0)
    np.testing.assert_array_equal(y.numpy(), x0[idx0])
    np.testing.assert_array_equal(x.grad.numpy(), want)


INDEX_MISUSE: list[tuple[str, str, Callable]] = [
    ("bool_tensor", "bool Tensor mask .* mask.numpy()", lambda x: x[x > 0]),
    ("float_tensor", "must be integers, got dtypes.float32", lambda x: x[Tensor([0.0])]),
    ("float_list", "integers or bools, got dtype float64", lambda x: x[[0.5]]),
    ("ragged_list", "rectangular", lambda x: x[[[0, 1], [2]]]),
    ("tensors_in_list", "Tensor.stack", lambda x: x[[Tensor(0), Tensor(1)]]),
    ("no_broadcast", r"shapes \[\(2,\), \(3,\)\] do not broadcast", lambda x: x[Tensor([0, 1]), Tensor([0, 1, 2])]),
    ("mask_shape", r"mask of shape \(3,\) does not match axes 0..0 of shape \(2, 3\)", lambda x: x[[True] * 3]),
    ("mask_length", r"mask of shape \(2,\) does not match axes 1..1", lambda x: x[:, [True] * 2]),
    ("too_many", "too many indices", lambda x: x[[0], [0], [0]]),
    ("two_ellipsis", "single ellipsis", lambda x: x[..., 0, ...]),
    ("float", "unsupported index 1.5", lambda x: x[1.5]),
    ("string", "unsupported index 'a'", lambda x: x["a"]),
]


@pytest.mark.parametrize("name,message,fn", INDEX_MISUSE, ids=[m[0] for m in INDEX_MISUSE])
def test_index_misuse_raises_index_error(name: str, message: str, fn: Callable) -> None:
    with pytest.raises(IndexError, match=message):
        fn(Tensor.rand(2, 3))


# *** misuse: TypeError for a wrong type, ValueError for a bad value or shape, IndexError for an out-of-range index
# or dim; each message names the values (docs/python-api.md, "Errors") ***

A = lambda: Tensor.rand(2, 3)  # noqa: E731
MISUSE: list[tuple[str, type[Exception], str, Callable]] = [
    ("reshape", ValueError, r"\(2, 3\).*\(4, 4\)", lambda: A().reshape(4, 4)),
    ("expand", ValueError, r"\(2, 3\) to \(3, 3\)", lambda: A().expand(3, 3)),
    ("permute", ValueError, r"\(0, 0\)", lambda: A().permute(0, 0)),
    ("permute_dim", IndexError, "dimension 5", lambda: A().permute(0, 5)),
    ("sum_dim", IndexError, "dimension 5", lambda: A().sum(5)),
    ("sum_dim_type", TypeError, "'x'", lambda: A().sum("x")),
    ("shrink", IndexError, r"\(0, 5\)", lambda: A().shrink(((0, 5), (0, 3)))),
    ("pad2d", ValueError, r"\(1,\)", lambda: A().pad2d((1,))),
    ("cat_shapes", ValueError, r"\(2, 3\), \(3, 3\)", lambda: A().cat(Tensor.rand(3, 3), dim=1)),
    ("cat_type", TypeError, "int", lambda: A().cat(3)),
    ("cat_0d", ValueError, "zero-dimensional", lambda: Tensor(1.0).cat(Tensor(2.0))),
    ("stack", ValueError, r"\(3,\)", lambda: Tensor.stack([A(), Tensor.rand(3)])),
    ("gather_index_type", TypeError, "list", lambda: A().gather(1, [[0]])),
    ("gather_index_dtype", TypeError, "float", lambda: A().gather(1, Tensor([[0.0]]))),
    ("gather_shape", ValueError, r"\(2,\)", lambda: A().gather(1, Tensor([0, 1]))),
    ("matmul_shapes", ValueError, r"\(2, 3\) @ \(2, 3\)", lambda: A() @ A()),
    ("matmul_type", TypeError, "int", lambda: A() @ 3),
    ("getitem", IndexError, "index 5", lambda: A()[5]),
    ("add_type", TypeError, "str", lambda: A() + "x"),
    ("broadcast", ValueError, r"\(2, 3\) and \(4,\)", lambda: A() + Tensor.rand(4)),
    ("shape", ValueError, r"\(-1,\)", lambda: Tensor.zeros(-1)),
    ("max_empty", ValueError, r"\(0, 3\)", lambda: Tensor.zeros(0, 3).max()),
    ("xor_float", TypeError, "float32", lambda: A() ^ A()),
    ("one_hot", ValueError, "-1", lambda: Tensor([1]).one_hot(-1)),
    ("tril", ValueError, r"\(3,\)", lambda: Tensor.rand(3).tril()),
    ("item", ValueError, r"\(2, 3\)", lambda: A().item()),
    ("backward_no_graph", ValueError, "does not require grad", lambda: A().backward()),
    ("backward_not_scalar", ValueError, r"\(2,\)", lambda: (Tensor.rand(2, requires_grad=True) * 2).backward()),
    ("pad_crops_too_much", ValueError, r"\(-2, -1\) crops 3 from dim 0 of size 2", lambda: A().pad([(-2, -1), None])),
    ("pad2d_crops_too_much", ValueError, "crops 4 from dim 1 of size 3", lambda: A().pad2d((-4, 0))),
    ("pad_float", TypeError, r"pairs of ints or None, got \(0.5, 0\) for dim 0", lambda: A().pad([(0.5, 0), None])),
    ("pad_not_pairs", TypeError, "got 1 for dim 0", lambda: A().pad((1, 2))),
    ("pad_length", ValueError, r"per dimension of shape \(2, 3\)", lambda: A().pad([(1, 1)])),
    ("full_fill_str", TypeError, "fill_value must be a number, got str", lambda: Tensor.full((2, 3), "x")),
    ("full_fill_tensor", TypeError, "expand", lambda: Tensor.full((2,), Tensor(1.0))),
    ("full_shape_float", TypeError, r"\(2.5,\): dimensions must be integers", lambda: Tensor.full(2.5, 1.0)),
    ("full_shape_negative", ValueError, r"\(2, -1\)", lambda: Tensor.full([2, -1], 1.0)),
    ("zeros_shape_float", TypeError, r"\(2.0, 3\)", lambda: Tensor.zeros(2.0, 3)),
    ("to_unknown", ValueError, "unknown device 'FOO'; known devices: CLANG, GPU, CPU", lambda: A().to("FOO")),
    ("device_unknown", ValueError, "unknown device 'TPU'", lambda: Tensor([1.0], device="TPU")),
    ("to_not_a_name", TypeError, "got 3 of type int", lambda: A().to(3)),
    ("reshape_float", TypeError, r"\(2.0, 3\)", lambda: A().reshape(2.0, 3)),
    ("repeat_negative", ValueError, r"\(-1, 1\)", lambda: A().repeat(-1, 1)),
    ("flatten_order", ValueError, "start_dim 1 comes after end_dim 0", lambda: A().flatten(1, 0)),
    ("chunk_float", TypeError, "1.5", lambda: A().chunk(1.5)),
    ("one_hot_float", TypeError, "float32", lambda: Tensor([0.5]).one_hot(3)),
    ("stack_type", TypeError, r"\['Tensor', 'int'\]", lambda: Tensor.stack([A(), 3])),
    ("int_pow_negative", ValueError, "negative integer powers", lambda: Tensor([2, 3]) ** -1),
    ("max_axis_float", TypeError, "1.0 of type float", lambda: A().max(1.0)),
    ("iter_0d", TypeError, "0-d", lambda: list(Tensor(1.0))),
    ("roll_lengths", ValueError, r"shifts \(1, 2\) and dims \(0,\)", lambda: A().roll((1, 2), 0)),
    ("roll_dim", IndexError, "dimension 2", lambda: A().roll(1, 2)),
    ("linspace_steps", ValueError, "-1", lambda: Tensor.linspace(0, 1, -1)),
    ("linspace_steps_type", TypeError, "2.5", lambda: Tensor.linspace(0, 1, 2.5)),
    ("masked_fill_mask", TypeError, "float32", lambda: A().masked_fill(A(), 0.0)),
]


@pytest.mark.parametrize("name,error,message,fn", MISUSE, ids=[m[0] for m in MISUSE])
def test_misuse_raises_a_documented_error(name: str, error: type, message: str, fn: Callable) -> None:
    with pytest.raises(error, match=message):
        fn()
