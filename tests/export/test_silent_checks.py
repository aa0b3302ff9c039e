"""Issue 30, silent wrong results: the weights' metadata checked against the spec (task, class names, statistics
specgrad could have written), C names for any valid spec name, and no NaN or infinity reaching an output of `run` or
of the exported C program with exit 0 (inputs checked once standardized, outputs checked before they are printed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from specgrad.cli.run import served_meta
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.export.c import c_identifier, export_c
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.contract import ContractError, contract_from_meta, unwritten
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_state_dict, load_state_dict, safe_save
from specgrad.train.run_folder import spec_hash

runner = CliRunner()

TINY = """specgrad: 1
name: tiny
input: {shape: [2]}
model: [{linear: 8}, relu, {linear: 2}]
data: {source: spirals, samples: 64, batch_size: 16}
"""
TWO = """specgrad: 1
name: 2inputs
inputs:
  a: {shape: [2]}
  b: {shape: [3]}
model:
  graph:
    - {name: both, op: concat, from: [a, b]}
    - {name: out, layer: linear, out: 2, from: both}
  outputs: [out]
"""
STATS = json.dumps({"mean": [0.5, -0.5], "std": [2.0, 0.25]})
UNIT = json.dumps({"mean": [0.0, 0.0], "std": [1.0, 1.0]})
ONE = json.dumps({"mean": [0.0], "std": [1.0]})


def _spec(tmp_path: Path, text: str, name: str = "s.yaml"):  # noqa: ANN202
    (tmp_path / name).write_text(text)
    return validate_file(tmp_path / name, data_files=False)


# *** the weights' metadata against the spec ***


@pytest.mark.parametrize("meta, says", [
    ({"task": "language"}, "the weights' task is language, but s.yaml trains a classifier (train.loss cross_entropy "
     "on spirals)"),
    ({"task": "regress"}, "the weights' task is regress, but s.yaml trains a classifier"),
    ({"task": "multi", "outputs": "{}"}, "the weights' task is multi (a model with several inputs or outputs), but "
     "s.yaml has one input and one output"),
    ({"task": "classify", "class_names": '["a", "a"]'}, "the weights' class_names name 'a' twice"),
    ({"task": "classify", "normalization": json.dumps({"mean": [0, 0], "std": [1e-40, 1]})},
     r"the weights' normalization: std [0] is 1e-40, not a normal positive float32"),
    ({"task": "classify", "normalization": json.dumps({"mean": [0, 0], "std": [1, -2]})},
     r"the weights' normalization: std [1] is -2, not a normal positive float32"),
    ({"task": "classify", "normalization": json.dumps({"mean": [0, 1e39], "std": [1, 1]})},
     r"the weights' normalization: mean [1] is inf, not a finite number"),
    ({"task": "classify", "normalization": json.dumps({"mean": [-3e38, 0], "std": [0.5, 1]})},
     r"the weights' normalization: mean [0] is -3e+38 with std 0.5: a value near 0 is infinite once standardized"),
])  # fmt: skip
def test_metadata_specgrad_never_writes_is_refused(tmp_path: Path, meta: dict, says: str) -> None:
    spec = _spec(tmp_path, TINY)
    with pytest.raises(ContractError) as e:
        contract_from_meta(spec, meta)
    assert says.replace("s.yaml", str(tmp_path / "s.yaml")) in str(e.value)


def test_metadata_training_writes_is_taken(tmp_path: Path) -> None:
    """What the trainer writes passes, a subnormal mean and a tiny target std included (only an input's std divides);
    a spec without data trains nothing, so its weights' task is taken at their word."""
    spec = _spec(tmp_path, TINY)
    got = contract_from_meta(spec, {"task": "classify", "normalization": STATS, "class_names": '["in", "out"]'})
    assert got.task == "classify" and got.class_names == ("in", "out") and got.norm["std"].tolist() == [2.0, 0.25]
    assert contract_from_meta(spec, {"task": "classify", "normalization": json.dumps({"mean": 1e-40, "std": 1})})
    regress = _spec(tmp_path, TINY.replace("data: {source: spirals, samples: 64, batch_size: 16}",
                                           "data: {source: sine, samples: 64, batch_size: 16}\ntrain: {loss: mse}")
                    .replace("input: {shape: [2]}", "input: {shape: [1]}"), "r.yaml")  # fmt: skip
    target = json.dumps({"mean": [3e38, 0], "std": [1e-30, 1]})
    assert contract_from_meta(regress, {"task": "regress", "target_normalization": target}).target
    bare = _spec(tmp_path, TINY.replace("data: {source: spirals, samples: 64, batch_size: 16}\n", ""), "b.yaml")
    assert contract_from_meta(bare, {"task": "language"}).task == "language"


SINE = (TINY.replace("spirals", "sine").replace("input: {shape: [2]}", "input: {shape: [1]}")
        .replace("{linear: 2}", "{linear: 1}") + "train: {loss: mse}\n")  # fmt: skip
CSV = TINY.replace("data: {source: spirals, samples: 64, batch_size: 16}",
                   "data: {source: csv, path: d.csv, target: y, batch_size: 2}")  # fmt: skip
TWO_HEADS = TWO.replace("outputs: [out]", "outputs: [out, both]") + (
    "train: {losses: {out: {loss: cross_entropy}, both: {loss: mse}}}\n"
    "data: {source: npz, path: d.npz, batch_size: 2}\n")  # fmt: skip
HASH = {"spec_hash": "0" * 16}  # NOTE: any spec_hash marks specgrad's own metadata


@pytest.mark.parametrize("text, meta, missing", [
    (TINY, {"task": "classify"}, ["normalization"]),
    (TINY, {"task": "classify", "normalization": "{}"}, ["normalization"]),
    (TINY, {"task": "classify", "normalization": STATS}, []),
    (TINY.replace("batch_size: 16}", "batch_size: 16, normalize: false}"), {}, []),
    (SINE, {"task": "regress", "normalization": ONE}, ["target_normalization"]),
    (SINE.replace("batch_size: 16}", "batch_size: 16, normalize: false, normalize_target: false}"), {}, []),
    (CSV, {**HASH, "task": "classify", "normalization": STATS}, ["class_names"]),
    (CSV, {"task": "classify", "normalization": STATS}, []),  # NOTE: another tool's: its classes are numbered
    (TINY, {**HASH, "task": "classify", "normalization": STATS}, []),  # NOTE: spirals' classes are numbers
    (TINY.replace("spirals, samples: 64", "text, corpus: sonnets, context: 2"), {**HASH, "task": "language"}, []),
    (TINY.replace("data: {source: spirals, samples: 64, batch_size: 16}\n", ""), {}, []),
    (TWO_HEADS, {"task": "multi"}, ["normalization of the input a", "normalization of the input b",
                                    "target_normalization of the output both"]),
    (TWO_HEADS, {"task": "multi", "normalization": json.dumps({"a": {"mean": 0, "std": 1}}),
                 "outputs": json.dumps({"both": {"target_normalization": {"mean": 0, "std": 1}}})},
     ["normalization of the input b"]),
])  # fmt: skip
def test_metadata_training_writes_for_the_spec_must_be_there(tmp_path: Path, text: str, meta: dict,
                                                             missing: list[str]) -> None:  # fmt: skip
    """Statistics training writes for a spec that standardizes are asked of any weights (without them the numbers
    are wrong); class names of data that names its classes only of specgrad's own (spec_hash)."""
    got = unwritten(_spec(tmp_path, text), meta)
    assert [m.split(" (")[0] for m in got] == missing, got


def test_run_says_which_metadata_is_missing_and_how_to_run_raw_weights(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SINE)
    meta = {"spec_hash": spec_hash(spec.values), "task": "regress", "normalization": ONE}
    safe_save(get_state_dict(build_model(spec)), tmp_path / "w.safetensors", meta)
    safe_save(get_state_dict(build_model(spec)), tmp_path / "other.safetensors")
    (tmp_path / "x.json").write_text("[[0.5]]")
    args = ["run", str(tmp_path / "s.yaml"), "--input", str(tmp_path / "x.json"), "--device", "CPU", "--weights"]
    edited = runner.invoke(app, [*args, str(tmp_path / "w.safetensors")])
    assert edited.exit_code == 1 and "w.safetensors lacks what `specgrad train` writes for" in edited.output
    assert "target_normalization (the training targets' mean and std" in edited.output
    assert "the file was changed after training" in edited.output, edited.output
    other = runner.invoke(app, [*args, str(tmp_path / "other.safetensors")])
    assert other.exit_code == 1 and "normalization (the training split's" in other.output, other.output
    assert "--set data.normalize=false --set data.normalize_target=false" in other.output, other.output
    raw = runner.invoke(app, [*args, str(tmp_path / "other.safetensors"), "--set", "data.normalize=false", "--set",
                              "data.normalize_target=false"])  # fmt: skip
    assert raw.exit_code == 0 and raw.output.startswith("0: "), raw.output


def test_each_output_of_several_has_its_spec_task(tmp_path: Path) -> None:
    text = TWO.replace("outputs: [out]", "outputs: [out, both]") + (
        "train: {losses: {out: {loss: cross_entropy}, both: {loss: mse}}}\n"
        "data: {source: npz, path: d.npz, batch_size: 2}\n")  # fmt: skip
    spec = _spec(tmp_path, text)
    outputs = {"out": {"task": "regress"}, "both": {"task": "regress"}}
    with pytest.raises(ContractError, match="the weights' task for the output out is regress, but .*s.yaml trains a "
                       "classifier \\(train.losses.out.loss cross_entropy on npz\\)"):  # fmt: skip
        contract_from_meta(spec, {"task": "multi", "outputs": json.dumps(outputs)})
    outputs["out"] = {"task": "classify"}
    assert contract_from_meta(spec, {"task": "multi", "outputs": json.dumps(outputs)}).heads["out"].task == "classify"


def test_weights_without_a_task_are_given_the_one_training_gives_the_spec(tmp_path: Path) -> None:
    """A classifier on a csv was guessed a regression (its raw scores printed as predictions): the loss says."""
    csv = TINY.replace("data: {source: spirals, samples: 64, batch_size: 16}",
                       "data: {source: csv, path: d.csv, target: y, batch_size: 2}")  # fmt: skip
    assert served_meta(_spec(tmp_path, csv), {})["task"] == "classify"
    assert served_meta(_spec(tmp_path, csv + "train: {loss: mse}\n", "m.yaml"), {})["task"] == "regress"
    text = TINY.replace("spirals, samples: 64", "text, corpus: sonnets, context: 2")
    assert served_meta(_spec(tmp_path, text, "t.yaml"), {})["task"] == "language"


COLUMNS = CSV.replace("target: y,", "target: y, features: [a, b],")
CATEGORICAL = CSV.replace("target: y,", "target: y, categorical: {b: one_hot},").replace("[2]", "[3]")


def _columns(features: list[str], categorical: dict | None = None) -> str:
    return json.dumps({"features": features, "categorical": categorical or {}})


@pytest.mark.parametrize("text, meta, says", [
    (COLUMNS, {"columns": _columns(["b", "a"])}, "the weights' columns read the features [b, a], but data.features "
     "of s.yaml is [a, b]: training reads them in the spec's order"),
    (CSV, {"columns": _columns(["a", "y"])}, "the weights' columns read the column 'y' as a feature, but it is the "
     "target"),
    (CSV, {"columns": _columns(["a", "a"])}, "the weights' columns read the column 'a' twice"),
    (CATEGORICAL, {"columns": _columns(["a", "b", "c"])}, "the weights' columns encode no categorical column, but "
     "data.categorical of s.yaml says b as one_hot"),
    (CATEGORICAL, {"columns": _columns(["a", "b", "c"], {"b": {"encoding": "index", "values": ["p", "q"]}})},
     "the weights' columns encode b as index, but data.categorical of s.yaml says b as one_hot"),
    (CATEGORICAL, {"columns": _columns(["a", "b"], {"b": {"encoding": "one_hot", "values": ["p", "p"]}})},
     "the weights' columns give the column 'b' the categories [p, p]: training writes each distinct value"),
    (TINY, {"columns": _columns(["a", "b"])}, "the weights' columns name csv columns, but s.yaml reads source "
     "spirals: training writes columns for a csv source only"),
    (TWO_HEADS, {"columns": _columns(["a"]), "outputs": "{}"}, "reads source npz: training writes columns for a csv "
     "source only"),
    (SINE, {"task": "regress", "class_names": '["a"]'}, "the weights' class_names name classes, but the task is "
     "regress: training writes class names for a classifier only"),
    (TINY, {"normalization": json.dumps({"mean": [0, 0], "std": [1, 1], "scale": 2})}, "the weights' normalization "
     "holds mean, std, scale: training writes a mean and a std, nothing else"),
    (SINE, {"task": "regress", "target_normalization": "[1, 2]"}, "the weights' target_normalization holds list"),
])  # fmt: skip
def test_columns_class_names_and_statistics_training_never_writes_are_refused(tmp_path: Path, text: str, meta: dict,
                                                                              says: str) -> None:  # fmt: skip
    """Columns in another order than the spec's would feed each value to another column's weights (a wrong number
    with exit 0); class names on a regression and other keys in the statistics are not what training writes."""
    spec = _spec(tmp_path, text)
    with pytest.raises(ContractError) as e:
        contract_from_meta(spec, {"task": "multi" if "outputs" in meta else "classify", **meta})
    assert says.replace("s.yaml", str(tmp_path / "s.yaml")) in str(e.value), str(e.value)


def test_columns_training_writes_for_the_spec_are_taken(tmp_path: Path) -> None:
    got = contract_from_meta(_spec(tmp_path, COLUMNS), {"task": "classify", "columns": _columns(["a", "b"])})
    assert got.columns is not None and got.columns.features == ("a", "b")
    cats = _columns(["a", "b"], {"b": {"encoding": "one_hot", "values": ["p", "q"]}})
    assert contract_from_meta(_spec(tmp_path, CATEGORICAL, "c.yaml"), {"task": "classify", "columns": cats}).columns


def test_a_model_with_several_outputs_without_a_task_keeps_its_target_statistics(tmp_path: Path) -> None:
    """An edit that removes only the task: each output's task comes from its loss, and the statistics still in the
    file are applied (the regression answered in the target's units, never in standardized ones)."""
    spec = _spec(tmp_path, TWO_HEADS)
    target = {"mean": [10.0] * 5, "std": [2.0] * 5}
    outputs = {"out": {"task": "classify", "class_names": ["p", "q"]}, "both": {"task": "regress",
               "target_normalization": target}}  # fmt: skip
    meta = {"normalization": json.dumps({"a": {"mean": 0, "std": 1}, "b": {"mean": 0, "std": 1}})}
    for given in (outputs, {"both": {"target_normalization": target}}):
        got = contract_from_meta(spec, served_meta(spec, {**meta, "outputs": json.dumps(given)}))
        assert got.task == "multi" and got.heads["out"].task == "classify", given
        assert got.heads["both"].target["std"].tolist() == [2.0] * 5, given
    assert contract_from_meta(spec, served_meta(spec, {**meta, "outputs": json.dumps(outputs)})).heads[
        "out"].class_names == ("p", "q")  # fmt: skip


# *** names in C ***


def test_every_valid_name_is_a_c_identifier() -> None:
    """Every character but an ASCII letter, digit or '_' becomes '_' (letters of other scripts too: C compilers differ
    on them), '_' at either end goes, and a name that starts with a digit gets model_ in front."""
    names = {"2layer": "model_2layer", "my-model.v2": "my_model_v2", "_x_": "x", "tiny": "tiny", "9": "model_9",
             "\u043c\u043e\u0434\u0435\u043b\u044c": "model", "\u00fc2": "model_2"}  # fmt: skip
    for name, want in names.items():
        assert c_identifier(name) == want, name


def _build(cc: str, c_file: Path) -> Path:
    binary = c_file.with_suffix("")
    built = subprocess.run([cc, "-O1", "-Wall", "-DSPECGRAD_MAIN", str(c_file), "-o", str(binary), "-lm"],
                           capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0 and " error" not in built.stderr, built.stderr
    assert "Wmaybe-uninitialized" not in built.stderr, built.stderr
    return binary


def test_a_name_starting_with_a_digit_exports_c_that_compiles(tmp_path: Path, cc: str) -> None:
    spec = _spec(tmp_path, TWO)
    export_c(spec, build_model(spec), tmp_path / "m.c")
    header = (tmp_path / "m.h").read_text()
    assert "void model_2inputs_forward(const float* in_a, const float* in_b, float* out_out);" in header
    assert "#define model_2inputs_IN_SIZE 5" in header
    ran = subprocess.run([str(_build(cc, tmp_path / "m.c"))], input="1 2 3 4 5\n", capture_output=True, text=True)
    assert ran.returncode == 0 and len(ran.stdout.split()) == 2, ran.stderr


# *** no NaN or infinity reaches an output ***


def test_the_c_runner_refuses_a_value_infinite_once_standardized_counting_across_inputs(tmp_path: Path,
                                                                                         cc: str) -> None:  # fmt: skip
    spec = _spec(tmp_path, TWO)
    norm = {"b": {"mean": [0, 0, 0], "std": [1.0, 1.0, 1e-30]}}
    meta = {"task": "multi", "normalization": json.dumps(norm), "outputs": json.dumps({"out": {"task": "regress"}})}
    export_c(spec, build_model(spec), tmp_path / "m.c", meta)
    binary = _build(cc, tmp_path / "m.c")
    ran = subprocess.run([str(binary)], input="1 2 3 4 5\n1 2 3 4 1e10\n", capture_output=True, text=True)
    assert ran.returncode == 1 and len(ran.stdout.splitlines()) == 1, ran
    assert "error: example 1, value 4 (counting from 0): 1e+10 is infinite once standardized" in ran.stderr


def _huge(spec) -> object:  # noqa: ANN001
    """The spec's model with every weight 3e38 and every bias 0: finite, but its outputs overflow on any input but
    zeros."""
    model = build_model(spec)
    load_state_dict(model, {k: Tensor(np.full(t.shape, 0 if k.endswith("bias") else 3e38, np.float32))
                            for k, t in get_state_dict(model).items()})  # fmt: skip
    return model


def test_the_c_runner_refuses_an_output_that_is_not_finite(tmp_path: Path, cc: str) -> None:
    spec = _spec(tmp_path, TINY)
    export_c(spec, _huge(spec), tmp_path / "m.c", {"task": "classify", "normalization": UNIT})
    ran = subprocess.run([str(_build(cc, tmp_path / "m.c"))], input="0 0\n1 1\n", capture_output=True, text=True)
    assert ran.returncode == 1 and len(ran.stdout.splitlines()) == 1, ran
    assert "error: example 1: the model's output is not finite (value 0 of probabilities is" in ran.stderr


def test_run_refuses_nan_outputs_or_with_allow_nonfinite_warns(tmp_path: Path) -> None:
    spec = _spec(tmp_path, TINY)
    safe_save(get_state_dict(_huge(spec)), tmp_path / "w.safetensors", {"task": "classify", "normalization": UNIT})
    np.save(tmp_path / "x.npy", np.array([[0.0, 0.0], [1.0, 1.0]], np.float32))
    args = ["run", str(tmp_path / "s.yaml"), "--weights", str(tmp_path / "w.safetensors"), "--input",
            str(tmp_path / "x.npy"), "--device", "CPU"]  # fmt: skip
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1 and "the model's output for example 1 is not finite (NaN at position [0]; 2 values"\
        in refused.output and "RuntimeWarning" not in refused.output, refused.output  # fmt: skip
    allowed = runner.invoke(app, [*args, "--allow-nonfinite"])
    assert allowed.exit_code == 0 and "warning: the model's output for example 1 is not finite" in allowed.output


def test_run_names_the_input_whose_value_is_infinite_once_standardized(tmp_path: Path) -> None:
    spec = _spec(tmp_path, TWO)
    meta = {"task": "multi", "normalization": json.dumps({"b": {"mean": 0, "std": 1e-30}}),
            "outputs": json.dumps({"out": {"task": "regress"}})}  # fmt: skip
    safe_save(get_state_dict(build_model(spec)), tmp_path / "w.safetensors", meta)
    np.savez(tmp_path / "x.npz", a=np.zeros((2, 2), np.float32), b=np.array([[1, 2, 3], [1, 1e10, 1]], np.float32))
    args = ["run", str(tmp_path / "s.yaml"), "--weights", str(tmp_path / "w.safetensors"), "--input",
            str(tmp_path / "x.npz"), "--device", "CPU"]  # fmt: skip
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1, refused.output
    assert "x.npz[b]: example 1, position [1] is 1e+10, which is infinite once standardized" in refused.output
    assert "the model was trained on values with mean 0 and std 1e-30 there" in refused.output
    allowed = runner.invoke(app, [*args, "--allow-nonfinite"])
    assert allowed.exit_code == 0 and "warning: " in allowed.output and "running them as given" in allowed.output
