"""A spec's data as numpy arrays: the bundled digits and sonnets, text, CSV (numbers and categorical columns), .npz/.npy
files, folders of images, spirals and sine; split with data.split_seed (else the spec's seed), each class keeping its
share (data.stratify), standardized with training statistics only, and batched, training batches with the spec's seeded
augmentation. Every problem in a data file is a SpecError at its file:line:col, and so is data the model cannot learn
from as written (the data contract: output width vs classes, loss vs task, labels out of range). Imports numpy, flags,
modelspec (contract, errors, files, loader, schema, layers, validate) and specgrad.datasets (never Tensor: the trainer
wraps arrays); Pillow, an optional extra, only when images are read.

Files are read as modelspec.files allows: inside the allowed folders, regular files of at most MAX_FILE_MB. A .npz's zip
directory and each .npy header are checked before any array is read (array count, sizes, dtypes: never a pickle), and
only the arrays used are read. Messages quote a data file only in short excerpts (a cell, a column name).

Regression targets from csv, npz and sine are standardized with the training split's mean and std (target_stats);
`unstandardize` brings predictions back to the target's own units.

A categorical csv column's categories are the training split's distinct values (sorted as class names are); a
one_hot column gives one value per category, an index column one code (see modelspec.contract.Columns, which is saved
with the weights so that `run` encodes its input the same way). One-hot values are left 0 and 1 by normalization.
A csv's delimiter is data.delimiter or sniffed, its decimal mark data.decimal; a missing cell (data.missing_values)
is filled as data.missing and data.missing_columns say, with values of the training rows saved in Columns.missing,
and a row whose target is missing is left out before the split.

An image is read as floats 0..1 of the input's shape [channels, height, width] (1 channel: grayscale, 3: RGB, 4: RGBA,
converted from what the file holds), normalized per channel. Augmentation changes training batches only, drawn from
the data order's generator (one seed per epoch, then one generator per batch), so a resumed run draws the same.

Text examples are windows of `context` characters (x) and the same window shifted by one character (y); windows start
every context // 2 characters, so a small text gives twice the examples of non-overlapping windows. The last
valid_split of the text (by position) is the validation text, so no window spans both splits.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from struct import error as struct_error
from typing import Any

import numpy as np

from specgrad.datasets import load_digits, load_text, split
from specgrad.flags import MAX_FILE_MB
from specgrad.modelspec.contract import TINY, Columns
from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.files import MIB, RELATIVE_HINT, SIZE_HINT, check_inside, open_data, read_data
from specgrad.modelspec.layers import LAYERS
from specgrad.modelspec.loader import YNode
from specgrad.modelspec.schema import did_you_mean
from specgrad.modelspec.validate import (
    DATA,
    DELIMITERS,
    MISSING_VALUES,
    REGRESSION_LOSSES,
    TRAIN,
    ValidSpec,
    check_folder,
    index_mix_problem,
    is_float,
)

DEFAULT_VOCAB = 128  # NOTE: characters are their code points; ASCII unless the model's embedding says otherwise
MAX_PROBLEMS = 10  # problems of one kind (cells, characters) reported at once; the rest are counted
FLOAT_SOURCES = ("digits", "images", "spirals", "sine")  # NOTE: csv gives integer codes when every feature is an index
MAX_LABEL = 2**31 - 1  # NOTE: labels are int32 on the device; a larger one must be an error, never a wrap
EXACT_FLOAT32 = 2**24  # NOTE: integers up to this are exact in float32
FLOAT32_MAX = float(np.finfo(np.float32).max)  # NOTE: a larger value from a file would become infinity on the device
MAX_CLASSES = LAYERS["linear"].entry.args.fields["out"].max  # NOTE: the widest output layer the schema allows
MAX_CSV_CELLS = 20_000_000  # NOTE: a cell is a Python string until it is parsed: about 60 bytes each
MAX_NPZ_ARRAYS = 256  # NOTE: arrays in a .npz, counted from its zip directory before it is parsed
MAX_ZIP_DIRECTORY = 1 << 20  # NOTE: bytes of a .npz's zip directory (a few hundred arrays need a few KiB)
MAX_NPY_HEADER = 10_000  # NOTE: bytes of a .npy header, numpy's own limit; np.save writes about 128
MAX_TEXT_CHARS = 64_000_000  # NOTE: a text source's windows take 16 bytes per character (x and y, int32, overlapping)
SHOWN = 40  # NOTE: characters of a data file's cell or column name a message quotes
MAX_ENCODED = 1 << 28  # NOTE: values of a csv's examples once one-hot encoded (1 GiB of float32)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")  # NOTE: what Pillow is asked to read (its formats PNG and JPEG only)
IMAGE_MODES = {1: "L", 3: "RGB", 4: "RGBA"}  # NOTE: the input's channels -> the Pillow mode every image is converted to
MAX_IMAGES = 1_000_000  # NOTE: files listed in an images folder
MAX_IMAGE_VALUES = 1 << 30  # NOTE: values of all images once decoded (4 GiB of float32), checked before decoding
# NOTE: pixels one image may decode to, from its header before decoding: 16 times the input's height and width, or
# 2^24 (16 megapixels: a 4K or 5K screenshot, 0.1-0.2 s to decode) where that is more. A JPEG is decoded at up to 1/8
# scale per side (its draft mode) when it is resized, so its declared pixels count 1/64.
IMAGE_SCALE, MIN_IMAGE_PIXELS = 16, 1 << 24
JPEG_FORMATS = ("JPEG", "MPO")  # NOTE: Pillow opens a JPEG with a multi-picture block (phones, cameras) as MPO
NONFINITE_HINT = "missing or infinite values cannot be learned from: fill in a number, or remove the row"
# NOTE: data keys that do something for some sources only; any other source with the key given is an error
APPLIES = {"path": ("text", "csv", "npz", "images"), "test_path": ("text", "csv", "npz", "images"),
           "corpus": ("text",), "context": ("text",), "features": ("csv",),
           "categorical": ("csv",), "task": ("csv", "npz"), "resize": ("images",), "samples": ("spirals", "sine"),
           "noise": ("spirals", "sine"), "delimiter": ("csv",), "decimal": ("csv",), "missing_values": ("csv",),
           "missing": ("csv",), "missing_columns": ("csv",),
           "split_seed": ("digits", "csv", "npz", "images", "spirals", "sine"),
           "class_names": ("digits", "csv", "npz", "spirals")}  # fmt: skip
SNIFFED_LINES, SNIFFED_CHARS = 20, 1 << 16  # NOTE: rows after the header a csv's delimiter is sniffed from, at most
# NOTE: a number whose digits are grouped in threes by ',', '.', a space or an apostrophe: 1,234.5, 1.234,5, 1 234
THOUSANDS = re.compile(r"[+-]?\d{1,3}([,. \u00a0'])\d{3}(?:\1\d{3})*(?:[.,]\d*)?")


@dataclass
class Head:
    """One output of a model with several inputs or outputs: what it learns, and what its targets say."""

    task: str  # "classify" (int32 labels) or "regress" (float32), from its loss: cross_entropy or mse
    loss: str
    weight: float  # its share of the total loss
    num_classes: int | None = None
    class_names: list[str] | None = None
    target_stats: dict[str, np.ndarray] = field(default_factory=dict)  # as Dataset.target_stats


@dataclass
class Dataset:
    """Training and validation examples: x is (N, *input shape) in the input's dtype, y the targets. A model with
    several inputs or outputs (task "multi") has structured arrays instead, one field per input (x[name] is (N, *its
    shape)) and per output, so that examples are still rows to split, shuffle and batch; `fields` takes them apart."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_valid: np.ndarray
    y_valid: np.ndarray
    task: str  # "classify" (y int32 labels), "regress" (y float32) or "language" (y int32 next tokens (N, context))
    num_classes: int | None = None
    stats: dict[str, np.ndarray] = field(default_factory=dict)  # "mean", "std" of the training x when normalized
    # "mean", "std" (shape y.shape[1:], e.g. (F,)) of the training y when regression targets are standardized
    target_stats: dict[str, np.ndarray] = field(default_factory=dict)
    class_names: list[str] | None = None  # task "classify": the label of each class index, in order
    columns: Columns | None = None  # csv: the columns read and the categorical vocabularies (saved with the weights)
    augment: dict[str, Any] | None = None  # data.augment when it changes anything: applied to training batches only
    heads: dict[str, Head] = field(default_factory=dict)  # task "multi": output name -> its task, loss and statistics
    input_stats: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # task "multi": input name -> stats
    test_examples: int = 0  # examples data.test_split holds out, which training never reads
    table: CsvNotes | None = None  # csv: its dialect, its missing cells and the rows left out, for validate


def fields(a: np.ndarray, names: tuple[str, ...] | list[str]) -> list[np.ndarray]:
    """The arrays a batch gives the model, one per input (or target per output): a structured array's fields by name,
    else the array itself (a model with one input and one output)."""
    return [np.ascontiguousarray(a[n]) for n in names] if a.dtype.names else [a]


