"""`specgrad validate` on a csv: every column's kind and how it becomes inputs, and what each `auto` width became
(text and --json)."""

from __future__ import annotations

import json
from pathlib import Path

from specgrad.cli.main import app
from typer.testing import CliRunner

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


def test_validate_prints_the_columns_of_an_old_spec_unchanged_in_width() -> None:
    got = runner.invoke(app, ["validate", str(EXAMPLES / "messy_csv.yaml")])
    assert got.exit_code == 0, got.output
    assert "columns:\n  id: id; left out: an ID tells the model nothing of new rows\n" in got.output
    assert "  alcohol: numeric; 1 value, standardized\n" in got.output
    assert "  color: categorical; one_hot, 4 values\n" in got.output  # NOTE: its fill 'unknown' is a 4th category
    assert "  note: text; left out: free text" in got.output and "  kind: target; the target\n" in got.output
    assert "auto ->" not in got.output


def test_validate_prints_what_auto_became() -> None:
    got = runner.invoke(app, ["validate", str(EXAMPLES / "wine_auto.yaml")])
    assert got.exit_code == 0, got.output
    assert "input.shape: auto -> [5] (2 numeric columns (alcohol, acidity) + color (3 values) = 5 values per " \
        "example; left out: id, note)\nout: auto -> 3 (3 classes in column 'kind')\n" in got.output  # fmt: skip
    assert "│   │ input │ input (float32) │ [5]" in got.output


def test_validate_json_has_columns_and_auto() -> None:
    got = json.loads(runner.invoke(app, ["validate", str(EXAMPLES / "wine_auto.yaml"), "--json"]).output)
    assert got["inputs"]["input"]["shape"] == [5] and got["auto"][1] == "out: auto -> 3 (3 classes in column 'kind')"
    left = "left out: an ID tells the model nothing of new rows"
    assert got["columns"][0] == {"name": "id", "kind": "id", "use": left}
    assert [c["kind"] for c in got["columns"]] == ["id", "numeric", "numeric", "categorical", "text", "target"]


def test_a_column_listed_that_looks_like_an_id_gets_a_note(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("id,a,y\n" + "".join(f"{i + 1},{i % 4 * 0.5},{i % 2}\n" for i in range(20)))
    (tmp_path / "s.yaml").write_text(
        "specgrad: 1\nname: s\ninput: {shape: [2]}\nmodel: [{linear: 2}]\n"
        "data: {source: csv, path: d.csv, target: y, task: classify, batch_size: 4}\n"
    )
    got = runner.invoke(app, ["validate", str(tmp_path / "s.yaml")])
    assert got.exit_code == 0, got.output
    assert "  id: id; 1 value, standardized; it looks like an ID (a distinct value in every row): leave it out of " \
        "data.features\n" in got.output  # fmt: skip


def test_a_class_written_as_a_missing_token_is_named_by_validate_and_train(tmp_path: Path) -> None:
    """NA (North America) is a missing-value token by default: its rows are left out, and both commands say so, with
    the token and the key that keeps it a class; with data.missing_values: [""] it is a class again."""
    (tmp_path / "r.csv").write_text(
        "x,region\n" + "".join(f"{i / 10},{('EU', 'NA', 'AS')[i % 3]}\n" for i in range(60))
    )
    spec = tmp_path / "r.yaml"
    body = "input: {shape: [1]}\nmodel: [{linear: 4}, relu, {linear: auto}]\ntrain: {epochs: 1}\n"
    spec.write_text(f"specgrad: 1\nname: r\n{body}data: {{source: csv, path: r.csv, target: region, batch_size: 4}}\n")
    said = "20 rows left out: their target is missing ('NA' 20); if NA is a class, not a missing value, set " \
        "data.missing_values"  # fmt: skip
    for command in (["validate", str(spec)], ["train", str(spec), "--out", str(tmp_path / "runs")]):
        got = runner.invoke(app, command)
        assert got.exit_code == 0 and said in got.output and "2 classes (AS, EU)" in got.output, got.output
    spec.write_text(f"specgrad: 1\nname: r\n{body}data: {{source: csv, path: r.csv, target: region, batch_size: 4, "
                    'missing_values: [""]}\n')  # fmt: skip
    got = runner.invoke(app, ["validate", str(spec)])
    assert got.exit_code == 0 and "3 classes (AS, EU, NA)" in got.output and "left out" not in got.output, got.output
