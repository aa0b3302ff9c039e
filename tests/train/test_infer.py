"""Column kinds read from a csv's cells (numeric, categorical, text, binary, id, empty) and the widths `input.shape:
auto` and `out: auto` take from csv and npz data: the columns auto chooses, the numbers written into the resolved spec,
the round trip train -> run -> evaluate from the run folder, and an old spec's inputs unchanged."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.train.data import Dialect, column_kinds, data_widths, load_data

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def table(n: int = 30, extra: str = "") -> str:
    """id (counting up), x (numbers), color (3 repeating words), flag (yes/no), note (free text), kind (a text label);
    `extra` is added to every row's end (a column named in the header by the caller)."""
    lines = ["id,x,color,flag,note,kind"]
    for i in range(n):
        note = "plain" if i % 2 else f"bottle {i}"
        lines.append(f"{100 + i},{i * 0.37 % 5:.3f},{('red', 'green', 'blue')[i % 3]},{('yes', 'no')[i % 2]},{note},"
                     f"{('a', 'b')[i % 2]}")  # fmt: skip
    return "\n".join(lines) + "\n"


def spec(folder: Path, shape: str = "auto", out: str = "auto", data: str = "", text: str | None = None,
         loss: str = "cross_entropy") -> Path:  # fmt: skip
    (folder / "d.csv").write_text(table() if text is None else text)
    path = folder / "spec.yaml"
    path.write_text(textwrap.dedent(f"""\
        specgrad: 1
        name: infer
        input: {{shape: {shape}}}
        model:
          - linear: 8
          - relu
          - linear: {out}
        train: {{loss: {loss}, steps: 4}}
        data:
          source: csv
          path: d.csv
          target: kind
          batch_size: 4
        """) + textwrap.indent(textwrap.dedent(data), "  "))  # fmt: skip
    return path


def kinds_of(text: str, target: str = "kind") -> dict[str, str]:
    lines = [(i + 2, line.split(",")) for i, line in enumerate(text.splitlines()[1:])]
    return {k: v.kind for k, v in column_kinds(lines, text.splitlines()[0].split(","), target, Dialect()).items()}


# *** kinds ***


def test_kinds_of_a_mixed_table() -> None:
    assert kinds_of(table()) == {"id": "id", "x": "numeric", "color": "categorical", "flag": "binary", "note": "text",
                                 "kind": "target"}  # fmt: skip


@pytest.mark.parametrize("cells,kind", [
    (["7", "3", "5", "4", "6"], "id"),  # whole numbers counting up, in any order
    (["1", "3", "5", "7", "9"], "numeric"),  # distinct, but not counting up: a measurement
    (["u1", "u2", "u3"], "id"),
    (["u1", "u2"], "binary"),  # two rows: too few to call an ID
    (["", "NA", "?"], "empty"),
    (["0", "1", "1", "0"], "binary"),
    (["1.5", "2.5", "x", "3.5"], "numeric"),  # a stray word in numbers is a typo, reported by load_data
    (["1", "2", "", "3"], "numeric"),  # a missing cell: not a distinct value in every row
])  # fmt: skip
def test_kind_edges(cells: list[str], kind: str) -> None:
    text = "c,kind\n" + "".join(f"{c},a\n" for c in cells)
    assert kinds_of(text)["c"] == kind


def test_few_whole_values_stay_numbers_and_are_flagged() -> None:
    text = "rooms,kind\n" + "".join(f"{1 + i % 4},a\n" for i in range(40))
    lines = [(i + 2, line.split(",")) for i, line in enumerate(text.splitlines()[1:])]
    k = column_kinds(lines, ["rooms", "kind"], "kind", Dialect())["rooms"]
    assert (k.kind, k.few, k.distinct) == ("numeric", True, 4)


# *** input.shape: auto and out: auto ***


def test_auto_chooses_the_columns_and_the_widths(tmp_path: Path) -> None:
    s = validate_file(spec(tmp_path), widths=data_widths)
    data = s.values["data"]
    assert data["features"] == ["x", "color", "flag"] and data["categorical"] == {"color": "one_hot",
                                                                                   "flag": "one_hot"}  # fmt: skip
    assert s.inputs["input"][0] == (6,) and s.steps[-1].out_shape == (2,)
    assert s.resolved[0].startswith("input.shape: auto -> [6] (") and "left out: id, note" in s.resolved[0]
    assert s.resolved[1] == "out: auto -> 2 (2 classes in column 'kind')"
    ds = load_data(s)
    assert ds.x_train.shape[1] == 6 and ds.num_classes == 2


def test_auto_uses_the_features_given_and_notes_an_id(tmp_path: Path) -> None:
    s = validate_file(spec(tmp_path, data="features: [id, x]\n"), widths=data_widths)
    assert s.values["data"]["features"] == ["id", "x"] and s.inputs["input"][0] == (2,)
    ds = load_data(s)
    assert ds.table is not None and ds.table.kinds["id"].kind == "id"


