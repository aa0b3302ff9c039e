"""`specgrad run` through typer's CliRunner: inputs from .npy, .csv and .json; outputs printed or written; errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.datasets import load_digits, load_text
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save
from specgrad.train.data import standardize
from specgrad.train.trainer import Trainer

pytestmark = pytest.mark.xdist_group("run")  # NOTE: on one worker: trained and untrained weights made once

SPECS = Path(__file__).resolve().parents[2] / "specs"
MLP = str(SPECS / "digits_mlp.yaml")
runner = CliRunner()


def _untrained_weights(spec: str, folder: Path) -> Path:
    """Weights and metadata as `specgrad train` writes them, without the training (fast)."""
    trainer = Trainer.create(validate_file(SPECS / spec))
    path = folder / f"{Path(spec).stem}.safetensors"
    safe_save(get_state_dict(trainer.model), path, metadata=trainer.metadata())
    return path


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("runs")
    result = runner.invoke(app, ["train", MLP, "--steps", "30", "--out", str(out)])
    assert result.exit_code == 0, result.output
    others = {k: _untrained_weights(f"{k}.yaml", out) for k in ("digits_cnn", "house_prices", "char_gpt")}
    return {"mlp": out / "digits-mlp-1" / "model.safetensors", **others}


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    """The last 50 digits as the model's inputs (pixels 0..1, shape (50, 1, 8, 8)) and their labels."""
    images, labels = load_digits()
    return (images[-50:] / 16).astype(np.float32).reshape(50, 1, 8, 8), labels[-50:].astype(int)


def run(*args: str | Path) -> object:
    return runner.invoke(app, ["run", *map(str, args)])


def run_mlp(weights: dict[str, Path], x: Path, *args: str | Path) -> object:
    return run(MLP, "--weights", weights["mlp"], "--input", x, *args)


def classes(output: str) -> list[int]:
    found = re.findall(r"^(\d+): class (\d) \(p=(\d\.\d{3})\)$", output, re.MULTILINE)
    assert [int(i) for i, _, _ in found] == list(range(len(found))), output
    return [int(k) for _, k, _ in found]


def own_probabilities(weights: Path, x: np.ndarray) -> np.ndarray:
    """What the model itself says, without the CLI: normalized as in training, softmax of the logits."""
    model = build_model(validate_file(MLP))
    load_state_dict(model, safe_load(weights))
    stats = {k: np.asarray(v, np.float32) for k, v in json.loads(safe_load_metadata(weights)["normalization"]).items()}
    logits = model(Tensor(standardize(x, stats).astype(np.float32))).numpy()
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_npy_batch_and_single_example(weights, digits, tmp_path: Path) -> None:
    x, _ = digits
    np.save(tmp_path / "batch.npy", x[:5])
    np.save(tmp_path / "one.npy", x[7])
    batch, one = run_mlp(weights, tmp_path / "batch.npy"), run_mlp(weights, tmp_path / "one.npy")
    assert batch.exit_code == 0 and one.exit_code == 0, batch.output + one.output
    assert len(classes(batch.output)) == 5 and len(classes(one.output)) == 1


def test_predictions_match_the_model_and_are_accurate(weights, digits, tmp_path: Path) -> None:
    x, labels = digits
    np.save(tmp_path / "x.npy", x)
    result = run_mlp(weights, tmp_path / "x.npy", "--json")
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    got = np.array([r["class"] for r in records])
    own = own_probabilities(weights["mlp"], x)
    assert [r["index"] for r in records] == list(range(50))
    np.testing.assert_array_equal(got, own.argmax(-1))
    np.testing.assert_allclose([r["probability"] for r in records], own.max(-1), rtol=1e-4)
    assert (got == labels).mean() > 0.7


