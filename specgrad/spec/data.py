"""A spec's data as numpy arrays: the bundled digits and sonnets, text, CSV, .npz/.npy files, spirals and sine;
split with the spec's seed, standardized with training statistics only, and batched. Every problem in a data file is
a SpecError at its file:line:col. Imports numpy, spec.errors, spec.loader, spec.resolve, spec.schema, spec.validate
and specgrad.datasets (never Tensor: the trainer wraps the arrays).

Text examples are windows of `context` characters (x) and the same window shifted by one character (y); windows start
every context // 2 characters, so a small text gives twice the examples of non-overlapping windows. The last
valid_split of the text (by position) is the validation text, so no window spans both splits.
"""

from __future__ import annotations

import csv
import io
import math
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.datasets import load_digits, load_text, split
from specgrad.spec.errors import Location, Problem, SpecError
from specgrad.spec.loader import YNode
from specgrad.spec.resolve import resolve
from specgrad.spec.schema import did_you_mean
from specgrad.spec.validate import ValidSpec

DEFAULT_VOCAB = 128  # NOTE: characters are their code points; ASCII unless the model's embedding says otherwise
MAX_PROBLEMS = 10  # problems of one kind (cells, characters) reported at once; the rest are counted
FLOAT_SOURCES = ("digits", "csv", "spirals", "sine")


@dataclass
class Dataset:
    """Training and validation examples: x is (N, *input shape) in the input's dtype, y the targets."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_valid: np.ndarray
    y_valid: np.ndarray
    task: str  # "classify" (y int32 labels), "regress" (y float32) or "language" (y int32 next tokens (N, context))
    num_classes: int | None = None
    stats: dict[str, np.ndarray] = field(default_factory=dict)  # "mean", "std" of the training x when normalized


# *** where things are: the spec as written, for locations ***


@dataclass(frozen=True)
class _Source:
    """The data section, its one input, and the spec as written (None when it cannot be re-read) for locations."""

    spec: ValidSpec
    data: dict[str, Any]
    name: str
    shape: tuple[int, ...]
    dtype: str
    root: YNode | None

    def node(self, *keys: str) -> YNode | None:
        node = self.root
        for k in keys:
            node = node.get(k) if node is not None else None
        return node

    def loc(self, key: str) -> Location | None:
        """Where data.<key> is written, when the spec as written still holds the value being used."""
        node = self.node("data", key)
        return node.loc if node is not None and node.to_plain() == self.data[key] else None

    def near(self, key: str) -> Location | None:
        """Where data.<key> is written, else the data section (a default value, or one set on the command line)."""
        data = self.node("data")
        return self.loc(key) or (data.loc if data is not None else None)

    def input_loc(self, key: str = "shape") -> Location | None:
        node = self.node("input", key) or self.node("inputs", self.name, key)
        return node.loc if node is not None else None

    def file(self) -> Path:
        """data.path, relative to the folder of the spec file that names it."""
        loc = self.loc("path")
        folder = Path(loc.file).parent if loc is not None and not loc.file.startswith("--set") else None
        return (folder or Path(self.spec.path).parent) / self.data["path"]

    def path_loc(self, file: Path) -> Location:
        """Problems with a whole file: at data.path in the spec, else at the file itself."""
        return self.loc("path") or Location(str(file), 1, 1)


def _source(spec: ValidSpec) -> _Source:
    data = spec.values.get("data") or {}
    if data.get("source") is None:
        raise SpecError.at(Location(spec.path, 1, 1), "the spec has no data: section, so there is nothing to train on",
                           "add one, for example data: {source: digits}")  # fmt: skip
    try:
        root: YNode | None = resolve(spec.path)
    except (SpecError, OSError):
        root = None
    if len(spec.inputs) != 1:
        raise SpecError.at(root.loc if root else None, f"data feeds one input, but the model has {len(spec.inputs)}: "
                           f"{', '.join(spec.inputs)}")  # fmt: skip
    name, (shape, dtype) = next(iter(spec.inputs.items()))
    return _Source(spec, data, name, tuple(shape), dtype, root)


# *** load_data ***


def load_data(spec: ValidSpec) -> Dataset:
    """The spec's examples, split into training and validation, deterministic given spec.values['seed']."""
    src = _source(spec)
    _check_unused(src)
    kind = src.data["source"]
    if kind in FLOAT_SOURCES and not src.dtype.startswith("float"):
        raise SpecError.at(src.input_loc("dtype") or src.input_loc(), f"source {kind} gives numbers with fractions, "
                           f"but the input's dtype is {src.dtype}", "use dtype float32")  # fmt: skip
    ds = LOADERS[kind](src)
    if src.data["normalize"] and kind != "text" and src.dtype.startswith("float"):
        ds = _normalized(ds, per_feature=kind != "digits")
    ds.x_train, ds.x_valid = ds.x_train.astype(src.dtype, copy=False), ds.x_valid.astype(src.dtype, copy=False)
    return ds


