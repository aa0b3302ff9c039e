"""`specgrad evaluate RUN_DIR`: the figures on the validation split, printed and written into the run folder; they
agree with what training logged for the same weights."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

SPECS = Path(__file__).resolve().parents[2] / "specs"
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
runner = CliRunner()


def trained(tmp_path: Path, spec: Path, *args: str) -> Path:
    result = runner.invoke(app, ["train", str(spec), "--out", str(tmp_path / "runs"), *args])
    assert result.exit_code == 0, result.output
    return next((tmp_path / "runs").iterdir())


def valid_records(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["split"] == "valid"]


def evaluated(folder: Path, *args: str) -> dict:
    result = runner.invoke(app, ["evaluate", str(folder), "--json", "--allow-outside", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_classifier_gets_per_class_figures_and_a_confusion_matrix(tmp_path: Path) -> None:
    folder = trained(tmp_path, SPECS / "digits_mlp.yaml", "--epochs", "2", "--set", "train.final_weights=last")
    doc = evaluated(folder)
    report = doc["outputs"]["logits"] if "logits" in doc["outputs"] else next(iter(doc["outputs"].values()))
    assert doc["split"] == "validation" and report["task"] == "classify"
    assert report["accuracy"] == pytest.approx(valid_records(folder)[-1]["accuracy"]), "the last epoch's weights"
    assert [c["name"] for c in report["classes"]] == [str(i) for i in range(10)]
    assert sum(map(sum, report["confusion"])) == doc["examples"] == sum(c["support"] for c in report["classes"])
    written = json.loads((folder / "evaluation-validation.json").read_text())
    assert written == {k: v for k, v in doc.items() if k != "written"}
    text = runner.invoke(app, ["evaluate", str(folder), "--allow-outside"]).output
    assert "confusion matrix" in text and "precision" in text and "evaluation-validation.json" in text


def test_regression_is_in_the_targets_units(tmp_path: Path) -> None:
    folder = trained(tmp_path, SPECS / "house_prices.yaml", "--epochs", "3", "--set", "train.final_weights=last")
    report = next(iter(evaluated(folder)["outputs"].values()))
    # NOTE: training logs the validation MSE in the price's own units: RMSE^2 is that loss
    assert report["task"] == "regress" and report["rmse"] ** 2 == pytest.approx(valid_records(folder)[-1]["loss"],
                                                                                  rel=1e-4)  # fmt: skip
    assert report["targets"][0]["name"] == "price" and report["r2"] is not None and report["mae"] <= report["rmse"]


def test_a_language_model_gets_loss_and_perplexity(tmp_path: Path) -> None:
    folder = trained(tmp_path, SPECS / "char_gpt.yaml", "--steps", "20", "--set", "train.final_weights=last")
    report = next(iter(evaluated(folder)["outputs"].values()))
    logged = valid_records(folder)[-1]
    assert report["task"] == "language" and report["loss"] == pytest.approx(logged["loss"], rel=1e-4)
    assert report["perplexity"] == pytest.approx(math.exp(logged["loss"]), rel=1e-3)
    assert report["accuracy"] == pytest.approx(logged["accuracy"])


def test_each_output_of_a_model_with_several_is_evaluated(tmp_path: Path) -> None:
    for name in ("two_heads.yaml", "two_heads.npz"):
        (tmp_path / name).write_bytes((EXAMPLES / name).read_bytes())
    folder = trained(tmp_path, tmp_path / "two_heads.yaml", "--epochs", "2", "--set", "train.final_weights=last")
    outputs = evaluated(folder)["outputs"]
    logged = valid_records(folder)[-1]
    assert len(outputs) == 2
    for name, report in outputs.items():
        if report["task"] == "classify":
            assert report["accuracy"] == pytest.approx(logged[f"{name}.accuracy"])
        else:
            assert report["rmse"] ** 2 == pytest.approx(logged[f"{name}.loss"], rel=1e-4)


def test_mistakes_are_clear_errors(tmp_path: Path) -> None:
    spec_only = runner.invoke(app, ["evaluate", str(SPECS / "digits_mlp.yaml")])
    assert spec_only.exit_code == 1 and "--weights" in spec_only.output
    folder = trained(tmp_path, SPECS / "digits_mlp.yaml", "--steps", "5")
    none = runner.invoke(app, ["evaluate", str(folder), "--set", "data.valid_split=0"])
    assert none.exit_code == 1 and "no validation examples" in none.output
    assert "Traceback" not in none.output + spec_only.output


def test_the_test_split_is_never_trained_on_and_evaluate_reads_it(tmp_path: Path) -> None:
    from specgrad.modelspec.validate import validate_file
    from specgrad.train.data import load_data

    folder = trained(tmp_path, SPECS / "digits_mlp.yaml", "--epochs", "2", "--set", "data.test_split=0.1")
    spec = validate_file(folder / "spec.resolved.yaml")
    assert spec.values["data"]["test_split"] == 0.1, "the run records its test split"
    held, test = load_data(spec), load_data(spec, held="test")
    rows = lambda a: {r.tobytes() for r in a}  # noqa: E731
    assert len(test.x_valid) == 180 and len(held.x_train) + len(held.x_valid) + len(test.x_valid) == 1797
    assert not rows(test.x_valid) & (rows(held.x_train) | rows(held.x_valid)), "test examples are nowhere else"
    raw = ["data.normalize=false"]
    without, with_test = (load_data(validate_file(SPECS / "digits_mlp.yaml", raw + extra))
                          for extra in ([], ["data.test_split=0.1"]))  # fmt: skip
    np.testing.assert_array_equal(with_test.x_valid, without.x_valid, "validation is the same with a test split")
    doc = evaluated(folder, "--split", "test")
    assert doc["split"] == "test" and doc["examples"] == 180 and (folder / "evaluation-test.json").exists()
    none = runner.invoke(app, ["evaluate", str(trained(tmp_path / "b", SPECS / "digits_mlp.yaml", "--steps", "5")),
                               "--split", "test"])  # fmt: skip
    assert none.exit_code == 1 and "no test examples" in none.output and "data.test_split" in none.output


def test_text_is_split_by_position_training_then_validation_then_test() -> None:
    """The test part is the text's last 10%, validation the 20% before it, training the rest: no window spans two."""
    from specgrad.datasets import load_text
    from specgrad.modelspec.validate import validate_file
    from specgrad.train.data import load_data

    spec = validate_file(SPECS / "char_gpt.yaml", ["data.test_split=0.1"])
    held, test = load_data(spec), load_data(spec, held="test")
    codes = np.frombuffer(load_text(spec.values["data"]["corpus"]).encode("utf-32-le"), "<u4").astype(np.int32)
    n, context = len(codes), spec.values["data"]["context"]
    test_cut = n - round(n * 0.1)
    cut = test_cut - round(n * spec.values["data"]["valid_split"])

    def windows(part: np.ndarray) -> np.ndarray:
        return np.lib.stride_tricks.sliding_window_view(part, context + 1)[:: max(1, context // 2), :-1]

    np.testing.assert_array_equal(test.x_valid, windows(codes[test_cut:]))
    np.testing.assert_array_equal(held.x_valid, windows(codes[cut:test_cut]))
    np.testing.assert_array_equal(held.x_train, windows(codes[:cut]))
    np.testing.assert_array_equal(test.x_train, held.x_train)


def test_splits_that_leave_nothing_to_train_on_are_refused() -> None:
    from specgrad.modelspec.errors import SpecError
    from specgrad.modelspec.validate import validate_file

    with pytest.raises(SpecError, match=r"hold out 1 of the examples together"):
        validate_file(SPECS / "digits_mlp.yaml", ["data.valid_split=0.5", "data.test_split=0.5"])
