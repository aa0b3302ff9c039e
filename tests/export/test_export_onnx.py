"""ONNX export: every example spec and hand-written specs for the layers they leave out run in onnxruntime and agree
with the specgrad model on the same inputs; errors name what cannot be exported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from specgrad import Tensor
from specgrad.export.onnx import export_onnx
from specgrad.modelspec.builder import Model, build_model
from specgrad.modelspec.layers import ACTIVATIONS
from specgrad.modelspec.validate import ValidSpec, validate_file
from specgrad.nn.state import get_state_dict, load_state_dict

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

SPECS = sorted((Path(__file__).resolve().parents[2] / "specs").glob("*.yaml"))  # every file in specs/

ACTIVATION_NODES = "".join(f"    - {{name: {a}, layer: {a}, from: x}}\n" for a in ACTIVATIONS)
ACTIVATIONS_SPEC = f"""
specgrad: 1
name: every-activation
inputs:
  x: {{shape: [3, 5]}}
model:
  graph:
{ACTIVATION_NODES}    - {{name: mlp, layer: mlp, hidden: 7, activation: silu, from: x}}
  outputs: [{", ".join(ACTIVATIONS)}, mlp]
"""

CONV_SPEC = """
specgrad: 1
name: conv-pool-norm
input: {shape: [2, 9, 9]}
model:
  - conv2d: {out: 4, kernel: 3, stride: 2, padding: 2, dilation: 2, groups: 2, bias: false}
  - batchnorm: {eps: 0.1, momentum: 0.5}
  - avgpool: {kernel: 2, stride: 1}
  - maxpool: 2
  - reshape: {shape: [4, 4]}
  - batchnorm: {momentum: 0.5}
  - flatten
  - dropout: 0.3
  - linear: {out: 6, bias: false}
  - batchnorm: {momentum: 0.5}
  - softplus
"""

GRAPH_SPEC = """
specgrad: 1
name: ops-and-inputs
inputs:
  a: {shape: [3, 4]}
  b: {shape: [3, 4]}
  ids: {shape: [5], dtype: int64}
  small: {shape: [3, 4], dtype: uint8}
  half: {shape: [4], dtype: float16}
model:
  graph:
    - {name: sum, op: add, from: [a, b, a]}
    - {name: prod, op: mul, from: [a, b]}
    - {name: rows, op: concat, axis: 0, from: [sum, prod]}
    - {name: cols, op: concat, from: [sum, prod, b]}
    - {name: mixed, op: add, from: [small, a]}
    - {name: scaled, layer: linear, out: 2, from: small}
    - {name: halfout, layer: linear, out: 3, from: half}
    - {name: emb, layer: embedding, vocab: 10, dim: 4, from: ids}
    - {name: pos, layer: positional, from: emb}
    - {name: attn, layer: self_attention, heads: 2, from: pos}
    - {name: norm, layer: layernorm, eps: 0.01, from: attn}
  outputs: [rows, cols, mixed, scaled, halfout, norm]
"""


RESERVED_SPEC = """
specgrad: 1
name: reserved-names
inputs:
  x: {shape: [3]}
model:
  graph:
    - {name: logits, layer: linear, out: 4, from: x}
    - {name: probabilities, layer: tanh, from: logits}
    - {name: scores, layer: linear, out: 5, from: probabilities}
  outputs: [scores]
