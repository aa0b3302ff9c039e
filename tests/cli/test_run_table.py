"""`specgrad run --output` as a table: the ID column (--id, else the example's index), the columns --keep names, the
predicted class or value, each class's probability; the same fields in .json; class names from data.class_names."""

from __future__ import annotations

import csv
import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

pytestmark = pytest.mark.xdist_group("run_table")  # NOTE: on one worker: the runs trained once

runner = CliRunner()
KINDS = ("owl", "cat", "dog")


def invoke(*args: str | Path) -> object:
    return runner.invoke(app, [*map(str, args), "--allow-outside"])


def table_rows(n: int = 60) -> list[list[str]]:
    """id (text), a and b (numbers), label (a text class that depends on a), note (text the model never reads)."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        a, b = float(rng.normal()), float(rng.normal())
        rows.append([f"id-{1000 + i}", f"{a:.4f}", f"{b:.4f}", KINDS[int(a > -0.4) + int(a > 0.4)], f"note {i}"])
    return rows


def write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *rows])
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("table")
    write(root / "t.csv", ["id", "a", "b", "label", "note"], table_rows())
    (root / "csv.yaml").write_text(textwrap.dedent("""\
        specgrad: 1
        name: kinds
        input: {shape: [2]}
        model: [{linear: 8}, relu, {linear: 3}]
        data: {source: csv, path: t.csv, target: label, features: [a, b], batch_size: 8}
        train: {steps: 20, lr: 0.05}
        """))  # fmt: skip
    x = np.random.default_rng(1).standard_normal((60, 2))
    np.savez(root / "n.npz", x=x, y=(x[:, 0] > 0).astype(int) + (x[:, 1] > 0).astype(int))
    (root / "npz.yaml").write_text(textwrap.dedent("""\
        specgrad: 1
        name: levels
        input: {shape: [2]}
        model: [{linear: 3}]
        data: {source: npz, path: n.npz, batch_size: 8, class_names: [low, mid, high]}
        train: {steps: 20, lr: 0.05}
        """))  # fmt: skip
    (root / "reg.yaml").write_text(textwrap.dedent("""\
        specgrad: 1
        name: reg
        input: {shape: [1]}
        model: [{linear: 1}]
        data: {source: csv, path: t.csv, target: a, features: [b], batch_size: 8}
        train: {steps: 10, loss: mse, metrics: [loss]}
        """))  # fmt: skip
    out = {}
    for name in ("csv", "npz", "reg"):
        result = invoke("train", root / f"{name}.yaml", "--out", root / "runs")
        assert result.exit_code == 0, result.output
        out[name] = next(p for p in (root / "runs").iterdir() if p.name.startswith({"csv": "kinds", "npz": "levels",
                                                                                  "reg": "reg"}[name]))  # fmt: skip
    out["root"] = root
    return out


def printed(run: Path, file: Path) -> list[tuple[int, str, float]]:
    """(index, class name, probability) of each example, as `run` prints them."""
    result = invoke("run", run, "--input", file, "--json")
    assert result.exit_code == 0, result.output
    return [(r["index"], r["name"], r["probability"]) for r in json.loads(result.stdout)]


def read_table(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_table_carries_the_id_and_kept_columns_then_the_prediction(runs, tmp_path: Path) -> None:
    file, out = runs["root"] / "t.csv", tmp_path / "p.csv"
    result = invoke("run", runs["csv"], "--input", file, "--output", out, "--id", "id", "--keep", "a,note")
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[0] == "id,a,note,prediction,p_cat,p_dog,p_owl"
    got, rows, shown = read_table(out), table_rows(), printed(runs["csv"], file)
    assert [r["id"] for r in got] == [r[0] for r in rows] and [r["note"] for r in got] == [r[4] for r in rows]
    assert [r["a"] for r in got] == [r[1] for r in rows]  # NOTE: as written in the input, not as the model read it
    assert [r["prediction"] for r in got] == [name for _, name, _ in shown]
    assert np.allclose([float(r[f"p_{r['prediction']}"]) for r in got], [p for _, _, p in shown], rtol=1e-6)
    assert np.allclose([sum(float(r[f"p_{k}"]) for k in KINDS) for r in got], 1, atol=1e-6)


def test_rows_in_another_order_keep_their_ids(runs, tmp_path: Path) -> None:
    rows = table_rows()[::-1][:7]
    file = write(tmp_path / "some.csv", ["note", "b", "id", "a", "label"],
                 [[r[4], r[2], r[0], r[1], r[3]] for r in rows])  # fmt: skip
    assert invoke("run", runs["csv"], "--input", file, "--output", tmp_path / "p.csv", "--id", "id").exit_code == 0
    got = read_table(tmp_path / "p.csv")
    assert [r["id"] for r in got] == [r[0] for r in rows]
    assert [r["prediction"] for r in got] == [name for _, name, _ in printed(runs["csv"], file)]


def test_without_an_id_the_index_comes_first_and_keep_inputs_copies_every_column(runs, tmp_path: Path) -> None:
    file = runs["root"] / "t.csv"
    assert invoke("run", runs["csv"], "--input", file, "--output", tmp_path / "p.csv", "--keep-inputs").exit_code == 0
    header = (tmp_path / "p.csv").read_text().splitlines()[0]
    assert header == "index,id,a,b,label,note,prediction,p_cat,p_dog,p_owl"
    assert [r["index"] for r in read_table(tmp_path / "p.csv")] == [str(i) for i in range(60)]


def test_json_holds_the_same_fields_in_the_same_order(runs, tmp_path: Path) -> None:
    file = runs["root"] / "t.csv"
    for ext in ("csv", "json"):
        result = invoke("run", runs["csv"], "--input", file, "--output", tmp_path / f"p.{ext}", "--id", "id", "--keep",
                        "b")  # fmt: skip
        assert result.exit_code == 0, result.output
    records, table = json.loads((tmp_path / "p.json").read_text()), read_table(tmp_path / "p.csv")
    assert [list(r) for r in records] == [list(r) for r in table]
    for r, t in zip(records, table):
        assert (r["id"], r["b"], r["prediction"]) == (t["id"], t["b"], t["prediction"])
        assert all(abs(r[f"p_{k}"] - float(t[f"p_{k}"])) < 1e-7 for k in KINDS)


def test_class_names_of_whole_number_labels_name_the_prediction_and_probabilities(runs, tmp_path: Path) -> None:
    x = np.array([[2.0, 2.0], [-2.0, -2.0], [2.0, -2.0]])
    file = write(tmp_path / "x.csv", ["x0", "x1"], [[str(v) for v in r] for r in x])
    result = invoke("run", runs["npz"], "--input", file)
    assert result.exit_code == 0, result.output
    shown = re.findall(r"^\d+: class \d \((\w+)\) \(p=", result.output, re.M)
    assert len(shown) == 3 and set(shown) <= {"low", "mid", "high"}
    assert invoke("run", runs["npz"], "--input", file, "--output", tmp_path / "p.csv").exit_code == 0
    got = read_table(tmp_path / "p.csv")
    assert list(got[0]) == ["index", "prediction", "p_low", "p_mid", "p_high"]
    assert [r["prediction"] for r in got] == shown
    evaluated = invoke("evaluate", runs["npz"], "--json")
    assert evaluated.exit_code == 0, evaluated.output
    assert "high" in evaluated.stdout and "low" in evaluated.stdout  # NOTE: the confusion matrix's classes, by name


def test_a_regression_table_holds_the_value_in_the_targets_units(runs, tmp_path: Path) -> None:
    file = runs["root"] / "t.csv"
    result = invoke("run", runs["reg"], "--input", file, "--json")
    assert result.exit_code == 0, result.output
    values = [r["value"] for r in json.loads(result.stdout)]
    assert invoke("run", runs["reg"], "--input", file, "--output", tmp_path / "p.csv", "--id", "id").exit_code == 0
    got = read_table(tmp_path / "p.csv")
    assert list(got[0]) == ["id", "prediction"] and np.allclose([float(r["prediction"]) for r in got], values)


@pytest.mark.parametrize("args,message", [
    (("--keep", "a"), "error: --keep adds columns to the table --output writes, but no --output is given"),
    (("--id", "id", "--output", "p.npy"), "error: --id adds columns to a .csv or .json table, but --output p.npy is a "
                                          "bare array"),
    (("--keep", "nte", "--output", "p.csv"), "t.csv:1:1: error: --keep: t.csv has no column 'nte'\n  hint: did you "
                                             "mean 'note'? the header has: id, a, b, label, note"),
    (("--id", "ID", "--output", "p.csv"), "error: --id: t.csv has no column 'ID'"),
    (("--keep", "label,label", "--output", "p.csv"), "error: the --output table would have two columns named 'label'"),
])  # fmt: skip
def test_carrying_columns_that_cannot_be_carried_is_an_error(runs, tmp_path: Path, monkeypatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("run", runs["csv"], "--input", runs["root"] / "t.csv", *args)
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output, result.output
    assert not any(tmp_path.iterdir())  # nothing written


def test_an_input_without_columns_has_nothing_to_carry(runs, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((2, 2), np.float32))
    result = invoke("run", runs["csv"], "--input", tmp_path / "x.npy", "--output", tmp_path / "p.csv", "--id", "id")
    assert result.exit_code == 1 and f"--id names columns of a .csv input, but --input {tmp_path / 'x.npy'} has no " \
        "columns" in result.output  # fmt: skip
    assert invoke("run", runs["csv"], "--input", tmp_path / "x.npy", "--output", tmp_path / "p.csv").exit_code == 0
    assert read_table(tmp_path / "p.csv")[1]["index"] == "1"
