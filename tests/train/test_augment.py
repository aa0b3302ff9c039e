"""Seeded augmentation (data.augment: crop, flip, noise): training batches only, the same draws for the same seed and
batch whether or not the batches before it ran, so that a run killed and resumed is bit-identical; every key that
cannot apply is a located error."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

import specgrad.train.trainer as trainer_module
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import safe_load
from specgrad.train.data import augmented, batches, load_data

pytestmark = pytest.mark.xdist_group("augment")  # NOTE: on one worker: one training run read by many tests

runner = CliRunner()
SPECS = Path(__file__).resolve().parents[2] / "specs"
AUGMENT = {"crop": 0, "flip": False, "noise": 0.0}


def images(n: int = 4) -> np.ndarray:
    return np.arange(n * 2 * 5 * 6, dtype=np.float32).reshape(n, 2, 5, 6) + 1  # NOTE: no zero, so padding shows


def test_crop_cuts_a_window_of_the_padded_image() -> None:
    x = images(64)
    out = augmented(x, {**AUGMENT, "crop": 2}, np.random.default_rng(0))
    assert out.shape == x.shape and out.dtype == x.dtype
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)))
    windows = {(dy, dx) for dy in range(5) for dx in range(5)}
    for k in range(64):
        found = [(dy, dx) for dy, dx in windows if np.array_equal(out[k], padded[k, :, dy : dy + 5, dx : dx + 6])]
        assert found, f"example {k} is not a window of its padded image"
    assert not np.array_equal(out, x) and (out == 0).any()


def test_flip_mirrors_about_half_the_images() -> None:
    x = images(200)
    out = augmented(x, {**AUGMENT, "flip": True}, np.random.default_rng(1))
    flipped = [np.array_equal(o, i[..., ::-1]) for o, i in zip(out, x)]
    kept = [np.array_equal(o, i) for o, i in zip(out, x)]
    assert all(f or k for f, k in zip(flipped, kept)) and 70 < sum(flipped) < 130


def test_noise_has_the_given_std_and_keeps_the_dtype() -> None:
    x = np.zeros((64, 32), np.float32)
    out = augmented(x, {**AUGMENT, "noise": 0.5}, np.random.default_rng(2))
    assert out.dtype == np.float32 and abs(out.std() - 0.5) < 0.02 and abs(out.mean()) < 0.02
    half = augmented(x.astype(np.float16), {**AUGMENT, "noise": 0.5}, np.random.default_rng(2))
    assert half.dtype == np.float16


def test_batches_are_the_same_for_the_same_generator_state() -> None:
    x, y = images(40), np.arange(40)
    aug = {"crop": 1, "flip": True, "noise": 0.1}
    a = list(batches(x, y, 8, True, np.random.default_rng(5), aug))
    b = list(batches(x, y, 8, True, np.random.default_rng(5), aug))
    assert all(np.array_equal(p[0], q[0]) and np.array_equal(p[1], q[1]) for p, q in zip(a, b))
    plain = list(batches(x, y, 8, True, np.random.default_rng(5)))
    assert [p[1].tolist() for p in a] == [q[1].tolist() for q in plain]  # NOTE: the same order, changed examples
    assert not any(np.array_equal(p[0], q[0]) for p, q in zip(a, plain))
    rng = np.random.default_rng(5)
    again = list(batches(x, y, 8, True, rng, aug))
    assert not np.array_equal(list(batches(x, y, 8, True, rng, aug))[0][0], again[0][0])  # NOTE: a new epoch
    with pytest.raises(ValueError, match="need an np.random.Generator"):
        list(batches(x, y, 8, False, None, aug))


def spec(folder: Path, augment: str, shape: str = "[1, 8, 8]", data: str = "source: digits", dtype: str = "float32",
         model: str = "[flatten, {linear: 10}]") -> Path:  # fmt: skip
    """A spec whose data section is on line 6 and its augment map on line 7."""
    text = f"""\
        specgrad: 1
        name: aug
        input: {{shape: {shape}, dtype: {dtype}}}
        model: {model}
        data:
          {data}
          augment: {augment}
        """
    path = folder / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def messages(path: Path) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_data(validate_file(path))
    return [str(p) for p in e.value.problems]


def test_the_dataset_carries_the_augmentation_for_training_only(tmp_path: Path) -> None:
    ds = load_data(validate_file(spec(tmp_path, "{crop: 1, flip: true}")))
    assert ds.augment == {"crop": 1, "flip": True, "noise": 0.0}
    plain = load_data(validate_file(spec(tmp_path, "{crop: 0}")))
    assert plain.augment is None and np.array_equal(plain.x_valid, ds.x_valid)  # NOTE: validation examples as they are


def test_keys_that_cannot_apply_are_located(tmp_path: Path) -> None:
    flat = spec(tmp_path, "{crop: 2, flip: true, noise: 0.1}", shape="[64]")
    assert messages(flat) == [
        f"{flat}:7:19: error: data.augment.crop changes images, but the input's shape [64] is not an image's "
        "[channels, height, width]\n  hint: remove it (noise works with any float input)",
        f"{flat}:7:28: error: data.augment.flip changes images, but the input's shape [64] is not an image's "
        "[channels, height, width]\n  hint: remove it (noise works with any float input)",
    ]  # fmt: skip
    big = spec(tmp_path, "{crop: 8}")
    assert messages(big) == [f"{big}:7:19: error: data.augment.crop is 8 pixels, but the images are only 8x8: a "
                             "random window could hold padding only\n"
                             "  hint: use a crop below 8, such as 1"]  # fmt: skip
    tokens = spec(tmp_path, "{noise: 0.1}", shape="[4]", dtype="int32", data="{source: text, corpus: sonnets, "
                  "context: 4}", model="[{embedding: {vocab: 128, dim: 4}}, {linear: 128}]")  # fmt: skip
    tokens.write_text(tokens.read_text().replace("  {source: text, corpus: sonnets, context: 4}",
                                                 "  source: text\n  corpus: sonnets\n  context: 4"))  # fmt: skip
    assert messages(tokens) == [f"{tokens}:9:20: error: data.augment.noise adds fractions, but the input's dtype is "
                                "int32\n  hint: remove it: integer inputs (tokens, codes) take no noise"]  # fmt: skip
    autoencoder = spec(tmp_path, "{flip: true, noise: 0.2}", model="[flatten, {linear: 64}]")
    autoencoder.write_text(autoencoder.read_text().replace("source: digits\n", "source: digits\n  target: input\n"))
    assert messages(autoencoder) == [f"{autoencoder}:8:19: error: data.augment.flip would move the input's pixels "
                                     "away from the target's, which is the same image (target: input)\n"
                                     "  hint: remove it (noise, for a denoising autoencoder, works)"]  # fmt: skip
    with pytest.raises(SpecError) as e:
        validate_file(spec(tmp_path, "{flips: true, crop: -1}"))
    assert [str(p) for p in e.value.problems] == [
        f"{tmp_path / 'spec.yaml'}:7:13: error: unknown key 'flips' in data.augment\n  hint: did you mean 'flip'? "
        "valid keys: crop, flip, noise",
        f"{tmp_path / 'spec.yaml'}:7:32: error: data.augment.crop must be between 0 and 1024, got '-1'"]  # fmt: skip


# *** a run killed and resumed is bit-identical with augmentation ***

FAST = (
    "--set",
    "data.batch_size=64",
    "--set",
    "vars.hidden=16",
    "--set",
    "data.augment={crop: 1, flip: true, noise: 0.05}",
    "--steps",
    "50",
)  # fmt: skip  NOTE: 22 steps an epoch: the crash falls mid-epoch 2


class Crash(Exception):
    """As if the process were killed: nothing is written on the way out."""


def train(out: Path, *args: str) -> tuple[int, str, Path]:
    result = runner.invoke(app, ["train", str(SPECS / "digits_mlp.yaml"), "--out", str(out), *args])
    return result.exit_code, result.output, out / "digits-mlp-1"


def same_weights(a: Path, b: Path) -> bool:
    x, y = safe_load(a), safe_load(b)
    return x.keys() == y.keys() and all(np.array_equal(x[k].numpy(), y[k].numpy()) for k in x)


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run of 50 steps with augmentation."""
    code, output, folder = train(tmp_path_factory.mktemp("straight"), *FAST)
    assert code == 0, output
    return folder


