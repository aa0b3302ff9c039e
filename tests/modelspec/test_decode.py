"""Stepwise decoding (specgrad.modelspec.decode): a model fed one position at a time, keeping what its layers need of
the earlier positions (attention keys and values, recurrent state), computes at each position exactly what the whole
model computes there, for every kind's every example and for the language models we ship, through one TinyJit
capture, and again after starting over at position 0. What has no stepwise form is named."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from specgrad import Tensor, TinyJit
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.decode import Decoder, NotStepwise
from specgrad.modelspec.layers import LAYERS
from specgrad.modelspec.layers.base import defaults
from specgrad.modelspec.validate import ValidSpec, validate_file
from specgrad.nn.state import get_state_dict

SPECS = Path(__file__).resolve().parents[2] / "specs"
CASES = [(name, i) for name, d in LAYERS.items() for i in range(len(d.examples))]
# NOTE: what a language model is made of: each must step through a sequence (else generate reruns whole windows)
STEPWISE = {"embedding", "positional", "self_attention", "lstm", "gru", "linear", "mlp", "layernorm", "dropout", "gelu",
            "relu", "tanh"}  # fmt: skip
ATOL = 1e-5


def _randomize(model: object, seed: int) -> None:
    """Every weight (zero biases and unit norms too) drawn anew, so no term of a step vanishes by accident."""
    rng = np.random.default_rng(seed)
    for t in get_state_dict(model).values():
        t.assign(Tensor(rng.normal(0, 0.3, t.shape).astype(np.float32)))


def _positions(x: np.ndarray) -> list[Tensor]:
    return [Tensor(np.ascontiguousarray(x[:, t : t + 1])) for t in range(x.shape[1])]


@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_each_kinds_step_computes_what_the_layer_computes(case: tuple[str, int]) -> None:
    name, i = case
    d = LAYERS[name]
    e = d.examples[i]
    args = {**defaults(d.entry.args), **e.args}
    layer = d.build(e.shape, args)
    stepper = d.decode(layer, e.shape, args, 2)
    if stepper is None:
        return  # NOTE: what the kind cannot step through is checked by the models below (NotStepwise)
    _randomize(layer, i)
    rng = np.random.default_rng(i)
    if e.dtype.startswith("int"):
        x = rng.integers(0, args.get("vocab", 8), (2, *e.shape)).astype(e.dtype)
    else:
        x = rng.standard_normal((2, *e.shape)).astype(e.dtype)
    full = layer(Tensor(x)).numpy()
    for _ in range(2):  # NOTE: the second pass starts over at position 0: state from the first must not leak
        for t, xt in enumerate(_positions(x)):
            got = stepper(xt, Tensor(np.array([t], np.int32))).realize()
            Tensor.corealize(list(stepper.state))
            np.testing.assert_allclose(got.numpy(), full[:, t : t + 1], atol=ATOL, rtol=1e-5, err_msg=f"position {t}")


def test_the_kinds_a_language_model_is_made_of_step_through_a_sequence() -> None:
    stepwise = set()
    for name, d in LAYERS.items():
        for e in d.examples:
            args = {**defaults(d.entry.args), **e.args}
            if d.decode(d.build(e.shape, args), e.shape, args, 1) is not None:
                stepwise.add(name)
    assert STEPWISE <= stepwise, f"no stepwise form: {sorted(STEPWISE - stepwise)}"
    assert not {"flatten", "conv1d", "maxpool", "global_avgpool"} & stepwise, "these read other positions"


def _language_model(tmp_path: Path, model: list | dict, context: int = 12) -> ValidSpec:
    text = {"specgrad": 1, "name": "lm", "seed": 0, "input": {"shape": [context], "dtype": "int32"}, "model": model}
    path = tmp_path / "lm.yaml"
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    return validate_file(path, data_files=False)


def _check_stepwise(spec: ValidSpec, seed: int) -> None:
    """The spec's model with weights drawn from `seed`, through one TinyJit capture: every position of a text, then a
    second text from position 0."""
    model = build_model(spec)
    _randomize(model, seed)
    decoder = Decoder(spec, model)
    step = TinyJit(decoder.__call__)
    rng = np.random.default_rng(seed)
    for _ in range(2):
        codes = rng.integers(0, 100, (1, decoder.length)).astype(np.int32)
        full = model(Tensor(codes)).numpy()
        for t, xt in enumerate(_positions(codes)):
            got = step(xt, Tensor(np.array([t], np.int32))).numpy()
            np.testing.assert_allclose(got, full[:, t : t + 1], atol=ATOL, rtol=1e-5, err_msg=f"position {t}")
    assert step.cnt == 2 * decoder.length, "every position replays the one capture"


@pytest.mark.parametrize(("spec_file", "sets"), [
    ("char_gpt.yaml", ["vars.d=32", "vars.context=16"]),
    ("zoo/nanogpt_char.yaml", ["vars.d=48", "vars.layers=2", "vars.context=24"]),
    ("zoo/lstm_lm.yaml", ["vars.width=24", "vars.context=10"]),
])  # fmt: skip
def test_the_shipped_language_models_step_as_they_compute(spec_file: str, sets: list[str]) -> None:
    spec = validate_file(SPECS / spec_file, sets, data_files=False)
    _check_stepwise(spec, seed=1)


def test_a_graph_of_every_stepwise_piece_steps_as_it_computes(tmp_path: Path) -> None:
    """gru, a causal attention without biases, concat along the features, mul, mlp and dropout in one graph."""
    spec = _language_model(tmp_path, {"graph": [
        {"name": "e", "layer": "embedding", "vocab": 100, "dim": 8, "from": "input"},
        {"name": "p", "layer": "positional", "from": "e"},
        {"name": "g", "layer": "gru", "hidden": 8, "layers": 2, "from": "p"},
        {"name": "a", "layer": "self_attention", "heads": 2, "causal": True, "bias": False, "from": "p"},
        {"name": "m", "op": "mul", "from": ["g", "a"]},
        {"name": "c", "op": "concat", "axis": -1, "from": ["m", "p"]},
        {"name": "d", "layer": "dropout", "p": 0.5, "from": "c"},
        {"name": "f", "layer": "mlp", "hidden": 12, "activation": "silu", "from": "d"},
        {"name": "n", "layer": "layernorm", "from": "f"},
        {"name": "out", "layer": "linear", "out": 100, "from": "n"}], "outputs": ["out"]})  # fmt: skip
    _check_stepwise(spec, seed=2)


@pytest.mark.parametrize(("model", "said"), [
    ([{"embedding": {"vocab": 100, "dim": 8}}, {"self_attention": {"heads": 2}}, {"linear": 100}],
     "layer 1 (self_attention) does not compute one position"),
    ([{"embedding": {"vocab": 100, "dim": 8}}, {"lstm": {"hidden": 8, "return": "last"}}, {"linear": 100}],
     "layer 1 (lstm) does not compute one position"),
    ([{"embedding": {"vocab": 100, "dim": 8}}, "flatten", {"linear": 100}], "layer 1 (flatten) does not compute"),
    ({"graph": [{"name": "e", "layer": "embedding", "vocab": 100, "dim": 8, "from": "input"},
                {"name": "c", "op": "concat", "axis": 0, "from": ["e", "e"]}], "outputs": ["c"]},
     "node 'c' (concat) joins values along the sequence"),
])  # fmt: skip
def test_what_reads_other_positions_is_named(tmp_path: Path, model: list | dict, said: str) -> None:
    spec = _language_model(tmp_path, model)
    with pytest.raises(NotStepwise, match=re.escape(said)):
        Decoder(spec, build_model(spec))


@pytest.mark.slow_on("GPU")  # NOTE: the decoder is Tensor ops, which the GPU runs one by one in tests/test_ops.py
def test_decoding_is_the_same_on_every_device(tmp_path: Path, dev: str) -> None:
    spec = _language_model(tmp_path, [{"embedding": {"vocab": 100, "dim": 8}}, "positional",
                                      {"self_attention": {"heads": 2, "causal": True}}, {"lstm": 8}, "layernorm",
                                      {"linear": 100}], context=6)  # fmt: skip
    _check_stepwise(spec, seed=3)


def test_a_step_the_output_does_not_read_does_not_stop_stepping(tmp_path: Path) -> None:
    spec = _language_model(tmp_path, {"graph": [
        {"name": "e", "layer": "embedding", "vocab": 100, "dim": 8, "from": "input"},
        {"name": "unused", "layer": "flatten", "from": "e"},
        {"name": "out", "layer": "linear", "out": 100, "from": "e"}], "outputs": ["out"]})  # fmt: skip
    _check_stepwise(spec, seed=4)