def test_out_auto_alone_keeps_the_input_as_written(tmp_path: Path) -> None:
    text = "a,b,kind\n" + "".join(f"{i},{i % 7},{i % 3}\n" for i in range(30))
    s = validate_file(spec(tmp_path, shape="[2]", text=text, data="task: classify\n"), widths=data_widths)
    assert s.inputs["input"][0] == (2,) and s.steps[-1].out_shape == (3,) and s.values["data"]["features"] is None


@pytest.mark.parametrize("loss,want", [("mse", 1), ("binary_cross_entropy", 1)])
def test_out_auto_is_one_for_a_regression_and_a_logit(tmp_path: Path, loss: str, want: int) -> None:
    labels = "".join(f"{i},{i % 2}\n" for i in range(30))
    s = validate_file(spec(tmp_path, shape="[1]", text="a,kind\n" + labels, loss=loss), widths=data_widths)
    assert s.steps[-1].out_shape == (want,)


def test_a_one_row_file_is_a_located_problem_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as e:
        load_data(validate_file(spec(tmp_path, text="id,x,kind\n1,2.5,a\n"), widths=data_widths))
    assert all(p.loc is not None for p in e.value.problems)


def test_an_id_column_in_a_spec_with_a_written_shape_hints_to_leave_it_out(tmp_path: Path) -> None:
    text = "id,a,kind\n" + "".join(f"{i + 1},{i % 5 * 0.5},{i % 2}\n" for i in range(20))
    with pytest.raises(SpecError) as e:
        load_data(validate_file(spec(tmp_path, shape="[1]", out="2", text=text, data="task: classify\n")))
    (p,) = [p for p in e.value.problems if "input's shape" in p.message]
    assert "'id' looks like an ID" in p.hint and "list the other columns in data.features (the input is then [1])" \
        in p.hint and "input.shape: auto" in p.hint and "set the input's shape" not in p.hint  # fmt: skip


def test_an_old_spec_keeps_its_exact_inputs(tmp_path: Path) -> None:
    """No auto: every column but the target is read, the id column too, as before column kinds existed."""
    text = "id,a,kind\n" + "".join(f"{i + 1},{i % 5 * 0.5},{i % 2}\n" for i in range(20))
    ds = load_data(
        validate_file(spec(tmp_path, shape="[2]", out="2", text=text, data="task: classify\nnormalize: false\n"))
    )
    assert ds.columns is not None and ds.columns.features == ("id", "a")
    assert sorted(np.concatenate([ds.x_train, ds.x_valid])[:, 0].tolist()) == list(range(1, 21))


