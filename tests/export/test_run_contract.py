"""The run contract: exact step counts, --resume after a crash or Ctrl-C at any step giving bit-identical weights,
metrics without duplicates, and a run folder that is self-contained (its spec validates, runs and exports)."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from specgrad.cli.main import app
from typer.testing import CliRunner

import specgrad.train.trainer as trainer_module
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import safe_load, safe_load_metadata
from specgrad.train.run_folder import spec_hash

pytestmark = pytest.mark.xdist_group("run_contract")  # NOTE: on one worker: one training run read by many tests

SPECS = Path(__file__).resolve().parents[2] / "specs"
runner = CliRunner()
# NOTE: 89 steps of batch 16 (1437 training digits): 3 epochs of 89 steps, checkpoints every epoch, dropout on
FAST = ("--set", "data.batch_size=16", "--set", "vars.hidden=32")


class Crash(Exception):
    """As if the process were killed: specgrad catches no such error, so nothing is written on the way out."""


def train(out: Path, *args: str, spec: str = "digits_mlp.yaml") -> tuple[int, str, Path | None]:
    result = runner.invoke(app, ["train", str(SPECS / spec), "--out", str(out), *args])
    folders = sorted(out.glob("*")) if out.exists() else []
    return result.exit_code, result.output, folders[-1] if folders else None


def resume(folder: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["train", "--resume", str(folder), *args])
    return result.exit_code, result.output


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def same_weights(a: Path, b: Path) -> bool:
    x, y = safe_load(a), safe_load(b)
    return x.keys() == y.keys() and all(np.array_equal(x[k].numpy(), y[k].numpy()) for k in x)


def crash_after(monkeypatch: pytest.MonkeyPatch, steps: int) -> None:
    """The next training crashes right after its `steps`-th step (its metrics line may be written, no checkpoint)."""
    real, calls = trainer_module.Trainer._step, [0]

    def step(self, *args, **kwargs):
        real(self, *args, **kwargs)
        calls[0] += 1
        if calls[0] == steps:
            raise Crash

    monkeypatch.setattr(trainer_module.Trainer, "_step", step)


def ctrl_c_after(monkeypatch: pytest.MonkeyPatch, steps: int) -> None:
    calls = [0]

    @contextlib.contextmanager
    def pressed_during_step():
        def pressed() -> bool:
            calls[0] += 1
            return calls[0] == steps

        yield pressed

    monkeypatch.setattr(trainer_module, "_deferred_interrupt", pressed_during_step)


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run of 200 steps (a partial third epoch) with a cosine schedule."""
    code, output, folder = train(tmp_path_factory.mktemp("straight"), *FAST, "--steps", "200",
                                 "--set", "train.schedule=cosine")  # fmt: skip
    assert code == 0, output
    return folder


def test_steps_are_exact_and_the_schedule_spans_them(straight: Path) -> None:
    rows = records(straight)
    train_rows = [r for r in rows if r["split"] == "train"]
    assert train_rows[-1]["step"] == 200 and max(r["step"] for r in rows) == 200
    assert [r["epoch"] for r in rows if r["split"] == "valid"] == [1, 2, 3]  # NOTE: 89 + 89 + 22 steps
    # cosine from lr to 0 over the 200 steps: the lr logged at step 200 is lr_at(199), close to 0
    assert 0 < train_rows[-1]["lr"] < 0.003 * 1e-3
    resolved = yaml.safe_load((straight / "spec.resolved.yaml").read_text())
    assert resolved["train"]["steps"] == 200


