"""Every Tensor op, forward and backward, on every device: one op table for elementwise and reduce ops, one-line
check_op calls for the rest (movement, indexing, linear algebra, conv, pooling, losses, dtypes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from helpers import SEED, SLOW_ON_GPU, check_op, gpu_keeps

from specgrad import Tensor, dtypes

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = F = None


def erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[x.dtype])(x) if np.ndim(x) else np.asarray(math.erf(x), dtype=x.dtype)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


# ***** the op table: elementwise and reduce ops *****


@dataclass(frozen=True)
class Op:
    """One row of the op table: `np_fn` is the reference, `sg_fn` the specgrad call, `torch_fn` the torch call.

    Elementwise rows take `arity` inputs of the shapes in UNARY_SHAPES / BINARY_SHAPES. Reduce rows have `axes`:
    their functions take (x, axis, keepdim), each (axis, keepdim) case runs on a (2, 3, 4) input, and a 0-d input
    runs too when `scalar`.
    """

    name: str
    arity: int
    np_fn: Callable
    sg_fn: Callable
    torch_fn: Callable | None = None
    low: float = -2.0
    high: float = 2.0
    atol: float = 1e-6
    rtol: float = 1e-3
    grad_atol: float = 1e-4
    grad_rtol: float = 1e-3
    forward_only: bool = False
    dtype: Any = np.float32
    axes: tuple | None = None
    scalar: bool = True


REDUCE_AXES = ((None, False), (0, False), (-1, False), (1, True), ((0, 2), False), ((-1, 0), True))
ONE_AXIS = ((0, False), (1, False), (-1, False))


def reduce_op(
    name: str, np_fn: Callable, sg_fn: Callable, torch_fn: Callable | None, axes: tuple = REDUCE_AXES, **kwargs: Any
) -> Op:
    return Op(name, 1, np_fn, sg_fn, torch_fn, axes=axes, **kwargs)


def np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_logsumexp(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    m = x.max(axis, keepdims=True)
    m = np.where(np.isinf(m), 0, m)  # NOTE: as torch: all -inf gives -inf, any +inf gives +inf
    ret = np.log(np.exp(x - m).sum(axis, keepdims=True)) + m
    return ret if keepdims else np.squeeze(ret, axis)


def tdim(x: Any, axis: Any) -> Any:
    """torch's dim argument for a numpy axis (None: every dim)."""
    return tuple(range(x.ndim)) if axis is None else axis


# fmt: off
UNARY = [
    Op("neg", 1, np.negative, lambda x: -x, lambda x: -x),
    Op("exp", 1, np.exp, Tensor.exp, torch and torch.exp, atol=1e-5),
    Op("exp2", 1, np.exp2, Tensor.exp2, torch and torch.exp2, atol=1e-5),
    Op("log", 1, np.log, Tensor.log, torch and torch.log, low=0.1),
    Op("log2", 1, np.log2, Tensor.log2, torch and torch.log2, low=0.1),
    Op("sqrt", 1, np.sqrt, Tensor.sqrt, torch and torch.sqrt, low=0.1),
    Op("rsqrt", 1, lambda x: 1 / np.sqrt(x), Tensor.rsqrt, torch and torch.rsqrt, low=0.1),
    Op("sin", 1, np.sin, Tensor.sin, torch and torch.sin, low=-5, high=5),
    Op("cos", 1, np.cos, Tensor.cos, torch and torch.cos, low=-5, high=5, atol=1e-5),
    Op("tan", 1, np.tan, Tensor.tan, torch and torch.tan, low=-1.2, high=1.2, atol=1e-5),
    Op("abs", 1, np.abs, Tensor.abs, torch and torch.abs),
    Op("sign", 1, np.sign, Tensor.sign, torch and torch.sign),
    Op("trunc", 1, np.trunc, Tensor.trunc, torch and torch.trunc, low=-5, high=5),
    Op("floor", 1, np.floor, Tensor.floor, torch and torch.floor, low=-5, high=5),
    Op("ceil", 1, np.ceil, Tensor.ceil, torch and torch.ceil, low=-5, high=5),
    Op("round", 1, np.round, Tensor.round, torch and torch.round, low=-5, high=5),
    Op("reciprocal", 1, np.reciprocal, Tensor.reciprocal, torch and torch.reciprocal, low=0.5),
    Op("square", 1, np.square, Tensor.square, torch and torch.square),
    Op("relu", 1, lambda x: np.maximum(x, 0), Tensor.relu, torch and torch.relu),
    Op("relu6", 1, lambda x: np.clip(x, 0, 6), Tensor.relu6, F and F.relu6, low=-8, high=8),
    Op("leakyrelu", 1, lambda x: np.where(x > 0, x, 0.01 * x), Tensor.leakyrelu, F and F.leaky_relu),
    Op("leakyrelu_0.2", 1, lambda x: np.where(x > 0, x, 0.2 * x), lambda x: x.leakyrelu(0.2),
       F and (lambda x: F.leaky_relu(x, 0.2))),
    Op("elu", 1, lambda x: np.where(x > 0, x, np.exp(x) - 1), Tensor.elu, F and F.elu),
    Op("celu", 1, lambda x: np.maximum(x, 0) + np.minimum(0, 1.5 * (np.exp(x / 1.5) - 1)), lambda x: x.celu(1.5),
       F and (lambda x: F.celu(x, 1.5))),
    Op("gelu", 1, gelu_tanh, Tensor.gelu, F and (lambda x: F.gelu(x, approximate="tanh")), atol=1e-5),
    Op("gelu_none", 1, lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))), lambda x: x.gelu(approximate="none"),
       F and F.gelu, atol=1e-5),
    Op("quick_gelu", 1, lambda x: x * sigmoid(1.702 * x), Tensor.quick_gelu,
       torch and (lambda x: x * torch.sigmoid(1.702 * x))),
    Op("silu", 1, lambda x: x * sigmoid(x), Tensor.silu, F and F.silu),
    Op("sigmoid", 1, sigmoid, Tensor.sigmoid, torch and torch.sigmoid, low=-6, high=6),
    Op("tanh", 1, np.tanh, Tensor.tanh, torch and torch.tanh, low=-4, high=4, atol=1e-5),
    Op("sinh", 1, np.sinh, Tensor.sinh, torch and torch.sinh, low=-4, high=4, atol=1e-5),
    Op("cosh", 1, np.cosh, Tensor.cosh, torch and torch.cosh, low=-4, high=4, atol=1e-5),
    Op("asinh", 1, np.arcsinh, Tensor.asinh, torch and torch.asinh, low=-6, high=6, atol=1e-5),
    Op("acosh", 1, np.arccosh, Tensor.acosh, torch and torch.acosh, low=1.2, high=6, atol=1e-5),
    Op("atanh", 1, np.arctanh, Tensor.atanh, torch and torch.atanh, low=-0.9, high=0.9, atol=1e-5),
    Op("abs_builtin", 1, np.abs, abs, abs),
    Op("hardtanh", 1, lambda x: np.clip(x, -1, 1), Tensor.hardtanh, F and F.hardtanh),
    Op("softplus", 1, softplus, Tensor.softplus, F and F.softplus, low=-6, high=6, atol=1e-5),
    Op("softsign", 1, lambda x: x / (1 + np.abs(x)), Tensor.softsign, F and F.softsign),
    Op("mish", 1, lambda x: x * np.tanh(softplus(x)), Tensor.mish, F and F.mish, low=-4, high=4, atol=1e-5),
    Op("hardswish", 1, lambda x: x * np.clip(x + 3, 0, 6) / 6, Tensor.hardswish, F and F.hardswish, low=-5, high=5),
    Op("hardsigmoid", 1, lambda x: np.clip(x + 3, 0, 6) / 6, Tensor.hardsigmoid, F and F.hardsigmoid, low=-5, high=5),
    Op("logsigmoid", 1, lambda x: -softplus(-x), Tensor.logsigmoid, F and F.logsigmoid, atol=1e-5),
    Op("erf", 1, erf, Tensor.erf, torch and torch.erf, atol=1e-6, grad_atol=1e-3),
    Op("clip", 1, lambda x: np.clip(x, -0.5, 1.2), lambda x: x.clip(-0.5, 1.2),
       torch and (lambda x: torch.clip(x, -0.5, 1.2))),
    Op("clip_max", 1, lambda x: np.minimum(x, 0.3), lambda x: x.clip(max_=0.3),
       torch and (lambda x: torch.clip(x, max=0.3))),
    Op("clip_min", 1, lambda x: np.maximum(x, -0.5), lambda x: x.clip(min_=-0.5),
       torch and (lambda x: torch.clip(x, min=-0.5))),
    Op("pow_2", 1, lambda x: x**2, lambda x: x**2, lambda x: x**2),
    Op("pow_3", 1, lambda x: x**3, lambda x: x**3, lambda x: x**3, atol=1e-5),
    Op("pow_2.0", 1, lambda x: x**2.0, lambda x: x**2.0, lambda x: x**2.0),
    Op("pow_0", 1, lambda x: x**0, lambda x: x**0, lambda x: x**0),
    Op("pow_neg1", 1, lambda x: x**-1.0, lambda x: x**-1, lambda x: x**-1, low=0.5),
    Op("pow_neg2_negbase", 1, lambda x: x**-2.0, lambda x: x**-2, lambda x: x**-2, low=-2, high=-0.5),
    Op("pow_4_negbase", 1, lambda x: x**4, lambda x: x**4, lambda x: x**4, low=-2, high=-0.5, atol=1e-5),
    Op("pow_5_negbase", 1, lambda x: x**5, lambda x: x**5, lambda x: x**5, low=-2, high=-0.5, atol=1e-5),
    Op("pow_half", 1, np.sqrt, lambda x: x**0.5, lambda x: x**0.5, low=0.1),
    Op("pow_1.7", 1, lambda x: x**1.7, lambda x: x**1.7, lambda x: x**1.7, low=0.1, atol=1e-5),
    Op("pow_neg2.5", 1, lambda x: x**-2.5, lambda x: x**-2.5, lambda x: x**-2.5, low=0.5, atol=1e-5),
    Op("rpow_2", 1, lambda x: 2.0**x, lambda x: 2**x, lambda x: 2**x, atol=1e-5),
    Op("rpow_half", 1, lambda x: 0.5**x, lambda x: 0.5**x, lambda x: 0.5**x, atol=1e-5),
    Op("rsub", 1, lambda x: 3 - x, lambda x: 3 - x, lambda x: 3 - x),
    Op("rdiv", 1, lambda x: 3 / x, lambda x: 3 / x, lambda x: 3 / x, low=0.5, atol=1e-5),
]
# fmt: on

# fmt: off
BINARY = [
    Op("add", 2, np.add, Tensor.add, torch and torch.add),
    Op("sub", 2, np.subtract, Tensor.sub, torch and torch.sub),
    Op("mul", 2, np.multiply, Tensor.mul, torch and torch.mul),
    Op("div", 2, np.divide, Tensor.div, torch and torch.div, low=0.5, atol=1e-5),
    Op("maximum", 2, np.maximum, Tensor.maximum, torch and torch.maximum),
    Op("lerp_0.3", 2, lambda x, y: x + 0.3 * (y - x), lambda x, y: x.lerp(y, 0.3),
       torch and (lambda x, y: torch.lerp(x, y, 0.3))),
    Op("lerp_scalar_end", 2, lambda x, w: x + w * (1.5 - x), lambda x, w: x.lerp(1.5, w),
       torch and (lambda x, w: torch.lerp(x, torch.full_like(x, 1.5), w))),
    Op("minimum", 2, np.minimum, Tensor.minimum, torch and torch.minimum),
    Op("pow", 2, np.power, Tensor.pow, torch and torch.pow, low=0.5, atol=1e-5),
    Op("lt", 2, np.less, lambda x, y: x < y, lambda x, y: x < y),
    Op("le", 2, np.less_equal, lambda x, y: x <= y, lambda x, y: x <= y),
    Op("gt", 2, np.greater, lambda x, y: x > y, lambda x, y: x > y),
    Op("ge", 2, np.greater_equal, lambda x, y: x >= y, lambda x, y: x >= y),
    Op("eq", 2, np.equal, lambda x, y: x == y, lambda x, y: x == y),
    Op("ne", 2, np.not_equal, lambda x, y: x != y, lambda x, y: x != y),
    Op("sub_int", 2, np.subtract, Tensor.sub, torch and torch.sub, low=-2, high=3, dtype=np.int32),
]
# fmt: on
# NOTE: small integers make ties, where comparisons and maximum/minimum are interesting
INT_OPS = ("add", "mul", "maximum", "minimum", "lt", "le", "gt", "ge", "eq", "ne")
BINARY += [replace(op, name=f"{op.name}_int", low=-2, high=3, dtype=np.int32) for op in BINARY if op.name in INT_OPS]
HALF_OPS = ("exp", "relu", "sigmoid", "add", "mul", "div")
HALF = [
    replace(op, name=f"{op.name}_half", atol=1e-2, rtol=1e-2, grad_atol=1e-2, grad_rtol=1e-2, dtype=np.float16)
    for op in UNARY + BINARY
    if op.name in HALF_OPS
]

