"""`specgrad export`: safetensors copies, and C source that compiles with cc and reproduces `specgrad run` (every spec's
roundtrip through run, ONNX and C is in test_export_roundtrip.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.nn.state import safe_load

pytestmark = pytest.mark.xdist_group("export")  # NOTE: on one worker: one trained run exported by many tests

SPECS = Path(__file__).resolve().parents[2] / "specs"
runner = CliRunner()


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    result = runner.invoke(app, ["train", str(SPECS / "digits_mlp.yaml"), "--steps", "40", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "digits-mlp-1" / "model.safetensors"


def test_export_safetensors(trained: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy.safetensors"
    result = runner.invoke(app, ["export", str(SPECS / "digits_mlp.yaml"), "--weights", str(trained), "--format",
                                 "safetensors", "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    a, b = safe_load(trained), safe_load(out)
    assert a.keys() == b.keys() and all((a[k].numpy() == b[k].numpy()).all() for k in a)


def test_export_c_compiles_and_matches_run(trained: Path, tmp_path: Path, cc: str) -> None:
    c_file = tmp_path / "digits.c"
    result = runner.invoke(app, ["export", str(SPECS / "digits_mlp.yaml"), "--weights", str(trained), "--format", "c",
                                 "--out", str(c_file)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (tmp_path / "digits.h").exists()
    binary = tmp_path / "digits"
    build = subprocess.run([cc, "-O2", "-DSPECGRAD_MAIN", str(c_file), "-o", str(binary), "-lm"], capture_output=True,
                           text=True)  # fmt: skip
    assert build.returncode == 0, build.stderr
    from specgrad.datasets import load_digits

    x = (load_digits()[0][:20].astype(np.float32) / 16).reshape(20, 1, 8, 8)
    np.save(tmp_path / "x.npy", x)
    ran = runner.invoke(app, ["run", str(SPECS / "digits_mlp.yaml"), "--weights", str(trained), "--input",
                              str(tmp_path / "x.npy"), "--output", str(tmp_path / "p.npy")])  # fmt: skip
    assert ran.exit_code == 0, ran.output
    probs = np.load(tmp_path / "p.npy")
    text = " ".join(repr(float(v)) for v in x.reshape(-1))
    lines = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True).stdout.split("\n")
    printed = np.array([[float(v) for v in line.split()] for line in lines if line])  # NOTE: the probabilities
    np.testing.assert_allclose(printed, probs, rtol=1e-5, atol=1e-5)
    header = (tmp_path / "digits.h").read_text()
    assert "void digits_mlp_forward(const float* input, float* logits, float* probabilities);" in header


def test_export_errors(trained: Path, tmp_path: Path) -> None:
    bad = runner.invoke(app, ["export", str(SPECS / "digits_mlp.yaml"), "--weights", str(trained), "--format", "tflite",
                              "--out", str(tmp_path / "m")])  # fmt: skip
    assert bad.exit_code == 2 and "unknown format 'tflite'" in bad.output
    wrong = runner.invoke(app, ["export", str(SPECS / "digits_cnn.yaml"), "--weights", str(trained), "--format", "c",
                                "--out", str(tmp_path / "m.c")])  # fmt: skip
    assert wrong.exit_code == 1 and "do not fit the model" in wrong.output and "Traceback" not in wrong.output


def test_a_model_that_only_moves_values_exports_to_c(tmp_path: Path, cc: str) -> None:
    """No kernels for flatten; an expanded or permuted view of the input is copied into place (never the input's
    bytes in the input's order)."""
    from specgrad import Tensor
    from specgrad.export.c import export_c
    from specgrad.modelspec.builder import build_model
    from specgrad.modelspec.validate import validate_file

    (tmp_path / "s.yaml").write_text("specgrad: 1\nname: moves\ninput: {shape: [2, 3]}\nmodel: [flatten]\n")
    spec = validate_file(tmp_path / "s.yaml")
    model = build_model(spec)
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)

    class Moves:  # NOTE: the spec's model with another forward, keeping its (empty) state
        def __init__(self, forward: Callable[[Tensor], Tensor]):
            self.forward, self.steps = forward, model.steps

        def __call__(self, t: Tensor) -> Tensor:
            return self.forward(t)

        def outputs(self, t: Tensor) -> tuple[Tensor, ...]:
            return (self.forward(t),)

    cases = {"flat": model, "permuted": Moves(lambda t: t.permute(0, 2, 1).reshape(1, 6)),
             "expanded": Moves(lambda t: t[:, :1, :1].expand(1, 2, 3).reshape(1, 6))}  # fmt: skip
    for name, m in cases.items():
        c_file = tmp_path / f"{name}.c"
        export_c(spec, m, c_file)  # type: ignore[arg-type]
        binary = c_file.with_suffix("")
        subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", str(c_file), "-o", str(binary), "-lm"], check=True)
        out = subprocess.run([str(binary)], input="0 1 2 3 4 5\n", capture_output=True, text=True, check=True).stdout
        np.testing.assert_array_equal(np.array(out.split(), np.float32), m(Tensor(x)).numpy().reshape(-1), name)


def _one_input_runner(tmp_path: Path, cc: str, text: str) -> tuple[Any, Path]:
    """The model of a one-input spec (fresh weights) and its C runner, built."""
    from specgrad.export.c import export_c
    from specgrad.modelspec.builder import build_model
    from specgrad.modelspec.validate import validate_file

    (tmp_path / "s.yaml").write_text(text)
    spec = validate_file(tmp_path / "s.yaml")
    model = build_model(spec)
    export_c(spec, model, tmp_path / "m.c")
    binary = tmp_path / "m"
    subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", str(tmp_path / "m.c"), "-o", str(binary), "-lm"], check=True)
    return model, binary


