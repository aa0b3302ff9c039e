"""A spec's data as numpy arrays: load_data reads it with its source's reader (sources/: one module per source, each a
SourceDef in the registry sources/__init__.py), split with data.split_seed (else the spec's seed), each class keeping
its share (data.stratify), checks it against the model (the data contract: output width vs classes, loss vs task,
labels out of range; sources/split.py), standardizes it with training statistics only, and batches it, training
batches with the spec's seeded augmentation. Every problem in a data file is a SpecError at its file:line:col. This is
the module callers import from: the names they use of sources/ are re-exported here. Imports numpy, modelspec (auto,
errors, validate) and train.sources (never Tensor: the trainer wraps arrays).

Regression targets from csv, npz and sine are standardized with the training split's mean and std (target_stats);
`unstandardize` brings predictions back to the target's own units. Augmentation changes training batches only, drawn
from the data order's generator (one seed per epoch, then one generator per batch), so a resumed run draws the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.modelspec.auto import Auto, DataWidths
from specgrad.modelspec.contract import Columns
from specgrad.modelspec.errors import Location, Problem, SpecError
from specgrad.modelspec.validate import ValidSpec, is_float
from specgrad.train.sources import APPLIES, AUTO_SOURCES, SOURCES
from specgrad.train.sources.base import (
    FLOAT32_MAX,
    Dataset,
    Head,
    SourceDef,
    _numbered,
    _Source,
    _statistics,
    fields,
    named,
    standardize,
    unstandardize,
)
from specgrad.train.sources.csv import (
    NONFINITE_HINT,
    CsvNotes,
    Dialect,
    column_kinds,
    column_uses,
    csv_table,
    dialect_of,
    encode_rows,
    input_columns,
    is_number,
)
from specgrad.train.sources.images import IMAGE_MODES, IMAGE_SUFFIXES, WrongSize, pillow, read_image
from specgrad.train.sources.npz import _load_named
from specgrad.train.sources.split import is_random_split_run, split_seed, stratified_split

# NOTE: what callers import from here that lives in sources/ (one place to import data names from)
__all__ = [
    "APPLIES", "FLOAT32_MAX", "IMAGE_MODES", "IMAGE_SUFFIXES", "NONFINITE_HINT", "SOURCES", "CsvNotes", "Dataset",
    "Dialect", "Head", "SourceDef", "WrongSize", "_statistics", "augmented", "batches", "column_kinds",
    "column_uses", "csv_table", "data_file", "data_widths", "dialect_of", "encode_rows", "eval_batches", "fields",
    "input_columns", "inspect_data", "is_number", "is_random_split_run", "load_data", "named", "pillow", "read_image",
    "split_seed", "standardize", "stratified_split", "unstandardize",
]  # fmt: skip


def _source(spec: ValidSpec) -> _Source:
    data = spec.values.get("data") or {}
    if data.get("source") is None:
        raise SpecError.at(Location(spec.path, 1, 1), "the spec has no data: section, so there is nothing to train on",
                           "add one, for example data: {source: digits}")  # fmt: skip
    if named(spec) and data["source"] != "npz":
        source = spec.node("data", "source")
        raise SpecError.at(source.loc if source is not None else None, f"source {data['source']} feeds a model with "
                           f"one input and one output, but this one has inputs {', '.join(spec.inputs)} and outputs "
                           f"{', '.join(spec.outputs)}", "use source: npz, with one array per input and per output, "
                           "named after them")  # fmt: skip
    name, (shape, dtype) = next(iter(spec.inputs.items()))
    return _Source(spec, data, name, tuple(shape), dtype, spec.outputs[0])


def data_file(spec: ValidSpec, key: str = "path") -> Path:
    """The file data.<key> (path or test_path) names, resolved as load_data resolves it (relative to the spec file
    that names it)."""
    return _source(spec).named_file(key)


def load_data(spec: ValidSpec, held: str = "valid", test_file: Path | None = None) -> Dataset:
    """The spec's examples, split into training and validation, deterministic given spec.values['seed']. With held
    "test", x_valid and y_valid hold the test examples instead (data.test_split's, or every example of
    data.test_path, or of `test_file` (evaluate --split FILE); prepared with the training split's statistics, as the
    validation examples are); training never asks for them."""
    src = replace(_source(spec), held=held)
    _check_unused(src)
    if test_file is not None:
        return _load_test_file(replace(src, test_file=test_file, test_key="--split"))
    if held == "test" and src.data["test_path"] is not None:
        return _load_test_file(replace(src, test_file=src.named_file("test_path")))
    if named(spec):
        return _load_named(src)
    kind = src.data["source"]
    source = SOURCES[kind]
    if source.floats and not is_float(src.dtype):
        raise SpecError.at(src.input_loc("dtype") or src.input_loc(), f"source {kind} gives numbers with fractions, "
                           f"but the input's dtype is {src.dtype}", "use dtype float32")  # fmt: skip
    _check_augment(src)
    ds = source.read(src)
    if src.data["normalize"] and source.normalizes and is_float(src.dtype):
        ds = _normalized(ds, source.axis, ds.columns)
    augment = src.data["augment"]
    ds.augment = augment if augment and any(augment.values()) else None
    if ds.task == "regress" and src.data["normalize_target"] and src.data["target"] != "input":
        ds = _standardized_targets(ds)
    ds.x_train, ds.x_valid = ds.x_train.astype(src.dtype, copy=False), ds.x_valid.astype(src.dtype, copy=False)
    return ds


def _load_test_file(src: _Source) -> Dataset:
    """The training data with every example of data.test_path as its held-out part: read by the source's own reader,
    with the training split's vocabularies and class names, and prepared with its statistics."""
    if src.data["path"] is not None and os.path.realpath(src.test_file) == os.path.realpath(src.named_file("path")):
        where = src.loc("test_path") if src.test_key == "data.test_path" else None
        raise SpecError.at(where, f"{src.test_key} names the training data itself ({src.data['path']}): figures on "
                           "examples the model learned from say nothing of new ones", "name a file of other "
                           "examples, or hold some out with data.test_split")  # fmt: skip
    ds = load_data(src.spec)
    # NOTE: with data.class_names a test file's labels are still whole numbers, read as the training labels were
    classes = _numbered(len(ds.class_names or [])) if src.data["class_names"] else ds.class_names
    test = replace(src, held="test", columns=ds.columns, classes=classes)
    got = _load_named(test) if named(src.spec) else SOURCES[src.data["source"]].read(test)
    x, y = got.x_valid, got.y_valid
    if ds.heads:
        for k, stats in ds.input_stats.items():
            x[k] = standardize(x[k], stats)
        for o, head in ds.heads.items():
            y[o] = standardize(y[o], head.target_stats)
    else:
        x = standardize(x, ds.stats)
        y = standardize(y, ds.target_stats).astype(y.dtype, copy=False)
    ds.x_valid, ds.y_valid = x.astype(x.dtype if ds.heads else src.dtype, copy=False), y
    ds.table = got.table  # NOTE: the file read for the held-out part: the rows it left out are its own
    return ds


