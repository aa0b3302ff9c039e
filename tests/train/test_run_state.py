"""What a run folder holds, read back as specgrad wrote it or refused (issue 30): checkpoint positions checked against
the run, metrics records, and the bounds of compare's plot."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.nn.state import safe_load_metadata
from specgrad.train.compare import MAX_METRICS, MAX_POINTS, Run, plotted, read_run, thinned
from specgrad.train.plots import MAX_PANELS, MAX_VALUE, panels, plain, plottable
from specgrad.train.run_folder import is_record
from specgrad.train.trainer import BadMetadata, Position, check_position

runner = CliRunner()
TINY = """\
specgrad: 1
name: tiny
seed: 0
input: {shape: [2]}
model: [{linear: 8}, relu, {linear: 2}]
data: {source: spirals, samples: 64, batch_size: 16}
train: {epochs: 3, lr: 0.01}
"""
SPE, TOTAL = 3, 7  # NOTE: 51 training examples in batches of 16; --steps 7 makes the third epoch partial


def _check(pos: Position, name: str = "epoch-00002.safetensors", total: int = TOTAL, stopping: bool = False) -> None:
    check_position(pos, pos.to_meta(), name, SPE, total, stopping)


def test_every_checkpoint_specgrad_writes_passes(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    result = runner.invoke(app, ["train", str(tmp_path / "tiny.yaml"), "--out", str(tmp_path / "runs"), "--steps",
                                 str(TOTAL), "--device", "CPU"])  # fmt: skip
    assert result.exit_code == 0, result.output
    found = sorted((tmp_path / "runs" / "tiny-1" / "checkpoints").glob("*.safetensors"))
    assert {p.name for p in found} >= {"best.safetensors", "epoch-00003.safetensors"}
    for path in found:
        meta = safe_load_metadata(path)
        check_position(Position.from_meta(meta), meta, path.name, SPE, TOTAL, False)


LOSSES = "losses are not one finite loss for each of the 2 batches"
BEST = {"best": 0.5, "best_epoch": 1, "ref": 0.5}
GOOD = [
    ("epoch-00001.safetensors", Position(epoch=1, step=3, **BEST)),
    ("epoch-00003.safetensors", Position(epoch=3, step=7, stale=2, **BEST)),  # NOTE: the last epoch, partial
    ("interrupted.safetensors", Position(epoch=0, step=1, skip=1, losses=[0.7])),
    ("interrupted.safetensors", Position(epoch=1, step=6, skip=3, losses=[0.7, 0.6, 0.5], **BEST)),  # NOTE: its end
    ("best.safetensors", Position(epoch=2, step=6, **{**BEST, "best_epoch": 2})),
    # NOTE: a first epoch whose validation loss overflowed (or was NaN) is the best so far
    ("epoch-00002.safetensors", Position(epoch=2, step=6, **{**BEST, "best": float("inf"), "ref": float("inf")})),
    ("epoch-00002.safetensors", Position(epoch=2, step=6, **{**BEST, "best": float("nan"), "ref": float("nan")})),
]
BAD = [
    (Position(epoch=2, step=6, **BEST), {"step": "5"}, "metadata differ from its position's step 6 and epoch 2"),
    (Position(epoch=99, step=7), {}, "its position's epoch 99 is past the run's last epoch, 3"),
    (Position(epoch=2, step=1000), {}, "its position's step 1000 is past the run's last step, 7"),
    (Position(epoch=1, step=5, skip=10**9), {}, "its position's skip 1000000000 is more than the 3 batches"),
    (Position(epoch=2, step=4), {}, "its position's step 4 does not follow from its epoch 2 and skip 0"),
    (Position(epoch=2, step=6, skip=1, losses=[0.5]), {}, "does not follow"),  # NOTE: an interruption at the end
    (Position(epoch=1, step=5, skip=2, losses=[0.5]), {}, LOSSES),
    (Position(epoch=1, step=5, skip=2, losses=[0.5, float("nan")]), {}, LOSSES),
    (Position(epoch=2, step=6, best=0.5, best_epoch=5, ref=0.5), {}, "best_epoch 5 is not one of its 2 epochs"),
    (Position(epoch=2, step=6, best=0.5, best_epoch=0, ref=0.5), {}, "best_epoch 0 is not one of its 2 epochs"),
    (Position(epoch=2, step=6, best=0.5), {}, "best, best_epoch and ref are not all set"),
    (Position(epoch=2, step=6, stale=3, **BEST), {}, "its position's stale 3 counts more epochs than its 2"),
    (Position(epoch=2, step=6, **{**BEST, "ref": float("-inf")}), {}, "its position's ref is not a value a loss"),
    (Position(epoch=2, step=6, **{**BEST, "best": -1e308}), {}, "its position's best is not a value a loss"),
    (Position(epoch=2, step=6, **{**BEST, "ref": 1e39}), {}, "its position's ref is not a value a loss"),
    (Position(epoch=2, step=6, stopped="no reason", **BEST), {}, "stopped early, which this run's spec"),
]


@pytest.mark.parametrize(("name", "pos"), GOOD, ids=[f"{n}-{p.step}" for n, p in GOOD])
def test_positions_specgrad_writes(name: str, pos: Position) -> None:
    _check(pos, name)


@pytest.mark.parametrize(("pos", "meta", "said"), BAD, ids=[said[:40] for _, _, said in BAD])
def test_positions_specgrad_never_writes(pos: Position, meta: dict[str, str], said: str) -> None:
    with pytest.raises(BadMetadata, match=said.replace("(", r"\(").replace(")", r"\)")):
        name = "interrupted.safetensors" if pos.skip else f"epoch-{pos.epoch:05d}.safetensors"
        check_position(pos, {**pos.to_meta(), **meta}, name, SPE, TOTAL, False)


def test_a_position_must_fit_its_checkpoints_name() -> None:
    with pytest.raises(BadMetadata, match="skip 1 is not what specgrad writes into epoch-00001.safetensors"):
        _check(Position(epoch=0, step=1, skip=1, losses=[0.5]), "epoch-00001.safetensors")
    with pytest.raises(BadMetadata, match="skip 0 is not what specgrad writes into interrupted.safetensors"):
        _check(Position(epoch=1, step=3, **BEST), "interrupted.safetensors")
    with pytest.raises(BadMetadata, match="epoch 2 is not the epoch its name says"):
        _check(Position(epoch=2, step=6, **BEST), "epoch-00001.safetensors")


def test_early_stopping_state_is_checked_against_the_spec() -> None:
    stopped = Position(epoch=2, step=6, stale=1, stopped="valid loss did not improve", **BEST)
    _check(stopped, stopping=True)
    with pytest.raises(BadMetadata, match="stopped early"):
        _check(replace(stopped, stopped="x" * 5000), stopping=True)


def test_metrics_records_are_what_the_trainer_logs() -> None:
    assert is_record({"split": "valid", "epoch": 1, "step": 3, "loss": float("nan"), "accuracy": 0.5})
    assert is_record({"split": "stop", "epoch": 1, "step": 3, "reason": "no improvement"})
    for bad in ({"split": "valid", "epoch": 1, "step": 3, "loss": "x"}, {"split": "valid", "epoch": True, "step": 3},
                {"split": "valid", "epoch": 1, "step": 3, "loss": 1e308}, {"split": "other", "epoch": 1, "step": 3},
                {"split": "valid", "epoch": -1, "step": 3}, {"split": "valid", "epoch": 1, "step": 3, "loss": [1]},
                {"split": "stop", "epoch": 1, "step": 3, "reason": "x" * 5000}, [1, 2]):  # fmt: skip
        assert not is_record(bad), bad


def test_plots_are_bounded_whatever_the_data_says() -> None:
    pytest.importorskip("matplotlib")
    fig, axes = panels(3000, 5.5, 4.2)
    assert len(axes) == MAX_PANELS and max(fig.get_size_inches()) <= 80
    assert plottable(1.5) and plottable(-MAX_VALUE) and not plottable(1e308) and not plottable(float("nan"))
    assert not plottable(True) and not plottable("1")
    assert plain("$\\foo$") == "\\$\\foo\\$" and len(plain("x" * 10_000)) == 80
    # NOTE: names from files escaped as a terminal's text is: ESC and BEL have no glyph (a box and a warning)
    assert plain("\x1b[31mX\x07\u202e") == "\\x1b[31mX\\x07\\u202e" and len(plain("\x1b" * 100)) == 80


def _run(curves: dict[str, list[tuple[int, float]]]) -> Run:
    run = Run(Path("r"), {}, True, "loss", 1, 1, {}, None)
    run.curves = curves
    return run


def test_compare_plots_a_bounded_choice_of_curves() -> None:
    many = {f"valid m{i:04d}": [(1, 0.5)] for i in range(3000)}
    names, left_out = plotted([_run({**many, "valid loss": [(1, 1.0)], "train loss": [(1, 1.0)]})])
    assert len(names) == MAX_PANELS and names[0] == "valid loss" and names[-1] == "train loss"
    assert len(left_out) == 3002 - MAX_PANELS
    points = [(e, float(e)) for e in range(1, 100_001)]
    kept = thinned(points)
    assert len(kept) == MAX_POINTS and kept[0] == points[0] and kept[-1] == points[-1]


def test_compare_keeps_a_bounded_number_of_metric_names(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    result = runner.invoke(app, ["train", str(tmp_path / "tiny.yaml"), "--out", str(tmp_path / "runs"), "--steps", "3",
                                 "--device", "CPU"])  # fmt: skip
    assert result.exit_code == 0, result.output
    folder = tmp_path / "runs" / "tiny-1"
    with (folder / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"split": "valid", "epoch": 2, "step": 6, **{f"m{i}": 0.5 for i in range(3000)}}) + "\n")
        f.write("garbage\n" * 500)
    run = read_run(folder)
    assert run.metrics_left_out and len(run.curves) <= MAX_METRICS + 1
    assert len(run.final) == MAX_METRICS - 2  # NOTE: loss and accuracy, from the records before, are names too
    assert run.skipped_count == 500 and len(run.skipped) == 100
    shown = runner.invoke(app, ["compare", str(folder)])
    assert shown.exit_code == 0 and f"the first {MAX_METRICS} are shown" in shown.output


def test_compare_reads_a_long_log_in_bounded_memory(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    result = runner.invoke(app, ["train", str(tmp_path / "tiny.yaml"), "--out", str(tmp_path / "runs"), "--steps", "3",
                                 "--device", "CPU"])  # fmt: skip
    assert result.exit_code == 0, result.output
    folder, epochs = tmp_path / "runs" / "tiny-1", 100_000
    lines = (json.dumps({"split": s, "epoch": e, "step": 3 * e, "loss": 1 / e}) for e in range(1, epochs + 1)
             for s in ("train_epoch", "valid"))  # fmt: skip
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    run = read_run(folder)
    assert run.epochs == epochs and run.steps == 3 * epochs and run.final == {"loss": 1 / epochs}
    assert (run.best, run.best_epoch) == (1 / epochs, epochs)
    for name in ("valid loss", "train loss"):
        points = run.curves[name]
        assert len(points) <= 2 * MAX_POINTS + 1 and points[0] == (1, 1.0) and points[-1] == (epochs, 1 / epochs)
        assert [e for e, _ in points] == sorted(e for e, _ in points)


def test_a_run_folders_name_is_checked_in_bytes_when_it_is_made(tmp_path: Path) -> None:
    """The second line of defence behind validation: 100 letters of three bytes each fit the characters, not the
    bytes a file system takes in a name with the suffixes specgrad adds."""
    from specgrad.modelspec.errors import SpecError
    from specgrad.train.run_folder import check_name, new_run_folder

    with pytest.raises(SpecError, match="at most 239 bytes"):
        new_run_folder(tmp_path, "€" * 100)
    assert not any(tmp_path.iterdir())
    check_name("é" * 100)


@pytest.mark.parametrize("final", ["best", "last"])
def test_resume_without_the_best_checkpoint_never_ends_with_the_last_weights(tmp_path: Path, final: str) -> None:
    """train.final_weights: best needs checkpoints/best.safetensors to end the run: a resumed run whose best
    checkpoint was removed is refused before any step, naming it; with final_weights: last it is not needed."""
    (tmp_path / "tiny.yaml").write_text(TINY.replace("lr: 0.01}", f"lr: 0.01, final_weights: {final}}}"))
    result = runner.invoke(app, ["train", str(tmp_path / "tiny.yaml"), "--out", str(tmp_path / "runs"), "--steps",
                                 "4", "--device", "CPU"])  # fmt: skip
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "tiny-1"
    best = run / "checkpoints" / "best.safetensors"
    epoch = safe_load_metadata(best)["epoch"]
    best.unlink()
    (run / "model.safetensors").unlink()
    result = runner.invoke(app, ["train", "--resume", str(run), "--device", "CPU"])
    if final == "last":
        assert result.exit_code == 0, result.output
        assert safe_load_metadata(run / "model.safetensors")["weights"] == "last"
        return
    assert result.exit_code == 1, result.output
    assert f"{best} is missing: it holds the weights of epoch {epoch}, the best" in result.output
    assert "train.final_weights: last" in result.output and "no validation metric" not in result.output
    assert not (run / "model.safetensors").exists()