def _records(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Equal-length arrays as one structured array, a field per name (example i of every array is row i)."""
    out = np.empty(len(next(iter(arrays.values()))), np.dtype([(k, a.dtype, a.shape[1:]) for k, a in arrays.items()]))
    for k, a in arrays.items():
        out[k] = a
    return out


# *** where things are: the spec as written, for locations ***


@dataclass(frozen=True)
class _Source:
    """The data section and its one input; locations come from the validated spec's resolved tree."""

    spec: ValidSpec
    data: dict[str, Any]
    name: str
    shape: tuple[int, ...]
    dtype: str
    out: str  # the output whose targets are being read (a model with several has a _Source per output)
    held: str = "valid"  # the held-out part a Dataset's x_valid/y_valid hold: "valid", or "test" (for evaluate)
    # reading a file of test examples (data.test_path, or evaluate --split FILE): every example in it is a test example
    test_file: Path | None = None
    test_key: str = "data.test_path"  # what names test_file, in messages
    columns: Columns | None = None  # test_file: the training split's csv columns and vocabularies
    classes: list[str] | None = None  # test_file: the training split's class names (labels are their indices)

    @property
    def key(self) -> str:
        """What names the file being read, in messages."""
        return self.test_key if self.test_file is not None else "data.path"

    @property
    def missing_hint(self) -> str:
        """Where a relative path is looked for, in words."""
        return "a path on the command line is relative to the current folder" if self.test_key == "--split" else \
            RELATIVE_HINT  # fmt: skip

    @property
    def value(self) -> str:
        """The file being read, as named."""
        return str(self.test_file) if self.test_file is not None else self.data["path"]

    @property
    def loss(self) -> str:
        return self.spec.losses[self.out][0]

    @property
    def regress_fix(self) -> str:
        """How to make the output learn numbers instead of class labels, in words."""
        return f"set train.losses.{self.out}.loss: mse" if named(self.spec) else \
            "set data.task: regress and train.loss: mse"  # fmt: skip

    def loss_loc(self) -> Location | None:
        """Where the output's loss is written: train.losses.<out>.loss, or train.loss."""
        node = self.node("train", "losses", self.out, "loss")
        return node.loc if node is not None else self.written("train", "loss")

    def node(self, *keys: str) -> YNode | None:
        return self.spec.node(*keys)

    def loc(self, key: str) -> Location | None:
        """Where data.<key> is written, when the spec as written still holds the value being used."""
        node = self.node("data", key)
        return node.loc if node is not None and node.to_plain() == self.data[key] else None

    def near(self, key: str) -> Location | None:
        """Where data.<key> is written, else the data section (a default value, or one set on the command line)."""
        data = self.node("data")
        return self.loc(key) or (data.loc if data is not None else None)

    def written(self, section: str, key: str) -> Location | None:
        """Where <section>.<key> is written, when the spec as written holds the value being used."""
        node = self.node(section, key)
        return node.loc if node is not None and node.to_plain() == self.spec.values[section][key] else None

    def given(self, key: str) -> bool:
        """data.<key> is written in the spec, or set on the command line to something other than its default."""
        return self.node("data", key) is not None or self.data[key] != DATA.fields[key].default

    def output(self) -> tuple[tuple[int, ...], Location]:
        """The output `out`: its shape per example, and where its width is set (the output layer, or the last
        layer before it with an `out`, when activations follow that one)."""
        steps = {s.name: s for s in self.spec.steps}
        last = step = steps[self.out]
        while "out" not in step.args and len(step.srcs) == 1 and step.srcs[0] in steps:
            step = steps[step.srcs[0]]
        return tuple(last.out_shape), (step if "out" in step.args else last).loc

    def input_loc(self, key: str = "shape") -> Location | None:
        node = self.node("input", key) or self.node("inputs", self.name, key)
        return node.loc if node is not None else None

    def file(self) -> Path:
        """The test file being read, else data.path, relative to the folder of the spec file that names it."""
        return self.test_file if self.test_file is not None else self.named_file("path")

    def named_file(self, key: str) -> Path:
        """data.<key> (path or test_path), relative to the folder of the spec file that names it."""
        loc = self.loc(key)
        folder = Path(loc.file).parent if loc is not None and not loc.file.startswith("--set") else None
        return (folder or Path(self.spec.path).parent) / self.data[key]

    def path_loc(self, file: Path) -> Location:
        """Problems with a whole file: where the spec names it, else at the file itself."""
        key = "path" if self.test_file is None else "test_path" if self.test_key == "data.test_path" else None
        return (self.loc(key) if key else None) or Location(str(file), 1, 1)

    def checked(self, file: Path, value: str, loc: Location | None) -> str:
        """`file` (named `value` in the spec, at `loc`), once it is known to lie in the folders the spec may read."""
        check_inside(str(file), self.spec.path, loc, self.key, value)
        return str(file)

    def read(self, file: Path, value: str, loc: Location | None) -> bytes:
        """The whole of `file` (named `value` in the spec), at most MAX_FILE_MB; a FIFO, device or folder is refused."""
        return read_data(self.checked(file, value, loc), loc, self.key, self.missing_hint)


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


def named(spec: ValidSpec) -> bool:
    """A model with several inputs or outputs: its data is an npz with one array per input and output, by name."""
    return len(spec.inputs) > 1 or len(spec.outputs) > 1


def data_file(spec: ValidSpec, key: str = "path") -> Path:
    """The file data.<key> (path or test_path) names, resolved as load_data resolves it (relative to the spec file
    that names it)."""
    return _source(spec).named_file(key)


# *** load_data ***


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
    if kind in FLOAT_SOURCES and not is_float(src.dtype):
        raise SpecError.at(src.input_loc("dtype") or src.input_loc(), f"source {kind} gives numbers with fractions, "
                           f"but the input's dtype is {src.dtype}", "use dtype float32")  # fmt: skip
    _check_augment(src)
    ds = LOADERS[kind](src)
    if src.data["normalize"] and kind != "text" and is_float(src.dtype):
        ds = _normalized(ds, {"digits": None, "images": (0, 2, 3)}.get(kind, 0), ds.columns)
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
    got = _load_named(test) if named(src.spec) else LOADERS[src.data["source"]](test)
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
    return ds


def check_data(spec: ValidSpec) -> list[Problem]:
    """The problems load_data would raise (none when the spec has no data section): what `validate` reports."""
    return inspect_data(spec)[1]


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
    allowed = {"digits": (None, "input"), "text": (None,), "images": (None,), "spirals": (None,),
               "sine": (None,)}.get(kind)  # fmt: skip
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


def _indices(src: _Source, n: int, labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled (train, held-out) indices, drawn from data.split_seed (else the spec's seed): the held-out part is the
    validation examples, or the test examples when src.held is "test". valid_split 0 keeps every example not held for
    testing for training. The test examples come from the end of the shuffled order, so the validation examples are
    the same with a test split or without. With class `labels` (and data.stratify) each class keeps its share."""
    if src.test_file is not None:
        return np.zeros(0, dtype=np.int64), np.arange(n)
    valid_split, test_split, seed = src.data["valid_split"], src.data["test_split"], split_seed(src.spec)
    if labels is not None and is_stratified(src.spec):
        train, valid, test = stratified_split(labels, valid_split, test_split, seed)
        return train, (test if src.held == "test" else valid)
    if valid_split == 0:
        train, valid = np.random.default_rng(seed).permutation(n), np.zeros(0, dtype=np.int64)
    else:
        train, valid = split(n, valid_split, seed)
    kept = len(train) - _test_count(n, test_split, len(train))
    return train[:kept], (train[kept:] if src.held == "test" else valid)


def split_seed(spec: ValidSpec) -> int:
    """The seed of the validation and test split: data.split_seed, else the spec's seed (as before split_seed was)."""
    given = (spec.values.get("data") or {}).get("split_seed")
    return int(given if given is not None else spec.values["seed"])


# NOTE: run_folder.RESOLVED, which imports this module: a run folder's spec as trained
RUN_SPEC = "spec.resolved.yaml"


def is_stratified(spec: ValidSpec) -> bool:
    """data.stratify, except for a run folder written before the key existed: its spec.resolved.yaml leaves the key out
    (newer ones always write it: run_folder.resolved_spec_text) and its examples were split at random, so a resume,
    evaluate or new run of it splits them at random again."""
    return bool((spec.values.get("data") or {}).get("stratify")) and not is_random_split_run(spec)


def is_random_split_run(spec: ValidSpec) -> bool:
    """A run folder's spec.resolved.yaml without data.stratify: written before stratified splits existed."""
    return Path(spec.path).name == RUN_SPEC and spec.node("data") is not None and spec.node("data", "stratify") is None


def stratified_split(labels: np.ndarray, valid_split: float, test_split: float, seed: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(train, valid, test) indices, each in the seed's shuffled order, with every class's share of the valid and test
    examples within one example of its share of all of them; the totals are those of a random split. A class's first
    examples (in that order) validate and its last ones test, so validation is the same with a test split or without.
    The result depends on which examples share a class, never on how classes are numbered."""
    n = len(labels)
    order = np.random.default_rng(seed).permutation(n)
    _, first, strata = np.unique(labels[order], return_index=True, return_inverse=True)
    strata = np.argsort(np.argsort(first))[strata.reshape(-1)]  # NOTE: classes renumbered by first appearance
    counts = np.bincount(strata)
    n_valid = max(1, round(n * valid_split)) if valid_split > 0 else 0
    valid_k = _shares(counts, n_valid, counts)
    test_k = _shares(counts, _test_count(n, test_split, n - n_valid), counts - valid_k)
    by_class = np.argsort(strata, kind="stable")
    rank = np.empty(n, dtype=np.int64)  # position of each example among its class's, in the shuffled order
    rank[by_class] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    valid = rank < valid_k[strata]
    test = rank >= (counts - test_k)[strata]
    return order[~valid & ~test], order[valid], order[test]


def _shares(counts: np.ndarray, k: int, room: np.ndarray) -> np.ndarray:
    """How many examples of each class (of `counts`) k held-out examples take, at most `room` each: each class its
    exact share of k rounded down, and the rest one each to the largest remainders (classes that keep a training
    example after it first; ties to the class seen first), so each class is within one example of its share."""
    exact = counts * k / max(int(counts.sum()), 1)
    got = np.minimum(np.floor(exact).astype(np.int64), room)
    while got.sum() < k and (got < room).any():
        for j in sorted(range(len(counts)), key=lambda j: (bool(got[j] + 1 >= room[j]), -(exact[j] - got[j]), j)):
            if got.sum() < k and got[j] < room[j]:
                got[j] += 1
    return got


def _test_count(n: int, test_split: float, most: int) -> int:
    """How many of n examples test_split holds out (at least one when it is above 0), of the `most` not validating."""
    return min(most, max(1, round(n * test_split))) if test_split > 0 else 0


def _split(src: _Source, x: np.ndarray, y: np.ndarray, target: _Target, where: Location | None, what: str) -> Dataset:
    """Examples checked against the model (the data contract), then split; `what` says where the examples come from."""
    y, num_classes = _check_contract(src, y, target)
    if src.test_file is None and (problems := _class_name_problems(src, target, num_classes)):
        raise SpecError(problems)
    train, valid = _indices(src, len(x), y if target.task == "classify" and y.ndim == 1 else None)
    names = (src.data["class_names"] or src.classes or target.names or [str(i) for i in range(num_classes)]) \
        if target.task == "classify" else None  # fmt: skip
    ds = Dataset(x[train], y[train], x[valid], y[valid], target.task, num_classes, class_names=names,
                 test_examples=_test_count(len(x), src.data["test_split"], len(x)))  # fmt: skip
    _check_enough(src, ds, where, what)
    return ds


def _class_name_problems(src: _Source, target: _Target, num_classes: int | None) -> list[Problem]:
    """data.class_names names whole-number labels: one distinct, non-empty name per class of the model."""
    names = src.data["class_names"]
    if names is None:
        return []
    loc, hint = src.near("class_names"), "remove data.class_names"
    if target.task != "classify":
        return [Problem(f"data.class_names names class labels, but {target.what} are numbers to predict (task "
                        f"{target.task})", loc, hint)]  # fmt: skip
    if target.names is not None:
        return [Problem(f"data.class_names names whole-number labels, but {target.what} are named by the data "
                        f"already ({_shown_names(target.names)})", loc,
                        hint + ": the data's names are used")]  # fmt: skip
    if len(names) != num_classes:
        return [Problem(f"data.class_names has {_count(len(names), 'name')}, but the model has "
                        f"{_count(num_classes or 0, 'class')} (labels 0 to {(num_classes or 1) - 1})", loc,
                        f"give {num_classes} names, the name of label k at position k")]  # fmt: skip
    problems = [Problem(f"data.class_names: name {k} (of label {k}) is empty", loc, "give every class a name")
                for k, n in enumerate(names) if not n.strip()]  # fmt: skip
    twice = sorted({n for n in names if names.count(n) > 1})
    problems += [Problem(f"data.class_names names '{_quoted(n)}' more than once", loc, "give each class its own name")
                 for n in twice]  # fmt: skip
    return problems


# *** the data contract: what the model, the loss and the targets must agree on ***


@dataclass(frozen=True)
class _Target:
    """What a loader knows of its targets: the task, words for messages, and (for class labels from a file) where
    example i's label is written, as ('row 5, column 'y'' or 'y[4] in d.npz', its location)."""

    task: str  # "classify", "regress" or "language"
    what: str  # e.g. "the values of column 'price' in houses.csv"
    label_at: Callable[[int], tuple[str, Location]] | None = None
    names: list[str] | None = None  # class names of text labels (y holds their indices)
    settable: bool = False  # data.task can change the task (csv and npz targets)
    per_row: bool = False  # label_at gives each example its own place (a csv row), so each is reported


def _check_contract(src: _Source, y: np.ndarray, target: _Target) -> tuple[np.ndarray, int | None]:
    """(y as the trainer takes it, the number of classes); every disagreement between data, loss and model raised."""
    problem = _loss_problem(src, target)
    problems = [problem] if problem is not None else []
    if target.task == "regress":
        problems += _regress_problems(src, y, target)
        if problems:
            raise SpecError(problems)
        return y.astype(np.float32), None
    # NOTE: float64 is exact for every label that can be valid, and orders the rest right; y itself (an integer array,
    # or the Python ints of a csv column) gives the exact value of a bad label for its message
    labels = y.astype(np.float64)
    # NOTE: binary_cross_entropy's one logit tells two classes apart
    limit = (2 if src.loss == "binary_cross_entropy" else src.output()[0][-1]) if problem is None else MAX_LABEL + 1
    problems += _label_problems(src, labels, y, target, limit)
    # NOTE: a test file need not hold every class, or two: its labels only have to be ones the model gives
    num_classes = limit if src.test_file is not None else int(labels.max()) + 1 if len(labels) else 0
    if not problems:
        problems += (src.test_file is None and _class_count_problems(src, labels, target)) or \
            _width_problems(src, labels, target, num_classes)  # fmt: skip
    if problems:
        raise SpecError(problems)
    return labels.astype(np.int32), num_classes


def _check_language(src: _Source, codes: np.ndarray, what: str) -> None:
    """cross_entropy, and one output value per character code at every position."""
    target = _Target("language", what)
    problem = _loss_problem(src, target)
    if problem is not None:
        raise SpecError(problem)
    out, loc = src.output()
    context = src.data["context"]
    if tuple(out[:-1]) != (context,):
        raise SpecError.at(loc, f"the model's output {list(out)} does not fit {what}: the output needs shape "
                           f"[{context}, <characters>] (scores of every character at every position)")  # fmt: skip
    top = int(codes.max()) if len(codes) else 0
    if top >= out[-1]:
        raise SpecError.at(loc, f"the model's output has {out[-1]} values per position, one per character code, but "
                           f"{what} hold the character {chr(top)!r} (code {top})",
                           f"set the out of this last layer to at least {top + 1} (the embedding's vocab)")  # fmt: skip


def _loss_problem(src: _Source, target: _Target) -> Problem | None:
    loss, want = src.loss, "mse" if target.task == "regress" else "cross_entropy"
    if loss == want or (loss in REGRESSION_LOSSES) == (target.task == "regress") and target.task != "language":
        return None
    loc = src.loss_loc() or src.near("target" if src.given("target") else "source")
    default = " (the default)" if src.node("train", "loss") is None and loss == TRAIN.fields["loss"].default else ""
    if target.task == "regress":
        hint = "use loss: mse" + ("; if the numbers are class labels 0, 1, 2, ..., set data.task: classify"
                                  if target.settable else "")  # fmt: skip
        return Problem(f"train.loss is {loss}{default}, which learns class labels, but {target.what} are "
                       "numbers to predict (a regression)", loc, hint)  # fmt: skip
    kind = "class labels" if target.task == "classify" else "next characters"
    hint = "use loss: cross_entropy" + ("; to predict the numbers themselves, set data.task: regress"
                                        if target.settable and target.names is None else "")  # fmt: skip
    return Problem(f"train.loss is {loss}, but {target.what} are {kind}, which cross_entropy learns", loc, hint)


def _regress_problems(src: _Source, y: np.ndarray, target: _Target) -> list[Problem]:
    """The output must hold one number per target number."""
    out, loc = src.output()
    n, per = math.prod(out), math.prod(y.shape[1:])
    if n == per:
        return []
    fix = f"set the last layer's out to {per}" if len(out) == 1 and y.ndim == 2 else f"make the output shape " \
          f"{list(y.shape[1:])}"  # fmt: skip
    return [Problem(f"the model's output {list(out)} holds {n} values per example, but each target holds {per} "
                    f"({target.what})", loc, fix)]  # fmt: skip


def _label_problems(src: _Source, labels: np.ndarray, exact: np.ndarray, target: _Target, limit: int
                    ) -> list[Problem]:  # fmt: skip
    """Every label must be a whole number in [0, limit): limit is the model's output width (or the int32 range).
    Labels in a csv are reported row by row; those of an array once per kind of problem, with a count."""
    if target.label_at is None:
        return []
    flat, exact = labels.reshape(len(labels), -1), exact.reshape(len(exact), -1)  # (N, labels per example)
    whole = flat == np.round(flat)
    cap = max(limit, MAX_CLASSES if limit <= MAX_LABEL else MAX_LABEL + 1)  # NOTE: past cap, no model could fit it
    fits = whole & (flat < cap)
    top = int(flat[fits].max()) if fits.any() else 0
    out_line = src.output()[1].line
    classes = f"the model's {_count(limit, 'class')} (0..{limit - 1})" if limit <= MAX_LABEL else "int32 class labels"
    kinds = [  # (bad labels, the message after "<name> is <value>", the hint)
        (~whole, ", not a whole number, so it cannot be a class label",
         f"to predict the numbers themselves, {src.regress_fix}"),
        (whole & (flat < 0), ": class labels are 0 or more", "number the classes 0, 1, 2, ..."),
        (whole & (flat >= limit) & (flat < cap), f", out of range of {classes}: its output has one value per class",
         f"binary_cross_entropy learns two classes, 0 and 1: the labels go up to {top}, so use loss: cross_entropy "
         f"and set the out of the last layer (line {out_line}) to {top + 1}, or correct the label"
         if src.loss == "binary_cross_entropy" else
         f"the labels go up to {top}: set the out of the last layer (line {out_line}) to {top + 1}, or correct the "
         "label"),
        (whole & (flat >= cap), f", too large: out of range of {classes}",
         f"correct the label: classes are numbered 0, 1, 2, ..., and a model has at most {MAX_CLASSES} of them"
         if limit <= MAX_LABEL else f"class labels are at most {MAX_LABEL}: number the classes 0, 1, 2, ..."),
    ]  # fmt: skip
    problems: list[tuple[int, Problem]] = []
    total = 0
    for bad, message, hint in kinds:
        rows = np.nonzero(bad.any(axis=1))[0].tolist()
        total += len(rows) if target.per_row else min(1, len(rows))
        for n, i in enumerate(rows[: MAX_PROBLEMS if target.per_row else 1]):
            name, loc = target.label_at(i)
            more = f" (and {_count(len(rows) - 1, 'more example')} like it)" if (
                not target.per_row and len(rows) > 1) else ""  # fmt: skip
            shown = _shown(exact[i][bad[i]][0])
            problems.append((i, Problem(f"{name} is {shown}{message}{more}", loc, hint if n == 0 else None)))
    ret = [p for _, p in sorted(problems, key=lambda t: t[0])][:MAX_PROBLEMS]
    if total > len(ret):
        ret.append(Problem(f"... and {total - len(ret)} more rows with labels that cannot be used"))
    return ret


def _shown(v: Any) -> str:
    """A label as it was written: integers exactly (never through a float), whole floats without '.0'."""
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _count(n: int, word: str) -> str:
    """'1 class', '3 classes', '1 value', '2 values'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}{'es' if word.endswith(('s', 'x', 'ch', 'sh')) else 's'}"


def _class_count_problems(src: _Source, labels: np.ndarray, target: _Target) -> list[Problem]:
    """A classifier needs examples of at least two classes: with one, it has nothing to tell apart."""
    present = np.unique(labels)
    if len(present) >= 2:
        return []
    only = _quoted(target.names[int(present[0])]) if target.names else str(int(present[0])) if len(present) else \
        "none"  # fmt: skip
    near = src.near("target" if src.given("target") else "source")
    loc = target.label_at(0)[1] if target.label_at is not None else near
    regress = f"; to predict the numbers themselves, {src.regress_fix}"
    hint = "add examples of the other classes" + (regress if target.settable and target.names is None else "")
    message = f"{target.what} hold only one class ({only}): a classifier needs examples of at least 2 classes"
    return [Problem(message, loc, hint)]


def _width_problems(src: _Source, labels: np.ndarray, target: _Target, num_classes: int) -> list[Problem]:
    """One output value per class, and one set of class scores per label."""
    out, loc = src.output()
    if tuple(out[:-1]) != labels.shape[1:]:
        want = [*labels.shape[1:], out[-1]]
        return [Problem(f"the model's output {list(out)} does not fit {target.what}: the output needs shape {want} "
                        "(class scores on its last axis)", loc,
                        "flatten before the last layer" if len(out) > 1 else None)]  # fmt: skip
    if src.loss == "binary_cross_entropy":  # NOTE: one logit: the score of class 1 against class 0
        return [] if out[-1] == 1 else [Problem(
            f"the model's output has {_count(out[-1], 'value')} per example, but binary_cross_entropy learns two "
            "classes from one value (a logit: above 0 is the second class)", loc,
            "set the out of this last layer to 1, or use loss: cross_entropy (one value per class)")]  # fmt: skip
    if out[-1] == num_classes:
        return []
    names = target.names or [str(i) for i in range(num_classes)]
    shown = ", ".join(_quoted(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    message = f"the model's output has {_count(out[-1], 'value')} per example, one per class, but {target.what} " \
              f"hold {_count(num_classes, 'class')} ({shown})"  # fmt: skip
    return [Problem(message, loc, f"set the out of this last layer to {num_classes}")]


def _check_enough(src: _Source, ds: Dataset, where: Location | None, what: str) -> None:
    """At least one full training batch, and a held-out example (validation, or test for evaluate) when the split
    asks for some."""
    bs, ts = src.data["batch_size"], src.data["test_split"]
    if src.test_file is not None:
        if not len(ds.x_valid):
            file = src.file()
            need = f" (a text of at least {src.data['context'] + 1} characters)" if ds.task == "language" else ""
            raise SpecError.at(Location(str(file), 1, 1), f"{file.name} holds no complete example{need}",
                               "add examples to it")  # fmt: skip
        return
    if len(ds.x_train) < bs:
        splits = "data.valid_split" + (" or data.test_split" if ts > 0 else "")
        raise SpecError.at(where, f"{what} leave {len(ds.x_train)} training examples, fewer than batch_size {bs} "
                           "(training uses full batches only)",
                           f"lower data.batch_size or {splits}, or add examples")  # fmt: skip
    held, key = ("test", "test_split") if src.held == "test" else ("validation", "valid_split")
    if src.data[key] > 0 and len(ds.x_valid) == 0:
        raise SpecError.at(where, f"{what} leave no {held} examples", f"add examples, or set {key}: 0")


def _check_shape(src: _Source, got: tuple[int, ...], what: str) -> None:
    """The examples' shape must be the input's; `what` says where the examples' shape comes from."""
    if tuple(got) != src.shape:
        raise SpecError.at(src.input_loc(), f"{what}, but the input's shape is {list(src.shape)}",
                           f"set the input's shape to {list(got)}")  # fmt: skip


def standardize(x: np.ndarray, stats: dict[str, np.ndarray]) -> np.ndarray:
    """x with the training statistics applied, as load_data does; unchanged when stats is empty."""
    return (x - stats["mean"]) / stats["std"] if stats else x


def unstandardize(y: np.ndarray, stats: dict[str, np.ndarray]) -> np.ndarray:
    """Standardized targets (or predictions of them) back in the target's own units; unchanged when stats is empty."""
    return y * stats["std"] + stats["mean"] if stats else y


def _statistics(x: np.ndarray, axis: int | tuple[int, ...] | None) -> dict[str, np.ndarray]:
    """Mean and std as float32, over `axis` (None: one number for everything; a tuple keeps the other axes, e.g.
    (0, 2, 3) gives images (C, 1, 1) statistics per channel). A std of 0, or one too small for a normal float32 (it
    would round to 0 or lose its precision), is 1: such a value is a constant, and the weights' metadata check refuses
    a std specgrad could not have written."""
    x = x.astype(np.float64)
    keep = isinstance(axis, tuple)
    mean, std = np.asarray(x.mean(axis=axis, keepdims=keep)), np.asarray(x.std(axis=axis, keepdims=keep))
    if keep:
        mean, std = mean[0], std[0]  # NOTE: without the batch axis
    std = np.where(std < TINY, 1.0, std)
    return {"mean": mean.astype(np.float32), "std": std.astype(np.float32)}


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


# *** bundled and generated sources ***


def _load_digits(src: _Source) -> Dataset:
    images, labels = load_digits()
    x = (images.astype(np.float32) / 16).reshape(len(images), *src.shape)
    what = f"the {len(x)} digits with valid_split {src.data['valid_split']}"
    if src.data["target"] == "input":
        out = src.spec.output_shape(src.spec.outputs[0])
        # NOTE: the target is the unnormalized image in 0..1 (what a sigmoid can rebuild), even when x is standardized
        y = x.reshape(len(x), *(out if math.prod(out) == math.prod(src.shape) else src.shape)).copy()
        return _split(src, x, y, _Target("regress", "the digit images"), src.near("batch_size"), what)
    return _split(src, x, labels, _Target("classify", "the digit labels"), src.near("batch_size"), what)


def _spiral_points(n: int, noise: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals of 1.5 turns in the unit disc; labels alternate 0, 1."""
    label = np.arange(n) % 2
    r = np.sqrt(rng.uniform(0, 1, n))  # NOTE: sqrt spreads points evenly over the area
    angle = 3 * np.pi * r + np.pi * label
    x = np.stack([r * np.cos(angle), r * np.sin(angle)], axis=1) + noise * rng.standard_normal((n, 2))
    return x.astype(np.float32), label.astype(np.int32)


def _load_spirals(src: _Source) -> Dataset:
    _check_shape(src, (2,), "spirals are points in the plane, shape [2] per example")
    x, y = _spiral_points(src.data["samples"], src.data["noise"], np.random.default_rng(src.spec.values["seed"]))
    return _split(src, x, y, _Target("classify", "the spiral labels"), src.near("samples"), f"{len(x)} samples")


def _load_sine(src: _Source) -> Dataset:
    _check_shape(src, (1,), "sine examples are one number x, shape [1] per example")
    rng = np.random.default_rng(src.spec.values["seed"])
    x = rng.uniform(-3, 3, (src.data["samples"], 1))
    y = np.sin(x) + src.data["noise"] * rng.standard_normal(x.shape)
    return _split(src, x.astype(np.float32), y.astype(np.float32), _Target("regress", "the sine values"),
                  src.near("samples"), f"{len(x)} samples")  # fmt: skip


# *** files ***


def _read_bytes(src: _Source, file: Path) -> bytes:
    """The whole data file data.path (or data.test_path) names."""
    return src.read(file, src.value, src.path_loc(file))


def _quoted(text: str) -> str:
    """A data file's cell or column name as a message quotes it."""
    return excerpt(text, SHOWN)


def _decode(raw: bytes, file: Path) -> str:
    """UTF-8 text (a byte-order mark is dropped); a bad byte is an error at its line and column."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line_start = raw.rfind(b"\n", 0, e.start) + 1
        col = len(raw[line_start : e.start].decode("utf-8", errors="replace")) + 1
        loc = Location(str(file), raw.count(b"\n", 0, e.start) + 1, col)
        raise SpecError.at(loc, f"{file.name} is not UTF-8 text: byte 0x{raw[e.start]:02x} here cannot be read",
                           "save the file as UTF-8 (most editors offer it in Save As)") from None  # fmt: skip


def _line_col(text: str, i: int) -> tuple[int, int]:
    """1-based line and column (in characters) of text[i]."""
    return text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i)


# *** text ***


def _text(src: _Source) -> tuple[str, str]:
    """(the text, the file name used in locations)."""
    if src.data["path"] is not None and src.data["corpus"] is not None:
        raise SpecError.at(src.near("corpus"), "data has both path and corpus: give one of them")
    if src.data["corpus"] is not None and src.test_file is None:
        return load_text(src.data["corpus"]), f"{src.data['corpus']} (bundled)"
    file = src.file()
    raw = _read_bytes(src, file)
    if len(raw) > 4 * MAX_TEXT_CHARS or len(text := _decode(raw, file)) > MAX_TEXT_CHARS:  # NOTE: 4 bytes a character
        raise SpecError.at(src.path_loc(file), f"{file.name} has more than {MAX_TEXT_CHARS:,} characters, more than "
                           "a text source trains on (its examples take 16 bytes of memory per character)",
                           "use a shorter text")  # fmt: skip
    return text.replace("\r\n", "\n").replace("\r", "\n"), str(file)


def _vocab(src: _Source) -> tuple[int, bool]:
    """(how many token codes the model takes, whether an embedding said so)."""
    sizes = [s.args["vocab"] for s in src.spec.steps if s.what == "embedding" and src.name in s.srcs]
    return (int(sizes[0]), True) if sizes else (DEFAULT_VOCAB, False)


def _check_vocab(text: str, codes: np.ndarray, file: str, vocab: int, from_model: bool) -> None:
    """Every character must be a token the model knows: one problem per distinct character, at its first place."""
    bad = np.nonzero(codes >= vocab)[0]
    if len(bad) == 0:
        return
    chars, first = np.unique(codes[bad], return_index=True)
    problems = []
    for code, i in sorted(zip(chars.tolist(), bad[first].tolist()), key=lambda t: t[1])[:MAX_PROBLEMS]:
        count = int((codes[bad] == code).sum())
        raise_it = f", or raise the embedding's vocab (now {vocab}) to at least {code + 1}" if from_model else ""
        problems.append(Problem(f"the character '{excerpt(chr(code))}' (U+{code:04X}) is outside the model's {vocab} "
                                f"characters (codes 0..{vocab - 1}); it appears {count} time{'s' * (count > 1)}",
                                Location(file, *_line_col(text, i)), f"remove or replace it{raise_it}"))  # fmt: skip
    if len(chars) > MAX_PROBLEMS:
        problems.append(Problem(f"... and {len(chars) - MAX_PROBLEMS} more characters outside the vocabulary; the "
                                f"largest code in the text is {int(chars[-1])}"))  # fmt: skip
    raise SpecError(problems)


def _windows(codes: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): windows of `context` codes every context // 2 codes, and the same windows shifted by one."""
    if len(codes) < context + 1:
        return np.zeros((0, context), np.int32), np.zeros((0, context), np.int32)
    w = np.lib.stride_tricks.sliding_window_view(codes, context + 1)[:: max(1, context // 2)]  # (W, context + 1)
    return np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:])


def _load_text(src: _Source) -> Dataset:
    context = src.data["context"]
    if src.shape != (context,):
        raise SpecError.at(src.near("context"), f"data.context is {context}, but the input '{src.name}' has shape "
                           f"{list(src.shape)}", f"set the input's shape to [{context}]")  # fmt: skip
    text, file = _text(src)
    codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.int32)
    vocab, from_model = _vocab(src)
    _check_vocab(text, codes, file, vocab, from_model)
    vs, ts = src.data["valid_split"], src.data["test_split"]
    # NOTE: by position: training text, then validation, then test, so no window spans two parts (a test file is
    # all test text)
    test_cut = 0 if src.test_file is not None else len(codes) - (round(len(codes) * ts) if ts > 0 else 0)
    cut = test_cut - (round(len(codes) * vs) if vs > 0 and src.test_file is None else 0)
    held = codes[test_cut:] if src.held == "test" else codes[cut:test_cut]
    (x_train, y_train), (x_valid, y_valid) = _windows(codes[:cut], context), _windows(held, context)
    _check_language(src, codes, f"the characters of {Path(file).name}")
    ds = Dataset(x_train, y_train, x_valid, y_valid, "language", vocab,
                 test_examples=len(_windows(codes[test_cut:], context)[0]))  # fmt: skip
    what = f"the {len(codes)} characters of {file} with context {context} and valid_split {vs}"
    _check_enough(src, ds, src.near("context"), what)
    return ds


# *** csv ***


@dataclass(frozen=True)
class Dialect:
    """How a csv is written: what separates its cells (data.delimiter, or sniffed when None), its decimal mark and the
    cells that are missing (data.missing_values, lowercased: compared case-insensitively)."""

    delimiter: str | None = ","
    decimal: str = "."
    missing: frozenset[str] = frozenset(v.lower() for v in MISSING_VALUES)
    sniffed: bool = False  # the delimiter was sniffed from the file, not given

    def is_missing(self, cell: str) -> bool:
        return cell.strip().lower() in self.missing

    def describe(self) -> str:
        """E.g. "delimiter ';' (sniffed), decimal ','", for validate."""
        shown = "tab" if self.delimiter == "\t" else f"'{self.delimiter}'"
        return f"delimiter {shown}{' (sniffed)' * self.sniffed}, decimal '{self.decimal}'"


def dialect_of(data: dict[str, Any]) -> Dialect:
    """The dialect a csv spec's data section gives (delimiter None: csv_table sniffs it)."""
    missing = data.get("missing_values")
    missing = MISSING_VALUES if missing is None else missing
    return Dialect(data.get("delimiter"), data.get("decimal") or ".", frozenset(v.strip().lower() for v in missing))


@dataclass(frozen=True)
class CsvNotes:
    """What validate says of a csv beyond its examples: its dialect, the rows left out (their target missing, or a
    drop_row column's cell), and per feature column how many of its cells are missing (what fills them is in
    Dataset.columns.missing)."""

    dialect: Dialect
    no_target: int
    dropped: int
    missing: dict[str, int]


def _sniff(text: str) -> str:
    """The delimiter among DELIMITERS that splits the header and the first rows into the same number of cells, the most
    of them (',' where none does better): so a ';' file with decimal commas (3,5;2,1) is read as ';'."""
    head = text[:SNIFFED_CHARS].splitlines()
    head = head[:-1] if len(text) > SNIFFED_CHARS and len(head) > 1 else head  # NOTE: its last line may be cut short
    lines = [x for x in head[: SNIFFED_LINES + 1] if x.strip()]

    def widths(d: str) -> list[int]:
        try:
            return [len(r) for r in csv.reader(lines, delimiter=d)]
        except csv.Error:
            return [0]

    counts = {d: widths(d) for d in DELIMITERS}
    even = [d for d, w in counts.items() if w and w[0] > 1 and len(set(w)) == 1]
    return max(even or DELIMITERS, key=lambda d: (counts[d][0] if counts[d] else 0, -DELIMITERS.index(d)))


def _csv_rows(text: str, file: Path, delimiter: str = ",") -> list[tuple[int, list[str]]]:
    """(line, cells) of every row with a value in it; a row's line is where it starts. At most MAX_CSV_CELLS cells."""
    reader, rows, line, cells_read = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), [], 1, 0
    try:
        for cells in reader:
            cells_read += len(cells)
            if cells_read > MAX_CSV_CELLS:
                raise SpecError.at(Location(str(file), line, 1), f"{file.name} has more than {MAX_CSV_CELLS:,} cells, "
                                   "more than a CSV file is read into memory for",
                                   "save large data with numpy, np.savez(path, x=inputs, y=targets), and use source: "
                                   "npz")  # fmt: skip
            if any(c.strip() for c in cells):
                rows.append((line, cells))
            line = reader.line_num + 1
    except csv.Error as e:
        raise SpecError.at(Location(str(file), line, 1), f"{file.name}: this row cannot be read as CSV ({e})") from None
    return rows


def _column_hint(name: str, header: list[str]) -> str:
    parts = [did_you_mean(name, header) or ""]
    if len(header) == 1 and any(sep in header[0] for sep in DELIMITERS):
        parts.append("the file seems to separate its cells with another character: set data.delimiter (',', ';', "
                     "'\\t' or '|').")  # fmt: skip
    elif header and all(is_number(h) for h in header):
        parts.append("the first row holds numbers: it must be a header row naming the columns.")
    more = f", and {len(header) - 20} more" if len(header) > 20 else ""
    parts.append(f"the header has: {', '.join(_quoted(h) for h in header[:20])}{more}")
    return " ".join(p for p in parts if p)


def is_number(s: str) -> bool:
    """Whether a CSV cell reads as a number (float's syntax: nan and inf included)."""
    try:
        float(s)
    except ValueError:
        return False
    return True


def _csv_columns(src: _Source, header: list[str], line: int, file: Path) -> tuple[list[str], list[int]]:
    """(feature names, column indices of the features then the target), every name checked against the header."""
    target = src.data["target"]
    features = src.data["features"] or [h for h in header if h != target]
    hloc = Location(str(file), line, 1)
    if target in (src.data["features"] or []):
        raise SpecError.at(src.near("features"), f"data.features includes the target column '{target}': the model "
                           "would be given the answer", "remove it from features")  # fmt: skip
    listed = [] if src.data["features"] else list(src.data["categorical"] or {})  # NOTE: else checked as features
    problems = [Problem(f"data.{key} names the column '{_quoted(name)}', but {file.name} has no such column", hloc,
                        _column_hint(name, header))
                for key, names in (("features", features), ("target", [target]), ("categorical", listed))
                for name in names if name not in header]  # fmt: skip
    index = [k for k, enc in (src.data["categorical"] or {}).items() if enc == "index"]
    others = [f for f in features if (src.data["categorical"] or {}).get(f) != "index"]
    if index and others and not problems:
        node = src.node("data", "categorical", index[0])
        problems.append(index_mix_problem(index[0], others, node.loc if node is not None else src.near("categorical")))
    for name in [*features, target]:
        at = [i for i, h in enumerate(header) if h == name]
        if len(at) > 1:
            problems.append(Problem(f"the header names the column '{_quoted(name)}' {len(at)} times (columns "
                                    f"{', '.join(str(i + 1) for i in at)})", Location(str(file), line, at[1] + 1),
                                    "give each column its own name"))  # fmt: skip
        if name == "" and at:
            problems.append(Problem(f"column {at[0] + 1} has no name in the header",
                                    Location(str(file), line, at[0] + 1),
                                    "name it, or list the columns to use in data.features"))  # fmt: skip
    if problems:
        raise SpecError(problems)
    return features, [header.index(n) for n in [*features, target]]


def _cell(text: str, line: int, col: int, name: str, file: Path, nonfinite_hint: str | None = NONFINITE_HINT,
          dialect: Dialect = Dialect(), fill: str | None = None, served: bool = False
          ) -> tuple[float, Problem | None]:  # fmt: skip
    """The number in one cell, or the problem with it; NaN and infinity are read as they are when `nonfinite_hint` is
    None, else refused with it. A missing cell is `fill` (the number's text), else a problem (`served`: in a file
    given to a trained model; run --allow-nonfinite still reads a 'nan' as NaN)."""
    s, loc, name = text.strip(), Location(str(file), line, col + 1), _quoted(name)
    if dialect.is_missing(s) and fill is not None:
        return float(fill), None
    if dialect.is_missing(s) and not (nonfinite_hint is None and is_number(s)):
        return 0.0, _missing_problem(s, line, name, loc, "a number", served)
    try:
        v = float(_decimal_point(s, dialect))
    except ValueError:
        return 0.0, Problem(f"row {line}, column '{name}': '{_quoted(s)}' is not a number", loc,
                            _number_hint(s, dialect))  # fmt: skip
    if not math.isfinite(v) and nonfinite_hint is not None:
        return 0.0, Problem(f"row {line}, column '{name}': '{_quoted(s)}' is not a finite number", loc, nonfinite_hint)
    if abs(v) > FLOAT32_MAX and nonfinite_hint is not None:  # NOTE: it would become infinity as a float32
        return 0.0, Problem(f"row {line}, column '{name}': '{_quoted(s)}' is beyond float32's range (about "
                            f"{FLOAT32_MAX:.3g})", loc, "rescale the column, or remove the row")  # fmt: skip
    return v, None


def _missing_problem(s: str, line: int, name: str, loc: Location, what: str, served: bool) -> Problem:
    """A missing cell that nothing fills: in training data the hint names the keys that fill it; in a file given to
    a trained model (`served`), it says the model has no value for it."""
    said = f"row {line}, column '{name}' is " + (f"missing ('{_quoted(s)}')" if s else "empty")
    if served:
        nan = "; or pass --allow-nonfinite to run it as NaN" if is_number(s) else ""
        return Problem(said, loc, f"fill in {what}, or remove the row: the model was trained without a value to fill "
                       f"this column with (data.missing, or drop_row for it){nan}")  # fmt: skip
    return Problem(said, loc, f"fill in {what}, or remove the row; or let specgrad fill missing cells: data.missing: "
                   f"mean, median, mode, drop_row or {{fill: VALUE}} (for one column: data.missing_columns: "
                   f"{{{name}: ...}})")  # fmt: skip


def _decimal_point(s: str, dialect: Dialect) -> str:
    """A cell's number with a point for its decimal mark; with data.decimal ',' a '.' is no number's (1.5 in a file of
    3,5s is a typo, 1.234 a thousand): it comes back as '' (which float refuses)."""
    if dialect.decimal == ".":
        return s
    return "" if "." in s else s.replace(",", ".", 1)


def _number_hint(s: str, dialect: Dialect) -> str:
    """Why a cell is not a number as the dialect reads it, and the key that reads it."""
    if m := THOUSANDS.fullmatch(s):  # NOTE: float refused it, so the groups of three are no decimals
        sep = m.group(1)
        maybe = "; if ',' is its decimal mark, set data.decimal: ','" if sep == "," and s.count(",") == 1 and \
            "." not in s and dialect.decimal == "." else _decimal_key(s, dialect)  # fmt: skip
        return f"'{sep}' groups its digits in thousands, which specgrad does not read: write it without them " \
            f"({s.replace(sep, '')}){maybe}"  # fmt: skip
    if dialect.decimal == "." and re.fullmatch(r"[+-]?\d*,\d+", s):
        return "it has a decimal comma: set data.decimal: ',' (the cells then separated by ';' or tabs: " \
            "data.delimiter)"  # fmt: skip
    if dialect.decimal == "," and re.fullmatch(r"[+-]?\d*\.\d+", s):
        return "it has a decimal point, but data.decimal is ',': write it with a comma, or set data.decimal: '.'"
    mark = "a point" if dialect.decimal == "." else "a comma (data.decimal)"
    return f"write a plain number such as 1200 or 3{dialect.decimal}5: {mark} for decimals, no units, no thousands " \
        "separators"  # fmt: skip


def _decimal_key(s: str, dialect: Dialect) -> str:
    """The decimal mark a number grouped in thousands uses, where it is not data.decimal."""
    mark = "," if re.search(r"\.\d{3},\d*$", s) else "." if re.search(r",\d{3}\.\d*$", s) else None
    return f"; its decimal mark is '{mark}': set data.decimal: '{mark}'" if mark and mark != dialect.decimal else ""


def _ragged(line: int, cells: list[str], header: list[str], file: Path) -> Problem:
    """A row with another number of cells than the header has columns, located where it goes wrong."""
    return Problem(
        f"row {line} has {len(cells)} cells, but the header has {len(header)} columns",
        Location(str(file), line, min(len(cells), len(header)) + 1),
        "check for a missing or extra comma; a value with a comma in it goes in quotes",
    )


def _csv_numbers(rows: list[tuple[int, list[str]]], header: list[str], cols: list[int], file: Path,
                 dialect: Dialect = Dialect()) -> tuple[np.ndarray, list[Problem]]:  # fmt: skip
    """(N, len(cols)) numbers of the given columns, and every ragged row and bad cell."""
    out, problems = np.zeros((len(rows), len(cols))), []
    for i, (line, cells) in enumerate(rows):
        if len(cells) != len(header):
            problems.append(_ragged(line, cells, header, file))
            continue
        for j, c in enumerate(cols):
            out[i, j], problem = _cell(cells[c], line, c, header[c], file, dialect=dialect)
            problems += [problem] if problem else []
    return out, problems


def _int(s: str) -> int | None:
    """The whole number a cell's text spells (exactly, however large), else None."""
    try:
        return int(s)
    except ValueError:
        return None


def _is_whole(s: str) -> bool:
    return _int(s) is not None or (is_number(s) and float(s).is_integer())


def _class_order(name: str) -> tuple[int, int, str]:
    """Class names that spell whole numbers first, in numeric order (2 before 10), then the others as text."""
    n = _int(name)
    return (0, n, "") if n is not None else (1, 0, name)


def _csv_labels(rows: list[tuple[int, list[str]]], header: list[str], col: int, file: Path,
                classes: list[str] | None = None) -> tuple[np.ndarray, list[str] | None, list[Problem]]:  # fmt: skip
    """(N,) labels of a target column: indices into the sorted class names when any cell is text, else the numbers
    themselves (Python ints where the text is a whole number, so a huge label is exact; checked to be labels later);
    ragged rows are left to _csv_numbers. A test file gives `classes`, the training split's class names: its labels
    are indices into those."""
    cells = [(line, c[col].strip()) for line, c in rows if len(c) == len(header)]
    if not any(s and not is_number(s) for _, s in cells) and not (classes and classes != _numbered(len(classes))):
        values, problems = _csv_numbers([(line, c) for line, c in rows if len(c) == len(header)], header, [col], file)
        exact = [n if (n := _int(s)) is not None else v for (_, s), v in zip(cells, values[:, 0].tolist())]
        return np.array(exact, dtype=object), None, problems
    names = classes or sorted({s for _, s in cells if s}, key=_class_order)
    index = {name: i for i, name in enumerate(names)}
    problems = [Problem(f"row {line}, column '{_quoted(header[col])}' is empty", Location(str(file), line, col + 1),
                        "fill in its class, or remove the row") for line, s in cells if not s]  # fmt: skip
    problems += [Problem(f"row {line}, column '{_quoted(header[col])}': '{_quoted(s)}' is not one of the classes the "
                         "model was trained on", Location(str(file), line, col + 1),
                         f"{did_you_mean(s, names) or ''} the classes are: {_shown_names(names)}".strip())
                 for line, s in cells if s and s not in index][:MAX_PROBLEMS]  # fmt: skip
    return np.array([index.get(s, 0) for _, s in cells], dtype=np.float64), names, problems


def _numbered(n: int) -> list[str]:
    """The class names of labels that are numbers: '0', '1', ..."""
    return [str(i) for i in range(n)]


def _shown_names(names: list[str]) -> str:
    return ", ".join(_quoted(v) for v in names[:10]) + (f", ... ({len(names)} in all)" if len(names) > 10 else "")


def _stray_text_problems(rows: list[tuple[int, list[str]]], header: list[str], col: int, file: Path
                         ) -> list[Problem]:  # fmt: skip
    """A column of mostly whole numbers with a few words in it is numbered classes or targets with typos, not text
    classes (which would sort '10' before '2'): each word is reported, unless data.task: classify says otherwise."""
    cells = [(line, c[col].strip()) for line, c in rows if len(c) == len(header) and c[col].strip()]
    words = [(line, s) for line, s in cells if not is_number(s)]
    whole = sum(_is_whole(s) for _, s in cells)
    if not words or 2 * whole <= len(cells):
        return []
    hint = "correct it or remove the row; if the column holds class names, set data.task: classify"
    return [Problem(f"row {line}, column '{_quoted(header[col])}': '{_quoted(s)}' is not a number, but {whole} of "
                    f"the column's "
                    f"{len(cells)} values are whole numbers, so it is probably a typo",
                    Location(str(file), line, col + 1), hint if n == 0 else None)
            for n, (line, s) in enumerate(words)]  # fmt: skip


def _big_target_problems(rows: list[tuple[int, list[str]]], header: list[str], col: int, file: Path
                         ) -> list[Problem]:  # fmt: skip
    """Whole-number regression targets past EXACT_FLOAT32 would be rounded as float32 (as in an npz array)."""
    big = [(line, n) for line, c in rows if len(c) == len(header) and (n := _int(c[col].strip())) is not None
           and abs(n) > EXACT_FLOAT32]  # fmt: skip
    return [Problem(f"row {line}, column '{_quoted(header[col])}' is {n}: regression targets are float32, which "
                    "holds whole "
                    f"numbers exactly up to {EXACT_FLOAT32} only", Location(str(file), line, col + 1),
                    "scale the targets down (thousands instead of units, say)" if k == 0 else None)
            for k, (line, n) in enumerate(big)]  # fmt: skip


def _raise_cut(problems: list[Problem], file: Path) -> None:
    """Up to MAX_PROBLEMS problems, then how many more there are."""
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], Problem(f"... and {more} more problem{'s' * (more > 1)} in {file}")]
    if problems:
        raise SpecError(problems)


def csv_table(raw: bytes, file: Path, dialect: Dialect = Dialect()
              ) -> tuple[int, list[str], list[tuple[int, list[str]]], Dialect]:  # fmt: skip
    """(the header's line, its column names, the (line, cells) of every row after it, the dialect read: its delimiter
    sniffed when the dialect has none) of a CSV file's bytes: training data or `run --input`. An empty file, or a
    header without rows, is an error; a byte-order mark is dropped."""
    text = _decode(raw, file)
    if dialect.delimiter is None:
        dialect = replace(dialect, delimiter=_sniff(text), sniffed=True)
    if dialect.delimiter == dialect.decimal:
        raise SpecError.at(Location(str(file), 1, 1), f"{file.name} separates its cells with '{dialect.delimiter}', "
                           f"which is data.decimal too: a cell 3{dialect.decimal}5 would be two cells",
                           "save the file with ';' between cells (and set data.delimiter: ';'), or set data.decimal: "
                           "'.'")  # fmt: skip
    rows = _csv_rows(text, file, dialect.delimiter)
    if not rows:
        raise SpecError.at(Location(str(file), 1, 1), f"{file.name} is empty: a CSV file needs a header row naming "
                           "the columns, then one row per example")  # fmt: skip
    (hline, header), rows = (rows[0][0], [h.strip() for h in rows[0][1]]), rows[1:]
    if not rows:
        raise SpecError.at(Location(str(file), hline + 1, 1), f"{file.name} has a header but no rows of data")
    return hline, header, rows, dialect


def encode_rows(rows: list[tuple[int, list[str]]], header: list[str], cols: list[int], columns: Columns, file: Path,
                nonfinite_hint: str | None, unseen: str, dialect: Dialect = Dialect(), served: bool = False
                ) -> tuple[np.ndarray, list[Problem]]:  # fmt: skip
    """(N, columns.width) examples of the feature columns at `cols` (float64, or int64 codes when every feature is an
    index column), and every ragged row and bad cell. `nonfinite_hint` is the hint for NaN or infinity (None: read
    them as they are); `unseen` follows a categorical value the vocabulary does not hold, in its message. A missing
    cell (as the dialect says) takes its column's fill (columns.missing), else it is a problem (`served`: in a file
    given to a trained model)."""
    out = np.zeros((len(rows), columns.width), np.int64 if columns.is_index else np.float64)
    problems, slots = [], columns.slots()
    fills = [columns.fill(f) for f in columns.features]
    for i, (line, cells) in enumerate(rows):
        if len(cells) != len(header):
            problems.append(_ragged(line, cells, header, file))
            continue
        for c, (at, enc, codes), fill in zip(cols, slots, fills):
            if enc is None:
                out[i, at], problem = _cell(cells[c], line, c, header[c], file, nonfinite_hint, dialect, fill, served)
            else:
                text = fill if fill is not None and dialect.is_missing(cells[c]) else cells[c]
                code, problem = _category(text, line, c, header[c], file, codes, unseen, dialect, served)
                out[i, at + code * (enc == "one_hot")] = 1 if enc == "one_hot" else code
            problems += [problem] if problem else []
    return out, problems


def _category(text: str, line: int, col: int, name: str, file: Path, codes: dict[str, int], unseen: str,
              dialect: Dialect = Dialect(), served: bool = False) -> tuple[int, Problem | None]:  # fmt: skip
    """The code of one categorical cell (its one-hot position, or index code), or the problem with it (a missing cell
    comes filled, or is one)."""
    s, loc, name = text.strip(), Location(str(file), line, col + 1), _quoted(name)
    if s not in codes and dialect.is_missing(s):
        return 0, _missing_problem(s, line, name, loc, "its category", served)
    if s in codes:
        return codes[s], None
    known = list(codes)
    hint = did_you_mean(s, known) or ""
    return 0, Problem(f"row {line}, column '{name}': '{_quoted(s)}' {unseen}", loc,
                      f"{hint} the categories are: {_shown_names(known)}".strip())  # fmt: skip


def _vocabulary(rows: list[tuple[int, list[str]]], train: np.ndarray, col: int, width: int, dialect: Dialect,
                fill: str | None = None) -> tuple[str, ...]:  # fmt: skip
    """The distinct values of a categorical column in the training rows (none missing, and `fill`, a category that
    fills missing cells: its own category when the rows do not hold it), sorted as class names are."""
    values = {rows[i][1][col].strip() for i in train.tolist() if len(rows[i][1]) == width}
    values = {v for v in values if v and not dialect.is_missing(v)} | ({fill} if fill is not None else set())
    return tuple(sorted(values, key=_class_order))


def _text_columns(rows: list[tuple[int, list[str]]], header: list[str], cols: list[int], columns: Columns,
                  file: Path, hline: int, dialect: Dialect = Dialect()) -> list[Problem]:  # fmt: skip
    """A number column that holds mostly text is a column of categories nobody said so of: one problem for it, not
    one per cell (missing cells are neither)."""
    problems = []
    for c in (c for c, name in zip(cols, columns.features) if name not in columns.categorical):
        cells = [s for _, cells in rows if len(cells) == len(header) and not dialect.is_missing(s := cells[c].strip())]
        words = [s for s in cells if not is_number(_decimal_point(s, dialect)) and not THOUSANDS.fullmatch(s)]
        if words and 2 * len(words) > len(cells):
            shown = ", ".join(f"'{_quoted(w)}'" for w in list(dict.fromkeys(words))[:3])
            name = _quoted(header[c])
            problems.append(Problem(f"column '{name}' holds text ({shown}, ...), not numbers",
                                    Location(str(file), hline, c + 1),
                                    f"to feed it to the model as categories, add it to data.categorical, e.g. "
                                    f"categorical: {{{name}: one_hot}}; to leave it out, list the other columns in "
                                    "data.features"))  # fmt: skip
    return problems


def _check_columns(src: _Source, columns: Columns) -> None:
    """The encoded width is the input's; numbers and one-hot values need a float input, index codes an integer one
    read by an embedding with room for every code."""
    n = len(columns.features)
    what = f"data.features gives {n} columns ({', '.join(columns.features)}), shape [{n}] per example" if not \
        columns.categorical else f"the columns give {columns.explain()}"  # fmt: skip
    if columns.is_index == is_float(src.dtype):
        hint = "use dtype int32 (the codes feed an embedding)" if columns.is_index else "use dtype float32"
        why = "index columns give whole-number codes for an embedding" if columns.is_index else \
            f"source csv gives numbers with fractions{' and one-hot values' * bool(columns.categorical)}"  # fmt: skip
        raise SpecError.at(src.input_loc("dtype") or src.input_loc(), f"{why}, but the input's dtype is {src.dtype}",
                           hint)  # fmt: skip
    _check_shape(src, (columns.width,), what)
    if not columns.is_index:
        return
    codes, (vocab, from_model) = columns.codes, _vocab(src)
    parts = " + ".join(f"{f} ({len(columns.categorical[f][1])})" for f in columns.features)
    if codes - 1 > np.iinfo(src.dtype).max:
        raise SpecError.at(src.input_loc("dtype"), f"the index columns have {codes} codes ({parts} categories), more "
                           f"than {src.dtype} holds", "use dtype int32")  # fmt: skip
    if not from_model:
        raise SpecError.at(src.input_loc(), f"index columns give codes for an embedding, but no embedding layer reads "
                           f"the input '{src.name}'", f"start the model with an embedding of vocab {codes} "
                           f"({parts} categories), e.g. {{embedding: {{vocab: {codes}, dim: 8}}}}")  # fmt: skip
    if vocab < codes:
        step = next(s for s in src.spec.steps if s.what == "embedding" and src.name in s.srcs)
        raise SpecError.at(step.loc, f"the embedding's vocab is {vocab}, but the index columns have {codes} codes in "
                           f"all: {parts} categories, numbered one column after the other",
                           f"set vocab to {codes}")  # fmt: skip


def _strategies(src: _Source, features: list[str]) -> dict[str, tuple[str, Any]]:
    """Feature -> (strategy, the {fill: VALUE}'s VALUE or None) for the features data.missing or
    data.missing_columns gives one; mean and median by default on a categorical column are its mode. A test file's
    are the training data's (src.columns)."""
    if src.columns is not None:
        return dict(src.columns.missing)
    default, per, categorical = src.data["missing"], src.data["missing_columns"] or {}, src.data["categorical"] or {}
    ret = {}
    for f in features:
        how = per.get(f, default)
        if isinstance(how, dict):
            ret[f] = ("fill", how["fill"])
        elif how is not None:
            ret[f] = ("mode", None) if how in ("mean", "median") and f in categorical and f not in per else (how, None)
    return ret


def _left_out(rows: list[tuple[int, list[str]]], header: list[str], cols: list[int], features: list[str],
              strategies: dict[str, tuple[str, Any]], dialect: Dialect
              ) -> tuple[list[tuple[int, list[str]]], CsvNotes]:  # fmt: skip
    """The rows kept: every row but those whose target is missing (a target is never filled) or whose drop_row
    column is; what validate says of them (ragged rows are kept, for encode_rows to report)."""
    drop = [c for f, c in zip(features, cols) if strategies.get(f, ("",))[0] == "drop_row"]
    counts, kept, no_target, dropped = dict.fromkeys(features, 0), [], 0, 0
    for line, cells in rows:
        if len(cells) != len(header):
            kept.append((line, cells))
            continue
        for f, c in zip(features, cols):
            counts[f] += dialect.is_missing(cells[c])
        if dialect.is_missing(cells[cols[-1]]):
            no_target += 1
        elif any(dialect.is_missing(cells[c]) for c in drop):
            dropped += 1
        else:
            kept.append((line, cells))
    return kept, CsvNotes(dialect, no_target, dropped, {f: n for f, n in counts.items() if n})


def _strategy_loc(src: _Source, name: str) -> Location | None:
    """Where the strategy of a column is written: data.missing_columns.<name>, else data.missing."""
    node = src.node("data", "missing_columns", name)
    return node.loc if node is not None else src.near("missing")


def _fill_text(src: _Source, name: str, value: Any, categorical: bool) -> str:
    """A {fill: VALUE} as the cell it stands for: a category's text, or a number's repr (a numeric column's VALUE must
    be a number)."""
    if categorical:
        return str(value).strip()
    try:
        v = float(value)
    except ValueError:
        v = math.nan
    if not math.isfinite(v):
        raise SpecError.at(_strategy_loc(src, name), f"the column '{_quoted(name)}' holds numbers, but its missing "
                           f"cells are filled with '{_quoted(str(value))}', which is not a finite number",
                           f"fill it with a number, or give it its own strategy: data.missing_columns: "
                           f"{{{_quoted(name)}: median}}")  # fmt: skip
    return repr(v)


def _statistic(src: _Source, rows: list[tuple[int, list[str]]], train: np.ndarray, c: int, name: str, how: str,
               categorical: bool, dialect: Dialect, width: int) -> str:  # fmt: skip
    """The mean, median or mode of a column's cells in the training rows (none missing; bad cells are left to
    encode_rows), as the cell it fills a missing one with: a category, or a number's repr."""
    cells = [s for i in train.tolist() if len(rows[i][1]) == width and not dialect.is_missing(s := rows[i][1][c])]
    cells = [s.strip() for s in cells]
    if not categorical:
        cells = [repr(v) for s in cells if is_number(t := _decimal_point(s, dialect)) and math.isfinite(v := float(t))]
    if not cells:
        raise SpecError.at(_strategy_loc(src, name), f"the column '{_quoted(name)}' has no value in the training rows "
                           f"to take its {how} from", "fill it with a value, {fill: VALUE}, or leave the column out "
                           "of data.features")  # fmt: skip
    if how == "mode":
        counts: dict[str, int] = {}
        for s in cells:
            counts[s] = counts.get(s, 0) + 1
        order: Callable[[str], Any] = _class_order if categorical else float
        return min(counts, key=lambda v: (-counts[v], order(v)))  # NOTE: ties: the smallest value, or the first name
    values = np.array([float(v) for v in cells])
    return repr(float(np.mean(values) if how == "mean" else np.median(values)))


def _new_columns(src: _Source, rows: list[tuple[int, list[str]]], train: np.ndarray, header: list[str],
                 features: list[str], cols: list[int], strategies: dict[str, tuple[str, Any]], dialect: Dialect
                 ) -> Columns:  # fmt: skip
    """The columns training reads: the categorical ones' vocabularies and each strategy's fill, from the training
    rows (a fill that is a new category is one more category)."""
    categorical, at = src.data["categorical"] or {}, dict(zip(features, cols))
    given = {f: _fill_text(src, f, v, f in categorical) for f, (how, v) in strategies.items() if how == "fill"}
    vocabularies = {f: (categorical[f], _vocabulary(rows, train, c, len(header), dialect, given.get(f)))
                    for f, c in zip(features, cols) if f in categorical}  # fmt: skip
    missing = {f: (how, given[f] if how == "fill" else None if how == "drop_row" else
                   _statistic(src, rows, train, at[f], f, how, f in categorical, dialect, len(header)))
               for f, (how, _) in strategies.items()}  # fmt: skip
    return Columns(tuple(features), vocabularies, missing)


def _decimal_targets(rows: list[tuple[int, list[str]]], col: int, dialect: Dialect, width: int
                     ) -> list[tuple[int, list[str]]]:  # fmt: skip
    """The rows with the target column's numbers written with a point (data.decimal ','), so that 3,5 is a number to
    learn, not a class name."""
    if dialect.decimal == ".":
        return rows
    ret = []
    for line, cells in rows:
        if len(cells) == width and is_number(point := _decimal_point(cells[col].strip(), dialect)):
            cells = [*cells[:col], point, *cells[col + 1 :]]
        ret.append((line, cells))
    return ret


def _load_csv(src: _Source) -> Dataset:
    file = src.file()
    hline, header, rows, dialect = csv_table(_read_bytes(src, file), file, dialect_of(src.data))
    features, cols = _csv_columns(src, header, hline, file)
    strategies = _strategies(src, features)
    rows, notes = _left_out(rows, header, cols, features, strategies, dialect)
    if not rows:
        raise SpecError.at(src.path_loc(file), f"every row of {file.name} is left out: {notes.no_target} with its "
                           f"target missing, {notes.dropped} with a missing cell in a drop_row column",
                           "fill the missing cells, or fill them with data.missing: mean, median or mode")  # fmt: skip
    rows = _decimal_targets(rows, cols[-1], dialect, len(header))
    col, what = cols[-1], f"the values of column '{_quoted(header[cols[-1]])}' in {file.name}"
    train, _ = _indices(src, len(rows), _csv_strata(src, rows, header, col, file))
    columns = src.columns or _new_columns(src, rows, train, header, features, cols, strategies, dialect)
    if src.test_file is None:  # NOTE: a trained model's columns are what they are: a test file's bad cells are its own
        _raise_cut(_text_columns(rows, header, cols[:-1], columns, file, hline, dialect), file)
    _check_columns(src, columns)
    if len(rows) * columns.width > MAX_ENCODED:
        raise SpecError.at(src.input_loc(), f"{len(rows):,} rows of {columns.width:,} values each (one-hot encoded) "
                           f"are more than {MAX_ENCODED:,} values", "encode the columns with many categories as "
                           "index, or merge rare categories")  # fmt: skip
    unseen = "is in validation rows only: the categories are those of the training rows, so the model never learns it"
    if src.test_file is not None:
        unseen = "is not among the categories of the training rows, which the model learned"
    x, problems = encode_rows(rows, header, cols[:-1], columns, file, NONFINITE_HINT, unseen, dialect,
                              served=src.test_file is not None)  # fmt: skip
    task = _csv_task(src, rows, header, col)
    if src.data["task"] is None:
        _raise_cut(_stray_text_problems(rows, header, col, file), file)
    if task == "regress":
        whole = [(line, c) for line, c in rows if len(c) == len(header)]  # NOTE: encode_rows reports ragged rows
        values, more = _csv_numbers(whole, header, [col], file)
        _raise_cut(problems + more or _big_target_problems(rows, header, col, file), file)
        y, names = values, None  # (N, 1)
    else:
        y, names, more = _csv_labels(rows, header, col, file, src.classes)
        _raise_cut(problems + more, file)
        what = f"the classes in column '{_quoted(header[col])}' of {file.name}"

    def label_at(i: int) -> tuple[str, Location]:
        return f"row {rows[i][0]}, column '{_quoted(header[col])}'", Location(str(file), rows[i][0], col + 1)

    target = _Target(task, what, label_at if names is None else None, names, settable=True, per_row=True)
    where = f"the {len(rows)} data rows of {file.name} with valid_split {src.data['valid_split']}"
    x = x if columns.is_index else x.astype(np.float32)
    ds = _split(src, x, y, target, Location(str(file), rows[-1][0], 1), where)
    ds.columns, ds.table = columns, notes
    return ds


def _csv_task(src: _Source, rows: list[tuple[int, list[str]]], header: list[str], col: int) -> str:
    """data.task, else classify for a target column holding text (or a test file of a classifier), else regress."""
    texts = any(len(c) == len(header) and c[col].strip() and not is_number(c[col].strip()) for _, c in rows)
    return src.data["task"] or ("classify" if texts or src.classes else "regress")


def _csv_strata(src: _Source, rows: list[tuple[int, list[str]]], header: list[str], col: int, file: Path
                ) -> np.ndarray | None:  # fmt: skip
    """The class of each row, for a stratified split before the rows are encoded (the categorical vocabularies are the
    training rows'): the same classes _split stratifies by later, so both draw the same split. None for a regression
    target, or rows with problems (reported once the rows are read)."""
    if _csv_task(src, rows, header, col) != "classify":
        return None
    labels, _, problems = _csv_labels(rows, header, col, file, src.classes)
    return labels.astype(np.float64) if not problems and len(labels) == len(rows) else None


def input_columns(spec: ValidSpec, saved: Columns | None, header: list[str], hline: int, file: Path
                  ) -> tuple[Columns, list[int]]:  # fmt: skip
    """The columns of a CSV input to `run` that the model reads, and where they are: the columns saved with the
    weights (with their vocabularies); without them (weights another tool wrote), a csv spec's data.features, or every
    column but its target; a model trained on other data reads every column, in order."""
    data = spec.values.get("data") or {}
    if saved is None and data.get("source") == "csv" and data.get("categorical"):
        raise SpecError.at(None, "the weights hold no vocabulary for the categorical columns (data.categorical), so "
                           "their values cannot be encoded", "pass weights that `specgrad train` wrote")  # fmt: skip
    if saved is None and data.get("source") != "csv":
        if all(is_number(h) for h in header):
            raise SpecError.at(Location(str(file), hline, 1), f"the first row of {file.name} holds numbers: a CSV "
                               "input needs a header row naming the columns", "add a header row")  # fmt: skip
        return Columns(tuple(header)), list(range(len(header)))
    columns = saved or Columns(tuple(data.get("features") or [h for h in header if h != data.get("target")]))
    missing = [f for f in columns.features if f not in header]
    if missing:
        raise SpecError.at(Location(str(file), hline, 1), f"the model reads the columns "
                           f"{', '.join(_quoted(f) for f in columns.features[:20])}, but {file.name} has no column "
                           f"{', '.join(repr(_quoted(m)) for m in missing[:20])}",
                           _column_hint(missing[0], header))  # fmt: skip
    return columns, [header.index(f) for f in columns.features]


# *** npz ***


def _npz_arrays(src: _Source, file: Path, value: str, loc: Location, wanted: tuple[str, ...]
                ) -> tuple[list[str], dict[str, np.ndarray]]:  # fmt: skip
    """(the names of a .npz's arrays, or ['x'] for a .npy; those of them in `wanted`, read). The file must lie in the
    allowed folders (`value` names it in the spec, at `loc`) and be at most MAX_FILE_MB; its zip directory is checked
    (at most MAX_NPZ_ARRAYS arrays, .npy files only, MAX_FILE_MB unpacked) before it is parsed, and each array's .npy
    header (never Python objects, a size that fits) before its data is read."""
    f, size = open_data(src.checked(file, value, loc), loc, src.key, src.missing_hint)
    try:
        with f:
            head = f.read(6)
            f.seek(0)
            if head == b"\x93NUMPY":  # NOTE: a single .npy file holds the inputs, 'x'
                return ["x"], {"x": _npy(f, size, file.name)} if "x" in wanted else {}
            if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):  # NOTE: a .npz is a zip archive of .npy files
                raise ValueError("np.save or np.savez did not write it")
            _check_zip_directory(f, size)
            with zipfile.ZipFile(f) as z:
                members = _npz_members(z.infolist(), file, loc)
                arrays = {}
                for name in (n for n in wanted if n in members):
                    with z.open(members[name]) as m:
                        arrays[name] = _npy(m, members[name].file_size, f"{name}.npy")
                return list(members), arrays
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError) as e:
        raise SpecError.at(loc, f"{file.name} cannot be read as a .npz file ({excerpt(str(e), 200)})",
                           "save the arrays with numpy: np.savez(path, x=inputs, y=targets)") from None  # fmt: skip


