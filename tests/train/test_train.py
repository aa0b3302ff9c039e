"""`specgrad train`: a run folder with the resolved spec, metrics, checkpoints and weights; exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.nn.state import safe_load

SPECS = Path(__file__).resolve().parents[2] / "specs"
runner = CliRunner()


def train(tmp_path: Path, spec: str, *args: str) -> tuple[int, str, Path | None]:
    out = tmp_path / "runs"
    result = runner.invoke(app, ["train", str(SPECS / spec), "--out", str(out), *args])
    folders = sorted(out.glob("*")) if out.exists() else []
    return result.exit_code, result.output, folders[-1] if folders else None


def metrics(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_train_digits_mlp_writes_a_run_folder(tmp_path: Path) -> None:
    code, output, folder = train(tmp_path, "digits_mlp.yaml", "--epochs", "4")
    assert code == 0, output
    assert folder is not None and folder.name == "digits-mlp-1"
    assert {p.name for p in folder.iterdir()} >= {"spec.resolved.yaml", "metrics.jsonl", "model.safetensors",
                                                  "checkpoints"}  # fmt: skip
    records = metrics(folder)
    valid = [r for r in records if r["split"] == "valid"]
    assert [r["epoch"] for r in valid] == [1, 2, 3, 4] and valid[-1]["accuracy"] > 0.85
    steps = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in steps[:3]] == [10, 20, 30] and all({"epoch", "loss", "lr"} <= r.keys() for r in steps)
    epochs = [r for r in records if r["split"] == "train_epoch"]
    assert len(epochs) == 4 and epochs[0]["loss"] > epochs[-1]["loss"] and epochs[0]["examples_per_s"] > 0
    weights = safe_load(folder / "model.safetensors")
    assert "steps.1.1.weight" in weights and tuple(weights["steps.1.1.weight"].shape) == (128, 64)
    assert len(list((folder / "checkpoints").glob("epoch-*.safetensors"))) == 3  # NOTE: keep: 3 by default
    assert (folder / "checkpoints" / "best.safetensors").exists()
    assert "done:" in output and "accuracy" in output
    header, *rows = (folder / "metrics.csv").read_text().splitlines()
    assert header.startswith("split,epoch,step,loss") and len(rows) == len(records)


def test_same_spec_same_metrics(tmp_path: Path) -> None:
    runs = [train(tmp_path / str(i), "digits_cnn.yaml", "--steps", "30") for i in range(2)]
    assert all(code == 0 for code, _, _ in runs), runs[0][1]

    def without_speed(folder: Path) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "examples_per_s"} for r in metrics(folder)]

    assert without_speed(runs[0][2]) == without_speed(runs[1][2])


@pytest.mark.parametrize("spec", ["house_prices.yaml", "digits_autoencoder.yaml", "char_gpt.yaml"])
def test_every_kind_of_example_trains(tmp_path: Path, spec: str) -> None:
    code, output, folder = train(tmp_path, spec, "--steps", "4")
    assert code == 0, output
    assert (folder / "model.safetensors").exists()


def test_exit_codes(tmp_path: Path) -> None:
    code, output, _ = train(tmp_path, "digits_mlp.yaml", "--set", "train.lr=-1")
    assert code == 1 and "train.lr must be between" in output
    code, output, _ = train(tmp_path, "digits_mlp.yaml", "--device", "TPU")
    assert code == 3 and "unknown device 'TPU'" in output
    code, output, _ = train(tmp_path, "house_prices.yaml", "--set", "train.optimizer=sgd", "--set", "train.lr=1",
                            "--set", "data.normalize=false", "--epochs", "3")  # fmt: skip
    assert code == 4 and "the loss became" in output and "lower train.lr" in output


def test_damaged_checkpoint_is_refused(tmp_path: Path) -> None:
    code, output, folder = train(tmp_path, "digits_mlp.yaml", "--epochs", "1")
    assert code == 0, output
    ckpt = next((folder / "checkpoints").glob("epoch-*.safetensors"))
    ckpt.write_bytes(ckpt.read_bytes()[:100])
    (folder / "checkpoints" / ".epoch-00009.safetensors.tmp123").write_bytes(b"partial")
    result = runner.invoke(app, ["train", "--resume", str(folder)])
    assert result.exit_code == 1 and "is damaged" in result.output and "delete it" in result.output
    assert "Traceback" not in result.output
    assert not list((folder / "checkpoints").glob(".*")), "stray temporary files are cleaned up"


def test_early_stopping(tmp_path: Path) -> None:
    stop = "train.early_stopping={metric: loss, patience: 1, min_delta: 10}"
    code, output, folder = train(tmp_path, "digits_mlp.yaml", "--set", stop, "--epochs", "10")
    assert code == 0, output
    records = metrics(folder)
    assert records[-1]["split"] == "stop" and records[-1]["epoch"] == 2


@pytest.mark.parametrize("kind", ["classify", "regress"])
def test_the_logged_training_loss_is_from_the_weights_before_the_step(tmp_path: Path, kind: str) -> None:
    """The step's loss against float64 numpy from the weights it started with. It was realized only after the
    optimizer step had changed the weights, so every logged training loss mixed in the next step's weights."""
    from specgrad.modelspec.validate import validate_file
    from specgrad.nn.state import get_state_dict
    from specgrad.train.data import batches
    from specgrad.train.trainer import Trainer

    data, loss = ("{source: spirals, samples: 256, batch_size: 32}", "cross_entropy") if kind == "classify" else \
        ("{source: sine, samples: 256, batch_size: 32, normalize_target: false}", "mse")  # fmt: skip
    width = 2 if kind == "classify" else 1
    (tmp_path / "s.yaml").write_text(f"specgrad: 1\nname: s\ninput: {{shape: [{width}]}}\n"
                                     f"model: [{{linear: 16}}, {{tanh: {{}}}}, {{linear: {width}}}]\n"
                                     f"data: {data}\ntrain: {{loss: {loss}, lr: 0.1}}\n")  # fmt: skip
    trainer = Trainer.create(validate_file(tmp_path / "s.yaml"))
    w = {k: v.numpy().astype(np.float64) for k, v in get_state_dict(trainer.model).items()}
    x, y = next(batches(trainer.data.x_train, trainer.data.y_train, 32, False))
    out = np.tanh(x.astype(np.float64) @ w["steps.0.1.weight"].T + w["steps.0.1.bias"]) @ w["steps.2.1.weight"].T
    out += w["steps.2.1.bias"]
    if kind == "classify":
        logp = out - out.max(1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(1, keepdims=True))
        expected = -logp[np.arange(32), y].mean()
    else:
        expected = ((out - y) ** 2).mean()
    np.testing.assert_allclose(trainer.step_fn(*trainer.tensors(x, y)).item(), expected, rtol=1e-5)


