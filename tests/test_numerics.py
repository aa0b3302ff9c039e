"""Numerics every device must agree on: inf and nan propagation as numpy, integer edge cases (division by zero gives 0,
as the CPU reference; overflow wraps), and every dtype working on every device that supports it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from specgrad import Tensor, dtypes
from specgrad.dtype import DType

INF, NAN = np.inf, np.nan


def f32(*vals: float) -> np.ndarray:
    return np.array(vals, dtype=np.float32)


def check(device: str, sg_fn: Callable[..., Tensor], np_fn: Callable[..., np.ndarray], *xs: np.ndarray) -> None:
    """Same nan positions, same infinities (with sign), finite values within float32 rounding."""
    with np.errstate(all="ignore"):
        want = np.asarray(np_fn(*xs))
    got = sg_fn(*[Tensor(x, device=device) for x in xs]).numpy()
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"nan positions on {device}")
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=f"values on {device}")


ROWS_MAX = np.array([[1, NAN, 3], [NAN, -INF, 0], [-INF, -INF, -INF], [2, 5, NAN]], np.float32)
ROWS_MIN = np.array([[1, NAN, 3], [INF, INF, INF], [2, 5, NAN]], np.float32)
ROWS_SOFTMAX = np.array([[1, INF, 2], [-INF, 0, 1], [-INF, -INF, 1], [1, 2, 3]], np.float32)
ROWS_SUM = np.array([[1, INF, 2], [-INF, 1, -INF], [INF, -INF, 0], [NAN, 0, 1]], np.float32)


def relu_ref(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x), x, np.maximum(x, 0))


def softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


NAN_INF_CASES: dict[str, tuple[Callable[..., Tensor], Callable[..., np.ndarray], tuple[np.ndarray, ...]]] = {
    "exp_overflow": (lambda x: x.exp(), np.exp, (f32(100, 88.8, -100, -INF, INF, NAN),)),
    "log_zero_negative": (lambda x: x.log(), np.log, (f32(0, -0.0, -1, -INF, INF, NAN, 1),)),
    "div_by_zero": (lambda a, b: a / b, np.divide, (f32(0, 1, -1, 1, -1, INF, NAN), f32(0, 0, 0, -0.0, -0.0, 0, 0))),
    "div_inf": (lambda a, b: a / b, np.divide, (f32(INF, 1, -1, INF), f32(INF, INF, INF, -2))),
    "maximum_nan_first": (lambda a, b: a.maximum(b), np.maximum, (f32(NAN, NAN, NAN, 1), f32(1, -INF, NAN, 2))),
    "maximum_nan_second": (lambda a, b: a.maximum(b), np.maximum, (f32(1, -INF, INF, 1), f32(NAN, NAN, NAN, 2))),
    "minimum_nan": (lambda a, b: a.minimum(b), np.minimum, (f32(NAN, 1, -INF), f32(1, NAN, NAN))),
    "max_reduce_nan": (lambda x: x.max(axis=1), lambda x: x.max(axis=1), (ROWS_MAX,)),
    "min_reduce_nan": (lambda x: x.min(axis=1), lambda x: x.min(axis=1), (ROWS_MIN,)),
    "relu": (lambda x: x.relu(), relu_ref, (f32(NAN, -INF, INF, -1, 0),)),
    "sqrt_negative": (lambda x: x.sqrt(), np.sqrt, (f32(-1, -INF, 0, -0.0, INF, NAN),)),
    "sigmoid_inf": (lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), (f32(INF, -INF, NAN, 100, -100, 0),)),
    "softmax_inf": (lambda x: x.softmax(), softmax_ref, (ROWS_SOFTMAX,)),
    "sum_inf": (lambda x: x.sum(axis=1), lambda x: x.sum(axis=1), (ROWS_SUM,)),
    "mul_inf_zero": (lambda a, b: a * b, np.multiply, (f32(INF, -INF, 0, INF), f32(0, 0, NAN, -1))),
    "sub_inf": (lambda a, b: a - b, np.subtract, (f32(INF, -INF, INF), f32(INF, -INF, -INF))),
}


@pytest.mark.parametrize("case", sorted(NAN_INF_CASES))
def test_nan_inf_propagation(case: str, device: str) -> None:
    sg_fn, np_fn, xs = NAN_INF_CASES[case]
    check(device, sg_fn, np_fn, *xs)


def test_negative_zero_survives(device: str) -> None:
    x = Tensor(f32(0, 1, -2), device=device)
    got = (x * -1.0).numpy()
    assert list(np.signbit(got)) == [True, True, False]
    assert np.signbit((Tensor(f32(1), device=device) / -INF).numpy()[0])


def test_zero_sign_after_positive_zero_kernel(device: str) -> None:
    Tensor.full((5,), 0.0, device=device).numpy()
    assert np.signbit(Tensor.full((5,), -0.0, device=device).numpy()).all()


def test_compare_with_nan(device: str) -> None:
    a, b = f32(1, NAN, NAN, 2), f32(NAN, 1, NAN, 2)
    check(device, lambda x, y: (x == y).cast(dtypes.float32), lambda x, y: (x == y).astype(np.float32), a, b)
    check(device, lambda x, y: (x != y).cast(dtypes.float32), lambda x, y: (x != y).astype(np.float32), a, b)
    check(device, lambda x, y: (x <= y).cast(dtypes.float32), lambda x, y: (x <= y).astype(np.float32), a, b)
    check(device, lambda x, y: (x >= y).cast(dtypes.float32), lambda x, y: (x >= y).astype(np.float32), a, b)
    check(device, lambda x: x.isnan().cast(dtypes.float32), lambda x: np.isnan(x).astype(np.float32), a)
    check(device, lambda x: x.sign(), np.sign, f32(NAN, -2, 0, 3, INF, -INF))


# *** integers ***


def test_int_division_by_zero_gives_zero(device: str) -> None:
    """Not numpy's answer (it warns and gives 0 for //, 0 for %): we define x // 0 == x % 0 == 0 on every device, as
    the CPU reference does, since C traps on it."""
    a, b = np.array([5, -5, 0, 7, -7], np.int32), np.array([0, 0, 0, 2, 2], np.int32)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    assert (ta // tb).numpy().tolist() == [0, 0, 0, 3, -4]
    assert (ta % tb).numpy().tolist() == [0, 0, 0, 1, 1]


def test_int_min_floordiv_minus_one_wraps(device: str) -> None:
    a = Tensor(np.array([-(2**31), 7], np.int32), device=device)
    got = (a // Tensor(np.array([-1, -1], np.int32), device=device)).numpy()
    assert got.tolist() == [-(2**31), -7]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_small_int_add_wraps(device: str, dtype: type) -> None:
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, 100, info.max], dtype)
    b = np.array([1, -1 if info.min < 0 else info.max, 100, info.max], dtype)
    got = (Tensor(a, device=device) + Tensor(b, device=device)).numpy()
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, a + b)


# *** every dtype ***


def dtype_inputs(dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    if dtype == dtypes.bool:
        return np.array([0, 1, 1, 0, 1], np.bool_), np.array([1, 1, 0, 0, 0], np.bool_)
    return np.array([0, 1, 2, 3, 5], dtype.np), np.array([1, 1, 3, 2, 0], dtype.np)


def extremes(dtype: DType) -> np.ndarray:
    if dtype == dtypes.bool:
        return np.array([False, True])
    info = np.finfo(dtype.np) if dtypes.is_float(dtype) else np.iinfo(dtype.np)
    return np.array([info.min, info.max, 0], dtype.np)


@pytest.mark.parametrize("dtype", list(dtypes.fields().values()), ids=str)
def test_dtype_works(device: str, dtype: DType) -> None:
    """Create, add, mul, compare, cast to and from float32 and sum; a device without the dtype skips with its reason."""
    a, b = dtype_inputs(dtype)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    assert ta.dtype == dtype and ta.numpy().dtype == dtype.np
    np.testing.assert_array_equal(Tensor(extremes(dtype), device=device).numpy(), extremes(dtype))
    is_bool = dtype == dtypes.bool
    np.testing.assert_array_equal(((ta + tb) * tb).numpy(), (a | b) & b if is_bool else (a + b) * b)
    np.testing.assert_array_equal((ta < tb).numpy(), a < b)
    np.testing.assert_array_equal(ta.cast(dtypes.float32).numpy(), a.astype(np.float32))
    fa = a.astype(np.float32)
    np.testing.assert_array_equal(Tensor(fa, device=device).cast(dtype).numpy(), fa.astype(dtype.np))
    total = ta.sum().numpy()
    assert total == a.sum(), f"sum of {dtype} on {device}: {total} != {a.sum()}"
    assert (total.dtype.kind == "f") == dtypes.is_float(dtype), f"sum of {dtype} gives {total.dtype}"
