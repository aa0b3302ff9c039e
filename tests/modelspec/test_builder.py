"""Every example spec builds into a model whose output shape and parameter count match validate's summary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specgrad import Tensor
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_parameters

SPECS = sorted((Path(__file__).resolve().parents[2] / "specs").glob("*.yaml"))  # every file in specs/


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_example_spec_builds_and_runs(path: Path) -> None:
    spec = validate_file(path)
    model = build_model(spec)
    assert sum(int(np.prod(t.shape)) for t in get_parameters(model) if t.requires_grad) == spec.params
    rng = np.random.default_rng(0)
    xs = [_example(rng, shape, dtype) for shape, dtype in spec.inputs.values()]
    out = model(*xs)
    outs = out if isinstance(out, tuple) else (out,)
    for name, o in zip(spec.outputs, outs):
        assert o.shape == (3, *spec.output_shape(name))
        assert np.isfinite(o.numpy()).all()


def _example(rng: np.random.Generator, shape: tuple, dtype: str) -> Tensor:
    if dtype.startswith("int"):
        return Tensor(rng.integers(0, 8, (3, *shape)).astype(np.int32))
    return Tensor(rng.standard_normal((3, *shape)).astype(np.float32))


def test_same_seed_same_weights() -> None:
    spec = validate_file(SPECS[0])
    a, b = build_model(spec), build_model(spec)
    for ta, tb in zip(get_parameters(a), get_parameters(b)):
        np.testing.assert_array_equal(ta.numpy(), tb.numpy())