def _check_zip_directory(f: Any, size: int) -> None:
    """The zip directory's entry count and size, from its end record, before zipfile parses it (an entry takes memory
    and time to parse, and a 1 GiB file could hold millions)."""
    f.seek(max(0, size - 65_557))  # NOTE: the end record (22 bytes) and a comment of up to 65535 bytes
    tail = f.read()
    f.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise ValueError("it has no zip directory: is it cut short?")
    count, dir_size = _le(tail[at + 10 : at + 12]), _le(tail[at + 12 : at + 16])
    if at >= 20 and tail[at - 20 : at - 16] == b"PK\x06\x07":  # NOTE: a zip64 locator: zipfile reads its record instead
        f.seek(_le(tail[at - 12 : at - 4]))
        record = f.read(56)
        f.seek(0)
        if len(record) < 56 or record[:4] != b"PK\x06\x06":
            raise ValueError("its zip64 directory record is damaged")
        count, dir_size = _le(record[32:40]), _le(record[40:48])
    if count > MAX_NPZ_ARRAYS or dir_size > MAX_ZIP_DIRECTORY:
        raise ValueError(f"its zip directory lists {count:,} files in {dir_size:,} bytes, but a .npz may hold at most "
                         f"{MAX_NPZ_ARRAYS} arrays")  # fmt: skip


