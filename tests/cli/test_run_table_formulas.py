"""`run --output preds.csv` defuses text cells a spreadsheet would run as a formula (CSV injection): an ID or kept
cell, a header name or a class name starting with =, +, -, @, a tab or a CR gets a ' in front; a number written as
text (-1.5) is left as it is, and the .json table keeps the exact text (issue 32, round 1 attack)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from specgrad.cli.run import defused
from typer.testing import CliRunner

runner = CliRunner()
IDS = ["=1+1", "+SUM(A1)", "@x", '=HYPERLINK("http://x.example","y")', "-1.5", "-2+3", "plain", "3,5"]


@pytest.mark.parametrize(("cell", "written"), [
    ("=1+1", "'=1+1"), ("+SUM(A1)", "'+SUM(A1)"), ("@x", "'@x"), ("-1+2", "'-1+2"), ("\tx", "'\tx"), ("\rx", "'\rx"),
    ("-1.5", "-1.5"), ("+2", "+2"), ("-3,5", "-3,5"), ("-1e-3", "-1e-3"), ("-", "'-"), ("", ""), ("a=b", "a=b"),
    (7, 7), (-1.5, -1.5)])  # fmt: skip
def test_a_cell_is_defused_unless_it_is_a_number(cell: object, written: object) -> None:
    assert defused(cell) == written


def test_the_csv_table_defuses_formulas_and_the_json_keeps_them(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    rows = [f'"{IDS[i % len(IDS)].replace(chr(34), chr(34) * 2)}",{rng.random():.3f},{"=up" if i % 2 else "down"}'
            for i in range(40)]  # fmt: skip
    (tmp_path / "h.csv").write_text("@id,x,label\n" + "\n".join(rows) + "\n")
    (tmp_path / "h.yaml").write_text("specgrad: 1\nname: h\ninput: {shape: [1]}\nmodel: [{linear: 2}]\n"
                                     "data: {source: csv, path: h.csv, target: label, features: [x], batch_size: 4}\n"
                                     "train: {epochs: 1}\n")  # fmt: skip
    result = runner.invoke(app, ["train", str(tmp_path / "h.yaml"), "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    for out in ("p.csv", "p.json"):
        result = runner.invoke(app, ["run", str(tmp_path / "runs/h-1"), "--input", str(tmp_path / "h.csv"), "--output",
                                     str(tmp_path / out), "--id", "@id", "--keep", "label"])  # fmt: skip
        assert result.exit_code == 0, result.output
    with (tmp_path / "p.csv").open(newline="") as f:
        header, *table = list(csv.reader(f))
    assert header == ["'@id", "label", "prediction", "p_=up", "p_down"]
    ids = [IDS[i % len(IDS)] for i in range(40)]
    assert [r[0] for r in table] == [c if c in ("-1.5", "plain", "3,5") else "'" + c for c in ids]
    assert {r[1] for r in table} == {"'=up", "down"} and {r[2] for r in table} <= {"'=up", "down"}
    assert not any(c[:1] in ("=", "+", "@", "\t", "\r") for r in table for c in r)
    document = json.loads((tmp_path / "p.json").read_text())
    assert [d["@id"] for d in document] == ids and {d["label"] for d in document} == {"=up", "down"}
