"""How weights come and train (modelspec/weights.py): `tie:` shares one tensor and counts it once, `trainable: false`
freezes a layer, `lr_scale:` multiplies its learning rate, and `init:` starts from a safetensors file, checked name by
name and shape by shape with located errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specgrad import Tensor
from specgrad.export.onnx import export_onnx
from specgrad.flags import Context
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_state_dict, safe_save
from specgrad.train.trainer import Trainer

TIED = """\
specgrad: 1
name: tied
seed: 1
input: {shape: [8], dtype: int32}
data: {source: text, corpus: sonnets, context: 8, batch_size: 4}
train: {optimizer: sgd, lr: 0.5}
model:
  graph:
    - {name: emb, layer: embedding, vocab: 128, dim: 16, from: input}
    - {name: norm, layer: layernorm, from: emb}
    - {name: head, layer: linear, out: 128, bias: false, tie: emb, from: norm}
  outputs: [head]
"""


def _write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _one_step(trainer: Trainer) -> None:
    x, y = trainer.data.x_train[: trainer.spec.batch_size], trainer.data.y_train[: trainer.spec.batch_size]
    trainer.step_fn([Tensor(x)], [Tensor(y)]).realize()


def test_a_tied_weight_is_one_tensor_counted_once(tmp_path: Path) -> None:
    spec = validate_file(_write(tmp_path, TIED))
    untied = validate_file(_write(tmp_path, TIED.replace(", tie: emb", ""), "untied.yaml"))
    assert spec.params == untied.params - 128 * 16 == 128 * 16 + 2 * 16
    trainer = Trainer.create(spec)
    emb, head = trainer.model.steps[0][1], trainer.model.steps[2][1]
    assert head.weight is emb.weight  # type: ignore[union-attr]
    before = emb.weight.numpy().copy()  # type: ignore[union-attr]
    _one_step(trainer)
    after = emb.weight.numpy()  # type: ignore[union-attr]
    # NOTE: rows of characters the batch never holds still change: the head's gradient reaches every row
    unseen = sorted(set(range(128)) - set(np.unique(trainer.data.x_train[:4]).tolist()))
    assert not np.allclose(before[unseen], after[unseen])
    assert len(trainer.opt.params) == 3  # the shared weight and the layernorm's scale and shift, each once


def test_a_tied_model_exports_to_onnx(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    spec = validate_file(_write(tmp_path, TIED))
    model = build_model(spec)
    export_onnx(spec, model, tmp_path / "m.onnx")
    x = np.random.default_rng(0).integers(0, 128, (2, 8)).astype(np.int32)
    (got,) = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(None, {"input": x})
    np.testing.assert_allclose(got, model(Tensor(x)).numpy(), rtol=1e-4, atol=1e-5)  # type: ignore[union-attr]


@pytest.mark.parametrize("change, message", [
    ("tie: emb", None),
    ("tie: embb", r"ties its weight to 'embb', which is not a layer of the model\n  hint: did you mean 'emb'\?"),
    ("tie: norm", r"\[128, 16\] to the weight of 'norm' \(layernorm\), which is \[16\]: a tied weight needs the same"),
    ("tie: head", r"node 'head' ties its weight to itself"),
    ("tie: emb.weight", r"ties its weight to 'emb.weight', which is not a layer of the model\n  hint: tie names a "
     r"layer, not one of its weights: tie: emb"),
])  # fmt: skip
def test_tie_errors_are_located(tmp_path: Path, change: str, message: str | None) -> None:
    path = _write(tmp_path, TIED.replace("tie: emb", change))
    if message is None:
        validate_file(path)
        return
    with pytest.raises(SpecError, match=message) as e:
        validate_file(path)
    assert (e.value.problems[0].loc.file, e.value.problems[0].loc.line) == (str(path), 11)


def test_a_layer_without_a_weight_cannot_tie(tmp_path: Path) -> None:
    path = _write(
        tmp_path, TIED.replace("{name: norm, layer: layernorm,", "{name: norm, layer: mlp, hidden: 4, tie: emb,")
    )
    with pytest.raises(SpecError, match=r"unknown key 'tie' in node 'norm'.mlp"):
        validate_file(path)
    relu = _write(tmp_path, TIED.replace("layer: layernorm,", "layer: relu, trainable: false,"), "relu.yaml")
    with pytest.raises(SpecError, match=r"unknown key 'trainable' in node 'norm'.relu"):
        validate_file(relu)


FROZEN = """\
specgrad: 1
name: frozen
input: {shape: [64]}
data: {source: digits, batch_size: 8}
train: {optimizer: sgd, lr: 0.1}
model:
  - linear: {out: 32, trainable: false}
  - relu
  - linear: {out: 10, lr_scale: LR}