UNARY_SHAPES = {"2d": [(3, 4)], "scalar": [()], "zero": [(0, 3)]}
BINARY_SHAPES = {
    "same": [(3, 4), (3, 4)],
    "bcast": [(3, 1), (1, 4)],
    "bcast_rank": [(4,), (2, 3, 4)],
    "scalar": [(), (3, 4)],
    "scalar_scalar": [(), ()],
    "zero": [(0, 4), (4,)],
}


# fmt: off
REDUCES = [
    reduce_op("sum", lambda x, a, k: np.sum(x, a, keepdims=k), lambda x, a, k: x.sum(a, k),
              torch and (lambda x, a, k: torch.sum(x, tdim(x, a), keepdim=k)), atol=1e-5),
    reduce_op("mean", lambda x, a, k: np.mean(x, a, keepdims=k), lambda x, a, k: x.mean(a, k),
              torch and (lambda x, a, k: torch.mean(x, tdim(x, a), keepdim=k))),
    reduce_op("max", lambda x, a, k: np.max(x, a, keepdims=k), lambda x, a, k: x.max(a, k),
              torch and (lambda x, a, k: torch.amax(x, tdim(x, a), keepdim=k))),
    reduce_op("min", lambda x, a, k: np.min(x, a, keepdims=k), lambda x, a, k: x.min(a, k),
              torch and (lambda x, a, k: torch.amin(x, tdim(x, a), keepdim=k))),
    reduce_op("var", lambda x, a, k: np.var(x, a, keepdims=k, ddof=1), lambda x, a, k: x.var(a, k),
              torch and (lambda x, a, k: torch.var(x, tdim(x, a), keepdim=k)), atol=1e-5, scalar=False),
    reduce_op("var_biased", lambda x, a, k: np.var(x, a, keepdims=k), lambda x, a, k: x.var(a, k, correction=0),
              torch and (lambda x, a, k: torch.var(x, tdim(x, a), keepdim=k, correction=0)), atol=1e-5),
    reduce_op("std", lambda x, a, k: np.std(x, a, keepdims=k, ddof=1), lambda x, a, k: x.std(a, k),
              torch and (lambda x, a, k: torch.std(x, tdim(x, a), keepdim=k)), atol=1e-5, scalar=False),
    reduce_op("logsumexp", np_logsumexp, lambda x, a, k: x.logsumexp(a, k),
              torch and (lambda x, a, k: torch.logsumexp(x, tdim(x, a), keepdim=k)), atol=1e-5),
    reduce_op("argmax", lambda x, a, k: np.argmax(x, a, keepdims=k), lambda x, a, k: x.argmax(a, k),
              torch and (lambda x, a, k: torch.argmax(x, a, keepdim=k)),
              axes=((None, False), (None, True), *ONE_AXIS, (1, True)), forward_only=True),
    reduce_op("argmin", lambda x, a, k: np.argmin(x, a, keepdims=k), lambda x, a, k: x.argmin(a, k),
              torch and (lambda x, a, k: torch.argmin(x, a, keepdim=k)),
              axes=((None, False), *ONE_AXIS, (1, True)), forward_only=True),
    reduce_op("softmax", lambda x, a, k: np_softmax(x, a), lambda x, a, k: x.softmax(a),
              torch and (lambda x, a, k: torch.softmax(x, a)), axes=ONE_AXIS, scalar=False),
    reduce_op("log_softmax", lambda x, a, k: np.log(np_softmax(x, a)), lambda x, a, k: x.log_softmax(a),
              torch and (lambda x, a, k: torch.log_softmax(x, a)), axes=ONE_AXIS, atol=1e-5, scalar=False),
    reduce_op("cumsum", lambda x, a, k: np.cumsum(x, a), lambda x, a, k: x.cumsum(a),
              torch and (lambda x, a, k: torch.cumsum(x, a)), axes=ONE_AXIS, atol=1e-5, scalar=False),
]
# fmt: on


OPS = UNARY + BINARY + HALF + REDUCES


def shape_cases(op: Op) -> list:
    """(id, input shapes, (axis, keepdim) or None) for every case of one table row."""
    if op.axes is not None:
        cases = [(f"axis{a}-keep{k}", [(2, 3, 4)], (a, k)) for a, k in op.axes]
        return cases + ([("scalar", [()], (None, False))] if op.scalar else [])
    if op.dtype == np.float16:
        return [("2d", [(3, 4)] * op.arity, None)]
    return [(k, s, None) for k, s in (UNARY_SHAPES if op.arity == 1 else BINARY_SHAPES).items()]


# NOTE: on the GPU, every row's first case renders the row's ops in OpenCL; these rows take every case there too, for
# the launches (0-d, zero-size, broadcast, each reduce axis). The other cases run on the GPU in the slow tier.
ALL_CASES_ON_GPU = {"neg", "exp", "add", "lt", "add_int", "sum", "max", "argmax"}


def table_params() -> list:
    fast = lambda op, i: i == 0 or op.name in ALL_CASES_ON_GPU
    return [pytest.param(op, s, r, id=f"{op.name}-{k}", marks=() if fast(op, i) else SLOW_ON_GPU)
            for op in OPS for i, (k, s, r) in enumerate(shape_cases(op))]  # fmt: skip


@pytest.mark.parametrize("op,shapes,reduce", table_params())
def test_op_table(op: Op, shapes: list, reduce: tuple | None, device: str) -> None:
    np_fn, sg_fn, torch_fn, name = op.np_fn, op.sg_fn, op.torch_fn, op.name
    if reduce is not None:
        axis, keepdim = reduce
        np_fn, sg_fn = lambda x: op.np_fn(x, axis, keepdim), lambda x: op.sg_fn(x, axis, keepdim)
        torch_fn = op.torch_fn and (lambda x: op.torch_fn(x, axis, keepdim))
        name = f"{op.name}(axis={axis}, keepdim={keepdim})"
    check_op(
        shapes,
        np_fn,
        sg_fn,
        device=device,
        atol=op.atol,
        rtol=op.rtol,
        grad_atol=op.grad_atol,
        grad_rtol=op.grad_rtol,
        forward_only=op.forward_only,
        low=op.low,
        high=op.high,
        torch_fn=torch_fn,
        dtype=op.dtype,
        name=name,
    )


@pytest.mark.parametrize("fn", ["sum", "mean", "max", "min"])
def test_reduce_ints(fn: str, device: str) -> None:
    check_op(
        [(3, 4)],
        lambda x: getattr(np, fn)(x, 1),
        lambda x: getattr(x, fn)(1),
        device=device,
        dtype=np.int32,
        low=-5,
        high=5,
    )


@pytest.mark.parametrize("fn", ["sum", "max", "min", "any", "all"])
def test_reduce_bools(fn: str, device: str) -> None:
    check_op([(3, 4)], lambda x: getattr(np, fn)(x, 1), lambda x: getattr(x, fn)(1), device=device, dtype=np.bool_)


def test_reduce_zero_size(device: str) -> None:
    check_op([(0, 3)], lambda x: x.sum(0), lambda x: x.sum(0), device=device)
    check_op([(0, 3)], lambda x: x.sum(1), lambda x: x.sum(1), device=device)
    check_op([(2, 0)], lambda x: x.max(0), lambda x: x.max(0), device=device)


# ***** creation *****


@pytest.mark.parametrize(
    "data,dtype,shape",
    [
        ([[1, 2], [3, 4]], dtypes.int32, (2, 2)),
        ([1.5, 2], dtypes.float32, (2,)),
        ([True, False], dtypes.bool, (2,)),
        (3, dtypes.int32, ()),
        (2.5, dtypes.float32, ()),
        (True, dtypes.bool, ()),
        ([], dtypes.float32, (0,)),
        (np.arange(6, dtype=np.int64).reshape(2, 3), dtypes.int64, (2, 3)),
        (np.float16(1.5), dtypes.float16, ()),
        (np.ones((2, 1), dtype=np.uint8), dtypes.uint8, (2, 1)),
        ([[1, 2.5]], dtypes.float32, (1, 2)),
    ],
)
def test_tensor_from_data(data: Any, dtype: Any, shape: tuple, device: str) -> None:
    t = Tensor(data, device=device)
    assert (t.dtype, t.shape, t.device) == (dtype, shape, device)
    np.testing.assert_equal(t.numpy(), np.array(data, dtype=dtype.np))


def test_tensor_with_dtype(device: str) -> None:
    assert Tensor([1, 2], dtype=dtypes.float32, device=device).numpy().dtype == np.float32
    assert Tensor(np.ones(3), dtype="float16", device=device).dtype == dtypes.float16
    assert Tensor(1, dtype=dtypes.float32, device=device).item() == 1.0


@pytest.mark.parametrize(
    "make,want",
    [
        (lambda d: Tensor.zeros(2, 3, device=d), np.zeros((2, 3), np.float32)),
        (lambda d: Tensor.zeros((2, 3), device=d), np.zeros((2, 3), np.float32)),
        (lambda d: Tensor.ones(4, device=d), np.ones(4, np.float32)),
        (lambda d: Tensor.ones(2, 2, dtype=dtypes.int32, device=d), np.ones((2, 2), np.int32)),
        (lambda d: Tensor.full((2, 3), 7, device=d), np.full((2, 3), 7, np.int32)),
        (lambda d: Tensor.full((2,), 1.5, device=d), np.full(2, 1.5, np.float32)),
        (lambda d: Tensor.full((), 2.0, device=d), np.array(2.0, np.float32)),
        (lambda d: Tensor.arange(5, device=d), np.arange(5, dtype=np.int32)),
        (lambda d: Tensor.arange(1, 7, 2, device=d), np.arange(1, 7, 2, dtype=np.int32)),
        (lambda d: Tensor.arange(5, 0, -1, device=d), np.arange(5, 0, -1, dtype=np.int32)),
        (lambda d: Tensor.arange(0, 1, 0.25, device=d), np.arange(0, 1, 0.25, dtype=np.float32)),
        (lambda d: Tensor.eye(3, device=d), np.eye(3, dtype=np.float32)),
        (lambda d: Tensor.eye(2, 3, device=d), np.eye(2, 3, dtype=np.float32)),
        (lambda d: Tensor.ones(2, 3, device=d).zeros_like(), np.zeros((2, 3), np.float32)),
        (lambda d: Tensor.zeros(2, dtype=dtypes.int32, device=d).ones_like(), np.ones(2, np.int32)),
        (lambda d: Tensor.zeros(2, 2, device=d).full_like(3.5), np.full((2, 2), 3.5, np.float32)),
    ],
    ids=lambda x: "" if callable(x) else None,
)
def test_creation(make: Callable, want: np.ndarray, device: str) -> None:
    got = make(device).numpy()
    assert (got.dtype, got.shape) == (want.dtype, want.shape), f"got {got.dtype} {got.shape}"
    np.testing.assert_allclose(got, want)


def test_random_creation(device: str) -> None:
    Tensor.manual_seed(42)
    r, n = Tensor.rand(100, 100, device=device).numpy(), Tensor.randn(100, 100, device=device).numpy()
    assert r.shape == n.shape == (100, 100) and r.dtype == n.dtype == np.float32
    assert 0 <= r.min() and r.max() < 1 and abs(r.mean() - 0.5) < 0.02 and abs(r.std() - 12**-0.5) < 0.02
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    u = Tensor.uniform(1000, low=-3, high=5, device=device).numpy()
    assert -3 <= u.min() and u.max() < 5 and abs(u.mean() - 1) < 0.3
    assert Tensor.rand(2, 3, dtype=dtypes.float16, device=device).dtype == dtypes.float16


@pytest.mark.parametrize(
    "init,shape,bound",
    [
        ("kaiming_uniform", (64, 50), math.sqrt(3) * math.sqrt(2 / (1 + 0.01**2)) / math.sqrt(50)),
        ("kaiming_uniform", (16, 4, 3, 3), math.sqrt(3) * math.sqrt(2 / (1 + 0.01**2)) / math.sqrt(36)),
        ("glorot_uniform", (64, 50), math.sqrt(6 / (64 + 50))),
    ],
)
def test_uniform_inits(init: str, shape: tuple, bound: float, device: str) -> None:
    Tensor.manual_seed(0)
    x = getattr(Tensor, init)(*shape, device=device).numpy()
    assert x.shape == shape and -bound <= x.min() and x.max() <= bound and x.max() > 0.9 * bound
    assert abs(x.std() - bound / math.sqrt(3)) < 0.1 * bound


