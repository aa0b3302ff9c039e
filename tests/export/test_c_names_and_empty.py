"""The C export (issue 32, round 1 attack): model.h quotes every category and class name, so a name holding a comma
or a quote reads as one name; the runner's empty value (`1,,2`, a comma first) is refused by a model that fills no
missing cell and filled, as `specgrad run` fills it, by one whose training filled missing cells."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

runner = CliRunner()


def _cli(*args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def _train(folder: Path, csv: str, spec: str) -> Path:
    (folder / "d.csv").write_text(csv)
    (folder / "s.yaml").write_text(spec)
    _cli("train", folder / "s.yaml", "--out", folder / "runs")
    return next((folder / "runs").iterdir())


def _program(run: Path, cc: str) -> Path:
    c_file = run.parent.parent / "m.c"
    _cli("export", run, "--format", "c", "--out", c_file)
    built = subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", str(c_file), "-o", str(c_file.with_suffix("")), "-lm"],
                           capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr
    return c_file.with_suffix("")


def test_header_quotes_categories_and_classes_holding_commas_and_quotes(tmp_path: Path) -> None:
    regions = ["north, east", 'say "hi"', "south"]
    classes = ["a, b", "c"]
    rows = [f'{i % 7 / 7:.3f},"{regions[i % 3].replace(chr(34), chr(34) * 2)}",{"NA" if i % 11 == 0 else i % 5},'
            f'"{classes[(i // 3) % 2]}"' for i in range(60)]  # fmt: skip
    spec = ("specgrad: 1\nname: q\ninput: {shape: [5]}\nmodel: [{linear: 2}]\n"
            "data: {source: csv, path: d.csv, target: label, batch_size: 8, categorical: {region: one_hot},\n"
            "       missing_columns: {z: {fill: 2}}}\ntrain: {steps: 2}\n")  # fmt: skip
    run = _train(tmp_path, "x,region,z,label\n" + "\n".join(rows) + "\n", spec)
    _cli("export", run, "--format", "c", "--out", tmp_path / "m.c")
    header = re.sub(r"\n \*     ", " ", (tmp_path / "m.h").read_text())
    assert 'in this order: "north, east", "say \\"hi\\"", "south"\n' in header, header
    assert 'one per class, in this order: 0 "a, b", 1 "c";' in header, header
    assert "north, east, south" not in header


def test_header_quotes_a_missing_category_fill(tmp_path: Path) -> None:
    cells = ["" if i % 9 == 0 else '"x, y"' if i % 2 else "z" for i in range(40)]  # NOTE: some missing
    rows = [f"{i / 10:.2f},{k},{i % 3 / 3:.3f}" for i, k in enumerate(cells)]
    spec = ("specgrad: 1\nname: f\ninput: {shape: [3]}\nmodel: [{linear: 1}]\n"
            "data: {source: csv, path: d.csv, target: y, batch_size: 4, categorical: {k: one_hot},\n"
            "       missing_columns: {k: {fill: 'x, y'}}}\ntrain: {steps: 2, loss: mse}\n")  # fmt: skip
    run = _train(tmp_path, "a,k,y\n" + "\n".join(rows) + "\n", spec)
    _cli("export", run, "--format", "c", "--out", tmp_path / "m.c")
    header = re.sub(r"\n \*     ", " ", (tmp_path / "m.h").read_text())
    assert 'in this order: "x, y", "z"\n' in header and 'training filled it with the category "x, y"' in header, header


def test_runner_refuses_an_empty_value_when_the_model_fills_nothing(tmp_path: Path, cc: str) -> None:
    rows = "".join(f"{i / 10:.2f},{i % 4 / 4:.2f},{i % 3 / 3:.3f}\n" for i in range(32))
    run = _train(tmp_path, "a,b,y\n" + rows, "specgrad: 1\nname: e\ninput: {shape: [2]}\nmodel: [{linear: 1}]\n"
                 "data: {source: csv, path: d.csv, target: y, batch_size: 4}\n"
                 "train: {steps: 2, loss: mse}\n")  # fmt: skip
    binary = _program(run, cc)
    for text, at in (("0.5,,1\n", "example 0, value 1"), ("0.5,1\n,1,2\n", "example 1, value 0")):
        ran = subprocess.run([str(binary)], input=text, capture_output=True, text=True)
        assert ran.returncode == 1, ran.stdout
        assert f"error: {at} (counting from 0): '' is empty (nothing between two commas)" in ran.stderr, ran.stderr


@pytest.mark.parametrize("gap", ["", "NA"])
def test_runner_fills_an_empty_value_as_run_does(tmp_path: Path, cc: str, gap: str) -> None:
    """Empty first on a line, in the middle (',,' before the last value) and NA: each column's fill, as `run`."""
    rows = "".join(f"{'' if i % 5 == 0 else f'{i / 10:.2f}'},{'' if i % 7 == 0 else f'{i % 4 / 4:.2f}'},"
                   f"{i % 3 / 3:.3f},{i % 2}\n" for i in range(40))  # fmt: skip
    run = _train(tmp_path, "a,b,c,y\n" + rows, "specgrad: 1\nname: e\ninput: {shape: [3]}\nmodel: [{linear: 1}]\n"
                 "data: {source: csv, path: d.csv, target: y, batch_size: 4, missing: mean}\n"
                 "train: {steps: 2, loss: mse}\n")  # fmt: skip
    (tmp_path / "in.csv").write_text("a,b,c\n,0.25,1\n1.5,0.75,0\n0.5,,1\n,,2\n")
    _cli("run", run, "--input", tmp_path / "in.csv", "--output", tmp_path / "p.npy")
    expected = np.load(tmp_path / "p.npy").reshape(-1)
    assert len(expected) == 4
    text = f"{gap},0.25,1\n1.5,0.75,0\n0.5,{gap},1\n{gap},{gap},2\n"
    ran = subprocess.run([str(_program(run, cc))], input=text, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    np.testing.assert_allclose([float(line) for line in ran.stdout.split()], expected, rtol=1e-5, atol=1e-6)
