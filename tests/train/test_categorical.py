"""Categorical csv columns (data.categorical): one_hot and index encodings with the training split's vocabulary,
saved with the weights, used by `run` and by a resumed run; every mistake a located error."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.datasets import split
from specgrad.modelspec.contract import Columns, ContractError, contract_from_meta
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import safe_load_metadata
from specgrad.train.data import load_data

pytestmark = pytest.mark.xdist_group("categorical")  # NOTE: on one worker: one training run read by many tests

runner = CliRunner()
COLORS, CITIES = ("red", "green", "blue"), ("Berlin", "Paris", "Rome", "Oslo")


def table(folder: Path, n: int = 60, name: str = "d.csv") -> Path:
    """size (a number), color and city (categories), price (a regression target): every category in every split."""
    lines = ["size,color,city,price"]
    for i in range(n):
        color, city = COLORS[i % 3], CITIES[i % 4]
        lines.append(f"{1 + i % 7},{color},{city},{(1 + i % 7) * 2 + COLORS.index(color) + 3 * CITIES.index(city)}")
    (folder / name).write_text("\n".join(lines) + "\n")
    return folder / name


def spec(folder: Path, data: str, shape: str = "[8]", dtype: str = "float32", model: str = "[{linear: 1}]",
         train: str = "{loss: mse, steps: 4}") -> Path:  # fmt: skip
    """A spec whose data section (line 6 on) is `data`."""
    head = f"specgrad: 1\nname: cat\ninput: {{shape: {shape}, dtype: {dtype}}}\nmodel: {model}\ntrain: {train}\ndata:\n"
    path = folder / "spec.yaml"
    path.write_text(head + textwrap.indent(textwrap.dedent(data), "  "))
    return path


ONE_HOT = """\
source: csv
path: d.csv
target: price
categorical: {color: one_hot, city: one_hot}
batch_size: 8
"""


def messages(path: Path, overrides: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_data(validate_file(path, overrides))
    return [str(p) for p in e.value.problems]


def validate_messages(path: Path) -> list[str]:
    with pytest.raises(SpecError) as e:
        validate_file(path)
    return [str(p) for p in e.value.problems]


# *** one_hot ***


def test_one_hot_uses_the_sorted_training_vocabulary(tmp_path: Path) -> None:
    table(tmp_path)
    ds = load_data(validate_file(spec(tmp_path, ONE_HOT), ["data.normalize=false"]))
    assert ds.columns == Columns(
        ("size", "color", "city"),
        {"color": ("one_hot", ("blue", "green", "red")), "city": ("one_hot", ("Berlin", "Oslo", "Paris", "Rome"))},
    )
    train, _ = split(60, 0.2, 0)
    i = int(train[0])  # row i + 2 of the file: color COLORS[i % 3], city CITIES[i % 4]
    want = np.zeros(8, np.float32)
    want[0] = 1 + i % 7
    want[1 + ("blue", "green", "red").index(COLORS[i % 3])] = 1
    want[4 + ("Berlin", "Oslo", "Paris", "Rome").index(CITIES[i % 4])] = 1
    assert np.array_equal(ds.x_train[0], want)


def test_one_hot_values_stay_zero_and_one_when_numbers_are_normalized(tmp_path: Path) -> None:
    table(tmp_path)
    ds = load_data(validate_file(spec(tmp_path, ONE_HOT)))
    assert ds.stats["mean"][1:].tolist() == [0.0] * 7 and ds.stats["std"][1:].tolist() == [1.0] * 7
    assert abs(ds.x_train[:, 0].mean()) < 1e-5 and set(np.unique(ds.x_train[:, 1:])) == {0.0, 1.0}


def test_the_width_the_data_gives_is_explained(tmp_path: Path) -> None:
    table(tmp_path)
    path = spec(tmp_path, ONE_HOT, shape="[4]")
    assert messages(path) == [f"{path}:3:16: error: the columns give 1 numeric column (size) + color (3 values) + "
                              "city (4 values) = 8 values per example, but the input's shape is [4]\n"
                              "  hint: set the input's shape to [8]"]  # fmt: skip


def test_a_category_only_in_validation_rows_is_located(tmp_path: Path) -> None:
    csv = table(tmp_path)
    _, valid = split(60, 0.2, 0)
    i = int(valid[0])  # NOTE: example i is line i + 2 of the file
    lines = csv.read_text().splitlines()
    lines[i + 1] = f"3,purple,{CITIES[i % 4]},7"
    csv.write_text("\n".join(lines) + "\n")
    assert messages(spec(tmp_path, ONE_HOT)) == [
        f"{csv}:{i + 2}:2: error: row {i + 2}, column 'color': 'purple' is in validation rows only: the categories are "
        "those of the training rows, so the model never learns it\n  hint: the categories are: blue, green, red"
    ]


def test_empty_categorical_cells_are_located(tmp_path: Path) -> None:
    csv = table(tmp_path)
    csv.write_text(csv.read_text().replace("\n4,green,Oslo,", "\n4,,Oslo,", 1))
    found = messages(spec(tmp_path, ONE_HOT))
    assert len(found) == 1 and re.fullmatch(
        rf"{re.escape(str(csv))}:\d+:2: error: row \d+, column 'color' is empty\n"
        r"  hint: fill in its category, or remove the row; or let specgrad fill missing cells: data.missing: .*",
        found[0],
    ), found


def test_a_text_column_not_said_to_be_categorical_is_one_problem(tmp_path: Path) -> None:
    csv = table(tmp_path)
    # NOTE: the width is checked as the hint would make it: city one-hot (4 values) + size (7) + color (3) = 14
    path = spec(tmp_path, ONE_HOT.replace("city: one_hot", "size: one_hot"), shape="[14]")
    text = (f"{csv}:1:3: error: column 'city' holds text ('Berlin', 'Paris', 'Rome', ...), not numbers\n"
            "  hint: to feed it to the model as categories, add it to data.categorical, e.g. categorical: "
            "{city: one_hot}; to leave it out, list the other columns in data.features")  # fmt: skip
    assert messages(path) == [text]
    path = spec(tmp_path, ONE_HOT.replace("city: one_hot", "size: one_hot"), shape="[12]")
    assert messages(path) == [f"{path}:3:16: error: the columns give size (7 values) + color (3 values) + city (4 "
                              "values) = 14 values per example, but the input's shape is [12] (with 'city' one-hot "
                              "encoded, as data.categorical would encode it)\n  hint: set the input's shape to [14]",
                              text]  # fmt: skip


# *** index: codes for one embedding ***

INDEX = """\
source: csv
path: d.csv
target: price
features: [color, city]
categorical: {color: index, city: index}
batch_size: 8
"""
EMBED = "[{embedding: {vocab: 7, dim: 4}}, flatten, {linear: 1}]"


def test_index_codes_follow_one_column_after_the_other(tmp_path: Path) -> None:
    table(tmp_path)
    ds = load_data(validate_file(spec(tmp_path, INDEX, shape="[2]", dtype="int32", model=EMBED)))
    assert ds.x_train.dtype == np.int32 and ds.stats == {}
    train, _ = split(60, 0.2, 0)
    i = int(train[0])
    assert ds.x_train[0].tolist() == [("blue", "green", "red").index(COLORS[i % 3]),
                                      3 + ("Berlin", "Oslo", "Paris", "Rome").index(CITIES[i % 4])]  # fmt: skip
    assert ds.x_train[:, 0].max() == 2 and ds.x_train[:, 1].min() == 3 and ds.x_train[:, 1].max() == 6


def test_index_needs_an_embedding_with_room_for_every_code(tmp_path: Path) -> None:
    table(tmp_path)
    small = spec(tmp_path, INDEX, shape="[2]", dtype="int32", model=EMBED.replace("vocab: 7", "vocab: 5"))
    assert messages(small) == [f"{small}:4:9: error: the embedding's vocab is 5, but the index columns have 7 codes in "
                               "all: color (3) + city (4) categories, numbered one column after the other\n"
                               "  hint: set vocab to 7"]  # fmt: skip
    none = spec(tmp_path, INDEX, shape="[2]", dtype="int32", model="[flatten, {linear: 1}]")
    assert messages(none) == [f"{none}:3:16: error: index columns give codes for an embedding, but no embedding "
                              "layer reads the input 'input'\n  hint: start the model with an embedding of vocab 7 "
                              "(color (3) + city (4) categories), e.g. {embedding: {vocab: 7, dim: 8}}"]  # fmt: skip
    floats = spec(tmp_path, INDEX, shape="[2]", model=EMBED)
    assert messages(floats) == [f"{floats}:3:28: error: index columns give whole-number codes for an embedding, but "
                                "the input's dtype is float32\n  hint: use dtype int32 (the codes feed an "
                                "embedding)"]  # fmt: skip


def test_index_does_not_mix_with_numbers(tmp_path: Path) -> None:
    table(tmp_path)
    listed = spec(tmp_path, INDEX.replace("[color, city]", "[size, color, city]"), shape="[3]", dtype="int32",
                  model=EMBED)  # fmt: skip
    want = ("error: data.categorical encodes 'color' as index, a whole-number code for an embedding, so every feature "
            "must be an index column, but the features also hold size\n  hint: encode 'color' as one_hot (which "
            "mixes with numbers), or list only index columns in data.features")  # fmt: skip
    assert validate_messages(listed) == [f"{listed}:11:24: {want}"]
    header = spec(tmp_path, INDEX.replace("features: [color, city]\n", ""), shape="[3]", dtype="int32", model=EMBED)
    assert messages(header) == [f"{header}:10:24: {want}"]  # NOTE: the features are every column but the target


def test_integer_input_with_numbers_is_refused(tmp_path: Path) -> None:
    table(tmp_path)
    path = spec(tmp_path, ONE_HOT, dtype="int32")
    assert messages(path) == [f"{path}:3:28: error: source csv gives numbers with fractions and one-hot values, but "
                              "the input's dtype is int32\n  hint: use dtype float32"]  # fmt: skip


# *** the keys as written ***


def test_spec_mistakes_are_located(tmp_path: Path) -> None:
    table(tmp_path)
    typo = spec(tmp_path, ONE_HOT.replace("city: one_hot", "city: onehot"))
    assert validate_messages(typo) == [f"{typo}:10:39: error: data.categorical.city must be one of one_hot, index; got "
                                       "'onehot'\n  hint: did you mean 'one_hot'?"]  # fmt: skip
    target = spec(tmp_path, ONE_HOT.replace("city: one_hot", "price: one_hot"))
    assert validate_messages(target) == [f"{target}:10:33: error: data.categorical names the target column 'price': a "
                                         "target holding text is read as class names already\n"
                                         "  hint: remove it from categorical"]  # fmt: skip
    unlisted = spec(tmp_path, ONE_HOT + "features: [size, color]\n")
    assert validate_messages(unlisted) == [
        f"{unlisted}:10:33: error: data.categorical names the column 'city', which "
        "data.features does not list: only the model's features are encoded\n"
        "  hint: add it to data.features, or remove it from categorical"
    ]
    missing = spec(tmp_path, ONE_HOT.replace("city: one_hot", "cty: one_hot"))
    assert messages(missing)[0].startswith(  # NOTE: at the key to edit; the header's place as context
        f"{missing}:10:33: error: data.categorical names the column "
        "'cty', but d.csv has no such column (d.csv:1:1)\n  hint: did you mean 'city'?"
    )
    other = spec(tmp_path, "source: spirals\ncategorical: {x: one_hot}\n", shape="[2]", model="[{linear: 2}]",
                 train="{steps: 1}")  # fmt: skip
    assert messages(other) == [f"{other}:8:16: error: data.categorical is for the csv source, not spirals"]
    not_a_map = spec(tmp_path, ONE_HOT.replace("{color: one_hot, city: one_hot}", "[color, city]"))
    assert "data.categorical must be a mapping" in validate_messages(not_a_map)[0]


# *** the vocabulary travels with the weights ***


def test_columns_round_trip_through_the_metadata(tmp_path: Path) -> None:
    columns = Columns(("a", "b"), {"b": ("one_hot", ("x", "y"))})
    assert Columns.from_meta(columns.to_meta()) == columns
    for bad in ('{"features": ["a"]}', '{"features": ["a"], "categorical": {"z": {"encoding": "one_hot", '
                '"values": []}}}', "[1]", '{"features": ["a"], "categorical": {"a": {"encoding": "hash", '
                '"values": []}}}'):  # fmt: skip
        with pytest.raises(ContractError, match="columns"):
            Columns.from_meta(bad)
    table(tmp_path)
    valid = validate_file(spec(tmp_path, ONE_HOT))
    meta = {"task": "regress", "columns": Columns(("size",), {}).to_meta()}
    with pytest.raises(ContractError, match=r"give 1 numeric column \(size\) = 1 value per example, but the model's "
                       r"input is \[8\] of float32"):  # fmt: skip
        contract_from_meta(valid, meta)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("categorical")
    table(folder)
    path = spec(folder, ONE_HOT, model="[{linear: 8}, relu, {linear: 1}]", train="{loss: mse, steps: 20}")
    result = runner.invoke(app, ["train", str(path), "--out", str(folder / "runs")])
    assert result.exit_code == 0, result.output
    return folder / "runs" / "cat-1"


def values(output: str) -> list[float]:
    return [float(v) for v in re.findall(r"^\d+: (\S+)$", output, re.MULTILINE)]


def test_the_vocabulary_is_saved_and_run_encodes_with_it(trained: Path, tmp_path: Path) -> None:
    meta = json.loads(safe_load_metadata(trained / "model.safetensors")["columns"])
    assert meta == {
        "features": ["size", "color", "city"],
        "categorical": {
            "color": {"encoding": "one_hot", "values": ["blue", "green", "red"]},
            "city": {"encoding": "one_hot", "values": ["Berlin", "Oslo", "Paris", "Rome"]},
        },
    }
    (tmp_path / "a.csv").write_text("size,color,city\n3,red,Rome\n5,blue,Oslo\n")
    (tmp_path / "b.csv").write_text("city,id,color,size,price\nRome,1,red,3,0\nOslo,2,blue,5,0\n")  # NOTE: by name
    a = runner.invoke(app, ["run", str(trained), "--input", str(tmp_path / "a.csv")])
    b = runner.invoke(app, ["run", str(trained), "--input", str(tmp_path / "b.csv")])
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
    assert len(values(a.output)) == 2 and values(a.output) == values(b.output)
    weights = runner.invoke(app, ["run", str(trained / "spec.resolved.yaml"), "--weights",
                                  str(trained / "model.safetensors"), "--input", str(tmp_path / "a.csv")])  # fmt: skip
    assert weights.exit_code == 0 and values(weights.output) == values(a.output), weights.output


def test_run_locates_a_value_never_seen_in_training(trained: Path, tmp_path: Path) -> None:
    x = tmp_path / "x.csv"
    x.write_text("size,color,city\n3,red,Rome\n4,purple,Berln\n")
    result = runner.invoke(app, ["run", str(trained), "--input", str(x)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{x}:3:2: error: row 3, column 'color': 'purple' is not a category the model was trained with\n" \
           "  hint: the categories are: blue, green, red" in result.output  # fmt: skip
    assert f"{x}:3:3: error: row 3, column 'city': 'Berln' is not a category the model was trained with\n" \
           "  hint: did you mean 'Berlin'? the categories are: Berlin, Oslo, Paris, Rome" in result.output  # fmt: skip
    (tmp_path / "y.csv").write_text("size,colour,city\n3,red,Rome\n")
    missing = runner.invoke(app, ["run", str(trained), "--input", str(tmp_path / "y.csv")])
    assert missing.exit_code == 1 and "the model reads the columns size, color, city, but y.csv has no column " \
        "'color'" in missing.output and "did you mean 'colour'?" in missing.output  # fmt: skip


def test_a_resumed_run_refuses_a_changed_vocabulary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "copy"
    folder.mkdir()
    monkeypatch.chdir(folder)  # NOTE: the run folder's spec names ../../d.csv: inside the project root
    table(folder, n=60)
    path = spec(folder, ONE_HOT, model="[{linear: 8}, relu, {linear: 1}]", train="{loss: mse, steps: 20}")
    assert runner.invoke(app, ["train", str(path), "--out", str(folder / "runs")]).exit_code == 0
    run = folder / "runs" / "cat-1"
    same = runner.invoke(app, ["train", "--resume", str(run)])
    assert same.exit_code == 0 and "writing its final weights again" in same.output, same.output
    csv = folder / "d.csv"
    csv.write_text(csv.read_text().replace(",Oslo,", ",Bergen,"))
    changed = runner.invoke(app, ["train", "--resume", str(run)])
    assert changed.exit_code == 1 and "the data has changed" in changed.output and "columns" in changed.output


def test_index_model_trains_and_runs(tmp_path: Path) -> None:
    table(tmp_path)
    path = spec(tmp_path, INDEX, shape="[2]", dtype="int32", model=EMBED, train="{loss: mse, steps: 10}")
    result = runner.invoke(app, ["train", str(path), "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    (tmp_path / "x.csv").write_text("color,city\nred,Rome\ngreen,Oslo\n")
    out = runner.invoke(app, ["run", str(tmp_path / "runs" / "cat-1"), "--input", str(tmp_path / "x.csv")])
    assert out.exit_code == 0 and len(values(out.output)) == 2, out.output


def test_the_onnx_export_carries_the_vocabulary(trained: Path, tmp_path: Path) -> None:
    """An ONNX model takes categorical columns encoded; its metadata says how (the columns and their vocabularies)."""
    onnx = pytest.importorskip("onnx")
    result = runner.invoke(app, ["export", str(trained), "--format", "onnx", "--out", str(tmp_path / "m.onnx")])
    assert result.exit_code == 0, result.output
    props = {p.key: p.value for p in onnx.load(str(tmp_path / "m.onnx")).metadata_props}
    assert json.loads(props["columns"]) == json.loads(safe_load_metadata(trained / "model.safetensors")["columns"])


def test_validate_says_how_the_columns_make_the_input(tmp_path: Path) -> None:
    table(tmp_path)
    out = runner.invoke(app, ["validate", str(spec(tmp_path, ONE_HOT))]).output
    assert "inputs: 1 numeric column (size) + color (3 values) + city (4 values) = 8 values per example" in out, out
