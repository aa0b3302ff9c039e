"""A model with several inputs and outputs trains from an npz with one array per input and per output, each output
with its own loss and weight (train.losses): the step minimises the weighted sum (checked against float64 numpy),
metrics come per output, a resume is bit-identical, and `run` and the ONNX export give every output the same numbers.
Every mistake in the spec or the data is a located error."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_state_dict, load_state_dict, safe_load, safe_save
from specgrad.train.data import batches, fields, load_data
from specgrad.train.trainer import Trainer

pytestmark = pytest.mark.xdist_group("several_outputs")  # NOTE: on one worker: one training run read by many tests

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "two_heads.yaml"
runner = CliRunner()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """docs/examples/two_heads.yaml and its data, in a folder of their own (specs may be edited there)."""
    for name in ("two_heads.yaml", "two_heads.npz"):
        shutil.copy(EXAMPLE.parent / name, tmp_path / name)
    return tmp_path


def edited(folder: Path, old: str, new: str, **arrays: np.ndarray) -> Path:
    """The example with `old` replaced by `new` in the spec, and the given arrays replaced in (None: left out of) its
    npz, in `folder`."""
    spec = folder / "two_heads.yaml"
    text = EXAMPLE.read_text()
    assert old in text
    spec.write_text(text.replace(old, new))
    if arrays:
        with np.load(EXAMPLE.with_suffix(".npz")) as z:
            data = {k: z[k] for k in z.files}
        np.savez(folder / "two_heads.npz", **{k: v for k, v in {**data, **arrays}.items() if v is not None})
    return spec


def problems(spec: Path) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_data(validate_file(spec))
    return [str(p).removeprefix(f"{spec.parent}/") for p in e.value.problems]


def test_the_data_is_a_row_per_example_with_a_field_per_input_and_output(folder: Path) -> None:
    ds = load_data(validate_file(folder / "two_heads.yaml"))
    assert ds.task == "multi" and len(ds.x_train) == 320 and len(ds.x_valid) == 80
    assert ds.x_train.dtype.names == ("sensor", "context") and ds.y_train.dtype.names == ("fault", "load")
    assert ds.y_train["fault"].dtype == np.int32 and ds.y_train["load"].shape == (320, 1)
    assert (ds.heads["fault"].task, ds.heads["fault"].num_classes, ds.heads["load"].weight) == ("classify", 2, 0.5)
    # each float input normalized, the regression target standardized, with the training split's statistics
    np.testing.assert_allclose(ds.x_train["sensor"].mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(ds.y_train["load"].std(), 1, rtol=1e-4)
    with np.load(folder / "two_heads.npz") as z:
        load = z["load"]
    stats = ds.heads["load"].target_stats
    back = np.concatenate([ds.y_train["load"], ds.y_valid["load"]]).reshape(-1) * stats["std"] + stats["mean"]
    np.testing.assert_allclose(np.sort(back), np.sort(load), rtol=1e-5)  # every example once, in its own units
    x, y = next(batches(ds.x_train, ds.y_train, 16, True, np.random.default_rng(0)))
    sensor, context = fields(x, ["sensor", "context"])
    assert sensor.shape == (16, 8) and context.shape == (16, 3) and sensor.flags.c_contiguous


def test_the_step_minimises_the_weighted_sum_of_the_losses(folder: Path) -> None:
    """The first step's loss, from the initial weights, against float64 numpy: cross entropy of fault plus 0.5 x the
    mean squared error of load (reported in the target's own units)."""
    spec = validate_file(folder / "two_heads.yaml")
    trainer = Trainer.create(spec)
    w = {k: v.numpy().astype(np.float64) for k, v in get_state_dict(trainer.model).items()}
    x, y = next(batches(trainer.data.x_train, trainer.data.y_train, 16, False))
    sensor, context = (a.astype(np.float64) for a in fields(x, ["sensor", "context"]))
    hidden = np.maximum(np.concatenate([sensor @ w["steps.0.1.weight"].T + w["steps.0.1.bias"], context], 1), 0)
    logits = hidden @ w["steps.3.1.weight"].T + w["steps.3.1.bias"]
    load = hidden @ w["steps.4.1.weight"].T + w["steps.4.1.bias"]
    logp = logits - logits.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    ce = -logp[np.arange(16), y["fault"]].mean()
    std = float(trainer.data.heads["load"].target_stats["std"][0])
    mse = ((load - y["load"]) ** 2).mean() * std**2
    got = trainer.step_fn(*trainer.tensors(x, y)).item()
    np.testing.assert_allclose(got, ce + 0.5 * mse, rtol=1e-5)
    assert [(x.name, x.weight) for x in trainer.losses] == [("fault", 1.0), ("load", 0.5)]


def test_training_learns_both_outputs_and_resumes_bit_identically(folder: Path, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:  # fmt: skip
    from tests.export.test_run_contract import crash_after, same_weights

    spec = str(folder / "two_heads.yaml")
    result = runner.invoke(app, ["train", spec, "--out", str(folder / "straight")])
    assert result.exit_code == 0, result.output
    straight = next((folder / "straight").iterdir())
    rows = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    valid = [r for r in rows if r["split"] == "valid"]
    assert valid[-1]["fault.accuracy"] > 0.8 and valid[-1]["load.loss"] < valid[0]["load.loss"] / 3
    assert valid[-1]["loss"] == pytest.approx(valid[-1]["fault.loss"] + 0.5 * valid[-1]["load.loss"])
    assert "valid fault.accuracy" in result.output
    with monkeypatch.context() as patch:
        crash_after(patch, 137)  # NOTE: in epoch 7 of 20 steps each, after a checkpoint
        result = runner.invoke(app, ["train", spec, "--out", str(folder / "crashed")])
    crashed = next((folder / "crashed").iterdir())
    assert result.exit_code != 0 and not (crashed / "model.safetensors").exists()
    result = runner.invoke(app, ["train", "--resume", str(crashed), "--root", str(folder)])
    assert result.exit_code == 0, result.output
    assert same_weights(straight / "model.safetensors", crashed / "model.safetensors")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trained")
    result = runner.invoke(app, ["train", str(EXAMPLE), "--out", str(out), "--epochs", "3"])
    assert result.exit_code == 0, result.output
    return next(out.iterdir())


def test_run_gives_every_output_from_npz_or_json(trained: Path, tmp_path: Path) -> None:
    with np.load(EXAMPLE.with_suffix(".npz")) as z:
        sensor, context = z["sensor"][:5], z["context"][:5]
    np.savez(tmp_path / "in.npz", sensor=sensor, context=context)
    result = runner.invoke(app, ["run", str(trained), "--input", str(tmp_path / "in.npz")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 5 and lines[0].startswith("0: fault class ") and "; load " in lines[0]
    result = runner.invoke(app, ["run", str(trained), "--input", str(tmp_path / "in.npz"), "--output",
                                 str(tmp_path / "out.npz")])  # fmt: skip
    assert result.exit_code == 0, result.output
    with np.load(tmp_path / "out.npz") as z:
        out = {k: z[k] for k in z.files}
    assert out["fault"].shape == (5, 2) and out["load"].shape == (5, 1)
    np.testing.assert_allclose(out["fault"].sum(1), 1, rtol=1e-5)  # probabilities
    # the model itself, with the statistics in the weights, gives the same numbers
    spec = validate_file(trained / "spec.resolved.yaml", data_files=False)
    from specgrad.cli.run import load_model, read_contract

    model, meta = load_model(spec, trained / "model.safetensors")
    contract = read_contract(spec, meta, trained / "model.safetensors")
    norm = contract.inputs
    xs = [(a - norm[k]["mean"]) / norm[k]["std"] for k, a in (("sensor", sensor), ("context", context))]
    _, load = (t.numpy() for t in model(*[Tensor(x.astype(np.float32)) for x in xs]))
    target = contract.heads["load"].target
    np.testing.assert_allclose(out["load"], load * target["std"] + target["mean"], rtol=1e-5)
    (tmp_path / "in.json").write_text(json.dumps({"sensor": sensor[0].tolist(), "context": context[0].tolist()}))
    result = runner.invoke(app, ["run", str(trained), "--input", str(tmp_path / "in.json"), "--json"])
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.output)
    assert record["fault"]["probabilities"] == pytest.approx(out["fault"][0].tolist(), rel=1e-5)
    assert record["load"]["value"] == pytest.approx(float(out["load"][0, 0]), rel=1e-5)


def test_onnx_export_computes_what_run_prints(trained: Path, tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    with np.load(EXAMPLE.with_suffix(".npz")) as z:
        inputs = {"sensor": z["sensor"][:7], "context": z["context"][:7]}
    np.savez(tmp_path / "in.npz", **inputs)
    for args in (
        ["export", str(trained), "--format", "onnx", "--out", str(tmp_path / "m.onnx")],
        ["run", str(trained), "--input", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    assert "outputs fault.logits, fault.probabilities, load.prediction" in runner.invoke(
        app, ["export", str(trained), "--format", "onnx", "--out", str(tmp_path / "m.onnx")]).output  # fmt: skip
    session = ort.InferenceSession(str(tmp_path / "m.onnx"))
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_allclose(got["fault.probabilities"], z["fault"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["load.prediction"], z["load"], rtol=1e-5, atol=1e-5)
    props = {p.key: p.value for p in __import__("onnx").load(str(tmp_path / "m.onnx")).metadata_props}
    assert props["task"] == "multi" and json.loads(props["outputs"])["fault"]["task"] == "classify"


def test_the_c_program_computes_what_run_prints(trained: Path, tmp_path: Path, cc: str) -> None:
    """The runner reads each example's inputs in the spec's order and prints fault's probabilities, then load's
    prediction; a bad value is counted across the whole example."""
    with np.load(EXAMPLE.with_suffix(".npz")) as z:
        sensor, context = z["sensor"][:7], z["context"][:7]
    np.savez(tmp_path / "in.npz", sensor=sensor, context=context)
    result = runner.invoke(app, ["export", str(trained), "--format", "c", "--out", str(tmp_path / "m.c")])
    assert result.exit_code == 0, result.output
    assert "reads each example's sensor, then context" in result.output
    assert "prints fault's probabilities, then load's prediction" in result.output
    assert (
        "void two_heads_forward(const float* in_sensor, const float* in_context, float* out_fault_logits, "
        "float* out_fault_probabilities, float* out_load_prediction);"
    ) in (tmp_path / "m.h").read_text()
    ran = runner.invoke(app, ["run", str(trained), "--input", str(tmp_path / "in.npz"), "--output",
                              str(tmp_path / "out.npz")])  # fmt: skip
    assert ran.exit_code == 0, ran.output
    binary = tmp_path / "m"
    subprocess.run([cc, "-O2", "-DSPECGRAD_MAIN", str(tmp_path / "m.c"), "-o", str(binary), "-lm"], check=True)
    text = "\n".join(" ".join(repr(v) for v in [*s.tolist(), *c.tolist()]) for s, c in zip(sensor, context))
    out = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True).stdout
    printed = np.array([line.split() for line in out.splitlines()], np.float64)
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_allclose(printed[:, :2], z["fault"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(printed[:, 2:], z["load"], rtol=1e-5, atol=1e-5)
    bad = subprocess.run([str(binary)], input=" ".join(["0.5"] * 9) + " oops 1", capture_output=True, text=True)
    assert bad.returncode == 1 and "example 0, value 9 (counting from 0): 'oops' is not a number" in bad.stderr


def test_a_spec_that_asks_for_every_export_gets_them(folder: Path) -> None:
    spec = edited(folder, "train:\n", "export: [onnx, c]\ntrain:\n")
    result = runner.invoke(app, ["train", str(spec), "--out", str(folder / "runs"), "--epochs", "1"])
    assert result.exit_code == 0, result.output
    (run,) = (folder / "runs").iterdir()
    assert {p.name for p in run.iterdir()} >= {"model.onnx", "model.c", "model.h"}


SPEC_MISTAKES = [
    ("load: {loss: mse, weight: 0.5}", "lod: {loss: mse, weight: 0.5}",
     ["two_heads.yaml:22:5: error: train.losses gives no loss for the output load: every output needs one\n"
      "  hint: add load: {loss: mse} (or cross_entropy for class labels)",
      "two_heads.yaml:23:5: error: train.losses names 'lod', which is not an output of the model\n"
      "  hint: did you mean 'load'?"]),
    ("  epochs: 20\n", "  epochs: 20\n  loss: mse\n",
     ["two_heads.yaml:20:9: error: train.loss and train.losses are both given: with losses, each output's loss is "
      "written there\n  hint: remove train.loss"]),
    ("{loss: mse, weight: 0.5}", "{loss: hinge, weight: -1}",
     ["two_heads.yaml:23:18: error: train.losses.load.loss must be one of cross_entropy, mse, mae, huber, "
      "binary_cross_entropy; got 'hinge'",
      "two_heads.yaml:23:33: error: train.losses.load.weight must be between 0 and 1000000, got '-1'"]),
    ("  losses:\n    fault: {loss: cross_entropy}\n    load: {loss: mse, weight: 0.5}", "",
     ["two_heads.yaml:16:12: error: the model has 2 outputs (fault, load), so training needs a loss for each of "
      "them\n  hint: add train.losses, e.g. losses: {fault: {loss: cross_entropy}, load: {loss: mse, weight: 0.5}}"]),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "expected"), SPEC_MISTAKES)
def test_spec_mistakes_are_located(folder: Path, old: str, new: str, expected: list[str]) -> None:
    spec = edited(folder, old, new)
    with pytest.raises(SpecError) as e:
        validate_file(spec)
    assert [str(p).removeprefix(f"{folder}/") for p in e.value.problems] == expected


def test_data_mistakes_are_located_all_at_once(folder: Path) -> None:
    n = 400
    spec = edited(folder, "{loss: cross_entropy}", "{loss: cross_entropy}", context=None,
                  sensor=np.zeros((n, 7), np.float32), fault=np.arange(n) % 3)  # fmt: skip
    got = problems(spec)
    assert got == [
        "two_heads.yaml:7:19: error: 'sensor' in two_heads.npz holds examples of shape [7], but the input's shape is "
        "[8]\n  hint: set the input's shape to [7]",
        "two_heads.yaml:17:27: error: two_heads.npz has no array named 'context'\n  hint: it holds: sensor, fault, "
        "load"]  # fmt: skip
    spec = edited(folder, "{loss: cross_entropy}", "{loss: cross_entropy}", load=np.zeros(n - 1, np.float32))
    assert problems(spec) == [
        "two_heads.yaml:17:27: error: the arrays of two_heads.npz hold different numbers of examples ('sensor' 400, "
        "'context' 400, 'fault' 400, 'load' 399)\n  hint: save one example of every input and output per row"
    ]
    spec = edited(folder, "{loss: cross_entropy}", "{loss: cross_entropy}", load=np.zeros(n, np.float32),
                  fault=np.arange(n) % 3)  # fmt: skip
    assert problems(spec)[0].startswith("two_heads.yaml:17:27: error: fault[2] in two_heads.npz is 2, out of range "
                                        "of the model's 2 classes (0..1)")  # fmt: skip
    spec = edited(folder, "{loss: mse, weight: 0.5}", "{loss: cross_entropy}", fault=np.arange(n) % 2,
                  load=np.full(n, 0.5, np.float32))  # fmt: skip
    assert problems(spec) == [
        "two_heads.yaml:17:27: error: load[0] in two_heads.npz is 0.5, not a whole number, so it cannot be a class "
        "label (and 399 more examples like it)\n  hint: to predict the numbers themselves, set "
        "train.losses.load.loss: mse"]  # fmt: skip
    spec = edited(folder, "batch_size: 16}", "batch_size: 16, target: load}")
    assert problems(spec) == [
        "two_heads.yaml:17:66: error: data.target does not apply to a model with several inputs or outputs: its npz "
        "holds an array per input and per output, named after them, and each output's loss says what it learns\n"
        "  hint: remove data.target"]  # fmt: skip


def test_other_sources_feed_one_input_and_one_output(folder: Path) -> None:
    spec = edited(folder, "{source: npz, path: two_heads.npz, batch_size: 16}", "{source: spirals}")
    assert problems(spec) == [
        "two_heads.yaml:17:16: error: source spirals feeds a model with one input and one output, but this one has "
        "inputs sensor, context and outputs fault, load\n  hint: use source: npz, with one array per input and per "
        "output, named after them"]  # fmt: skip


def test_a_run_folder_is_self_contained(trained: Path) -> None:
    weights = safe_load(trained / "model.safetensors")
    assert "steps.3.1.weight" in weights
    result = runner.invoke(app, ["validate", str(trained / "spec.resolved.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["data"]
    assert data["task"] == "multi" and data["outputs"]["load"]["weight"] == 0.5


def test_the_reported_loss_of_one_output_is_from_the_weights_before_the_step(tmp_path: Path) -> None:
    """A standardized regression reports its loss in the target's units from a second, detached forward pass; it was
    computed after the optimizer step had changed the weights, so the first loss mixed old and new weights."""
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text("specgrad: 1\nname: s\ninput: {shape: [1]}\nmodel: [{linear: 16}, {tanh: {}}, {linear: 1}]\n"
                         "data: {source: sine, samples: 256, batch_size: 32}\n"
                         "train: {loss: mse, lr: 0.1}\n")  # fmt: skip
    trainer = Trainer.create(validate_file(spec_path))
    w = {k: v.numpy().astype(np.float64) for k, v in get_state_dict(trainer.model).items()}
    x, y = next(batches(trainer.data.x_train, trainer.data.y_train, 32, False))
    hidden = np.tanh(x.astype(np.float64) @ w["steps.0.1.weight"].T + w["steps.0.1.bias"])
    out = hidden @ w["steps.2.1.weight"].T + w["steps.2.1.bias"]
    std = float(trainer.data.target_stats["std"].reshape(-1)[0])
    got = trainer.step_fn(*trainer.tensors(x, y)).item()
    np.testing.assert_allclose(got, ((out - y) ** 2).mean() * std**2, rtol=1e-5)


def test_token_inputs_and_a_class_per_position(tmp_path: Path) -> None:
    """An int32 input read by an embedding, a class per position on one output, two numbers on the other."""
    rng = np.random.default_rng(0)
    tok = rng.integers(0, 20, (128, 6)).astype(np.int32)
    num = rng.standard_normal((128, 2)).astype(np.float32)
    val = np.stack([tok.sum(1) / 10, num[:, 0]], 1).astype(np.float32)
    np.savez(tmp_path / "d.npz", tok=tok, num=num, nxt=np.roll(tok, -1, axis=1), val=val)
    (tmp_path / "s.yaml").write_text(
        "specgrad: 1\nname: tokens\ninputs:\n  tok: {shape: [6], dtype: int32}\n  num: {shape: [2]}\nmodel:\n"
        "  graph:\n    - {name: e, layer: embedding, vocab: 20, dim: 8, from: tok}\n"
        "    - {name: nxt, layer: linear, out: 20, from: e}\n    - {name: f, layer: flatten, from: e}\n"
        "    - {name: c, op: concat, from: [f, num]}\n    - {name: val, layer: linear, out: 2, from: c}\n"
        "  outputs: [nxt, val]\ndata: {source: npz, path: d.npz, batch_size: 32}\n"
        "train:\n  epochs: 2\n  losses: {nxt: {loss: cross_entropy, weight: 2}, val: {loss: mse}}\n"
    )  # fmt: skip
    result = runner.invoke(app, ["train", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    np.savez(tmp_path / "in.npz", tok=tok[:2], num=num[:2])
    run = next((tmp_path / "runs").iterdir())
    result = runner.invoke(app, ["run", str(run), "--input", str(tmp_path / "in.npz"), "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)[0]
    assert len(record["nxt"]["classes"]) == 6 and len(record["val"]["values"]) == 2
    np.savez(tmp_path / "in.npz", tok=tok[:2] + 30, num=num[:2])
    result = runner.invoke(app, ["run", str(run), "--input", str(tmp_path / "in.npz")])
    assert result.exit_code == 1 and "outside the model's vocabulary (0..19)" in result.output


def test_weights_another_tool_wrote_take_each_outputs_task_from_its_loss(trained: Path, tmp_path: Path,
                                                                         cc: str) -> None:  # fmt: skip
    """Without a task in the weights' metadata, fault (cross_entropy) is served as a classifier and load (mse) as a
    regression without statistics, by run and by the C export alike (the spec saying its data is raw: without it,
    weights with no statistics are refused, as their numbers would be wrong for a spec that standardizes)."""
    bare = tmp_path / "bare.safetensors"
    safe_save(safe_load(trained / "model.safetensors"), bare)
    with np.load(EXAMPLE.with_suffix(".npz")) as z:
        sensor, context = z["sensor"][:4], z["context"][:4]
    np.savez(tmp_path / "in.npz", sensor=sensor, context=context)
    raw = ["--set", "data.normalize=false", "--set", "data.normalize_target=false"]
    refused = runner.invoke(app, ["run", str(EXAMPLE), "--weights", str(bare), "--input", str(tmp_path / "in.npz")])
    assert refused.exit_code == 1 and "--set data.normalize=false --set data.normalize_target=false" in refused.output
    for args in (
        ["run", str(EXAMPLE), "--weights", str(bare), "--input", str(tmp_path / "in.npz"), "--output",
         str(tmp_path / "out.npz"), *raw],
        ["export", str(EXAMPLE), "--weights", str(bare), "--format", "c", "--out", str(tmp_path / "m.c"), *raw],
    ):  # fmt: skip
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", str(tmp_path / "m.c"), "-o", str(tmp_path / "m"), "-lm"], check=True)
    text = "\n".join(" ".join(repr(v) for v in [*s.tolist(), *c.tolist()]) for s, c in zip(sensor, context))
    out = subprocess.run([str(tmp_path / "m")], input=text, capture_output=True, text=True, check=True).stdout
    printed = np.array([line.split() for line in out.splitlines()], np.float64)
    model = build_model(validate_file(EXAMPLE))
    load_state_dict(model, safe_load(bare))
    fault, load = (t.numpy() for t in model.outputs(Tensor(sensor), Tensor(context)))
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_allclose(z["load"], load, rtol=1e-5)  # NOTE: no statistics: the model's own numbers
        np.testing.assert_allclose(z["fault"].sum(-1), 1, rtol=1e-6)
        np.testing.assert_allclose(printed, np.concatenate([z["fault"], z["load"]], axis=1), rtol=1e-5, atol=1e-6)
