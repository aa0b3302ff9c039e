"""Test examples from a file: `evaluate --split FILE`, and `data.test_path` in the spec. The file is read by the
source's own reader with the training split's statistics, vocabularies and classes, so a file holding exactly the
validation examples gives exactly the validation figures, whatever its row or column order."""

from __future__ import annotations

import json
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.datasets import load_text, split
from specgrad.modelspec.validate import validate_file
from specgrad.train.data import load_data, stratified_split

runner = CliRunner()
SPECS = Path(__file__).resolve().parents[2] / "specs"
SEED, VALID = 3, 0.25
COLORS, CLASSES = ("red", "green", "blue"), ("maybe", "no", "yes")


def invoke(*args: str) -> object:
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def evaluated(folder: Path, *args: str) -> dict:
    result = invoke("evaluate", str(folder), "--json", "--allow-outside", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def same_figures(a: dict, b: dict) -> None:
    """Equal reports of every output: counts exactly, float figures to float64 rounding (sums may run in another
    order)."""

    def walk(x: object, y: object) -> None:
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            for k in x:
                walk(x[k], y[k])
        elif isinstance(x, list):
            assert len(x) == len(y)
            for u, v in zip(x, y):
                walk(u, v)
        elif isinstance(x, float):
            assert x == pytest.approx(y, rel=1e-9, abs=1e-12)
        else:
            assert x == y

    walk(a["outputs"], b["outputs"])


def table(root: Path, n: int = 120) -> tuple[list[str], list[list[str]]]:
    """A csv of n rows: a number, a categorical color and a text class that depends on both."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        a, color = float(rng.normal()), COLORS[i % 3]
        label = CLASSES[int(a > 0) + (color == "blue")]
        rows.append([f"{a:.4f}", color, label])
    header = ["a", "color", "label"]
    (root / "table.csv").write_text(",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows))
    return header, rows


def csv_spec(root: Path, data: str = "") -> Path:
    text = f"""\
    specgrad: 1
    name: colors
    seed: {SEED}
    input: {{shape: [4]}}
    model: [{{linear: 16}}, relu, {{linear: 3}}]
    data:
      source: csv
      path: table.csv
      target: label
      categorical: {{color: one_hot}}
      valid_split: {VALID}
      batch_size: 8
    """
    path = root / "spec.yaml"
    path.write_text(textwrap.dedent(text) + textwrap.indent(textwrap.dedent(data), "  ") +
                    "train: {epochs: 3, lr: 0.01, final_weights: last}\n")  # fmt: skip
    return path


def trained(spec: Path, *args: str) -> Path:
    out = spec.parent / "runs"
    result = invoke("train", str(spec), "--out", str(out), *args)
    assert result.exit_code == 0, result.output
    return next(out.iterdir())


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.write_text(",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows))
    return path


def test_a_csv_file_of_the_validation_rows_gives_the_validation_figures(tmp_path: Path) -> None:
    header, rows = table(tmp_path)
    folder = trained(csv_spec(tmp_path))
    _, valid, _ = stratified_split(np.array([r[2] for r in rows]), VALID, 0.0, SEED)  # the classes' shares
    held = [rows[i] for i in valid]
    as_is = write_csv(tmp_path / "held.csv", header, held)
    # NOTE: other row and column orders: columns are found by name, and the figures do not depend on the order
    order = [2, 0, 1]
    shuffled = write_csv(tmp_path / "shuffled.csv", [header[i] for i in order],
                         [[r[i] for i in order] for r in held[::-1]])  # fmt: skip
    validation = evaluated(folder)
    for file in (as_is, shuffled):
        doc = evaluated(folder, "--split", str(file))
        assert doc["split"] == str(file) and doc["examples"] == len(held)
        same_figures(doc, validation)
    assert len(list(folder.glob("evaluation-file-held-*.json"))) == 1
    assert len(list(folder.glob("evaluation-file-shuffled-*.json"))) == 1
    other = tmp_path / "other"
    other.mkdir()
    evaluated(folder, "--split", str(write_csv(other / "held.csv", header, held)))
    assert len(list(folder.glob("evaluation-file-held-*.json"))) == 2, "another file of the same name: another report"
    # NOTE: a file with some classes only is read with the model's classes: the missing ones have no support
    yes = write_csv(tmp_path / "yes.csv", header, [r for r in held if r[2] == "yes"])
    report = next(iter(evaluated(folder, "--split", str(yes))["outputs"].values()))
    assert [c["name"] for c in report["classes"]] == list(CLASSES)
    assert [c["support"] for c in report["classes"]] == [0, 0, sum(r[2] == "yes" for r in held)]


def test_what_the_model_never_learned_is_an_error_at_its_cell(tmp_path: Path) -> None:
    header, rows = table(tmp_path)
    folder = trained(csv_spec(tmp_path))
    bad = write_csv(tmp_path / "bad.csv", header, [rows[0], ["0.5", "red", "perhaps"], ["0.1", "purple", "no"]])
    result = invoke("evaluate", str(folder), "--split", str(bad), "--allow-outside")
    assert result.exit_code == 1
    assert f"{bad}:3:3" in result.output and "'perhaps' is not one of the classes the model was trained on" in \
        result.output  # fmt: skip
    assert f"{bad}:4:2" in result.output and "'purple' is not among the categories of the training rows" in \
        result.output  # fmt: skip
    huge = write_csv(tmp_path / "huge.csv", header, [["1e308", "red", "no"]])
    result = invoke("evaluate", str(folder), "--split", str(huge), "--allow-outside")
    assert result.exit_code == 1 and f"{huge}:2:1" in result.output and "beyond float32's range" in result.output
    result = invoke("evaluate", str(folder), "--split", str(tmp_path / "table.csv"), "--allow-outside")
    assert result.exit_code == 1 and "names the training data itself" in result.output
    missing = write_csv(tmp_path / "missing.csv", ["a", "label"], [["0.5", "no"]])
    result = invoke("evaluate", str(folder), "--split", str(missing), "--allow-outside")
    assert result.exit_code == 1 and "'color', but missing.csv has no such column" in result.output
    result = invoke("evaluate", str(folder), "--split", str(tmp_path / "nope.csv"), "--allow-outside")
    assert result.exit_code == 1 and "--split: no such file" in result.output and "current folder" in result.output
    assert not list(folder.glob("evaluation-*")), "nothing is written for a file that cannot be read"


def test_a_text_file_and_an_npz_file_of_the_validation_examples(tmp_path: Path) -> None:
    corpus = load_text("sonnets")[:6000]
    (tmp_path / "train.txt").write_text(corpus)
    spec = tmp_path / "lm.yaml"
    spec.write_text(textwrap.dedent("""\
        specgrad: 1
        name: lm
        input: {shape: [16], dtype: int32}
        model: [{embedding: {vocab: 128, dim: 16}}, {linear: 128}]
        data: {source: text, path: train.txt, context: 16, batch_size: 8}
        train: {steps: 20, final_weights: last}
        """))  # fmt: skip
    folder = trained(spec)
    cut = len(corpus) - round(len(corpus) * 0.2)
    held = tmp_path / "held.txt"
    held.write_text(corpus[cut:])
    same_figures(evaluated(folder, "--split", str(held)), evaluated(folder))

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(100, 3)).astype(np.float32), rng.normal(size=(100, 2)).astype(np.float32) * 50 + 7
    np.savez(tmp_path / "points.npz", x=x, y=y)
    spec = tmp_path / "reg.yaml"
    spec.write_text(textwrap.dedent(f"""\
        specgrad: 1
        name: reg
        seed: {SEED}
        input: {{shape: [3]}}
        model: [{{linear: 8}}, relu, {{linear: 2}}]
        data: {{source: npz, path: points.npz, valid_split: {VALID}, batch_size: 8}}
        train: {{epochs: 2, loss: mse, final_weights: last}}
        """))  # fmt: skip
    folder = trained(spec)
    _, valid = split(len(x), VALID, SEED)
    np.savez(tmp_path / "held.npz", x=x[valid], y=y[valid])
    doc = evaluated(folder, "--split", str(tmp_path / "held.npz"))
    same_figures(doc, evaluated(folder))
    # NOTE: in the target's units: the file's raw targets, not standardized ones
    assert doc["outputs"][next(iter(doc["outputs"]))]["rmse"] > 1


def test_data_test_path_is_the_test_split_that_validate_checks_and_the_run_records(tmp_path: Path) -> None:
    header, rows = table(tmp_path)
    (tmp_path / "tests").mkdir()
    write_csv(tmp_path / "tests" / "final.csv", header, rows[:30])
    spec = csv_spec(tmp_path, "test_path: tests/final.csv\n")
    shown = invoke("validate", str(spec))
    assert shown.exit_code == 0 and "and 30 test (held out for evaluate --split test) examples" in shown.output
    loaded = load_data(validate_file(spec), held="test")
    assert len(loaded.x_valid) == 30 and len(loaded.x_train) == len(rows) - round(len(rows) * VALID)
    folder = trained(spec)
    resolved = (folder / "spec.resolved.yaml").read_text()
    assert "test_path: ../../tests/final.csv" in resolved, "named relative to the run folder"
    doc = evaluated(folder, "--split", "test")
    assert doc["examples"] == 30 and (folder / "evaluation-test.json").exists()
    same_figures(doc, evaluated(folder, "--split", str(tmp_path / "tests" / "final.csv")))

    write_csv(tmp_path / "tests" / "final.csv", header, [["1.0", "green", "perhaps"]])
    broken = invoke("validate", str(spec))
    assert broken.exit_code == 1 and "final.csv:2:3" in broken.output and "'perhaps'" in broken.output
    gone = invoke("validate", str(csv_spec(tmp_path, "test_path: tests/none.csv\n")))
    assert gone.exit_code == 1 and "spec.yaml:13:14" in gone.output and "data.test_path: no such file" in gone.output
    both = invoke("validate", str(csv_spec(tmp_path, "test_path: tests/final.csv\ntest_split: 0.1\n")))
    assert both.exit_code == 1 and "both test_split and test_path" in both.output
    digits = invoke("validate", str(SPECS / "digits_mlp.yaml"), "--set", "data.test_path=digits_mlp.yaml")
    assert digits.exit_code == 1 and "data.test_path is for the text, csv, npz and images sources" in digits.output


def test_validate_and_train_say_how_many_examples_the_test_split_holds(tmp_path: Path) -> None:
    header, rows = table(tmp_path)
    spec = csv_spec(tmp_path, "test_split: 0.1\n")
    shown = invoke("validate", str(spec))
    assert shown.exit_code == 0 and "data: 78 training, 30 validation and 12 test" in shown.output
    assert json.loads(invoke("validate", str(spec), "--json").output)["data"]["test_examples"] == 12
    result = invoke("train", str(spec), "--out", str(tmp_path / "runs"), "--steps", "2")
    assert result.exit_code == 0 and "78 training, 30 validation and 12 test" in result.output


def reweighted(weights: Path, key: str, change: Callable[[dict], dict]) -> None:
    """The weights with the metadata `key` (JSON) changed in place: an edit the checksums do not cover."""
    with safe_open(str(weights), "np") as f:
        meta = dict(f.metadata())
    meta[key] = json.dumps(change(json.loads(meta[key])))
    save_file(load_file(str(weights)), str(weights), metadata=meta)


def run_classes(folder: Path, file: Path) -> np.ndarray:
    """The class `run` answers for each example of `file`."""
    out = file.with_suffix(".npy")
    result = invoke("run", str(folder), "--input", str(file), "--output", str(out), "--allow-outside")
    assert result.exit_code == 0, result.output
    return np.load(out).argmax(1)


def confusion(truth: list[str], classes: np.ndarray) -> list[list[int]]:
    ret = np.zeros((len(CLASSES), len(CLASSES)), int)
    np.add.at(ret, ([CLASSES.index(t) for t in truth], classes), 1)
    return ret.tolist()


def test_the_figures_are_those_of_the_model_run_serves(tmp_path: Path) -> None:
    """evaluate standardizes with the statistics in the weights, as run and export do: figures agree with run's
    answers, on the validation split and on a file, also after the weights' statistics were edited (to values
    training could have written), where figures with the data's own statistics would describe another model."""
    header, rows = table(tmp_path)
    folder = trained(csv_spec(tmp_path))
    _, valid, _ = stratified_split(np.array([r[2] for r in rows]), VALID, 0.0, SEED)  # the classes' shares
    held = [rows[i] for i in valid]
    file = write_csv(tmp_path / "held.csv", header, held)
    truth = [r[2] for r in held]

    def figures() -> list[dict]:
        """The report on the validation split, and on the file of its rows."""
        return [next(iter(evaluated(folder, *args)["outputs"].values())) for args in ((), ("--split", str(file)))]

    before = run_classes(folder, file)
    for report in figures():
        assert report["confusion"] == confusion(truth, before)
    # NOTE: column a's mean moved by 50 of its stds, with a tiny std: every example reads as far below the mean
    reweighted(folder / "model.safetensors", "normalization",
               lambda s: {"mean": [s["mean"][0] + 50 * s["std"][0], *s["mean"][1:]], "std": [0.01, *s["std"][1:]]}
               )  # fmt: skip
    after = run_classes(folder, file)
    assert not np.array_equal(after, before), "the edit changes the model run serves"
    for report in figures():
        assert report["confusion"] == confusion(truth, after)


def test_a_value_run_refuses_is_refused_with_runs_own_words(tmp_path: Path) -> None:
    """A value near float32's largest, infinite once standardized or in the model's output: evaluate stops as run
    does (the same check, the same message, naming the example), writes no report (never Infinity in JSON), and lets
    no Python warning through."""
    header, rows = table(tmp_path)
    folder = trained(csv_spec(tmp_path))
    big = write_csv(tmp_path / "big.csv", header, [rows[0], ["-3.4e38", *rows[1][1:]], rows[2]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = invoke("evaluate", str(folder), "--split", str(big), "--allow-outside")
        ran = invoke("run", str(folder), "--input", str(big), "--allow-outside")
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert got.exit_code == ran.exit_code == 1, got.output
    assert "example 1" in got.output and got.output.splitlines()[0] == ran.output.splitlines()[0], got.output
    assert "--allow-nonfinite" not in got.output and "--allow-nonfinite" in ran.output, "evaluate has no such option"
    assert not list(folder.glob("evaluation-file-*")), "nothing written"
