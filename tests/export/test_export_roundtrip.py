"""Every export computes what `specgrad run` computes (issue 12): for every spec in specs/, the same examples go
through `run`, the ONNX model in onnxruntime and the compiled C program, and all three agree within 1e-5."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.datasets import load_digits, load_text
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.validate import ValidSpec, validate_file
from specgrad.nn.state import get_state_dict, safe_load_metadata, safe_save
from specgrad.train.trainer import spec_hash

pytestmark = pytest.mark.xdist_group("export_roundtrip")  # NOTE: on one worker: one trained run per example spec

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

SPECS = sorted((Path(__file__).resolve().parents[2] / "specs").glob("*.yaml"))  # every file in specs/
N = 5  # examples per spec
# NOTE: probabilities lie in [0, 1], where 1e-5 absolute is the bound; predictions in the target's units (house
# prices in the hundreds) need the relative part, as float32 holds ~7 digits and onnxruntime sums in its own order
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
runner = CliRunner()


def _cli(*args: str) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def _examples(spec: ValidSpec) -> np.ndarray:
    """N real examples from the spec's own data, as a user would pass them to `run` (not yet standardized)."""
    (shape, dtype), data = next(iter(spec.inputs.values())), spec.values["data"]
    if data["source"] == "digits":
        return (load_digits()[0][:N].astype(np.float32) / 16).reshape(N, *shape)  # NOTE: run expects pixels in 0..1
    if data["source"] == "text":
        codes = np.frombuffer(load_text(data["corpus"]).encode("ascii"), np.uint8)
        return np.stack([codes[i * 97 : i * 97 + shape[0]] for i in range(N)]).astype(dtype)
    with open(Path(spec.path).parent / data["path"], newline="") as f:
        rows = list(csv.DictReader(f))[:N]
    return np.array([[float(r[c]) for c in data["features"]] for r in rows], np.float32)


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits.astype(np.float64) - logits.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def _reported(task: str, ran: np.ndarray) -> np.ndarray:
    """What run reports per example: for a language model the next-token probabilities of the last position (its
    --output file holds every position's logits)."""
    return _softmax(ran[:, -1]) if task == "language" and ran.ndim == 3 else ran


def _served(task: str, outputs: dict[str, np.ndarray]) -> np.ndarray:
    """The same from an export's outputs: probabilities (the last position's for a language model) or prediction."""
    if task == "regress":
        return outputs["prediction"]
    return outputs["probabilities"][:, -1] if task == "language" else outputs["probabilities"]


@pytest.fixture(scope="module", params=SPECS, ids=lambda p: p.stem)
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A spec trained briefly by the CLI, N examples, and what `run` wrote for them."""
    spec_path: Path = request.param
    folder = tmp_path_factory.mktemp(spec_path.stem)
    _cli("train", spec_path, "--steps", "3", "--out", folder / "runs")
    (weights,) = (folder / "runs").glob("*/model.safetensors")
    spec = validate_file(spec_path)
    x = _examples(spec)
    np.save(folder / "x.npy", x)
    _cli("run", spec_path, "--weights", weights, "--input", folder / "x.npy", "--output", folder / "y.npy")
    meta = safe_load_metadata(weights)
    return {"spec": spec, "weights": weights, "folder": folder, "x": x, "ran": np.load(folder / "y.npy"), "meta": meta}


def _onnx_outputs(spec: ValidSpec, path: Path, x: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    onnx.checker.check_model(str(path), full_check=True)
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {next(iter(spec.inputs)): x}))), props


def _c_outputs(cc: str, c_file: Path, x: np.ndarray) -> np.ndarray:
    """The C program's printed lines for the examples in x, one row per example."""
    binary = c_file.with_suffix("")
    build = subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", str(c_file), "-o", str(binary), "-lm"], capture_output=True,
                           text=True)  # fmt: skip
    assert build.returncode == 0, build.stderr
    text = "\n".join(" ".join(repr(v) for v in example.reshape(-1).tolist()) for example in x)
    out = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True).stdout
    return np.array([[float(v) for v in line.split()] for line in out.splitlines()], np.float32)


def test_onnx_computes_what_run_computes(case: dict) -> None:
    spec, meta, ran = case["spec"], case["meta"], case["ran"]
    path = case["folder"] / "model.onnx"
    _cli("export", spec.path, "--weights", case["weights"], "--format", "onnx", "--out", path)
    outputs, props = _onnx_outputs(spec, path, case["x"])
    task = meta["task"]
    assert list(outputs) == (["prediction"] if task == "regress" else ["logits", "probabilities"])
    np.testing.assert_allclose(_served(task, outputs), _reported(task, ran), **TOLERANCE)
    if task == "language" and ran.ndim == 3:
        np.testing.assert_allclose(outputs["logits"], ran, **TOLERANCE)
    assert props["task"] == task and json.loads(props["normalization"]) == json.loads(meta["normalization"])
    if task == "classify":
        classes = json.loads(meta.get("class_names") or "null") or [str(k) for k in range(ran.shape[-1])]
        assert json.loads(props["class_names"]) == classes