def test_json_and_csv_inputs_agree_with_npy(weights, digits, tmp_path: Path) -> None:
    x = digits[0][:4]
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "x.json").write_text(json.dumps(x.tolist()))
    (tmp_path / "one.json").write_text(json.dumps(x[0].tolist()))
    header = ",".join(f"p{i}" for i in range(64))
    (tmp_path / "x.csv").write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in x.reshape(4, 64)) + "\n")
    want = classes(run_mlp(weights, tmp_path / "x.npy").output)
    assert classes(run_mlp(weights, tmp_path / "x.json").output) == want
    assert classes(run_mlp(weights, tmp_path / "x.csv").output) == want
    assert classes(run_mlp(weights, tmp_path / "one.json").output) == want[:1]


@pytest.mark.parametrize("ext", [".npy", ".csv", ".json"])
def test_output_round_trips(weights, digits, tmp_path: Path, ext: str) -> None:
    x = digits[0][:6]
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / f"probs{ext}"
    result = run_mlp(weights, tmp_path / "x.npy", "--output", out)
    assert result.exit_code == 0, result.output
    assert f"to {out}" in result.output and "shape [6, 10]" in result.output
    if ext == ".npy":
        got = np.load(out)
    elif ext == ".csv":
        lines = out.read_text().splitlines()
        assert lines[0] == "index,prediction," + ",".join(f"p_{k}" for k in range(10))
        cells = [line.split(",") for line in lines[1:]]
        assert [int(c[0]) for c in cells] == list(range(6))
        got = np.array([[float(v) for v in c[2:]] for c in cells])
        assert [int(c[1]) for c in cells] == got.argmax(1).tolist()  # the predicted class, by name
    else:
        records = json.loads(out.read_text())
        assert [list(r)[:2] for r in records] == [["index", "prediction"]] * 6  # the csv's columns, in its order
        got = np.array([[r[f"p_{k}"] for k in range(10)] for r in records])
        assert [r["prediction"] for r in records] == [str(k) for k in got.argmax(1)]
    np.testing.assert_allclose(got, own_probabilities(weights["mlp"], x), rtol=1e-4, atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["x.npy", out.name])  # no temporary file left


