"""A messy CSV as it comes (a byte-order mark, ';' between cells, decimal commas, quoted text, an ID column, missing
cells and missing labels) from validate through train, run, evaluate and both exports, without editing the file: the
fills computed on the training rows are applied the same by run, evaluate, the ONNX model (which reads NaN at a
numeric column's value as the fill) and the C program (which reads NA as the fill)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.nn.state import safe_load_metadata

pytestmark = pytest.mark.xdist_group("messy_csv")  # NOTE: one training run read by every test
runner = CliRunner()
COLORS = ("red", "green", "blue")
SPEC = """\
specgrad: 1
name: messy
seed: 0
input: {shape: [6]}
model: [{linear: 8}, relu, {linear: 3}]
data:
  source: csv
  path: wine.csv
  target: kind
  features: [size, weight, color]
  categorical: {color: one_hot}
  decimal: ","
  missing: median
  missing_columns: {color: {fill: unknown}}
train: {loss: cross_entropy, steps: 30, lr: 0.05}
"""


def cell(i: int) -> list[str]:
    """id; size; weight; color; note; kind of row i: every seventh size NA, every fifth color empty, every eleventh
    label '?'."""
    size = "NA" if i % 7 == 3 else f"{i % 9},{i % 4}"
    color = "" if i % 5 == 2 else COLORS[i % 3]
    kind = "?" if i % 11 == 6 else ("low", "mid", "high")[(i % 9) // 3]
    return [f"id{i:03d}", size, f"{10 + i % 6},5", color, f'"note; {i} says ""hi"""', kind]


def write(path: Path, lines: list[list[str]], header: str = "id;size;weight;color;note;kind") -> Path:
    path.write_bytes(b"\xef\xbb\xbf" + (header + "\n" + "\n".join(";".join(c) for c in lines) + "\n").encode())
    return path