def test_npz_widths(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", x=rng.normal(size=(40, 3, 4)).astype(np.float32), y=np.arange(40) % 5)
    (tmp_path / "spec.yaml").write_text("specgrad: 1\nname: n\ninput: {shape: auto}\nmodel: [flatten, {linear: auto}]"
                                        "\ndata: {source: npz, path: d.npz, batch_size: 4}\n")  # fmt: skip
    s = validate_file(tmp_path / "spec.yaml", widths=data_widths)
    assert s.inputs["input"][0] == (3, 4) and s.steps[-1].out_shape == (5,)
    assert load_data(s).num_classes == 5


def test_npz_without_x_is_an_error_at_the_path(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", y=np.arange(4))
    (tmp_path / "spec.yaml").write_text("specgrad: 1\nname: n\ninput: {shape: auto}\nmodel: [{linear: 2}]\n"
                                        "data: {source: npz, path: d.npz}\n")  # fmt: skip
    with pytest.raises(SpecError) as e:
        validate_file(tmp_path / "spec.yaml", widths=data_widths)
    assert [(p.loc.line, "no array named 'x'" in p.message) for p in e.value.problems] == [(5, True)]


def test_images_take_no_auto(tmp_path: Path) -> None:
    (tmp_path / "imgs").mkdir()
    (tmp_path / "spec.yaml").write_text("specgrad: 1\nname: n\ninput: {shape: auto}\nmodel: [flatten, {linear: 2}]\n"
                                        "data: {source: images, path: imgs}\n")  # fmt: skip
    with pytest.raises(SpecError) as e:
        validate_file(tmp_path / "spec.yaml", widths=data_widths)
    assert [str(p).split(": error: ")[1].split("\n")[0] for p in e.value.problems] == [
        "input.shape is auto, which is taken from csv and npz data; source images: the images are resized to the "
        "shape written"]  # fmt: skip
    assert e.value.problems[0].loc.line == 3


# *** the round trip: the resolved spec holds the numbers ***


def test_train_run_evaluate_from_the_run_folder_without_the_data(tmp_path: Path) -> None:
    path = spec(tmp_path)
    got = runner.invoke(app, ["train", str(path), "--out", str(tmp_path / "runs")])
    assert got.exit_code == 0, got.output
    run = tmp_path / "runs" / "infer-1"
    resolved = yaml.safe_load((run / "spec.resolved.yaml").read_text())
    assert resolved["input"]["shape"] == [6] and resolved["model"][-1] == {"linear": 2}
    assert resolved["data"]["features"] == ["x", "color", "flag"]
    (tmp_path / "in.csv").write_text("x,color,flag\n1.5,red,no\n")
    before = runner.invoke(app, ["evaluate", str(run), "--json", "--allow-outside"])
    assert before.exit_code == 0, before.output
    (tmp_path / "d.csv").rename(tmp_path / "gone.csv")  # NOTE: run and export need no data for the widths
    out = runner.invoke(app, ["run", str(run), "--input", str(tmp_path / "in.csv"), "--json"])
    assert out.exit_code == 0, out.output
    refused = runner.invoke(app, ["run", str(path), "--weights", str(run / "model.safetensors"), "--input",
                                  str(tmp_path / "in.csv")])  # fmt: skip
    assert refused.exit_code == 1 and "spec.yaml:3:16: error: input.shape is auto" in refused.output
    assert "give the run folder instead of the spec file" in refused.output


def test_auto_with_no_usable_column_says_so_at_the_shape(tmp_path: Path) -> None:
    text = "id,note,kind\n" + "".join(f"{i + 1},words {i},{'ab'[i % 2]}\n" for i in range(10))
    with pytest.raises(SpecError) as e:
        validate_file(spec(tmp_path, text=text), widths=data_widths)
    (p,) = e.value.problems
    assert (p.loc.line, p.loc.col) == (3, 16) and "has no column to feed the model" in p.message
    assert p.hint == "list the columns to use in data.features"


def test_an_auto_spec_extended_and_set_from_the_command_line(tmp_path: Path) -> None:
    path = spec(tmp_path, shape="[3]", out="2")
    s = validate_file(path, ["input.shape=auto", "model.2.linear=auto"], widths=data_widths)
    assert s.inputs["input"][0] == (6,) and s.steps[-1].out_shape == (2,)


def test_distinct_whole_numbers_are_an_id_when_nearly_consecutive_or_named_so() -> None:
    """A numbering with rows deleted is an ID; so are scattered distinct whole numbers under an ID-like header
    (customer_id, orderId); scattered distinct whole numbers under another name (a price) stay numbers."""
    rng = np.random.default_rng(0)
    gap = [i for i in range(1, 42) if i != 17]
    scattered = rng.choice(np.arange(10_000, 99_999), 40, replace=False)
    rows = [f"{g},{s},{s},{s},{'ab'[g % 2]}" for g, s in zip(gap, scattered)]
    got = kinds_of("\n".join(["id,customer_id,orderId,price,kind", *rows]))
    assert got == {"id": "id", "customer_id": "id", "orderId": "id", "price": "numeric", "kind": "target"}


def test_the_id_hint_gives_the_width_without_each_id_columns_own_width(tmp_path: Path) -> None:
    """A text ID one-hot would be 40 values wide: leaving it out leaves the input 1 wide, not 40 - 1."""
    text = "a,b,kind\n" + "".join(f"{i}x,{i % 7},{'ab'[i % 2]}\n" for i in range(40))
    with pytest.raises(SpecError) as e:
        load_data(validate_file(spec(tmp_path, shape="[2]", out="2", text=text)))
    assert "(the input is then [1])" in str(e.value), str(e.value)


def test_a_fill_for_a_column_auto_leaves_out_is_an_error_at_its_key(tmp_path: Path) -> None:
    """The resolved spec never fills a column it leaves out (validate would refuse the run folder): said at the key."""
    path = spec(tmp_path, data="missing_columns: {note: {fill: none}}\n")
    with pytest.raises(SpecError) as e:
        validate_file(path, widths=data_widths)
    (problem,) = e.value.problems
    assert problem.loc is not None and problem.loc.line == 14
    assert "fills the column 'note', which input.shape: auto leaves out (free text" in str(problem)


def test_a_misspelt_column_in_missing_columns_is_named_with_the_one_meant(tmp_path: Path) -> None:
    """As data.categorical's: without data.features, against the header (auto or not); with it, against the features."""
    text = "alc,acid,kind\n" + "".join(f"{i % 5}.5,{'' if i == 3 else i % 3},{'ab'[i % 2]}\n" for i in range(40))
    for shape, features in (("auto", ""), ("[2]", ""), ("[2]", "features: [alc, acid]\n")):
        path = spec(tmp_path, shape=shape, out="2", text=text, data=features + "missing_columns: {acdi: median}\n")
        with pytest.raises(SpecError) as e:
            load_data(validate_file(path, widths=data_widths))
        first = e.value.problems[0]
        assert "'acdi'" in str(first) and "did you mean 'acid'" in str(first), str(e.value)
        assert first.loc is not None and first.loc.file == str(path), str(e.value)


def test_a_column_the_spec_calls_categorical_is_kept_by_auto(tmp_path: Path) -> None:
    """auto leaves free text out, unless data.categorical names the column: the user says it holds categories."""
    text = "tag,x,kind\n" + "".join(f"t{i % 3 if i % 4 else i},{i % 7 * 0.5},{'ab'[i % 2]}\n" for i in range(60))
    assert kinds_of(text)["tag"] == "text"
    resolved = validate_file(spec(tmp_path, text=text, data="categorical: {tag: one_hot}\n"), widths=data_widths)
    assert "tag" in resolved.values["data"]["features"]
