"""`specgrad sweep`: the plan (grid, --random), trials as run folders in their own processes, the summary best first,
a failing trial recorded while the others finish, an interrupted sweep resumed to the same bits, and the same sweep on
Ray (where ray is installed)."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.modelspec.errors import SpecError
from specgrad.nn.state import safe_load
from specgrad.train.sweep import parse_grid, plan_trials

SPECS = Path(__file__).resolve().parents[2] / "specs"
HOUSES = str(SPECS / "house_prices.yaml")
runner = CliRunner()


def swept(out: Path, *args: str) -> Path:
    result = runner.invoke(app, ["sweep", HOUSES, "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return next(out.iterdir())


def weights(folder: Path) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in safe_load(folder / "model.safetensors").items()}


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)


# *** the plan ***


def test_the_grid_is_every_combination_in_order() -> None:
    grid = parse_grid(["train.lr=0.001, 0.01", "input.shape=[4],[2, 2]", "name='a,b',c"])
    assert grid == {"train.lr": ["0.001", "0.01"], "input.shape": ["[4]", "[2, 2]"], "name": ["'a,b'", "c"]}
    trials = plan_trials(grid, None, 0)
    assert [t.name for t in trials][:2] == ["trial-001", "trial-002"] and len(trials) == 8
    assert trials[1].overrides == ["train.lr=0.001", "input.shape=[4]", "name=c"]


def test_random_draws_are_seeded_and_ranges_stay_in_bounds() -> None:
    grid = parse_grid(["train.lr=1e-4..1e-1", "model.0.linear=8..64", "data.batch_size=16,32"])
    a, b, c = plan_trials(grid, 20, 7), plan_trials(grid, 20, 7), plan_trials(grid, 20, 8)
    assert a == b and a != c
    for t in a:
        values = dict(o.split("=") for o in t.overrides)
        assert 1e-4 <= float(values["train.lr"]) <= 1e-1 and 8 <= int(values["model.0.linear"]) <= 64
        assert values["data.batch_size"] in ("16", "32")
    lrs = [float(dict(o.split("=") for o in t.overrides)["train.lr"]) for t in plan_trials(grid, 400, 0)]
    assert 0.3 < np.mean(np.log10(lrs) < -2.5) < 0.7, "log-uniform: as many below the middle decade as above"
    picks = plan_trials(parse_grid(["seed=1,2,3", "train.lr=0.1,0.2"]), 6, 3)
    assert len({tuple(t.overrides) for t in picks}) == 6, "drawn without repeats"
    whole = plan_trials(parse_grid(["seed=1..3"]), 3, 3)
    assert sorted(t.overrides[0] for t in whole) == ["seed=1", "seed=2", "seed=3"], "a range of whole numbers too"


@pytest.mark.parametrize("grid,random,said", [
    (["train.lr"], None, "has no 'key='"), (["train.lr=0.1,"], None, "empty value"),
    (["train.lr=0.1,0.1"], None, "lists a value twice"), (["a=1", "a=2"], None, "names a twice"),
    (["train.lr=0.001..0.1"], None, "only --random N draws from"), (["train.lr=0.1..0.001"], 2, "low end"),
    (["train.lr=1..2"], 3, "more different trials"), (["train.lr=0.1,0.2"], 3, "more trials than the grid has"),
    (["train.lr=nan..1"], 2, "train.lr=nan..1 is not a range: its low end 'nan' is not a finite number"),
    (["train.lr=1..2..3"], 2, "its high end '2..3' is not a finite number"),
    (["train.lr=0.1..inf"], 2, "its high end 'inf' is not a finite number"),
    (["seed=1.."], 2, "seed=1.. is not a range: it has no high end"), (["train.lr=nan..1"], None, "low end 'nan'"),
])  # fmt: skip
def test_a_bad_grid_is_a_located_error(grid: list[str], random: int | None, said: str) -> None:
    with pytest.raises(SpecError, match=said):
        plan_trials(parse_grid(grid), random, 0)


def test_a_mistake_in_any_trial_stops_the_sweep_before_it_starts(tmp_path: Path) -> None:
    result = runner.invoke(app, ["sweep", HOUSES, "--out", str(tmp_path), "--grid", "train.lr=0.01,-1"])
    assert result.exit_code == 1 and "trial-002 (train.lr=-1)" in result.output and "train.lr" in result.output
    assert not list(tmp_path.iterdir()), "no sweep folder"
    for args, said in ((["--grid", "train.lr=0.1", "--address", "x:1"], "--backend ray"),
                       ([], "at least one --grid")):  # fmt: skip
        result = runner.invoke(app, ["sweep", HOUSES, "--out", str(tmp_path / "b"), *args])
        assert result.exit_code == 1 and said in result.output and "Traceback" not in result.output
        assert not (tmp_path / "b").exists(), "options are checked before anything is created"
    result = runner.invoke(app, ["sweep", "--resume", str(tmp_path)])
    assert result.exit_code == 1 and "not a sweep folder" in result.output


# *** running it ***


def test_a_sweep_trains_each_trial_and_sums_up_best_first(tmp_path: Path) -> None:
    folder = swept(tmp_path, "--grid", "train.lr=0.0003,0.01", "--grid", "model.0.linear=8,32", "--epochs", "3")
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    assert len(rows) == 4 and all(r["state"] == "finished" for r in rows)
    best = [float(r["best"]) for r in rows]
    assert best == sorted(best), "best (lowest validation loss) first"
    plan = json.loads((folder / "sweep.json").read_text())
    for row in rows:
        trial = next(t for t in plan["trials"] if t["name"] == row["trial"])
        assert [f"train.lr={row['train.lr']}", f"model.0.linear={row['model.0.linear']}"] == trial["overrides"]
        resolved = (folder / row["trial"] / "spec.resolved.yaml").read_text()
        assert f"lr: {row['train.lr']}" in resolved and f"linear: {row['model.0.linear']}" in resolved
        logged = [json.loads(x) for x in (folder / row["trial"] / "metrics.jsonl").read_text().splitlines()]
        assert float(row["best"]) == min(r["loss"] for r in logged if r["split"] == "valid")
    assert "model.0.linear" in (folder / "summary.txt").read_text()
    doc = json.loads((folder / "summary.json").read_text())
    assert [t["trial"] for t in doc["trials"]] == [r["trial"] for r in rows]
    # NOTE: a trial is an ordinary run folder: evaluate and compare take it
    trial = folder / rows[0]["trial"]
    assert runner.invoke(app, ["evaluate", str(trial), "--json", "--allow-outside"]).exit_code == 0
    assert runner.invoke(app, ["compare", str(trial), str(folder / rows[-1]["trial"])]).exit_code == 0


def test_a_failing_trial_is_recorded_and_the_others_finish(tmp_path: Path) -> None:
    args = ["--grid", "train.lr=0.01,10", "--set", "train.optimizer=sgd", "--set", "data.normalize_target=false",
            "--epochs", "3"]  # fmt: skip
    folder = swept(tmp_path, *args)
    rows = {r["trial"]: r for r in csv.DictReader((folder / "summary.csv").open())}
    assert rows["trial-001"]["state"] == "finished" and rows["trial-002"]["state"] == "failed"
    assert rows["trial-002"]["error"].startswith("error: the loss became")
    assert json.loads((folder / "results.json").read_text())["trial-002"]["exit_code"] == 4
    again = runner.invoke(app, ["sweep", "--resume", str(folder)])
    assert again.exit_code == 0 and "2 trials (2 done before)" in again.output, "a failure is a result: not re-run"


def test_a_trial_whose_folder_another_process_holds_runs_when_resumed(tmp_path: Path) -> None:
    folder = swept(tmp_path, "--grid", "train.lr=0.01,0.02", "--steps", "2")
    (folder / "trial-001" / "model.safetensors").unlink()
    (folder / "results.json").write_text(json.dumps({"trial-002": {"exit_code": 0, "error": ""}}))
    with open(folder / "trial-001" / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # NOTE: as `specgrad train --resume` of it would, in another process
        busy = runner.invoke(app, ["sweep", "--resume", str(folder)])
    assert busy.exit_code == 1 and "trial-001 (train.lr=0.01): not run:" in busy.output, busy.output
    assert "is in use by another specgrad process" in busy.output and "Traceback" not in busy.output
    assert json.loads((folder / "results.json").read_text())["trial-001"] == {"exit_code": 75, "error": ""}
    again = runner.invoke(app, ["sweep", "--resume", str(folder)])
    assert again.exit_code == 0 and "trial-001 (train.lr=0.01): finished" in again.output, again.output
    assert (folder / "trial-001" / "model.safetensors").is_file()


def test_resume_trusts_no_hand_edited_plan(tmp_path: Path) -> None:
    folder = swept(tmp_path / "runs", "--grid", "train.lr=0.01,0.02", "--steps", "2")
    plan = json.loads((folder / "sweep.json").read_text())

    def edited(values: list[str], extra: dict) -> dict:
        return {**plan, "grid": {"train.lr": values}, "trials": [*plan["trials"], extra]}

    for doc, why in (({**plan, "trials": [*plan["trials"], {"name": "../../escape", "overrides": []}]},
                      "sweep.json is damaged: it lists 3 trials where its grid gives 2"),
                     (edited(["0.01", "0.02", "0.03"], {"name": "../../escape", "overrides": ["train.lr=0.03"]}),
                      "sweep.json is damaged: its trials are not the combinations of its grid"),
                     ({**plan, "spec": str(SPECS / "digits_mlp.yaml")}, "is not the spec this sweep was planned with"),
                     (edited(["0.01", "0.02", "nope"], {"name": "trial-003", "overrides": ["train.lr=nope"]}),
                      "trial-003 (train.lr=nope)")):  # fmt: skip
        (folder / "sweep.json").write_text(json.dumps(doc))
        result = runner.invoke(app, ["sweep", "--resume", str(folder)])
        assert result.exit_code == 1 and why in result.output and "Traceback" not in result.output, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"] and not (folder / "trial-003").exists()
    (folder / "sweep.json").write_text(json.dumps(edited(["0.01", "0.02", "0.03"], {"name": "trial-003",
                                                          "overrides": ["train.lr=0.03"]})))  # fmt: skip
    (folder / "trial-003").write_text("a file where the trial's run folder goes")
    result = runner.invoke(app, ["sweep", "--resume", str(folder)])
    assert result.exit_code == 0 and "trial-003 (train.lr=0.03): failed (exit code 1)" in result.output
    assert "is not a folder but a regular file" in result.output


def test_an_interrupted_sweep_resumes_to_the_bits_of_an_uninterrupted_one(tmp_path: Path) -> None:
    grid = ["--grid", "train.lr=0.003,0.01", "--epochs", "60", "--parallel", "1"]
    command = [sys.executable, "-m", "specgrad.cli.main", "sweep", HOUSES, "--out", str(tmp_path / "a"), *grid]
    sweep = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120

    def epochs_checkpointed() -> list[int]:
        # NOTE: any epoch from the 5th on: training is fast enough that a given one may be pruned between two looks
        return [int(p.name[6:11]) for p in (tmp_path / "a").glob("*/trial-001/checkpoints/epoch-*.safetensors")]

    while not any(n >= 5 for n in epochs_checkpointed()):
        assert time.monotonic() < deadline and sweep.poll() is None, "the first trial never got to epoch 5"
        time.sleep(0.01)
    os.kill(sweep.pid, signal.SIGKILL)  # NOTE: no chance to save: its trial's process dies with it
    sweep.wait()
    folder = next((tmp_path / "a").iterdir())
    assert not (folder / "trial-001" / "model.safetensors").exists()
    resumed = runner.invoke(app, ["sweep", "--resume", str(folder)])
    assert resumed.exit_code == 0 and "2 trials (0 done before)" in resumed.output, resumed.output
    whole = swept(tmp_path / "b", *grid)
    for trial in ("trial-001", "trial-002"):
        assert same_weights(folder / trial, whole / trial), trial


def test_ray_gives_the_same_results_as_local(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    grid = ["--grid", "train.lr=0.003,0.01", "--epochs", "2"]
    local, on_ray = swept(tmp_path / "local", *grid), swept(tmp_path / "ray", *grid, "--backend", "ray")
    for trial in ("trial-001", "trial-002"):
        assert same_weights(local / trial, on_ray / trial)
    assert [r["trial"] for r in csv.DictReader((on_ray / "summary.csv").open())] == \
        [r["trial"] for r in csv.DictReader((local / "summary.csv").open())]  # fmt: skip
