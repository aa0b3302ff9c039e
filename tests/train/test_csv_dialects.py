"""CSV dialects (data.delimiter, sniffed or given; data.decimal; quoted cells; a byte-order mark; thousands separators
refused) and missing values (data.missing_values, data.missing, data.missing_columns): fills computed on the training
rows, saved with the weights, located errors at the cell or the spec key."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.modelspec.contract import Columns, ContractError
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.train.data import load_data

runner = CliRunner()


def spec(folder: Path, text: str, data: str = "", shape: str = "[2]", train: str = "{loss: mse, steps: 4}",
         raw: bytes | None = None) -> Path:  # fmt: skip
    """d.csv holding `text` (or `raw` bytes), and a spec reading it with the extra data keys `data` (line 13 on)."""
    (folder / "d.csv").write_bytes(raw if raw is not None else text.encode())
    head = f"specgrad: 1\nname: dialect\ninput: {{shape: {shape}}}\nmodel: [{{linear: 1}}]\ntrain: {train}\n"
    body = "data:\n  source: csv\n  path: d.csv\n  target: y\n  batch_size: 2\n  normalize: false\n" \
        "  normalize_target: false\n"  # fmt: skip
    path = folder / "spec.yaml"
    path.write_text(head + body + textwrap.indent(textwrap.dedent(data), "  "))
    return path


def messages(path: Path) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_data(validate_file(path))
    return [str(p) for p in e.value.problems]


def spec_messages(path: Path) -> list[str]:
    with pytest.raises(SpecError) as e:
        validate_file(path)
    return [str(p) for p in e.value.problems]


def rows(n: int, sep: str, a: str = "{i}", b: str = "{j}") -> str:
    """n rows of a, b and y = a + 10 b, with `sep` between cells."""
    return "".join(sep.join([a.format(i=i), b.format(j=i % 3), str(i + 10 * (i % 3))]) + "\n" for i in range(n))


# *** dialects ***


@pytest.mark.parametrize("sep", [",", ";", "\t", "|"])
def test_the_delimiter_is_sniffed(tmp_path: Path, sep: str) -> None:
    ds = load_data(validate_file(spec(tmp_path, sep.join("aby") + "\n" + rows(20, sep))))
    assert ds.table is not None and ds.table.dialect.delimiter == sep and ds.table.dialect.sniffed
    both = np.concatenate([ds.x_train, ds.x_valid])
    assert sorted(both[:, 0].tolist()) == list(range(20))  # NOTE: every row read, two numbers each


def test_a_given_delimiter_is_used_and_a_wrong_one_names_the_key(tmp_path: Path) -> None:
    ds = load_data(validate_file(spec(tmp_path, "a;b;y\n" + rows(10, ";"), 'delimiter: ";"\n')))
    assert ds.table is not None and ds.table.dialect.delimiter == ";" and not ds.table.dialect.sniffed
    found = messages(spec(tmp_path, "a;b;y\n" + rows(10, ";"), 'delimiter: ","\nfeatures: [a, b]\n'))
    assert "d.csv has no such column" in found[0] and "set data.delimiter (',', ';', '\\t' or '|')" in found[0]
    assert "specgrad reads commas" not in "".join(found)  # NOTE: the old refusal is gone: the option exists


def test_decimal_commas_with_semicolons(tmp_path: Path) -> None:
    text = "a;b;y\n" + "".join(f"{i},5;{i % 3};{i},25\n" for i in range(10))
    ds = load_data(validate_file(spec(tmp_path, text, 'decimal: ","\n')))
    x, y = np.concatenate([ds.x_train, ds.x_valid]), np.concatenate([ds.y_train, ds.y_valid])
    assert ds.task == "regress"  # NOTE: 0,25 is a number to learn, not a class name
    assert sorted(x[:, 0].tolist()) == [i + 0.5 for i in range(10)] and sorted(y[:, 0].tolist()) == [
        i + 0.25 for i in range(10)]  # fmt: skip
    found = messages(spec(tmp_path, text.replace("3,5;", "3.5;"), 'decimal: ","\n'))
    assert found == [
        f"{tmp_path / 'd.csv'}:5:1: error: row 5, column 'a': '3.5' is not a number\n  hint: it has a "
        "decimal point, but data.decimal is ',': write it with a comma, or set data.decimal: '.'"
    ]


def test_a_decimal_comma_without_the_key_says_which_key(tmp_path: Path) -> None:
    found = messages(spec(tmp_path, "a;b;y\n1,5;2;3\n2;3;4\n3;4;5\n4;5;6\n5;6;7\n"))
    assert found == [
        f"{tmp_path / 'd.csv'}:2:1: error: row 2, column 'a': '1,5' is not a number\n  hint: it has a "
        "decimal comma: set data.decimal: ',' (the cells then separated by ';' or tabs: data.delimiter)"
    ]


def test_decimal_and_delimiter_both_commas_is_an_error_at_the_key(tmp_path: Path) -> None:
    path = spec(tmp_path, "a,b,y\n1,2,3\n", 'delimiter: ","\ndecimal: ","\n')
    assert spec_messages(path) == [f"{path}:14:12: error: data.decimal is ',' and so is data.delimiter: a cell 3,5 "
                                   "would be two cells\n  hint: set data.delimiter: ';' (or a tab), as the file "
                                   "separates its cells"]  # fmt: skip


def test_quoted_cells_and_a_byte_order_mark(tmp_path: Path) -> None:
    text = "a;b;note;y\n" + "".join(f'{i};{i % 3};"x; ""y"";\nz";{i}\n' for i in range(10))
    ds = load_data(validate_file(spec(tmp_path, "", "features: [a, b]\n", raw=b"\xef\xbb\xbf" + text.encode())))
    assert ds.table is not None and ds.table.dialect.delimiter == ";"
    assert sorted(np.concatenate([ds.x_train, ds.x_valid])[:, 0].tolist()) == list(range(10))  # NOTE: 'a', not BOM+a


@pytest.mark.parametrize(("cell", "data", "hint"), [
    ('"1,234.5"', "", "',' groups its digits in thousands, which specgrad does not read: write it without them "
     "(1234.5)"),
    ('"1,234"', "", "',' groups its digits in thousands, which specgrad does not read: write it without them (1234); "
     "if ',' is its decimal mark, set data.decimal: ','"),
    ("1 234", "", "' ' groups its digits in thousands, which specgrad does not read: write it without them (1234)"),
    ('"1.234,5"', "", "'.' groups its digits in thousands, which specgrad does not read: write it without them "
     "(1234,5); its decimal mark is ',': set data.decimal: ','"),
])  # fmt: skip
def test_thousands_separators_are_refused_at_the_cell(tmp_path: Path, cell: str, data: str, hint: str) -> None:
    text = "a,b,y\n1,2,3\n" + f"{cell},2,3\n" + "3,4,5\n" * 4
    found = messages(spec(tmp_path, text, data))
    assert found == [
        f"{tmp_path / 'd.csv'}:3:1: error: row 3, column 'a': '{cell.strip(chr(34))}' is not a number\n  hint: {hint}"
    ]


def test_thousands_in_a_decimal_comma_file(tmp_path: Path) -> None:
    text = "a;b;y\n1;2;3\n1.234,5;2;3\n" + "3;4;5\n" * 4
    found = messages(spec(tmp_path, text, 'decimal: ","\n'))
    assert found == [
        f"{tmp_path / 'd.csv'}:3:1: error: row 3, column 'a': '1.234,5' is not a number\n  hint: '.' "
        "groups its digits in thousands, which specgrad does not read: write it without them (1234,5)"
    ]


def test_dialect_keys_on_another_source_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("specgrad: 1\nname: d\ninput: {shape: [64]}\nmodel: [{linear: 10}]\n"
                    "data: {source: digits, decimal: ','}\n")  # fmt: skip
    with pytest.raises(SpecError, match="decimal"):
        load_data(validate_file(path))


# *** missing values ***

MESSY = "a,b,y\n1,2,3\n,2,3\nNA,2,3\nn/a,2,3\nNaN,2,3\n?,2,3\nNULL,2,3\n  na ,2,3\n5,6,7\n"


def test_missing_cells_are_an_error_naming_the_key_by_default(tmp_path: Path) -> None:
    found = messages(spec(tmp_path, MESSY))
    assert len(found) == 7 and all("data.missing: mean, median, mode, drop_row or {fill: VALUE}" in m for m in found)
    assert found[0].startswith(f"{tmp_path / 'd.csv'}:3:1: error: row 3, column 'a' is empty\n")
    assert found[1].startswith(f"{tmp_path / 'd.csv'}:4:1: error: row 4, column 'a' is missing ('NA')\n")
    assert "'NULL'" in found[5] and "'na'" in found[6] and not any("not a number" in m for m in found)


def test_the_missing_values_are_configurable(tmp_path: Path) -> None:
    text = "a,b,y\n1,2,3\n-,2,3\nNA,2,3\n" + "5,6,7\n" * 4
    found = messages(spec(tmp_path, text, 'missing_values: ["-"]\n'))
    assert len(found) == 2 and "row 3, column 'a' is missing ('-')" in found[0]
    assert "row 4, column 'a': 'NA' is not a number" in found[1]  # NOTE: no longer missing: the list was replaced


def fills(path: Path) -> tuple[dict, np.ndarray, np.ndarray]:
    ds = load_data(validate_file(path))
    assert ds.columns is not None
    return ds.columns.missing, ds.x_train, ds.x_valid


def test_mean_and_median_come_from_the_training_rows_only(tmp_path: Path) -> None:
    # NOTE: b is -1 exactly where a is missing, so the training rows' own values can be told apart
    text = "a,b,y\n" + "".join(f"{'NA' if i % 5 == 0 else i * i},{-1 if i % 5 == 0 else 1},{i}\n" for i in range(40))
    for how, stat in (("mean", np.mean), ("median", np.median)):
        missing, x_train, x_valid = fills(spec(tmp_path, text, f"missing: {how}\n"))
        seen = x_train[x_train[:, 1] == 1, 0].astype(np.float64)
        every = np.concatenate([seen, x_valid[x_valid[:, 1] == 1, 0]])
        assert missing["a"] == (how, repr(float(stat(seen)))) and set(missing) == {"a", "b"}
        assert how == "median" or float(missing["a"][1]) != float(stat(every))  # NOTE: validation rows would move it
        assert np.all(x_train[x_train[:, 1] == -1, 0] == np.float32(stat(seen)))
        assert np.all(x_valid[x_valid[:, 1] == -1, 0] == np.float32(stat(seen)))


def test_fill_and_drop_row_and_per_column_strategies(tmp_path: Path) -> None:
    text = "a,b,y\n" + "".join(f"{'?' if i % 4 == 0 else i},{'' if i % 6 == 0 else 2},{i}\n" for i in range(24))
    missing, x_train, x_valid = fills(spec(tmp_path, text, "missing: drop_row\nmissing_columns: {b: {fill: -7}}\n"))
    assert missing == {"a": ("drop_row", None), "b": ("fill", "-7.0")}
    x = np.concatenate([x_train, x_valid])
    assert len(x) == 18 and set(x[:, 1].tolist()) == {2.0, -7.0}  # NOTE: 6 rows with a missing 'a' left out


def test_a_categorical_column_takes_its_mode_and_a_fill_is_its_own_category(tmp_path: Path) -> None:
    colors = ["red", "red", "blue", "green", "red", ""]
    text = "a,c,y\n" + "".join(f"{i},{colors[i % 6]},{i}\n" for i in range(30))
    data = "categorical: {c: one_hot}\nmissing: mean\nvalid_split: 0\n"
    ds = load_data(validate_file(spec(tmp_path, text, data, shape="[4]")))
    assert ds.columns.missing["c"] == ("mode", "red")  # NOTE: mean names numbers; a category's default is its mode
    ds = load_data(validate_file(spec(tmp_path, text, data + "missing_columns: {c: {fill: unknown}}\n", shape="[5]")))
    assert ds.columns.categorical["c"] == ("one_hot", ("blue", "green", "red", "unknown"))
    assert ds.columns.missing["c"] == ("fill", "unknown") and ds.x_train[:, 1 + 3].sum() == 5


def test_a_missing_target_drops_its_row_and_validate_says_so(tmp_path: Path) -> None:
    text = "a,b,y\n" + "".join(f"{i},{i % 3},{'NA' if i % 5 == 0 else i}\n" for i in range(20))
    path = spec(tmp_path, text.replace("\n3,0,3\n", "\n,0,3\n"), "missing: median\n")
    ds = load_data(validate_file(path))
    assert len(ds.x_train) + len(ds.x_valid) == 16 and ds.table is not None and ds.table.no_target == 4
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "csv: delimiter ',' (sniffed), decimal '.'; missing cells: a 1, filled with the training rows' median, " \
        in result.output and "; 4 rows left out: their target is missing" in result.output  # fmt: skip


@pytest.mark.parametrize(("data", "where", "message"), [
    ("missing: meen\n", "13:12", "data.missing must be one of drop_row, mean, median, mode or {fill: VALUE}; got "
     "'meen'\n  hint: did you mean 'mean'?"),
    ("missing: {fil: 0}\n", "13:12", "data.missing must be one of drop_row, mean, median, mode or {fill: VALUE}; got "
     "a mapping (key: value lines)\n  hint: the one key is fill, e.g. {fill: 0}"),
    ("missing_columns: {y: mean}\n", "13:21", "data.missing_columns names the target column 'y': a row whose target is "
     "missing is left out, never filled\n  hint: remove it from missing_columns"),
    ("categorical: {b: one_hot}\nmissing_columns: {b: median}\n", "14:24", "data.missing_columns.b is median, but the "
     "column is categorical: categories have no median\n  hint: use mode (the most frequent category), drop_row, or "
     "{fill: VALUE}"),
    ("features: [a]\nmissing_columns: {b: mean}\n", "14:21", "data.missing_columns names the column 'b', which "
     "data.features does not list: only the model's features are filled\n  hint: add it to data.features, or remove "
     "it from missing_columns"),
])  # fmt: skip
def test_strategy_mistakes_are_at_the_spec_key(tmp_path: Path, data: str, where: str, message: str) -> None:
    path = spec(tmp_path, "a,b,y\n1,2,3\n", data)
    assert f"{path}:{where}: error: {message}" in spec_messages(path)


def test_fill_mistakes_found_against_the_data_are_at_the_spec_key(tmp_path: Path) -> None:
    path = spec(tmp_path, "a,b,y\n" + "NA,2,3\n" * 6, "missing: {fill: none}\n")
    assert messages(path) == [f"{path}:13:12: error: the column 'a' holds numbers, but its missing cells are filled "
                              "with 'none', which is not a finite number\n  hint: fill it with a number, or give it "
                              "its own strategy: data.missing_columns: {a: median}"]  # fmt: skip
    path = spec(tmp_path, "a,b,y\n" + "NA,2,3\n" * 6, "missing_columns: {a: mean}\n")
    assert messages(path) == [f"{path}:13:24: error: the column 'a' has no value in the training rows to take its "
                              "mean from\n  hint: fill it with a value, {fill: VALUE}, or leave the column out of "
                              "data.features"]  # fmt: skip


def test_every_row_left_out_is_one_error(tmp_path: Path) -> None:
    found = messages(spec(tmp_path, "a,b,y\n1,2,NA\n3,4,?\n"))
    assert found == [
        f"{tmp_path / 'spec.yaml'}:8:9: error: every row of d.csv is left out: 2 with its target "
        "missing, 0 with a missing cell in a drop_row column\n  hint: a row without its target is always left out "
        "(a target is never filled): add the targets to the file"
    ]


def test_columns_with_fills_round_trip_through_the_metadata() -> None:
    columns = Columns(("a", "c"), {"c": ("one_hot", ("x", "y"))}, {"a": ("median", "2.5"), "c": ("fill", "y")})
    assert Columns.from_meta(columns.to_meta()) == columns
    assert "missing" not in json.loads(Columns(("a",)).to_meta())  # NOTE: weights without fills keep their metadata
    for bad in ({"a": {"strategy": "median", "fill": "x"}}, {"c": {"strategy": "mode", "fill": "z"}},
                {"q": {"strategy": "mean", "fill": "1"}}, {"a": {"strategy": "drop_row", "fill": "1"}},
                {"a": {"strategy": "guess", "fill": "1"}}):  # fmt: skip
        meta = json.loads(columns.to_meta())
        with pytest.raises(ContractError, match="columns"):
            Columns.from_meta(json.dumps({**meta, "missing": bad}))


def test_a_file_given_to_a_trained_model_fills_what_training_filled_and_nothing_else() -> None:
    from specgrad.train.data import NONFINITE_HINT, Dialect, encode_rows

    columns = Columns(("a", "b", "c"), {"c": ("one_hot", ("x", "y"))}, {"a": ("median", "2.5"), "b": ("drop_row", None),
                                                                         "c": ("mode", "y")})  # fmt: skip
    rows = [(2, ["NA", "1", "?"]), (3, ["4", "", "x"]), (4, ["5", "nan", "x"])]
    x, problems = encode_rows(rows, ["a", "b", "c"], [0, 1, 2], columns, Path("r.csv"), NONFINITE_HINT, "is new",
                              Dialect(), served=True)  # fmt: skip
    assert x[0].tolist() == [2.5, 1.0, 0.0, 1.0]  # NOTE: a's median and c's mode, as training filled them
    assert [str(p).split("\n")[0] for p in problems] == [
        "r.csv:3:2: error: row 3, column 'b' is empty",
        "r.csv:4:2: error: row 4, column 'b' is missing ('nan')",
    ]
    assert "the model was trained without a value to fill this column with" in str(problems[0])
    x, problems = encode_rows(rows[2:], ["a", "b", "c"], [0, 1, 2], columns, Path("r.csv"), None, "is new",
                              Dialect(), served=True)  # fmt: skip
    assert not problems and np.isnan(x[0, 1])  # NOTE: run --allow-nonfinite still runs a NaN as given


def test_a_null_strategy_is_the_default_and_an_empty_fill_is_refused(tmp_path: Path) -> None:
    assert "data.missing: mean, median" in messages(spec(tmp_path, MESSY, "missing: null\n"))[0]
    path = spec(tmp_path, MESSY, 'missing: {fill: " "}\n')
    assert spec_messages(path) == [
        f"{path}:13:19: error: data.missing.fill is empty: it would fill a missing cell "
        "with another one\n  hint: fill with a number, or a category such as unknown"
    ]


def test_a_fill_beyond_float32_is_refused_at_its_key(tmp_path: Path) -> None:
    """Finite as a float64, infinite as the float32 the model reads: refused where it is written, as a cell is."""
    path = spec(tmp_path, "a,b,y\n1,2,3\n,4,5\n6,7,8\n9,1,2\n", "missing_columns: {a: {fill: 1e39}}\n")
    with pytest.raises(SpecError) as e:
        validate_file(path)
    (problem,) = e.value.problems
    assert problem.loc is not None and problem.loc.line == 13 and "beyond float32's range" in str(problem)
    path = spec(tmp_path, "a,b,y\n1,2,3\n,4,5\n6,7,8\n9,1,2\n", "missing_columns: {a: {fill: -3.4e38}}\n")
    assert load_data(validate_file(path)).x_train.dtype == np.float32


def test_every_target_missing_is_not_offered_a_fill(tmp_path: Path) -> None:
    """A target is never filled: the hint says to add the targets, not to set data.missing (which would not help)."""
    path = spec(tmp_path, "a,b,y\n" + "".join(f"{i},{i},NA\n" for i in range(10)), "missing: mean\n")
    (message,) = messages(path)
    assert "every row of d.csv is left out: 10 with its target missing" in message
    assert "a target is never filled" in message and "data.missing" not in message.split("hint:")[1]


def test_a_fill_is_read_as_the_file_writes_numbers_and_a_wrong_value_is_named(tmp_path: Path) -> None:
    """With decimal ",", {fill: "2,5"} is 2.5; {fill: true} (or null, or a list) is refused for its value, at it."""
    path = spec(tmp_path, "a;b;y\n1,5;2;3\n;4;5\n6;7;8\n9;1;2\n", 'decimal: ","\nmissing_columns: {a: {fill: "2,5"}}\n')
    data = load_data(validate_file(path))
    assert 2.5 in np.concatenate([data.x_train[:, 0], data.x_valid[:, 0]])
    for bad in ("true", "null", "[1]"):
        path = spec(tmp_path, "a,b,y\n1,2,3\n,4,5\n6,7,8\n9,1,2\n", f"missing_columns: {{a: {{fill: {bad}}}}}\n")
        with pytest.raises(SpecError) as e:
            validate_file(path)
        (problem,) = e.value.problems
        assert "data.missing_columns.a.fill must be a number or a category (text)" in str(problem), str(problem)
        assert problem.loc is not None and problem.loc.line == 13


def test_a_delimiter_ending_every_line_is_dropped_and_one_ending_some_is_named(tmp_path: Path) -> None:
    """Every line ending with the delimiter (a spreadsheet's habit): the empty, nameless last column is not data. Only
    some lines: the nameless column is an error whose hint names the cause."""
    data = load_data(validate_file(spec(tmp_path, "a,b,y,\n1,2,3,\n4,5,6,\n7,8,9,\n1,2,3,\n")))
    assert data.x_train.shape[1] == 2
    found = [m for m in messages(spec(tmp_path, "a,b,y,\n1,2,3,\n4,5,6\n7,8,9,\n1,2,3,\n")) if "has no name" in m]
    assert found and "a line ending with the delimiter makes an empty last column" in found[0], found


def test_a_median_for_a_column_of_text_leaves_the_text_problem_to_be_said(tmp_path: Path) -> None:
    """data.missing: median with a text column not marked categorical: the problem is the text, said at the header,
    not "no value to take its median from"."""
    text = "a,w,y\n" + "".join(f"{'' if i % 7 == 0 else i},{('red', 'blue')[i % 2]},{i % 3}\n" for i in range(30))
    found = messages(spec(tmp_path, text, "missing: median\n", shape="[3]"))
    assert any("column 'w' holds text" in m for m in found), found
    assert not any("to take its median from" in m for m in found), found