def test_json_with_output_prints_where(weights, digits, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", digits[0][:3])
    result = run_mlp(weights, tmp_path / "x.npy", "--output", tmp_path / "y.npy", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"output": str(tmp_path / "y.npy"), "shape": [3, 10], "examples": 3}


def test_wrong_shape(weights, tmp_path: Path) -> None:
    np.save(tmp_path / "data.npy", np.zeros((5, 64), np.float32))
    result = run_mlp(weights, tmp_path / "data.npy")
    assert result.exit_code == 1
    assert f"the model takes examples of shape [1, 8, 8]; {tmp_path / 'data.npy'} has shape (5, 64)" in result.output
    assert "reshape it to (5, 1, 8, 8)" in result.output and "Traceback" not in result.output


def test_bad_cells_are_located(weights, tmp_path: Path) -> None:
    rows = [[0.5] * 64 for _ in range(3)]
    rows[1][5] = "dark"
    rows[2][9] = "nan"
    text = ",".join(f"p{i}" for i in range(64)) + "\n" + "\n".join(",".join(map(str, r)) for r in rows)
    (tmp_path / "x.csv").write_text(text)
    result = run_mlp(weights, tmp_path / "x.csv")
    assert result.exit_code == 1
    assert f"{tmp_path / 'x.csv'}:3:6: error: row 3, column 'p5': 'dark' is not a number" in result.output
    assert f"{tmp_path / 'x.csv'}:4:10: error: row 4, column 'p9' is missing ('nan')\n  hint: fill in a number, or " \
        "remove the row: the model was trained without a value to fill this column with (data.missing, or drop_row " \
        "for it); or pass --allow-nonfinite to run it as NaN" in result.output  # fmt: skip
    (tmp_path / "x.json").write_text(json.dumps([[[[0.1] * 8] * 8], [[[0.1] * 7 + [None]] + [[0.1] * 8] * 7]]))
    result = run_mlp(weights, tmp_path / "x.json")
    assert result.exit_code == 1 and "item [1][0][0][7] (null) is not a number" in result.output


def test_missing_and_corrupt_weights(weights, digits, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", digits[0][:2])
    missing = run(MLP, "--weights", tmp_path / "none.safetensors", "--input", tmp_path / "x.npy")
    assert missing.exit_code == 1 and f"{tmp_path / 'none.safetensors'}: no such file" in missing.output
    data = weights["mlp"].read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) // 2])
    cut = run(MLP, "--weights", tmp_path / "cut.safetensors", "--input", tmp_path / "x.npy")
    assert cut.exit_code == 1 and "Traceback" not in cut.output
    assert f"{tmp_path / 'cut.safetensors'} is not a valid safetensors file" in cut.output
    no_input = run_mlp(weights, tmp_path / "none.npy")
    assert no_input.exit_code == 1 and f"--input {tmp_path / 'none.npy'}: no such file" in no_input.output


def test_weights_of_another_spec(weights, digits, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", digits[0][:2])
    result = run(MLP, "--weights", weights["digits_cnn"], "--input", tmp_path / "x.npy")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "do not fit the model" in result.output and "trained with 'digits-cnn'" in result.output
    assert "missing key steps.1.1.weight (shape (128, 64))" in result.output
    assert "unexpected key steps.0.1.weight (shape (16, 1, 3, 3))" in result.output


def test_different_spec_with_fitting_shapes_warns(weights, digits, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", digits[0][:2])
    result = run_mlp(weights, tmp_path / "x.npy", "--set", "train.lr=0.01")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "trained with a different spec" in result.output
    assert len(classes(result.stdout)) == 2


def test_house_prices_regression_on_its_csv(weights, tmp_path: Path) -> None:
    spec, csv = SPECS / "house_prices.yaml", SPECS / "data" / "houses.csv"
    result = run(spec, "--weights", weights["house_prices"], "--input", csv)
    assert result.exit_code == 0, result.output
    values = [float(m) for m in re.findall(r"^\d+: (\S+)$", result.output, re.MULTILINE)]
    assert len(values) == 400 and np.isfinite(values).all()
    out = tmp_path / "prices.csv"
    assert run(spec, "--weights", weights["house_prices"], "--input", csv, "--output", out).exit_code == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "index,prediction"
    assert np.allclose([float(v.split(",")[1]) for v in lines[1:]], values, rtol=1e-5)


def test_char_gpt_on_token_ids(weights, tmp_path: Path) -> None:
    text = load_text("sonnets")
    (tmp_path / "tokens.json").write_text(json.dumps([[ord(c) for c in text[i : i + 64]] for i in (0, 200)]))
    result = run(SPECS / "char_gpt.yaml", "--weights", weights["char_gpt"], "--input", tmp_path / "tokens.json")
    assert result.exit_code == 0, result.output
    assert re.fullmatch(r"0: next '.+' \(p=0\.\d{3}\)\n1: next '.+' \(p=0\.\d{3}\)\n", result.output), result.output
    (tmp_path / "bad.json").write_text(json.dumps([65] * 63 + [300]))
    bad = run(SPECS / "char_gpt.yaml", "--weights", weights["char_gpt"], "--input", tmp_path / "bad.json")
    assert bad.exit_code == 1 and "example 0, position [63] is 300, outside the model's vocabulary" in bad.output


def test_unknown_device_and_format(weights, digits, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", digits[0][:2])
    device = run_mlp(weights, tmp_path / "x.npy", "--device", "NOPE")
    assert device.exit_code == 3 and "unknown device 'NOPE'" in device.output
    fmt = run_mlp(weights, tmp_path / "x.npy", "--output", tmp_path / "y.txt")
    assert fmt.exit_code == 1 and "cannot tell the format" in fmt.output


def test_invalid_spec_exits_1(weights, tmp_path: Path) -> None:
    result = run(MLP, "--weights", weights["mlp"], "--input", tmp_path / "x.npy", "--set", "vars.hidden=-3")
    assert result.exit_code == 1 and "error" in result.output and "Traceback" not in result.output