def test_metrics_csv_written_epoch_by_epoch_is_the_whole_log_rendered_at_once(tmp_path: Path) -> None:
    """metrics.csv is rendered a few rows at a time (it is written after every epoch); each write equals the whole log
    rendered at once: after appends, when a later record brings a new field (a column for every row), and after a
    rewind (a new list of records)."""
    import csv
    import io

    from specgrad.train.run_folder import MetricsLog

    def whole(records: list[dict]) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, list(dict.fromkeys(k for r in records for k in r)), lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        return out.getvalue()

    log = MetricsLog(tmp_path)
    batches = [[{"split": "train", "epoch": 1, "step": s, "loss": 1 / s, "lr": 0.01} for s in (1, 2)],
               [{"split": "valid", "epoch": 1, "step": 2, "loss": 0.5, "accuracy": 0.75}],
               [{"split": "train", "epoch": 2, "step": 3, "loss": 0.25, "lr": 0.01}],
               [{"split": "stop", "epoch": 2, "step": 3, "reason": 'quoted "text", with commas'}]]  # fmt: skip
    for batch in batches:
        for record in batch:
            log.log(record)
        log.write_csv()
        assert (tmp_path / "metrics.csv").read_text() == whole(log.records)
    log.rewind(2, 1)
    log.write_csv()
    assert (tmp_path / "metrics.csv").read_text() == whole(log.records) and len(log.records) == 3
