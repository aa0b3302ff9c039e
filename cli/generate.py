"""`specgrad generate RUN_DIR --prompt TEXT`: text from a character language model (a spec whose data is a text
source: char_gpt and the zoo's character models), one character at a time through the same compiled kernels
(specgrad.train.generation), printed as it comes; the same seed gives the same text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import typer
from specgrad.cli.run import load_model, read_contract, spec_and_weights

from specgrad.device import Device
from specgrad.modelspec.builder import Model
from specgrad.modelspec.decode import Decoder, NotStepwise
from specgrad.modelspec.errors import SpecError, excerpt, printable
from specgrad.modelspec.validate import ValidSpec
from specgrad.train.generation import CachedGenerator, Generator, NonFiniteScores, WindowGenerator

MAX_TOKENS = 100_000  # NOTE: characters one command generates (each step runs the model once)


def generate(spec_path: Path, weights: Path | None, prompt: str, tokens: int, temperature: float, top_k: int | None,
             seed: int, overrides: list[str], device: str | None, as_json: bool) -> None:  # fmt: skip
    _check_options(tokens, temperature, top_k, seed)
    spec, weights = spec_and_weights(spec_path, weights, overrides)
    data = spec.values.get("data") or {}
    if data.get("source") != "text" or len(spec.inputs) != 1 or len(spec.outputs) != 1:
        raise SpecError.at(None, f"{spec.path} is not a character language model (its data is not a text source), so "
                           "there is no text to generate", "generate from a model trained on text, such as "
                           "specs/char_gpt.yaml")  # fmt: skip
    if device is not None:
        Device.DEFAULT = device
    (shape, _), out = next(iter(spec.inputs.values())), spec.output_shape(spec.outputs[0])
    context, vocab = shape[0], out[-1]
    if not prompt:
        raise SpecError.at(None, "--prompt is empty: the model needs at least one character to go on from",
                           "pass --prompt with some text, e.g. --prompt 'Shall I'")  # fmt: skip
    codes = [ord(c) for c in prompt]
    outside = sorted({c for c in codes if c >= vocab})
    if outside:
        shown = ", ".join(f"'{printable(chr(c))}' (U+{c:04X})" for c in outside[:5])
        raise SpecError.at(None, f"--prompt holds characters the model does not know: {shown}; it reads codes 0.."
                           f"{vocab - 1}", "use only characters of the text it was trained on")  # fmt: skip
    model, meta = load_model(spec, weights)
    read_contract(spec, meta, weights)  # NOTE: run's check of the metadata: a task that is not language is refused
    generator = _generator(spec, model, context, codes)
    stream = generator.generate(codes, tokens, temperature, top_k, seed)
    try:
        with np.errstate(all="ignore"):  # NOTE: an overflow is said in words (NonFiniteScores), not as a warning
            _write(stream, prompt, tokens, temperature, top_k, seed, weights, generator, as_json)
    except NonFiniteScores as e:
        if not as_json:
            typer.echo("")  # NOTE: the error on a line of its own, after the text written so far
        raise SpecError.at(None, str(e), "its weights overflow float32 on this text: generate from the weights of a "
                           "finished run") from None  # fmt: skip


def _write(stream: Iterator[int], prompt: str, tokens: int, temperature: float, top_k: int | None, seed: int,
           weights: Path, generator: Generator, as_json: bool) -> None:  # fmt: skip
    """The characters as they come (escaped), or with `as_json` the whole text in one JSON object."""
    if as_json:
        text = "".join(map(chr, stream))
        decoding = "cached" if isinstance(generator, CachedGenerator) else "window"
        typer.echo(json.dumps({"prompt": prompt, "text": text, "tokens": tokens, "temperature": temperature,
                               "top_k": top_k, "seed": seed, "weights": str(weights),
                               "decoding": decoding}))  # fmt: skip
        return
    typer.echo(printable(prompt), nl=False)
    for code in stream:  # NOTE: each character as it comes; control characters escaped (never run by the terminal)
        typer.echo(printable(chr(code)), nl=False)
    typer.echo("")


def _generator(spec: ValidSpec, model: Model, context: int, codes: list[int]) -> Generator:
    """One position per character where every step of the model has a stepwise form; else the whole window per
    character, for a causal model only (said on stderr: it is slower)."""
    try:
        return CachedGenerator(Decoder(spec, model))
    except NotStepwise as e:
        why = str(e)
    generator = WindowGenerator(model, context)
    if not generator.is_causal(codes):
        raise SpecError.at(None, f"the model of {spec.path} is not causal: its scores at a position depend on the "
                           "characters after it, so it cannot write one character at a time",
                           "generate from a model whose attention is causal (causal: true)")  # fmt: skip
    typer.echo(f"note: {why}, so each character reruns the model on a window of {context:,}", err=True)
    return generator


def _check_options(tokens: int, temperature: float, top_k: int | None, seed: int) -> None:
    """The sampling options, before the model is loaded."""
    if not 1 <= tokens <= MAX_TOKENS:
        raise SpecError.at(None, f"--tokens {tokens} is out of range", f"use 1 to {MAX_TOKENS:,}")
    if not 0 <= temperature <= 100:
        raise SpecError.at(None, f"--temperature {excerpt(str(temperature), 20)} is out of range",
                           "use 0 (always the likeliest character) to 100; 1 samples the model as it is")  # fmt: skip
    if top_k is not None and top_k < 1:
        raise SpecError.at(None, f"--top-k {top_k} keeps no characters", "use 1 or more (1 is the likeliest only)")
    if seed < 0:
        raise SpecError.at(None, f"--seed {seed} is negative", "use a whole number from 0 up")
