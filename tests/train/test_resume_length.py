"""`specgrad train --resume RUN --epochs N` (or --steps N): a finished, stopped or interrupted run trained to a new
length in its own folder, its schedule spanning the new length (issue 32, item 5)."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.nn.state import safe_load
from specgrad.train import trainer as trainer_module
from specgrad.train.run_folder import is_record

runner = CliRunner()
TINY = """\
specgrad: 1
name: tiny
seed: 0
input: {shape: [2]}
model: [{linear: 8}, relu, {linear: 2}]
data: {source: spirals, samples: 64, batch_size: 16}
train: {epochs: 3, lr: 0.05, optimizer: sgd, momentum: 0.9, log_every: 1SCHEDULE}
"""
SPE = 3  # NOTE: 51 training examples in batches of 16


def _train(tmp_path: Path, epochs: int, schedule: str = "", name: str = "runs", *more: str) -> Path:
    spec = tmp_path / f"tiny{schedule.replace(':', '').replace(' ', '').replace(',', '')}.yaml"
    spec.write_text(TINY.replace("SCHEDULE", schedule))
    result = runner.invoke(app, ["train", str(spec), "--epochs", str(epochs), "--out", str(tmp_path / name),
                                 "--device", "CPU", *more])  # fmt: skip
    assert result.exit_code == 0, result.output
    return tmp_path / name / "tiny-1"


def _resume(folder: Path, *more: str, code: int = 0) -> str:
    result = runner.invoke(app, ["train", "--resume", str(folder), *more])
    assert result.exit_code == code, result.output
    return result.output


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def _weights(path: Path) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in safe_load(path).items() if k.startswith("model.")}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _last(folder: Path, epoch: int) -> dict[str, np.ndarray]:
    return _weights(folder / "checkpoints" / f"epoch-{epoch:05d}.safetensors")


def _lrs(folder: Path) -> dict[int, float]:
    return {r["step"]: r["lr"] for r in _records(folder) if r["split"] == "train"}


@pytest.mark.parametrize("schedule", ["", ", schedule: exponential, gamma: 0.5", ", schedule: step, step_size: 2"])
def test_a_run_extended_from_3_to_5_epochs_is_the_5_epoch_run_when_the_schedule_ignores_the_length(
    tmp_path: Path, schedule: str
) -> None:
    """Constant lr (and step or exponential decay): the schedule does not depend on the length, so 3 epochs then 2 more
    are bit for bit 5 epochs; the resolved spec holds the new length and metrics.jsonl says where it changed."""
    extended, straight = _train(tmp_path, 3, schedule), _train(tmp_path, 5, schedule, "straight")
    said = _resume(extended, "--epochs", "5")
    assert "lengthening" in said and "at step 9: 9 steps -> 15 steps" in said
    assert yaml.safe_load((extended / "spec.resolved.yaml").read_text())["train"]["epochs"] == 5
    (record,) = [r for r in _records(extended) if r["split"] == "extend"]
    assert record == {"split": "extend", "epoch": 3, "step": 9, "epochs_before": 3, "steps_before": 0,
                      "total_steps_before": 9, "epochs": 5, "steps": 0, "total_steps": 15}  # fmt: skip
    assert is_record(record) and not is_record({**record, "total_steps": None})
    assert _same(_last(extended, 5), _last(straight, 5))
    assert _same(_weights(extended / "model.safetensors"), _weights(straight / "model.safetensors"))
    plain = [r for r in _records(extended) if r["split"] != "extend"]
    drop = ("examples_per_s",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in plain] == \
        [{k: v for k, v in r.items() if k not in drop} for r in _records(straight)]  # fmt: skip


def test_a_cosine_schedule_is_stretched_to_the_new_length(tmp_path: Path) -> None:
    """Cosine: the first 3 epochs followed the 3-epoch curve (to min_lr), the rest follow the 5-epoch curve from step
    9 on (the rate jumps back up there); so the weights are not those of a run trained 5 epochs from the start."""
    cosine = ", schedule: cosine"
    short, extended, straight = _train(tmp_path, 3, cosine, "short"), _train(tmp_path, 3, cosine), \
        _train(tmp_path, 5, cosine, "straight")  # fmt: skip
    _resume(extended, "--epochs", "5")
    lrs, five, three = _lrs(extended), _lrs(straight), _lrs(short)
    assert [lrs[s] for s in range(1, 10)] == [three[s] for s in range(1, 10)]
    assert [lrs[s] for s in range(10, 16)] == [five[s] for s in range(10, 16)]
    assert lrs[10] > 10 * lrs[9]  # NOTE: the 3-epoch curve was near min_lr; the 5-epoch one is at 35% of lr there
    assert not _same(_last(extended, 5), _last(straight, 5))


def test_an_extension_interrupted_resumes_bit_identically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the middle of the extension, and a kill before its first checkpoint (only the old length's checkpoint
    on disk): --resume ends both with the weights and metrics of an uninterrupted extension."""
    cosine = ", schedule: cosine"
    whole = _train(tmp_path, 3, cosine, "whole")
    _resume(whole, "--epochs", "5")
    folder = _train(tmp_path, 3, cosine)
    killed = tmp_path / "killed"
    shutil.copytree(folder, killed)
    calls = [0]

    @contextlib.contextmanager
    def pressed_at_step_2():
        def pressed() -> bool:
            calls[0] += 1
            return calls[0] == 2

        yield pressed

    with monkeypatch.context() as patch:
        patch.setattr(trainer_module, "_deferred_interrupt", pressed_at_step_2)
        assert "continue with" in _resume(folder, "--epochs", "5", code=130)
    assert (folder / "checkpoints" / "interrupted.safetensors").exists()
    _resume(folder)
    assert _same(_last(folder, 5), _last(whole, 5))
    assert [r["lr"] for r in _records(folder) if "lr" in r] == [r["lr"] for r in _records(whole) if "lr" in r]
    # NOTE: a kill -9 before the first checkpoint of the new length: the spec and the extend record are written, the
    # newest checkpoint is still the one of the 3-epoch spec
    _resume(killed, "--epochs", "5")
    for name in ("epoch-00004.safetensors", "epoch-00005.safetensors"):
        (killed / "checkpoints" / name).unlink()
    (killed / "model.safetensors").unlink()
    said = _resume(killed)
    assert "resuming from epoch-00003.safetensors: step 9 of 15" in said
    assert _same(_last(killed, 5), _last(whole, 5))
    assert len([r for r in _records(killed) if r["split"] == "extend"]) == 1


