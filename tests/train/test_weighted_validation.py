"""With train.class_weights the validation loss is the split's weighted mean (the sum of w[label] x loss over the sum
of w[label], as spec.md says), not each batch's weighted mean averaged by batch size: equal to a float64 numpy
reference on the model's own outputs, for cross_entropy and binary_cross_entropy, at batch sizes that split the
validation examples differently (issue 32, round 1 attack)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specgrad import Tensor
from specgrad.modelspec.validate import validate_file
from specgrad.train.metrics import class_weights
from specgrad.train.trainer import Trainer


def _data(tmp_path: Path) -> None:
    """300 rows, about one in five of class yes: the weights differ a lot, so a per-batch mean shows."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 3))
    y = (x @ np.array([1.0, -2.0, 0.5]) > 1.2).astype(int)
    rows = [",".join(f"{v:.5f}" for v in r) + "," + ("yes" if k else "no") for r, k in zip(x, y)]
    (tmp_path / "b.csv").write_text("a,b,c,label\n" + "\n".join(rows) + "\n")


def _reference(out: np.ndarray, y: np.ndarray, w: np.ndarray, binary: bool) -> float:
    """The weighted mean of the split in float64, from the model's outputs."""
    x = out.astype(np.float64)
    if binary:
        x = x.reshape(-1)
        each = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    else:
        z = x - x.max(1, keepdims=True)
        each = -(z - np.log(np.exp(z).sum(1, keepdims=True)))[np.arange(len(y)), y]
    return float((each * w[y]).sum() / w[y].sum())


@pytest.mark.parametrize("loss", ["cross_entropy", "binary_cross_entropy"])
@pytest.mark.parametrize("batch", [16, 50])
def test_the_weighted_validation_loss_is_the_weighted_mean_of_the_split(tmp_path: Path, loss: str, batch: int) -> None:
    _data(tmp_path)
    width = 1 if loss == "binary_cross_entropy" else 2
    (tmp_path / "s.yaml").write_text(
        f"specgrad: 1\nname: w\ninput: {{shape: [3]}}\nmodel: [{{linear: 8}}, relu, {{linear: {width}}}]\n"
        f"data: {{source: csv, path: b.csv, target: label, batch_size: {batch}}}\n"
        f"train: {{loss: {loss}, class_weights: balanced, epochs: 1}}\n")  # fmt: skip
    spec = validate_file(str(tmp_path / "s.yaml"))
    trainer = Trainer.create(spec)
    data = trainer.data
    assert len(data.x_valid) % batch != 0  # NOTE: a shorter last batch, where a per-batch mean weighs it wrongly
    out = trainer.model.outputs(Tensor(data.x_valid))[0].numpy()
    y = np.asarray(data.y_valid).reshape(-1).astype(np.int64)
    w = class_weights(spec, data)
    assert w is not None and abs(w[0] - w[1]) > 1
    binary = loss == "binary_cross_entropy"
    expected = _reference(out, y, w, binary)
    old = sum(_reference(out[i : i + batch], y[i : i + batch], w, binary) * len(y[i : i + batch])
              for i in range(0, len(y), batch)) / len(y)  # fmt: skip
    assert abs(old - expected) > 1e-4  # NOTE: the old figure (batch means weighted by batch size) is told apart
    assert trainer.evaluate()["loss"] == pytest.approx(expected, rel=1e-6, abs=1e-6)
    assert trainer.evaluate()["loss"] == pytest.approx(expected, rel=1e-6, abs=1e-6)  # NOTE: the captured replay