"""


def _weights(trainer: Trainer) -> dict[str, np.ndarray]:
    return {k: v.numpy().copy() for k, v in get_state_dict(trainer.model).items()}


def test_trainable_false_keeps_a_layer_and_lr_scale_multiplies_its_step(tmp_path: Path) -> None:
    deltas = {}
    for scale in ("1.0", "2.0", "0.0"):
        trainer = Trainer.create(validate_file(_write(tmp_path, FROZEN.replace("LR", scale))))
        before = _weights(trainer)
        _one_step(trainer)
        after = _weights(trainer)
        for k in ("steps.0.1.weight", "steps.0.1.bias"):
            np.testing.assert_array_equal(before[k], after[k])
        deltas[scale] = after["steps.2.1.weight"] - before["steps.2.1.weight"]
    assert np.abs(deltas["1.0"]).max() > 0
    np.testing.assert_allclose(deltas["2.0"], 2 * deltas["1.0"], rtol=1e-5, atol=1e-7)
    assert not deltas["0.0"].any()


def test_every_layer_frozen_is_an_error(tmp_path: Path) -> None:
    spec = validate_file(_write(tmp_path, FROZEN.replace("lr_scale: LR", "trainable: false")))
    with pytest.raises(SpecError, match="the model has no trainable weights"):
        Trainer.create(spec)


INIT = FROZEN.replace("lr_scale: LR", "lr_scale: 1") + "init:\n  from: start.safetensors\n  map: MAP\n"


def _start(tmp_path: Path, **shapes: tuple[int, ...]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    safe_save({k: Tensor(v) for k, v in arrays.items()}, tmp_path / "start.safetensors")
    return arrays


def test_init_loads_mapped_weights_and_keeps_the_rest_fresh(tmp_path: Path) -> None:
    arrays = _start(tmp_path, w=(32, 64), b=(32,), other=(3,))
    spec = validate_file(_write(tmp_path, INIT.replace("MAP", "{0.weight: w, 0.bias: b}")))
    fresh = _weights(Trainer.create(validate_file(_write(tmp_path, FROZEN.replace("LR", "1"), "fresh.yaml"))))
    loaded = _weights(Trainer.create(spec))
    np.testing.assert_array_equal(loaded["steps.0.1.weight"], arrays["w"])
    np.testing.assert_array_equal(loaded["steps.0.1.bias"], arrays["b"])
    np.testing.assert_array_equal(loaded["steps.2.1.weight"], fresh["steps.2.1.weight"])
    run_model = build_model(spec)  # NOTE: running or exporting trained weights never reads the init file
    assert not np.array_equal(get_state_dict(run_model)["steps.0.1.weight"].numpy(), arrays["w"])


def test_init_without_a_map_takes_the_files_names(tmp_path: Path) -> None:
    arrays = _start(tmp_path, **{"2.weight": (10, 32)})
    spec = validate_file(_write(tmp_path, INIT.replace("  map: MAP\n", "")))
    np.testing.assert_array_equal(_weights(Trainer.create(spec))["steps.2.1.weight"], arrays["2.weight"])


@pytest.mark.parametrize("tensors, mapping, message, line", [
    ({"w": (32, 63)}, "{0.weight: w}", r"the model's 0.weight is \[32, 64\], but 'w' in start.safetensors is "
     r"\[32, 63\]", 12),
    ({"w": (32, 64)}, "{0.weight: ww}", r"start.safetensors has no tensor 'ww'\n  hint: did you mean 'w'\?", 12),
    ({"w": (32, 64)}, "{0.wieght: w}", r"init.map names '0.wieght', which is not a weight of the model\n  hint: "
     r"did you mean '0.weight'\?", 12),
    ({"stray": (3,)}, None, r"start.safetensors holds 'stray', which is not a weight of the model", 11),
])  # fmt: skip
def test_init_errors_are_located(tmp_path: Path, tensors: dict, mapping: str | None, message: str, line: int) -> None:
    _start(tmp_path, **tensors)
    text = INIT.replace("MAP", mapping) if mapping else INIT.replace("  map: MAP\n", "")
    path = _write(tmp_path, text)
    with pytest.raises(SpecError, match=message) as e:
        validate_file(path)
    assert e.value.problems[0].loc.line == line


def test_init_file_must_exist_inside_the_spec_folder(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    path = _write(tmp_path / "in", INIT.replace("start.safetensors", "../start.safetensors").replace("MAP", "{}"))
    _start(tmp_path, w=(1,))
    with pytest.raises(SpecError, match="init.from '../start.safetensors' leaves the folders a spec may read from"):
        validate_file(path)
    missing = _write(tmp_path, INIT.replace("MAP", "{}"), "missing.yaml")
    (tmp_path / "start.safetensors").unlink()
    with pytest.raises(SpecError, match="init.from: no such file"):
        validate_file(missing)
    validate_file(missing, data_files=False)  # NOTE: run and export do not need it


def test_weight_std_draws_the_weight_and_needs_one(tmp_path: Path) -> None:
    spec = validate_file(_write(tmp_path, TIED.replace("dim: 16,", "dim: 16, weight_std: 0.02,")))
    weight = build_model(spec).steps[0][1].weight.numpy()  # type: ignore[union-attr]
    assert abs(weight.std() - 0.02) < 0.002 and abs(weight.mean()) < 0.002
    bad = _write(tmp_path, TIED.replace("layer: layernorm,", "layer: mlp, hidden: 4, weight_std: 0.1,"), "bad.yaml")
    with pytest.raises(SpecError, match=r"unknown key 'weight_std' in node 'norm'.mlp"):
        validate_file(bad)


def test_a_run_started_from_init_weights_is_self_contained_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`specgrad train` loads init: once; the run folder's resolved spec names the file relative to the run folder
    (it validates by itself, with the same hash), and --resume continues from the checkpoint."""
    from specgrad.cli.main import app
    from typer.testing import CliRunner

    from specgrad.nn.state import safe_load, safe_load_metadata
    from specgrad.train.run_folder import read_resolved_spec, spec_hash

    monkeypatch.chdir(tmp_path)  # NOTE: the project root, holding the spec, its init file and the runs
    arrays = _start(tmp_path, w=(32, 64), b=(32,))
    spec = _write(tmp_path, INIT.replace("MAP", "{0.weight: w, 0.bias: b}"))
    runner = CliRunner()
    result = runner.invoke(app, ["train", str(spec), "--steps", "3", "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "runs" / "frozen-1"
    resolved = read_resolved_spec(folder)
    assert spec_hash(resolved.values) == safe_load_metadata(folder / "model.safetensors")["spec_hash"]
    trained = safe_load(folder / "model.safetensors")
    np.testing.assert_array_equal(trained["steps.0.1.weight"].numpy(), arrays["w"])  # NOTE: frozen, from the file
    (tmp_path / "start.safetensors").rename(tmp_path / "moved.safetensors")  # NOTE: resuming does not need it
    resumed = runner.invoke(app, ["train", "--resume", str(folder)])
    assert resumed.exit_code == 0, resumed.output
    seeded = runner.invoke(app, ["train", str(spec), "--steps", "1", "--set", "init=null", "--out", "o"])
    assert seeded.exit_code == 0, seeded.output


def test_spec_hash_leaves_out_defaults(tmp_path: Path) -> None:
    """A train or data key written at its default value (or added by a later specgrad with a default) keeps a run's
    hash; the model is hashed as written."""
    from specgrad.train.run_folder import spec_hash

    plain = validate_file(_write(tmp_path, FROZEN.replace("lr_scale: LR", "lr_scale: 1")))
    spelled = validate_file(_write(tmp_path, FROZEN.replace("lr_scale: LR", "lr_scale: 1").replace(
        "lr: 0.1}", "lr: 0.1, momentum: 0.0}"), "spelled.yaml"))  # fmt: skip
    assert spec_hash(plain.values) == spec_hash(spelled.values)
    assert spec_hash(plain.values) != spec_hash(
        validate_file(_write(tmp_path, FROZEN.replace("LR", "2"), "b.yaml")).values
    )


def test_the_cost_report_counts_trainable_parameters(tmp_path: Path) -> None:
    """validate says how many parameters train; the memory check costs a frozen one 4 bytes (its weight), a trainable
    one 16 (weight, gradient, two Adam moments)."""
    import json

    from specgrad.cli.main import app
    from typer.testing import CliRunner

    path = _write(tmp_path, FROZEN.replace("lr_scale: LR", "lr_scale: 1"))
    out = json.loads(CliRunner().invoke(app, ["validate", str(path), "--json"]).output)
    assert (out["params"], out["trainable_params"]) == (64 * 32 + 32 + 32 * 10 + 10, 32 * 10 + 10)
    assert "2,410 parameters (330 trainable)" in CliRunner().invoke(app, ["validate", str(path)]).output
    big = FROZEN.replace("linear: {out: 32, trainable: false}", "linear: {out: 1000000, trainable: TRAIN}").replace(
        "lr_scale: LR", "lr_scale: 1")  # fmt: skip
    # NOTE: 75M parameters: 0.4 GiB with the wide layer frozen, 1.1 GiB with it trained, against a budget of 1 GiB
    with Context(SPEC_MEMORY_GB=1):
        validate_file(_write(tmp_path, big.replace("TRAIN", "false"), "frozen_big.yaml"))
        with pytest.raises(SpecError, match="over the 1 GiB budget"):
            validate_file(_write(tmp_path, big.replace("TRAIN", "true"), "trained_big.yaml"))


BLOCK_TIE = """\
specgrad: 1
name: block-tie
input: {shape: [4]}
blocks:
  pair:
    graph:
      - {name: up, layer: linear, out: 4, from: in}
      - {name: mid, layer: linear, out: 4, tie: TIE, from: up}
      - {name: out, layer: relu, from: mid}
model:
  graph:
    - {name: first, layer: linear, out: 2, from: input}
    - {name: body, block: pair, repeat: 50, from: first}
  outputs: [body]
"""


@pytest.mark.parametrize("tie, message", [
    ("mid", "node 'body.0.mid' ties its weight to itself"),
    ("first", r"node 'body.0.mid' ties its weight \[4, 4\] to the weight of 'first' \(linear\), which is \[2, 4\]"),
])  # fmt: skip
def test_a_tie_in_a_repeated_block_is_reported_once(tmp_path: Path, tie: str, message: str) -> None:
    """One mistake written once in a block is one error at its line, not one per copy (50 here)."""
    with pytest.raises(SpecError, match=message) as e:
        validate_file(_write(tmp_path, BLOCK_TIE.replace("TIE", tie)))
    assert [p.loc.line for p in e.value.problems] == [8]


def test_a_tie_across_block_copies_shares_one_weight(tmp_path: Path) -> None:
    spec = validate_file(_write(tmp_path, BLOCK_TIE.replace("TIE", "body.0.up").replace("out: 2", "out: 4")))
    model = build_model(spec)
    layers = dict(model.steps)
    assert all(layers[f"body.{i}.mid"].weight is layers["body.0.up"].weight for i in range(50))  # type: ignore
    assert spec.params == 4 * 4 + 4 + 50 * (4 * 4 + 4) + 50 * 4


def _raw_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...], bytes]]) -> None:
    """A safetensors file as another tool writes it (no checksums), any dtype."""
    import json
    import struct

    header, offset = {}, 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(d for _, _, d in tensors.values()))


