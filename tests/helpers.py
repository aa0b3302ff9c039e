"""check_op: one op on one device, forward vs numpy, gradients vs float64 central differences and torch autograd.

Torch is optional: without it the torch pass is skipped (the pytest header says so), never failed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from specgrad import Tensor

try:
    import torch
except ImportError:  # NOTE: torch is a test-only extra, never a dependency
    torch = None

SEED = 1337
SLOW_ON_GPU = pytest.mark.slow_on("GPU")
EPS = 1e-6  # central-difference step, in float64


def check_op(
    shapes_or_vals: Sequence[Any],
    np_fn: Callable,
    sg_fn: Callable,
    *,
    device: str,
    atol: float = 1e-6,
    rtol: float = 1e-3,
    grad_atol: float = 1e-4,
    grad_rtol: float = 1e-3,
    forward_only: bool = False,
    low: float = -2.0,
    high: float = 2.0,
    torch_fn: Callable | None = None,
    dtype: Any = np.float32,
    name: str | None = None,
) -> None:
    """Check `sg_fn(*tensors)` against `np_fn(*arrays)`: forward values, shape and dtype kind, then the gradient of
    sum(out * W) for every float input against float64 central differences through `np_fn` (and torch_fn)."""
    xs = make_inputs(shapes_or_vals, low, high, dtype)
    what = f"{name or describe(sg_fn)} on {device}, shapes {[x.shape for x in xs]}"
    ts = [Tensor(x, device=device, requires_grad=True if x.dtype.kind == "f" else None) for x in xs]
    out = sg_fn(*ts)
    got, want = out.numpy(), np.asarray(np_fn(*xs))
    compare(got, want, atol, rtol, f"{what}: forward")
    if got.dtype.kind != want.dtype.kind:
        raise AssertionError(f"{what}: forward dtype {got.dtype} ({out.dtype}) is not the kind of numpy's {want.dtype}")
    differentiable = [i for i, x in enumerate(xs) if x.dtype.kind == "f"]
    backward = (
        not forward_only and got.dtype.kind == "f" and bool(differentiable) and all(a.size > 0 for a in (got, *xs))
    )
    w = np.random.default_rng(SEED + 1).standard_normal(got.shape)
    if backward:
        (out * Tensor(w.astype(got.dtype), device=device)).sum().backward()
        for i in differentiable:
            g = ts[i].grad.numpy() if ts[i].grad is not None else np.zeros_like(xs[i])
            num = numerical_grad(np_fn, xs, i, w)
            compare(g, num, grad_atol, grad_rtol, f"{what}: backward of input {i}")
    if torch_fn is not None:
        check_torch(
            torch_fn, xs, got, w, [t.grad for t in ts] if backward else None, what, (atol, rtol, grad_atol, grad_rtol)
        )


def make_inputs(shapes_or_vals: Sequence[Any], low: float, high: float, dtype: Any) -> list[np.ndarray]:
    """Seeded uniform inputs in [low, high) for shapes (tuples of ints), or the given values (arrays, lists, numbers);
    float values take a float `dtype`, other values keep theirs."""
    rng = np.random.default_rng(SEED)
    xs = []
    for s in shapes_or_vals:
        if isinstance(s, tuple) and all(isinstance(d, int) for d in s):
            xs.append(random_array(rng, s, low, high, np.dtype(dtype)))
        else:
            x = np.asarray(s)
            xs.append(x.astype(dtype) if x.dtype.kind == "f" and np.dtype(dtype).kind == "f" else x)
    return xs


def random_array(
    rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float, dtype: np.dtype
) -> np.ndarray:
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(int(low), int(high), shape).astype(dtype)
    return rng.uniform(low, high, shape).astype(dtype)


def numerical_grad(np_fn: Callable, xs: list[np.ndarray], i: int, w: np.ndarray) -> np.ndarray:
    """d sum(np_fn(*xs) * w) / d xs[i] by float64 central differences (one element at a time)."""
    xs64 = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in xs]
    x = xs64[i]
    grad = np.zeros(x.shape)
    loss = lambda: float(np.sum(np.asarray(np_fn(*xs64), dtype=np.float64) * w))
    for j in np.ndindex(x.shape):
        orig = x[j]
        x[j] = orig + EPS
        plus = loss()
        x[j] = orig - EPS
        minus = loss()
        x[j] = orig
        grad[j] = (plus - minus) / (2 * EPS)
    return grad


def check_torch(
    torch_fn: Callable,
    xs: list[np.ndarray],
    got: np.ndarray,
    w: np.ndarray,
    grads: list | None,
    what: str,
    tols: tuple[float, float, float, float],
) -> None:
    """The same forward (and gradients, when `grads` is given) through torch autograd."""
    if torch is None:
        return  # NOTE: the pytest header says once per run that torch comparisons are skipped
    atol, rtol, grad_atol, grad_rtol = tols
    tts = [torch.tensor(x, requires_grad=grads is not None and x.dtype.kind == "f") for x in xs]
    out = torch_fn(*tts)
    compare(got, out.detach().numpy(), atol, rtol, f"{what}: torch forward")
    if grads is None:
        return
    (out * torch.tensor(w, dtype=out.dtype)).sum().backward()
    for i, (t, g) in enumerate(zip(tts, grads)):
        if t.grad is not None:  # NOTE: None where torch_fn detached an input torch cannot differentiate
            compare(
                g.numpy() if g is not None else np.zeros(t.shape),
                t.grad.numpy(),
                grad_atol,
                grad_rtol,
                f"{what}: torch backward of input {i}",
            )


def compare(got: np.ndarray, want: np.ndarray, atol: float, rtol: float, what: str) -> None:
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape} != expected {want.shape}")
    try:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol)
    except AssertionError as e:
        raise AssertionError(f"{what}{e}") from None


def describe(fn: Callable) -> str:
    """A function's name, or a lambda's source text, for failure messages."""
    if fn.__name__ != "<lambda>":
        return fn.__name__
    try:
        return " ".join(inspect.getsource(fn).split())[:100]
    except (OSError, TypeError):
        return "<lambda>"


def gpu_keeps(cases: Mapping[str, Any], keep: Collection[str]) -> list:
    """pytest params of `cases` (id -> value) for a test that runs on every device: in the fast tier the GPU runs only
    those named in `keep` (each feature of its OpenCL code once: docs/testing.md), the others in the slow tier."""
    if unknown := set(keep) - set(cases):
        raise ValueError(f"no such cases: {sorted(unknown)}")
    return [pytest.param(v, id=k, marks=() if k in keep else SLOW_ON_GPU) for k, v in cases.items()]