def test_kaiming_normal(device: str) -> None:
    Tensor.manual_seed(0)
    x = Tensor.kaiming_normal(128, 64, device=device).numpy()
    assert abs(x.std() - math.sqrt(2 / (1 + 0.01**2)) / math.sqrt(64)) < 0.01 and abs(x.mean()) < 0.01


def test_manual_seed_reproducible(device: str) -> None:
    def draw(seed: int) -> list[np.ndarray]:
        Tensor.manual_seed(seed)
        return [
            Tensor.rand(3, 4, device=device).numpy(),
            Tensor.randn(5, device=device).numpy(),
            Tensor.kaiming_uniform(4, 3, device=device).numpy(),
        ]

    for a, b in zip(draw(7), draw(7)):
        np.testing.assert_equal(a, b)
    assert not np.array_equal(draw(7)[0], draw(8)[0])
    Tensor.manual_seed(7)
    assert not np.array_equal(Tensor.rand(3, 4, device=device).numpy(), Tensor.rand(3, 4, device=device).numpy())


# ***** movement *****


def test_reshape(device: str) -> None:
    check_op([(2, 3, 4)], lambda x: x.reshape(6, 4), lambda x: x.reshape(6, 4), device=device)
    check_op([(2, 3, 4)], lambda x: x.reshape(4, -1), lambda x: x.reshape(4, -1), device=device)
    check_op([(2, 3, 4)], lambda x: x.reshape(-1), lambda x: x.reshape(-1), device=device)
    check_op([(2, 3, 4)], lambda x: x.reshape(2, 1, 12, 1), lambda x: x.reshape((2, 1, 12, 1)), device=device)
    check_op([()], lambda x: x.reshape(1, 1), lambda x: x.reshape(1, 1), device=device)
    check_op([(1, 1)], lambda x: x.reshape(()), lambda x: x.reshape(()), device=device)


def test_permute(device: str) -> None:
    check_op(
        [(2, 3, 4)],
        lambda x: x.transpose(2, 0, 1),
        lambda x: x.permute(2, 0, 1),
        device=device,
        torch_fn=lambda x: x.permute(2, 0, 1),
    )
    check_op([(2, 3, 4)], lambda x: x.transpose(2, 0, 1), lambda x: x.permute((-1, 0, 1)), device=device)
    check_op([(2, 3, 4, 1)], lambda x: x.transpose(3, 1, 0, 2), lambda x: x.permute(3, 1, 0, 2), device=device)
    check_op([()], lambda x: x, lambda x: x.permute(()), device=device)


def test_expand(device: str) -> None:
    check_op(
        [(3, 1)],
        lambda x: np.broadcast_to(x, (3, 4)),
        lambda x: x.expand(3, 4),
        device=device,
        torch_fn=lambda x: x.expand(3, 4),
    )
    check_op(
        [(3, 1)],
        lambda x: np.broadcast_to(x, (2, 3, 4)),
        lambda x: x.expand((2, -1, 4)),
        device=device,
        torch_fn=lambda x: x.expand(2, -1, 4),
    )
    check_op([()], lambda x: np.broadcast_to(x, (2, 3)), lambda x: x.expand(2, 3), device=device)


def test_pad(device: str) -> None:
    check_op(
        [(2, 3)],
        lambda x: np.pad(x, ((1, 2), (0, 1))),
        lambda x: x.pad(((1, 2), (0, 1))),
        device=device,
        torch_fn=lambda x: F.pad(x, (0, 1, 1, 2)),
    )
    check_op(
        [(2, 3)],
        lambda x: np.pad(x, ((0, 0), (2, 1)), constant_values=1.5),
        lambda x: x.pad((None, (2, 1)), value=1.5),
        device=device,
        torch_fn=lambda x: F.pad(x, (2, 1), value=1.5),
    )
    check_op(
        [(3, 4)],
        lambda x: np.pad(x[1:, :3], ((0, 2), (1, 0))),
        lambda x: x.pad(((-1, 2), (1, -1))),
        device=device,
        torch_fn=lambda x: F.pad(x, (1, -1, -1, 2)),
    )
    check_op(
        [(3, 4)],
        lambda x: np.pad(x[1:, :3], ((0, 2), (1, 0)), constant_values=-2.0),
        lambda x: x.pad(((-1, 2), (1, -1)), value=-2.0),
        device=device,
    )
    check_op(
        [(2, 3, 4)],
        lambda x: np.pad(x, ((0, 0), (1, 1), (3, 0))),
        lambda x: x.pad2d((3, 0, 1, 1)),
        device=device,
        torch_fn=lambda x: F.pad(x, (3, 0, 1, 1)),
    )
    check_op(
        [(2, 2)],
        lambda x: np.pad(x.astype(np.int32), 1),
        lambda x: x.cast(dtypes.int32).pad(((1, 1), (1, 1))),
        device=device,
        forward_only=True,
    )


def test_shrink(device: str) -> None:
    check_op([(4, 5)], lambda x: x[1:3, 0:2], lambda x: x.shrink(((1, 3), (0, 2))), device=device)
    check_op([(4, 5)], lambda x: x[:, 2:5], lambda x: x.shrink((None, (2, 5))), device=device)


def test_flip(device: str) -> None:
    check_op([(2, 3, 4)], lambda x: np.flip(x, 0), lambda x: x.flip(0), device=device, torch_fn=lambda x: x.flip(0))
    check_op([(2, 3, 4)], lambda x: np.flip(x, (0, 2)), lambda x: x.flip((0, 2)), device=device)
    check_op([(2, 3, 4)], lambda x: np.flip(x, -1), lambda x: x.flip(-1), device=device)


def test_transpose_flatten_squeeze(device: str) -> None:
    check_op([(3, 4)], lambda x: x.T, lambda x: x.transpose(), device=device, torch_fn=lambda x: x.T)
    check_op([(3, 4)], lambda x: x.T, lambda x: x.T, device=device)
    check_op(
        [(2, 3, 4)],
        lambda x: np.swapaxes(x, 0, 2),
        lambda x: x.transpose(0, 2),
        device=device,
        torch_fn=lambda x: x.transpose(0, 2),
    )
    check_op([(2, 3, 4)], lambda x: np.swapaxes(x, -1, 1), lambda x: x.transpose(-1, 1), device=device)
    check_op([(2, 3, 4)], lambda x: x.reshape(-1), lambda x: x.flatten(), device=device)
    check_op(
        [(2, 3, 4)], lambda x: x.reshape(2, 12), lambda x: x.flatten(1), device=device, torch_fn=lambda x: x.flatten(1)
    )
    check_op([(2, 3, 4, 2)], lambda x: x.reshape(2, 12, 2), lambda x: x.flatten(1, 2), device=device)
    check_op([()], lambda x: x.reshape(1), lambda x: x.flatten(), device=device, torch_fn=lambda x: x.flatten())
    check_op([(1, 3, 1, 4)], lambda x: x.reshape(3, 4), lambda x: x.squeeze(), device=device)
    check_op([(1, 3, 1, 4)], lambda x: x.reshape(3, 1, 4), lambda x: x.squeeze(0), device=device)
    check_op([(1, 3, 1, 4)], lambda x: x.reshape(1, 3, 4), lambda x: x.squeeze(-2), device=device)
    check_op([(1, 3, 1, 4)], lambda x: x, lambda x: x.squeeze(1), device=device, torch_fn=lambda x: x.squeeze(1))
    check_op([(3, 4)], lambda x: x[None], lambda x: x.unsqueeze(0), device=device)
    check_op(
        [(3, 4)], lambda x: x[..., None], lambda x: x.unsqueeze(-1), device=device, torch_fn=lambda x: x.unsqueeze(-1)
    )
    check_op([(3, 4)], lambda x: x[:, None], lambda x: x.unsqueeze(1), device=device)
    check_op([()], lambda x: x[None], lambda x: x.unsqueeze(0), device=device)
    check_op(
        [(2, 6)],
        lambda x: x.reshape(2, 2, 3),
        lambda x: x.unflatten(1, (2, 3)),
        device=device,
        torch_fn=lambda x: x.unflatten(1, (2, 3)),
    )
    check_op([(6, 2)], lambda x: x.reshape(3, 2, 2), lambda x: x.unflatten(0, (-1, 2)), device=device)


T = np.array  # NOTE: a numpy array in an index stands for a Tensor index (see as_index)
GETITEM = {
    "int": 1,
    "neg_int": -1,
    "ints": (1, 2),
    "all_ints": (1, -2, 3),
    "slice": slice(1, 3),
    "slice_step": slice(None, None, 2),
    "slices": (slice(1, None), slice(None, 4, 3), slice(-4, -1)),
    "neg_step": slice(None, None, -1),
    "neg_step2": (slice(None), slice(4, 0, -2)),
    "neg_step3": slice(-1, -4, -2),
    "past_end": slice(2, 10),
    "none": None,
    "none_int": (None, 1, None),
    "ellipsis": (Ellipsis, 1),
    "ellipsis_mid": (1, Ellipsis, None, 2),
    "ellipsis_only": Ellipsis,
    "tensor": T([0, 2, 3]),
    "tensor_neg": T([[0, -1], [3, -4]]),
    "tensor_repeat": T([1, 1, 0]),
    "tensors_2": (T([0, 2]), T([1, 4])),
    "tensors_bcast": (T([[0], [3]]), T([1, 2, 4])),
    "tensor_adjacent": (slice(None), T([0, 4]), T([1, 5])),
    "tensor_nonadjacent": (T([0, 3]), slice(1, 3), T([1, 5])),
    "tensor_after_slice": (slice(None), T([[0, 1], [2, 3]])),
    "tensor_last": (Ellipsis, T([5, 0])),
    "tensor_and_none": (None, slice(None), T([1, 2])),
    "tensor_then_ellipsis": (T([0, 2]), Ellipsis, slice(1, 3)),
    "tensor_none_tensor": (slice(None), T([2]), None, T([1])),
    "list": [0, 2, 3],
    "list_neg_repeat": [-1, 1, 1, -4],
    "nested_list": [[0, 1], [3, 2]],
    "empty_list": [],
    "empty_tensor": T([], dtype=np.int64),
    "tensor_int8": T([1, -1, -4], dtype=np.int8),
    "tensor_uint8": T([3, 0], dtype=np.uint8),  # NOTE: integers, as numpy (torch reads uint8 as a deprecated mask)
    "tensor_int32": T([[2], [0]], dtype=np.int32),
    "tensor_0d": T(2),
    "tensors_0d": (T(2), slice(None), T(-1)),
    "list_then_int": ([0, 3], 1),
    "list_slice_list": ([0, 3], slice(1, 4), [1, 5]),
    "tensor_none_tensor_front": (T([0, 1]), None, T([1, 2])),
    "tensor_ellipsis_tensor": (T([0, 1]), Ellipsis, T([1, 2])),
    "lists_bcast": ([[0], [3]], [1, 2, 4]),
    "repeat_2d": (T([1, 1, 1, -3]), T([2, 2, 0, 2])),
    "three_tensors": (T([[0], [3]]), T([1, 1, 4]), T([5])),
    "bool_list": [True, False, True, True],
    "bool_list_2d": [[True, False, True, False, False]] * 2 + [[False] * 5, [True] * 5],
    "bool_after_slice": (slice(None), [False, True, True, False, True]),
    "bool_and_tensor": ([True, False, True, False], T([1, 4])),
    "bool_true": True,
    "bool_false": False,
    "bool_true_and_list": ([0, 2], True),
}


def as_index(idx: Any, make: Callable, lists: bool = False) -> Any:
    """idx with its numpy arrays (and its lists, if `lists`) made into index tensors by `make`."""
    convert = lambda i: make(i) if isinstance(i, np.ndarray) or (lists and isinstance(i, list)) else i
    return tuple(convert(i) for i in idx) if isinstance(idx, tuple) else convert(idx)


def torch_index(i: Any) -> Any:
    """A torch index tensor for a list or array: int64, or bool for a mask (a nested list is one index, as numpy)."""
    arr = np.asarray(i)
    return torch.tensor(arr if arr.dtype == np.bool_ else arr.astype(np.int64))


def has_neg_step(idx: Any) -> bool:
    return any(isinstance(i, slice) and (i.step or 1) < 0 for i in (idx if isinstance(idx, tuple) else (idx,)))


GETITEM_ON_GPU = {"slices", "neg_step2", "none_int", "tensor", "tensors_bcast", "tensor_int8", "bool_list_2d",
                  "empty_tensor"}  # fmt: skip


@pytest.mark.parametrize("idx", gpu_keeps(GETITEM, GETITEM_ON_GPU))
def test_getitem(idx: Any, device: str) -> None:
    torch_fn = None if has_neg_step(idx) or torch is None else (lambda x: x[as_index(idx, torch_index, lists=True)])
    check_op(
        [(4, 5, 6)],
        lambda x: x[idx],
        lambda x: x[as_index(idx, lambda i: Tensor(i, device=device))],
        device=device,
        torch_fn=torch_fn,
    )