def _le(b: bytes) -> int:
    return int.from_bytes(b, "little")


def _npz_members(infos: list[zipfile.ZipInfo], file: Path, loc: Location) -> dict[str, zipfile.ZipInfo]:
    """The arrays of a .npz by name ('x' for x.npy): each a plain .npy file, together at most MAX_FILE_MB unpacked."""
    if len(infos) > MAX_NPZ_ARRAYS:
        raise ValueError(f"it holds {len(infos):,} files, but a .npz may hold at most {MAX_NPZ_ARRAYS} arrays")
    members: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        if not info.filename.endswith(".npy") or info.is_dir() or info.flag_bits & 0x1:
            raise ValueError(f"'{excerpt(info.filename)}' in it is not a .npy array (np.savez writes only those)")
        if info.filename[:-4] in members:
            raise ValueError(f"it holds '{excerpt(info.filename)}' twice")
        members[info.filename[:-4]] = info
    unpacked, limit = sum(i.file_size for i in infos), int(MAX_FILE_MB.value)
    if unpacked > limit * MIB:
        raise SpecError.at(loc, f"{file} unpacks to {unpacked / MIB:,.1f} MiB, over the limit of {limit:,} MiB for a "
                           "data file", SIZE_HINT)  # fmt: skip
    return members


def _npy(f: Any, size: int, name: str) -> np.ndarray:
    """The array of a .npy file or zip member `f` of `size` bytes; its header is checked before its data is read."""
    fmt = np.lib.format
    version = fmt.read_magic(f)
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f"'{excerpt(name)}' is a .npy file of version {version[0]}.{version[1]}, which np.save "
                         "writes for named fields only")  # fmt: skip
    length = int.from_bytes(f.read(2 if version == (1, 0) else 4), "little")
    if length > MAX_NPY_HEADER:
        raise ValueError(f"the header of '{excerpt(name)}' is {length:,} bytes long, over the {MAX_NPY_HEADER:,} a "
                         ".npy header may have")  # fmt: skip
    f.seek(0)
    fmt.read_magic(f)
    read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    try:
        shape, _, dtype = read_header(f, max_header_size=MAX_NPY_HEADER)
    except (ValueError, SyntaxError, TypeError):  # NOTE: numpy's messages quote the header: say it in words instead
        raise ValueError(f"the header of '{excerpt(name)}' is not one np.save writes") from None
    if dtype.hasobject:
        raise ValueError(f"'{excerpt(name)}' holds Python objects, which are never loaded")
    need, left = math.prod(shape) * dtype.itemsize, size - f.tell()
    if need > left:
        raise ValueError(f"'{excerpt(name)}' of shape {list(shape)} and dtype {dtype} needs {need:,} bytes, but only "
                         f"{max(0, left):,} follow its header: is it cut short?")  # fmt: skip
    f.seek(0)
    try:
        return fmt.read_array(f, allow_pickle=False, max_header_size=MAX_NPY_HEADER)
    except (ValueError, EOFError, OSError):
        raise ValueError(f"'{excerpt(name)}' is cut short or damaged") from None