"""


def _spec(tmp_path: Path, text: str) -> ValidSpec:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return validate_file(path)


def _examples(spec: ValidSpec, seed: int = 0, batch: int = 3, scale: float = 1.0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.integers(0, 8, (batch, *shape)).astype(dtype) if dtype.startswith(("int", "uint"))
            else (scale * rng.standard_normal((batch, *shape))).astype(dtype)
            for name, (shape, dtype) in spec.inputs.items()}  # fmt: skip


def _check_export(spec: ValidSpec, model: Model, path: Path, opset: int = 17, scale: float = 1.0) -> None:
    """Export, check, and compare onnxruntime with the model on a few random batches."""
    export_onnx(spec, model, path, opset=opset)
    onnx.checker.check_model(str(path), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == list(spec.inputs)
    assert [o.name for o in session.get_outputs()] == list(spec.outputs)
    for seed, batch in ((0, 3), (1, 1)):
        xs = _examples(spec, seed, batch, scale)
        got = session.run(None, xs)
        with Tensor.train(False):
            want = model(*(Tensor(x) for x in xs.values()))
        for name, g, w in zip(spec.outputs, got, want if isinstance(want, tuple) else (want,)):
            assert g.shape == (batch, *spec.output_shape(name)), name
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"output {name}")


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_example_spec_exports_and_matches(path: Path, tmp_path: Path) -> None:
    spec = validate_file(path)
    _check_export(spec, build_model(spec), tmp_path / "model.onnx")


@pytest.mark.parametrize("opset", [17, 20])
def test_every_activation_matches(opset: int, tmp_path: Path) -> None:
    spec = _spec(tmp_path, ACTIVATIONS_SPEC)
    _check_export(spec, build_model(spec), tmp_path / "model.onnx", opset=opset, scale=4.0)  # NOTE: reach the tails
    used = {n.op_type for n in onnx.load(str(tmp_path / "model.onnx")).graph.node}
    assert ({"Gelu", "Mish"} <= used) == (opset >= 20)


def test_conv_pool_and_batchnorm_with_running_stats(tmp_path: Path) -> None:
    spec = _spec(tmp_path, CONV_SPEC)
    model = build_model(spec)
    with Tensor.train():
        model(Tensor(_examples(spec, seed=5, batch=8, scale=2.0)["input"]) + 1.0)  # NOTE: updates running stats
    rng = np.random.default_rng(1)
    affine = {k: Tensor(rng.uniform(0.5, 1.5, t.shape).astype(np.float32)) for k, t in get_state_dict(model).items()
              if k.split(".")[1] in ("1", "5", "9") and k.endswith(("weight", "bias"))}  # fmt: skip
    load_state_dict(model, affine, strict=False)
    state = get_state_dict(model)
    assert not np.allclose(state["steps.1.1.running_mean"].numpy(), 0)
    assert not np.allclose(state["steps.9.1.running_var"].numpy(), 1)
    _check_export(spec, model, tmp_path / "model.onnx")


def test_ops_inputs_of_every_kind_and_attention(tmp_path: Path) -> None:
    spec = _spec(tmp_path, GRAPH_SPEC)
    _check_export(spec, build_model(spec), tmp_path / "model.onnx")
    graph = onnx.load(str(tmp_path / "model.onnx")).graph
    assert all(i.type.tensor_type.shape.dim[0].dim_param == "batch" for i in graph.input)
    assert {"steps.9.1.in_proj_weight", "steps.8.1.weight"} <= {t.name for t in graph.initializer}


def test_write_is_atomic_and_replaces_the_old_file(tmp_path: Path) -> None:
    spec = validate_file(SPECS[-1])
    path = tmp_path / "model.onnx"
    path.write_bytes(b"old")
    export_onnx(spec, build_model(spec), path)
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]
    onnx.checker.check_model(str(path))


def test_bad_opset_and_missing_onnx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = validate_file(SPECS[-1])
    model = build_model(spec)
    with pytest.raises(ValueError, match="supports opsets 17 to .*got 13"):
        export_onnx(spec, model, tmp_path / "model.onnx", opset=13)
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(RuntimeError, match=r"pip install 'specgrad\[onnx\]'"):
        export_onnx(spec, model, tmp_path / "model.onnx")


def test_a_classifier_standardizes_its_input_and_names_its_outputs(tmp_path: Path) -> None:
    spec = _spec(tmp_path, RESERVED_SPEC)  # NOTE: inner values named like the outputs are renamed in the graph
    model = build_model(spec)
    stats = {"mean": [1.0, -2.0, 3.0], "std": [2.0, 0.5, 8.0]}
    meta = {"task": "classify", "normalization": json.dumps(stats), "class_names": json.dumps(list("abcde"))}
    export_onnx(spec, model, tmp_path / "model.onnx", meta=meta)
    proto = onnx.load(str(tmp_path / "model.onnx"))
    props = {p.key: p.value for p in proto.metadata_props}
    assert props == {
        "task": "classify",
        "normalization": meta["normalization"],
        "class_names": '["a", "b", "c", "d", "e"]',
    }
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [o.name for o in session.get_outputs()] == ["logits", "probabilities"]
    x = 5 * np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    logits, probs = session.run(None, {"x": x})
    want = model(Tensor((x - np.float32(stats["mean"])) / np.float32(stats["std"]))).numpy()
    np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-6)
    e = np.exp(want.astype(np.float64) - want.max(-1, keepdims=True))
    np.testing.assert_allclose(probs, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_regression_reports_the_target_units_and_tokens_stay_ids(tmp_path: Path) -> None:
    spec = validate_file(next(p for p in SPECS if p.stem == "house_prices"))
    model = build_model(spec)
    meta = {"task": "regress", "normalization": "{}", "target_normalization": '{"mean": 7.5, "std": [3.0]}'}
    _, got = _run(spec, model, tmp_path / "model.onnx", meta, np.ones((2, 4), np.float32))
    np.testing.assert_allclose(got["prediction"], model(Tensor(np.ones((2, 4), np.float32))).numpy() * 3 + 7.5,
                               rtol=1e-6)  # fmt: skip
    lm = validate_file(next(p for p in SPECS if p.stem == "char_gpt"))
    tokens = np.arange(128, dtype=np.int32).reshape(2, 64)
    meta = {"task": "language", "normalization": '{"mean": 100.0, "std": 1.0}'}  # NOTE: run leaves token ids alone
    lm_model = build_model(lm)
    props, got = _run(lm, lm_model, tmp_path / "lm.onnx", meta, tokens)
    np.testing.assert_allclose(got["logits"], lm_model(Tensor(tokens)).numpy(), rtol=1e-4, atol=1e-5)
    assert got["probabilities"].shape == (2, 64, 128) and np.allclose(got["probabilities"].sum(-1), 1, atol=1e-5)
    assert props["task"] == "language" and "class_names" not in props


def _run(spec: ValidSpec, model: Model, path: Path, meta: dict, x: np.ndarray) -> tuple[dict, dict]:
    export_onnx(spec, model, path, meta=meta)
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return props, dict(zip([o.name for o in session.get_outputs()], session.run(None, {next(iter(spec.inputs)): x})))


def test_unknown_task_and_several_outputs_are_errors(tmp_path: Path) -> None:
    spec = validate_file(SPECS[-1])
    with pytest.raises(ValueError, match="names the task 'segment'"):
        export_onnx(spec, build_model(spec), tmp_path / "model.onnx", meta={"task": "segment"})
    graph = _spec(tmp_path, GRAPH_SPEC)
    with pytest.raises(ValueError, match="a classify export needs one input and one output"):
        export_onnx(graph, build_model(graph), tmp_path / "model.onnx", meta={"task": "classify"})


FILLS_SPEC = """
specgrad: 1
name: fills
input: {shape: [7]}
model: [{linear: 5}, tanh, {linear: 3}]
"""
# NOTE: a (median 1.5), b (drop_row), c (one_hot, filled with the category x), d (no strategy), e (fill -2.25)
FILLS_COLUMNS = {"features": ["a", "b", "c", "d", "e"],
                 "categorical": {"c": {"encoding": "one_hot", "values": ["x", "y", "z"]}},
                 "missing": {"a": {"strategy": "median", "fill": "1.5"},
                             "b": {"strategy": "drop_row", "fill": None},
                             "c": {"strategy": "fill", "fill": "x"},
                             "e": {"strategy": "fill", "fill": "-2.25"}}}  # fmt: skip
FILLS_STATS = {"mean": [1.0, 0.5, 0.0, 0.0, 0.0, -3.0, 2.0], "std": [2.0, 4.0, 1.0, 1.0, 1.0, 0.5, 8.0]}


def _fills_meta(columns: dict) -> dict[str, str]:
    return {"task": "classify", "normalization": json.dumps(FILLS_STATS), "columns": json.dumps(columns)}


def test_a_nan_where_training_filled_becomes_the_fill_and_stays_nan_elsewhere(tmp_path: Path) -> None:
    spec = _spec(tmp_path, FILLS_SPEC)
    model = build_model(spec)
    filled = np.array([[1.5, 2.0, 0, 1, 0, 7.0, -2.25], [0.25, -1.0, 1, 0, 0, 3.0, 9.0]], np.float32)
    x = filled.copy()
    x[0, [0, 6]] = np.nan  # NOTE: a and e missing: their fills
    props, got = _run(spec, model, tmp_path / "model.onnx", _fills_meta(FILLS_COLUMNS), x)
    assert json.loads(props["columns"]) == FILLS_COLUMNS  # NOTE: still named, though the model applies them
    want = model(Tensor((filled - np.float32(FILLS_STATS["mean"])) / np.float32(FILLS_STATS["std"]))).numpy()
    np.testing.assert_allclose(got["logits"], want, rtol=1e-6, atol=1e-6)
    for at in (1, 2, 4, 5):  # NOTE: b (drop_row), a one-hot value of c, d (no strategy): NaN stays NaN
        bad = filled.copy()
        bad[1, at] = np.nan
        _, got = _run(spec, model, tmp_path / "model.onnx", _fills_meta(FILLS_COLUMNS), bad)
        assert np.isnan(got["probabilities"][1]).all() and np.isfinite(got["probabilities"][0]).all(), at
    ops = [n.op_type for n in onnx.load(str(tmp_path / "model.onnx")).graph.node]
    assert ops[:4] == ["IsNaN", "And", "Where", "Sub"]  # NOTE: filled in the input's units, before standardizing


def test_a_model_without_numeric_fills_has_the_graph_it_had(tmp_path: Path) -> None:
    spec = _spec(tmp_path, FILLS_SPEC)
    model = build_model(spec)
    plain = {"task": "classify", "normalization": json.dumps(FILLS_STATS)}
    export_onnx(spec, model, tmp_path / "plain.onnx", meta=plain)
    want = onnx.load(str(tmp_path / "plain.onnx")).graph.SerializeToString()
    for missing in ({}, {"b": {"strategy": "drop_row", "fill": None}}, {"c": {"strategy": "mode", "fill": "y"}}):
        meta = _fills_meta({**FILLS_COLUMNS, "missing": missing})
        export_onnx(spec, model, tmp_path / "model.onnx", meta=meta)
        assert onnx.load(str(tmp_path / "model.onnx")).graph.SerializeToString() == want, missing


def test_a_float16_input_is_filled_in_float16(tmp_path: Path) -> None:
    spec = _spec(tmp_path, FILLS_SPEC.replace("shape: [7]", "shape: [7], dtype: float16"))
    model = build_model(spec)
    columns = {**FILLS_COLUMNS, "missing": {"a": {"strategy": "fill", "fill": "0.1"}}}
    x = np.array([[np.nan, 2.0, 0, 1, 0, 7.0, -2.25]], np.float16)
    _, got = _run(spec, model, tmp_path / "model.onnx", {"task": "classify", "columns": json.dumps(columns)}, x)
    x[0, 0] = np.float16(0.1)
    _, want = _run(spec, model, tmp_path / "model.onnx", {"task": "classify", "columns": json.dumps(columns)}, x)
    np.testing.assert_array_equal(got["logits"], want["logits"])
