"""Evaluation compiled like training: Trainer.evaluate's pass is captured once per batch shape (the full batch, the
last shorter one) and replayed, its figures read once per pass, and they equal an uncaptured pass's bit for bit, also
after the weights change in place, for every kind of output, and with an infinite or NaN loss in one batch.
`specgrad evaluate` captures its forward too and reports the same figures as an uncaptured one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import specgrad.cli.evaluate
from specgrad.cli.main import app
from typer.testing import CliRunner

import specgrad.realize
from specgrad import Tensor
from specgrad.device import GlobalCounters
from specgrad.modelspec.builder import Model
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_state_dict
from specgrad.train import validation as validation_module
from specgrad.train.data import eval_batches
from specgrad.train.trainer import Trainer, correct
from specgrad.train.validation import SlotPass

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def uncaptured(trainer: Trainer) -> dict[str, float]:
    """Trainer.evaluate as it was before the capture: a graph per batch, and a host read per figure and batch."""
    data, n = trainer.data, 0
    totals = {x.name: [0.0, 0, 0] for x in trainer.losses}
    for x, y in eval_batches(data.x_valid, data.y_valid, trainer.spec.batch_size):
        xs, ys = trainer.tensors(x, y)
        outs = trainer.model.outputs(*xs)
        n += len(x)
        for part, out, yt in zip(trainer.losses, outs, ys):
            total = totals[part.name]
            total[0] += part.reported(out, yt).item() * len(x)
            if part.task in ("classify", "language"):
                total[1] += int(correct(out, yt).item())
                total[2] += math.prod(yt.shape)
    per = {name: {"loss": t[0] / max(n, 1), **({"accuracy": t[1] / t[2]} if t[2] else {})}
           for name, t in totals.items()}  # fmt: skip
    for part in trainer.losses:  # NOTE: a mse regression's loss in the target's units, as RMSE
        if part.loss == "mse" and part.task == "regress":
            per[part.name]["rmse"] = math.sqrt(per[part.name]["loss"])
    if len(per) == 1:
        return next(iter(per.values()))
    ret = {"loss": sum(per[x.name]["loss"] * x.weight for x in trainer.losses)}
    return ret | {f"{name}.{k}": v for name, metrics in per.items() for k, v in metrics.items()}


def nudge(trainer: Trainer, seed: int) -> None:
    """Every float weight and statistic changed in place (assign), as a training step changes them."""
    rng = np.random.default_rng(seed)
    for t in get_state_dict(trainer.model).values():
        if t.dtype.np.kind == "f":
            a = t.numpy()
            t.assign(Tensor((a * 0.9 + rng.normal(0, 0.05, a.shape)).astype(a.dtype), device=t.device)).realize()


def with_batchnorm(tmp_path: Path) -> Path:
    """specs/digits_mlp.yaml with a batchnorm before its dropout (running statistics in eval mode)."""
    text = (ROOT / "specs" / "digits_mlp.yaml").read_text()
    assert "  - dropout: 0.1\n" in text
    (tmp_path / "bn.yaml").write_text(text.replace("  - dropout: 0.1\n", "  - batchnorm\n  - dropout: 0.1\n"))
    return tmp_path / "bn.yaml"


SPECS = {
    "classify with dropout": ROOT / "specs" / "digits_mlp.yaml",  # 11 full batches and one of 7
    "regression in the target's units": ROOT / "specs" / "house_prices.yaml",
    "language": ROOT / "specs" / "char_gpt.yaml",  # one full batch and one of 14: captured on pass 2
    "autoencoder": ROOT / "specs" / "digits_autoencoder.yaml",
    "several outputs": ROOT / "docs" / "examples" / "two_heads.yaml",  # whole batches only
    "batchnorm": None,
}


@pytest.mark.parametrize("kind", list(SPECS))
def test_every_pass_gives_the_uncaptured_figures_bit_for_bit(kind: str, tmp_path: Path) -> None:
    trainer = Trainer.create(validate_file(SPECS[kind] or with_batchnorm(tmp_path)))
    for i in range(4):  # NOTE: run, capture, then replays of each batch shape
        np.testing.assert_equal(trainer.evaluate(), uncaptured(trainer))
        nudge(trainer, i)


def test_no_validation_examples_give_the_figures_they_gave() -> None:
    trainer = Trainer.create(validate_file(ROOT / "specs" / "digits_mlp.yaml", ["data.valid_split=0"]))
    assert len(trainer.data.x_valid) == 0 and trainer.evaluate() == uncaptured(trainer) == {"loss": 0.0}


def test_a_pass_after_the_captures_builds_no_graph_and_reads_once(monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = Trainer.create(validate_file(ROOT / "specs" / "digits_mlp.yaml"))
    first = [trainer.evaluate(), trainer.evaluate()]  # NOTE: the last, shorter batch is captured on pass 2
    forwards, scheduled, reads = [0], [], [0]
    outputs, schedule, numpy = Model.outputs, specgrad.realize.create_schedule, Tensor.numpy

    def counted_schedule(outs: list) -> list:
        scheduled.extend(items := schedule(outs))
        return items

    def counted_outputs(self: Model, *xs: Tensor) -> tuple[Tensor, ...]:
        forwards[0] += 1
        return outputs(self, *xs)

    def counted_numpy(self: Tensor) -> np.ndarray:
        reads[0] += 1
        return numpy(self)

    monkeypatch.setattr(Model, "outputs", counted_outputs)
    monkeypatch.setattr(specgrad.realize, "create_schedule", counted_schedule)
    monkeypatch.setattr(Tensor, "numpy", counted_numpy)
    GlobalCounters.reset()
    assert trainer.evaluate() == first[1]
    assert forwards[0] == 0 and scheduled == [] and GlobalCounters.kernel_count > 0
    assert reads[0] == 2, "the loss and the hit count, once for the 12 batches"


@pytest.mark.parametrize("bad", [np.float32(1e30), np.float32(np.nan)])
def test_an_infinite_or_nan_loss_in_one_batch_is_as_uncaptured(bad: np.float32) -> None:
    trainer = Trainer.create(validate_file(ROOT / "specs" / "house_prices.yaml"))
    trainer.data.x_valid[40] = bad  # NOTE: batch 2 of 3: a prediction of 1e30 squares to infinity
    for _ in range(3):
        got = trainer.evaluate()
        np.testing.assert_equal(got, uncaptured(trainer))
        assert got["loss"] == math.inf if bad == 1e30 else math.isnan(got["loss"])
    trainer.data.x_valid[40] = 0.0
    np.testing.assert_equal(trainer.evaluate(), uncaptured(trainer))
    assert math.isfinite(trainer.evaluate()["loss"]), "a select keeps no trace of the earlier pass"


def test_a_pass_that_stops_short_starts_over() -> None:
    """A pass of the wrong number of batches (or one an error cut short) is refused, and the next pass captures anew
    with its counter at slot 0."""
    batch = [Tensor(np.ones((4, 2), np.float32))]
    passes = SlotPass(lambda xs, ys: [xs[0].sum().contiguous().realize()], 3)
    assert passes.run([(batch, batch)] * 3)[0].tolist() == [8.0, 8.0, 8.0]
    with pytest.raises(ValueError, match="a pass of 2 batches, where SlotPass has 3 slots"):
        passes.run([(batch, batch)] * 2)
    rows = [[Tensor(np.full((4, 2), k, np.float32))] for k in (1, 2, 3)]
    for _ in range(3):
        assert passes.run([(x, x) for x in rows])[0].tolist() == [8.0, 16.0, 24.0]


# *** specgrad evaluate ***


def _json(args: list[str]) -> dict:
    result = runner.invoke(app, ["evaluate", *args, "--json", "--allow-outside"])
    assert result.exit_code == 0, result.output
    return {k: v for k, v in json.loads(result.output).items() if k != "written"}


@pytest.fixture(scope="module")
def two_heads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("two_heads")
    example = ROOT / "docs" / "examples" / "two_heads.yaml"
    result = runner.invoke(app, ["train", str(example), "--out", str(out), "--epochs", "1"])
    assert result.exit_code == 0, result.output
    return next(out.iterdir())


@pytest.mark.parametrize("which", ["digits_mlp", "two_heads"])
def test_the_evaluate_command_captures_its_forward(which: str, weights: Path, two_heads: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The forward's graph is built for the first two batches of the full shape and for the last one; the report is
    the one an uncaptured forward gives (a graph per batch)."""
    args = [str(ROOT / "specs" / "digits_mlp.yaml"), "--weights", str(weights)] if which == "digits_mlp" else \
        [str(two_heads)]  # fmt: skip
    forwards, outputs = [0], Model.outputs

    def counted(self: Model, *xs: Tensor) -> tuple[Tensor, ...]:
        forwards[0] += 1
        return outputs(self, *xs)

    with monkeypatch.context() as patch:
        patch.setattr(Model, "outputs", counted)
        captured = _json(args)
    assert forwards[0] == (3 if which == "digits_mlp" else 2), "of 12 batches (two_heads: 5 whole ones)"
    with monkeypatch.context() as patch:
        patch.setattr(specgrad.cli.evaluate, "ShapeJits", lambda fxn: fxn)
        patch.setattr(specgrad.cli.evaluate, "_forward", lambda model: lambda xs: model.outputs(*xs))
        assert captured == _json(args)