def _npz_get(src: _Source, names: list[str], arrays: dict[str, np.ndarray], key: str, file: Path, loc: Location
             ) -> np.ndarray:  # fmt: skip
    if key not in arrays:
        held = f"it holds: {', '.join(excerpt(n) for n in names[:20]) or 'nothing'}"
        hint = f"{dym} {held}" if (dym := did_you_mean(key, names)) else held
        raise SpecError.at(loc, f"{file.name} has no array named '{excerpt(key)}'", hint)
    a = arrays[key]
    if a.dtype.kind not in "biuf" or a.ndim == 0 or len(a) == 0:
        raise SpecError.at(loc, f"the array '{key}' of {file.name} must hold numbers per example, got {a.dtype} "
                           f"of shape {list(a.shape)}")  # fmt: skip
    bad = np.nonzero(~np.isfinite(a.reshape(len(a), -1)).all(axis=1))[0] if a.dtype.kind == "f" else []
    if len(bad):
        raise SpecError.at(loc, f"{key}[{bad[0]}] in {file.name} holds NaN or infinity ({len(bad)} of {len(a)} "
                           "examples do)", "fill in or remove those examples")  # fmt: skip
    big = np.nonzero((np.abs(a.reshape(len(a), -1)) > FLOAT32_MAX).any(axis=1))[0] if a.dtype.kind == "f" else []
    if len(big):  # NOTE: float64 values past float32's range would become infinity on the device
        raise SpecError.at(loc, f"{key}[{big[0]}] in {file.name} holds a value beyond float32's range (about "
                           f"{FLOAT32_MAX:.3g}; {len(big)} of {len(a)} examples do)",
                           "rescale the values, or remove those examples")  # fmt: skip
    return a