def _check_unused(src: _Source) -> None:
    """Keys that would silently do nothing for this source."""
    kind, problems = src.data["source"], []
    if src.data["features"] is not None and kind != "csv":
        problems.append(Problem(f"data.features is for the csv source, not {kind}", src.near("features")))
    allowed = {"digits": (None, "input"), "text": (None,), "spirals": (None,), "sine": (None,)}.get(kind)
    if allowed is not None and src.data["target"] not in allowed:
        digits = " for the digit labels, or write input to rebuild the image" if kind == "digits" else ""
        hint = f"leave it out{digits}"
        problems.append(Problem(f"data.target '{src.data['target']}' does not apply to source {kind}",
                                src.near("target"), hint))  # fmt: skip
    if problems:
        raise SpecError(problems)


def _indices(n: int, valid_split: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled (train, valid) indices; valid_split 0 keeps every example for training."""
    if valid_split == 0:
        return np.random.default_rng(seed).permutation(n), np.zeros(0, dtype=np.int64)
    return split(n, valid_split, seed)


def _split(src: _Source, x: np.ndarray, y: np.ndarray, task: str, num_classes: int | None, where: Location | None,
           what: str) -> Dataset:  # fmt: skip
    train, valid = _indices(len(x), src.data["valid_split"], src.spec.values["seed"])
    ds = Dataset(x[train], y[train], x[valid], y[valid], task, num_classes)
    _check_enough(src, ds, where, what)
    return ds


def _check_enough(src: _Source, ds: Dataset, where: Location | None, what: str) -> None:
    """At least one full training batch, and a validation example when valid_split asks for some."""
    bs, vs = src.data["batch_size"], src.data["valid_split"]
    if len(ds.x_train) < bs:
        raise SpecError.at(where, f"{what} leave {len(ds.x_train)} training examples, fewer than batch_size {bs} "
                           "(training uses full batches only)",
                           "lower data.batch_size or data.valid_split, or add examples")  # fmt: skip
    if vs > 0 and len(ds.x_valid) == 0:
        raise SpecError.at(where, f"{what} leave no validation examples", "add examples, or set valid_split: 0")


def _check_shape(src: _Source, got: tuple[int, ...], what: str) -> None:
    """The examples' shape must be the input's; `what` says where the examples' shape comes from."""
    if tuple(got) != src.shape:
        raise SpecError.at(src.input_loc(), f"{what}, but the input's shape is {list(src.shape)}",
                           f"set the input's shape to {list(got)}")  # fmt: skip


def standardize(x: np.ndarray, stats: dict[str, np.ndarray]) -> np.ndarray:
    """x with the training statistics applied, as load_data does; unchanged when stats is empty."""
    return (x - stats["mean"]) / stats["std"] if stats else x


def _normalized(ds: Dataset, per_feature: bool) -> Dataset:
    """Standardized with the TRAINING split's mean and std (per feature, or one number for images); std 0 -> 1."""
    x = ds.x_train.astype(np.float64)
    mean, std = (x.mean(axis=0), x.std(axis=0)) if per_feature else (np.array(x.mean()), np.array(x.std()))
    ds.stats = {"mean": mean.astype(np.float32), "std": np.where(std == 0, 1.0, std).astype(np.float32)}
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
        return _split(src, x, y, "regress", None, src.near("batch_size"), what)
    return _split(src, x, labels.astype(np.int32), "classify", 10, src.near("batch_size"), what)


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
    return _split(src, x, y, "classify", 2, src.near("samples"), f"{len(x)} samples")


def _load_sine(src: _Source) -> Dataset:
    _check_shape(src, (1,), "sine examples are one number x, shape [1] per example")
    rng = np.random.default_rng(src.spec.values["seed"])
    x = rng.uniform(-3, 3, (src.data["samples"], 1))
    y = np.sin(x) + src.data["noise"] * rng.standard_normal(x.shape)
    return _split(src, x.astype(np.float32), y.astype(np.float32), "regress", None, src.near("samples"),
                  f"{len(x)} samples")  # fmt: skip


# *** files ***


def _missing(src: _Source, file: Path) -> SpecError:
    return SpecError.at(src.path_loc(file), f"data.path: no such file: {file}",
                        "paths are relative to the folder of the spec that names them")  # fmt: skip


def _read_bytes(src: _Source, file: Path) -> bytes:
    try:
        return file.read_bytes()
    except FileNotFoundError:
        raise _missing(src, file) from None
    except OSError as e:
        raise SpecError.at(src.path_loc(file), f"data.path: cannot read {file}: {e.strerror}") from None


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
    if src.data["corpus"] is not None:
        return load_text(src.data["corpus"]), f"{src.data['corpus']} (bundled)"
    file = src.file()
    text = _decode(_read_bytes(src, file), file)
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
        problems.append(Problem(f"the character '{chr(code)}' (U+{code:04X}) is outside the model's {vocab} "
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
    vs = src.data["valid_split"]
    cut = len(codes) - (round(len(codes) * vs) if vs > 0 else 0)
    (x_train, y_train), (x_valid, y_valid) = _windows(codes[:cut], context), _windows(codes[cut:], context)
    ds = Dataset(x_train, y_train, x_valid, y_valid, "language", vocab)
    what = f"the {len(codes)} characters of {file} with context {context} and valid_split {vs}"
    _check_enough(src, ds, src.near("context"), what)
    return ds


# *** csv ***


def _csv_rows(text: str, file: Path) -> list[tuple[int, list[str]]]:
    """(line, cells) of every row with a value in it; a row's line is where it starts."""
    reader, rows, line = csv.reader(io.StringIO(text, newline="")), [], 1
    try:
        for cells in reader:
            if any(c.strip() for c in cells):
                rows.append((line, cells))
            line = reader.line_num + 1
    except csv.Error as e:
        raise SpecError.at(Location(str(file), line, 1), f"{file.name}: this row cannot be read as CSV ({e})") from None
    return rows


def _column_hint(name: str, header: list[str]) -> str:
    parts = [did_you_mean(name, header) or ""]
    if len(header) == 1 and any(sep in header[0] for sep in ";\t"):
        parts.append("the file seems to separate values with ';' or tabs: specgrad reads commas.")
    elif header and all(_is_number(h) for h in header):
        parts.append("the first row holds numbers: it must be a header row naming the columns.")
    parts.append(f"the header has: {', '.join(header)}")
    return " ".join(p for p in parts if p)


def _is_number(s: str) -> bool:
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
    problems = [Problem(f"data.{key} names the column '{name}', but {file.name} has no such column", hloc,
                        _column_hint(name, header))
                for key, names in (("features", features), ("target", [target])) for name in names
                if name not in header]  # fmt: skip
    for name in [*features, target]:
        at = [i for i, h in enumerate(header) if h == name]
        if len(at) > 1:
            problems.append(Problem(f"the header names the column '{name}' {len(at)} times (columns "
                                    f"{', '.join(str(i + 1) for i in at)})", Location(str(file), line, at[1] + 1),
                                    "give each column its own name"))  # fmt: skip
        if name == "" and at:
            problems.append(Problem(f"column {at[0] + 1} has no name in the header",
                                    Location(str(file), line, at[0] + 1),
                                    "name it, or list the columns to use in data.features"))  # fmt: skip
    if problems:
        raise SpecError(problems)
    return features, [header.index(n) for n in [*features, target]]


def _cell(text: str, line: int, col: int, name: str, file: Path) -> tuple[float, Problem | None]:
    """The number in one cell, or the problem with it."""
    s, loc = text.strip(), Location(str(file), line, col + 1)
    if not s:
        return 0.0, Problem(f"row {line}, column '{name}' is empty", loc, "fill in a number, or remove the row")
    try:
        v = float(s)
    except ValueError:
        return 0.0, Problem(f"row {line}, column '{name}': '{s}' is not a number", loc,
                            "write a plain number such as 1200 or 3.5: a point for decimals, no units, no thousands "
                            "separators")  # fmt: skip
    if not math.isfinite(v):
        return 0.0, Problem(f"row {line}, column '{name}': '{s}' is not a finite number", loc,
                            "missing or infinite values cannot be learned from: fill in a number, or remove the "
                            "row")  # fmt: skip
    return v, None


def _csv_values(rows: list[tuple[int, list[str]]], header: list[str], cols: list[int], file: Path) -> np.ndarray:
    """(N, len(cols)) numbers of the used columns; every ragged row and bad cell reported (up to MAX_PROBLEMS)."""
    out, problems = np.zeros((len(rows), len(cols))), []
    for i, (line, cells) in enumerate(rows):
        if len(cells) != len(header):
            problems.append(Problem(f"row {line} has {len(cells)} cells, but the header has {len(header)} columns",
                                    Location(str(file), line, min(len(cells), len(header)) + 1),
                                    "check for a missing or extra comma; a value with a comma in it goes in "
                                    "quotes"))  # fmt: skip
            continue
        for j, c in enumerate(cols):
            out[i, j], problem = _cell(cells[c], line, c, header[c], file)
            problems += [problem] if problem else []
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], Problem(f"... and {more} more problem{'s' * (more > 1)} in {file}")]
    if problems:
        raise SpecError(problems)
    return out


def _load_csv(src: _Source) -> Dataset:
    file = src.file()
    rows = _csv_rows(_decode(_read_bytes(src, file), file), file)
    if not rows:
        raise SpecError.at(Location(str(file), 1, 1), f"{file.name} is empty: a CSV file needs a header row naming "
                           "the columns, then one row per example")  # fmt: skip
    (hline, header), rows = (rows[0][0], [h.strip() for h in rows[0][1]]), rows[1:]
    features, cols = _csv_columns(src, header, hline, file)
    n = len(features)
    _check_shape(src, (n,), f"data.features gives {n} columns ({', '.join(features)}), shape [{n}] per example")
    if not rows:
        raise SpecError.at(Location(str(file), hline + 1, 1), f"{file.name} has a header but no rows of data")
    values = _csv_values(rows, header, cols, file)
    x, y = values[:, :-1].astype(np.float32), values[:, -1:].astype(np.float32)  # (N, F), (N, 1)
    what = f"the {len(rows)} data rows of {file.name} with valid_split {src.data['valid_split']}"
    return _split(src, x, y, "regress", None, Location(str(file), rows[-1][0], 1), what)


# *** npz ***


def _npz_arrays(src: _Source, file: Path) -> dict[str, np.ndarray]:
    raw = _read_bytes(src, file)
    try:
        if raw.startswith(b"\x93NUMPY"):  # NOTE: a single .npy file holds the inputs, 'x'
            return {"x": np.load(io.BytesIO(raw), allow_pickle=False)}
        if raw[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):  # NOTE: a .npz is a zip archive of .npy files
            raise ValueError("np.save or np.savez did not write it")
        with np.load(io.BytesIO(raw), allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        why = "it holds Python objects, which are never loaded" if "pickle" in str(e) else str(e)
        raise SpecError.at(src.path_loc(file), f"{file.name} cannot be read as a .npz file ({why})",
                           "save the arrays with numpy: np.savez(path, x=inputs, y=targets)") from None  # fmt: skip


def _npz_get(src: _Source, arrays: dict[str, np.ndarray], key: str, file: Path, loc: Location) -> np.ndarray:
    if key not in arrays:
        held = f"it holds: {', '.join(arrays) or 'nothing'}"
        hint = f"{dym} {held}" if (dym := did_you_mean(key, list(arrays))) else held
        raise SpecError.at(loc, f"{file.name} has no array named '{key}'", hint)
    a = arrays[key]
    if a.dtype.kind not in "biuf" or a.ndim == 0 or len(a) == 0:
        raise SpecError.at(loc, f"the array '{key}' of {file.name} must hold numbers per example, got {a.dtype} "
                           f"of shape {list(a.shape)}")  # fmt: skip
    bad = np.nonzero(~np.isfinite(a.reshape(len(a), -1)).all(axis=1))[0] if a.dtype.kind == "f" else []
    if len(bad):
        raise SpecError.at(loc, f"{key}[{bad[0]}] in {file.name} holds NaN or infinity ({len(bad)} of {len(a)} "
                           "examples do)", "fill in or remove those examples")  # fmt: skip
    return a


def _npz_target(y: np.ndarray, key: str, file: Path, loc: Location) -> tuple[np.ndarray, str, int | None]:
    """(y, task, num_classes): integer arrays are class labels, float arrays regression targets."""
    if y.dtype.kind == "f":
        return (y.reshape(-1, 1) if y.ndim == 1 else y).astype(np.float32), "regress", None
    if y.min() < 0:
        i = int(np.argmin(y.reshape(len(y), -1).min(axis=1)))
        raise SpecError.at(loc, f"{key}[{i}] in {file.name} is {int(y.min())}: class labels are 0 or more",
                           "number the classes 0, 1, 2, ...")  # fmt: skip
    return y.astype(np.int32), "classify", int(y.max()) + 1


def _load_npz(src: _Source) -> Dataset:
    file = src.file()
    arrays, loc = _npz_arrays(src, file), src.path_loc(file)
    x = _npz_get(src, arrays, "x", file, loc)
    _check_shape(src, x.shape[1:], f"'x' in {file.name} holds examples of shape {list(x.shape[1:])}")
    if src.dtype.startswith(("int", "uint", "bool")) and not np.array_equal(x.astype(src.dtype), x):
        raise SpecError.at(src.input_loc("dtype") or loc, f"'x' in {file.name} holds values that {src.dtype} cannot "
                           "hold exactly", "use dtype float32")  # fmt: skip
    x = x.astype(np.float32) if src.dtype.startswith("float") else x
    what = f"the {len(x)} examples of {file.name} with valid_split {src.data['valid_split']}"
    if src.data["target"] == "input":
        return _split(src, x, x.astype(np.float32), "regress", None, loc, what)
    key = src.data["target"] or "y"
    yloc = (src.near("target") or loc) if src.data["target"] else loc
    if key.endswith(".npy"):  # NOTE: x in a .npy file, y in another beside it
        arrays = {key: _npz_arrays(src, file.parent / key)["x"]}
    y = _npz_get(src, arrays, key, file, yloc)
    if len(y) != len(x):
        raise SpecError.at(yloc, f"'{key}' in {file.name} has {len(y)} examples but 'x' has {len(x)}",
                           "save one target per example")  # fmt: skip
    y, task, num_classes = _npz_target(y, key, file, yloc)
    return _split(src, x, y, task, num_classes, loc, what)


LOADERS: dict[str, Callable[[_Source], Dataset]] = {
    "digits": _load_digits, "text": _load_text, "csv": _load_csv, "npz": _load_npz, "spirals": _load_spirals,
    "sine": _load_sine}  # fmt: skip


# *** batches ***


def batches(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool,
            rng: np.random.Generator | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """Full training batches, in a new order from `rng` each call when shuffle; the last partial batch is dropped."""
    # NOTE: full batches only, so a TinyJit-captured training step sees one shape on every replay
    if shuffle and rng is None:
        raise ValueError("batches(shuffle=True) needs an np.random.Generator")
    order = rng.permutation(len(x)) if shuffle else None
    for i in range(0, len(x) - batch_size + 1, batch_size):
        if order is None:
            yield x[i : i + batch_size], y[i : i + batch_size]
        else:
            yield x[order[i : i + batch_size]], y[order[i : i + batch_size]]


def eval_batches(x: np.ndarray, y: np.ndarray, batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every example in order, in batches of batch_size; the last batch may be smaller."""
    for i in range(0, len(x), batch_size):
        yield x[i : i + batch_size], y[i : i + batch_size]
