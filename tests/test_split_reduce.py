"""Large reductions split into two kernels (schedule.py): numpy's values, a fixed kernel count, the same bits twice."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from specgrad import Tensor, Variable
from specgrad.ops import LoadOps
from specgrad.schedule import _split_reduce_axis, create_schedule

ODD = 3 * 5 * 7 * 2**14  # an axis that is not a power of two

# (shape, axis, kernels): the reduces that split (2 kernels) and the ones that stay one kernel
CASES = [
    ((2**20,), None, 2),
    ((2**22,), None, 2),
    ((ODD,), None, 2),
    ((2**20, 4), 0, 2),
    ((4, 2**20), 1, 2),
    ((ODD // 4, 4), 0, 2),
    ((256, 4, 1024), (0, 2), 2),
    ((1024, 1024), None, 2),
    ((65537,), None, 1),  # prime: no divisor in [16, 256]
    ((32767,), None, 1),  # too few elements per output
    ((1024, 256), 1, 1),
    ((512, 65536), 1, 1),  # many outputs, each not very long
]


def kernel_count(t: Tensor) -> int:
    return sum(si.ast.op not in LoadOps for si in create_schedule([t.lazydata]))


def make(shape: tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype is np.int32:
        return rng.integers(-1000, 1000, shape, dtype=np.int32)
    return rng.standard_normal(shape, dtype=np.float32)


@pytest.mark.parametrize("shape, axis, kernels", CASES, ids=[f"{s}-{a}" for s, a, _ in CASES])
def test_kernel_count(shape: tuple[int, ...], axis: int | tuple[int, ...] | None, kernels: int) -> None:
    x = Tensor.ones(*shape, device="CPU")
    assert kernel_count(x.sum(axis)) == kernels
    assert kernel_count(x.max(axis)) == kernels


def test_elementwise_input_fuses_into_the_first_kernel() -> None:
    x = Tensor.empty(2**20, device="CPU")
    assert kernel_count((x * 2 + 1).sum()) == 2
    assert kernel_count((x.sum() + 1).sqrt()) == 2


def test_symbolic_shape_does_not_split() -> None:
    i = Variable("i", 1, 2**20).bind(2**18)
    x = Tensor.ones(2**18, 4, device="CPU").reshape(i, 4)
    assert kernel_count(x.sum()) == 1


@pytest.mark.parametrize(
    "shape, new_shape, split",
    [
        ((2**22,), (1,), (0, 256)),
        ((ODD,), (1,), (0, 256)),
        ((2**15,), (1,), (0, 128)),  # NOTE: the first part stays at least as long as S
        ((2**20, 4), (1, 4), (0, 256)),
        ((32, 64, 64), (1, 1, 1), (1, 64)),
        ((3 * 2**16,), (1,), (0, 256)),
        ((65537,), (1,), None),
    ],
)
def test_split_depends_on_shapes_only(shape: tuple, new_shape: tuple, split: tuple[int, int] | None) -> None:
    assert _split_reduce_axis(shape, new_shape) == split


SPLIT = [c[:2] for c in CASES if c[2] == 2]
INT_SPLIT = [((2**22,), None), ((ODD,), None), ((2**20, 4), 0)]


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize(
    "shape, axis, dtype",
    [(s, a, np.float32) for s, a in SPLIT] + [(s, a, np.int32) for s, a in INT_SPLIT],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_matches_numpy(device: str, shape: tuple, axis: int | tuple | None, dtype: type, op: str) -> None:
    x = make(shape, dtype)
    out = getattr(Tensor(x, device=device), op)(axis).numpy()
    if op == "max" or dtype is np.int32:
        # NOTE: int32 sums are exact (wrapping like the device); max is exact in any dtype
        np.testing.assert_array_equal(out, getattr(x, op)(axis, **({"dtype": np.int32} if op == "sum" else {})))
    else:
        ref = x.astype(np.float64).sum(axis)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6 * np.abs(x).sum(axis).max())


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: t.sum(),
        lambda t: t.max(0),
        lambda t: t.mean(0),
        lambda t: t.var(0),
        lambda t: t.softmax(0)[:4],
    ],
    ids=["sum", "max", "mean", "var", "softmax"],
)
def test_float_results_are_identical_run_to_run(device: str, fn: Callable[[Tensor], Tensor]) -> None:
    x = make((2**20, 4), np.float32, seed=1)
    first, second = fn(Tensor(x, device=device)).numpy(), fn(Tensor(x, device=device)).numpy()
    assert first.tobytes() == second.tobytes()


def softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(0))
    return e / e.sum(0)


@pytest.mark.parametrize(
    "sg_fn, np_fn",
    [
        (lambda t: t.mean(0), lambda x: x.mean(0)),
        (lambda t: t.std(0), lambda x: x.std(0, ddof=1)),
        (lambda t: t.softmax(0)[:8], lambda x: softmax_np(x)[:8]),
        (lambda t: t.min(0), lambda x: x.min(0)),
    ],
    ids=["mean", "std", "softmax", "min"],
)
def test_reductions_built_on_sum_and_max(device: str, sg_fn: Callable, np_fn: Callable) -> None:
    x = make((2**20, 2), np.float32, seed=2)
    np.testing.assert_allclose(sg_fn(Tensor(x, device=device)).numpy(), np_fn(x.astype(np.float64)), rtol=1e-4)


def test_backward_through_split_reduces(device: str) -> None:
    x = make((2**20,), np.float32, seed=3)
    t = Tensor(x, device=device, requires_grad=True)
    (t.sum() * 2 + t.max() * 3).backward()
    expected = np.full_like(x, 2.0)
    expected[x.argmax()] += 3.0
    np.testing.assert_array_equal(t.grad.numpy(), expected)