def inspect_data(spec: ValidSpec) -> tuple[Dataset | None, list[Problem]]:
    """(the data, or None when it has problems or the spec has no data section; its problems)."""
    # TODO: read only headers, shapes and the target column of large files; here every source is small enough to load
    if (spec.values.get("data") or {}).get("source") is None:
        return None, []
    try:
        ds = load_data(spec)
        if spec.values["data"]["test_path"] is not None:  # NOTE: its problems are found before a long training
            ds.test_examples = len(load_data(spec, held="test").x_valid)
        return ds, []
    except SpecError as e:
        return None, e.problems


def _check_unused(src: _Source) -> None:
    """Keys that would silently do nothing for this source."""
    kind, problems = src.data["source"], []
    for key, sources in APPLIES.items():
        if kind not in sources and src.given(key):
            names = " and ".join(filter(None, (", ".join(sources[:-1]), sources[-1])))
            problems.append(Problem(f"data.{key} is for the {names} source{'s' * (len(sources) > 1)}, not {kind}",
                                    src.near(key)))  # fmt: skip
    allowed = SOURCES[kind].targets
    if allowed is not None and src.data["target"] not in allowed:
        digits = " for the digit labels, or write input to rebuild the image" if kind == "digits" else ""
        hint = f"leave it out{digits}"
        problems.append(Problem(f"data.target '{src.data['target']}' does not apply to source {kind}",
                                src.near("target"), hint))  # fmt: skip
    if problems:
        raise SpecError(problems)


def _check_augment(src: _Source) -> None:
    """crop and flip move pixels, so they need images [channels, height, width] that are not also the target; noise
    needs a float input."""
    augment, problems = src.data["augment"] or {}, []
    shape, image = src.shape, len(src.shape) == 3

    def at(key: str) -> Location | None:
        node = src.node("data", "augment", key)
        return node.loc if node is not None else src.near("augment")

    for key in (k for k in ("crop", "flip") if augment.get(k)):
        if not image:
            problems.append(Problem(f"data.augment.{key} changes images, but the input's shape {list(shape)} is not an "
                                    "image's [channels, height, width]", at(key),
                                    "remove it (noise works with any float input)"))  # fmt: skip
        elif src.data["target"] == "input":
            problems.append(Problem(f"data.augment.{key} would move the input's pixels away from the target's, which "
                                    "is the same image (target: input)", at(key),
                                    "remove it (noise, for a denoising autoencoder, works)"))  # fmt: skip
    if image and augment.get("crop", 0) >= (side := min(shape[1:])):
        problems.append(Problem(f"data.augment.crop is {augment['crop']} pixels, but the images are only "
                                f"{shape[2]}x{shape[1]}: a random window could hold padding only", at("crop"),
                                f"use a crop below {side}, such as {max(1, side // 8)}"))  # fmt: skip
    if augment.get("noise") and not is_float(src.dtype):
        problems.append(Problem(f"data.augment.noise adds fractions, but the input's dtype is {src.dtype}",
                                at("noise"), "remove it: integer inputs (tokens, codes) take no noise"))  # fmt: skip
    if problems:
        raise SpecError(problems)