def test_an_early_stopped_run_goes_on(tmp_path: Path) -> None:
    """A run early stopping ended: its stop record is cleared and training continues, early stopping counting its
    patience afresh; a plain --resume of the stopped run still says it has finished."""
    stop = "train.early_stopping={metric: loss, patience: 1, min_delta: 10}"
    folder = _train(tmp_path, 4, "", "runs", "--set", stop)
    assert [r["epoch"] for r in _records(folder) if r["split"] == "stop"] == [2]
    assert "has finished (6 steps, stopped early)" in _resume(folder)
    said = _resume(folder, "--epochs", "6")
    assert "resuming from epoch-00002.safetensors: step 6 of 18" in said
    assert [r["epoch"] for r in _records(folder) if r["split"] == "stop"] == [3]  # NOTE: patience 1 again
    assert (folder / "checkpoints" / "epoch-00003.safetensors").exists()


def test_what_an_extension_refuses(tmp_path: Path) -> None:
    """No fewer steps than trained, no run that ended mid-epoch, no --set or --out; the same length is a plain
    resume (no extend record)."""
    folder = _train(tmp_path, 3)
    said = _resume(folder, "--epochs", "3")
    assert "has finished" in said and not [r for r in _records(folder) if r["split"] == "extend"]
    said = _resume(folder, "--epochs", "2", code=1)
    assert "--epochs 2 asks for 6 steps, but" in said and "has trained 9 steps (3 whole epochs) already" in said
    assert "--set" in _resume(folder, "--epochs", "5", "--set", "train.lr=0.1", code=2)
    assert yaml.safe_load((folder / "spec.resolved.yaml").read_text())["train"]["epochs"] == 3
    spec = tmp_path / "partial.yaml"
    spec.write_text(TINY.replace("SCHEDULE", ""))
    result = runner.invoke(app, ["train", str(spec), "--steps", "7", "--out", str(tmp_path / "p"), "--device", "CPU"])
    assert result.exit_code == 0, result.output
    said = _resume(tmp_path / "p" / "tiny-1", "--epochs", "5", code=1)
    assert "ended in the middle of epoch 3 (train.steps: 7), so it cannot be lengthened" in said
    assert "Traceback" not in said
    longer = _resume(tmp_path / "p" / "tiny-1", "--steps", "9", code=1)
    assert "cannot be lengthened" in longer