@pytest.mark.parametrize("dtype", ["uint8", "bool", "int64"])
def test_whole_number_inputs_export_to_c(dtype: str, tmp_path: Path, cc: str) -> None:
    """Every input dtype the spec allows exports: the runner reads whole numbers in the dtype's range (bool: 0 and 1)
    and refuses others."""
    from specgrad import Tensor

    text = f"specgrad: 1\nname: w\ninput: {{shape: [3], dtype: {dtype}}}\nmodel: [linear: 2]\n"
    model, binary = _one_input_runner(tmp_path, cc, text)
    x = np.array([[1, 0, 1]], dtype=dtype)
    out = subprocess.run([str(binary)], input="1 0 1\n", capture_output=True, text=True, check=True).stdout
    np.testing.assert_allclose(np.array(out.split(), np.float32), model(Tensor(x)).numpy().reshape(-1), rtol=1e-5)
    bad = subprocess.run([str(binary)], input="1 0 2.5\n", capture_output=True, text=True)
    assert bad.returncode == 1 and "is not a whole number" in bad.stderr


def test_the_c_runner_refuses_token_ids_outside_the_vocabulary_as_run_does(tmp_path: Path, cc: str) -> None:
    """An embedding reads ids 0..vocab-1; run refuses others, and so does the runner (its lookup would give zeros)."""
    from specgrad import Tensor

    text = "specgrad: 1\nname: t\ninput: {shape: [3], dtype: int32}\nmodel: [embedding: {vocab: 10, dim: 2}, flatten]\n"
    model, binary = _one_input_runner(tmp_path, cc, text)
    out = subprocess.run([str(binary)], input="0 9 4\n", capture_output=True, text=True, check=True).stdout
    want = model(Tensor(np.array([[0, 9, 4]], np.int32))).numpy().reshape(-1)
    np.testing.assert_allclose(np.array(out.split(), np.float32), want, rtol=1e-6)
    for line in ("0 10 4\n", "-1 0 0\n"):
        bad = subprocess.run([str(binary)], input=line, capture_output=True, text=True)
        assert bad.returncode == 1 and "is not a token id of the model's vocabulary (a whole number from 0 to 9)" in \
            bad.stderr, bad.stderr  # fmt: skip


PORTS = """specgrad: 1
name: ports
inputs:
  tok: {shape: [4], dtype: int32}
  x-1: {shape: [3]}
  x_1: {shape: [2]}
model:
  graph:
    - {name: emb, layer: embedding, vocab: 10, dim: 2, from: tok}
    - {name: flat, layer: flatten, from: emb}
    - {name: both, op: concat, from: [flat, x-1, x_1]}
    - {name: float, layer: linear, out: 3, from: both}
    - {name: same, layer: flatten, from: x-1}
  outputs: [float, same]
"""


def test_several_inputs_and_outputs_export_to_c(tmp_path: Path, cc: str) -> None:
    """A parameter per input and per output in the spec's order, named in C's letters and made unique (x-1 and x_1),
    C keywords kept apart (an output named float); an output that gives an input back is copied from it; the runner
    reads each example's inputs in order, each checked against its own dtype, and prints every output on one line."""
    from specgrad import Tensor
    from specgrad.export.c import export_c
    from specgrad.modelspec.builder import build_model
    from specgrad.modelspec.validate import validate_file

    (tmp_path / "s.yaml").write_text(PORTS)
    spec = validate_file(tmp_path / "s.yaml")
    model = build_model(spec, seed=3)
    export_c(spec, model, tmp_path / "p.c")
    header = (tmp_path / "p.h").read_text()
    assert ("void ports_forward(const int* in_tok, const float* in_x_1, const float* in_x_1_2, float* out_float, "
            "float* out_same);") in header  # fmt: skip
    assert "#define ports_IN_SIZE 9\n#define ports_OUT_SIZE 6\n" in header
    assert "#define ports_in_x_1_2_SIZE 2  /* the input x_1 */" in header
    binary = tmp_path / "p"
    subprocess.run([cc, "-O1", "-Wall", "-Werror", "-DSPECGRAD_MAIN", str(tmp_path / "p.c"), "-o", str(binary), "-lm"],
                   check=True)  # fmt: skip
    rng = np.random.default_rng(0)
    tok, a, b = rng.integers(0, 10, (5, 4)).astype(np.int32), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    text = "\n".join(" ".join(repr(v) for v in row) for row in np.concatenate([tok, a, b], axis=1).tolist())
    out = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True).stdout
    printed = np.array([line.split() for line in out.splitlines()], np.float32)
    want = [o.numpy() for o in model.outputs(Tensor(tok), Tensor(a.astype(np.float32)), Tensor(b.astype(np.float32)))]
    np.testing.assert_allclose(printed, np.concatenate(want, axis=1), rtol=1e-5, atol=1e-6)
    for bad, said in [
        ("1 2 3 9.5", "value 3 (counting from 0): '9.5' is not a token id of the model's vocabulary (a whole number"),
        ("1 2 3 10", "value 3 (counting from 0): '10' is not a token id of the model's vocabulary"),
        ("1 2 3 4 0.5 0.5 0.5 0.5 1e39", "value 8 (counting from 0): '1e39' is too large for a float"),
        ("1 2 3 4 0.5", "the input ends inside example 0: it has 5 of the 9 numbers an example needs"),
    ]:
        ran = subprocess.run([str(binary)], input=bad, capture_output=True, text=True)
        assert ran.returncode == 1 and said in ran.stderr and ran.stdout == "", ran.stderr