def test_epochs_are_exact(tmp_path: Path) -> None:
    code, output, folder = train(tmp_path, *FAST, "--epochs", "1")
    assert code == 0, output
    assert max(r["step"] for r in records(folder)) == 89
    assert "89 steps (1 epoch of 89 steps)" in output and "nan" not in output


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_resume_after_a_crash_at_a_random_step_is_bit_identical(tmp_path: Path, straight: Path, seed: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    at = random.Random(seed).randrange(1, 200)
    with monkeypatch.context() as patch:
        crash_after(patch, at)
        code, _, folder = train(tmp_path, *FAST, "--steps", "200", "--set", "train.schedule=cosine")
    assert code != 0 and folder is not None and not (folder / "model.safetensors").exists()
    code, output = resume(folder)
    assert code == 0, output
    assert ("no checkpoint yet" in output) == (at < 89), output
    assert same_weights(straight / "model.safetensors", folder / "model.safetensors"), f"crash after step {at}"
    steps = [(r["split"], r["step"]) for r in records(folder)]
    assert len(steps) == len(set(steps)), "metrics.jsonl holds no duplicates"
    without_speed = lambda rows: [{k: v for k, v in r.items() if k != "examples_per_s"} for r in rows]  # noqa: E731
    assert without_speed(records(folder)) == without_speed(records(straight))
    assert_csv_is_the_log(folder)


def assert_csv_is_the_log(folder: Path) -> None:
    """metrics.csv holds every metrics.jsonl record, in order, a field a record lacks left empty."""
    with (folder / "metrics.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    log = records(folder)
    assert len(rows) == len(log) and rows[0].keys() >= {"split", "epoch", "step", "loss"}
    for row, record in zip(rows, log):
        assert row == {k: str(record[k]) if k in record else "" for k in row}, (row, record)


@pytest.mark.parametrize("at", [1, 88, 89, 150, 199])
def test_resume_after_ctrl_c_at_any_step_is_bit_identical(tmp_path: Path, straight: Path, at: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    with monkeypatch.context() as patch:
        ctrl_c_after(patch, at)
        code, output, folder = train(tmp_path, *FAST, "--steps", "200", "--set", "train.schedule=cosine")
    assert code == 130 and f"specgrad train --resume {folder}" in output, output
    code, output = resume(folder)
    assert code == 0, output
    assert same_weights(straight / "model.safetensors", folder / "model.safetensors"), f"Ctrl-C at step {at}"
    assert not (folder / "checkpoints" / "interrupted.safetensors").exists()


def test_resume_keeps_every_override_and_refuses_changes(tmp_path: Path) -> None:
    code, output, folder = train(tmp_path, *FAST, "--set", "train.lr=0.01", "--epochs", "2")
    assert code == 0, output
    spec = validate_file(folder / "spec.resolved.yaml")
    assert spec.values["train"]["lr"] == 0.01 and spec.values["train"]["epochs"] == 2
    code, output = resume(folder, "--set", "train.lr=0.1")  # NOTE: --epochs gives it a new length (test_resume_length)
    assert code == 2 and "as it was started" in output
    code, output = resume(folder)  # NOTE: a finished run: nothing to train, the same summary
    assert code == 0 and "final weights" in output and "done: valid" in output, output


def test_a_checkpoint_is_never_removed_before_a_newer_one_exists(tmp_path: Path, monkeypatch) -> None:
    with monkeypatch.context() as patch:
        ctrl_c_after(patch, 100)
        code, _, folder = train(tmp_path, *FAST, "--epochs", "3")
    assert code == 130
    ckpts = folder / "checkpoints"
    assert {p.name for p in ckpts.iterdir()} >= {"epoch-00001.safetensors", "interrupted.safetensors"}
    with monkeypatch.context() as patch:
        crash_after(patch, 40)  # NOTE: resumed at step 100, crashes at 140 (epoch 2 ends at 178)
        code, _ = resume(folder)
    assert (ckpts / "interrupted.safetensors").exists(), "the newest checkpoint survives a crash after resuming"
    code, output = resume(folder)
    assert code == 0, output
    assert not (ckpts / "interrupted.safetensors").exists()


def test_the_run_folder_is_self_contained(tmp_path: Path, straight: Path) -> None:
    spec = validate_file(straight / "spec.resolved.yaml")
    assert spec_hash(spec.values) == safe_load_metadata(straight / "model.safetensors")["spec_hash"]
    result = runner.invoke(app, ["validate", str(straight)])
    assert result.exit_code == 0, result.output
    x = tmp_path / "x.npy"
    from specgrad.datasets import load_digits

    np.save(x, (load_digits()[0][:5] / 16).reshape(5, 1, 8, 8).astype(np.float32))
    by_folder = runner.invoke(app, ["run", str(straight), "--input", str(x), "--json"])
    assert by_folder.exit_code == 0, by_folder.output
    by_spec = runner.invoke(app, ["run", str(SPECS / "digits_mlp.yaml"), *FAST, "--set", "train.steps=200",
                                  "--set", "train.schedule=cosine", "--weights", str(straight / "model.safetensors"),
                                  "--input", str(x), "--json"])  # fmt: skip
    assert by_spec.exit_code == 0 and json.loads(by_spec.output) == json.loads(by_folder.output)
    assert "warning" not in by_spec.output, "the spec and its resolved copy hash the same"
    for ckpt in sorted((straight / "checkpoints").glob("*.safetensors")):
        result = runner.invoke(app, ["run", str(straight), "--weights", str(ckpt), "--input", str(x)])
        assert result.exit_code == 0 and "class" in result.output, (ckpt.name, result.output)
    retrained = runner.invoke(app, ["train", str(straight), "--out", str(tmp_path / "again"), "--steps", "3"])
    assert retrained.exit_code == 0, retrained.output


def test_export_from_a_run_folder_and_the_specs_export_list(tmp_path: Path) -> None:
    code, output, folder = train(tmp_path, *FAST, "--steps", "5", "--set", "export=[safetensors, onnx, c]")
    assert code == 0, output
    assert (folder / "model.onnx").is_file() and (folder / "model.c").is_file() and "model.h" in output
    (folder / "model.onnx").unlink()
    result = runner.invoke(app, ["export", str(folder), "--format", "onnx"])
    assert result.exit_code == 0 and (folder / "model.onnx").is_file(), result.output
    ckpt = next((folder / "checkpoints").glob("epoch-*.safetensors"))
    result = runner.invoke(app, ["export", str(folder), "--format", "onnx", "--weights", str(ckpt), "--out",
                                 str(tmp_path / "from-checkpoint.onnx")])  # fmt: skip
    assert result.exit_code == 0 and (tmp_path / "from-checkpoint.onnx").is_file(), result.output
    result = runner.invoke(app, ["export", str(SPECS / "digits_mlp.yaml"), "--format", "onnx", "--weights",
                                 str(folder / "model.safetensors")])  # fmt: skip
    assert result.exit_code == 1 and "--out is needed" in result.output
    result = runner.invoke(app, ["export", str(folder), "--format", "onnx", "--out", str(tmp_path)])
    assert result.exit_code == 1 and "is a folder" in result.output and "Traceback" not in result.output


def test_epoch_lines_are_live_when_piped(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "specgrad.cli.main", "train", str(SPECS / "digits_mlp.yaml"), *FAST, "--epochs",
           "200", "--out", str(tmp_path)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        assert proc.poll() is None, "the first epoch's line arrived while training went on"
    finally:
        proc.kill()
        proc.wait()
    assert lines[0].startswith("training digits-mlp") and lines[1].startswith("data: 1,438 training and 359 validation")
    assert lines[2].startswith("epoch   1/200  train loss ")


def test_the_progress_bar_on_a_terminal_shows_no_nan(tmp_path: Path) -> None:
    import pty

    cmd = [sys.executable, "-m", "specgrad.cli.main", "train", str(SPECS / "digits_mlp.yaml"), *FAST, "--steps",
           "1", "--out", str(tmp_path)]  # fmt: skip
    main, child = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=child, stderr=child)
    os.close(child)
    seen = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(main, 4096):
            seen += chunk
    proc.wait()
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "1 step (1 epoch of 89 steps, the last one partial)" in text and "nan" not in text.lower()


def test_final_weights_best_or_last_and_said(tmp_path: Path) -> None:
    code, output, folder = train(tmp_path / "best", *FAST, "--epochs", "3")
    assert code == 0, output
    meta = safe_load_metadata(folder / "model.safetensors")
    valid = [r for r in records(folder) if r["split"] == "valid"]
    best_epoch = min(valid, key=lambda r: r["loss"])["epoch"]
    assert meta["weights"] == "best" and meta["epoch"] == str(best_epoch)
    assert f"best valid loss {min(r['loss'] for r in valid):.4f} at epoch {best_epoch}" in output
    assert str(folder / "model.safetensors") in output
    code, output, folder = train(tmp_path / "last", *FAST, "--epochs", "3", "--set", "train.final_weights=last")
    assert code == 0, output
    assert safe_load_metadata(folder / "model.safetensors")["weights"] == "last" and "the last epoch's" in output


def test_early_stopping_is_announced(tmp_path: Path) -> None:
    stop = "train.early_stopping={metric: loss, patience: 1, min_delta: 10}"
    code, output, folder = train(tmp_path, *FAST, "--set", stop, "--epochs", "10")
    assert code == 0, output
    assert "early stopping after epoch 2: valid loss did not improve by more than 10 for 1 epoch" in output
    assert records(folder)[-1]["split"] == "stop"


@pytest.mark.slow
def test_kill_9_at_random_times_then_resume_is_bit_identical(tmp_path: Path, straight: Path) -> None:
    """Real processes killed with SIGKILL at random moments (compiling, mid-step, mid-checkpoint), then resumed."""
    cmd = [sys.executable, "-m", "specgrad.cli.main", "train", str(SPECS / "digits_mlp.yaml"), *FAST, "--steps", "200",
           "--set", "train.schedule=cosine"]  # fmt: skip
    rng = random.Random(7)
    for trial in range(6):
        out = tmp_path / f"t{trial}"
        proc = subprocess.Popen([*cmd, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 2.0))  # NOTE: the run takes about 1.5 s warm: most kills land inside it
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        folders = list(out.glob("*")) if out.exists() else []
        if not folders or not (folders[0] / "spec.resolved.yaml").exists():
            continue  # NOTE: killed before the run folder was complete: there is nothing to resume
        env = {**os.environ}
        done = subprocess.run([sys.executable, "-m", "specgrad.cli.main", "train", "--resume", str(folders[0])],
                              capture_output=True, text=True, env=env)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert same_weights(straight / "model.safetensors", folders[0] / "model.safetensors"), f"trial {trial}"


def test_resume_refuses_changed_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # NOTE: the project: the run folder's spec names its data there, outside the run folder
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "houses.csv").write_text((SPECS / "data" / "houses.csv").read_text())
    (tmp_path / "houses.yaml").write_text((SPECS / "house_prices.yaml").read_text())
    with monkeypatch.context() as patch:
        ctrl_c_after(patch, 15)
        result = runner.invoke(app, ["train", str(tmp_path / "houses.yaml"), "--epochs", "3", "--out",
                                     str(tmp_path / "runs")])  # fmt: skip
    assert result.exit_code == 130, result.output
    folder = next((tmp_path / "runs").iterdir())
    lines = (tmp_path / "data" / "houses.csv").read_text().splitlines()
    rows = [",".join(str(float(v) * 10) for v in line.split(",")) for line in lines[1:]]
    (tmp_path / "data" / "houses.csv").write_text("\n".join([lines[0], *rows]) + "\n")
    code, output = resume(folder)
    assert code == 1 and "the data has changed since" in output and "normalization" in output, output


def test_a_run_folder_in_use_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specgrad.train.run_folder import locked

    with monkeypatch.context() as patch:
        ctrl_c_after(patch, 5)
        code, _, folder = train(tmp_path, *FAST, "--epochs", "1")
    assert code == 130
    with locked(folder):
        code, output = resume(folder)
    assert code == 1 and "is in use by another specgrad process" in output
    code, output = resume(folder)
    assert code == 0, output


def test_best_weights_do_not_depend_on_min_delta(tmp_path: Path) -> None:
    stop = "train.early_stopping={metric: loss, patience: 2, min_delta: 10}"
    code, output, folder = train(tmp_path, *FAST, "--set", stop, "--epochs", "10")
    assert code == 0, output
    valid = [r for r in records(folder) if r["split"] == "valid"]
    assert len(valid) == 3, "min_delta 10: epochs 2 and 3 do not count as improvements for early stopping"
    best = min(valid, key=lambda r: r["loss"])
    assert safe_load_metadata(folder / "model.safetensors")["epoch"] == str(best["epoch"]) and best["epoch"] > 1


def test_mistakes_around_a_run_folder_are_messages(tmp_path: Path) -> None:
    code, output, _ = train(Path("/dev/null/runs"), *FAST, "--steps", "1")
    assert code == 1 and "cannot create a run folder there" in output and "Traceback" not in output
    code, output, folder = train(tmp_path / "a", *FAST, "--epochs", "2")
    assert code == 0, output
    code, output = resume(tmp_path / "no-such-run")
    assert code == 1 and "no such run folder" in output
    for args in (["--out", str(tmp_path)], ["--set", "train.lr=0.1"]):  # NOTE: --epochs lengthens it (issue 32)
        code, output = resume(folder, *args)
        assert code == 2 and "as it was started" in output, args
    with (folder / "metrics.jsonl").open("ab") as f:
        f.write(b'null\n[1, 2]\n{"foo": 1}\n\xff\xfe\n{"split": "train", "step": 10')
    (folder / ".notes.v2.txt").write_text("the user's own")
    (folder / ".metrics.png.tmp123").write_text("a write cut short")
    code, output = resume(folder)
    assert code == 0 and "has finished" in output, output
    assert (folder / ".notes.v2.txt").exists() and not (folder / ".metrics.png.tmp123").exists()
    steps = [(r["split"], r["step"]) for r in records(folder)]
    assert len(steps) == len(set(steps))
    (folder / "checkpoints" / "best.safetensors").write_bytes(b"\x00" * 100)
    code, output = resume(folder)
    assert code == 1 and "the best checkpoint" in output and "is damaged" in output and "Traceback" not in output


def test_run_folder_files_follow_the_umask(tmp_path: Path) -> None:
    code, output, folder = train(tmp_path, *FAST, "--steps", "2")
    assert code == 0, output
    import specgrad.helpers as helpers

    expected = 0o666 & ~helpers._UMASK
    for p in [folder / "spec.resolved.yaml", folder / "model.safetensors", *(folder / "checkpoints").iterdir()]:
        assert p.stat().st_mode & 0o777 == expected, p


def test_resume_is_bit_identical_with_tied_frozen_and_scaled_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/examples/tied_lm.yaml: an output layer tied to the embedding, a frozen layernorm and an lr_scale. A crash
    after the first checkpoint and a resume end with the weights of a run that was not interrupted."""
    spec = str(Path(__file__).resolve().parents[2] / "docs" / "examples" / "tied_lm.yaml")
    args = ("--steps", "50", "--set", "data.batch_size=8")  # NOTE: 30 steps an epoch, a checkpoint after each
    code, output, straight = train(tmp_path / "straight", *args, spec=spec)
    assert code == 0, output
    with monkeypatch.context() as patch:
        crash_after(patch, 37)
        code, _, folder = train(tmp_path / "crashed", *args, spec=spec)
    assert code != 0 and folder is not None and not (folder / "model.safetensors").exists()
    code, output = resume(folder)
    assert code == 0 and "no checkpoint yet" not in output, output
    assert same_weights(straight / "model.safetensors", folder / "model.safetensors")
    weights = safe_load(folder / "model.safetensors")
    assert np.array_equal(weights["steps.0.1.weight"].numpy(), weights["steps.2.1.weight"].numpy())  # still tied
    assert (weights["steps.1.1.weight"].numpy() == 1).all() and (weights["steps.1.1.bias"].numpy() == 0).all()  # frozen
