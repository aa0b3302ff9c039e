"""`specgrad run SPEC --weights W --input X`: a trained model's predictions for the examples in a .npy, .csv or .json
file (or one .png, .jpg or .jpeg image, for a model trained on an images source), printed (as text or JSON) or
written to a .npy, .csv or .json file. Every problem with the spec, the weights or the examples is an error, exit 1
(cli/errors.py gives the other codes); NaN or infinity in an example, in it once standardized, or in an output is one
too, unless --allow-nonfinite."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import typer
from specgrad.cli.errors import check_output_option

from specgrad import Device, Tensor
from specgrad.flags import MAX_FILE_MB
from specgrad.helpers import atomic_write, prod
from specgrad.modelspec.builder import Model, build_model
from specgrad.modelspec.contract import ContractError, RunContract, contract_from_meta, spec_task, unwritten
from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.files import MIB, check_regular, read_data
from specgrad.modelspec.schema import did_you_mean
from specgrad.modelspec.validate import ValidSpec, is_float, validate_file
from specgrad.nn.state import (
    NonFinite,
    SafetensorsError,
    StateMismatch,
    load_state_dict,
    safe_load,
    safe_load_metadata,
)
from specgrad.train.data import (
    IMAGE_MODES,
    IMAGE_SUFFIXES,
    WrongSize,
    csv_table,
    data_widths,
    dialect_of,
    encode_rows,
    input_columns,
    named,
    pillow,
    read_image,
    standardize,
)
from specgrad.train.evaluation import two_class
from specgrad.train.run_folder import final_weights, spec_file, spec_hash, unusable

CHUNK = 1024  # examples per forward pass: at most two shapes to compile, and bounded memory for big files
MAX_PROBLEMS = 10  # bad cells reported at once; the rest are counted
FORMATS = (".npy", ".csv", ".json")
INPUT_FORMATS = (*FORMATS, *IMAGE_SUFFIXES)
MAX_JSON_DEPTH = 64  # NOTE: nested lists of an example, as deep as numpy's dimensions go
WEIGHTS_HINT = "pass the model.safetensors of a run folder"
NONFINITE_HINT = "fill in a number, or leave the row out; or pass --allow-nonfinite to run it anyway"
FORMULA_FIRST = "=+-@\t\r"  # NOTE: a spreadsheet cell starting with one of these is a formula (OWASP: CSV injection)
NUMBER = re.compile(r"[+-]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:[eE][+-]?\d+)?")  # NOTE: a decimal point or a decimal comma


def run(spec_path: Path, weights: Path | None, input_path: Path, output: Path | None, overrides: list[str],
        device: str | None, as_json: bool, allow_nonfinite: bool = False, carry: Carry | None = None
        ) -> None:  # fmt: skip
    spec, weights = spec_and_weights(spec_path, weights, overrides)
    carry = carry or Carry()
    if output is not None:
        check_output_option(output, "--output")  # NOTE: before any work; atomic_write checks again when writing
        _check_format(output, "--output", NAMED_FORMATS if named(spec) else FORMATS)
    _check_carry(carry, input_path, output, named(spec))
    if device is not None:
        Device.DEFAULT = device
    model, meta = load_model(spec, weights)
    contract = read_contract(spec, meta, weights)
    if named(spec):
        run_named(spec, model, contract, input_path, output, as_json, allow_nonfinite)
        return
    x = prepare(read_examples(input_path, spec, contract, allow_nonfinite), spec, contract, input_path,
                allow_nonfinite=allow_nonfinite)  # fmt: skip
    with np.errstate(all="ignore"):  # NOTE: an overflow is found below and said in words, never as a RuntimeWarning
        out = to_result(contract, predict(model, x))
    check_outputs(out, allow_nonfinite)
    if output is None:
        report(contract, out, as_json)
        return
    write_output(output, out, contract, _carried(input_path, spec, carry, len(out)))
    shape = list(out.shape)
    if as_json:
        typer.echo(json.dumps({"output": str(output), "shape": shape, "examples": len(out)}))
    else:
        typer.echo(f"wrote the {'probabilities' if contract.task == 'classify' else 'outputs'} of {len(out)} examples "
                   f"(shape {shape}) to {output}")  # fmt: skip


# *** the model and its weights ***


def spec_and_weights(spec_path: Path, weights: Path | None, overrides: list[str],
                     data_files: bool = False) -> tuple[ValidSpec, Path]:  # fmt: skip
    """The spec (a file, or a run folder's resolved spec) and the weights: --weights (a weights file or any checkpoint),
    else the run folder's final model.safetensors. The data files are read only with `data_files`."""
    widths = data_widths if data_files else None  # NOTE: a spec file's autos without the data: the run folder has them
    spec = validate_file(spec_file(spec_path), overrides, data_files=data_files, widths=widths)
    if weights is None:
        if not spec_path.is_dir():
            raise SpecError.at(None, f"which weights? {spec_path} is a spec file, so --weights is needed",
                               "pass --weights RUN_DIR/model.safetensors, or give the run folder instead of the "
                               "spec")  # fmt: skip
        weights = final_weights(spec_path)
    return spec, weights


def load_model(spec: ValidSpec, weights: Path) -> tuple[Model, dict[str, str]]:
    """The spec's model with the weights loaded strictly, and the weights' metadata (task, normalization, ...)."""
    model = build_model(spec)
    named_file(weights, "--weights", WEIGHTS_HINT)
    check_regular(str(weights), None, "--weights", str(weights), WEIGHTS_HINT)  # NOTE: a FIFO or device said as such
    try:
        meta = safe_load_metadata(weights)
        state = _model_tensors(weights, meta)
    except OSError as e:
        raise SpecError.at(None, f"cannot read the weights {weights}: {e.strerror}") from None
    except NonFinite as e:
        raise SpecError.at(None, str(e), "training stops when its loss is no longer finite, so these weights were "
                           "not written by it as they are: pass the model.safetensors of a finished run"
                           ) from None  # fmt: skip
    except SafetensorsError as e:
        raise unusable(e, None, "the file may be truncated or not a weights file: train again, or pass the "
                       "model.safetensors of a finished run") from None  # fmt: skip
    trained_with = f"'{excerpt(meta['name'], 40)}'" if meta.get("name") else "another spec"
    differs = meta.get("spec_hash") not in (None, spec_hash(spec.values))
    try:
        load_state_dict(model, state, strict=True)
    except StateMismatch as e:
        note = f" (they were trained with {trained_with})" if differs else ""
        keys = str(e).partition(":\n")[2] or str(e)  # NOTE: load_state_dict lists every bad key, one per line
        raise SpecError.at(None, f"the weights in {weights} do not fit the model of {spec.path}{note}:\n{keys}",
                           "pass weights that `specgrad train` wrote for this spec") from None  # fmt: skip
    if differs:
        typer.echo(f"warning: {weights} was trained with a different spec ({trained_with}, spec_hash "
                   f"{excerpt(meta['spec_hash'], 40)}; {spec.path} has {spec_hash(spec.values)}); the shapes fit, so "
                   "running it", err=True)  # fmt: skip
    return model, meta


def _model_tensors(weights: Path, meta: dict[str, str]) -> dict[str, Tensor]:
    """The model's tensors: all of a weights file, the model.* ones of a training checkpoint (its optimizer state is
    never read, nor checked)."""
    if "position" not in meta:
        return safe_load(weights)
    names = [k for k in safe_load(weights, device="disk") if k.startswith("model.")]  # NOTE: the header only
    return {k.removeprefix("model."): v for k, v in safe_load(weights, keys=names).items()}


def named_file(path: Path, option: str, hint: str | None = None) -> None:
    """A file named on the command line exists (what else it must be, the reading policy's checks say)."""
    if not os.path.lexists(path):
        raise SpecError.at(None, f"{option} {path}: no such file", hint)


def served_meta(spec: ValidSpec, meta: dict[str, str]) -> dict[str, str]:
    """The weights' metadata, with the task taken from the spec when it does not name one (weights another tool wrote,
    or an edit removed it): the task training gives the spec (its loss says: mse a regression, cross_entropy a
    language model on text data, else a classifier), a regression for a spec without data. A model with several
    outputs gets each output's task from its loss, beside what the weights hold for it (its targets' statistics, its
    class names), so that those are applied (or refused) as for any weights; a spec without data leaves its outputs
    as they are."""
    if meta.get("task"):
        return meta
    if len(spec.inputs) > 1 or len(spec.outputs) > 1:
        tasks = {o: spec_task(spec, o) if o in spec.losses else None for o in spec.outputs}
        if None in tasks.values():
            return meta
        try:
            given = json.loads(meta["outputs"]) if meta.get("outputs") else {}
        except (json.JSONDecodeError, RecursionError):
            return {**meta, "task": "multi"}  # NOTE: contract_from_meta says what is wrong with it
        if not isinstance(given, dict) or not all(isinstance(v, dict) for v in given.values()):
            return {**meta, "task": "multi"}
        heads = {o: {"task": t, **given.get(o, {})} for o, t in tasks.items()}
        return {**meta, "task": "multi", "outputs": json.dumps({**given, **heads})}
    return {**meta, "task": spec_task(spec) or "regress"}


def read_contract(spec: ValidSpec, meta: dict[str, str], weights: Path) -> RunContract:
    """What to apply around the model, from the weights' metadata (the task guessed from the spec when it is
    missing, as for weights another tool wrote)."""
    try:
        contract = contract_from_meta(spec, served_meta(spec, meta))
    except ContractError as e:
        raise SpecError.at(None, f"the metadata of {weights} does not fit the model of {spec.path}: {e}",
                           "pass weights that `specgrad train` wrote for this spec") from None  # fmt: skip
    if missing := unwritten(spec, meta):
        raise SpecError.at(None, f"the metadata of {weights} lacks what `specgrad train` writes for {spec.path}: "
                           f"{'; '.join(missing)}", _unwritten_hint(meta, missing))  # fmt: skip
    return contract


def _unwritten_hint(meta: dict[str, str], missing: list[str]) -> str:
    """Weights specgrad wrote had it (an edit removed it); another tool's (no spec_hash) may have been trained on raw
    values, which the spec can say."""
    if meta.get("spec_hash"):
        return ("training writes it with the weights (the checksums do not cover the metadata), so the file was "
                "changed after training: pass the model.safetensors of the run, as `specgrad train` wrote "
                "it")  # fmt: skip
    said = " ".join(missing)
    raw = [f"--set data.{key}=false" for key in ("normalize", "normalize_target") if f"data.{key} " in said]
    return (f"the weights carry no specgrad metadata (another tool's?), and without the statistics the model's numbers "
            f"would be wrong: if they were trained on raw values, say so with {' '.join(raw)}; "
            "else pass weights that `specgrad train` wrote for this spec")  # fmt: skip


def predict(model: Model, x: np.ndarray) -> np.ndarray:
    """The model's output for every example, CHUNK examples per forward pass."""
    outs = [model(Tensor(x[i : i + CHUNK])).numpy() for i in range(0, len(x), CHUNK)]
    return np.concatenate(outs)


# *** reading examples ***


def _check_format(path: Path, what: str, formats: tuple[str, ...] = FORMATS) -> None:
    if formats == NAMED_FORMATS and path.suffix.lower() in set(INPUT_FORMATS) - set(NAMED_FORMATS):
        raise SpecError.at(None, f"{what} {path}: the model has several inputs or outputs, so its examples and "
                           "outputs are .npz files (an array per input or output) or .json objects (name -> "
                           "values)", "name a .npz or .json file")  # fmt: skip
    if path.suffix.lower() not in formats:
        raise SpecError.at(None, f"{what} {path}: cannot tell the format from '{path.suffix or 'no extension'}'",
                           f"name a {', '.join(formats[:-1])} or {formats[-1]} file")  # fmt: skip


def read_examples(path: Path, spec: ValidSpec, contract: RunContract, allow_nonfinite: bool = False) -> np.ndarray:
    """(N, *input shape) numbers from a .npy, .csv or .json file, as written (not yet normalized or cast; a csv's
    categorical columns encoded as in training); NaN or infinity is an error naming the first one, or with
    `allow_nonfinite` a warning."""
    _check_format(path, "--input", INPUT_FORMATS)
    named_file(path, "--input")
    # NOTE: the reading policy's checks: a regular file (a FIFO or device refused, never waited on), at most MAX_FILE_MB
    raw = read_data(str(path), None, "--input", None)
    shape = next(iter(spec.inputs.values()))[0]
    x = READERS[path.suffix.lower()](raw, path, spec, contract, allow_nonfinite)
    if path.suffix.lower() == ".csv" and x.shape[1] == prod(shape):
        x = x.reshape(len(x), *shape)  # NOTE: a CSV row is one flattened example (row-major)
    x = _batched(x, tuple(shape), path)
    _check_finite(x, path, allow_nonfinite)
    return x


def _batched(x: np.ndarray, shape: tuple[int, ...], path: Path) -> np.ndarray:
    """x as (N, *shape): a batch of examples, or one example without the batch axis."""
    if x.shape == shape:
        return x[None]
    if x.shape[1:] == shape and len(x) > 0:
        return x
    if x.shape[1:] == shape:
        raise SpecError.at(None, f"{path} holds no examples")
    hint = None
    if x.ndim > 0 and len(x) and prod(x.shape[1:]) == prod(shape):
        hint = f"each of its {len(x)} examples has the right number of values: reshape it to {(len(x), *shape)}"
    elif x.size == prod(shape):
        hint = f"it holds one example's worth of values: reshape it to {shape}"
    raise SpecError.at(None, f"the model takes examples of shape {list(shape)}; {path} has shape {x.shape}", hint)


def _where(index: tuple[int, ...]) -> str:
    return f"example {index[0]}" + (f", position {list(index[1:])}" if len(index) > 1 else "")


def _check_finite(x: np.ndarray, path: Path, allow_nonfinite: bool) -> None:
    bad = np.argwhere(~np.isfinite(x)) if x.dtype.kind == "f" else []
    if not len(bad):
        return
    i = tuple(int(v) for v in bad[0])
    found = f"{path}: {_where(i)} is {x[i]} ({plural(len(bad), 'value')} NaN or infinite)"
    if not allow_nonfinite:
        raise SpecError.at(None, found, "fill in numbers or leave those examples out; or pass --allow-nonfinite to run "
                           "them anyway")  # fmt: skip
    typer.echo(f"warning: {found}; running them as given (--allow-nonfinite): their outputs may be NaN", err=True)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s are' if n != 1 else ' is'}"


def _read_npy(raw: bytes, path: Path, spec: ValidSpec, contract: RunContract, allow_nonfinite: bool) -> np.ndarray:
    try:
        x = np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        why = "it holds Python objects, which are never loaded" if "pickle" in str(e) else str(e)
        raise SpecError.at(None, f"--input {path} cannot be read as a .npy file ({why})",
                           "save the examples with numpy: np.save(path, examples)") from None  # fmt: skip
    if not isinstance(x, np.ndarray) or x.dtype.kind not in "biuf":
        raise SpecError.at(None, f"--input {path} must hold numbers, got {getattr(x, 'dtype', type(x).__name__)}")
    return x


def _json_shape(v: Any, path: Path, finite: bool, at: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The shape of nested lists of numbers; the first item that is not a number (a finite one, when `finite`), or
    ragged lists, an error."""
    if len(at) > MAX_JSON_DEPTH:
        raise SpecError.at(None, f"{path}: item {_item(at[:8])}... is nested more than {MAX_JSON_DEPTH} levels deep",
                           "write examples as (nested) lists of numbers")  # fmt: skip
    if isinstance(v, list):
        shapes = [_json_shape(item, path, finite, (*at, i)) for i, item in enumerate(v)]
        for i, s in enumerate(shapes):
            if s != shapes[0]:
                raise SpecError.at(None, f"{path}: item {_item((*at, i))} has shape {list(s)}, but item "
                                   f"{_item((*at, 0))} has shape {list(shapes[0])}",
                                   "every example must have the same shape")  # fmt: skip
        return (len(v), *(shapes[0] if shapes else ()))
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (finite and not math.isfinite(v)):
        what = "is not a finite number" if isinstance(v, float) else "is not a number"
        where = f"item {_item(at)}" if at else "the file"
        hint = "write examples as (nested) lists of numbers" + ("; or pass --allow-nonfinite to run NaN and infinity"
                                                                  if isinstance(v, float) else "")  # fmt: skip
        raise SpecError.at(None, f"{path}: {where} ({json.dumps(v)[:40]}) {what}", hint)
    return ()


def _item(at: tuple[int, ...]) -> str:
    return "".join(f"[{i}]" for i in at)


def _json_value(raw: bytes, path: Path) -> Any:
    """The JSON value of --input, or an error at its line and column."""
    try:  # NOTE: whole numbers read as floats (their only use): a 5000-digit one is infinity, not a crash
        return json.loads(raw.decode("utf-8-sig"), parse_int=float)
    except UnicodeDecodeError:
        raise SpecError.at(None, f"--input {path} is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise SpecError.at(Location(str(path), e.lineno, e.colno), f"{path.name} is not valid JSON: {e.msg}") from None
    except RecursionError:
        raise SpecError.at(None, f"{path}: its lists are nested too deeply (an example has at most "
                           f"{MAX_JSON_DEPTH} levels)",
                           "write examples as (nested) lists of numbers") from None  # fmt: skip


def _read_json(raw: bytes, path: Path, spec: ValidSpec, contract: RunContract, allow_nonfinite: bool
               ) -> np.ndarray:  # fmt: skip
    value = _json_value(raw, path)
    _json_shape(value, path, not allow_nonfinite)
    return np.asarray(value, dtype=np.float64)


def _read_csv(raw: bytes, path: Path, spec: ValidSpec, contract: RunContract, allow_nonfinite: bool) -> np.ndarray:
    """(N, values per example): the columns the model was trained on (saved with the weights; else the spec's), read
    and encoded (categorical columns with the training vocabulary) as training reads its csv."""
    hline, header, rows, dialect = csv_table(raw, path, dialect_of(spec.values.get("data") or {}))
    columns, cols = input_columns(spec, contract.columns, header, hline, path)
    x, problems = encode_rows(rows, header, cols, columns, path, None if allow_nonfinite else NONFINITE_HINT,
                              "is not a category the model was trained with", dialect, served=True)  # fmt: skip
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], Problem(f"... and {len(problems) - MAX_PROBLEMS} more in {path}")]
    if problems:
        raise SpecError(problems)
    return x


def _read_image(raw: bytes, path: Path, spec: ValidSpec, contract: RunContract, allow_nonfinite: bool) -> np.ndarray:
    """(1, channels, height, width): one image read as the images source reads its files (floats 0..1, converted to
    the input's channels, scaled to its size when the spec says data.resize, else refused at another size)."""
    shape = next(iter(spec.inputs.values()))[0]
    if len(shape) != 3 or shape[0] not in IMAGE_MODES:
        raise SpecError.at(None, f"--input {path} is an image, but the model takes examples of shape {list(shape)}, "
                           "not [channels, height, width]", "pass the examples as .npy, .csv or .json")  # fmt: skip
    resize = bool((spec.values.get("data") or {}).get("resize"))
    try:
        return read_image(raw, str(path), tuple(shape), resize, pillow(None))[None]
    except ValueError as e:
        hint = "resize the image, or set data.resize: true in the spec" if isinstance(e, WrongSize) else None
        raise SpecError.at(None, str(e), hint) from None


READERS: dict[str, Callable[[bytes, Path, ValidSpec, RunContract, bool], np.ndarray]] = {
    ".npy": _read_npy, ".csv": _read_csv, ".json": _read_json,
    **dict.fromkeys(IMAGE_SUFFIXES, _read_image)}  # fmt: skip


# *** what the model is given ***


def prepare(x: np.ndarray, spec: ValidSpec, contract: RunContract, path: Path, name: str | None = None,
            allow_nonfinite: bool | None = False) -> np.ndarray:  # fmt: skip
    """Float inputs standardized with the training statistics in the weights (a value that is finite as given but not
    once standardized and cast is refused, as NaN in the input is); token ids checked and cast. `name` picks the
    input of a model with several (its statistics are contract.inputs[name]). `allow_nonfinite` None: the command has
    no --allow-nonfinite (evaluate), so such a value is refused and the hint does not offer it."""
    name = name or next(iter(spec.inputs))
    dtype = spec.inputs[name][1]
    if not is_float(dtype):
        return _tokens(x, spec, name, dtype, path)
    stats = contract.inputs.get(name, {}) if contract.task == "multi" else contract.norm
    data = spec.values.get("data") or {}
    if contract.task != "multi" and data.get("source") == "digits" and x.max() > 1.5:
        typer.echo(f"warning: the model was trained on digits with pixel values 0..1 (the bundled images divided by "
                   f"16); {path} has values up to {x.max():g}", err=True)  # fmt: skip
    with np.errstate(all="ignore"):  # NOTE: an overflow is found below and said in words, never as a RuntimeWarning
        ret = standardize(x, stats).astype(dtype)
    _check_standardized(x, ret, stats, path, allow_nonfinite)
    return ret


def _check_standardized(x: np.ndarray, ret: np.ndarray, stats: dict[str, np.ndarray], path: Path,
                        allow_nonfinite: bool | None) -> None:  # fmt: skip
    """A value of `x` that is finite, but infinite (or NaN) once standardized and cast to the model's dtype: near the
    float32 limit, or beyond it in a .json or .csv (read as float64). Values already NaN in `x` were said before."""
    bad = np.argwhere(~np.isfinite(ret) & np.isfinite(x))
    if not len(bad):
        return
    i = tuple(int(v) for v in bad[0])
    found = (f"{path}: {_where(i)} is {x[i]:g}, which is infinite once standardized (x - mean) / std and cast to "
             f"{ret.dtype} ({plural(len(bad), 'value')} like it)")  # fmt: skip
    if allow_nonfinite:
        typer.echo(f"warning: {found}; running them as given (--allow-nonfinite): their outputs may be NaN", err=True)
        return
    trained = ""
    if stats:
        mean, std = (np.broadcast_to(stats[k], x.shape[1:])[i[1:]] for k in ("mean", "std"))
        trained = f"the model was trained on values with mean {mean:.4g} and std {std:.4g} there: "
    raise SpecError.at(None, found, f"{trained}check the example's units, or leave it out"
                       f"{_or_allow(allow_nonfinite, 'run it anyway')}")  # fmt: skip


def check_outputs(out: np.ndarray, allow_nonfinite: bool | None, what: str = "output") -> None:
    """No NaN or infinity reaches an output with exit 0: the first is an error naming its example and position (the
    inputs were finite, so the weights overflowed float32 on it), or with `allow_nonfinite` a warning (None: the
    command has no --allow-nonfinite, as in `prepare`)."""
    bad = np.argwhere(~np.isfinite(out)) if out.dtype.kind == "f" else []
    if not len(bad):
        return
    i = tuple(int(v) for v in bad[0])
    kind = "NaN" if np.isnan(out[i]) else "infinity"
    found = (f"the model's {what} for example {i[0]} is not finite ({kind} at position {list(i[1:])}; "
             f"{plural(len(bad), 'value')} NaN or infinite)")  # fmt: skip
    if allow_nonfinite:
        typer.echo(f"warning: {found}; reported as it is (--allow-nonfinite)", err=True)
        return
    raise SpecError.at(None, found, "the model overflowed float32 on it: check the example's units (values far from "
                       f"those it was trained on), or the weights{_or_allow(allow_nonfinite, 'report it anyway')}"
                       )  # fmt: skip


def _or_allow(allow_nonfinite: bool | None, what: str) -> str:
    """The end of a hint that offers --allow-nonfinite, where the command has it (None: it does not)."""
    return "" if allow_nonfinite is None else f"; or pass --allow-nonfinite to {what}"


def _tokens(x: np.ndarray, spec: ValidSpec, name: str, dtype: str, path: Path) -> np.ndarray:
    """Integer inputs: whole numbers, within the vocabulary of the embedding that reads them."""
    fractional = np.argwhere(x != np.round(x)) if x.dtype.kind == "f" else []
    if len(fractional):
        i = tuple(int(v) for v in fractional[0])
        raise SpecError.at(None, f"{path}: {_where(i)} is {x[i]}, but the model takes whole numbers ({dtype})")
    vocab = spec.vocabulary(name)
    if vocab is not None and len(bad := np.argwhere((x < 0) | (x >= vocab))):
        i = tuple(int(v) for v in bad[0])
        raise SpecError.at(None, f"{path}: {_where(i)} is {x[i]:g}, outside the model's vocabulary (0..{vocab - 1})")
    return x.astype(dtype)


# *** results ***


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def to_result(contract: RunContract, out: np.ndarray) -> np.ndarray:
    """What run reports and writes: probabilities for a classifier; for regression the outputs in the target's own
    units (out * std + mean, with the training targets' statistics when they were standardized); else the outputs."""
    if contract.task == "classify":  # NOTE: one logit x (binary_cross_entropy) is the two classes' scores [0, x]
        return _softmax(two_class(out.reshape(-1, out.shape[-1]).astype(np.float64)).reshape(*out.shape[:-1], -1)
                        ).astype(np.float32)  # fmt: skip
    return (out * contract.target["std"] + contract.target["mean"]).astype(np.float32) if contract.target else out


def _char(code: int) -> str:
    return repr(chr(code)) if 0 <= code < 0x110000 else f"token {code}"


def _classify(i: int, p: np.ndarray, names: list[str]) -> tuple[str, dict[str, Any]]:
    if p.ndim > 1:  # NOTE: a class per position (an output of several outputs may have one)
        ks = p.argmax(-1)
        shown = ", ".join(excerpt(names[k], 40) for k in ks.reshape(-1)[:20]) + (", ..." if ks.size > 20 else "")
        return f"{i}: classes [{shown}]", {"index": i, "classes": ks.tolist(), "probabilities": p.tolist()}
    k = int(p.argmax())
    shown = names[k] if names[k] == str(k) else f"{k} ({excerpt(names[k], 40)})"  # NOTE: no escape sequences
    return f"{i}: class {shown} (p={p[k]:.3f})", {"index": i, "class": k, "name": names[k],
                                                   "probability": float(p[k]), "probabilities": p.tolist()}  # fmt: skip


def _regress(i: int, y: np.ndarray, names: list[str]) -> tuple[str, dict[str, Any]]:
    if y.size == 1:
        return f"{i}: {float(y.reshape(())):.6g}", {"index": i, "value": float(y.reshape(()))}
    return f"{i}: [{', '.join(f'{v:.4g}' for v in y.reshape(-1))}]", {"index": i, "values": y.tolist()}


def _language(i: int, logits: np.ndarray, names: list[str]) -> tuple[str, dict[str, Any]]:
    p = _softmax(logits.reshape(-1, logits.shape[-1])[-1].astype(np.float64))  # the last position's next token
    k = int(p.argmax())
    return f"{i}: next {_char(k)} (p={p[k]:.3f})", {"index": i, "next": chr(k) if k < 0x110000 else None,
                                                     "token": k, "probability": float(p[k])}  # fmt: skip


FORMATTERS: dict[str, Callable[[int, np.ndarray, list[str]], tuple[str, dict[str, Any]]]] = {
    "classify": _classify, "regress": _regress, "language": _language}  # fmt: skip


def report(contract: RunContract, out: np.ndarray, as_json: bool) -> None:
    names = list(contract.class_names)
    lines, records = zip(*(FORMATTERS[contract.task](i, y, names) for i, y in enumerate(out)))
    typer.echo(json.dumps(list(records), indent=2) if as_json else "\n".join(lines))


# *** the --output table: carried columns, the prediction, each class's probability ***


@dataclass(frozen=True)
class Carry:
    """What `run --output` carries over from a csv input before the predictions: its ID column (--id; else the
    example's index, as run prints it) and other columns (--keep, or every column with --keep-inputs), as written."""

    id: str | None = None
    keep: tuple[str, ...] = ()
    keep_inputs: bool = False

    @property
    def option(self) -> str | None:
        """The first option given that names columns of the input, for messages."""
        return "--id" if self.id is not None else "--keep-inputs" if self.keep_inputs else "--keep" if self.keep \
            else None  # fmt: skip


def _check_carry(carry: Carry, input_path: Path, output: Path | None, several: bool) -> None:
    """--id and --keep name columns of a csv input for a .csv or .json output table: refused before any work."""
    option = carry.option
    if option is None:
        return
    if output is None:
        raise SpecError.at(None, f"{option} adds columns to the table --output writes, but no --output is given",
                           "add --output preds.csv (or .json)")  # fmt: skip
    if several:
        raise SpecError.at(None, f"{option} applies to a model with one input and one output; this one's outputs "
                           "are written as arrays by name", f"leave out {option}")  # fmt: skip
    if output.suffix.lower() not in (".csv", ".json"):
        raise SpecError.at(None, f"{option} adds columns to a .csv or .json table, but --output {output} is a bare "
                           "array", "write a .csv or .json file")  # fmt: skip
    if input_path.suffix.lower() != ".csv":
        raise SpecError.at(None, f"{option} names columns of a .csv input, but --input {input_path} has no columns",
                           "pass the examples as a .csv file with a header row")  # fmt: skip


def _carried(path: Path, spec: ValidSpec, carry: Carry, n: int) -> list[tuple[str, list[Any]]]:
    """The columns written before the predictions: the ID column (--id) or `index` (0, 1, ... as run prints them),
    then the kept columns, each (name, one value per example) as the csv input writes it."""
    if carry.option is None:
        return [("index", list(range(n)))]
    hline, header, rows, _ = csv_table(read_data(str(path), None, "--input", None), path,
                                       dialect_of(spec.values.get("data") or {}))  # fmt: skip
    names = [*([carry.id] if carry.id is not None else []), *carry.keep]
    if carry.keep_inputs:
        names += [h for h in header if h not in names]
    missing = [k for k in names if k not in header]
    if missing:
        option = "--id" if missing[0] == carry.id else "--keep"
        hint = did_you_mean(missing[0], header) or ""
        raise SpecError.at(Location(str(path), hline, 1), f"{option}: {path.name} has no column '{missing[0]}'",
                           f"{hint} the header has: {', '.join(header[:20])}".strip())  # fmt: skip
    if len(rows) != n:  # NOTE: a row the reader left out would shift every carried value onto another prediction
        raise SpecError.at(Location(str(path), hline, 1), f"{len(rows)} rows of {path.name} gave {n} predictions, so "
                           "its columns cannot be carried over row by row", "leave out --id and --keep")  # fmt: skip
    ret = [(k, [c[header.index(k)].strip() for _, c in rows]) for k in names]
    return ret if carry.id is not None else [("index", list(range(n))), *ret]


def prediction_table(contract: RunContract, out: np.ndarray, carried: list[tuple[str, list[Any]]]
                     ) -> tuple[list[str], list[list[Any]]]:  # fmt: skip
    """(header, rows) of the --output table: the carried columns, then the predicted class's name and each class's
    probability p_<class> (a classifier), or the value in the target's units (`prediction`); other outputs flattened
    as out_<k>. A name twice is an error: a reader would see one of the columns only."""
    flat = out.reshape(len(out), -1)
    if contract.task == "classify" and out.ndim == 2:
        names = list(contract.class_names)
        head = ["prediction", *(f"p_{n}" for n in names)]
        values = [[names[int(k)], *map(float, p)] for k, p in zip(flat.argmax(1), flat)]
    elif contract.task == "regress" and flat.shape[1] == 1:
        head, values = ["prediction"], [[float(v)] for v in flat[:, 0]]
    else:
        head, values = [f"out_{k}" for k in range(flat.shape[1])], [list(map(float, r)) for r in flat]
    header = [k for k, _ in carried] + head
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise SpecError.at(None, f"the --output table would have two columns named '{excerpt(twice[0], 40)}'",
                           "leave that column out of --keep (or rename it in the input)")  # fmt: skip
    return header, [[*(c[i] for _, c in carried), *v] for i, v in enumerate(values)]


def defused(cell: Any) -> Any:
    """A text cell of the .csv table as a spreadsheet cannot run it: one starting with =, +, -, @, a tab or a CR (a
    formula there: '=HYPERLINK(...)', CSV injection) gets a ' in front, which a spreadsheet shows as text; a number
    written as text (-1.5, +2, 3,5) is left as it is. Other cells, and the .json table, keep the exact text."""
    if not isinstance(cell, str) or not cell or cell[0] not in FORMULA_FIRST or NUMBER.fullmatch(cell):
        return cell
    return "'" + cell


def write_output(path: Path, out: np.ndarray, contract: RunContract, carried: list[tuple[str, list[Any]]]) -> None:
    """out as .npy (the bare array), or as the prediction table in .csv (numbers to 9 significant digits, a text cell
    that a spreadsheet would run as a formula defused) or .json (a list of objects with the table's columns as keys, in
    order, the text exact), written atomically."""
    if path.suffix.lower() == ".npy":
        buf = io.BytesIO()
        np.save(buf, out)
        data = buf.getvalue()
    elif path.suffix.lower() == ".csv":
        header, rows = prediction_table(contract, out, carried)
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow([defused(h) for h in header])
        writer.writerows([f"{v:.9g}" if isinstance(v, float) else defused(v) for v in row] for row in rows)
        data = text.getvalue().encode()
    else:
        header, rows = prediction_table(contract, out, carried)
        data = (json.dumps([dict(zip(header, row)) for row in rows]) + "\n").encode()
    atomic_write(path, data)  # NOTE: never half a file; a full or read-only disk ends in cli/errors.py, exit 3


# *** a model with several inputs or outputs ***


def run_named(spec: ValidSpec, model: Model, contract: RunContract, input_path: Path, output: Path | None,
              as_json: bool, allow_nonfinite: bool) -> None:  # fmt: skip
    """Examples from a .npz (an array per input, named after it) or a .json object (input name -> examples); every
    output reported per example, or written to a .npz (an array per output) or a .json object (output -> values)."""
    xs = [prepare(x, spec, contract, Path(f"{input_path}[{k}]"), k, allow_nonfinite)
          for k, x in read_named(input_path, spec, allow_nonfinite).items()]  # fmt: skip
    heads = {o: contract.heads.get(o, RunContract()) for o in spec.outputs}
    with np.errstate(all="ignore"):  # NOTE: an overflow is found below and said in words, never as a RuntimeWarning
        raw = [[t.numpy() for t in model.outputs(*[Tensor(x[i : i + CHUNK]) for x in xs])]
               for i in range(0, len(xs[0]), CHUNK)]  # fmt: skip
        outs = {o: to_result(heads[o], np.concatenate([r[k] for r in raw])) for k, o in enumerate(spec.outputs)}
    for o, y in outs.items():
        check_outputs(y, allow_nonfinite, f"output {o}")
    if output is not None:
        if output.suffix.lower() == ".npz":
            buf = io.BytesIO()
            np.savez(buf, **outs)
            atomic_write(output, buf.getvalue())
        else:
            atomic_write(output, (json.dumps({o: y.tolist() for o, y in outs.items()}) + "\n").encode())
        shapes = {o: list(y.shape) for o, y in outs.items()}
        message = f"wrote the outputs {', '.join(f'{o} (shape {s})' for o, s in shapes.items())} to {output}"
        typer.echo(json.dumps({"output": str(output), "shapes": shapes, "examples": len(xs[0])}) if as_json else
                   message)  # fmt: skip
        return
    lines, records = [], []
    for i in range(len(xs[0])):
        parts = {o: FORMATTERS[heads[o].task or "regress"](i, outs[o][i], list(heads[o].class_names)) for o in outs}
        lines.append(f"{i}: " + "; ".join(f"{o} {text.partition(': ')[2]}" for o, (text, _) in parts.items()))
        records.append({"index": i, **{o: {k: v for k, v in r.items() if k != "index"} for o, (_, r) in parts.items()}})
    typer.echo(json.dumps(records, indent=2) if as_json else "\n".join(lines))


NAMED_FORMATS = (".npz", ".json")


def read_named(path: Path, spec: ValidSpec, allow_nonfinite: bool) -> dict[str, np.ndarray]:
    """input name -> (N, *its shape), from a .npz (an array per input) or a .json object (input name -> one example
    or a list of them); every input present, all with the same number of examples, every value finite (or, with
    `allow_nonfinite`, a warning)."""
    _check_format(path, "--input", NAMED_FORMATS)
    named_file(path, "--input")
    raw = read_data(str(path), None, "--input", None)
    if path.suffix.lower() == ".npz":
        given = _npz_inputs(raw, path, list(spec.inputs))
    else:
        given = _json_inputs(raw, path, list(spec.inputs), allow_nonfinite)
    xs = {k: _batched(given[k], tuple(spec.inputs[k][0]), Path(f"{path}[{k}]")) for k in spec.inputs}
    counts = {k: len(x) for k, x in xs.items()}
    if len(set(counts.values())) > 1:
        raise SpecError.at(None, f"{path}: the inputs hold different numbers of examples ("
                           f"{', '.join(f'{k} {n}' for k, n in counts.items())})",
                           "give every input one value per example")  # fmt: skip
    for k, x in xs.items():
        _check_finite(x, Path(f"{path}[{k}]"), allow_nonfinite)
    return xs


def _missing(path: Path, names: list[str], held: list[str]) -> None:
    if missing := [k for k in names if k not in held]:
        raise SpecError.at(None, f"{path} has no examples for the input{'s' * (len(missing) > 1)} "
                           f"{', '.join(missing)}", f"it holds: {', '.join(excerpt(h) for h in held[:20]) or 'nothing'}"
                           f"; the model's inputs are {', '.join(names)}")  # fmt: skip


def _npz_inputs(raw: bytes, path: Path, names: list[str]) -> dict[str, np.ndarray]:
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise ValueError("it is a single .npy array, not a .npz of one array per input")
            _missing(path, names, list(z.files))
            for k in names:  # NOTE: an array's unpacked size is checked before it is unpacked (a zip bomb)
                if z.zip.getinfo(f"{k}.npy").file_size > int(MAX_FILE_MB.value) * MIB:
                    raise ValueError(f"its array '{k}' unpacks to more than {MAX_FILE_MB} MB")
            arrays = {k: z[k] for k in names}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
        why = "it holds Python objects, which are never loaded" if "pickle" in str(e) else str(e)
        raise SpecError.at(None, f"--input {path} cannot be read as a .npz file ({excerpt(why, 200)})",
                           "save the examples with numpy: np.savez(path, <input>=examples, ...)") from None  # fmt: skip
    for k, a in arrays.items():
        if a.dtype.kind not in "biuf":
            raise SpecError.at(None, f"--input {path}: the array '{k}' must hold numbers, got {a.dtype}")
    return arrays


def _json_inputs(raw: bytes, path: Path, names: list[str], allow_nonfinite: bool) -> dict[str, np.ndarray]:
    value = _json_value(raw, path)
    if isinstance(value, list):
        raise SpecError.at(None, f"{path} holds a list, but the model has inputs {', '.join(names)}",
                           'write an object with a list of examples per input: {"' + '": [...], "'.join(names)
                           + '": [...]}')  # fmt: skip
    if not isinstance(value, dict):
        raise SpecError.at(None, f"{path} must hold an object with the examples of each input, "
                           f"{', '.join(names)}")  # fmt: skip
    _missing(path, names, list(value))
    for k in names:
        _json_shape(value[k], Path(f"{path}[{k}]"), not allow_nonfinite)
    return {k: np.asarray(value[k], dtype=np.float64) for k in names}