def _npz_target(src: _Source, y: np.ndarray, key: str, file: Path, loc: Location, task: str | None = None
                ) -> tuple[np.ndarray, _Target]:  # fmt: skip
    """Integer arrays are class labels and float arrays regression targets, unless data.task (or `task`) says
    otherwise."""
    task = task or src.data["task"] or ("regress" if y.dtype.kind == "f" else "classify")
    what = f"'{key}' in {file.name}"
    if task == "classify":
        return y, _Target("classify", what, lambda i: (f"{key}[{i}] in {file.name}", loc), settable=True)
    if y.dtype.kind != "f" and len(big := np.nonzero(np.abs(y.reshape(len(y), -1)).max(axis=1) > EXACT_FLOAT32)[0]):
        raise SpecError.at(loc, f"{key}[{big[0]}] in {file.name} is {int(np.abs(y[big[0]]).max())} (or minus it): "
                           "regression targets are float32, which holds whole numbers exactly up to "
                           f"{EXACT_FLOAT32} only", "scale the targets down, or save them as floats")  # fmt: skip
    return (y.reshape(-1, 1) if y.ndim == 1 else y).astype(np.float32), _Target("regress", what, settable=True)


def _npz_input(src: _Source, names: list[str], arrays: dict[str, np.ndarray], key: str, file: Path, loc: Location
               ) -> np.ndarray:  # fmt: skip
    """The array `key` as the input src.name's examples: its shape, and values its dtype holds exactly."""
    x = _npz_get(src, names, arrays, key, file, loc)
    _check_shape(src, x.shape[1:], f"'{key}' in {file.name} holds examples of shape {list(x.shape[1:])}")
    if not is_float(src.dtype) and not np.array_equal(x.astype(src.dtype), x):
        raise SpecError.at(src.input_loc("dtype") or loc, f"'{key}' in {file.name} holds values that {src.dtype} "
                           "cannot hold exactly", "use dtype float32")  # fmt: skip
    return x.astype(np.float32) if is_float(src.dtype) else x