def test_getitem_list_index(device: str) -> None:
    check_op([(4, 5)], lambda x: x[[0, 3]], lambda x: x[[0, 3]], device=device)
    check_op([(4, 5)], lambda x: x[np.array([3, 0])], lambda x: x[np.array([3, 0])], device=device)
    mask = np.array([[True, False, True, False, False]] * 4)
    check_op([(4, 5)], lambda x: x[mask], lambda x: x[mask], device=device)
    nothing = np.zeros(4, dtype=bool)
    check_op([(4, 5)], lambda x: x[nothing], lambda x: x[nothing], device=device)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.bool_, np.float16])
def test_getitem_keeps_dtype(dtype: Any, device: str) -> None:
    x0 = np.arange(-6, 6).reshape(3, 4)
    x0 = x0 % 3 == 0 if dtype == np.bool_ else x0.astype(dtype)
    x = Tensor(x0, device=device)
    for idx in ([2, 0, 2], (Tensor([1, -1], device=device), [[0], [3]]), (slice(None), Tensor([3, 1], device=device))):
        want = x0[tuple(i.numpy() if isinstance(i, Tensor) else i for i in idx) if isinstance(idx, tuple) else idx]
        got = x[idx]
        assert got.dtype == x.dtype, f"x[{idx}] of {x.dtype} gave {got.dtype}"
        np.testing.assert_array_equal(got.numpy(), want)


def test_getitem_where_numpy_and_torch_differ(device: str) -> None:
    # NOTE: PyTorch applies ints before tensor indices and counts an empty Ellipsis as no separator; numpy does neither
    pytest.importorskip("torch")
    check_op(
        [(4, 5, 6)],
        lambda x: x[1][:, [0, 2]],
        lambda x: x[1, :, Tensor([0, 2], device=device)],
        device=device,
        torch_fn=lambda x: x[1, :, torch.tensor([0, 2])],
    )
    check_op(
        [(4, 5, 6)],
        lambda x: x[:, [2], [1]],
        lambda x: x[:, Tensor([2], device=device), ..., Tensor([1], device=device)],
        device=device,
        torch_fn=lambda x: x[:, torch.tensor([2]), ..., torch.tensor([1])],
    )


def random_index(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    """A random index for `shape`: ints, slices (negative steps too), None, an Ellipsis, and advanced indices on
    random axes: lists, or arrays standing for Tensors, of random int dtypes with negative and repeated values in
    broadcasting shapes, or else one 1-d bool mask."""
    bshape = tuple(int(s) for s in rng.integers(1, 4, rng.integers(0, 3)))
    mask_at = int(rng.integers(len(shape))) if rng.random() < 0.2 else -1
    kinds = ["int", "slice"] if mask_at >= 0 else ["int", "slice", "list", "tensor"]
    items: list[Any] = []
    for d, size in enumerate(shape):
        kind = "mask" if d == mask_at else rng.choice(kinds, p=[0.2, 0.8] if mask_at >= 0 else [0.15, 0.25, 0.3, 0.3])
        if kind == "int":
            items.append(int(rng.integers(-size, size)))
        elif kind == "slice":
            a, b = (int(v) if rng.random() < 0.7 else None for v in rng.integers(-size - 1, size + 1, 2))
            items.append(slice(a, b, int(rng.choice([1, 1, 2, -1, -2]))))
        elif kind == "mask":
            items.append([bool(v) for v in rng.random(size) < 0.5])
        else:
            own = tuple(1 if rng.random() < 0.3 else s for s in bshape[rng.integers(len(bshape) + 1) :])
            vals = rng.integers(-size, size, own).astype(rng.choice([np.int64, np.int32, np.int8]))
            items.append(vals.tolist() if kind == "list" else vals)
    a, b = sorted(int(v) for v in rng.integers(len(items) + 1, size=2))
    # NOTE: an Ellipsis stands for the axes a..b (maybe none); without one, trailing axes are left out
    items = items[:a] + [Ellipsis] + items[b:] if rng.random() < 0.3 else items[: rng.integers(1, len(items) + 1)]
    if rng.random() < 0.3:
        items.insert(rng.integers(len(items) + 1), None)
    return tuple(items)


def torch_semantics(x: np.ndarray, idx: tuple) -> np.ndarray:
    """numpy indexing with PyTorch's placement rules (specgrad's): ints and 0-d index tensors apply first, and an
    Ellipsis that covers no axis does not separate advanced indices. Each item but None and Ellipsis takes one axis
    (masks are 1-d)."""
    at = [k for k, i in enumerate(idx) if i is Ellipsis]
    fill = [slice(None)] * (x.ndim - sum(1 for i in idx if i is not None and i is not Ellipsis))
    items = list(idx[: at[0]]) + fill + list(idx[at[0] + 1 :]) if at else list(idx) + fill
    is_int = lambda i: isinstance(i, int) or (isinstance(i, np.ndarray) and i.ndim == 0)
    first = tuple(i if is_int(i) else slice(None) for i in items if i is not None)
    return x[first][tuple(i for i in items if not is_int(i))]


@pytest.mark.parametrize("seed", [*(pytest.param(s, marks=() if s < 2 else SLOW_ON_GPU) for s in range(20)),
                                  *(pytest.param(s, marks=pytest.mark.slow) for s in range(20, 300))])  # fmt: skip
def test_getitem_random(seed: int, device: str) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 6, rng.integers(1, 5)))
    idx = random_index(rng, shape)
    torch_fn = None if torch is None or has_neg_step(idx) else (lambda x: x[as_index(idx, torch_index, lists=True)])
    check_op(
        [shape],
        lambda x: torch_semantics(x, idx),
        lambda x: x[as_index(idx, lambda i: Tensor(i, device=device))],
        device=device,
        torch_fn=torch_fn,
        name=f"x[{idx}] for x of shape {shape}",
    )


def test_zero_size_data(device: str) -> None:
    x = Tensor.zeros(0, 2, device=device)
    assert x.shape == (0, 2) and x.tolist() == [] and x.numpy().shape == (0, 2)
    assert Tensor.ones(2, 0, device=device).sum().item() == 0 and Tensor.full((0,), 3).numel() == 0


def test_zero_size_movement(device: str) -> None:
    check_op([(0, 4)], lambda x: x.reshape(2, 0, 2), lambda x: x.reshape(2, 0, 2), device=device)
    check_op([(0, 4)], lambda x: x.reshape(-1, 4), lambda x: x.reshape(-1, 4), device=device)
    check_op([(1, 4)], lambda x: np.broadcast_to(x, (0, 4)), lambda x: x.expand(0, 4), device=device)
    check_op([(4, 5)], lambda x: x[2:2], lambda x: x.shrink(((2, 2), None)), device=device)
    check_op([(4, 5)], lambda x: x[3:1], lambda x: x[3:1], device=device)
    check_op([(0, 3)], lambda x: x.T, lambda x: x.T, device=device)
    check_op([(0, 3)], lambda x: np.pad(x, ((1, 0), (0, 0))), lambda x: x.pad(((1, 0), None)), device=device)


def test_cat_stack(device: str) -> None:
    check_op(
        [(2, 3), (4, 3)],
        lambda x, y: np.concatenate([x, y]),
        lambda x, y: x.cat(y),
        device=device,
        torch_fn=lambda x, y: torch.cat([x, y]),
    )
    check_op(
        [(2, 3), (2, 1), (2, 2)], lambda *xs: np.concatenate(xs, 1), lambda x, *ys: x.cat(*ys, dim=1), device=device
    )
    check_op([(2, 3), (2, 1)], lambda x, y: np.concatenate([x, y], -1), lambda x, y: x.cat(y, dim=-1), device=device)
    check_op([(2, 3), (0, 3)], lambda x, y: np.concatenate([x, y]), lambda x, y: x.cat(y), device=device)
    check_op(
        [(2, 3), (2, 3)],
        lambda x, y: np.stack([x, y]),
        lambda x, y: Tensor.stack([x, y]),
        device=device,
        torch_fn=lambda x, y: torch.stack([x, y]),
    )
    check_op([(2, 3), (2, 3), (2, 3)], lambda *xs: np.stack(xs, 1), lambda *xs: Tensor.stack(xs, dim=1), device=device)
    check_op([(2, 3), (2, 3)], lambda x, y: np.stack([x, y], -1), lambda x, y: Tensor.stack([x, y], -1), device=device)
    check_op([(), ()], lambda x, y: np.stack([x, y]), lambda x, y: Tensor.stack([x, y]), device=device)


def test_repeat(device: str) -> None:
    check_op(
        [(2, 3)],
        lambda x: np.tile(x, (2, 1)),
        lambda x: x.repeat(2, 1),
        device=device,
        torch_fn=lambda x: x.repeat(2, 1),
    )
    check_op(
        [(2, 3)],
        lambda x: np.tile(x, (2, 1, 3)),
        lambda x: x.repeat((2, 1, 3)),
        device=device,
        torch_fn=lambda x: x.repeat(2, 1, 3),
    )
    check_op([()], lambda x: np.tile(x, 3), lambda x: x.repeat(3), device=device)


ROLLS = {  # shifts, dims
    "one_axis": (1, 0),
    "negative": (-2, 1),
    "past_the_size": (7, -1),
    "two_axes": ((1, -3), (0, 2)),
    "one_axis_twice": ((2, 2), (1, 1)),
    "zero": (0, 0),
    "flat": (5, None),
    "flat_negative": (-3, None),
}


@pytest.mark.parametrize("case", gpu_keeps(ROLLS, {"two_axes", "flat"}))
def test_roll(case: tuple, device: str) -> None:
    shifts, dims = case
    check_op(
        [(3, 4, 5)],
        lambda x: np.roll(x, shifts, dims),
        lambda x: x.roll(shifts, dims),
        device=device,
        torch_fn=lambda x: torch.roll(x, shifts, dims),
    )


def test_linspace_and_masked_fill(device: str) -> None:
    for start, stop, steps in [(0, 1, 5), (-2.5, 3, 7), (3, -1, 4), (1, 2, 1), (0, 1, 0)]:
        got = Tensor.linspace(start, stop, steps, device=device)
        assert got.dtype == dtypes.float32 and got.device == device
        np.testing.assert_allclose(got.numpy(), np.linspace(start, stop, steps), rtol=1e-6, atol=1e-6)
        if torch is not None:
            np.testing.assert_allclose(got.numpy(), torch.linspace(start, stop, steps).numpy(), rtol=1e-6, atol=1e-6)
    mask = np.array([[True, False, True, False]] * 3)
    check_op(
        [(3, 4), mask],
        lambda x, m: np.where(m, -1.0, x),
        lambda x, m: x.masked_fill(m, -1.0),
        device=device,
        torch_fn=lambda x, m: x.masked_fill(m, -1.0),
    )
    check_op([(3, 4), mask[0]], lambda x, m: np.where(m, 0.0, x), lambda x, m: x.masked_fill(m, 0), device=device)


@pytest.mark.parametrize("i", [0, pytest.param(1, marks=SLOW_ON_GPU), pytest.param(2, marks=SLOW_ON_GPU)])
def test_chunk_split(i: int, device: str) -> None:
    check_op(
        [(7, 3)],
        lambda x: x[3 * i : 3 * i + 3],
        lambda x: x.chunk(3)[i],
        device=device,
        torch_fn=lambda x: x.chunk(3)[i],
    )
    check_op([(2, 6)], lambda x: x[:, 2 * i : 2 * i + 2], lambda x: x.chunk(3, dim=1)[i], device=device)
    check_op(
        [(7, 3)],
        lambda x: x[[0, 2, 5, 7][i] : [0, 2, 5, 7][i + 1]],
        lambda x: x.split([2, 3, 2])[i],
        device=device,
        torch_fn=lambda x: x.split([2, 3, 2])[i],
    )
    check_op([(7, 3)], lambda x: x[3 * i : 3 * i + 3], lambda x: x.split(3)[i], device=device)
    assert len(Tensor.ones(7, 3, device=device).chunk(3)) == 3 and len(Tensor.ones(7, device=device).split(2)) == 4


def test_gather(device: str) -> None:
    idx = np.array([[0, 3], [1, 1], [2, 0]], dtype=np.int32)
    check_op(
        [(3, 4), idx],
        lambda x, i: np.take_along_axis(x, i, 1),
        lambda x, i: x.gather(1, i),
        device=device,
        torch_fn=lambda x, i: torch.gather(x, 1, i.long()),
    )
    idx0 = np.array([[0, 2, 1, 0], [2, 2, 0, 1]], dtype=np.int32)
    check_op(
        [(3, 4), idx0],
        lambda x, i: np.take_along_axis(x, i, 0),
        lambda x, i: x.gather(0, i),
        device=device,
        torch_fn=lambda x, i: torch.gather(x, 0, i.long()),
    )
    idx3 = np.array([[[1], [0]], [[2], [2]]], dtype=np.int32)
    check_op([(2, 2, 3), idx3], lambda x, i: np.take_along_axis(x, i, -1), lambda x, i: x.gather(-1, i), device=device)