@pytest.mark.parametrize("mapping, message, line, col", [
    ("{0.weight: 3}", r"init.map: the value of 0.weight must name a tensor of start.safetensors, got '3'", 12, 19),
    ("{0.weight: [w]}", r"the value of 0.weight must name a tensor of start.safetensors, got a list", 12, 19),
    ("{0.weight: null}", r"the value of 0.weight must name a tensor of start.safetensors, got 'null'", 12, 19),
    ("{0.weight: {a: w}}", r"the value of 0.weight must name a tensor of start.safetensors, got a mapping", 12, 19),
])  # fmt: skip
def test_init_map_values_must_be_tensor_names(tmp_path: Path, mapping: str, message: str, line: int, col: int) -> None:
    """A map value that is not text was quoted as Python's repr of the loader's node ('[YNode(value=...')."""
    _start(tmp_path, w=(32, 64))
    path = _write(tmp_path, INIT.replace("MAP", mapping))
    for files in (True, False):  # NOTE: run and export check the map too, without the file
        with pytest.raises(SpecError, match=message) as e:
            validate_file(path, data_files=files)
        assert "YNode" not in str(e.value)
        assert (e.value.problems[0].loc.line, e.value.problems[0].loc.col) == (line, col)


@pytest.mark.parametrize("dtype, message", [
    ("I32", r"'w' in start.safetensors holds int32 values, but the model's 0.weight is a weight of floating-point "
     r"numbers"),
    ("BOOL", "holds bool values"),
    ("F16", None),
    ("F64", None),
])  # fmt: skip
def test_init_tensors_hold_floats(tmp_path: Path, dtype: str, message: str | None) -> None:
    """An integer or bool tensor of the right shape was cast into the weight without a word."""
    numpy_type = {"I32": np.int32, "BOOL": np.bool_, "F16": np.float16, "F64": np.float64}[dtype]
    data = np.ones((32, 64), numpy_type).tobytes()
    _raw_safetensors(tmp_path / "start.safetensors", {"w": (dtype, (32, 64), data)})
    path = _write(tmp_path, INIT.replace("MAP", "{0.weight: w}"))
    if message is None:
        loaded = _weights(Trainer.create(validate_file(path)))
        np.testing.assert_array_equal(loaded["steps.0.1.weight"], np.ones((32, 64), np.float32))
        return
    with pytest.raises(SpecError, match=message) as e:
        validate_file(path)
    assert (e.value.problems[0].loc.line, e.value.problems[0].loc.col) == (12, 19)


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e300])
def test_init_tensors_hold_finite_numbers(tmp_path: Path, value: float) -> None:
    """A NaN weight trained until the loss became NaN, then blamed the learning rate (exit 4); a float64 too large
    for float32 became infinity the same way."""
    weight = np.zeros((32, 64))
    weight[3, 5] = value
    _raw_safetensors(tmp_path / "start.safetensors", {"w": ("F64", (32, 64), weight.tobytes())})
    spec = validate_file(_write(tmp_path, INIT.replace("MAP", "{0.weight: w}")))
    with pytest.raises(SpecError, match=r"init: 'w' in start.safetensors holds NaN or infinity as float32 \(1 of its "
                       r"2,048 values\), so 0.weight cannot start from it") as e:  # fmt: skip
        Trainer.create(spec)
    assert (e.value.problems[0].loc.line, e.value.problems[0].loc.col) == (12, 19)