def test_resume_after_a_crash_with_augmentation_is_bit_identical(tmp_path: Path, straight: Path, monkeypatch) -> None:
    code, output, plain = train(tmp_path / "plain", *FAST[:4], *FAST[6:])
    assert code == 0 and not same_weights(straight / "model.safetensors", plain / "model.safetensors"), output
    real, calls = trainer_module.Trainer._step, [0]

    def step(self, *args, **kwargs):
        real(self, *args, **kwargs)
        calls[0] += 1
        if calls[0] == 31:
            raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(trainer_module.Trainer, "_step", step)
        code, _, folder = train(tmp_path / "crashed", *FAST)
    assert code != 0 and not (folder / "model.safetensors").exists()
    result = runner.invoke(app, ["train", "--resume", str(folder)])
    assert result.exit_code == 0 and "resuming from epoch-00001.safetensors" in result.output, result.output
    assert same_weights(straight / "model.safetensors", folder / "model.safetensors")


def test_resume_after_ctrl_c_mid_epoch_with_augmentation_is_bit_identical(tmp_path: Path, straight: Path,
                                                                           monkeypatch) -> None:  # fmt: skip
    """The interrupted checkpoint resumes inside an epoch: its first batches are skipped, the rest drawn as before."""
    calls = [0]

    @contextlib.contextmanager
    def pressed_at_step_30():
        def pressed() -> bool:
            calls[0] += 1
            return calls[0] == 30

        yield pressed

    with monkeypatch.context() as patch:
        patch.setattr(trainer_module, "_deferred_interrupt", pressed_at_step_30)
        code, _, folder = train(tmp_path / "stopped", *FAST)
    assert code == 130, _
    result = runner.invoke(app, ["train", "--resume", str(folder)])
    assert result.exit_code == 0 and "(epoch 2, batch 9)" in result.output, result.output
    assert same_weights(straight / "model.safetensors", folder / "model.safetensors")
