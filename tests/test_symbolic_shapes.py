"""Symbolic shapes: a kernel whose shape has a Variable compiles once and runs for each bound value."""

from __future__ import annotations

import numpy as np
import pytest

from specgrad import Device, Tensor, Variable


def run(device: str, n: int) -> np.ndarray:
    i = Variable("i", 1, 16).bind(n)
    x = Tensor(np.arange(3 * n, dtype=np.float32).reshape(3, n), device=device).reshape(3, i)
    y = Tensor(np.ones((3, n), dtype=np.float32), device=device).reshape(3, i)
    out = ((x * 2 + y).relu().sum(1) / 2).numpy()
    np.testing.assert_allclose(out, (np.arange(3 * n).reshape(3, n) * 2 + 1).sum(1) / 2)
    return out


def test_symbolic_kernel_compiles_once(device: str) -> None:
    runners = Device[device].runners
    run(device, 5)
    before = len(runners)
    for n in (2, 7, 16, 1):
        run(device, n)
    assert len(runners) == before, "a new value of the Variable built a new kernel"


def test_symbolic_shape_is_visible_and_bound(device: str) -> None:
    i = Variable("i", 1, 8).bind(4)
    x = Tensor.ones(2, 4, device=device).reshape(2, i)
    assert x.shape[1] is i or x.shape[1] == i
    assert (x + 1).sum().item() == 16


def test_unbound_variable_cannot_be_realized() -> None:
    i = Variable("j", 1, 8)
    with pytest.raises(ValueError, match="cannot reshape"):
        Tensor.ones(2, 4).reshape(2, i)


@pytest.mark.parametrize("i_n, j_n", [(3, 5), (5, 3)])
def test_two_variables_are_each_their_own_kernel_argument(device: str, i_n: int, j_n: int) -> None:
    """A kernel over (i, j) takes both values; each bound the other way round, so values passed in the wrong order
    (or one passed twice) read the wrong elements."""
    i, j = Variable("i", 1, 8).bind(i_n), Variable("j", 1, 8).bind(j_n)
    x0 = np.arange(i_n * j_n, dtype=np.float32).reshape(i_n, j_n)
    x = Tensor(x0, device=device).reshape(i, j)
    np.testing.assert_allclose((x * 2).sum(1).numpy(), (x0 * 2).sum(1))
    np.testing.assert_allclose((x * 2).sum(0).numpy(), (x0 * 2).sum(0))
