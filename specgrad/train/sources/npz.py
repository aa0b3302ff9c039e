"""The npz source: arrays in a .npz (or .npy) file, x and y, or one array per input and per output of a model with
several (by their names, read into structured arrays by _load_named).

A .npz's zip directory and each .npy header are checked before any array is read (array count, sizes, dtypes: never a
pickle), and only the arrays used are read. Imports numpy, flags, modelspec (auto, errors, files, schema, validate) and
sources.base and .split.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.flags import MAX_FILE_MB
from specgrad.modelspec.auto import DataWidths
from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.files import MIB, SIZE_HINT, open_data
from specgrad.modelspec.schema import did_you_mean
from specgrad.modelspec.validate import REGRESSION_LOSSES, is_float
from specgrad.train.sources.base import (
    EXACT_FLOAT32,
    FLOAT32_MAX,
    MAX_CLASSES,
    Dataset,
    Head,
    SourceDef,
    _check_shape,
    _count,
    _raise_all,
    _Source,
    _statistics,
    standardize,
)
from specgrad.train.sources.split import _check_contract, _check_enough, _indices, _split, _Target, _test_count

MAX_NPZ_ARRAYS = 256  # NOTE: arrays in a .npz, counted from its zip directory before it is parsed
MAX_ZIP_DIRECTORY = 1 << 20  # NOTE: bytes of a .npz's zip directory (a few hundred arrays need a few KiB)
MAX_NPY_HEADER = 10_000  # NOTE: bytes of a .npy header, numpy's own limit; np.save writes about 128


def _records(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Equal-length arrays as one structured array, a field per name (example i of every array is row i)."""
    out = np.empty(len(next(iter(arrays.values()))), np.dtype([(k, a.dtype, a.shape[1:]) for k, a in arrays.items()]))
    for k, a in arrays.items():
        out[k] = a
    return out


def _npz_widths(src: _Source) -> DataWidths:
    """x's shape per example, and the output's width: one per class of integer labels (0 to the largest), the values
    per example of float targets (or of x, for target: input), or 1 (binary_cross_entropy's one logit)."""
    file, key = src.file(), src.data["target"] or "y"
    loc = src.path_loc(file)
    names, arrays = _npz_arrays(src, file, src.value, loc, ("x",) if key == "input" or key.endswith(".npy") else
                                ("x", key))  # fmt: skip
    x = _npz_get(src, names, arrays, "x", file, loc)
    shape = tuple(x.shape[1:])
    why = {"shape": f"examples of shape {list(shape)} in 'x' of {file.name}"}
    if not shape:
        raise SpecError.at(src.input_loc(), f"'x' in {file.name} holds one number per example (shape "
                           f"{list(x.shape)}): the input needs an axis", "save x with shape (N, 1)")  # fmt: skip
    if key == "input":
        return DataWidths(shape, math.prod(shape), {}, {**why, "out": "the input itself"})
    if src.loss == "binary_cross_entropy":
        return DataWidths(shape, 1, {}, {**why, "out": "binary_cross_entropy: one logit"})
    yloc = (src.near("target") or loc) if src.data["target"] else loc
    if key.endswith(".npy"):
        y = _npz_arrays(src, file.parent / key, key, yloc, ("x",))[1]["x"]
    else:
        y = _npz_get(src, names, arrays, key, file, yloc)
    if (src.data["task"] or ("regress" if y.dtype.kind == "f" else "classify")) == "regress":
        per = math.prod(y.shape[1:])
        return DataWidths(shape, per, {}, {**why, "out": f"{_count(per, 'value')} per target in '{key}'"})
    fits = len(y) and np.all(y == np.round(y)) and 0 <= y.min() and y.max() < MAX_CLASSES
    top = int(y.max()) if fits else 0  # NOTE: labels that cannot be classes are load_data's to report
    return DataWidths(shape, top + 1, {}, {**why, "out": f"labels 0 to {top} in '{key}'"})


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
    try:
        x, found = _npz_input(src, names, arrays, "x", file, loc), []
    except SpecError as e:  # NOTE: x's shape or values do not fit the input: the targets are still checked
        x, found = _npz_get(src, names, arrays, "x", file, loc).astype(np.float32), e.problems
    what = f"the {len(x)} examples of {file.name} with valid_split {src.data['valid_split']}"
    if src.data["target"] == "input":
        return _split(src, x, x.astype(np.float32), _Target("regress", f"'x' in {file.name}"), loc, what, found)
    yloc = (src.near("target") or loc) if src.data["target"] else loc
    if key.endswith(".npy"):  # NOTE: x in a .npy file, y in another beside it
        names, arrays = [key], {key: _npz_arrays(src, file.parent / key, key, yloc, ("x",))[1]["x"]}
    try:
        y = _npz_get(src, names, arrays, key, file, yloc)
        if len(y) != len(x):
            raise SpecError.at(yloc, f"'{key}' in {file.name} has {len(y)} examples but 'x' has {len(x)}",
                               "save one target per example")  # fmt: skip
        y, target = _npz_target(src, y, key, file, yloc)
    except SpecError as e:
        _raise_all(found + e.problems, src.spec.path)
    return _split(src, x, y, target, loc, what, found)


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


def _npz_auto(src: _Source, shape: bool) -> DataWidths:
    """SourceDef.widths: an npz's x gives the input's shape whether or not input.shape is auto."""
    return _npz_widths(src)


DEFS = (SourceDef("npz", _load_npz, ("path", "test_path", "task", "split_seed", "class_names"), widths=_npz_auto),)
