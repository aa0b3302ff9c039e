"""A value computed twice has the same bits both times.

A fused graph recomputes a value in every kernel that reads it, and backward rules compare what they recompute with
what the forward computed: max and min (x == max picks who gets the gradient), relu (0 < out), where (its
condition), maximum and minimum (a < b, a == b), abs and clip (through relu and maximum). If one kernel computes a
math op on vectors and another lane by lane, and the two round differently, the comparison fails where it must hold:
max's mask is empty and the gradient is 0/0 (issue 29: softmax then max was NaN on CLANG in 29 of 40 seeds). So every
math op gives the same bits on scalars and vectors, and each activation before a max or min over each axis has the
float64 gradient on every device.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import gpu_keeps
from test_opts import run_kernel

from specgrad import Device, Tensor
from specgrad.codegen.kernel import Opt
from specgrad.device import DeviceUnavailable
from specgrad.ops import BufferOps, UnaryOps
from specgrad.schedule import create_schedule

try:
    import torch
except ImportError:  # NOTE: torch is a test-only extra; the float64 numpy reference runs either way
    torch = None


# *** math on scalars and vectors ***


def math_inputs(dtype: np.dtype) -> np.ndarray:
    """Each op's whole range: wide and narrow uniforms, both signs, powers of two and their neighbours, specials;
    a multiple of 16 long, so any vector width divides it."""
    rng = np.random.default_rng(0)
    fi = np.finfo(dtype)
    spots = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, fi.tiny, fi.smallest_subnormal, fi.max, -fi.max]
    spots += [float(s) * 2.0**e for e in range(-30, 31, 3) for s in (1, -1)]
    xs = [rng.uniform(-160, 160, 1 << 12), rng.uniform(-2, 2, 1 << 12), rng.uniform(0, 1e-3, 1 << 10),
          np.exp(rng.uniform(-80, 80, 1 << 11)), rng.uniform(-1e6, 1e6, 1 << 10), np.array(spots)]  # fmt: skip
    with np.errstate(over="ignore"):
        x = np.concatenate(xs).astype(dtype)
    return np.concatenate([x, np.zeros(-len(x) % 16, dtype)])


def math_kernel(op: UnaryOps, x: np.ndarray):
    """The schedule item of `op` on x (realized on the CPU device, as run_kernel wants its inputs)."""
    t = Tensor(x, device="CPU").realize()
    (si,) = [si for si in create_schedule([t.lazydata.e(op)]) if si.ast.op is BufferOps.STORE]
    return si


MATH_OPS = [UnaryOps.EXP2, UnaryOps.LOG2, UnaryOps.SIN, UnaryOps.SQRT, UnaryOps.RECIP]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("op", MATH_OPS, ids=lambda op: op.name)
@pytest.mark.parametrize("target", ["CLANG", "GPU"])
def test_math_has_the_same_bits_on_scalars_and_vectors(target: str, op: UnaryOps, dtype: np.dtype) -> None:
    try:
        vector_bytes = Device[target].opts.vector_bytes
    except DeviceUnavailable as e:
        pytest.skip(f"{target} unavailable: {e}")
    x = math_inputs(dtype)
    si = math_kernel(op, x)
    scalar = run_kernel(target, si, [])
    widths = [w for w in (2, 4, 8, 16) if w * x.itemsize <= vector_bytes]
    assert widths, f"{target} has no vectors to compare with (vector_bytes={vector_bytes})"
    for width in widths:
        vector = run_kernel(target, si, [Opt("VECTOR", 0, width)])
        differ = (scalar.view(f"u{x.itemsize}") != vector.view(f"u{x.itemsize}")) & ~(
            np.isnan(scalar) & np.isnan(vector)
        )
        assert not differ.any(), (
            f"{op.name} on {target} rounds {differ.sum()} of {len(x)} values differently on {width} lanes than on "
            f"scalars, e.g. x={x[differ][:3].tolist()}: scalar {scalar[differ][:3].tolist()}, "
            f"vector {vector[differ][:3].tolist()}"
        )


# *** max and min after activations: the gradient ***

C_GELU = math.sqrt(2 / math.pi)


def _gelu(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.tanh(C_GELU * (x + 0.044715 * x**3))
    return 0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * C_GELU * (1 + 3 * 0.044715 * x * x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# name -> (specgrad, torch, float64 forward and vector-Jacobian product (x, upstream) -> (f(x), grad of x))
ELEMENTWISE = {
    "exp": ("x.exp()", "x.exp()", lambda x: (np.exp(x), np.exp(x))),
    "log": ("(x.abs() + 0.1).log()", "(x.abs() + 0.1).log()",
            lambda x: (np.log(abs(x) + 0.1), np.sign(x) / (abs(x) + 0.1))),
    "sin": ("(x * 3).sin()", "(x * 3).sin()", lambda x: (np.sin(3 * x), 3 * np.cos(3 * x))),
    "sqrt": ("(x * x + 1).sqrt()", "(x * x + 1).sqrt()", lambda x: (np.sqrt(x * x + 1), x / np.sqrt(x * x + 1))),
    "tanh": ("x.tanh()", "x.tanh()", lambda x: (np.tanh(x), 1 - np.tanh(x) ** 2)),
    "sigmoid": ("x.sigmoid()", "x.sigmoid()", lambda x: (_sigmoid(x), _sigmoid(x) * (1 - _sigmoid(x)))),
    "gelu": ("x.gelu()", "torch.nn.functional.gelu(x, approximate='tanh')", _gelu),
    "silu": ("x.silu()", "torch.nn.functional.silu(x)",
             lambda x: (x * _sigmoid(x), _sigmoid(x) * (1 + x * (1 - _sigmoid(x))))),
    "relu_of_exp": ("(x.exp() - 1.5).relu()", "(x.exp() - 1.5).relu()",
                    lambda x: (np.maximum(np.exp(x) - 1.5, 0), np.exp(x) * (np.exp(x) > 1.5))),
}  # fmt: skip


def activation(name: str, x: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 f(x), and the gradient of sum(f(x) * up) with respect to x."""
    if name == "softmax":
        s = _softmax(x)
        return s, s * (up - (up * s).sum(-1, keepdims=True))
    if name == "log_softmax":
        s = _softmax(x)
        return np.log(s), up - s * up.sum(-1, keepdims=True)
    y, dy = ELEMENTWISE[name][2](x)
    return y, dy * up


