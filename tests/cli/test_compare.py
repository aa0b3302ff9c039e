"""`specgrad compare RUN_DIR...`: final and best metrics side by side, the spec keys that differ (defaults included,
files by where they are), and one plot of the curves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.train.compare import differences, flatten, ranked, read_run

SPECS = Path(__file__).resolve().parents[2] / "specs"
runner = CliRunner()


def trained(out: Path, *args: str) -> Path:
    result = runner.invoke(app, ["train", str(SPECS / "house_prices.yaml"), "--out", str(out), "--epochs", "3", *args])
    assert result.exit_code == 0, result.output
    return max(out.iterdir(), key=lambda p: p.stat().st_mtime_ns)


def test_two_runs_side_by_side(tmp_path: Path) -> None:
    adam = trained(tmp_path / "a")
    sgd = trained(tmp_path / "b", "--set", "train.optimizer=sgd", "--set", "train.lr=0.01")
    doc = json.loads(runner.invoke(app, ["compare", str(adam), str(sgd), "--json"]).output)
    # NOTE: adam is the house spec's default optimizer, left out of its spec.resolved.yaml: it still differs; the data
    # file is named from two different folders, and is the same file
    assert doc["differences"] == {"train.optimizer": ["adam", "sgd"], "train.lr": [0.003, 0.01]}
    for run, folder in zip(doc["runs"], (adam, sgd)):
        logged = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        valid = [r for r in logged if r["split"] == "valid"]
        # NOTE: a mse regression reports its loss in the target's units too, as rmse
        assert run["epochs"] == 3 and run["finished"] and run["final"] == {"loss": valid[-1]["loss"],
                                                                            "rmse": valid[-1]["rmse"]}  # fmt: skip
        assert run["best"] == min(r["loss"] for r in valid) and run["metric"] == "loss"
    text = runner.invoke(app, ["compare", str(adam), str(sgd), "--plot", str(tmp_path / "curves.png")])
    assert text.exit_code == 0 and "train.optimizer" in text.output and "sgd" in text.output
    pytest.importorskip("matplotlib")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_damaged_metrics_log_is_read_as_far_as_it_goes(tmp_path: Path) -> None:
    run = trained(tmp_path / "a")
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"split": "valid", "epoch": 4, "step": 30, "loss": NaN}\n{"split": "val')
    result = runner.invoke(app, ["compare", str(run), "--json"])
    assert result.exit_code == 0 and "could not be read" in result.output
    doc = json.loads(result.stdout)  # NOTE: standard JSON: NaN is null
    assert doc["runs"][0]["final"] == {"loss": None} and doc["runs"][0]["best_epoch"] == 3
    assert doc["runs"][0]["skipped_lines"] == [len((run / "metrics.jsonl").read_text().splitlines())]


def test_what_is_not_a_run_is_a_clear_error(tmp_path: Path) -> None:
    run = trained(tmp_path / "a")
    for args, said in (([str(tmp_path)], "is not a run folder"), ([str(run), str(run)], "named twice"),
                       ([str(run), "--plot", str(tmp_path / "no" / "x.png")], "--plot"),
                       ([str(run), "--plot", str(tmp_path / "c.svg")], "must end in .png")):  # fmt: skip
        result = runner.invoke(app, ["compare", *args])
        assert result.exit_code == 1 and said in result.output and "Traceback" not in result.output


def test_flatten_differences_and_ranking(tmp_path: Path) -> None:
    spec = {"model": [{"linear": 32}, "relu", {"linear": 1}], "input": {"shape": [4]}}
    assert flatten(spec) == {"model.0.linear": 32, "model.1": "relu", "model.2.linear": 1, "input.shape": [4]}
    assert differences([spec, {**spec, "input": {"shape": [5]}}]) == {"input.shape": [[4], [5]]}
    assert differences([spec, {**spec, "seed": 1}]) == {"seed": [None, 1]}
    runs = [read_run(trained(tmp_path / str(i), "--set", f"train.lr={lr}")) for i, lr in enumerate((0.0001, 0.01))]
    assert [r.best for r in ranked(runs)] == sorted(r.best for r in runs), "loss: lower first"
