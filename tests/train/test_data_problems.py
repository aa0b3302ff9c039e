"""Every problem of a spec with its data in one run, sorted by place, each caused by a spec key at that key's line
(the data file's place as context): load_data, `specgrad validate` (text and --json) and `specgrad train`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.train.data import load_data

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]

# NOTE: 178 wines as the UCI file has them: two numbers, a colour in words and a cultivar (a, b or c)
WINE = "alcohol,acidity,color,cultivar\n" + "".join(
    f"{12 + i % 7 / 10:.1f},{3 + i % 5 / 10:.1f},{('red', 'white', 'rose')[i % 3]},{'abc'[i % 3 if i % 4 else 1]}\n"
    for i in range(178)
)
# five independent mistakes: color is text but not categorical; input.shape 9 (alcohol + acidity + 3 colours = 5);
# mse on class labels; 4 outputs for 3 cultivars; a batch of 500 from 142 training rows
BAD = """\
specgrad: 1
name: wine
input: {shape: [9]}
model:
  - linear: 16
  - relu
  - linear: 4
data:
  source: csv
  path: wine.csv
  target: cultivar
  batch_size: 500
train:
  loss: mse
"""


def fixed(categorical: str = "  categorical: {color: one_hot}\n") -> str:
    """BAD with its five mistakes put right (`categorical` is the data line that makes color categorical)."""
    return BAD.replace("[9]", "[5]").replace("linear: 4", "linear: 3").replace("500", "32").replace(
        "mse", "cross_entropy").replace("  target: cultivar\n", "  target: cultivar\n" + categorical)  # fmt: skip


def write(folder: Path, spec: str, csv: str = WINE) -> Path:
    (folder / "wine.csv").write_text(csv)
    (path := folder / "wine.yaml").write_text(spec)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_data(validate_file(path))
    return [str(p) for p in e.value.problems]


def expected(path: Path) -> list[str]:
    csv = path.parent / "wine.csv"
    return [
        f"{path}:3:16: error: data.features gives 3 columns (alcohol, acidity, color), shape [3] per example, but the "
        "input's shape is [9]",
        f"{path}:7:5: error: the model's output has 4 values per example, one per class, but the classes in column "
        "'cultivar' of wine.csv hold 3 classes (a, b, c)\n  hint: set the out of this last layer to 3",
        f"{path}:12:15: error: batch_size 500 is more than the training split has: the 178 data rows of wine.csv with "
        "valid_split 0.2 leave 142 training examples, and training uses full batches only (wine.csv:179:1)\n  hint: "
        "lower data.batch_size or data.valid_split, or add examples",
        f"{path}:14:9: error: train.loss is mse, but the classes in column 'cultivar' of wine.csv are class labels, "
        "which cross_entropy learns\n  hint: use loss: cross_entropy",
        f"{csv}:1:3: error: column 'color' holds text ('red', 'white', 'rose', ...), not numbers\n  hint: to feed it "
        "to the model as categories, add it to data.categorical, e.g. categorical: {color: one_hot}; to leave it out, "
        "list the other columns in data.features",
    ]


def test_five_independent_mistakes_in_one_run(tmp_path: Path) -> None:
    path = write(tmp_path, BAD)
    found, want = problems(path), expected(path)
    # NOTE: the width is the one the hint for color makes it: 2 numbers + 3 colours, one-hot
    assert found[0].startswith(want[0].replace("data.features gives 3 columns (alcohol, acidity, color), shape [3] per "
                                               "example", "the columns give 2 numeric columns (alcohol, acidity) + "
                                               "color (3 values) = 5 values per example"))  # fmt: skip
    assert "(with 'color' one-hot encoded, as data.categorical would encode it)\n  hint: set the input's shape to [5]" \
        in found[0]  # fmt: skip
    assert found[1:] == want[1:]


def test_validate_prints_each_problem_once_sorted_and_as_json(tmp_path: Path) -> None:
    path = write(tmp_path, BAD)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    heads = [line for line in result.output.splitlines() if ": error: " in line]
    assert len(heads) == 5 and len(set(heads)) == 5
    assert [h.split(": error: ")[0] for h in heads] == [f"{path}:3:16", f"{path}:7:5", f"{path}:12:15",
                                                        f"{path}:14:9", f"{tmp_path / 'wine.csv'}:1:3"]  # fmt: skip
    out = json.loads(runner.invoke(app, ["validate", str(path), "--json"]).output)
    assert out["valid"] is False and [(e["file"], e["line"], e["col"]) for e in out["errors"]] == [
        (str(path), 3, 16), (str(path), 7, 5), (str(path), 12, 15), (str(path), 14, 9),
        (str(tmp_path / "wine.csv"), 1, 3)]  # fmt: skip
    assert [set(e) for e in out["errors"]] == [{"file", "line", "col", "message", "hint"}] * 5
    assert out["errors"][2]["message"].endswith("(wine.csv:179:1)")


def test_train_prints_every_problem_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, BAD)
    result = runner.invoke(app, ["train", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert [line for line in result.output.splitlines() if ": error: " in line] == [
        line for line in runner.invoke(app, ["validate", str(path)]).output.splitlines() if ": error: " in line
    ]


def test_fixing_them_leaves_a_valid_spec(tmp_path: Path) -> None:
    ds = load_data(validate_file(write(tmp_path, fixed())))
    assert ds.x_train.shape == (142, 5) and ds.num_classes == 3


def test_a_misspelt_target_is_at_its_key_with_did_you_mean(tmp_path: Path) -> None:
    path = write(tmp_path, BAD.replace("target: cultivar", "target: cultvar"))
    found = problems(path)
    assert found[0] == (f"{path}:11:11: error: data.target names the column 'cultvar', but wine.csv has no such column "
                        "(wine.csv:1:1)\n  hint: did you mean 'cultivar'? the header has: alcohol, acidity, color, "
                        "cultivar")  # fmt: skip
    # NOTE: without a target the rows, the split and the task are unknown, and so are the default features (every
    # column but the target): nothing else is checked
    assert len(found) == 1
    path = write(tmp_path, BAD.replace("target: cultivar", "target: cultvar\n  features: [alcohol, color]"))
    found = problems(path)  # NOTE: listed features are still checked: color is text
    assert len(found) == 2 and found[1].startswith(f"{tmp_path / 'wine.csv'}:1:3: error: column 'color' holds text")


def test_a_misspelt_feature_is_at_its_item(tmp_path: Path) -> None:
    data = "  features: [alcohol, acidty, color]\n"
    path = write(
        tmp_path, BAD.replace("  batch_size: 500\n", data).replace("[9]", "[5]").replace("mse", "cross_entropy")
    )
    found = problems(path)
    # NOTE: the features are not what the spec means, so the input's width is not checked; the target's checks are,
    # and so are the listed columns' contents
    assert [p.split(": error: ")[0] for p in found] == [f"{path}:7:5", f"{path}:12:23", f"{tmp_path / 'wine.csv'}:1:3"]
    assert found[1] == (f"{path}:12:23: error: data.features names the column 'acidty', but wine.csv has no such "
                        "column (wine.csv:1:1)\n  hint: did you mean 'acidity'? the header has: alcohol, acidity, "
                        "color, cultivar")  # fmt: skip
    assert not any("input's shape" in p for p in found)


def test_a_misspelt_categorical_key_is_at_that_key(tmp_path: Path) -> None:
    path = write(tmp_path, fixed("  categorical: {colour: one_hot}\n"))
    found = problems(path)
    assert found[0] == (f"{path}:12:17: error: data.categorical names the column 'colour', but wine.csv has no such "
                        "column (wine.csv:1:1)\n  hint: did you mean 'color'? the header has: alcohol, acidity, color, "
                        "cultivar")  # fmt: skip
    assert len(found) == 2 and found[1].startswith(f"{tmp_path / 'wine.csv'}:1:3: error: column 'color' holds text")


def test_a_test_file_column_stays_at_its_header(tmp_path: Path) -> None:
    path = write(tmp_path, fixed("  features: [alcohol, acidity]\n  test_path: other.csv\n").replace("[5]", "[2]"))
    (tmp_path / "other.csv").write_text("alcohol,cultivar\n12.1,a\n")
    with pytest.raises(SpecError) as e:
        load_data(validate_file(path), held="test")
    assert str(e.value.problems[0]).startswith(f"{tmp_path / 'other.csv'}:1:1: error: data.features names the "
                                                "column 'acidity', but other.csv has no such column\n")  # fmt: skip


def test_a_cell_problem_does_not_hide_the_loss(tmp_path: Path) -> None:
    csv = WINE.replace("\n12.3,3.3,red,a\n", "\n12.3.,3.3,red,a\n", 1)
    found = problems(write(tmp_path, fixed().replace("cross_entropy", "mse"), csv))
    assert [p.split(": error: ")[0].rsplit("/", 1)[-1] for p in found] == ["wine.yaml:15:9", "wine.csv:5:1"]
    assert "train.loss is mse" in found[0] and "row 5, column 'alcohol': '12.3.' is not a number" in found[1]


def test_a_target_cell_problem_does_not_hide_the_loss(tmp_path: Path) -> None:
    csv = "a,y\n" + "".join(f"{i},{i * 1.5}\n" for i in range(20)) + "3,inf\n"
    path = write(tmp_path, "specgrad: 1\nname: r\ninput: {shape: [1]}\nmodel: [{linear: 1}]\n"
                 "data: {source: csv, path: wine.csv, target: y, batch_size: 4}\n", csv)  # fmt: skip
    found = problems(path)  # NOTE: no train: section, so cross_entropy, the default, on numbers
    assert [p.split(": error: ")[0].rsplit("/", 1)[-1] for p in found] == ["wine.yaml:5:45", "wine.csv:22:2"]
    assert "train.loss is cross_entropy (the default)" in found[0] and "'inf' is not a finite number" in found[1]


def test_npz_input_shape_and_loss_together(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x=np.zeros((20, 3), np.float32), y=np.arange(20) % 3)
    path = tmp_path / "n.yaml"
    path.write_text("specgrad: 1\nname: n\ninput: {shape: [2]}\nmodel: [{linear: 4}]\n"
                    "data: {source: npz, path: d.npz, batch_size: 40}\ntrain: {loss: mse}\n")  # fmt: skip
    found = problems(path)
    assert [p.split(": error: ")[0] for p in found] == [f"{path}:3:16", f"{path}:4:9", f"{path}:5:46",
                                                        f"{path}:6:15"]  # fmt: skip
    assert "shape [3]" in found[0] and "4 values per example" in found[1] and "batch_size 40" in found[2]
    assert "train.loss is mse" in found[3]


def test_mse_on_labels_past_int32_says_both(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x=np.zeros((12, 2)), y=np.array([0, 1, 2] * 3 + [2**40, 0, 1]))
    path = tmp_path / "n.yaml"
    path.write_text("specgrad: 1\nname: n\ninput: {shape: [2]}\nmodel: [{linear: 3}]\n"
                    "data: {source: npz, path: d.npz, batch_size: 2}\ntrain: {loss: mse}\n")  # fmt: skip
    found = problems(path)
    assert "out of range of int32 class labels" in found[0] and "train.loss is mse" in found[1] and len(found) == 2


def test_metric_problems_come_together(tmp_path: Path) -> None:
    path = write(tmp_path, fixed() + "  metrics: [auc, top5]\n  class_weights: {a: 1, z: 2}\n")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 1
    heads = [line for line in result.output.splitlines() if ": error: " in line]
    assert len(heads) == 3, result.output
    assert "auc is the area under the ROC curve" in result.output and "top5 counts the label" in result.output
    assert "train.class_weights names the class 'z'" in result.output


def test_the_output_docs_spec_md_shows_is_true(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shown = re.search(r"```\n\$ specgrad validate wine.yaml\n(.*?)```", (ROOT / "docs" / "spec.md").read_text(), re.S)
    assert shown is not None
    monkeypatch.chdir(tmp_path)
    write(Path("."), BAD)
    result = runner.invoke(app, ["validate", "wine.yaml"], terminal_width=1000)
    assert result.exit_code == 1 and result.output == shown.group(1)