def test_c_computes_what_run_computes(case: dict, cc: str) -> None:
    spec, task, ran = case["spec"], case["meta"]["task"], case["ran"]
    c_file = case["folder"] / "model.c"
    _cli("export", spec.path, "--weights", case["weights"], "--format", "c", "--out", c_file)
    printed = _c_outputs(cc, c_file, case["x"])
    shape = spec.output_shape(spec.outputs[0])
    got = printed.reshape(N, *shape)[:, -1] if task == "language" else printed.reshape(N, *shape)
    np.testing.assert_allclose(got, _reported(task, ran), **TOLERANCE)


# *** metadata the trainer may not write yet: the exporters honour it now ***


STATS = {"mean": [3.5, 100.0, 40.0, 6.0], "std": [1.5, 40.0, 20.0, 4.0]}
TARGET = {"mean": [250.0], "std": [80.0]}
CLASSES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def _weights(tmp_path: Path, spec: ValidSpec, **meta: str) -> Path:
    """The spec's freshly built model saved with `meta` as the trainer writes it (plus name and spec hash)."""
    path = tmp_path / "model.safetensors"
    meta = {"name": str(spec.values["name"]), "spec_hash": spec_hash(spec.values), **meta}
    safe_save(get_state_dict(build_model(spec)), path, metadata=meta)
    return path


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """house_prices with target statistics, its examples, and the contract computed by hand."""
    tmp_path = tmp_path_factory.mktemp("house")
    spec = validate_file(next(p for p in SPECS if p.stem == "house_prices"))
    weights = _weights(tmp_path, spec, task="regress", normalization=json.dumps(STATS),
                       target_normalization=json.dumps(TARGET))  # fmt: skip
    x = _examples(spec)
    model = build_model(spec)
    from specgrad.nn.state import load_state_dict, safe_load

    load_state_dict(model, safe_load(weights))
    z = (x - np.float32(STATS["mean"])) / np.float32(STATS["std"])
    want = model(Tensor(z)).numpy() * np.float32(TARGET["std"]) + np.float32(TARGET["mean"])
    return {"spec": spec, "weights": weights, "x": x, "want": want, "folder": tmp_path}


def test_regression_exports_report_the_target_units(house: dict, cc: str) -> None:
    spec, folder = house["spec"], house["folder"]
    assert house["want"].min() > 100  # NOTE: de-standardized: a standardized output would be near 0
    _cli("export", spec.path, "--weights", house["weights"], "--format", "onnx", "--out", folder / "m.onnx")
    outputs, props = _onnx_outputs(spec, folder / "m.onnx", house["x"])
    np.testing.assert_allclose(outputs["prediction"], house["want"], **TOLERANCE)
    assert json.loads(props["target_normalization"]) == TARGET and props["task"] == "regress"
    _cli("export", spec.path, "--weights", house["weights"], "--format", "c", "--out", folder / "m.c")
    np.testing.assert_allclose(_c_outputs(cc, folder / "m.c", house["x"]), house["want"], **TOLERANCE)


def test_run_reports_the_target_units(house: dict) -> None:
    folder = house["folder"]
    np.save(folder / "x.npy", house["x"])
    _cli("run", house["spec"].path, "--weights", house["weights"], "--input", folder / "x.npy", "--output",
         folder / "y.npy")  # fmt: skip
    np.testing.assert_allclose(np.load(folder / "y.npy"), house["want"], **TOLERANCE)


def test_class_names_go_into_the_onnx_metadata(tmp_path: Path) -> None:
    spec = validate_file(next(p for p in SPECS if p.stem == "digits_mlp"))
    # NOTE: digits_mlp standardizes its inputs, so its weights carry statistics (run and export refuse them without)
    stats = json.dumps({"mean": 0.3, "std": 0.4})
    weights = _weights(tmp_path, spec, task="classify", normalization=stats, class_names=json.dumps(CLASSES))
    _cli("export", spec.path, "--weights", weights, "--format", "onnx", "--out", tmp_path / "m.onnx")
    outputs, props = _onnx_outputs(spec, tmp_path / "m.onnx", _examples(spec))
    assert json.loads(props["class_names"]) == CLASSES and list(outputs) == ["logits", "probabilities"]
    np.testing.assert_allclose(outputs["probabilities"], _softmax(outputs["logits"]), **TOLERANCE)


def test_metadata_that_does_not_fit_is_an_error(tmp_path: Path) -> None:
    spec = validate_file(next(p for p in SPECS if p.stem == "digits_mlp"))
    for meta, words in ((dict(task="classify", class_names='["a", "b"]'), "class_names must be 10 strings"),
                        (dict(task="regress", target_normalization='{"mean": [1, 2]}'), "does not fit the shape"),
                        (dict(task="classify", normalization="{"), "'normalization' is not valid JSON")):  # fmt: skip
        weights = _weights(tmp_path, spec, **meta)
        for fmt in ("onnx", "c"):
            result = runner.invoke(app, ["export", str(spec.path), "--weights", str(weights), "--format", fmt,
                                         "--out", str(tmp_path / f"m.{fmt}")])  # fmt: skip
            assert result.exit_code == 1 and words in result.output and "Traceback" not in result.output, meta
