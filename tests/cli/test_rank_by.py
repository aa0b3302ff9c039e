"""`--rank-by METRIC` for `specgrad compare` and `specgrad sweep`: runs best first by their best validation value of
the metric, in its direction (accuracy higher, loss lower); a name that is not a metric, or a metric a run does not
have, is a clear error listing the metrics it has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

runner = CliRunner()
SPEC = """specgrad: 1
name: spir
seed: 0
input: {shape: [2]}
model: [{linear: 16}, relu, {linear: 2}]
data: {source: spirals, samples: 200, batch_size: 16}
train: {epochs: 3, metrics: [f1]}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three runs of one spec at three learning rates."""
    folder = tmp_path_factory.mktemp("rank")
    (folder / "spir.yaml").write_text(SPEC)
    for lr in (0.0001, 0.03, 0.003):
        result = runner.invoke(app, ["train", str(folder / "spir.yaml"), "--out", str(folder / "runs"), "--set",
                                     f"train.lr={lr}"])  # fmt: skip
        assert result.exit_code == 0, result.output
    return sorted((folder / "runs").iterdir())


def valid(run: Path) -> list[dict]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r["split"] == "valid"]


@pytest.mark.parametrize("metric, higher", [("accuracy", True), ("f1", True), ("loss", False)])
def test_compare_ranks_by_the_metric_in_its_direction(runs: list[Path], metric: str, higher: bool) -> None:
    result = runner.invoke(app, ["compare", *map(str, runs), "--json", "--rank-by", metric])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    best = {str(r): (max if higher else min)(v[metric] for v in valid(r)) for r in runs}
    assert [r["best"] for r in doc["runs"]] == [best[r["run"]] for r in doc["runs"]]
    assert all(r["metric"] == metric for r in doc["runs"])
    shown = [r["best"] for r in doc["runs"]]
    assert shown == sorted(shown, reverse=higher)
    plain = json.loads(runner.invoke(app, ["compare", *map(str, runs), "--json"]).output)
    assert [r["run"] for r in plain["runs"]] == [str(r) for r in runs]  # NOTE: without --rank-by: as given


def test_rank_by_a_metric_a_run_lacks_or_no_metric_at_all(runs: list[Path]) -> None:
    result = runner.invoke(app, ["compare", *map(str, runs), "--rank-by", "auc"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "has no validation auc (its metrics: loss, accuracy, f1)" in result.output
    result = runner.invoke(app, ["compare", str(runs[0]), "--rank-by", "mea"])
    assert result.exit_code == 1 and "is not a metric" in result.output and "did you mean 'mae'?" in result.output


def test_sweep_ranks_by_the_metric(tmp_path: Path) -> None:
    (tmp_path / "spir.yaml").write_text(SPEC)
    args = ["sweep", str(tmp_path / "spir.yaml"), "--grid", "train.lr=0.0001,0.03", "--epochs", "2", "--out",
            str(tmp_path / "runs"), "--parallel", "1"]  # fmt: skip
    result = runner.invoke(app, [*args, "--rank-by", "accuracy"])
    assert result.exit_code == 0, result.output
    folder = next((tmp_path / "runs").iterdir())
    trials = json.loads((folder / "summary.json").read_text())["trials"]
    best = [max(v["accuracy"] for v in valid(folder / t["trial"])) for t in trials]
    assert [t["metric"] for t in trials] == ["accuracy"] * 2 and best == sorted(best, reverse=True)
    assert [t["best"] for t in trials] == best
    result = runner.invoke(app, ["sweep", "--resume", str(folder), "--rank-by", "r2"])
    assert result.exit_code == 1 and "has no validation r2 (its metrics: loss, accuracy, f1)" in result.output
    result = runner.invoke(app, [*args, "--rank-by", "mse"])
    assert result.exit_code == 1 and "is not a metric" in result.output
