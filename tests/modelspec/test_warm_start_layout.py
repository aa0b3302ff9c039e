"""init.from a run that read its data laid out otherwise (issue 32, round 1 attack): the weights' names and shapes
agree, but the run's columns (their order, a categorical column's categories) or its classes (their order, which
there are) differ from the new spec's data, so the first or last layer's weights would meet other values. Refused at
the init.from line, naming what differs; the same layout still loads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_state_dict, safe_load
from specgrad.train.trainer import Trainer

runner = CliRunner()
HEAD = "specgrad: 1\nname: NAME\ninput: {shape: [WIDTH]}\nmodel: [{linear: 4}, relu, {linear: 2}]\n"


def _project(tmp_path: Path, region: tuple[str, ...] = ("east", "north", "south"), labels: str = "no,yes") -> None:
    """c.csv: two numbers, a region (one of `region`) and a label (one of `labels`), 48 rows."""
    rng = np.random.default_rng(5)
    names = labels.split(",")
    rows = [f"{rng.random():.4f},{rng.random():.4f},{region[i % 3]},{names[i % 2]}" for i in range(48)]
    (tmp_path / "c.csv").write_text("a,b,region,label\n" + "\n".join(rows) + "\n")


def _spec(tmp_path: Path, name: str, data: str, width: int = 2, init: bool = True) -> Path:
    text = HEAD.replace("NAME", name).replace("WIDTH", str(width))
    text += f"data: {{source: csv, path: c.csv, target: label, batch_size: 8, {data}}}\ntrain: {{epochs: 1}}\n"
    path = tmp_path / f"{name}.yaml"
    path.write_text(text + ("init: {from: runs/src-1}\n" if init else ""))
    return path


def _train_source(tmp_path: Path, data: str, width: int = 2) -> None:
    path = _spec(tmp_path, "src", data, width, init=False)
    result = runner.invoke(app, ["train", str(path), "--out", str(tmp_path / "runs"), "--device", "CPU"])
    assert result.exit_code == 0, result.output


def _refused(path: Path, *said: str) -> None:
    """validate exits 1 at the init.from line (line 7, the last), naming `said`; training refuses it the same way."""
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 1, result.output
    assert f"{path.name}:7:" in result.output and "init: runs/src-1 was trained with" in result.output, result.output
    for text in said:
        assert text in result.output, result.output
    with pytest.raises(SpecError) as e:
        Trainer.create(validate_file(str(path)))
    assert e.value.problems[0].loc.line == 7 and said[0] in e.value.problems[0].message


def test_columns_in_another_order_are_refused(tmp_path: Path) -> None:
    _project(tmp_path)
    _train_source(tmp_path, "features: [a, b]")
    path = _spec(tmp_path, "new", "features: [b, a]")
    _refused(path, "its columns in another order", 'the run read "a", "b"; this spec\'s data reads "b", "a"',
             "0.weight")  # fmt: skip


def test_a_category_added_and_removed_is_refused(tmp_path: Path) -> None:
    """One category gone and another new: the one_hot width is the same, the positions are not."""
    _project(tmp_path, ("east", "north", "south"))
    _train_source(tmp_path, "features: [a, region], categorical: {region: one_hot}", width=4)
    _project(tmp_path, ("east", "south", "west"))
    path = _spec(tmp_path, "new", "features: [a, region], categorical: {region: one_hot}", width=4)
    _refused(path, 'other categories of column "region"', 'added: "west"; removed: "north"')


def test_classes_in_another_order_are_refused(tmp_path: Path) -> None:
    """Whole-number labels named by data.class_names: the same names in another order score the other class."""
    _project(tmp_path, labels="0,1")
    _train_source(tmp_path, "features: [a, b], task: classify, class_names: [no, yes]")
    path = _spec(tmp_path, "new", "features: [a, b], task: classify, class_names: [yes, no]")
    _refused(path, "its classes in another order", "2.weight, 2.bias")


def test_numbered_classes_given_names_load(tmp_path: Path) -> None:
    """data.class_names names whole-number labels in their order: the run's classes 0 and 1 are no and yes."""
    _project(tmp_path, labels="0,1")
    _train_source(tmp_path, "features: [a, b], task: classify")
    result = runner.invoke(app, ["validate", str(_spec(tmp_path, "new", "features: [a, b], task: classify, "
                                                       "class_names: [no, yes]"))])  # fmt: skip
    assert result.exit_code == 0 and "init: 4 weights from runs/src-1" in result.output, result.output


def test_other_classes_are_refused(tmp_path: Path) -> None:
    _project(tmp_path, labels="cat,dog")
    _train_source(tmp_path, "features: [a, b]")
    _project(tmp_path, labels="cat,emu")
    _refused(_spec(tmp_path, "new", "features: [a, b]"), "other classes", '"cat", "dog"')


def test_the_same_layout_loads(tmp_path: Path) -> None:
    """The run's own columns, categories and classes: every weight starts from the run's."""
    _project(tmp_path)
    data = "features: [a, b, region], categorical: {region: one_hot}"
    _train_source(tmp_path, data, width=5)
    path = _spec(tmp_path, "new", data, width=5)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0 and "init: 4 weights from runs/src-1" in result.output, result.output
    trainer = Trainer.create(validate_file(str(path)))
    run = safe_load(str(tmp_path / "runs/src-1/model.safetensors"))
    model = get_state_dict(trainer.model)
    assert sorted(model) == sorted(run)
    for k, v in run.items():
        assert np.array_equal(model[k].numpy(), v.numpy()), k


def test_validate_without_the_data_says_it_is_checked_at_train(tmp_path: Path) -> None:
    from specgrad.cli.validate import init_line

    _project(tmp_path)
    _train_source(tmp_path, "features: [a, b]")
    line = init_line(validate_file(str(_spec(tmp_path, "new", "features: [b, a]"))), data_read=False)
    assert line is not None and "checked against the data at train" in line