@pytest.mark.parametrize("diagonal", [pytest.param(0, marks=SLOW_ON_GPU), 1, pytest.param(-1, marks=SLOW_ON_GPU)])
def test_tril_triu(diagonal: int, device: str) -> None:
    check_op(
        [(3, 4)],
        lambda x: np.tril(x, diagonal),
        lambda x: x.tril(diagonal),
        device=device,
        torch_fn=lambda x: x.tril(diagonal),
    )
    check_op(
        [(2, 4, 3)],
        lambda x: np.triu(x, diagonal),
        lambda x: x.triu(diagonal),
        device=device,
        torch_fn=lambda x: x.triu(diagonal),
    )


# ***** elementwise extras: where, integer division, pow with tensor exponents *****


INT_UNARY = {  # name: stays int (as torch) or becomes float32
    "neg": True,
    "abs": True,
    "sign": True,
    "relu": True,
    "square": True,
    "round": True,
    "floor": True,
    "ceil": True,
    "trunc": True,
    "exp": False,
    "log": False,
    "sqrt": False,
    "reciprocal": False,
    "sin": False,
    "sigmoid": False,
}


@pytest.mark.parametrize("name", list(INT_UNARY))
def test_unary_on_ints(name: str, device: str) -> None:
    op = next(op for op in UNARY if op.name == name)
    x = np.array([1, -2, 3, 0, 7], dtype=np.int32) if INT_UNARY[name] else np.array([1, 2, 3, 4, 7], dtype=np.int32)
    want = np.int32 if INT_UNARY[name] else np.float32
    check_op(
        [x],
        lambda x: op.np_fn(x.astype(np.float64)).astype(want),
        op.sg_fn,
        device=device,
        atol=1e-6,
        torch_fn=op.torch_fn,
    )
    assert op.sg_fn(Tensor(x, device=device)).dtype == dtypes.from_np(want)


def test_where(device: str) -> None:
    cond = np.array([[True, False, True, False]] * 2 + [[False] * 4])
    check_op(
        [cond, (3, 4), (3, 4)], np.where, lambda c, x, y: c.where(x, y), device=device, torch_fn=torch and torch.where
    )
    check_op(
        [cond[:, :1], (4,), ()], np.where, lambda c, x, y: c.where(x, y), device=device, torch_fn=torch and torch.where
    )
    check_op([cond, (3, 4)], lambda c, x: np.where(c, x, 0.5), lambda c, x: c.where(x, 0.5), device=device)
    check_op([cond, (4,)], lambda c, y: np.where(c, -1.0, y), lambda c, y: c.where(-1.0, y), device=device)
    check_op([(3, 4)], lambda x: np.where(x > 0, x, 0.0), lambda x: (x > 0).where(x, 0.0), device=device)
    check_op([cond, (3, 4)], lambda c, x: np.where(c, 2.0, 3.0) * x, lambda c, x: c.where(2.0, 3.0) * x, device=device)


INT_A = np.array([-7, -7, 7, 7, -6, 6, 0, 5, -1, 9], dtype=np.int32)
INT_B = np.array([2, -2, 2, -2, 3, -3, 4, 5, 3, -4], dtype=np.int32)


