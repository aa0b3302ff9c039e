"""The lstm and gru kinds in whole specs: a character language model (embedding -> lstm -> linear) and a sequence
classifier validate with their cost report, export to ONNX with one ONNX node per layer, and train on the sonnets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.export.onnx import export_onnx
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import ValidSpec, validate_file

runner = CliRunner()

LANGUAGE_MODEL = {
    "specgrad": 1,
    "name": "char-lstm",
    "seed": 0,
    "input": {"shape": [32], "dtype": "int32"},
    "model": [{"embedding": {"vocab": 128, "dim": 32}}, {"lstm": {"hidden": 64}}, {"linear": 128}],
    "data": {"source": "text", "corpus": "sonnets", "context": 32, "batch_size": 32},
    "train": {"epochs": 1, "optimizer": "adam", "lr": 0.01, "metrics": ["loss"]},
}


def write(tmp_path: Path, spec: dict, name: str = "spec") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def one_layer(tmp_path: Path, layer: object, shape: list[int]) -> ValidSpec:
    spec = {"specgrad": 1, "name": "one", "input": {"shape": shape}, "model": [layer]}
    return validate_file(write(tmp_path, spec))


def test_language_model_validates_with_its_cost(tmp_path: Path) -> None:
    spec = validate_file(write(tmp_path, LANGUAGE_MODEL))
    emb, lstm, head = spec.steps
    assert (lstm.out_shape, head.out_shape) == ((32, 64), (32, 128))
    assert lstm.params == 4 * 64 * (32 + 64 + 2)
    assert lstm.flops == 32 * (2 * (32 + 64) * 4 * 64 + 13 * 64)


def test_classifier_of_whole_sequences(tmp_path: Path) -> None:
    """`return: last` and the shorthand (`gru: 8` is hidden 8): a (hidden,) output, the input of a linear head."""
    spec = {"specgrad": 1, "name": "clf", "input": {"shape": [10, 3]},
            "model": [{"gru": {"hidden": 8, "layers": 2, "return": "last"}}, {"linear": 4}]}  # fmt: skip
    gru, head = validate_file(write(tmp_path, spec)).steps
    assert (gru.out_shape, head.out_shape) == ((8,), (4,))
    assert gru.flops == 10 * (2 * (3 + 8) * 3 * 8 + 11 * 8 + 2 * (8 + 8) * 3 * 8 + 11 * 8)
    assert one_layer(tmp_path, {"lstm": 5}, [4, 2]).steps[0].out_shape == (4, 5)


def test_wrong_inputs_and_arguments_are_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"needs a \(sequence, features\) input, got shape \[6\]"):
        one_layer(tmp_path, {"lstm": {"hidden": 4}}, [6])
    with pytest.raises(SpecError, match="return"):
        one_layer(tmp_path, {"gru": {"hidden": 4, "return": "all"}}, [6, 2])
    with pytest.raises(SpecError, match="hidden"):
        one_layer(tmp_path, {"gru": {"layers": 2}}, [6, 2])


@pytest.mark.parametrize("kind, shape, layers, unrolled", [("lstm", [10000, 8], 1, "10,000 x 1 is 10,000"),
                                                          ("gru", [1025, 1], 2, "1,025 x 2 is 2,050")])  # fmt: skip
def test_sequences_too_long_to_train_are_refused(tmp_path: Path, kind: str, shape: list, layers: int,
                                                 unrolled: str) -> None:  # fmt: skip
    """A 10,000-step lstm validated (its cost looked small), then took many minutes and gigabytes to capture one
    training step: the cells run one step at a time (1,000 x 2 took 70 s and 0.8 GB)."""
    with pytest.raises(SpecError, match=rf"layer 0 \({kind}\) cannot take shape \[{shape[0]}, {shape[1]}\] from the "
                       rf"input \(line 4\): it needs at most 2,048 steps in all \(sequence x layers\).*: {unrolled}: "
                       r"use a shorter sequence or fewer layers") as e:  # fmt: skip
        one_layer(tmp_path, {kind: {"hidden": 4, "layers": layers}}, shape)
    assert e.value.problems[0].loc.line == 8
    assert one_layer(tmp_path, {kind: {"hidden": 4, "layers": 2}}, [1024, 1]).steps[0].out_shape == (1024, 4)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_two_layers_export_to_onnx(kind: str, tmp_path: Path) -> None:
    """Two stacked layers with biases, every step's output: one ONNX node per layer, onnxruntime computes what
    specgrad computes (the registry's examples cover one layer, no bias, and the last step)."""
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    spec = one_layer(tmp_path, {kind: {"hidden": 7, "layers": 2}}, [6, 5])
    model = build_model(spec)
    export_onnx(spec, model, tmp_path / "m.onnx")
    ops = [n.op_type for n in onnx.load(str(tmp_path / "m.onnx")).graph.node]
    assert ops.count(kind.upper()) == 2
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((4, 6, 5)).astype(np.float32)
    (got,) = session.run(None, {"input": x})
    with Tensor.train(False):
        want = model(Tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def train(tmp_path: Path, steps: int, context: int = 32) -> list[dict]:
    """`steps` training steps of LANGUAGE_MODEL through the CLI, over windows of `context` characters."""
    out = tmp_path / "runs"
    spec = {**LANGUAGE_MODEL, "input": {"shape": [context], "dtype": "int32"},
            "data": {**LANGUAGE_MODEL["data"], "context": context}}  # fmt: skip
    result = runner.invoke(app, ["train", str(write(tmp_path, spec)), "--out", str(out), "--steps", str(steps)])
    assert result.exit_code == 0, result.output
    (folder,) = out.glob("*")
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_language_model_trains_a_few_steps(tmp_path: Path) -> None:
    """Windows of 8 characters: the cell runs once per position, each a kernel of its own (the slow tier's 32)."""
    losses = [r["loss"] for r in train(tmp_path, 20, context=8) if r["split"] == "train"]
    assert losses and all(math.isfinite(v) for v in losses)


@pytest.mark.slow
def test_language_model_learns_the_sonnets(tmp_path: Path) -> None:
    """200 steps (29 epochs of 247 windows of 32 characters): from ln(128) = 4.85 to below 2.0 on the training set,
    and below 2.5 on the validation set."""
    records = train(tmp_path, 200)
    epochs = [r["loss"] for r in records if r["split"] == "train_epoch"]
    valid = [r["loss"] for r in records if r["split"] == "valid"]
    assert epochs[0] > 3.0 and epochs[-1] < 2.0, epochs
    assert min(valid) < 2.5, valid
