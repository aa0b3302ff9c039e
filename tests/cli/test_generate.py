"""`specgrad generate`: a character model writes text one character at a time through its compiled window; the same
seed gives the same text, temperature 0 is the greedy decoding an independent loop computes, and what cannot be
generated from is a clear error."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from specgrad.cli.run import load_model
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.modelspec.decode import Decoder
from specgrad.modelspec.validate import validate_file
from specgrad.train.generation import CachedGenerator, WindowGenerator, sample

pytestmark = pytest.mark.xdist_group("generate")  # NOTE: on one worker: one trained character model

SPECS = Path(__file__).resolve().parents[2] / "specs"
runner = CliRunner()
SMALL = ["--steps", "20", "--set", "vars.d=32", "--set", "vars.context=16"]


@pytest.fixture(scope="module")
def char_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gen")
    result = runner.invoke(app, ["train", str(SPECS / "char_gpt.yaml"), "--out", str(out), *SMALL])
    assert result.exit_code == 0, result.output
    return out / "char-gpt-1"


def generated(folder: Path, *args: str) -> dict:
    result = runner.invoke(app, ["generate", str(folder), "--json", "--allow-outside", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_same_seed_writes_the_same_text(char_run: Path) -> None:
    a = generated(char_run, "--prompt", "Shall I", "--tokens", "40", "--seed", "3")
    b = generated(char_run, "--prompt", "Shall I", "--tokens", "40", "--seed", "3")
    c = generated(char_run, "--prompt", "Shall I", "--tokens", "40", "--seed", "4")
    assert a == b and len(a["text"]) == 40 and a["text"] != c["text"]
    printed = runner.invoke(app, ["generate", str(char_run), "--prompt", "Shall I", "--tokens", "40", "--seed", "3"])
    assert printed.exit_code == 0 and printed.output.startswith("Shall I")


def test_temperature_zero_is_the_greedy_decoding_of_an_independent_loop(char_run: Path) -> None:
    """The cache holds the end of the text from position 0: the prompt's last 16 characters (the prompt, 41, is longer
    than the context, 16), then each new character; when it is full, the newest 8 are fed again from position 0. The
    loop here runs the whole model (no TinyJit, no cache) on what the cache holds, padded; a character may differ from
    its argmax only where the two are tied within float rounding."""
    prompt = "From fairest creatures we desire increase"
    result = generated(char_run, "--prompt", prompt, "--tokens", "60", "--temperature", "0")
    assert result["decoding"] == "cached"
    got = result["text"]
    assert got == generated(char_run, "--prompt", prompt, "--tokens", "60", "--top-k", "1")["text"]
    spec = validate_file(char_run / "spec.resolved.yaml", data_files=False)
    model, _ = load_model(spec, char_run / "model.safetensors")
    held = [ord(c) for c in prompt][-16:]
    for i, code in enumerate(map(ord, got)):
        x = np.zeros((1, 16), np.int32)
        x[0, : len(held)] = held
        scores = model(Tensor(x)).numpy()[0, len(held) - 1]
        assert scores.max() - scores[code] < 1e-4, f"character {i}: {code} where the model says {scores.argmax()}"
        held = held + [code] if len(held) < 16 else (held + [code])[-8:]
    short = generated(char_run, "--prompt", "A", "--tokens", "20", "--temperature", "0")["text"]
    assert len(short) == 20, "a prompt shorter than the context starts the cache"


def test_the_cache_gives_the_scores_a_whole_window_gives_for_the_text_it_holds(char_run: Path) -> None:
    """Both generators side by side over three contexts of text: the cached one's scores equal the window's for the
    characters it holds (all of them until 16, then the newest 8 to 16); a new text starts afresh, whatever came
    before it."""
    spec = validate_file(char_run / "spec.resolved.yaml", data_files=False)
    model, _ = load_model(spec, char_run / "model.safetensors")
    cached, window = CachedGenerator(Decoder(spec, model)), WindowGenerator(model, 16)
    text = [ord(c) for c in "Shall I"]
    scores = cached.start(text)
    for code in np.random.default_rng(0).integers(32, 127, 48):
        np.testing.assert_allclose(scores, window.scores(cached.held), atol=1e-5, rtol=1e-5)
        assert cached.held == text[-len(cached.held) :] and min(len(text), 8) <= len(cached.held) <= 16
        text.append(int(code))
        scores = cached.next(int(code))
    other = [ord(c) for c in "To be, or not to be"]  # NOTE: one longer than a text the state could continue
    cached.start(text[:18])
    np.testing.assert_allclose(cached.start(other), window.scores(other[-16:]), atol=1e-5, rtol=1e-5)
    assert cached.held == other[-16:]
    for generator in (cached, window):
        with pytest.raises(ValueError, match="at least one character"):
            generator.start([])


def test_what_cannot_be_generated_from_is_a_clear_error(char_run: Path, tmp_path: Path) -> None:
    for args, said in ((["--prompt", "café"], "'é' (U+00E9)"), (["--prompt", ""], "--prompt is empty"),
                       (["--prompt", "a", "--tokens", "0"], "--tokens 0"),
                       (["--prompt", "a", "--temperature", "-1"], "--temperature"),
                       (["--prompt", "a", "--top-k", "0"], "--top-k 0"),
                       (["--prompt", "a", "--seed", "-1"], "--seed -1 is negative")):  # fmt: skip
        result = runner.invoke(app, ["generate", str(char_run), "--allow-outside", *args])
        assert result.exit_code == 1 and said in result.output and "Traceback" not in result.output, result.output
    digits = runner.invoke(app, ["train", str(SPECS / "digits_mlp.yaml"), "--out", str(tmp_path), "--steps", "2"])
    assert digits.exit_code == 0
    result = runner.invoke(app, ["generate", str(tmp_path / "digits-mlp-1"), "--prompt", "a"])
    assert result.exit_code == 1 and "not a character language model" in result.output
    blind = runner.invoke(app, ["train", str(SPECS / "char_gpt.yaml"), "--out", str(tmp_path), *SMALL, "--set",
                                "blocks.decoder.graph.1.causal=false"])  # fmt: skip
    assert blind.exit_code == 0, blind.output
    result = runner.invoke(app, ["generate", str(tmp_path / "char-gpt-1"), "--prompt", "Shall", "--allow-outside"])
    assert result.exit_code == 1 and "is not causal" in result.output


def test_sampling_follows_the_softmax_of_the_scaled_scores() -> None:
    scores = np.array([2.0, 1.0, 0.0, -1.0])
    rng = np.random.default_rng(0)
    assert sample(scores, 0, None, rng) == 0
    for temperature in (1.0, 0.5):
        draws = np.bincount([sample(scores, temperature, None, rng) for _ in range(20000)], minlength=4) / 20000
        p = np.exp(scores / temperature) / np.exp(scores / temperature).sum()
        np.testing.assert_allclose(draws, p, atol=0.015)
    top2 = {sample(scores, 1.0, 2, rng) for _ in range(2000)}
    assert top2 == {0, 1}


def test_a_causal_model_without_a_stepwise_form_reruns_its_window(tmp_path: Path) -> None:
    """batchnorm over a (sequence, features) input normalises per position with that position's statistics: causal,
    but not one of the kinds that step; generate says so and runs whole windows."""
    spec = tmp_path / "bn.yaml"
    spec.write_text(
        "specgrad: 1\nname: bn-lm\ninput: {shape: [16], dtype: int32}\nmodel:\n"
        "  - embedding: {vocab: 128, dim: 8}\n  - batchnorm\n  - linear: 128\n"
        "data: {source: text, corpus: sonnets, context: 16, batch_size: 8}\ntrain: {epochs: 1}\n"
    )
    trained = runner.invoke(app, ["train", str(spec), "--out", str(tmp_path / "runs"), "--steps", "3"])
    assert trained.exit_code == 0, trained.output
    result = runner.invoke(app, ["generate", str(tmp_path / "runs" / "bn-lm-1"), "--prompt", "Shall I", "--tokens",
                                 "20", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "layer 1 (batchnorm) does not compute one position at a time" in result.stderr
    assert json.loads(result.stdout)["decoding"] == "window" and len(json.loads(result.stdout)["text"]) == 20


def test_sampling_at_a_tiny_temperature_is_greedy() -> None:
    scores = np.array([2.0, 1.0, 2.0 - 1e-6, -np.inf])
    rng = np.random.default_rng(0)
    assert {sample(scores, 1e-320, None, rng) for _ in range(50)} == {0}
    assert {sample(scores, 1e-300, 2, rng) for _ in range(50)} == {0}


def test_a_reader_that_stops_reading_ends_generate_quietly(char_run: Path) -> None:
    """`| head -c 20`: exit 141 (128 + SIGPIPE) with nothing on stderr, not an internal error."""
    shell = (f"set -o pipefail; specgrad generate {char_run} --prompt 'Shall I' --tokens 20000 --allow-outside "
             "| head -c 20 > /dev/null")  # fmt: skip
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=300)
    assert done.returncode == 141 and done.stderr == "", (done.returncode, done.stderr)