def test_init_of_a_tied_weight_is_refused(tmp_path: Path) -> None:
    """A map naming both weights of one tensor (emb.weight and the tied head.weight) loaded one and dropped the other
    without a word; naming the tied one alone loaded it through the other layer's name."""
    _start(tmp_path, a=(128, 16), b=(128, 16))
    for mapping, col in (("{head.weight: a}", 39), ("{emb.weight: a, head.weight: b}", 54)):
        path = _write(tmp_path, TIED + f"init: {{from: start.safetensors, map: {mapping}}}\n")
        with pytest.raises(SpecError, match=r"init: head.weight is the weight of 'emb' \(tie: emb\), so it starts as "
                           r"emb.weight does\n  hint: load emb.weight instead") as e:  # fmt: skip
            validate_file(path)
        assert (e.value.problems[0].loc.line, e.value.problems[0].loc.col) == (13, col)


def test_init_reads_at_most_max_file_mb(tmp_path: Path) -> None:
    """validate said valid; train then refused the file (the bound was checked only when the tensors were read)."""
    from specgrad.flags import Context

    _start(tmp_path, w=(32, 64), pad=(1024, 300))
    with Context(MAX_FILE_MB=1):
        validate_file(_write(tmp_path, INIT.replace("MAP", "{0.weight: w}")))  # NOTE: tensors not read do not count
    wide = _write(tmp_path, INIT.replace("MAP", "{0.weight: w}").replace("out: 32", "out: 4200"), "wide.yaml")
    _start(tmp_path, w=(4200, 64))
    with Context(MAX_FILE_MB=1), pytest.raises(SpecError, match=r"init: the tensors it loads from start.safetensors "
                                               r"are 1.0 MiB, over the limit of 1 MiB") as e:  # fmt: skip
        validate_file(wide)
    assert e.value.problems[0].loc.line == 11


