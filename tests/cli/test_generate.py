"""`specgrad generate`: a character model writes text one character at a time through its compiled window; the same
seed gives the same text, temperature 0 is the greedy decoding an independent loop computes, and what cannot be
generated from is a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from specgrad.cli.run import load_model
from typer.testing import CliRunner

from specgrad import Tensor
from specgrad.modelspec.validate import validate_file
from specgrad.train.generation import sample

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
    return json.loads(result.output)


def test_the_same_seed_writes_the_same_text(char_run: Path) -> None:
    a = generated(char_run, "--prompt", "Shall I", "--tokens", "40", "--seed", "3")
    b = generated(char_run, "--prompt", "Shall I", "--tokens", "40", "--seed", "3")
    c = generated(char_run, "--prompt", "Shall I", "--tokens", "40", "--seed", "4")
    assert a == b and len(a["text"]) == 40 and a["text"] != c["text"]
    printed = runner.invoke(app, ["generate", str(char_run), "--prompt", "Shall I", "--tokens", "40", "--seed", "3"])
    assert printed.exit_code == 0 and printed.output.startswith("Shall I")


def test_temperature_zero_is_the_greedy_decoding_of_an_independent_loop(char_run: Path) -> None:
    """The window at the text's start, padding after it, then sliding: the prompt (40 characters) is longer than the
    context (16), so both regimes are covered; each step here runs the model without TinyJit."""
    prompt = "From fairest creatures we desire increase"
    got = generated(char_run, "--prompt", prompt, "--tokens", "30", "--temperature", "0")["text"]
    assert got == generated(char_run, "--prompt", prompt, "--tokens", "30", "--top-k", "1")["text"]
    spec = validate_file(char_run / "spec.resolved.yaml", data_files=False)
    model, _ = load_model(spec, char_run / "model.safetensors")
    codes = [ord(c) for c in prompt]
    for _ in range(30):
        window = codes[-16:]
        x = np.zeros((1, 16), np.int32)
        x[0, : len(window)] = window
        codes.append(int(np.argmax(model(Tensor(x)).numpy()[0, len(window) - 1])))
    assert got == "".join(map(chr, codes[len(prompt) :]))
    short = generated(char_run, "--prompt", "A", "--tokens", "20", "--temperature", "0")["text"]
    assert len(short) == 20, "a prompt shorter than the context starts the window"


def test_what_cannot_be_generated_from_is_a_clear_error(char_run: Path, tmp_path: Path) -> None:
    for args, said in ((["--prompt", "café"], "'é' (U+00E9)"), (["--prompt", ""], "--prompt is empty"),
                       (["--prompt", "a", "--tokens", "0"], "--tokens 0"),
                       (["--prompt", "a", "--temperature", "-1"], "--temperature"),
                       (["--prompt", "a", "--top-k", "0"], "--top-k 0")):  # fmt: skip
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
