"""Tensor behaviour beyond single ops: autograd bookkeeping (accumulation, requires_grad, detach, no_grad,
gradient argument) and bad calls raising errors that name the shapes involved.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from specgrad import Device, Tensor, dtypes, no_grad
from specgrad.dtype import DType


def grad_of(t: Tensor) -> list:
    assert t.grad is not None, "expected a gradient"
    return t.grad.numpy().tolist()


# ***** autograd *****


def test_grad_accumulates_across_backward_calls(device: str) -> None:
    x = Tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    (x * 2).sum().backward()
    assert grad_of(x) == [2.0, 2.0, 2.0]
    (x * x).sum().backward()
    assert grad_of(x) == [4.0, 6.0, 8.0]


def test_grad_accumulates_over_paths(device: str) -> None:
    x = Tensor([1.0, -2.0], device=device, requires_grad=True)
    y = x * 3
    (y * y + y + x.exp()).sum().backward()
    np.testing.assert_allclose(grad_of(x), 18 * np.array([1.0, -2.0]) + 3 + np.exp([1.0, -2.0]), rtol=1e-6)


def test_graph_is_freed_after_backward(device: str) -> None:
    x = Tensor([1.0, 2.0], device=device, requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(ValueError, match="does not require grad"):
        loss.backward()


def test_requires_grad_semantics(device: str) -> None:
    # NOTE: as in tinygrad: None is "not decided" (no grad is stored), False opts out, True asks for a grad
    unset, off = Tensor([1.0, 2.0], device=device), Tensor([3.0, 4.0], device=device, requires_grad=False)
    on = Tensor([5.0, 6.0], device=device, requires_grad=True)
    assert unset.requires_grad is None and off.requires_grad is False and on.requires_grad is True
    assert (unset * 2).requires_grad is None and (off * off).requires_grad is False
    assert (off * unset).requires_grad is None and (on * off).requires_grad is True and (on * unset).requires_grad
    (unset * off * on).sum().backward()
    assert unset.grad is None and off.grad is None and grad_of(on) == [3.0, 8.0]
    assert (on * 2)._ctx is not None and (unset * 2)._ctx is None and (off * 2)._ctx is None


def test_requires_grad_after_creation(device: str) -> None:
    x = Tensor([1.0, 2.0], device=device).requires_grad_()
    (x * 3).sum().backward()
    assert grad_of(x) == [3.0, 3.0]


def test_comparisons_and_casts_stop_the_graph(device: str) -> None:
    x = Tensor([1.0, -2.0], device=device, requires_grad=True)
    assert (x > 0).requires_grad is False and (x > 0)._ctx is None and x.int().requires_grad is False
    ((x > 0).where(x, x * 3) + x.int()).sum().backward()
    assert grad_of(x) == [1.0, 3.0]


def test_detach(device: str) -> None:
    x = Tensor([1.0, 2.0], device=device, requires_grad=True)
    d = x.detach()
    assert d.requires_grad is False and d._ctx is None and d.numpy().tolist() == [1.0, 2.0]
    (x * d).sum().backward()
    assert grad_of(x) == [1.0, 2.0]
    assert (x * 2).detach()._ctx is None


def test_no_grad_context(device: str) -> None:
    x = Tensor([1.0, 2.0], device=device, requires_grad=True)
    with no_grad():
        y = x * 2
        assert Tensor.no_grad
    assert not Tensor.no_grad and y._ctx is None and y.numpy().tolist() == [2.0, 4.0]
    with pytest.raises(ValueError, match="does not require grad"):
        y.backward(Tensor([1.0, 1.0], device=device))
    (y * x).sum().backward()
    assert grad_of(x) == [2.0, 4.0], "the path through y (built under no_grad) must not reach x"

    @no_grad()
    def double(t: Tensor) -> Tensor:
        return t * 2

    assert double(x)._ctx is None and not Tensor.no_grad
    with pytest.raises(ValueError), no_grad():
        raise ValueError("the flag is restored on errors")
    assert not Tensor.no_grad


def test_no_grad_class_flag(device: str) -> None:
    x = Tensor([1.0, 2.0], device=device, requires_grad=True)
    Tensor.no_grad = True
    try:
        assert (x * 2)._ctx is None
    finally:
        Tensor.no_grad = False
    assert (x * 2)._ctx is not None


def test_backward_needs_scalar_or_gradient(device: str) -> None:
    x = Tensor([[1.0, 2.0, 3.0]], device=device, requires_grad=True)
    with pytest.raises(ValueError, match=r"single-element tensor, got \(1, 3\)"):
        (x * 2).backward()
    (x * x).backward(Tensor([[1.0, 0.5, -1.0]], device=device))
    assert grad_of(x) == [[2.0, 2.0, -6.0]]
    with pytest.raises(ValueError, match=r"gradient shape \(3,\) does not match tensor shape \(1, 3\)"):
        (x * 2).backward(Tensor([1.0, 1.0, 1.0], device=device))


def test_backward_of_single_element_tensor(device: str) -> None:
    x = Tensor([2.0], device=device, requires_grad=True)
    (x * x).backward()
    assert grad_of(x) == [4.0]


def test_training_flag(device: str) -> None:
    assert not Tensor.training
    with Tensor.train():
        assert Tensor.training
        with Tensor.train(False):
            assert not Tensor.training
        assert Tensor.training
    assert not Tensor.training


def test_grad_dtype_and_device(device: str) -> None:
    x = Tensor([1.0, 2.0], device=device, dtype=dtypes.float16, requires_grad=True)
    (x * x).sum().backward()
    assert x.grad is not None and x.grad.dtype == dtypes.float16 and x.grad.device == device


# ***** errors name the shapes *****


def test_error_matmul_mismatch(device: str) -> None:
    with pytest.raises(ValueError, match=r"\(2, 3\) @ \(4, 5\)"):
        Tensor.ones(2, 3, device=device) @ Tensor.ones(4, 5, device=device)
    with pytest.raises(ValueError, match=r"\(3,\) @ \(2,\)"):
        Tensor.ones(3, device=device).dot(Tensor.ones(2, device=device))
    with pytest.raises(ValueError, match=r"shapes \(\) and \(3,\)"):
        Tensor.ones(device=device) @ Tensor.ones(3, device=device)
    with pytest.raises(ValueError, match=r"batch shapes \(2,\) and \(3,\) do not broadcast: \(2, 4, 5\) @ \(3, 5, 2\)"):
        Tensor.ones(2, 4, 5, device=device) @ Tensor.ones(3, 5, 2, device=device)


def test_error_broadcast_mismatch(device: str) -> None:
    with pytest.raises(ValueError, match=r"cannot broadcast shapes \(2, 3\) and \(4,\)"):
        Tensor.ones(2, 3, device=device) + Tensor.ones(4, device=device)
    with pytest.raises(ValueError, match=r"cannot broadcast shapes \(3, 1\) and \(2, 5\)"):
        Tensor.ones(3, 1, device=device) * Tensor.ones(2, 5, device=device)
    cond = Tensor([True, False], device=device)
    with pytest.raises(ValueError, match=r"cannot broadcast shapes \(2,\) and \(3,\)"):
        cond.where(Tensor.ones(3, device=device), 0.0)


def test_error_bad_permute(device: str) -> None:
    x = Tensor.ones(2, 3, device=device)
    with pytest.raises(ValueError, match=r"invalid permute \(0, 0\) for shape \(2, 3\)"):
        x.permute(0, 0)
    with pytest.raises(ValueError, match=r"invalid permute \(0, 1, 2\) for shape \(2, 3\)"):
        x.permute(0, 1, 2)
    with pytest.raises(IndexError, match=r"dimension 2 is out of range for a tensor of shape \(2, 3\)"):
        x.permute(2, 0)


def test_error_reshape_size(device: str) -> None:
    x = Tensor.ones(2, 3, device=device)
    with pytest.raises(ValueError, match=r"cannot reshape tensor of shape \(2, 3\) \(6 elements\) to \(4,\)"):
        x.reshape(4)
    with pytest.raises(ValueError, match=r"cannot reshape tensor of shape \(2, 3\) \(6 elements\) to \(4, -1\)"):
        x.reshape(4, -1)
    with pytest.raises(ValueError, match=r"bad shape \(-1, -1\) for reshape of \(2, 3\)"):
        x.reshape(-1, -1)


def test_error_index_out_of_range(device: str) -> None:
    x = Tensor.ones(3, 4, device=device)
    with pytest.raises(IndexError, match=r"index 3 is out of range for dim 0 of size 3 \(shape \(3, 4\)\)"):
        x[3]
    with pytest.raises(IndexError, match=r"index -5 is out of range for dim 1 of size 4 \(shape \(3, 4\)\)"):
        x[0, -5]
    with pytest.raises(IndexError, match=r"too many indices \(3\) for a tensor of shape \(3, 4\)"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match=r"dimension 2 is out of range for a tensor of shape \(3, 4\)"):
        x.sum(2)
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="tensor indices must be integers"):
        x[Tensor([0.5], device=device)]


def test_error_expand(device: str) -> None:
    with pytest.raises(ValueError, match=r"cannot expand shape \(2, 3\) to \(4, 3\): only size-1 dimensions"):
        Tensor.ones(2, 3, device=device).expand(4, 3)
    with pytest.raises(ValueError, match=r"cannot expand shape \(2, 3\) to \(3,\): fewer dimensions"):
        Tensor.ones(2, 3, device=device).expand(3)


def test_error_other_shape_checks(device: str) -> None:
    a, b = Tensor.ones(2, 3, device=device), Tensor.ones(2, 4, device=device)
    with pytest.raises(ValueError, match=r"cat needs equal shapes except in dim 0, got \[\(2, 3\), \(2, 4\)\]"):
        a.cat(b)
    with pytest.raises(ValueError, match=r"stack needs equal shapes, got \[\(2, 3\), \(2, 4\)\]"):
        Tensor.stack([a, b])
    with pytest.raises(ValueError, match=r"conv input \(1, 3, 5, 5\) does not fit weight \(2, 2, 3, 3\)"):
        Tensor.ones(1, 3, 5, 5, device=device).conv2d(Tensor.ones(2, 2, 3, 3, device=device))
    with pytest.raises(ValueError, match=r"labels of shape \(3,\) do not match logits of shape \(2, 5\)"):
        Tensor.ones(2, 5, device=device).sparse_categorical_crossentropy(Tensor([0, 1, 2], device=device))
    with pytest.raises(IndexError, match=r"shrink .* is out of range for shape \(2, 3\)"):
        a.shrink(((0, 3), None))
    with pytest.raises(ValueError, match=r"split sizes \[1, 1\] do not add up to 4 \(dim 1 of shape \(2, 4\)\)"):
        b.split([1, 1], dim=1)


def test_error_bad_data() -> None:
    with pytest.raises(ValueError, match="ragged"):
        Tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="Tensor"):
        Tensor(Tensor([1]))
    with pytest.raises(TypeError, match="bool"):
        Tensor([True]) - Tensor([False])
    with pytest.raises(ValueError, match=r"one element, got shape \(2,\)"):
        Tensor([1, 2]).item()
    with pytest.raises(ValueError, match=r"truth value of a tensor of shape \(2,\) is ambiguous"):
        bool(Tensor([1, 2]))


def test_gather_accepts_tinygrad_argument_order() -> None:
    x = Tensor([[1.0, 2.0], [3.0, 4.0]])
    idx = Tensor([[1, 0], [0, 0]])
    assert x.gather(1, idx).tolist() == x.gather(idx, 1).tolist() == [[2.0, 1.0], [3.0, 3.0]]


def test_gather_takes_the_seeds_and_pytorchs_keywords() -> None:
    x = Tensor([[1.0, 2.0], [3.0, 4.0]])
    idx = Tensor([[1, 0], [0, 0]])
    want = [[2.0, 1.0], [3.0, 3.0]]
    calls = [lambda: x.gather(idx=idx, dim=1), lambda: x.gather(idx, dim=1), lambda: x.gather(dim=1, index=idx),
             lambda: x.gather(1, index=idx), lambda: x.gather(dim=1, idx=idx)]  # fmt: skip
    assert all(call().tolist() == want for call in calls)
    with pytest.raises(TypeError, match="index or idx"):
        x.gather(idx=idx, index=idx, dim=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'axis'"):
        x.gather(idx, axis=1)
    with pytest.raises(TypeError, match="an index Tensor and an int dim"):
        x.gather(1)
    with pytest.raises(TypeError, match="an int dim and a Tensor index"):
        x.gather(idx, idx)


@pytest.mark.parametrize("dtype", [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.int64])
def test_xor_with_a_python_int_on_either_side(dtype: DType) -> None:
    a = np.array([0, 1, 5, 100, 127], dtype=dtype.np)
    if not dtypes.is_unsigned(dtype):
        a = np.concatenate([a, -a - 1])
    t = Tensor(a, dtype=dtype)
    for k in (0, 5, 77, -1, -8) if not dtypes.is_unsigned(dtype) else (0, 5, 77, 255):
        assert (t ^ k).dtype == dtype and (k ^ t).dtype == dtype
        np.testing.assert_array_equal((t ^ k).numpy(), a ^ np.array(k, dtype.np))
        np.testing.assert_array_equal((k ^ t).numpy(), np.array(k, dtype.np) ^ a)
    b = Tensor([True, False])
    assert (True ^ b).tolist() == [False, True] and (True & b).tolist() == [True, False]
    assert (False | b).tolist() == [True, False]


MISUSE = {
    "permute": (lambda x: x.permute(0, 0), ValueError),
    "reshape": (lambda x: x.reshape(4), ValueError),
    "expand": (lambda x: x.expand(4, 3), ValueError),
    "matmul": (lambda x: x @ x, ValueError),
    "cat": (lambda x: x.cat(Tensor.ones(2, 4)), ValueError),
    "dim": (lambda x: x.sum(2), IndexError),
    "index": (lambda x: x[5], IndexError),
    "shrink": (lambda x: x.shrink(((0, 3), None)), IndexError),
    "alloc": (lambda x: Device["CPU"].allocator.alloc(-1), ValueError),
}


@pytest.mark.parametrize("numpy_type, call", [(t, c) for c, t in MISUSE.values()], ids=list(MISUSE))
def test_misuse_raises_what_numpy_and_the_seed_raise(numpy_type: type, call: Callable) -> None:
    """The seed raised AssertionError (its asserts: an invalid permute, a non-positive allocation); numpy and PyTorch
    raise ValueError or IndexError. Each misuse is both, so code written against either catches it."""
    with pytest.raises(numpy_type) as info:
        call(Tensor.ones(2, 3))
    assert isinstance(info.value, AssertionError), f"{type(info.value).__name__} is no AssertionError"