def code(name: str, flavour: int) -> str:
    """The activation of x in specgrad (0) or torch (1) code."""
    return f"x.{name}(-1)" if name in ("softmax", "log_softmax") else ELEMENTWISE[name][flavour]


ACTIVATIONS = [*ELEMENTWISE, "softmax", "log_softmax"]
SHAPE = (31, 7, 16)  # NOTE: vectors of 16 on the last axis, remainders on the others, a reduce over each


def reference(name: str, reduce: str, x: np.ndarray, gs: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """float64 reduce(f(x), axis) for each axis, and the gradient of sum(reduce(f(x), axis) * gs[axis])."""
    y, _ = activation(name, x, np.zeros_like(x))
    outs, up = [], np.zeros_like(x)
    for axis, g in enumerate(gs):
        r = getattr(y, reduce)(axis, keepdims=True)
        hit = y == r  # NOTE: ties share the gradient equally, as in torch's amax
        outs.append(r.squeeze(axis))
        up += hit / hit.sum(axis, keepdims=True) * np.expand_dims(g, axis)
    return outs, activation(name, x, up)[1]


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("name", gpu_keeps(dict(zip(ACTIVATIONS, ACTIVATIONS)), keep={"softmax", "gelu"}))
def test_max_and_min_over_each_axis_after_an_activation(device: str, name: str, reduce: str) -> None:
    rng = np.random.default_rng(len(name))
    x = (rng.standard_normal(SHAPE) * 1.5).astype(np.float32)
    gs = [rng.standard_normal(SHAPE[:a] + SHAPE[a + 1 :]).astype(np.float32) for a in range(len(SHAPE))]
    t = Tensor(x, device=device, requires_grad=True)
    y = eval(code(name, 0), {"x": t})
    outs = [getattr(y, reduce)(axis) for axis in range(len(SHAPE))]
    sum(((o * Tensor(g, device=device)).sum() for o, g in zip(outs, gs)), Tensor(0.0, device=device)).backward()
    want_outs, want_grad = reference(name, reduce, x.astype(np.float64), [g.astype(np.float64) for g in gs])
    for axis, (o, w) in enumerate(zip(outs, want_outs)):
        np.testing.assert_allclose(o.numpy(), w, rtol=2e-6, atol=2e-6, err_msg=f"{reduce} over axis {axis}")
    grad = t.grad.numpy()
    assert np.isfinite(grad).all(), f"{np.isnan(grad).sum()} NaN gradients of {SHAPE} on {device}"
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-5 * np.abs(want_grad).max())
    if torch is not None:
        tx = torch.tensor(x, requires_grad=True)
        ty = eval(code(name, 1), {"x": tx, "torch": torch})
        th = getattr(torch, "amax" if reduce == "max" else "amin")
        sum((th(ty, axis) * torch.tensor(g)).sum() for axis, g in enumerate(gs)).backward()
        np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-4, atol=1e-5 * np.abs(want_grad).max())
