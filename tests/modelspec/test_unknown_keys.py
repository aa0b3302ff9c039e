"""An unknown key anywhere (a nested section, a loss entry, a layer's or a block node's keys) is reported at its own
line with the close key first and then every key its section takes: `monitor` (Keras's word) in
train.early_stopping shows metric, patience, min_delta."""

from __future__ import annotations

from pathlib import Path

import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import CHECKPOINT, EARLY_STOPPING, validate_file

SPEC = """\
specgrad: 1
name: tiny
input: {shape: [64]}
model:
  - linear: 10
data: {source: digits}
"""


def problems(tmp_path: Path, text: str, overrides: tuple[str, ...] = ()) -> list[str]:
    (path := tmp_path / "spec.yaml").write_text(text)
    with pytest.raises(SpecError) as e:
        validate_file(path, overrides=overrides, data_files=False)
    return [str(p).replace(str(path), "spec.yaml") for p in e.value.problems]


def keys(section) -> str:
    return ", ".join(section.fields)


def test_unknown_key_in_early_stopping_lists_the_valid_keys(tmp_path: Path) -> None:
    got = problems(tmp_path, SPEC + "train:\n  early_stopping:\n    monitor: val_loss\n    patience: 3\n")
    assert got == ["spec.yaml:9:5: error: unknown key 'monitor' in train.early_stopping\n"
                   "  hint: valid keys: metric, patience, min_delta"]  # fmt: skip
    assert keys(EARLY_STOPPING).startswith("metric, patience, min_delta")


def test_a_close_key_comes_first_then_the_valid_keys(tmp_path: Path) -> None:
    got = problems(tmp_path, SPEC + "train:\n  checkpoint: {every_epoch: 2, kep: 1}\n  early_stopping: {patiense: 2}\n")
    assert got == [
        f"spec.yaml:8:16: error: unknown key 'every_epoch' in train.checkpoint\n  hint: did you mean 'every_epochs'? "
        f"valid keys: {keys(CHECKPOINT)}",
        f"spec.yaml:8:32: error: unknown key 'kep' in train.checkpoint\n  hint: did you mean 'keep'? "
        f"valid keys: {keys(CHECKPOINT)}",
        f"spec.yaml:9:20: error: unknown key 'patiense' in train.early_stopping\n  hint: did you mean 'patience'? "
        f"valid keys: {keys(EARLY_STOPPING)}",
    ]


def test_unknown_keys_of_every_kind_of_section(tmp_path: Path) -> None:
    """data.augment, a top-level section, a layer's arguments and the top level list their own keys."""
    text = SPEC.replace("data: {source: digits}", "data: {source: digits, augment: {flips: true}, shufle: false}")
    text = text.replace("linear: 10", "linear: {out: 10, bais: false}") + "trian: {}\n"
    got = problems(tmp_path, text)
    assert sorted(g.splitlines()[0] for g in got) == [
        "spec.yaml:5:23: error: unknown key 'bais' in model[0].linear",
        "spec.yaml:6:34: error: unknown key 'flips' in data.augment",
        "spec.yaml:6:48: error: unknown key 'shufle' in data",
        "spec.yaml:7:1: error: unknown key 'trian' at the top level",
    ]
    hints = {g.splitlines()[0].split("unknown key ")[1]: g.splitlines()[1] for g in got}
    assert hints["'flips' in data.augment"] == "  hint: did you mean 'flip'? valid keys: crop, flip, noise"
    assert hints["'bais' in model[0].linear"].startswith("  hint: did you mean 'bias'? valid keys: out, bias, ")
    assert hints["'trian' at the top level"].startswith("  hint: did you mean 'train'? valid keys: specgrad, name, ")
    assert "shuffle" in hints["'shufle' in data"] and "valid keys: source, path, " in hints["'shufle' in data"]


def test_unknown_key_in_a_loss_entry_and_a_block_node(tmp_path: Path) -> None:
    text = """\
specgrad: 1
name: two
inputs: {x: {shape: [4]}}
blocks:
  lin: {params: [w], graph: [{name: out, layer: linear, out: $w, from: in}]}
model:
  graph:
    - {name: a, block: lin, with: {w: 2}, repat: 2, from: x}
    - {name: b, layer: linear, out: 1, from: x}
  outputs: [a, b]
train:
  losses:
    a: {loss: cross_entropy, wieght: 2}
    b: {loss: mse}
"""
    got = problems(tmp_path, text)
    assert "spec.yaml:8:43: error: unknown key 'repat' in node 'a'\n  hint: did you mean 'repeat'? valid keys: name, " \
           "from, block, repeat, with" in got  # fmt: skip
    assert "spec.yaml:13:30: error: unknown key 'wieght' in train.losses.a\n  hint: did you mean 'weight'? valid " \
           "keys: loss, weight" in got  # fmt: skip


def test_unknown_nested_key_set_on_the_command_line(tmp_path: Path) -> None:
    got = problems(tmp_path, SPEC, ("train.early_stopping.monitor=loss",))
    assert got == ["--set train.early_stopping.monitor=loss:1:22: error: unknown key 'monitor' in "
                   "train.early_stopping\n  hint: valid keys: metric, patience, min_delta"]  # fmt: skip


def test_validate_prints_the_valid_keys(tmp_path: Path) -> None:
    (path := tmp_path / "spec.yaml").write_text(SPEC + "train: {early_stopping: {monitor: loss}}\n")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "unknown key 'monitor' in train.early_stopping" in result.output
    assert "hint: valid keys: metric, patience, min_delta" in result.output