def test_init_null_starts_from_the_seed(tmp_path: Path) -> None:
    """`init: null` (how --set init=null removes an inherited init:) was an internal error (exit 70)."""
    spec = validate_file(_write(tmp_path, FROZEN.replace("LR", "1") + "init: null\n"))
    fresh = validate_file(_write(tmp_path, FROZEN.replace("LR", "1"), "fresh.yaml"))
    a, b = _weights(Trainer.create(spec)), _weights(Trainer.create(fresh))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    _start(tmp_path, **{"0.weight": (32, 64)})
    no_map = validate_file(_write(tmp_path, INIT.replace("MAP", "null"), "no_map.yaml"))
    assert not np.array_equal(_weights(Trainer.create(no_map))["steps.0.1.weight"], b["steps.0.1.weight"])


def test_a_run_stopped_before_its_first_checkpoint_starts_over_from_its_init_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--resume of a run with no checkpoint yet trains from step 0 as the run began: from its init: weights (it used
    to build the model without them and train from seeded random weights, with exit 0), and the same bits."""
    import shutil

    from specgrad.cli.main import app
    from typer.testing import CliRunner

    from specgrad.nn.state import safe_load

    monkeypatch.chdir(tmp_path)
    _start(tmp_path, w=(32, 64), b=(32,))
    spec = _write(tmp_path, INIT.replace("MAP", "{0.weight: w, 0.bias: b}"))
    runner = CliRunner()
    assert runner.invoke(app, ["train", str(spec), "--steps", "3", "--out", "runs"]).exit_code == 0
    folder = tmp_path / "runs" / "frozen-1"
    whole = {k: v.numpy() for k, v in safe_load(folder / "model.safetensors").items()}
    shutil.rmtree(folder / "checkpoints")
    for name in ("model.safetensors", "metrics.jsonl", "metrics.csv"):
        (folder / name).unlink(missing_ok=True)
    resumed = runner.invoke(app, ["train", "--resume", str(folder)])
    assert resumed.exit_code == 0 and "starting it from step 0" in resumed.output, resumed.output
    again = {k: v.numpy() for k, v in safe_load(folder / "model.safetensors").items()}
    assert again.keys() == whole.keys() and all(np.array_equal(again[k], whole[k]) for k in whole)