def ok(*args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("messy")
    write(folder / "wine.csv", [cell(i) for i in range(90)])
    (folder / "spec.yaml").write_text(SPEC)
    checked = ok("validate", folder / "spec.yaml")
    ok("train", folder / "spec.yaml", "--out", folder / "runs")
    run = folder / "runs" / "messy-1"
    columns = json.loads(safe_load_metadata(run / "model.safetensors")["columns"])
    return {"folder": folder, "run": run, "validate": checked, "columns": columns}


def test_validate_says_the_dialect_and_what_fills_each_column(trained: dict) -> None:
    out, fills = trained["validate"], trained["columns"]["missing"]
    assert "csv: delimiter ';' (sniffed), decimal ','; missing cells: size 13, filled with the training rows' " \
        f"median, {fills['size']['fill']}; color 18, filled with unknown; 8 rows left out: their target is " \
        "missing" in out  # fmt: skip
    assert "inputs: 2 numeric columns (size, weight) + color (4 values) = 6 values per example" in out


def test_the_fills_are_saved_with_the_weights(trained: dict) -> None:
    columns = trained["columns"]
    assert columns["categorical"] == {"color": {"encoding": "one_hot", "values": ["blue", "green", "red", "unknown"]}}
    assert columns["missing"]["color"] == {"strategy": "fill", "fill": "unknown"}
    assert columns["missing"]["size"]["strategy"] == "median" and columns["missing"]["weight"]["strategy"] == "median"


def served(trained: dict) -> tuple[Path, np.ndarray, list[list[str]]]:
    """A file of new rows for run (missing cells in each feature), what run prints for it, and the rows."""
    lines = [cell(i) for i in range(3, 23)]
    lines[0][2], lines[1][1] = "n/a", "?"  # NOTE: weight and size missing, as other tokens
    path = write(trained["folder"] / "new.csv", lines)
    out = trained["folder"] / "p.npy"
    ok("run", trained["run"], "--input", path, "--output", out)
    return path, np.load(out), lines


def test_run_fills_a_missing_cell_as_training_did(trained: dict) -> None:
    path, ran, lines = served(trained)
    fills = {k: v["fill"] for k, v in trained["columns"]["missing"].items()}
    filled = [[c[0], fills["size"].replace(".", ",") if c[1] in ("NA", "?") else c[1],
               fills["weight"].replace(".", ",") if c[2] == "n/a" else c[2], c[3] or fills["color"], *c[4:]]
              for c in lines]  # fmt: skip
    out = trained["folder"] / "q.npy"
    ok("run", trained["run"], "--input", write(trained["folder"] / "filled.csv", filled), "--output", out)
    assert ran.shape == (20, 3) and np.array_equal(np.load(out), ran)


def test_evaluate_a_file_with_missing_cells_and_labels(trained: dict) -> None:
    path = write(trained["folder"] / "test.csv", [cell(i) for i in range(100, 130)])
    weights = trained["run"] / "model.safetensors"
    out = json.loads(ok("evaluate", trained["folder"] / "spec.yaml", "--weights", weights, "--split", path, "--json"))
    assert out["examples"] == 30 - 3  # NOTE: 106, 117 and 128 have no label: left out, never filled
    assert out["left_out"] == {"no_target": 3, "drop_row": 0}
    shown = ok("evaluate", trained["folder"] / "spec.yaml", "--weights", weights, "--split", path)
    said = " ".join(shown.split())  # NOTE: the console wraps a long line
    assert f"3 row(s) of {path} left out: 3 without a target, 0 with a missing cell in a drop_row column" in said


def encoded(lines: list[list[str]], columns: dict, missing: float | None = None) -> np.ndarray:
    """The examples the exports take: size, weight and the one-hot color, with the saved fills in missing cells (or
    `missing`, e.g. NaN, in a numeric one; a missing color is always its fill's one-hot)."""
    fills, values = columns["missing"], columns["categorical"]["color"]["values"]

    def number(s: str, name: str) -> float:
        if s.lower() in ("na", "n/a", "?", ""):
            return float(fills[name]["fill"]) if missing is None else missing
        return float(s.replace(",", "."))

    def color(s: str) -> list[float]:
        return [float(v == (s or fills["color"]["fill"])) for v in values]

    return np.array([[number(c[1], "size"), number(c[2], "weight"), *color(c[3])] for c in lines], np.float32)


def test_onnx_fills_a_nan_as_run_fills_a_missing_cell(trained: dict) -> None:
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import onnx

    _, ran, lines = served(trained)
    path = trained["folder"] / "model.onnx"
    ok("export", trained["run"], "--format", "onnx", "--out", path)
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    columns = json.loads(props["columns"])  # NOTE: the fills are still named in the model's metadata
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = encoded(lines, columns, missing=np.nan)
    assert np.isnan(x[:, :2]).sum() == 5  # NOTE: the NA, ? and n/a cells of size and weight
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, {"input": x})))
    np.testing.assert_allclose(got["probabilities"], ran, rtol=1e-6, atol=1e-6)
    filled = dict(zip(names, session.run(None, {"input": encoded(lines, columns)})))  # NOTE: the fills given as numbers
    np.testing.assert_allclose(filled["probabilities"], ran, rtol=1e-6, atol=1e-6)
    x[4, 2] = np.nan  # NOTE: a one-hot value has no fill: NaN stays NaN, for the caller's checks to see
    got = session.run(["probabilities"], {"input": x})[0]
    assert np.isnan(got[4]).all() and np.isfinite(np.delete(got, 4, axis=0)).all()


def test_the_c_program_reads_na_as_the_fill(trained: dict, cc: str) -> None:
    _, ran, lines = served(trained)
    c_file = trained["folder"] / "model.c"
    ok("export", trained["run"], "--format", "c", "--out", c_file)
    binary = c_file.with_suffix("")
    build = subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", str(c_file), "-o", str(binary), "-lm"], capture_output=True,
                           text=True)  # fmt: skip
    assert build.returncode == 0, build.stderr
    x = encoded(lines, trained["columns"])
    text = "\n".join(" ".join(["NA" if c[1] in ("NA", "?") else repr(float(v[0])),
                               "N/A" if c[2] == "n/a" else repr(float(v[1])), *(repr(float(u)) for u in v[2:])])
                     for c, v in zip(lines, x))  # fmt: skip
    out = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True).stdout
    printed = np.array([[float(v) for v in line.split()] for line in out.splitlines()], np.float32)
    np.testing.assert_allclose(printed, ran, rtol=1e-5, atol=1e-5)
    wrong = subprocess.run([str(binary)], input="1 2 NA 0 0 1", capture_output=True, text=True)  # NOTE: one-hot
    assert wrong.returncode == 1 and "is a missing value" in wrong.stderr and "fills no missing value" in wrong.stderr
