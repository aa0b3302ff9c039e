"""`specgrad validate --print`: the spec as it will be trained, after extends, vars and --set, as a spec file that
validates by itself to the same spec_hash."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.modelspec.validate import validate_file
from specgrad.train.run_folder import spec_hash

SPECS = Path(__file__).resolve().parents[2] / "specs"

BASE = """specgrad: 1
name: houses
vars:
  width: 32
input:
  shape: [4]
model:
  - linear: $width
  - relu
  - linear: 1
data:
  source: csv
  path: data/houses.csv
  features: [rooms, area, age, distance]
  target: price
train:
  epochs: 2
  loss: mse
  lr: 0.003
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """specs/base.yaml and specs/wide.yaml (extends it) with their CSV, and the current folder above them."""
    (tmp_path / "specs" / "data").mkdir(parents=True)
    shutil.copy(SPECS / "data" / "houses.csv", tmp_path / "specs" / "data" / "houses.csv")
    (tmp_path / "specs" / "base.yaml").write_text(BASE)
    (tmp_path / "specs" / "wide.yaml").write_text("specgrad: 1\nextends: base.yaml\nname: wide\nvars:\n  width: 64\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_print_gives_the_resolved_spec_which_validates_to_the_same_hash(project: Path) -> None:
    result = CliRunner().invoke(app, ["validate", "specs/wide.yaml", "--set", "train.lr=0.01", "--print"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)
    assert "extends" not in printed and printed["name"] == "wide" and printed["train"]["lr"] == 0.01
    assert printed["model"][0] == {"linear": 64}, "vars are filled in"
    assert printed["data"]["path"] == "specs/data/houses.csv", "files are named from the current folder"
    (project / "resolved.yaml").write_text(result.output)
    want = validate_file(project / "specs" / "wide.yaml", ["train.lr=0.01"])
    assert spec_hash(validate_file(project / "resolved.yaml").values) == spec_hash(want.values)
    assert f"spec_hash {spec_hash(want.values)}" in result.output.splitlines()[0]


def test_print_reports_problems_like_validate(project: Path) -> None:
    result = CliRunner().invoke(app, ["validate", "specs/wide.yaml", "--set", "train.lr=-1", "--print"])
    assert result.exit_code == 1 and "lr" in result.output and "specgrad:" not in result.output


def test_print_and_json_together_is_a_usage_error(project: Path) -> None:
    result = CliRunner().invoke(app, ["validate", "specs/wide.yaml", "--print", "--json"])
    assert result.exit_code == 2 and "--print and --json" in result.output