def test_int_division(device: str) -> None:
    check_op([INT_A, INT_B], np.floor_divide, lambda a, b: a // b, device=device, torch_fn=lambda a, b: a // b)
    check_op([INT_A, INT_B], np.mod, lambda a, b: a % b, device=device, torch_fn=lambda a, b: a % b)
    check_op([INT_A, INT_B], np.true_divide, lambda a, b: a / b, device=device, torch_fn=lambda a, b: a / b)
    check_op([INT_A], lambda a: a // 3, lambda a: a // 3, device=device, torch_fn=lambda a: a // 3)
    check_op([INT_A], lambda a: a % -3, lambda a: a % -3, device=device, torch_fn=lambda a: a % -3)
    check_op([INT_B], lambda b: 7 // b, lambda b: 7 // b, device=device)
    check_op([INT_B], lambda b: -7 % b, lambda b: -7 % b, device=device)


def test_float_floordiv_mod(device: str) -> None:
    check_op([(3, 4), (3, 4)], np.floor_divide, lambda a, b: a // b, device=device, low=0.5, high=4)
    check_op([(3, 4), (3, 4)], np.mod, lambda a, b: a % b, device=device, low=0.5, high=4, torch_fn=lambda a, b: a % b)
    check_op([(3, 4)], lambda a: np.mod(a, -0.7), lambda a: a % -0.7, device=device, torch_fn=lambda a: a % -0.7)


def test_pow_tensor_exponents(device: str) -> None:
    neg = [[-2.0, -1.5, -0.5], [-1.2, -0.8, 1.3]]
    ints = np.array([[2, 3, -1], [0, -2, 3]], dtype=np.int32)
    check_op([neg, ints], np.power, lambda x, y: x**y, device=device, torch_fn=lambda x, y: x**y)
    check_op(
        [neg, np.array([[2.0, 3.0, -1.0], [0.0, -2.0, 0.5]], dtype=np.float32)],
        np.power,
        lambda x, y: x**y,
        device=device,
        forward_only=True,
    )
    check_op([(3, 4)], lambda y: np.power(2.0, y), lambda y: Tensor(2.0, device=device) ** y, device=device)
    check_op([ints], lambda y: np.power(2.0, y), lambda y: 2.0**y, device=device)
    check_op([ints], lambda y: y**2, lambda y: y**2, device=device, torch_fn=lambda y: y**2)
    check_op([np.abs(ints)], lambda y: y**4, lambda y: y**4, device=device, torch_fn=lambda y: y**4)


def test_logical_ops(device: str) -> None:
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    check_op([a, b], np.logical_and, lambda x, y: x & y, device=device, torch_fn=lambda x, y: x & y)
    check_op([a, b], np.logical_or, lambda x, y: x | y, device=device, torch_fn=lambda x, y: x | y)
    check_op([a, b], np.logical_xor, lambda x, y: x ^ y, device=device, torch_fn=lambda x, y: x ^ y)
    check_op([a], np.logical_not, lambda x: ~x, device=device, torch_fn=lambda x: ~x)
    check_op([a], np.logical_not, lambda x: x.logical_not(), device=device)
    check_op([a], np.logical_not, lambda x: -x, device=device)


def test_constant_folding_matches_compute(device: str) -> None:
    # NOTE: constants take the folding path in the lazy graph (lazy.py) and must agree with computed values
    assert (~Tensor(True, device=device)).item() is False and Tensor(True, device=device).logical_not().item() is False
    assert (Tensor.full((2,), 1.5, device=device) == 0).tolist() == [False, False]
    assert (Tensor.full((2,), 1.5, device=device) >= 2).tolist() == [False, False]


# ***** linear algebra *****


MATMULS = {str(s): s for s in [[(4,), (4,)], [(4,), (4, 3)], [(3, 4), (4,)], [(3, 4), (4, 5)], [(1, 4), (4, 1)],
                                [(2, 3, 4), (2, 4, 5)], [(2, 1, 3, 4), (3, 4, 2)], [(3, 4), (2, 4, 5)],
                                [(4,), (2, 4, 3)]]}  # fmt: skip


MATMULS_ON_GPU = {"[(4,), (4,)]", "[(3, 4), (4, 5)]", "[(2, 1, 3, 4), (3, 4, 2)]"}


@pytest.mark.parametrize("shapes", gpu_keeps(MATMULS, MATMULS_ON_GPU))
def test_matmul(shapes: list, device: str) -> None:
    check_op(shapes, np.matmul, lambda x, y: x @ y, device=device, atol=1e-5, torch_fn=torch and torch.matmul)
    check_op(shapes, np.matmul, lambda x, y: x.dot(y), device=device, atol=1e-5)


def test_matmul_ints(device: str) -> None:
    check_op([(3, 4), (4, 2)], np.matmul, Tensor.matmul, device=device, dtype=np.int32, low=-3, high=4)


EINSUMS = [
    "ij,jk->ik",
    "ij,jk",
    "bij,bjk->bik",
    "i,i->",
    "i,i",
    "ij->ji",
    "ij->",
    "ij",
    "ji",
    "i,j->ij",
    "bhqd,bhkd->bhqk",
    "ij,kj->ik",
    "ijk->kj",
    "ab,bc,cd->ad",
]


@pytest.mark.parametrize("formula", gpu_keeps({f: f for f in EINSUMS}, {"bhqd,bhkd->bhqk", "ab,bc,cd->ad", "ijk->kj"}))
def test_einsum(formula: str, device: str) -> None:
    sizes = dict(zip("ijkbhqdac", (3, 4, 2, 2, 2, 3, 4, 3, 2)))
    shapes = [tuple(sizes[c] for c in spec) for spec in formula.split("->")[0].split(",")]
    check_op(
        shapes,
        lambda *xs: np.einsum(formula, *xs),
        lambda *xs: Tensor.einsum(formula, *xs),
        device=device,
        atol=1e-5,
        torch_fn=torch and (lambda *xs: torch.einsum(formula, *xs)),
    )


# ***** convolution and pooling: small readable numpy references *****


def per_axis(v: Any, n: int) -> tuple[int, ...]:
    return (v,) * n if isinstance(v, int) else tuple(v)


def np_windows(x: np.ndarray, k: tuple, stride: tuple, dilation: tuple) -> np.ndarray:
    """(..., *out, prod(k)): every window over the last len(k) axes, one kernel position at a time."""
    n = len(k)
    out = [(i - d * (kk - 1) - 1) // s + 1 for i, kk, s, d in zip(x.shape[-n:], k, stride, dilation)]
    slices = [
        tuple(slice(ki * d, ki * d + s * (o - 1) + 1, s) for ki, d, s, o in zip(kidx, dilation, stride, out))
        for kidx in np.ndindex(*k)
    ]
    return np.stack([x[(Ellipsis, *sl)] for sl in slices], -1)


def np_pads(padding: Any, n: int) -> list[tuple[int, int]]:
    """(before, after) per spatial axis from an int, n ints, or pad2d-order 2n ints (last axis first)."""
    if isinstance(padding, int):
        return [(padding, padding)] * n
    if len(padding) == n:
        return [(p, p) for p in padding]
    return [(padding[2 * i], padding[2 * i + 1]) for i in range(n)][::-1]


def np_conv(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    groups: int = 1,
    stride: Any = 1,
    dilation: Any = 1,
    padding: Any = 0,
) -> np.ndarray:
    n, k = x.ndim - 2, w.shape[2:]
    stride, dilation = (
        (stride,) * n if isinstance(stride, int) else stride,
        (dilation,) * n if isinstance(dilation, int) else dilation,
    )
    xp = np.pad(x, [(0, 0), (0, 0), *np_pads(padding, n)])
    xw = np_windows(xp, k, stride, dilation)  # (N, Cin, *out, K)
    xw = xw.reshape(x.shape[0], groups, x.shape[1] // groups, *xw.shape[2:])  # (N, G, cin, *out, K)
    wg = w.reshape(groups, w.shape[0] // groups, w.shape[1], -1)  # (G, cout, cin, K)
    ret = np.einsum("ngc...k,gock->ngo...", xw, wg)
    ret = ret.reshape(x.shape[0], w.shape[0], *ret.shape[3:])
    return ret if b is None else ret + b.reshape(1, -1, *[1] * n)


def np_conv_transpose(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    groups: int = 1,
    stride: Any = 1,
    dilation: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
) -> np.ndarray:
    """Scatter form: every input element adds w * x at out[i * stride + k * dilation - padding] (per axis)."""
    n, k, (bs, cin), i_ = x.ndim - 2, w.shape[2:], x.shape[:2], x.shape[2:]
    s_, d_, p_, op_ = (per_axis(v, n) for v in (stride, dilation, padding, output_padding))
    cin_g, cout_g = cin // groups, w.shape[1]
    full = [(i - 1) * s + d * (kk - 1) + 1 + op for i, kk, s, d, op in zip(i_, k, s_, d_, op_)]
    out = np.zeros((bs, cout_g * groups, *full), dtype=np.result_type(x, w))
    for g in range(groups):
        xg, wg = x[:, g * cin_g : (g + 1) * cin_g], w[g * cin_g : (g + 1) * cin_g]
        for kidx in np.ndindex(*k):
            sl = tuple(slice(ki * d, ki * d + s * (i - 1) + 1, s) for ki, i, s, d in zip(kidx, i_, s_, d_))
            out[(slice(None), slice(g * cout_g, (g + 1) * cout_g), *sl)] += np.einsum(
                "nc...,co->no...", xg, wg[(Ellipsis, *kidx)]
            )
    out = out[(Ellipsis, *[slice(p, f - p) for f, p in zip(full, p_)])]
    return out if b is None else out + b.reshape(1, -1, *[1] * n)


def np_pool(
    x: np.ndarray, k: tuple, stride: Any, dilation: Any, padding: Any, reduce: Callable, pad_value: float
) -> np.ndarray:
    n = len(k)
    stride = k if stride is None else per_axis(stride, n)
    xp = np.pad(x, [(0, 0)] * (x.ndim - n) + [(p, p) for p in per_axis(padding, n)], constant_values=pad_value)
    return reduce(np_windows(xp, k, stride, per_axis(dilation, n)), -1)


CONVS = {  # input shape, weight shape, kwargs
    "1d": ((2, 3, 7), (4, 3, 3), {}),
    "1d_stride_pad": ((1, 2, 8), (3, 2, 3), dict(stride=2, padding=1)),
    "2d": ((2, 3, 5, 5), (4, 3, 3, 3), {}),
    "2d_bias": ((1, 2, 5, 4), (3, 2, 2, 3), dict(bias=True)),
    "2d_groups": ((1, 4, 5, 5), (6, 2, 3, 3), dict(groups=2)),
    "2d_depthwise": ((1, 3, 5, 5), (3, 1, 3, 3), dict(groups=3)),
    "2d_stride": ((1, 2, 7, 6), (3, 2, 3, 2), dict(stride=(2, 3))),
    "2d_dilation": ((1, 2, 7, 7), (2, 2, 3, 3), dict(dilation=2)),
    "2d_stride_gt_kernel": ((1, 2, 7, 8), (2, 2, 2, 2), dict(stride=3)),
    "2d_dilation_stride_gt_kernel": ((1, 2, 7, 8), (2, 2, 1, 2), dict(stride=(3, 2), dilation=(1, 2))),
    "2d_padding": ((1, 2, 4, 4), (2, 2, 3, 3), dict(padding=1)),
    "2d_padding_per_axis": ((1, 2, 4, 5), (2, 2, 3, 3), dict(padding=(2, 1))),
    "2d_padding_asym": ((1, 2, 4, 5), (2, 2, 3, 3), dict(padding=(1, 0, 2, 1))),
    "2d_all": ((2, 4, 8, 7), (4, 2, 3, 2), dict(groups=2, stride=2, dilation=(1, 2), padding=1, bias=True)),
    "3d": ((1, 2, 4, 4, 3), (2, 2, 2, 3, 2), dict(padding=1, bias=True)),
}


@pytest.mark.parametrize("case", gpu_keeps(CONVS, {"1d_stride_pad", "2d_all", "3d"}))
def test_conv(case: tuple, device: str) -> None:
    xs, ws, kw = case
    kw = dict(kw)
    bias = kw.pop("bias", False)
    shapes = [xs, ws, (ws[0],)] if bias else [xs, ws]
    symmetric = not isinstance(kw.get("padding"), tuple) or len(kw["padding"]) == len(ws) - 2
    conv = {1: F and F.conv1d, 2: F and F.conv2d, 3: F and F.conv3d}[len(ws) - 2]
    check_op(
        shapes,
        lambda x, w, b=None: np_conv(x, w, b, **kw),
        lambda x, w, b=None: x.conv2d(w, b, **kw),
        device=device,
        atol=1e-5,
        grad_atol=1e-3,
        torch_fn=(lambda x, w, b=None: conv(x, w, b, **kw)) if conv and symmetric else None,
    )


def test_conv1d_conv3d_names(device: str) -> None:
    check_op([(2, 3, 7), (4, 3, 3)], np_conv, lambda x, w: x.conv1d(w), device=device, atol=1e-5, grad_atol=1e-3)
    check_op(
        [(1, 2, 3, 3, 3), (2, 2, 2, 2, 2)], np_conv, lambda x, w: x.conv3d(w), device=device, atol=1e-5, grad_atol=1e-3
    )


def np_conv_grads(x: np.ndarray, w: np.ndarray, g: np.ndarray, groups: int = 1, stride: Any = 1, dilation: Any = 1,
                  padding: Any = 0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The input and weight gradients of np_conv for the output gradient g, in float64: each window's gradient is
    added back where the window read from (the scatter form, not a transposed convolution)."""
    n, k, (bs, cin_), cout = x.ndim - 2, w.shape[2:], x.shape[:2], w.shape[0]
    s_, d_, pads = per_axis(stride, n), per_axis(dilation, n), np_pads(padding, n)
    x, w, g = x.astype(np.float64), w.astype(np.float64), g.astype(np.float64)
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    xw = np_windows(xp, k, s_, d_).reshape(bs, groups, cin_ // groups, -1, int(np.prod(k)))  # (N, G, cin, P, K)
    gg = g.reshape(bs, groups, cout // groups, -1)  # (N, G, cout, P): P output positions
    dw = np.einsum("ngcpk,ngop->gock", xw, gg).reshape(w.shape)
    dxw = np.einsum("ngop,gock->ngcpk", gg, w.reshape(groups, cout // groups, cin_ // groups, -1))
    dxp = np.zeros_like(xp)
    for j, kidx in enumerate(np.ndindex(*k)):
        sl = tuple(slice(ki * d, ki * d + s * (o - 1) + 1, s) for ki, d, s, o in zip(kidx, d_, s_, g.shape[2:]))
        dxp[(slice(None), slice(None), *sl)] += dxw[..., j].reshape(bs, cin_, *g.shape[2:])
    return dxp[(slice(None), slice(None), *[slice(b, b + i) for (b, _), i in zip(pads, x.shape[2:])])], dw


CONV_GRADS_AT_SIZE = {  # shapes where the kernel optimiser tiles, vectorizes and threads the gradient kernels
    "2d_pad": ((4, 16, 20, 20), (32, 16, 3, 3), dict(padding=1)),
    "2d_stride_groups": ((2, 16, 23, 19), (24, 8, 3, 3), dict(stride=2, groups=2, padding=(1, 2, 0, 1))),
    "2d_dilation_stride_gt_kernel": ((2, 8, 31, 29), (16, 8, 2, 3), dict(stride=(3, 2), dilation=(2, 1))),
    "1d_long": ((3, 12, 301), (20, 12, 5), dict(stride=2, padding=2)),
    "depthwise": ((2, 32, 17, 17), (32, 1, 5, 5), dict(groups=32, padding=2)),
}


@pytest.mark.parametrize("case", gpu_keeps(CONV_GRADS_AT_SIZE, {"2d_stride_groups", "1d_long"}))
def test_conv_gradients_at_size(case: tuple, device: str) -> None:
    """conv's own backward (input gradient as a transposed convolution) against the float64 scatter form, at sizes
    where the optimiser engages."""
    xs, ws, kw = case
    (xn, wn, gn), (out, dx, dw) = _forward_backward(lambda x, w: x.conv2d(w, **kw), xs, ws, device)
    want_dx, want_dw = np_conv_grads(xn, wn, gn, **kw)
    np.testing.assert_allclose(out, np_conv(xn.astype(np.float64), wn.astype(np.float64), **kw), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-4 * np.sqrt(np.prod(ws[1:])))
    np.testing.assert_allclose(dw, want_dw, rtol=1e-4, atol=1e-4 * np.sqrt(gn[0, 0].size * xs[0]))


def _forward_backward(fn: Callable, xs: tuple, ws: tuple, device: str) -> tuple[tuple, tuple]:
    """(x, w, g) random float32 inputs and output gradient, and (fn(x, w), d/dx, d/dw) as numpy arrays."""
    rng = np.random.default_rng(SEED)
    xn, wn = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    x, w = Tensor(xn, device=device, requires_grad=True), Tensor(wn, device=device, requires_grad=True)
    out = fn(x, w)
    gn = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(Tensor(gn, device=device))
    assert x.grad is not None and w.grad is not None
    return (xn, wn, gn), (out.numpy(), x.grad.numpy(), w.grad.numpy())


CONV_TRANSPOSES = {  # input shape, weight shape (Cin, Cout/groups, *k), kwargs
    "1d": ((1, 2, 5), (2, 3, 3), {}),
    "2d": ((2, 2, 3, 3), (2, 3, 2, 2), {}),
    "2d_stride": ((1, 2, 3, 4), (2, 2, 3, 3), dict(stride=2)),
    "2d_padding": ((1, 2, 4, 4), (2, 2, 3, 3), dict(padding=1)),
    "2d_output_padding": ((1, 2, 3, 3), (2, 2, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    "2d_groups": ((1, 4, 3, 3), (4, 1, 2, 2), dict(groups=2)),
    "2d_dilation": ((1, 2, 3, 3), (2, 2, 2, 2), dict(dilation=2)),
    "2d_stride_dilation": ((1, 2, 3, 3), (2, 2, 2, 2), dict(stride=2, dilation=2)),
    "2d_per_axis": ((1, 2, 3, 4), (2, 3, 2, 3), dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0))),
    "2d_all": ((2, 4, 3, 3), (4, 2, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=2, bias=True)),
}


@pytest.mark.parametrize("case", gpu_keeps(CONV_TRANSPOSES, {"1d", "2d_all"}))
def test_conv_transpose(case: tuple, device: str) -> None:
    xs, ws, kw = case
    kw = dict(kw)
    bias = kw.pop("bias", False)
    shapes = [xs, ws, (ws[1] * kw.get("groups", 1),)] if bias else [xs, ws]
    conv = {1: F and F.conv_transpose1d, 2: F and F.conv_transpose2d}[len(ws) - 2]
    check_op(
        shapes,
        lambda x, w, b=None: np_conv_transpose(x, w, b, **kw),
        lambda x, w, b=None: x.conv_transpose2d(w, b, **kw),
        device=device,
        atol=1e-5,
        grad_atol=1e-3,
        torch_fn=conv and (lambda x, w, b=None: conv(x, w, b, **kw)),
    )


CONV_TRANSPOSES_AT_SIZE = {  # input shape, weight shape (Cin, Cout/groups, *k), kwargs
    "2d_stride": ((4, 32, 9, 11), (32, 16, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    "2d_groups_dilation": ((2, 16, 10, 10), (16, 12, 3, 2), dict(stride=(3, 2), dilation=(1, 2), groups=2)),
}


@pytest.mark.parametrize("case", gpu_keeps(CONV_TRANSPOSES_AT_SIZE, {"2d_stride"}))
def test_conv_transpose_at_size(case: tuple, device: str) -> None:
    """A transposed convolution is the convolution's input gradient: forward against the float64 scatter form, and
    its gradients by the adjoint, <convT(x, w), g> = <x, conv(g, w)>."""
    xs, ws, kw = case
    (xn, wn, gn), (out, dx, dw) = _forward_backward(lambda x, w: x.conv_transpose2d(w, **kw), xs, ws, device)
    conv_kw = {k: v for k, v in kw.items() if k != "output_padding"}
    x64, w64, g64 = xn.astype(np.float64), wn.astype(np.float64), gn.astype(np.float64)
    np.testing.assert_allclose(out, np_conv_transpose(x64, w64, **kw), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dx, np_conv(g64, w64, **conv_kw), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(dw, np_conv_grads(gn, wn, xn, **conv_kw)[1], rtol=1e-4, atol=1e-3)


def test_conv_transpose_that_only_crops_padding_is_zeros_with_gradients(device: str) -> None:
    """Stride 3 with padding 1 over a 1-wide kernel: both outputs are padding the stride skips. They are zeros, and
    the graph stays, so backward gives zero gradients (as PyTorch does) instead of failing."""
    x = Tensor(np.ones((1, 2, 2), np.float32), device=device, requires_grad=True)
    w = Tensor(np.ones((2, 1, 1), np.float32), device=device, requires_grad=True)
    out = x.conv_transpose2d(w, stride=3, padding=1)
    np.testing.assert_array_equal(out.numpy(), np.zeros((1, 1, 2), np.float32))
    out.sum().backward()
    assert x.grad is not None and w.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((1, 2, 2), np.float32))
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros((2, 1, 1), np.float32))


POOLS = {  # input shape, kernel, kwargs
    "2x2": ((2, 2, 4, 4), (2, 2), {}),
    "3x3_odd": ((1, 2, 7, 5), (3, 3), {}),
    "stride1": ((1, 1, 4, 5), (2, 2), dict(stride=1)),
    "stride_rect": ((1, 2, 6, 7), (2, 3), dict(stride=(1, 2))),
    "dilation": ((1, 1, 7, 7), (2, 2), dict(stride=1, dilation=2)),
    "stride_gt_kernel": ((1, 2, 7, 8), (2, 2), dict(stride=3)),
    "padding": ((1, 2, 5, 5), (3, 3), dict(stride=2, padding=1)),
    "all": ((2, 1, 8, 7), (3, 2), dict(stride=2, dilation=2, padding=1)),
    "per_axis_stride_gt_kernel": ((1, 2, 6, 7), (2, 1), dict(stride=(1, 3), dilation=(2, 1), padding=(1, 0))),
}


@pytest.mark.parametrize("case", gpu_keeps(POOLS, {"all", "per_axis_stride_gt_kernel"}))
def test_max_pool2d(case: tuple, device: str) -> None:
    shape, k, kw = case
    np_fn = lambda x: np_pool(x, k, kw.get("stride"), kw.get("dilation", 1), kw.get("padding", 0), np.max, -np.inf)
    check_op(
        [shape],
        np_fn,
        lambda x: x.max_pool2d(k, **kw),
        device=device,
        torch_fn=F and (lambda x: F.max_pool2d(x, k, **kw)),
    )


@pytest.mark.parametrize("case", gpu_keeps(POOLS, {"2x2", "all"}))
def test_avg_pool2d(case: tuple, device: str) -> None:
    shape, k, kw = case
    np_fn = lambda x: np_pool(x, k, kw.get("stride"), kw.get("dilation", 1), kw.get("padding", 0), np.mean, 0.0)
    torch_fn = None if F is None or kw.get("dilation", 1) != 1 else lambda x: F.avg_pool2d(x, k, **kw)
    check_op([shape], np_fn, lambda x: x.avg_pool2d(k, **kw), device=device, torch_fn=torch_fn)


def test_pool_1d_and_int_kernel(device: str) -> None:
    check_op(
        [(2, 3, 8)],
        lambda x: np_pool(x, (3,), 2, 1, 0, np.max, -np.inf),
        lambda x: x.max_pool2d((3,), 2),
        device=device,
        torch_fn=F and (lambda x: F.max_pool1d(x, 3, 2)),
    )
    check_op(
        [(1, 2, 6, 6)], lambda x: np_pool(x, (3, 3), None, 1, 0, np.mean, 0.0), lambda x: x.avg_pool2d(3), device=device
    )


# ***** normalisation, dropout, sampling, attention *****


def test_layernorm(device: str) -> None:
    def np_ln(x: np.ndarray, axis: Any = -1, eps: float = 1e-5) -> np.ndarray:
        return (x - x.mean(axis, keepdims=True)) / np.sqrt(x.var(axis, keepdims=True) + eps)

    check_op(
        [(3, 5)],
        np_ln,
        lambda x: x.layernorm(),
        device=device,
        atol=1e-5,
        grad_atol=1e-3,
        torch_fn=F and (lambda x: F.layer_norm(x, (5,))),
    )
    check_op(
        [(2, 3, 4)],
        lambda x: np_ln(x, (1, 2)),
        lambda x: x.layernorm((1, 2)),
        device=device,
        atol=1e-5,
        grad_atol=1e-3,
        torch_fn=F and (lambda x: F.layer_norm(x, (3, 4))),
    )
    check_op(
        [(2, 3)],
        lambda x: np_ln(x, 0, 0.1),
        lambda x: x.layernorm(0, eps=0.1),
        device=device,
        atol=1e-5,
        grad_atol=1e-3,
    )


def test_batchnorm(device: str) -> None:
    def np_bn(x: np.ndarray, w: np.ndarray, b: np.ndarray, m: np.ndarray, istd: np.ndarray) -> np.ndarray:
        shape = (1, -1) + (1,) * (x.ndim - 2)
        return (x - m.reshape(shape)) * w.reshape(shape) * istd.reshape(shape) + b.reshape(shape)

    check_op(
        [(2, 3, 2, 2), (3,), (3,), (3,), (3,)], np_bn, lambda *xs: xs[0].batchnorm(*xs[1:]), device=device, atol=1e-5
    )
    check_op([(4, 3), (3,), (3,), (3,), (3,)], np_bn, lambda *xs: xs[0].batchnorm(*xs[1:]), device=device)
    check_op(
        [(2, 3, 4), (3,), (3,)],
        lambda x, m, istd: (x - m[:, None]) * istd[:, None],
        lambda x, m, istd: x.batchnorm(None, None, m, istd),
        device=device,
    )


def test_batchnorm_matches_torch_eval(device: str) -> None:
    pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, w, b, m = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4, 4), (3,), (3,), (3,)))
    var = rng.uniform(0.5, 2, 3).astype(np.float32)
    want = F.batch_norm(
        torch.tensor(x), torch.tensor(m), torch.tensor(var), torch.tensor(w), torch.tensor(b), training=False, eps=1e-5
    ).numpy()
    ts = [Tensor(a, device=device) for a in (x, w, b, m, 1 / np.sqrt(var + 1e-5))]
    np.testing.assert_allclose(ts[0].batchnorm(*ts[1:]).numpy(), want, atol=1e-5, rtol=1e-4)


def test_dropout(device: str) -> None:
    Tensor.manual_seed(0)
    x = Tensor.ones(100, 100, device=device, requires_grad=True)
    assert x.dropout(0.3) is x, "dropout must be the identity outside training"
    with Tensor.train():
        out = x.dropout(0.3)
        out.sum().backward()
    got, grad = out.numpy(), x.grad.numpy()
    assert abs((got == 0).mean() - 0.3) < 0.02, f"dropped fraction {(got == 0).mean()} is not about 0.3"
    np.testing.assert_allclose(got[got != 0], 1 / 0.7, rtol=1e-6)
    np.testing.assert_allclose(grad, got, rtol=1e-6)  # NOTE: d(out)/dx is the same mask and scale
    with Tensor.train():
        assert (x.dropout(1.0).numpy() == 0).all() and x.dropout(0.0) is x
        Tensor.manual_seed(3)
        a = x.dropout(0.5).numpy()
        Tensor.manual_seed(3)
        np.testing.assert_equal(a, x.dropout(0.5).numpy())
    assert not Tensor.training


def test_one_hot(device: str) -> None:
    idx = np.array([[0, 2], [3, 1]], dtype=np.int32)
    check_op(
        [idx],
        lambda i: np.eye(4, dtype=np.int32)[i],
        lambda i: i.one_hot(4),
        device=device,
        torch_fn=F and (lambda i: F.one_hot(i.long(), 4)),
    )
    check_op(
        [np.array(2, dtype=np.int32)], lambda i: np.eye(3, dtype=np.int32)[i], lambda i: i.one_hot(3), device=device
    )


def test_multinomial(device: str) -> None:
    Tensor.manual_seed(0)
    w = Tensor([1.0, 2.0, 7.0], device=device)
    one = w.multinomial()
    assert one.shape == (1,) and one.dtype == dtypes.int32 and 0 <= one.item() < 3
    many = w.multinomial(4000, replacement=True).numpy()
    assert many.shape == (4000,) and many.min() >= 0 and many.max() <= 2
    np.testing.assert_allclose(np.bincount(many, minlength=3) / 4000, [0.1, 0.2, 0.7], atol=0.03)
    batch = Tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 3.0]], device=device).multinomial(500, replacement=True)
    got = batch.numpy()
    assert got.shape == (2, 500) and (got[0] == 1).all() and set(np.unique(got[1])) == {0, 3}
    assert abs((got[1] == 3).mean() - 0.75) < 0.06
    Tensor.manual_seed(5)
    a = w.multinomial(10, replacement=True).numpy()
    Tensor.manual_seed(5)
    np.testing.assert_equal(a, w.multinomial(10, replacement=True).numpy())


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    qk = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        qk = np.where(mask, qk, -np.inf) if mask.dtype == np.bool_ else qk + mask
    return np_softmax(qk, -1) @ v


@SLOW_ON_GPU  # NOTE: nn.MultiHeadAttention (causal) runs attention on the GPU in the fast tier
def test_scaled_dot_product_attention(device: str) -> None:
    shapes = [(2, 3, 4), (2, 5, 4), (2, 5, 4)]
    sdpa = F and F.scaled_dot_product_attention
    check_op(
        shapes,
        np_attention,
        lambda q, k, v: q.scaled_dot_product_attention(k, v),
        device=device,
        atol=1e-5,
        torch_fn=sdpa,
    )
    causal = np.tril(np.ones((3, 5), dtype=bool))
    check_op(
        shapes,
        lambda q, k, v: np_attention(q, k, v, causal),
        lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
        device=device,
        atol=1e-5,
        torch_fn=sdpa and (lambda q, k, v: sdpa(q, k, v, is_causal=True)),
    )
    bool_mask = np.array([[1, 0, 1, 1, 0], [0, 0, 0, 1, 0], [1, 1, 1, 1, 1]], dtype=bool)
    check_op(
        [*shapes, bool_mask],
        np_attention,
        lambda q, k, v, m: q.scaled_dot_product_attention(k, v, m),
        device=device,
        atol=1e-5,
        torch_fn=sdpa and (lambda q, k, v, m: sdpa(q, k, v, m)),
    )
    check_op(
        [*shapes, (3, 5)],
        np_attention,
        lambda q, k, v, m: q.scaled_dot_product_attention(k, v, m),
        device=device,
        atol=1e-5,
        torch_fn=sdpa and (lambda q, k, v, m: sdpa(q, k, v, m)),
    )
    check_op(
        [(1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 2)],
        lambda q, k, v: np_attention(q, k, v, np.tril(np.ones((3, 3), dtype=bool))),
        lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
        device=device,
        atol=1e-5,
    )


# ***** losses *****


def np_cross_entropy(x: np.ndarray, y: np.ndarray, ignore_index: int = -1, smoothing: float = 0.0) -> np.ndarray:
    logp = np.log(np_softmax(x, -1))
    keep = y != ignore_index
    nll = -np.take_along_axis(logp, np.where(keep, y, 0)[..., None], -1)[..., 0]
    loss = (1 - smoothing) * nll - smoothing * logp.mean(-1)
    return (loss * keep).sum() / keep.sum()


@pytest.mark.parametrize(
    "labels,ignore_index,smoothing",
    [
        ([0, 3, 4, 1], -1, 0.0),
        ([0, -1, 4, -1], -1, 0.0),
        ([2, 3, 4, 2], 2, 0.0),
        ([0, 3, 4, 1], -1, 0.1),
        ([0, -1, 4, 1], -1, 0.2),
        ([[0, 1], [4, -1]], -1, 0.0),
    ],
    ids=str,
)
def test_sparse_categorical_crossentropy(labels: list, ignore_index: int, smoothing: float, device: str) -> None:
    y = np.array(labels, dtype=np.int32)
    tfn = F and (
        lambda x, y: F.cross_entropy(
            x.reshape(-1, 5), y.long().reshape(-1), ignore_index=ignore_index, label_smoothing=smoothing
        )
    )
    check_op(
        [(*y.shape, 5), y],
        lambda x, y: np_cross_entropy(x, y, ignore_index, smoothing),
        lambda x, y: x.sparse_categorical_crossentropy(y, ignore_index, smoothing),
        device=device,
        atol=1e-5,
        torch_fn=tfn,
    )


def test_binary_losses(device: str) -> None:
    bce = lambda p, y: np.mean(-y * np.log(p) - (1 - y) * np.log(1 - p))
    check_op(
        [(3, 4), (3, 4)],
        bce,
        lambda p, y: p.binary_crossentropy(y),
        device=device,
        low=0.1,
        high=0.9,
        atol=1e-5,
        torch_fn=F and (lambda p, y: F.binary_cross_entropy(p, y.detach())),
    )
    check_op(
        [(3, 4), (3, 4)],
        lambda x, y: bce(sigmoid(x), y),
        lambda x, y: x.binary_crossentropy_logits(y),
        device=device,
        atol=1e-5,
        torch_fn=F and F.binary_cross_entropy_with_logits,
    )
    stable = lambda x, y: np.mean(np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x))))
    check_op(
        [(3, 4), np.array([[0, 1, 1, 0]] * 3, dtype=np.float32)],
        stable,
        lambda x, y: x.binary_crossentropy_logits(y),
        device=device,
        low=-20,
        high=20,
        atol=1e-5,
    )
    check_op(
        [(3, 4), (3, 4)],
        lambda x, y: np.mean((x - y) ** 2),
        lambda x, y: x.mse(y),
        device=device,
        torch_fn=F and F.mse_loss,
    )


# ***** data out, dtypes *****


def test_numpy_item_tolist(device: str) -> None:
    x = Tensor([[1.5, 2.0], [3.0, -4.0]], device=device)
    assert isinstance(x.numpy(), np.ndarray) and x.numpy().dtype == np.float32
    assert x.tolist() == [[1.5, 2.0], [3.0, -4.0]] and Tensor(3, device=device).tolist() == 3
    assert x[1, 0].item() == 3.0 and isinstance(x[1, 0].item(), float)
    assert Tensor([7], device=device).item() == 7 and isinstance(Tensor([7], device=device).item(), int)
    assert Tensor(True, device=device).item() is True
    assert x.T.numpy().tolist() == [[1.5, 3.0], [2.0, -4.0]] and x.T.numpy().flags.c_contiguous
    with pytest.raises(ValueError, match=r"one element, got shape \(2, 2\)"):
        x.item()


CAST_SRC = np.array([[-2.7, -1.5, -0.2, 0.0], [0.4, 1.5, 2.6, 100.9]], dtype=np.float32)
CASTS = [
    ("float16", np.float16, CAST_SRC),
    ("int32", np.int32, CAST_SRC),
    ("int8", np.int8, CAST_SRC),
    ("uint8", np.uint8, np.abs(CAST_SRC)),
    ("bool", np.bool_, CAST_SRC),
    ("float32", np.float32, CAST_SRC),
    ("float64", np.float64, CAST_SRC),
]


@pytest.mark.parametrize("name,np_dtype,src", CASTS, ids=[c[0] for c in CASTS])
def test_cast_from_float(name: str, np_dtype: Any, src: np.ndarray, device: str) -> None:
    check_op(
        [src],
        lambda x: x.astype(np_dtype),
        lambda x: x.cast(name),
        device=device,
        forward_only=True,
        torch_fn=torch and (lambda x: x.to(getattr(torch, name))),
    )
    assert Tensor(src, device=device).cast(getattr(dtypes, name)).dtype == getattr(dtypes, name)


@pytest.mark.parametrize("src_dtype", [np.int32, np.int8, np.uint8, np.bool_, np.float16])
@pytest.mark.parametrize("name", ["float32", "float16", "int32", "int8", "uint8", "bool"])
def test_cast_between(src_dtype: Any, name: str, device: str) -> None:
    src = np.array([[0, 1, 2, 3], [5, 0, 7, 100]]).astype(src_dtype)
    # NOTE: forward only: float64 central differences cannot see through a cast to lower precision
    check_op(
        [src],
        lambda x: x.astype(getattr(dtypes, name).np),
        lambda x: x.cast(name),
        device=device,
        dtype=src_dtype,
        forward_only=True,
    )


def test_cast_gradients(device: str) -> None:
    check_op([(3, 4)], lambda x: x * 2, lambda x: x.half().float() * 2, device=device, atol=1e-2, rtol=1e-2)
    check_op([(3, 4)], lambda x: x * 2, lambda x: x.double() * 2, device=device)
    check_op([(3, 4)], lambda x: x, lambda x: x.float(), device=device)
    check_op([(3, 4)], lambda x: np.float32(0.0) * x + x.astype(np.int32), lambda x: x.int() + x * 0, device=device)


@pytest.mark.parametrize(
    "a,b,want",
    [
        (dtypes.int32, dtypes.float32, dtypes.float32),
        (dtypes.bool, dtypes.int32, dtypes.int32),
        (dtypes.int8, dtypes.uint8, dtypes.int16),
        (dtypes.float16, dtypes.float32, dtypes.float32),
        (dtypes.uint8, dtypes.int32, dtypes.int32),
        (dtypes.int8, dtypes.float16, dtypes.float16),
        (dtypes.bool, dtypes.bool, dtypes.bool),
        (dtypes.int64, dtypes.int32, dtypes.int64),
        (dtypes.float64, dtypes.float16, dtypes.float64),
        (dtypes.bool, dtypes.float16, dtypes.float16),
    ],
    ids=str,
)
def test_dtype_promotion(a: Any, b: Any, want: Any, device: str) -> None:
    x, y = Tensor([1, 0], dtype=a, device=device), Tensor([1, 1], dtype=b, device=device)
    for got in (x + y, y + x, x * y, x.maximum(y), (x < y).where(x, y)):
        assert got.dtype == want, f"{a} and {b} gave {got.dtype}, want {want}"
    if torch is not None:
        tx, ty = (torch.tensor([1, 0], dtype=getattr(torch, d.name)) for d in (a, b))
        assert str((tx + ty).dtype) == f"torch.{want.name}"


@pytest.mark.parametrize(
    "dtype,scalar,want",
    [
        (dtypes.int32, 2, dtypes.int32),
        (dtypes.int32, 1.5, dtypes.float32),
        (dtypes.float16, 2.0, dtypes.float16),
        (dtypes.float16, 3, dtypes.float16),
        (dtypes.uint8, 1, dtypes.uint8),
        (dtypes.bool, True, dtypes.bool),
        (dtypes.bool, 1, dtypes.int32),
        (dtypes.bool, 1.5, dtypes.float32),
        (dtypes.int8, 2.5, dtypes.float32),
    ],
    ids=str,
)
def test_scalar_promotion(dtype: Any, scalar: Any, want: Any, device: str) -> None:
    x = Tensor([1, 0], dtype=dtype, device=device)
    assert (x + scalar).dtype == want and (scalar + x).dtype == want and (x * scalar).dtype == want
    if torch is not None:
        # NOTE: PyTorch's default int is int64, ours (tinygrad's) is int32
        got = str((torch.tensor([1, 0], dtype=getattr(torch, dtype.name)) + scalar).dtype).replace("int64", "int32")
        assert got == f"torch.{want.name}"


def test_division_dtypes(device: str) -> None:
    a, b = Tensor([7, -7], device=device), Tensor([2, 2], device=device)
    assert (a / b).dtype == dtypes.float32 and (a / b).tolist() == [3.5, -3.5]
    assert (a // b).dtype == dtypes.int32 and (a // b).tolist() == [3, -4]
    assert (a % b).dtype == dtypes.int32 and (a % b).tolist() == [1, 1]
    assert (a / 2).tolist() == [3.5, -3.5] and (a // 2).tolist() == [3, -4] and (a % -2).tolist() == [-1, -1]


SPECIAL = np.array(
    [-np.inf, -100.0, -20.0, -2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 20.0, 100.0, np.inf], dtype=np.float32
)
SPECIAL_OPS = {  # forward only, at values where a naive formula overflows or a rounding rule shows
    "sigmoid": (sigmoid, Tensor.sigmoid),
    "tanh": (np.tanh, Tensor.tanh),
    "softplus": (softplus, Tensor.softplus),
    "logsigmoid": (lambda x: -softplus(-x), Tensor.logsigmoid),
    "silu": (lambda x: x * sigmoid(x), Tensor.silu),
    "relu": (lambda x: np.maximum(x, 0), Tensor.relu),
    "exp": (np.exp, Tensor.exp),
    "round": (np.round, Tensor.round),
    "floor": (np.floor, Tensor.floor),
    "ceil": (np.ceil, Tensor.ceil),
    "trunc": (np.trunc, Tensor.trunc),
    "sign": (np.sign, Tensor.sign),
    "abs": (np.abs, Tensor.abs),
    "log": (np.log, Tensor.log),
    "sqrt": (np.sqrt, Tensor.sqrt),
    "reciprocal": (np.reciprocal, Tensor.reciprocal),
    "square": (np.square, Tensor.square),
    "pow_3": (lambda x: x**3, lambda x: x**3),
    "pow_neg2": (lambda x: x**-2.0, lambda x: x**-2),
    "pow_half": (np.sqrt, lambda x: x**0.5),
}


@pytest.mark.parametrize("name", list(SPECIAL_OPS))
def test_special_values(name: str, device: str) -> None:
    np_fn, sg_fn = SPECIAL_OPS[name]
    with np.errstate(all="ignore"):
        check_op([SPECIAL], np_fn, sg_fn, device=device, forward_only=True, name=name)


def test_rounding_exact(device: str) -> None:
    x = np.array(
        [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -3.0, 7.0, 1e10, -1e10, 2.0**40 + 0.5, 1.999999],
        dtype=np.float32,
    )
    for np_fn, sg_fn in [
        (np.round, Tensor.round),
        (np.floor, Tensor.floor),
        (np.ceil, Tensor.ceil),
        (np.trunc, Tensor.trunc),
    ]:
        check_op([x], np_fn, sg_fn, device=device, atol=0, rtol=0, forward_only=True)
    check_op([x.astype(np.float64)], np.round, Tensor.round, device=device, atol=0, rtol=0, forward_only=True)


def test_pow_special(device: str) -> None:
    base = np.array([0.0, 0.0, 0.0, 0.0, 2.0, -2.0, -2.0, -8.0], dtype=np.float32)
    exp = np.array([0.0, 2.0, -1.0, 0.5, 0.0, 3.0, -0.5, 1 / 3], dtype=np.float32)
    with np.errstate(all="ignore"):
        check_op([base, exp], np.power, lambda x, y: x**y, device=device, forward_only=True)
        for e in (0, 2, 3, -1, 0.5, 1.7, -2.5, 4):
            check_op(
                [base],
                lambda x, e=e: np.power(x, np.float32(e)),
                lambda x, e=e: x**e,
                device=device,
                forward_only=True,
                name=f"x**{e}",
            )


def test_ties_share_the_gradient(device: str) -> None:
    # NOTE: central differences at a two-way tie give 1/2 to each side, as PyTorch's amax and maximum do
    ties = [[1.0, 3.0, 3.0], [2.0, -1.0, 2.0]]
    check_op(
        [ties], lambda x: x.max(1), lambda x: x.max(1), device=device, torch_fn=torch and (lambda x: torch.amax(x, 1))
    )
    check_op(
        [ties], lambda x: x.min(0), lambda x: x.min(0), device=device, torch_fn=torch and (lambda x: torch.amin(x, 0))
    )
    check_op(
        [ties, [[1.0, 3.0, 0.0], [2.0, -1.0, 5.0]]],
        np.maximum,
        Tensor.maximum,
        device=device,
        torch_fn=torch and torch.maximum,
    )
    check_op(
        [ties, [[1.0, 3.0, 0.0], [2.0, -1.0, 5.0]]],
        np.minimum,
        Tensor.minimum,
        device=device,
        torch_fn=torch and torch.minimum,
    )
    check_op([ties], lambda x: np.argmax(x, 1), lambda x: x.argmax(1), device=device)
    check_op([ties], lambda x: np.argmin(x, 0), lambda x: x.argmin(0), device=device)


def test_big_ints(device: str) -> None:
    big = np.array([2**24 + 1, -(2**30) - 3, 2**31 - 1], dtype=np.int32)
    check_op([big, big], np.maximum, Tensor.maximum, device=device)
    check_op([big, big[::-1].copy()], np.minimum, Tensor.minimum, device=device)
    check_op([big], lambda x: np.max(x), lambda x: x.max(), device=device)
    check_op([big], lambda x: np.argmax(x), lambda x: x.argmax(), device=device)
    check_op([big], lambda x: x // 7, lambda x: x // 7, device=device)


@pytest.mark.parametrize(
    "vals",
    [np.array([7, 0, 255, 3], np.uint8), np.array([5, -128, 127, 0], np.int8), np.array([1, -(2**31)], np.int32)],
)
def test_min_at_int_limits(vals: np.ndarray, device: str) -> None:
    # NOTE: min via -max(-x) wraps at 0 for unsigned ints and at the most negative signed int
    check_op([vals], np.min, Tensor.min, device=device, dtype=vals.dtype)
    check_op([vals], np.argmin, Tensor.argmin, device=device, dtype=vals.dtype)
    check_op([vals, vals[::-1].copy()], np.minimum, Tensor.minimum, device=device, dtype=vals.dtype)
    check_op([vals, vals[::-1].copy()], np.maximum, Tensor.maximum, device=device, dtype=vals.dtype)
    check_op([vals], lambda x: np.clip(x, 3, 100), lambda x: x.clip(3, 100), device=device, dtype=vals.dtype)


def test_logsumexp_infinities(device: str) -> None:
    x = np.array([[-np.inf, -np.inf], [0.0, 1.0], [np.inf, 0.0]], dtype=np.float32)
    with np.errstate(all="ignore"):
        check_op(
            [x],
            lambda x: np_logsumexp(x, 1, False),
            lambda x: x.logsumexp(1),
            device=device,
            forward_only=True,
            torch_fn=torch and (lambda x: torch.logsumexp(x, 1)),
        )
    big = np.array([[1000.0, 0.0], [-1000.0, -1001.0]], dtype=np.float32)
    check_op(
        [big],
        lambda x: x - np_logsumexp(x, -1, True),
        lambda x: x.log_softmax(),
        device=device,
        atol=1e-4,
        torch_fn=torch and (lambda x: torch.log_softmax(x, -1)),
    )
    check_op(
        [big],
        lambda x: np_softmax(x, -1),
        lambda x: x.softmax(),
        device=device,
        torch_fn=torch and (lambda x: torch.softmax(x, -1)),
    )
