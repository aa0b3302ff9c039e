"""specs/zoo/: each classic model validates with the parameter count of its published model; the small ones train a
few steps on bundled or generated data, and each exports (slow tier)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.export.onnx import export_onnx
from specgrad.modelspec.builder import build_model
from specgrad.modelspec.validate import validate_file

ZOO = Path(__file__).resolve().parents[2] / "specs" / "zoo"

# file -> (overrides that give the published configuration, its published parameter count, where the count is from)
PUBLISHED: dict[str, tuple[list[str], int, str]] = {
    "lenet5.yaml": ([], 61_706, "LeNet-5, modern form: tanh, average pooling, 32x32 input"),
    "resnet18.yaml": ([], 11_689_512, "torchvision resnet18"),
    "vgg16.yaml": ([], 138_357_544, "torchvision vgg16 (configuration D, no batch norm)"),
    "mobilenet_v2.yaml": ([], 3_504_872, "torchvision mobilenet_v2, width 1.0"),
    "lstm_lm.yaml": (["vars.vocab=10000", "data=null"], 4_653_200,
                     "Zaremba et al. 2014 small: 2 x 200 LSTM, 10,000 words, PyTorch's two biases per gate"),
    "unet_small.yaml": ([], 117_073, "the same network built in PyTorch (test_small_unet_is_the_torch_network)"),
    "gpt2_small.yaml": ([], 124_439_808, "GPT-2 small with the output projection tied to the token embedding"),
    "nanogpt_char.yaml": (["vars.vocab=65", "data=null"], 10_745_088,
                          "nanoGPT shakespeare_char: 65 characters, 10.65M without the 98,304 position weights"),
}  # fmt: skip


def test_every_zoo_spec_has_its_published_count() -> None:
    assert sorted(PUBLISHED) == sorted(p.name for p in ZOO.glob("*.yaml"))


@pytest.mark.parametrize("name", PUBLISHED)
def test_zoo_spec_has_the_published_parameter_count(name: str) -> None:
    overrides, count, _ = PUBLISHED[name]
    assert validate_file(ZOO / name, overrides, batch=1).params == count


@pytest.mark.parametrize("name", PUBLISHED)
def test_zoo_spec_validates_as_written(name: str) -> None:
    """As a user runs `specgrad validate` on it: a model-only spec (GPT-2) is costed per example, within the budget."""
    validate_file(ZOO / name)


@pytest.mark.slow
@pytest.mark.parametrize("name", PUBLISHED)
def test_zoo_spec_exports_to_onnx(name: str, tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    spec = validate_file(ZOO / name, batch=1)
    model = build_model(spec)
    export_onnx(spec, model, tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    ((shape, dtype),) = spec.inputs.values()
    x = np.random.default_rng(0).integers(0, 100, (1, *shape)).astype(dtype)
    (got,) = session.run(None, {next(iter(spec.inputs)): x})
    with Tensor.train(False):
        want = model(Tensor(x)).numpy()  # type: ignore[union-attr]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_small_unet_is_the_torch_network() -> None:
    """No published small U-Net exists: its count is checked against the same network written in PyTorch."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    def double(cin: int, c: int) -> list:
        return [nn.Conv2d(cin, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU()]  # fmt: skip

    parts = [*double(1, 16), *double(16, 32), *double(32, 64), nn.ConvTranspose2d(64, 32, 2, 2), *double(64, 32),
             nn.ConvTranspose2d(32, 16, 2, 2), *double(32, 16), nn.Conv2d(16, 1, 1)]  # fmt: skip
    count = sum(p.numel() for m in parts for p in m.parameters())
    assert count == PUBLISHED["unet_small.yaml"][1] == validate_file(ZOO / "unet_small.yaml").params


def _fit(path: Path, tmp_path: Path, *args: str) -> list[dict]:
    """`specgrad train` as a user runs it; the records of metrics.jsonl."""
    result = CliRunner().invoke(app, ["train", str(path), "--out", str(tmp_path), *args])
    assert result.exit_code == 0, result.output
    folder = next(tmp_path.iterdir())
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_lenet5_trains_on_the_digits(tmp_path: Path) -> None:
    records = _fit(ZOO / "lenet5.yaml", tmp_path)
    assert max(r["accuracy"] for r in records if r["split"] == "valid") > 0.95


@pytest.mark.slow
def test_nanogpt_char_trains_as_written(tmp_path: Path) -> None:
    """The full-size model (10.8M parameters, 256 characters of context): a few steps lower the loss from ln(128)."""
    records = _fit(ZOO / "nanogpt_char.yaml", tmp_path, "--steps", "8", "--set", "train.log_every=1")
    losses = [r["loss"] for r in records if r["split"] == "train"]
    assert losses[0] == pytest.approx(np.log(128), abs=0.3) and losses[-1] < losses[0] - 0.3


@pytest.mark.slow
def test_small_unet_learns_to_denoise_the_digits(tmp_path: Path) -> None:
    records = _fit(ZOO / "unet_small.yaml", tmp_path, "--set", "train.epochs=4")
    assert min(r["loss"] for r in records if r["split"] == "valid") < 0.02


@pytest.mark.slow
def test_lstm_lm_learns_the_sonnets(tmp_path: Path) -> None:
    records = _fit(ZOO / "lstm_lm.yaml", tmp_path)
    assert min(r["loss"] for r in records if r["split"] == "valid") < 2.8  # NOTE: ln(128) = 4.85 at the start


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lenet5.yaml", "unet_small.yaml", "lstm_lm.yaml"])
def test_small_zoo_models_export_to_c(name: str, tmp_path: Path, cc: str) -> None:
    """The small models as self-contained C programs print what the model computes. (The large ones export to ONNX:
    their 3M to 138M weights as C arrays make a source file of hundreds of megabytes.)"""
    import subprocess

    from specgrad.export.c import export_c

    spec = validate_file(ZOO / name)
    model = build_model(spec)
    export_c(spec, model, tmp_path / "m.c")
    subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", str(tmp_path / "m.c"), "-o", str(tmp_path / "m"), "-lm"], check=True)
    ((shape, dtype),) = spec.inputs.values()
    rng = np.random.default_rng(0)
    x = rng.integers(0, 128, (2, *shape)).astype(dtype) if dtype == "int32" else rng.random((2, *shape), np.float32)
    text = "\n".join(" ".join(repr(v) for v in example.reshape(-1).tolist()) for example in x)
    out = subprocess.run([str(tmp_path / "m")], input=text, capture_output=True, text=True, check=True).stdout
    printed = np.array([[float(v) for v in line.split()] for line in out.splitlines()], np.float32)
    with Tensor.train(False):
        want = model(Tensor(x)).numpy().reshape(2, -1)  # type: ignore[union-attr]
    np.testing.assert_allclose(printed, want, rtol=1e-4, atol=1e-4)
