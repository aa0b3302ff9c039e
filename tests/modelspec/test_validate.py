"""`specgrad validate`: example specs pass with a summary; bad specs give every problem with its exact line:col."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
runner = CliRunner()

GOOD = """\
specgrad: 1
name: tiny
input: {shape: [1, 8, 8]}
model:
  - flatten
  - linear: 10
"""


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.name)
def test_every_example_spec_validates(spec: Path) -> None:
    result = runner.invoke(app, ["validate", str(spec)])
    assert result.exit_code == 0, result.output
    assert "valid;" in result.output and "parameters" in result.output


def test_batch_option_sets_the_cost_report_and_the_memory_check(tmp_path: Path) -> None:
    """A spec without a data section cannot train as written: it is costed per example (batch 1; 32 was assumed, so
    a model-only spec of GPT-2's size failed the memory check); --batch N costs the step at N, and the memory check
    uses it too, where --set data.batch_size would demand a data source."""
    (spec := tmp_path / "tiny.yaml").write_text(GOOD)
    small = json.loads(runner.invoke(app, ["validate", str(spec), "--json"]).output)
    big = json.loads(runner.invoke(app, ["validate", str(spec), "--json", "--batch", "1024"]).output)
    assert (small["batch_size"], big["batch_size"]) == (1, 1024)
    assert big["activation_bytes"] == small["activation_bytes"] * 1024 and big["params"] == small["params"]
    assert "batch 1024" in runner.invoke(app, ["validate", str(spec), "--batch", "1024"]).output
    over = runner.invoke(app, ["validate", str(ROOT / "specs" / "char_gpt.yaml"), "--batch", "60000"])
    assert over.exit_code == 1 and "a batch of 60000" in over.output and "budget" in over.output
    assert runner.invoke(app, ["validate", str(spec), "--batch", "0"]).exit_code == 2


def test_the_cost_table_is_never_cut_when_piped() -> None:
    """A CI log or `| less` has no terminal, where rich assumes 80 columns and cut the layer column to 'self_atten…'.
    Piped, the table takes the width it needs; every layer and every figure is printed whole."""
    spec = ROOT / "specs" / "char_gpt.yaml"
    out = runner.invoke(app, ["validate", str(spec)]).output
    assert "…" not in out
    assert out.count("self_attention") == 2 and "761.7M FLOP" in out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len({len(line) for line in rows}) == 1, "every row the same width: no cell wrapped"


def test_summary_numbers(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(GOOD)
    spec = validate_file(path)
    assert [s.out_shape for s in spec.steps] == [(64,), (10,)]
    assert spec.params == 64 * 10 + 10 and spec.batch_size == 1
    out = json.loads(runner.invoke(app, ["validate", str(path), "--json"]).output)
    assert out["valid"] and out["params"] == 650 and out["steps"][1]["output_shape"] == [10]


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as e:
        validate_file(path)
    return [str(p).replace(str(path), "bad.yaml") for p in e.value.problems]


# (name, spec text, the expected problems: "line:col: error: ..." prefixes, in order)
BAD = [
    (
        "unknown top key",
        GOOD + "modle: []\n",
        ["7:1: error: unknown key 'modle' at the top level\n  hint: did you mean 'model'?"],
    ),
    ("missing name", GOOD.replace("name: tiny\n", ""), ["1:1: error: the spec needs the key 'name'"]),
    ("bad version", GOOD.replace("specgrad: 1", "specgrad: 2"), ["1:11: error: specgrad must be one of 1; got '2'"]),
    (
        "number as name",
        GOOD.replace("name: tiny", "name: 3.10"),
        ["2:7: error: name must be text, got '3.10'\n  hint: 3.10 was read as a number; put it in quotes"],
    ),
    (
        "yes as bool",
        GOOD + "data: {source: digits, shuffle: yes}\n",
        ["7:33: error: data.shuffle must be true or false, got 'yes'\n  hint: YAML 1.2 reads yes/no/on/off as text"],
    ),
    ("inf lr", GOOD + "train: {lr: .inf}\n", ["7:13: error: train.lr must be a finite number, got '.inf'"]),
    ("negative epochs", GOOD + "train: {epochs: -3}\n", ["7:17: error: train.epochs must be between 1 and 1000000"]),
    (
        "typo in choice",
        GOOD + "train: {optimizer: adma}\n",
        ["7:20: error: train.optimizer must be one of sgd, adam, adamw; got 'adma'\n  hint: did you mean 'adam'?"],
    ),
    (
        "unknown layer",
        GOOD.replace("- flatten", "- flaten"),
        ["5:5: error: unknown layer 'flaten' in model[0]\n  hint: did you mean 'flatten'?"],
    ),
    (
        "typo in layer argument",
        GOOD.replace("linear: 10", "linear: {out: 10, bais: false}"),
        ["6:23: error: unknown key 'bais' in model[1].linear\n  hint: did you mean 'bias'?"],
    ),
    (
        "string where int",
        GOOD.replace("linear: 10", "linear: ten"),
        ["6:13: error: model[1].linear.out must be a whole number, got 'ten'"],
    ),
    ("zero width", GOOD.replace("linear: 10", "linear: 0"), ["6:13: error: model[1].linear.out must be between 1"]),
    (
        "shape mismatch",
        GOOD.replace("- flatten", "- flatten\n  - conv2d: {out: 4, kernel: 3}"),
        [
            "6:5: error: layer 1 (conv2d) cannot take shape [64] from layer 0 (flatten, line 5): it needs a (channels, "
            "height, width) input"
        ],
    ),
    (
        "window too big",
        GOOD.replace("- flatten", "- maxpool: 9"),
        ["5:5: error: layer 0 (maxpool) cannot take shape [1, 8, 8] from the input (line 3): it needs a window"],
    ),
    ("empty model", GOOD.split("model:")[0] + "model: []\n", ["4:8: error: model needs at least one layer"]),
    (
        "layer written wrong",
        GOOD.replace("- flatten", "- {flatten: 1, relu: 2}"),
        ["5:5: error: model[0] must be a layer name or 'name: arguments', got a mapping"],
    ),
    (
        "absurd size",
        GOOD.replace("linear: 10", "linear: 100000\n  - linear: 100000"),
        ["5:3: error: one training step needs about"],
    ),
]


@pytest.mark.parametrize("name, text, expected", BAD, ids=[b[0] for b in BAD])
def test_bad_spec_reports_each_problem_where_it_is(tmp_path: Path, name: str, text: str, expected: list[str]) -> None:
    got = problems_of(tmp_path, text)
    assert len(got) == len(expected), got
    for g, e in zip(got, expected):
        assert g.startswith("bad.yaml:" + e), f"{g!r} does not start with {e!r}"


def test_all_problems_of_a_stage_in_one_run(tmp_path: Path) -> None:
    text = GOOD.replace("- flatten", "- flaten").replace("name: tiny", "name: tiny\nsed: 1") + "train: {lr: -1}\n"
    got = problems_of(tmp_path, text)
    assert [g.split(": error")[0] for g in got] == ["bad.yaml:3:1", "bad.yaml:6:5", "bad.yaml:8:13"]


def test_cli_exit_codes_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("linear: 10", "linear: ten"))
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 1 and "must be a whole number" in result.output and "Traceback" not in result.output
    missing = runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 1 and "Traceback" not in missing.output
    errors = json.loads(runner.invoke(app, ["validate", str(bad), "--json"]).output)["errors"]
    assert errors[0]["line"] == 6 and errors[0]["col"] == 13


def test_json_schema_accepts_every_example_and_rejects_typos() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from specgrad.modelspec.jsonschema import spec_json_schema
    from specgrad.modelspec.loader import load_yaml

    schema = spec_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for spec in SPECS:
        jsonschema.validate(load_yaml(spec).to_plain(), schema)
    bad = load_yaml(ROOT / "specs" / "digits_mlp.yaml").to_plain()
    bad["model"].append({"linera": 3})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    printed = json.loads(runner.invoke(app, ["schema"]).output)
    assert printed == schema


def test_docs_spec_reference_is_current() -> None:
    from specgrad.modelspec.reference import render_reference

    assert render_reference() in (ROOT / "docs" / "spec.md").read_text(), (
        "docs/spec.md is stale: regenerate its reference section with specgrad.modelspec.reference.render_reference()"
    )


GRAPH = """\
specgrad: 1
name: g
inputs:
  a: {shape: [4]}
  b: {shape: [4]}
model:
  graph:
    - {name: x, layer: linear, out: 8, from: a}
    - {name: y, layer: linear, out: 8, from: b}
    - {name: s, op: add, from: [x, y]}
  outputs: [s]
"""

GRAPH_BAD = [
    (
        "defined below",
        GRAPH.replace("from: a}", "from: y}"),
        "8:46: error: node 'x' takes 'y', which is defined below it (line 9); a node can only take inputs",
    ),
    ("own output", GRAPH.replace("from: a}", "from: x}"), "8:46: error: node 'x' takes its own output"),
    (
        "unknown from",
        GRAPH.replace("from: b}", "from: bb}"),
        "9:46: error: node 'y' takes 'bb', which is not an input or a node above it\n  hint: did you mean 'b'?",
    ),
    (
        "duplicate name",
        GRAPH.replace("name: y", "name: x"),
        "9:14: error: a second node named 'x' in model.graph (the first is on line 8)",
    ),
    (
        "add mismatch",
        GRAPH.replace("out: 8, from: b", "out: 6, from: b"),
        "10:7: error: node 's' (add) cannot take shapes [8] from node 'x' (line 8) and [6] from node 'y' (line 9): it "
        "needs inputs of one shape",
    ),
    ("unknown output", GRAPH.replace("outputs: [s]", "outputs: [sum]"), "11:13: error: output 'sum' is not a node"),
    ("unknown op", GRAPH.replace("op: add", "op: plus"), "10:21: error: unknown op 'plus' in node 's'"),
    (
        "layer and op",
        GRAPH.replace("op: add", "op: add, layer: relu"),
        "10:7: error: node 's' needs exactly one of layer, op or block, got layer, op",
    ),
    ("missing from", GRAPH.replace(", from: a}", "}"), "8:7: error: node 'x' needs 'from:'"),
    (
        "unknown block",
        GRAPH.replace("layer: linear, out: 8, from: a", "block: dec, from: a"),
        "8:24: error: unknown block 'dec' in node 'x'",
    ),
    (
        "list model with named inputs",
        GRAPH.split("model:")[0] + "model:\n  - relu\n",
        "7:3: error: a list of layers takes one input",
    ),
    (
        "both input and inputs",
        GRAPH.replace("inputs:", "input: {shape: [4]}\ninputs:"),
        "1:1: error: the spec needs exactly one of input: (one input) or inputs: (named inputs of a graph)",
    ),
    (
        "text source without context",
        GOOD + "data: {source: text, corpus: sonnets}\n",
        "7:16: error: data with source: text needs context",
    ),
]


@pytest.mark.parametrize("name, text, expected", GRAPH_BAD, ids=[b[0] for b in GRAPH_BAD])
def test_bad_graph_spec(tmp_path: Path, name: str, text: str, expected: str) -> None:
    got = problems_of(tmp_path, text)
    assert len(got) == 1 and got[0].startswith("bad.yaml:" + expected), got


def test_block_errors_point_into_the_block(tmp_path: Path) -> None:
    spec = (ROOT / "specs" / "char_gpt.yaml").read_text()
    got = problems_of(tmp_path, spec.replace("with: {width: $d, heads: $heads}", "with: {width: $d, head: $heads}"))
    assert got == [
        "bad.yaml:31:7: error: block node 'body' needs with: {heads: ...} for block 'decoder'",
        "bad.yaml:31:71: error: block 'decoder' has no parameter 'head'\n  hint: did you mean 'heads'?",
    ]
    got = problems_of(tmp_path, spec.replace("heads: $heads, causal", "heads: 5, causal"))
    assert "node 'body.attn'" in got[0] or "node 'body.0.attn'" in got[0]
    assert "needs features divisible by heads=5" in got[0] and got[0].startswith("bad.yaml:21:")


def test_committed_json_schema_is_current() -> None:
    from specgrad.modelspec.jsonschema import spec_json_schema

    committed = json.loads((ROOT / "docs" / "specgrad.schema.json").read_text())
    assert committed == spec_json_schema(), "regenerate it: specgrad schema > docs/specgrad.schema.json"


def test_memory_budget_is_a_flag(tmp_path: Path) -> None:
    from specgrad import Context

    path = tmp_path / "s.yaml"
    path.write_text(GOOD.replace("linear: 10", "linear: 4000\n  - linear: 4000"))
    validate_file(path)
    with Context(SPEC_MEMORY_GB=0):
        with pytest.raises(SpecError, match="over the 0 GiB budget"):
            validate_file(path)


def test_data_cross_checks(tmp_path: Path) -> None:
    got = problems_of(tmp_path, GOOD + "data: {source: csv, path: nowhere.csv, target: y}\n")
    assert got[0].startswith("bad.yaml:7:27: error: data.path: no such file:") and "relative to the folder" in got[0]
    got = problems_of(tmp_path, GOOD.replace("[1, 8, 8]", "[1, 8, 9]") + "data: {source: digits}\n")
    assert got[0].startswith("bad.yaml:3:16: error: the digits are 8x8 = 64 values per example")


def test_long_error_lists_are_cut_with_a_count(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(GOOD + "".join(f"typo{i}: 1\n" for i in range(60)))
    result = runner.invoke(app, ["validate", str(path)])
    assert (
        result.exit_code == 1
        and result.output.count("unknown key") == 50
        and "... and 10 more problems" in result.output
    )


# *** the data contract: validate reads the data and checks it against the model and the loss ***

DIGITS = GOOD + "data: {source: digits}\n"
CSV_SPEC = """\
specgrad: 1
name: c
input: {shape: [2]}
model: [{linear: 3}]
data: {source: csv, path: d.csv, target: y, batch_size: 2}
"""
NPZ_SPEC = CSV_SPEC.replace("source: csv, path: d.csv, target: y", "source: npz, path: d.npz")
LABELS = "a,b,y\n" + "".join(f"{i},{2 * i},{i % 3}\n" for i in range(12))
TASK = "batch_size: 2, task: classify}"

# (name, spec text, data files, the first line of the output: "FILE:line:col: error: ..." up to its end or a hint)
DATA_BAD = [
    ("output width vs classes", DIGITS.replace("linear: 10", "linear: 7"), {},
     "bad.yaml:6:5: error: the model's output has 7 values per example, one per class, but the digit labels hold 10 "
     "classes (0, 1, 2, 3, 4, ...)"),
    ("mse on class labels", DIGITS + "train: {loss: mse}\n", {},
     "bad.yaml:8:15: error: train.loss is mse, but the digit labels are class labels, which cross_entropy learns"),
    ("cross_entropy on numbers", CSV_SPEC.replace("linear: 3", "linear: 1"), {"d.csv": LABELS},
     "bad.yaml:5:42: error: train.loss is cross_entropy (the default), which learns class labels, but the values of "
     "column 'y' in d.csv are numbers to predict (a regression)"),
    ("regression output width", CSV_SPEC + "train: {loss: mse}\n", {"d.csv": LABELS},
     "bad.yaml:4:9: error: the model's output [3] holds 3 values per example, but each target holds 1 (the values "
     "of column 'y' in d.csv)"),
    ("label out of range", CSV_SPEC.replace("batch_size: 2}", TASK), {"d.csv": LABELS + "1,2,5\n"},
     "d.csv:14:3: error: row 14, column 'y' is 5, out of range of the model's 3 classes (0..2): its output has one "
     "value per class"),
    ("negative label", CSV_SPEC.replace("batch_size: 2}", TASK), {"d.csv": LABELS.replace("\n3,6,0", "\n3,6,-2")},
     "d.csv:5:3: error: row 5, column 'y' is -2: class labels are 0 or more"),
    ("label not whole", CSV_SPEC.replace("batch_size: 2}", TASK), {"d.csv": LABELS.replace("\n3,6,0", "\n3,6,0.5")},
     "d.csv:5:3: error: row 5, column 'y' is 0.5, not a whole number, so it cannot be a class label"),
    ("label past int32", NPZ_SPEC, {"d.npz": {"x": np.zeros((12, 2)), "y": np.array([0, 1, 2] * 3 + [2**40, 0, 1])}},
     "bad.yaml:5:27: error: y[9] in d.npz is 1099511627776, too large: out of range of the model's 3 classes (0..2)"),
    ("label past int32 under mse", NPZ_SPEC + "train: {loss: mse}\n",
     {"d.npz": {"x": np.zeros((12, 2)), "y": np.array([0, 1, 2] * 3 + [2**40, 0, 1])}},
     "bad.yaml:5:27: error: y[9] in d.npz is 1099511627776, too large: out of range of int32 class labels"),
    ("one class", CSV_SPEC.replace("batch_size: 2}", TASK), {"d.csv": LABELS.replace(",0\n", ",1\n").replace(",2\n",
                                                                                                          ",1\n")},
     "d.csv:2:3: error: the classes in column 'y' of d.csv hold only one class (1): a classifier needs examples of at "
     "least 2 classes"),
    ("stray text in a label column", CSV_SPEC, {"d.csv": LABELS + "1,2,cat\n"},
     "d.csv:14:3: error: row 14, column 'y': 'cat' is not a number, but 12 of the column's 13 values are whole "
     "numbers, so it is probably a typo"),
    ("big integer regression target", CSV_SPEC.replace("linear: 3", "linear: 1") + "train: {loss: mse}\n",
     {"d.csv": LABELS + f"1,2,{2**53 + 1}\n"},
     "d.csv:14:3: error: row 14, column 'y' is 9007199254740993: regression targets are float32, which holds whole "
     "numbers exactly up to 16777216 only"),
    ("two outputs", GRAPH.replace("  b: {shape: [4]}\n", "").replace("from: b", "from: a").replace("[4]", "[2]")
     .replace("outputs: [s]", "outputs: [x, y]") + "data: {source: spirals}\n", {},
     "bad.yaml:10:12: error: the model has 2 outputs (x, y), so training needs a loss for each of them"),
    ("key for another source", DIGITS.replace("source: digits", "source: digits, features: [a]"), {},
     "bad.yaml:7:34: error: data.features is for the csv source, not digits"),
    ("unknown key in an unused block",
     GOOD + "blocks:\n  b:\n    graph: [{name: out, layer: relu, from: in, slop: 1}]\n", {},
     "bad.yaml:9:48: error: unknown key 'slop' in node 'out'.relu"),
]  # fmt: skip


def write_data(folder: Path, files: dict) -> None:
    for name, content in files.items():
        if isinstance(content, dict):
            np.savez(folder / name, **content)
        else:
            (folder / name).write_text(content)


def test_a_label_past_int32_under_mse_reports_the_loss_too(tmp_path: Path) -> None:
    """Sorted by place, the label (line 5) comes first; the loss that does not fit the labels (line 6) still follows."""
    name, text, files, _ = next(case for case in DATA_BAD if case[0] == "label past int32 under mse")
    write_data(tmp_path, files)
    (tmp_path / "bad.yaml").write_text(text)
    result = runner.invoke(app, ["validate", str(tmp_path / "bad.yaml")])
    said = result.output.replace(f"{tmp_path}/", "")
    assert result.exit_code == 1 and "bad.yaml:5:27: error: y[9] in d.npz is 1099511627776" in said, said
    assert "bad.yaml:6:15: error: train.loss is mse, but 'y' in d.npz are class labels" in said, said


@pytest.mark.parametrize("name, text, files, expected", DATA_BAD, ids=[b[0] for b in DATA_BAD])
def test_validate_checks_the_data_contract(tmp_path: Path, name: str, text: str, files: dict, expected: str) -> None:
    write_data(tmp_path, files)
    (tmp_path / "bad.yaml").write_text(text)
    result = runner.invoke(app, ["validate", str(tmp_path / "bad.yaml")])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    first = result.output.strip().splitlines()[0].replace(f"{tmp_path}/", "")
    assert first.startswith(expected), first


def test_validate_data_errors_as_json_and_their_hints(tmp_path: Path) -> None:
    write_data(tmp_path, {"d.csv": LABELS + "1,2,5\n"})
    (tmp_path / "s.yaml").write_text(CSV_SPEC.replace("batch_size: 2}", TASK))
    errors = json.loads(runner.invoke(app, ["validate", str(tmp_path / "s.yaml"), "--json"]).output)["errors"]
    assert (errors[0]["file"], errors[0]["line"], errors[0]["col"]) == (str(tmp_path / "d.csv"), 14, 3)
    assert errors[0]["hint"] == "the labels go up to 5: set the out of the last layer (line 4) to 6, or correct the " \
                                "label"  # fmt: skip
    (tmp_path / "s.yaml").write_text(CSV_SPEC.replace("linear: 3", "linear: 1"))
    errors = json.loads(runner.invoke(app, ["validate", str(tmp_path / "s.yaml"), "--json"]).output)["errors"]
    assert errors[0]["hint"] == "use loss: mse; if the numbers are class labels 0, 1, 2, ..., set data.task: classify"


def test_csv_classification_validates(tmp_path: Path) -> None:
    write_data(tmp_path, {"d.csv": LABELS})
    (tmp_path / "s.yaml").write_text(CSV_SPEC.replace("batch_size: 2}", TASK))
    result = runner.invoke(app, ["validate", str(tmp_path / "s.yaml")])
    assert result.exit_code == 0 and "valid;" in result.output, result.output
    write_data(tmp_path, {"d.csv": "a,b,y\n" + "".join(f"{i},{i},{'cat dog emu'.split()[i % 3]}\n" for i in range(9))})
    (tmp_path / "s.yaml").write_text(CSV_SPEC)  # text labels: classification without data.task
    result = runner.invoke(app, ["validate", str(tmp_path / "s.yaml")])
    assert result.exit_code == 0 and "valid;" in result.output, result.output
    assert "data: 7 training and 2 validation examples; 3 classes (cat, dog, emu)" in result.output


def test_validate_reports_what_the_data_is() -> None:
    result = runner.invoke(app, ["validate", str(ROOT / "specs" / "house_prices.yaml")])
    assert "data: 320 training and 80 validation examples; targets of shape [1], standardized for training (mean " \
           "228.6, std 93.69 in the training split)" in result.output  # fmt: skip
    data = json.loads(runner.invoke(app, ["validate", str(ROOT / "specs" / "house_prices.yaml"), "--json"]).output)
    assert data["data"]["task"] == "regress" and abs(data["data"]["target_stats"]["mean"][0] - 228.6) < 0.1
    data = json.loads(runner.invoke(app, ["validate", str(ROOT / "specs" / "digits_mlp.yaml"), "--json"]).output)
    assert data["data"]["class_names"] == [str(i) for i in range(10)] and data["data"]["train_examples"] == 1438


def test_null_turns_an_optional_value_off_but_not_a_required_one() -> None:
    spec = validate_file(ROOT / "specs" / "digits_cnn.yaml", ["train.early_stopping=null", "train.steps=null"])
    assert spec.values["train"]["early_stopping"] is None and spec.values["train"]["steps"] is None
    with pytest.raises(SpecError, match="train.lr must be a number"):
        validate_file(ROOT / "specs" / "digits_cnn.yaml", ["train.lr=null"])


# *** the name is a folder name; what needs validation examples; each feature once ***


@pytest.mark.parametrize(("name", "why"), [
    ("../../escape", "holds '/', a path separator"), ("a/b", "holds '/', a path separator"),
    ("'a\\\\b'", "holds '\\\\', a path separator"), ('"a\\0b"', "holds '\\x00'"), ("''", "is empty"),
    ("'..'", "starts with '.'"), (".hidden", "starts with '.'"), ("-rf", "starts with '-'"), ("my model", "holds ' '"),
    ("x" * 101, "is 101 characters long, over 100"),
    ("\U0001d400" * 60, "is 240 bytes long in UTF-8 (60 characters, some of several bytes), over 239 (a file system "
     "takes 255 bytes in a name, and a sweep folder adds '-sweep-<n>')"),
])  # fmt: skip
def test_name_must_be_one_plain_folder_name(tmp_path: Path, name: str, why: str) -> None:
    got = problems_of(tmp_path, GOOD.replace("name: tiny", f"name: {name}"))
    assert got == [f"bad.yaml:2:7: error: name {why}: it names the run folders (runs/<name>-<n>), so it must be one "
                   "plain folder name\n  hint: use letters, digits, '-', '_' and '.', starting with a letter, digit or "
                   "'_', at most 100 characters; for example my-model_2"]  # fmt: skip


def test_plain_names_are_fine(tmp_path: Path) -> None:
    for name in ("digits-mlp", "_v1.2", "café_2", "x" * 100, "'3.10'", "é" * 100, "\U0001d400" * 59):
        (tmp_path / "s.yaml").write_text(GOOD.replace("name: tiny", f"name: {name}"))
        validate_file(tmp_path / "s.yaml")


def test_a_name_set_on_the_command_line_cannot_leave_out(tmp_path: Path) -> None:
    for name in ("../../escape", "a/b"):
        out = tmp_path / "nm" / "x"
        args = ["train", str(ROOT / "specs" / "digits_mlp.yaml"), "--steps", "1", "--set", f"name={name}", "--out"]
        result = runner.invoke(app, [*args, str(out)])
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert f"--set name={name}" in result.output and "must be one plain folder name" in result.output
        assert not (tmp_path / "escape-1").exists() and not out.exists()


def test_early_stopping_and_best_weights_need_a_validation_split(tmp_path: Path) -> None:
    data = "data: {source: digits, valid_split: 0}\n"
    got = problems_of(tmp_path, GOOD + data + "train: {early_stopping: {patience: 2}, final_weights: best}\n")
    assert got == [
        "bad.yaml:8:25: error: train.early_stopping watches the validation examples, but data.valid_split is 0, so "
        "training would never stop early\n  hint: set data.valid_split (for example 0.2), or remove early_stopping",
        "bad.yaml:8:55: error: train.final_weights: best keeps the epoch with the best validation metric, but "
        "data.valid_split is 0, so there are no validation examples to pick it by\n  hint: set data.valid_split (for "
        "example 0.2), or write final_weights: last (without final_weights, the last weights are kept)",
    ]
    for train in ("{}", "{final_weights: last}", "{early_stopping: null}"):  # best by default means last here
        (tmp_path / "s.yaml").write_text(GOOD + data + f"train: {train}\n")
        assert validate_file(tmp_path / "s.yaml").values["data"]["valid_split"] == 0
    (tmp_path / "s.yaml").write_text(GOOD + data + "train: {early_stopping: {patience: 2}}\n")
    validate_file(tmp_path / "s.yaml", ["data.valid_split=0.1"])
    with pytest.raises(SpecError, match="never stop early"):
        validate_file(ROOT / "specs" / "digits_cnn.yaml", ["data.valid_split=0"])


def test_each_feature_is_listed_once(tmp_path: Path) -> None:
    write_data(tmp_path, {"d.csv": "rooms,area,age,y\n" + "".join(f"{i},{i},{i},{i}\n" for i in range(9))})
    text = CSV_SPEC.replace("[2]", "[4]").replace("target: y", "target: y, features: [rooms, rooms, area, age]")
    assert problems_of(tmp_path, text) == ["bad.yaml:5:63: error: data.features lists 'rooms' twice (first on line 5)"
                                           "\n  hint: list each column once"]  # fmt: skip


def test_json_fields_are_the_documented_ones(tmp_path: Path) -> None:
    """docs/spec.md "The cost report" lists every field of validate --json; a field added or renamed goes there too."""
    docs = (ROOT / "docs" / "spec.md").read_text()
    section = docs[docs.index("## The cost report") : docs.index("## Limits")]
    valid = json.loads(runner.invoke(app, ["validate", str(ROOT / "specs" / "house_prices.yaml"), "--json"]).output)
    (bad := tmp_path / "bad.yaml").write_text("specgrad: 1\nname: x\n")
    invalid = json.loads(runner.invoke(app, ["validate", str(bad), "--json"]).output)
    fields = {*valid, *valid["steps"][0], *valid["inputs"]["input"], *valid["data"], *invalid, *invalid["errors"][0]}
    assert all(f"`{name}`" in section for name in fields), sorted(f for f in fields if f"`{f}`" not in section)