def _load_npz(src: _Source) -> Dataset:
    file, key = src.file(), src.data["target"] or "y"
    loc = src.path_loc(file)
    wanted = ("x",) if src.data["target"] == "input" or key.endswith(".npy") else ("x", key)
    names, arrays = _npz_arrays(src, file, src.value, loc, wanted)
    x = _npz_input(src, names, arrays, "x", file, loc)
    what = f"the {len(x)} examples of {file.name} with valid_split {src.data['valid_split']}"
    if src.data["target"] == "input":
        return _split(src, x, x.astype(np.float32), _Target("regress", f"'x' in {file.name}"), loc, what)
    yloc = (src.near("target") or loc) if src.data["target"] else loc
    if key.endswith(".npy"):  # NOTE: x in a .npy file, y in another beside it
        names, arrays = [key], {key: _npz_arrays(src, file.parent / key, key, yloc, ("x",))[1]["x"]}
    y = _npz_get(src, names, arrays, key, file, yloc)
    if len(y) != len(x):
        raise SpecError.at(yloc, f"'{key}' in {file.name} has {len(y)} examples but 'x' has {len(x)}",
                           "save one target per example")  # fmt: skip
    y, target = _npz_target(src, y, key, file, yloc)
    return _split(src, x, y, target, loc, what)


def _load_named(src: _Source) -> Dataset:
    """A model with several inputs or outputs: an npz with one array per input and one per output, named after them;
    each output's task is its loss's (cross_entropy: class labels, mse: numbers). Inputs are normalized and regression
    targets standardized one by one, as a single one would be."""
    problems = [Problem(f"data.{key} does not apply to a model with several inputs or outputs: its npz holds an array "
                        "per input and per output, named after them, and each output's loss says what it learns",
                        src.near(key), f"remove data.{key}") for key in ("target", "task", "augment", "class_names")
                if src.given(key)]  # fmt: skip
    if problems:
        raise SpecError(problems)
    file = src.file()
    loc = src.path_loc(file)
    names, arrays = _npz_arrays(src, file, src.value, loc, (*src.spec.inputs, *src.spec.outputs))
    found: list[Problem] = []

    def each(read: Callable[[], Any]) -> Any:
        """read(), or None with its problems kept: every input's and output's problems are reported at once."""
        try:
            return read()
        except SpecError as e:
            found.extend(e.problems)
            return None

    xs = {k: each(lambda k=k, s=s, d=d: _npz_input(replace(src, name=k, shape=tuple(s), dtype=d), names, arrays, k,
                                                    file, loc)) for k, (s, d) in src.spec.inputs.items()}  # fmt: skip
    raw = {o: each(lambda o=o: _npz_get(replace(src, out=o), names, arrays, o, file, loc)) for o in src.spec.outputs}
    counts = {k: len(a) for k, a in {**xs, **raw}.items() if a is not None}
    if len(set(counts.values())) > 1:
        shown = ", ".join(f"'{k}' {n}" for k, n in counts.items())
        found.append(Problem(f"the arrays of {file.name} hold different numbers of examples ({shown})", loc,
                             "save one example of every input and output per row"))  # fmt: skip
    if found:
        raise SpecError(found)
    ys, heads = {}, {}
    for o, (loss, weight) in src.spec.losses.items():
        got = each(lambda o=o, loss=loss, weight=weight: _named_target(replace(src, out=o), raw[o], file, loc, loss,
                                                                         weight))  # fmt: skip
        if got is not None:
            ys[o], heads[o] = got
    if found:
        raise SpecError(found)
    train, valid = _indices(src, len(next(iter(xs.values()))))
    x, y = _records(xs), _records(ys)
    n = len(next(iter(xs.values())))
    ds = Dataset(x[train], y[train], x[valid], y[valid], "multi", heads=heads,
                 test_examples=_test_count(n, src.data["test_split"], n))  # fmt: skip
    _check_enough(src, ds, loc, f"the {len(train) + len(valid)} examples of {file.name} with valid_split "
                  f"{src.data['valid_split']}")  # fmt: skip
    if src.test_file is not None:  # NOTE: prepared with the training split's statistics by _load_test_file
        return ds
    for k, (_, dtype) in src.spec.inputs.items():
        if src.data["normalize"] and is_float(dtype):
            ds.input_stats[k] = stats = _statistics(ds.x_train[k], axis=0)
            ds.x_train[k], ds.x_valid[k] = standardize(ds.x_train[k], stats), standardize(ds.x_valid[k], stats)
    for o, head in heads.items():
        if head.task == "regress" and src.data["normalize_target"]:
            head.target_stats = stats = _statistics(ds.y_train[o], axis=0)
            ds.y_train[o], ds.y_valid[o] = standardize(ds.y_train[o], stats), standardize(ds.y_valid[o], stats)
    return ds


def _named_target(src: _Source, y: np.ndarray, file: Path, loc: Location, loss: str, weight: float
                  ) -> tuple[np.ndarray, Head]:  # fmt: skip
    """The output src.out's targets as its loss says: class labels (cross_entropy) or numbers (mse), checked against
    the output (the data contract)."""
    task = "regress" if loss in REGRESSION_LOSSES else "classify"
    y, target = _npz_target(src, y, src.out, file, loc, task)
    y, num_classes = _check_contract(src, y, target)
    names = [str(i) for i in range(num_classes)] if num_classes is not None else None
    return y, Head(task, loss, weight, num_classes, names)


# *** images ***


def pillow(loc: Location | None) -> Any:
    """Pillow's Image module (the optional extra `images`), or an error at `loc` saying how to install it."""
    try:
        from PIL import Image
    except ImportError:
        raise SpecError.at(loc, "reading images needs Pillow, which is not installed",
                           "pip install 'specgrad[images]'") from None  # fmt: skip
    return Image


def _class_folders(src: _Source, folder: Path, loc: Location) -> list[tuple[str, list[Path]]]:
    """(class name, its image files) for every sub-folder of `folder`, classes sorted as class names are and files by
    name; hidden names (starting with '.') are skipped. Anything else in the way is an error naming it."""
    real, problems, listed = Path(src.checked(folder, src.value, loc)), [], 0
    check_folder(str(real), loc, str(folder), src.key, src.missing_hint)

    def entries(path: Path) -> list[os.DirEntry]:
        nonlocal listed
        found = []
        with os.scandir(path) as it:
            for e in it:
                listed += 1
                if listed > MAX_IMAGES:
                    raise SpecError.at(loc, f"{folder} holds more than {MAX_IMAGES:,} files and folders, more than "
                                       "an images source reads", "use fewer images, or save them as arrays in an "
                                       ".npz")  # fmt: skip
                if not e.name.startswith("."):
                    found.append(e)
        return sorted(found, key=lambda e: e.name)

    classes = []
    for e in entries(real):
        shown = folder / e.name
        if not e.is_dir():
            problems.append(Problem(f"{shown} is not a folder: {folder} must hold one sub-folder of images per class",
                                    loc, "move it into its class folder, or out of the data folder"))  # fmt: skip
            continue
        files = []
        for f in entries(Path(src.checked(real / e.name, f"{src.value}/{e.name}", loc))):
            if f.is_dir() or Path(f.name).suffix.lower() not in IMAGE_SUFFIXES:
                what = "a folder" if f.is_dir() else "not a .png, .jpg or .jpeg file"
                problems.append(Problem(f"{shown / f.name} is {what}: a class folder holds PNG and JPEG images only",
                                        loc, "remove it or move it out of the data folder"))  # fmt: skip
            else:
                files.append(shown / f.name)
        if not files:
            problems.append(Problem(f"the class folder {shown} holds no images", loc,
                                    "add PNG or JPEG images of the class, or remove the folder"))  # fmt: skip
        classes.append((e.name, files))
    _raise_cut(problems, folder)
    if src.classes is not None:  # NOTE: a test folder: any of the classes the model was trained on
        return _known_classes(src.classes, classes, folder, loc)
    if len(classes) < 2:
        found = f"only one, '{excerpt(classes[0][0], SHOWN)}'" if classes else "none"
        raise SpecError.at(loc, f"{folder} must hold one sub-folder of images per class, and a classifier needs at "
                           f"least 2 classes; it holds {found}", "add a folder for each class, named after it, with "
                           "its images inside")  # fmt: skip
    return sorted(classes, key=lambda c: _class_order(c[0]))


def _known_classes(names: list[str], found: list[tuple[str, list[Path]]], folder: Path, loc: Location
                   ) -> list[tuple[str, list[Path]]]:  # fmt: skip
    """A test folder's class folders as (name, files) for every trained class in order (none where it has no folder);
    a folder of a class the model never learned is an error."""
    files = dict(found)
    unknown = [Problem(f"{folder / name} is a class the model was not trained on", loc,
                       f"{did_you_mean(name, names) or ''} the classes are: {_shown_names(names)}".strip())
               for name in files if name not in names][:MAX_PROBLEMS]  # fmt: skip
    _raise_cut(unknown, folder)
    return [(name, files.get(name, [])) for name in names]


class WrongSize(ValueError):
    """An image of another size than the input's, without data.resize."""


def read_image(raw: bytes, shown: str, shape: tuple[int, ...], resize: bool, image: Any) -> np.ndarray:
    """One PNG or JPEG file's bytes as floats 0..1 of `shape` (channels, height, width): turned as its EXIF
    orientation says, converted to the channels' mode, scaled to height x width when `resize` (else another size is an
    error). A ValueError says in words why it cannot be (a damaged file, another format, too many pixels, the size)."""
    from PIL import ImageOps

    channels, h, w = shape
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", image.DecompressionBombWarning)  # NOTE: refused before any pixel is decoded
            warnings.simplefilter("ignore", UserWarning)  # NOTE: e.g. palette transparency notes on conversion
            with image.open(io.BytesIO(raw), formats=("PNG", "JPEG")) as img:
                _check_declared_size(img, shown, shape, resize)
                if img.format in JPEG_FORMATS:
                    _check_jpeg(raw, shown)
                else:
                    _check_png_rows(img, raw, shown)
                if resize and img.format in JPEG_FORMATS:
                    img.draft(IMAGE_MODES[channels], (w, h))  # NOTE: JPEG decodes at a smaller scale, faster
                img = ImageOps.exif_transpose(img)
                if img.size != (w, h) and not resize:
                    raise WrongSize(f"{shown} is {img.size[0]}x{img.size[1]} pixels, but the input's shape "
                                    f"{list(shape)} takes {w}x{h} images (width x height)")  # fmt: skip
                wide = img.mode.startswith("I")  # NOTE: 16-bit grayscale PNG: 0..65535, which convert('L') would clip
                img = image.fromarray(np.asarray(img, np.float32) / 65535, "F") if wide else \
                    img.convert(IMAGE_MODES[channels])  # fmt: skip
                if img.size != (w, h):
                    img = img.resize((w, h), image.Resampling.BILINEAR)
                a = np.asarray(img, np.float32) / (1 if wide else 255)
                if wide and channels > 1:  # NOTE: gray repeated as RGB, and an opaque alpha
                    a = np.stack([a] * 3 + [np.ones_like(a)] * (channels - 3), axis=2)
    except (image.DecompressionBombError, image.DecompressionBombWarning):
        raise ValueError(f"{shown} declares more than {image.MAX_IMAGE_PIXELS:,} pixels, more than an image is "
                         "decoded for (a decompression bomb, or a huge photo)") from None  # fmt: skip
    except image.UnidentifiedImageError:
        raise ValueError(f"{shown} is not a PNG or JPEG image (its contents are something else)") from None
    except (OSError, SyntaxError, EOFError, struct_error, ZeroDivisionError, MemoryError) as e:
        raise ValueError(f"{shown} cannot be read as an image: it is damaged or cut short ({excerpt(str(e), 80)})"
                         ) from None  # fmt: skip
    return (a[None] if a.ndim == 2 else a.transpose(2, 0, 1)).reshape(shape)