def _standardized_targets(ds: Dataset) -> Dataset:
    """Regression targets standardized with the TRAINING split's mean and std per target value."""
    ds.target_stats = _statistics(ds.y_train, axis=0)
    ds.y_train = standardize(ds.y_train, ds.target_stats).astype(np.float32)
    ds.y_valid = standardize(ds.y_valid, ds.target_stats).astype(np.float32)
    return ds


def _normalized(ds: Dataset, axis: int | tuple[int, ...] | None, columns: Columns | None = None) -> Dataset:
    """Standardized with the TRAINING split's mean and std over `axis` (0: per feature; None: one number for the
    digits; (0, 2, 3): per channel of images); std 0 -> 1; one-hot values are kept as 0 and 1 (mean 0, std 1)."""
    ds.stats = _statistics(ds.x_train, axis=axis)
    if columns is not None and columns.categorical:
        mask = columns.one_hot_mask()
        ds.stats["mean"][mask], ds.stats["std"][mask] = 0.0, 1.0
    ds.x_train, ds.x_valid = standardize(ds.x_train, ds.stats), standardize(ds.x_valid, ds.stats)
    return ds


def data_widths(spec: ValidSpec, autos: list[Auto]) -> DataWidths:
    """The numbers a spec's `autos` take from its data (modelspec.auto; `spec` holds placeholders in their place): the
    sources whose SourceDef has widths (csv and npz), with one input and one output. For a csv, input.shape: auto also
    chooses the columns (sources/csv.py's _auto_columns)."""
    src = _source(spec)
    _check_unused(src)
    kind = src.data["source"]
    widths = SOURCES[kind].widths
    if widths is None:
        shape = ("the images are resized to the shape written" if kind == "images" else
                 "its examples have the shape the spec gives")  # fmt: skip
        names = " and ".join(filter(None, (", ".join(AUTO_SOURCES[:-1]), AUTO_SOURCES[-1])))
        raise SpecError([Problem(f"{'input.shape' if a.what == 'shape' else 'out'} is auto, which is taken from "
                                 f"{names} data; source {kind}: {shape}", a.loc, "write the number(s)")
                         for a in autos])  # fmt: skip
    return widths(src, any(a.what == "shape" for a in autos))


def batches(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool, rng: np.random.Generator | None = None,
            augment: dict[str, Any] | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """Full training batches, in a new order from `rng` each call when shuffle; the last partial batch is dropped.
    With `augment` (Dataset.augment), each batch is changed by a generator seeded from one number `rng` draws per
    call and the batch's position, so batch i of an epoch is the same whether or not the batches before it ran."""
    # NOTE: full batches only, so a TinyJit-captured training step sees one shape on every replay
    if (shuffle or augment) and rng is None:
        raise ValueError("batches(shuffle=True) and batches(augment=...) need an np.random.Generator")
    order = rng.permutation(len(x)) if shuffle else None
    seed = int(rng.integers(1 << 63)) if augment else 0
    for n, i in enumerate(range(0, len(x) - batch_size + 1, batch_size)):
        pick = slice(i, i + batch_size) if order is None else order[i : i + batch_size]
        if augment:
            yield augmented(x[pick], augment, np.random.default_rng([seed, n])), y[pick]
        else:
            yield x[pick], y[pick]


def augmented(x: np.ndarray, augment: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    """A batch (B, *input shape) with data.augment's changes, in this order: a random window of each image (B, C, H,
    W) padded by `crop` pixels of 0 (the mean, once normalized), a left-right mirror of each with probability 1/2,
    Gaussian noise of std `noise` on every value."""
    out = x
    if augment.get("crop"):
        p, (b, _, h, w) = augment["crop"], x.shape
        padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        dy, dx = rng.integers(0, 2 * p + 1, b), rng.integers(0, 2 * p + 1, b)
        out = np.stack([padded[k, :, dy[k] : dy[k] + h, dx[k] : dx[k] + w] for k in range(b)])
    if augment.get("flip"):
        out = np.where((rng.random(len(x)) < 0.5).reshape(-1, *[1] * (x.ndim - 1)), out[..., ::-1], out)
    if augment.get("noise"):
        out = out + augment["noise"] * rng.standard_normal(out.shape, dtype=np.float32)
    return np.ascontiguousarray(out, dtype=x.dtype)


def eval_batches(x: np.ndarray, y: np.ndarray, batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every example in order, in batches of batch_size; the last batch may be smaller."""
    for i in range(0, len(x), batch_size):
        yield x[i : i + batch_size], y[i : i + batch_size]
