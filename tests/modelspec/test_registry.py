"""The layer registry: every kind has every part, and every example of every kind holds end to end: validation finds
the example's output shape and parameter count, the built layer has exactly those parameters and computes that shape,
and the ONNX model and the C program compute what the built model computes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from specgrad import Tensor
from specgrad.export.c import export_c
from specgrad.export.onnx import export_onnx
from specgrad.modelspec.builder import Model, build_model
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.layers import LAYERS, Example, LayerDef
from specgrad.modelspec.validate import ValidSpec, validate_file
from specgrad.nn.state import get_state_dict

CASES = [(name, i) for name, d in LAYERS.items() for i in range(len(d.examples))]


def _ids(case: tuple[str, int]) -> str:
    return f"{case[0]}-{case[1]}"


@pytest.mark.parametrize("name", LAYERS)
def test_every_kind_has_every_part(name: str) -> None:
    d: LayerDef = LAYERS[name]
    assert d.name == name and d.entry.description and d.entry.args.description
    for part in (d.infer, d.build, d.onnx, d.weights, d.flops, d.decode):
        assert callable(part)
    assert d.examples, f"{name} has no examples"
    for key, f in d.entry.args.fields.items():
        assert f.description, f"{name}.{key} has no description"
    if d.entry.shorthand is not None:
        assert d.entry.shorthand in d.entry.args.fields
    written = {k for e in d.examples for k in e.args}
    assert written <= set(d.entry.args.fields), f"{name}'s examples use unknown arguments"


def _spec(tmp_path: Path, name: str, e: Example) -> ValidSpec:
    layer = {name: e.args} if e.args else name
    text = {"specgrad": 1, "name": f"one-{name}", "input": {"shape": list(e.shape), "dtype": e.dtype}, "model": [layer]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    return validate_file(path)


def _inputs(e: Example, batch: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if e.dtype.startswith("int"):
        vocab = e.args.get("vocab", 8)
        return rng.integers(0, vocab, (batch, *e.shape)).astype(e.dtype)
    return rng.standard_normal((batch, *e.shape)).astype(e.dtype)


def _forward(model: Model, x: np.ndarray) -> np.ndarray:
    with Tensor.train(False):
        return model(Tensor(x)).numpy()  # type: ignore[union-attr]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_example_validates_builds_and_runs(case: tuple[str, int], tmp_path: Path) -> None:
    name, i = case
    e = LAYERS[name].examples[i]
    spec = _spec(tmp_path, name, e)
    (step,) = spec.steps
    assert (step.out_shape, step.params) == (e.out, e.params)
    assert step.flops >= 0
    model = build_model(spec)
    state = get_state_dict(model)
    trainable = {k.removeprefix("steps.0.1."): tuple(t.shape) for k, t in state.items() if t.requires_grad}
    assert trainable == LAYERS[name].weights(e.shape, step.args), "the built layer's weights differ from the registry's"
    y = _forward(model, _inputs(e, 3, 0))
    assert y.shape == (3, *e.out) and np.isfinite(y).all()


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_example_exports_to_onnx(case: tuple[str, int], tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    name, i = case
    e = LAYERS[name].examples[i]
    spec = _spec(tmp_path, name, e)
    model = build_model(spec)
    export_onnx(spec, model, tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    for seed, batch in ((0, 3), (1, 1)):
        x = _inputs(e, batch, seed)
        (got,) = session.run(None, {"input": x})
        np.testing.assert_allclose(got, _forward(model, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", LAYERS)
def test_examples_export_to_c(name: str, tmp_path: Path, cc: str) -> None:
    """The C export compiles the kernels a kind's layer runs: every example, as a C program, prints what the model
    computes."""
    for i, e in enumerate(LAYERS[name].examples):
        spec = _spec(tmp_path, name, e)
        model = build_model(spec)
        c_file = tmp_path / f"m{i}.c"
        export_c(spec, model, c_file)
        binary = c_file.with_suffix("")
        build = subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", str(c_file), "-o", str(binary), "-lm"],
                               capture_output=True, text=True)  # fmt: skip
        assert build.returncode == 0, build.stderr
        x = _inputs(e, 2, i)
        text = "\n".join(" ".join(repr(v) for v in example.reshape(-1).tolist()) for example in x)
        out = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True).stdout
        printed = np.array([[float(v) for v in line.split()] for line in out.splitlines()], np.float32)
        np.testing.assert_allclose(printed, _forward(model, x).reshape(2, -1), rtol=1e-4, atol=1e-5)


def test_the_memory_check_counts_what_backward_keeps(tmp_path: Path) -> None:
    """Activations are the values a training step keeps for backward: at least every output, and the inner values of
    attention (the scores of each head: T x T), mlp (its hidden layer) and recurrent layers (every step's gates)."""
    for name, d in LAYERS.items():
        for e in d.examples:
            args = {**{k: None if f.required else f.default for k, f in d.entry.args.fields.items()}, **e.args}
            assert d.saved(e.shape, e.out, args) >= int(np.prod(e.out)), name
    text = "specgrad: 1\nname: long\ninput: {shape: [4096, 64]}\nmodel: [self_attention: {heads: 8}]\n"
    (tmp_path / "long.yaml").write_text(text)
    (step,) = validate_file(tmp_path / "long.yaml", batch=1).steps
    assert step.saved == 3 * 4096 * 64 + 2 * 8 * 4096 * 4096 + 2 * 4096 * 64  # NOTE: the outputs alone are 262,144
    with pytest.raises(SpecError, match="over the 4 GiB budget"):
        validate_file(tmp_path / "long.yaml", batch=8)  # NOTE: 8 x 1 GiB of attention scores