def test_a_validation_split_of_another_size_is_evaluated_too() -> None:
    """The trainer's data is a plain dataclass a caller may change: a split of another number of batches gets a pass
    of its own (the slots are per batch), with the uncaptured figures, not an error."""
    trainer = Trainer.create(validate_file(ROOT / "specs" / "digits_mlp.yaml"))
    whole = (trainer.data.x_valid, trainer.data.y_valid)
    for cut in (None, 100, 64, None):  # NOTE: 12 batches, then 4 (the last of 4), 2 whole ones, 12 again
        trainer.data.x_valid, trainer.data.y_valid = (a[:cut] for a in whole)
        for _ in range(3):
            np.testing.assert_equal(trainer.evaluate(), uncaptured(trainer))


def test_a_pass_longer_than_its_slots_reads_them_as_it_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    """More batches than SLOTS: the figures are read every SLOTS batches (a slot write stays O(SLOTS), not O(batches))
    and come back whole and in order, pass after pass, the last read partial."""
    monkeypatch.setattr(validation_module, "SLOTS", 4)
    rows = [[Tensor(np.full((4, 2), k, np.float32))] for k in range(1, 11)]
    passes = SlotPass(lambda xs, ys: [xs[0].sum().contiguous().realize()], len(rows))
    assert passes.size == 4
    for _ in range(3):
        assert passes.run([(x, x) for x in rows])[0].tolist() == [8.0 * k for k in range(1, 11)]