def decoded_pixel_limit(shape: tuple[int, ...]) -> int:
    """The most pixels one image for an input of `shape` (channels, height, width) is decoded to (IMAGE_SCALE)."""
    return max(MIN_IMAGE_PIXELS, IMAGE_SCALE**2 * shape[1] * shape[2])


def _check_declared_size(img: Any, shown: str, shape: tuple[int, ...], resize: bool) -> None:
    """Refuse, from the header alone, an image that would decode to far more pixels than the input takes: a PNG a few
    KiB long may declare 89 million pixels (Pillow's own limit), which decode for seconds into hundreds of MiB for
    an 8x8 input. Without resize, any size but the input's (either way round: EXIF may turn it) is refused here."""
    _, h, w = shape
    width, height = img.size
    if not resize and (width, height) not in ((w, h), (h, w)):
        raise WrongSize(f"{shown} is {width}x{height} pixels, but the input's shape {list(shape)} takes {w}x{h} "
                        "images (width x height)")  # fmt: skip
    jpeg = img.format in JPEG_FORMATS
    decoded = width * height // (64 if jpeg and resize else 1)
    if decoded > (limit := decoded_pixel_limit(shape)):
        raise ValueError(f"{shown} is {width}x{height} pixels, more than an image is decoded for with an input of "
                         f"{w}x{h} (at most {limit:,} pixels{', after JPEG reduction' if jpeg else ''})"
                         )  # fmt: skip


JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # NOTE: DHT, JPG and DAC share the range
JPEG_ARITHMETIC = frozenset(range(0xC9, 0xD0)) - {0xCC}
JPEG_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")  # NOTE: ends a scan's data: not a stuffed FF00, RSTn or fill
JPEG_RST = tuple(bytes([0xFF, m]) for m in range(0xD0, 0xD8))
NOT_FILL = re.compile(rb"[^\xff]")  # NOTE: a marker's code after its FF and any fill bytes


class _Damaged(ValueError):
    """A JPEG whose markers do not hold together; `what` says how, `at` the byte where it was found."""

    def __init__(self, what: str, at: int) -> None:
        super().__init__(f"{what} at byte {at:,}")


def _jpeg_frame(seg: bytes, at: int) -> tuple[int, int, int]:
    """(width, height, 8x8 blocks of its largest component) from an SOF segment's body: a component sampled h x v of
    the largest hmax x vmax covers ceil(width * h / hmax) x ceil(height * v / vmax) pixels."""
    if len(seg) < 6 or len(seg) != 6 + 3 * seg[5] or seg[5] == 0:
        raise _Damaged("a frame header of the wrong length", at)
    height, width = int.from_bytes(seg[1:3], "big"), int.from_bytes(seg[3:5], "big")
    factors = [(seg[7 + 3 * k] >> 4, seg[7 + 3 * k] & 15) for k in range(seg[5])]
    if not width or not height or not all(1 <= h <= 4 and 1 <= v <= 4 for h, v in factors):
        raise _Damaged("a frame header with a zero size or a bad sampling factor", at)
    hmax, vmax = max(h for h, _ in factors), max(v for _, v in factors)
    blocks = max(math.ceil(math.ceil(width * h / hmax) / 8) * math.ceil(math.ceil(height * v / vmax) / 8)
                 for h, v in factors)  # fmt: skip
    return width, height, blocks


def _jpeg_scan_end(raw: bytes, start: int) -> tuple[int, int]:
    """(where the entropy-coded data from `start` ends, how many coded bytes it holds): the next marker that is not a
    stuffed FF00 or a restart marker; those are not counted. bytes.find and count only: no Python loop per byte."""
    found = JPEG_MARKER.search(raw, start)
    if found is None:
        raise _Damaged("a scan that runs to the end of the file (no end-of-image marker)", start)
    end = found.start()
    data = raw[start:end]
    return end, len(data) - data.count(b"\xff\x00") - 2 * sum(data.count(m) for m in JPEG_RST)


def jpeg_coding(raw: bytes) -> tuple[bool, int, int, int, int]:
    """Walk a JPEG's markers from SOI to EOI: (arithmetic coded, width, height, blocks of its largest component,
    entropy-coded bytes of all its scans). Segments are skipped by their lengths, so bytes inside an EXIF thumbnail or
    a comment are never taken for markers; a missing SOI or EOI, a segment past the end, a second frame, a scan before
    the frame, or stray bytes between segments raise _Damaged. Linear in the file's size."""
    if raw[:2] != b"\xff\xd8":
        raise _Damaged("no start-of-image marker", 0)
    at, frame, coded, scans = 2, None, 0, 0
    while True:
        if raw[at : at + 1] != b"\xff":
            raise _Damaged("stray bytes where a marker belongs" if at < len(raw) else "no end-of-image marker", at)
        if (code := NOT_FILL.search(raw, at)) is None:  # NOTE: fill bytes FF may precede any marker
            raise _Damaged("no end-of-image marker", len(raw))
        marker, at = raw[code.start()], code.start() + 1
        if marker == 0xD9:
            break
        if 0xD0 <= marker <= 0xD7 or marker in (0x00, 0x01, 0xD8):
            raise _Damaged(f"a misplaced marker FF{marker:02X}", at - 2)
        size = int.from_bytes(raw[at : at + 2], "big")
        if size < 2 or at + size > len(raw):
            raise _Damaged("a segment longer than the file" if size >= 2 else "a segment length under 2", at - 2)
        seg, at = raw[at + 2 : at + size], at + size
        if marker in JPEG_SOF:
            if frame is not None:
                raise _Damaged("a second frame header", at - size - 2)
            frame = (marker in JPEG_ARITHMETIC, *_jpeg_frame(seg, at - size - 2))
        elif marker == 0xDA:
            if frame is None:
                raise _Damaged("a scan before the frame header", at - size - 2)
            at, n = _jpeg_scan_end(raw, at)
            coded, scans = coded + n, scans + 1
    if frame is None or not scans:
        raise _Damaged("an end-of-image marker before any frame or scan", at - 2)
    return (*frame, coded)


def _check_jpeg(raw: bytes, shown: str) -> None:
    """Refuse a JPEG whose markers do not hold together, or whose scans hold too few bytes for the pixels its frame
    declares. libjpeg fills the missing part of a cut-short or emptied scan with gray and only warns (Pillow passes the
    warning by), so such a file would be trained on.

    The floor, for Huffman coding: a JPEG's first DC scan of a component (sequential or progressive, interleaved or
    not) codes every 8x8 block of that component, at least the component's ceil(w/8) x ceil(h/8) blocks (an
    interleaved scan codes whole MCUs, more), and each block's DC difference is a Huffman code of at least one bit. So
    the scans of an honest file hold at least blocks / 8 bytes of its largest component, stuffing and restart markers
    not counted; a one-colour 2400x1800 image saved with optimized tables holds about 2 bits per block. Arithmetic
    coding (rare) can code a flat block in a fraction of a bit and gets no floor, only the marker walk."""
    try:
        arithmetic, width, height, blocks, coded = jpeg_coding(raw)
    except _Damaged as e:
        raise ValueError(f"{shown} cannot be read as an image: it is damaged or cut short (JPEG: {e})") from None
    least = math.ceil(blocks / 8)
    if not arithmetic and coded < least:
        raise ValueError(f"{shown} declares {width}x{height} pixels but its image data holds {coded:,} bytes, too few "
                         f"for them (at least {least:,}): it is damaged or cut short")  # fmt: skip


PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # NOTE: colour type -> samples per pixel (gray, RGB, palette, GA, RGBA)
# NOTE: Adam7's seven passes, each (first column, first row, column step, row step)
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
INFLATE_CHUNK = 1 << 20  # NOTE: bytes of a PNG's image data decompressed at a time when counting them


def png_data_size(width: int, height: int, depth: int, colour: int, interlaced: bool) -> int:
    """Bytes a PNG's decompressed image data holds: each row of each pass (one, or Adam7's seven) is a filter byte
    and its pixels' bits rounded up to whole bytes; a pass with no pixel has no rows."""
    bits, total = depth * PNG_CHANNELS[colour], 0
    for x, y, dx, dy in ADAM7 if interlaced else ((0, 0, 1, 1),):
        cols, rows = max(0, -(-(width - x) // dx)), max(0, -(-(height - y) // dy))
        total += rows * (1 + math.ceil(cols * bits / 8)) if cols else 0
    return total


def _png_idat(raw: bytes) -> bytes | None:
    """A PNG's IDAT chunks joined, read by chunk lengths up to IEND; None where a chunk runs past the file's end."""
    at, parts = 8, []
    while at + 8 <= len(raw):
        size, kind = int.from_bytes(raw[at : at + 4], "big"), raw[at + 4 : at + 8]
        if at + 12 + size > len(raw):
            return None
        if kind == b"IEND":
            break
        if kind == b"IDAT":
            parts.append(raw[at + 8 : at + 8 + size])
        at += 12 + size
    return b"".join(parts)


def _png_data_count(data: bytes, need: int) -> int | None:
    """How many bytes a PNG's image data `data` decompresses to, counted no further than past `need` (in INFLATE_CHUNK
    pieces, never held whole); None where it does not decompress."""
    got, z = 0, zlib.decompressobj()
    try:
        while data and got <= need and not z.eof:
            got += len(z.decompress(data, INFLATE_CHUNK))
            data = z.unconsumed_tail
    except zlib.error:
        return None
    return got


def _check_png_rows(img: Any, raw: bytes, shown: str) -> None:
    """Refuse a PNG whose image data holds fewer bytes than its header's size needs: a complete zlib stream of 3 rows
    for an 8-row image decodes without an error (Pillow leaves the missing rows 0), so it would be trained on. This
    costs one more decompression of the data (no more than _check_declared_size allows), about a quarter of Pillow's
    whole decode, and INFLATE_CHUNK of memory."""
    width, height = img.size
    ihdr = raw[16:29]  # NOTE: IHDR's body; Pillow has read it (the first chunk, always) to open the file
    data = _png_idat(raw)
    if data is None:
        raise ValueError(f"{shown} cannot be read as an image: it is damaged or cut short (PNG: its last chunk runs "
                         "past the end of the file)")  # fmt: skip
    need = png_data_size(width, height, ihdr[8], ihdr[9], ihdr[12] == 1)
    if (got := _png_data_count(data, need)) is None:
        raise ValueError(f"{shown} cannot be read as an image: it is damaged or cut short (PNG: its image data does "
                         "not decompress)")  # fmt: skip
    if got < need:
        raise ValueError(f"{shown} declares {width}x{height} pixels but its image data holds {got:,} of the {need:,} "
                         "bytes they need: it is damaged or cut short")  # fmt: skip


def _load_images(src: _Source) -> Dataset:
    folder, loc = src.file(), src.path_loc(src.file())
    if len(src.shape) != 3 or src.shape[0] not in IMAGE_MODES:
        raise SpecError.at(src.input_loc(), f"source images gives examples of shape [channels, height, width] with 1 "
                           f"(grayscale), 3 (RGB) or 4 (RGBA) channels, but the input's shape is {list(src.shape)}",
                           "set the input's shape to, e.g., [3, 32, 32]")  # fmt: skip
    image = pillow(src.near("source"))
    classes = _class_folders(src, folder, loc)
    files = [(f, k) for k, (_, fs) in enumerate(classes) for f in fs]
    if len(files) * math.prod(src.shape) > MAX_IMAGE_VALUES:
        raise SpecError.at(loc, f"{len(files):,} images of shape {list(src.shape)} are more than {MAX_IMAGE_VALUES:,} "
                           "values, more than an images source holds in memory",
                           "use smaller images (data.resize) or fewer of them")  # fmt: skip
    x, problems, hinted = np.zeros((len(files), *src.shape), np.float32), [], set()
    for i, (file, _) in enumerate(files):
        raw = src.read(file, str(file), loc)
        try:
            x[i] = read_image(raw, str(file), src.shape, src.data["resize"], image)
        except ValueError as e:
            hint = "set data.resize: true to scale every image to the input's size, or resize the files" if \
                isinstance(e, WrongSize) else "replace or remove the file"  # fmt: skip
            problems.append(Problem(str(e), loc, hint if hint not in hinted else None))  # NOTE: each hint once
            hinted.add(hint)
    _raise_cut(problems, folder)
    y = np.array([k for _, k in files], np.int32)
    names = [name for name, _ in classes]
    target = _Target("classify", f"the class folders of {folder.name}", names=names)
    return _split(src, x, y, target, loc, f"the {len(files)} images in {folder} with valid_split "
                  f"{src.data['valid_split']}")  # fmt: skip


LOADERS: dict[str, Callable[[_Source], Dataset]] = {
    "digits": _load_digits, "text": _load_text, "csv": _load_csv, "npz": _load_npz, "images": _load_images,
    "spirals": _load_spirals, "sine": _load_sine}  # fmt: skip


# *** batches ***


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
