"""A run folder: what `specgrad train` writes and what run, export and --resume read back.

    runs/<name>-<n>/spec.resolved.yaml    the spec as trained (extends, vars, --set, --epochs/--steps applied)
                    metrics.jsonl         one JSON record per line, in step order
                    metrics.csv           the same records as a table (for spreadsheets), rewritten each epoch
                    metrics.png           loss (and accuracy) per epoch, with the plot extra
                    evaluation-validation.json (.png)   what `specgrad evaluate` reported, when it was run
                    checkpoints/          epoch-NNNNN, best, interrupted: model, optimizer and position
                    model.safetensors     the final weights (the best or the last, as train.final_weights says)

Every file is read and written through train.folder_io (or helpers' atomic_write and append_file, for a file directly
in the folder): only regular files inside the run folder, never through a link, never waited on, read up to a cap.
The run folder itself is the one the user named; a link, FIFO, device or folder where one of these files belongs is
refused by name. Imports nn.state, train.data, train.folder_io, train.plots and modelspec (errors, files, validate);
never Tensor graphs.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import functools
import hashlib
import io
import json
import math
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from specgrad.helpers import WriteError, append_file, atomic_write, kind_of
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.files import SIZE_HINT
from specgrad.modelspec.schema import Section
from specgrad.modelspec.validate import MAX_NAME, MAX_NAME_BYTES, TOP, ValidSpec, validate_file
from specgrad.modelspec.weights import given_init, init_file
from specgrad.nn.state import ChecksumMismatch, FileTooLarge, SafetensorsError, safe_load_metadata
from specgrad.train.data import Dataset, data_file, is_random_split_run
from specgrad.train.folder_io import LOG_CAP, REMOVE_HINT, files_in, json_lines, read_in, regular_file
from specgrad.train.plots import plottable

RESOLVED = "spec.resolved.yaml"
METRICS = "metrics.jsonl"
FINAL = "model.safetensors"
RUN_FILES = (RESOLVED, METRICS, "metrics.csv", "metrics.png", FINAL)  # NOTE: and the exports, model.<format>,
# and what `specgrad evaluate` writes, evaluation-<split>.*
LOCK = ".lock"
CHECKPOINTS = "checkpoints"
PATH_KEYS = ("path", "test_path")  # NOTE: data keys naming a file, rewritten relative to the folder of the spec file


def spec_hash(values: dict[str, Any]) -> str:
    """A short hash of everything a spec says, except where its files lie (a resolved copy in a run folder names the
    same data and init: files by other relative paths). Values equal to their defaults are left out, so a specgrad
    that adds a key with a default keeps the hashes of existing runs."""
    values = _as_written(values, TOP)
    if isinstance(data := values.get("data"), dict):
        values = {**values, "data": {k: v for k, v in data.items() if k not in PATH_KEYS}}
    if isinstance(init := values.get("init"), dict):
        values = {**values, "init": {k: v for k, v in init.items() if k != "from"}}
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


def is_run_folder(path: Path) -> bool:
    """A folder holding spec.resolved.yaml (whatever that is: reading it refuses a FIFO or a device by name)."""
    return path.is_dir() and os.path.lexists(path / RESOLVED)


def spec_file(path: Path) -> Path:
    """A spec file, or the resolved spec of a run folder given in its place."""
    if path.is_dir():
        if not is_run_folder(path):
            raise SpecError.at(None, f"{path} is a folder but not a run folder (it has no {RESOLVED})",
                               "pass a spec file, or a folder `specgrad train` wrote")  # fmt: skip
        return resolved_spec_file(path)
    return path


def resolved_spec_file(folder: Path) -> Path:
    """folder/spec.resolved.yaml, when it is a regular file of the folder: a link there (to a credentials file, say)
    is refused before the spec loader reads it, so no error quotes a line of what it leads to."""
    path = regular_file(folder, RESOLVED)
    if path is None:
        raise SpecError.at(None, f"{folder} is not a run folder: it has no {RESOLVED}",
                           "pass a folder that `specgrad train` wrote")  # fmt: skip
    return path


def final_weights(path: Path) -> Path:
    """The weights a run folder's model.safetensors holds, or an error saying how the run ended without them."""
    weights = regular_file(path, FINAL)  # NOTE: a link there is refused, never followed out of the folder
    if weights is not None:
        return weights
    ckpts = checkpoints(path)
    hint = f"pass one of its checkpoints with --weights, e.g. {ckpts[-1]}" if ckpts else "train it to the end first"
    raise SpecError.at(None, f"the run folder {path} has no {FINAL} (the run has not finished)", hint)


def check_name(name: str) -> None:
    """A spec's name becomes a folder name: one plain path component (validation says so with the line; this is the
    second line of defence, for names that did not come through it)."""
    bad = [c for c in name if not (c.isalnum() or c in "-_.")]
    too_long = len(name) > MAX_NAME or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
    if not name or too_long or bad or name[0] in ".-":
        shown = repr(name[:MAX_NAME]) + ("..." if len(name) > MAX_NAME else "")
        raise SpecError.at(None, f"the name {shown} cannot name a run folder", f"use 1 to {MAX_NAME} letters, digits, "
                           f"'-', '_' and '.' (at most {MAX_NAME_BYTES} bytes in UTF-8), starting with a letter, "
                           "digit or '_'")  # fmt: skip


def new_run_folder(out: Path, name: str, tag: str = "") -> Path:
    """out/<name><tag>-<n>, the first n not taken; always a new folder directly inside `out`. `name` is the spec's (the
    rule checked); `tag` is specgrad's own ("-sweep"), which the name's byte limit leaves room for."""
    check_name(name)
    if "\0" in str(out):
        raise SpecError.at(None, "--out holds a NUL byte", "pass a folder for the run folders")
    if out.exists() and not out.is_dir():
        raise SpecError.at(None, f"--out {out} is a file, not a folder", "pass a folder for the run folders")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise SpecError.at(None, f"--out {out}: cannot create a run folder there (a part of it is a file, not a "
                           "folder)", "pass a folder for the run folders") from None  # fmt: skip
    except OSError as e:
        raise WriteError(out, f"cannot create a run folder there ({e.strerror or e})", e.errno) from None
    root, n = out.resolve(), 1
    while True:
        folder = out / f"{name}{tag}-{n}"
        try:
            folder.mkdir()  # NOTE: mkdir, not exists(): two runs started at once get different folders
        except FileExistsError:
            n += 1
            continue
        except OSError as e:
            raise WriteError(folder, f"cannot create the run folder ({e.strerror or e})", e.errno) from None
        if folder.resolve().parent != root:  # NOTE: check_name makes this impossible; kept as the promise itself
            folder.rmdir()
            raise SpecError.at(None, f"the run folder {folder} would not be inside --out {out}")
        return folder


def new_folder(folder: Path) -> Path:
    """`folder` itself as a new run folder (a sweep names its trials); one that exists is refused, never reused."""
    try:
        folder.mkdir()
    except FileExistsError:
        raise SpecError.at(None, f"{folder} exists already", "a run starts in a folder of its own") from None
    except OSError as e:
        raise WriteError(folder, f"cannot create the run folder ({e.strerror or e})", e.errno) from None
    return folder


def checkpoint_folder(folder: Path) -> Path:
    """The run folder's checkpoints/, created if missing; a link or a file in its place is refused (checkpoints are
    written inside the run folder, nowhere else)."""
    path = folder / CHECKPOINTS
    try:
        path.mkdir()
    except FileExistsError:
        mode = path.lstat().st_mode
        if not stat.S_ISDIR(mode):
            what = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
            raise SpecError.at(None, f"{path} is {what}: checkpoints are written only into a folder inside the run "
                               "folder", f"remove {path}, then run again") from None  # fmt: skip
    except OSError as e:
        raise WriteError(path, f"cannot create the folder ({e.strerror or e})", e.errno) from None
    return path


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold the run folder for one training process: a second `train --resume` of it is refused, not interleaved."""
    path = folder / LOCK
    with contextlib.suppress(FileNotFoundError):
        if (what := kind_of(os.lstat(path).st_mode)) is not None:  # NOTE: a folder, device or FIFO: never opened
            raise SpecError.at(None, f"{path} is {what}, not a regular file", REMOVE_HINT)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EISDIR):  # NOTE: put there since it was looked at
            raise SpecError.at(None, f"{path} is not a regular file", REMOVE_HINT) from None
        raise WriteError(path, f"cannot lock the run folder ({e.strerror or e})", e.errno) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpecError.at(None, f"{path} is not a regular file", REMOVE_HINT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            hint = "wait for it to finish, or stop it (Ctrl-C saves its state) and resume then"
            raise SpecError.at(None, f"{folder} is in use by another specgrad process", hint) from None
        yield
    finally:
        os.close(fd)


def _as_written(values: dict[str, Any], section: Section) -> dict[str, Any]:
    """A section's values less those equal to their defaults (validation fills them in again): the file reads as a
    spec someone wrote, and keys that apply to other choices (data.samples for a file source) stay out."""
    ret = {}
    for key, value in values.items():
        f = section.fields.get(key)
        if f is not None and f.section is not None and isinstance(value, dict):
            value = _as_written(value, f.section)
        empty = value is None or (value == {} and f is not None and f.section is not None)
        if not empty and (f is None or value != f.default):
            ret[key] = value
    return ret


def write_resolved_spec(spec: ValidSpec, folder: Path) -> None:
    """The spec as it will be trained, in the run folder (resolved_spec_text)."""
    head = f"# the spec of this run as trained (spec_hash {spec_hash(spec.values)}); written by specgrad train\n"
    atomic_write(folder / RESOLVED, (head + resolved_spec_text(spec, folder)).encode())


def resolved_spec_text(spec: ValidSpec, folder: Path) -> str:
    """The spec as it will be trained, as a spec file saved in `folder`: extends, vars and --set applied, defaults left
    out. It validates, trains, runs and exports by itself and has the same spec_hash. A data file and an init: file
    are named relative to `folder`."""
    values = {k: v for k, v in spec.values.items() if k != "extends"}
    data = values.get("data")
    if isinstance(data, dict):
        values["data"] = {**data, **{k: _relative(data_file(spec, k), folder) for k in PATH_KEYS if data.get(k)}}
    if (init := given_init(spec.node("init"))) is not None:
        values["init"] = {**values["init"], "from": _relative(Path(init_file(init, spec.path)), folder)}
    written = _as_written(values, TOP)
    if isinstance(written.get("data"), dict) and not is_random_split_run(spec):
        # NOTE: written even at its default: a run folder without it was split at random (data.is_stratified)
        written["data"] = {**written["data"], "stratify": bool(data["stratify"])}
    return yaml.safe_dump(written, sort_keys=False, allow_unicode=True)


def _relative(target: Path, folder: Path) -> str:
    """A file named in the spec, as seen from the run folder."""
    return os.path.relpath(target.resolve(), folder.resolve())


def read_resolved_spec(folder: Path, init_file: bool = False) -> ValidSpec:
    """The spec of a run to resume: its init: file is read only with `init_file` (a run stopped before its first
    checkpoint starts over from it; otherwise the checkpoint holds the weights)."""
    if not folder.is_dir():
        raise SpecError.at(None, f"no such run folder: {folder}", "pass a folder `specgrad train` wrote, e.g. "
                           "runs/<name>-1")  # fmt: skip
    check_run_folder(folder)
    return validate_file(resolved_spec_file(folder), init_file=init_file)


def check_run_folder(folder: Path) -> None:
    """Refuse, before anything is read or written, a run folder holding what specgrad never writes where its own files
    belong: a link, FIFO, device or folder in place of one of RUN_FILES, the lock or a checkpoint, or anything but a
    folder in place of checkpoints/."""
    for name in (*RUN_FILES, LOCK):
        regular_file(folder, name)
    checkpoints(folder)


def cleanup_partial_files(folder: Path) -> None:
    """Temporary files a crash left behind while writing (complete files are renamed into place): atomic_write's
    '.<name>.<random>' beside the run folder's own files, and nothing else."""
    own = [*RUN_FILES, *(p.name for p in [*folder.glob("model.*"), *folder.glob("evaluation-*")])]
    temps = [t for name in own for t in folder.glob(f".{name}.*")]
    for tmp in temps + list((folder / CHECKPOINTS).glob(".*.safetensors.*")):
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISREG(tmp.lstat().st_mode):  # NOTE: a folder or link of that name is not one of ours
                tmp.unlink()


def data_layout(d: Dataset) -> tuple[str | None, list[str] | None]:
    """What the first and last layers' weights are laid out by: a csv's columns (Columns.to_meta's text) and a
    classifier's class names in order; None where the data has none. Written to the weights' metadata, and compared
    with a warm start's (init.from) before it loads."""
    names = list(d.class_names or [str(k) for k in range(d.num_classes or 0)]) if d.task == "classify" else None
    return (d.columns.to_meta() if d.columns is not None else None), names


# *** metrics ***


@dataclass
class MetricsLog:
    """metrics.jsonl: records in step order, appended and flushed one by one."""

    folder: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    # NOTE: metrics.csv's rows rendered so far: (the records list they come from, its columns, how many records, the
    # text); written after every epoch, the file would otherwise be rendered whole each time, quadratic in the run
    _csv: tuple[list[dict[str, Any]], list[str], int, list[str]] | None = field(default=None, repr=False)

    @property
    def path(self) -> Path:
        return self.folder / METRICS

    def log(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        append_file(self.path, (json.dumps(record) + "\n").encode())  # NOTE: never through a link, never into a FIFO

    def write_csv(self) -> None:
        """metrics.csv: one row per record, a column per field in the order fields first appear (split, epoch, step,
        then the metrics); a field a record lacks is an empty cell."""
        self.csv_write()()

    def csv_write(self) -> Callable[[], None]:
        """write_csv of the records logged so far, as a write that may run later (on the epoch writer's thread)."""
        source, columns, done, rows = self._csv or (self.records, [], 0, [])
        if source is not self.records or done > len(self.records):  # NOTE: rewound: a new list of records
            columns, done, rows = [], 0, []
        new = self.records[done:]
        grown = list(dict.fromkeys([*columns, *(key for record in new for key in record)]))
        if grown != columns:  # NOTE: a new field gives every row a cell: all rows again
            columns, new, rows = grown, self.records, []
        rows.append(_csv_text(columns, new))
        self._csv = (self.records, columns, len(self.records), rows)
        data = (_csv_text(columns, [], header=True) + "".join(rows)).encode()
        return functools.partial(atomic_write, self.folder / "metrics.csv", data)

    def rewind(self, step: int, epoch: int) -> None:
        """Keep what was logged up to a checkpoint (step, epochs finished): a resumed run logs the rest again, so
        nothing is recorded twice. A line cut short by a crash is dropped, and so is a second record of a split at the
        same step (train) or epoch (the others): a log specgrad wrote has none, so what is kept stays bounded by the
        run's length whatever the file holds."""
        kept, seen = [], set()
        for _, record in json_lines(read_in(self.folder, METRICS, LOG_CAP, missing_ok=True) or b""):
            if not is_record(record):
                continue  # NOTE: dropped as a damaged line is: the records kept are printed and plotted later
            at = (record["split"], record["step"] if record["split"] in ("train", "extend") else record["epoch"])
            if at not in seen and record["step"] <= step and (record["split"] == "train" or record["epoch"] <= epoch):
                seen.add(at)
                kept.append(record)
        atomic_write(self.path, "".join(json.dumps(r) + "\n" for r in kept).encode())
        self.records = kept


def extensions(folder: Path) -> list[dict[str, Any]]:
    """The `extend` records of metrics.jsonl, in order: each time `train --resume --epochs/--steps` changed the run's
    length (see log_extension)."""
    log = read_in(folder, METRICS, LOG_CAP, missing_ok=True) or b""
    return [r for _, r in json_lines(log) if is_record(r) and r["split"] == "extend"]


def log_extension(folder: Path, record: dict[str, Any]) -> None:
    """metrics.jsonl with `record` (split extend) appended and early stopping's stop records dropped (the run goes on),
    in one atomic write: a crash leaves the log as it was, or with both changes. A second change at the same step
    (nothing trained since the first) replaces the first, keeping the length before it: the checkpoints are of that one.
    """
    kept = [r for _, r in json_lines(read_in(folder, METRICS, LOG_CAP, missing_ok=True) or b"")
            if is_record(r) and r["split"] != "stop"]  # fmt: skip
    same = [r for r in kept if r["split"] == "extend" and r["step"] == record["step"]]
    if same:
        record = {**record, **{k: same[0][k] for k in ("epochs_before", "steps_before", "total_steps_before")}}
        kept = [r for r in kept if r not in same]
    atomic_write(folder / METRICS, "".join(json.dumps(r) + "\n" for r in [*kept, record]).encode())


def _csv_text(columns: list[str], records: list[dict[str, Any]], header: bool = False) -> str:
    """CSV rows of `records` under `columns` (a field a record lacks is an empty cell), or the header row alone."""
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    if header:
        writer.writeheader()
    writer.writerows(records)
    return out.getvalue()


SPLITS = ("train", "train_epoch", "valid", "stop", "extend")  # NOTE: the records the trainer (and --resume) logs
# NOTE: an extend record's lengths before and after (train.epochs, train.steps or 0, and the steps they make)
EXTEND_COUNTS = ("epochs_before", "steps_before", "total_steps_before", "epochs", "steps", "total_steps")
MAX_REASON = 1000  # NOTE: characters of a stop record's reason; specgrad's own are about 100


def is_record(record: Any) -> bool:
    """A metrics record as the trainer logs them: one of SPLITS, its epoch and step as counts, every other value a
    number within float32's range or not finite (a loss that blew up), a stop's reason a line of text."""
    if not isinstance(record, dict) or record.get("split") not in SPLITS:
        return False
    if not all(is_count(record.get(k)) for k in ("epoch", "step")):
        return False
    if record["split"] == "extend" and not all(is_count(record.get(k)) for k in EXTEND_COUNTS):
        return False
    for k, v in record.items():
        if k == "reason" and record["split"] == "stop":
            if not isinstance(v, str) or len(v) > MAX_REASON:
                return False
        elif k not in ("split", "epoch", "step") and not (plottable(v) or _is_blown_up(v)):
            return False
    return True


def is_count(v: Any) -> bool:
    """An epoch or step count as specgrad writes one: an int, never a bool, far below 2^62."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 62


def _is_blown_up(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)  # NOTE: a validation loss can be NaN or infinite


# *** checkpoints ***


def checkpoints(folder: Path) -> list[Path]:
    """The run's checkpoint files, sorted by name; a link, FIFO or folder among them (or in checkpoints/' place) is
    refused by name, never followed or opened."""
    return [folder / CHECKPOINTS / name for name in files_in(folder, CHECKPOINTS, ".safetensors")]


def newest_checkpoint(folder: Path) -> tuple[Path, dict[str, str]] | None:
    """The checkpoint furthest into training (an epoch's or the one an interruption wrote), with its metadata."""
    found = [p for p in checkpoints(folder) if p.name != "best.safetensors"]
    if not found:
        return None
    metas, steps = {}, {}
    for p in found:
        try:
            metas[p] = safe_load_metadata(p)
        except (OSError, SafetensorsError) as e:
            raise SpecError.at(None, f"the checkpoint {p} is damaged ({e})",
                               "delete it to resume from the one before") from None  # fmt: skip
        steps[p] = metas[p].get("step", "0")
        if not (steps[p].isascii() and steps[p].isdigit() and len(steps[p]) <= 18):
            raise SpecError.at(None, f"the checkpoint {p} is damaged (its step '{steps[p][:40]}' is not a count of "
                               "steps)", "delete it to resume from the one before")  # fmt: skip
    path = max(found, key=lambda p: (int(steps[p]), p.name == "interrupted.safetensors"))
    return path, metas[path]


def unusable(e: SafetensorsError, what: str | None, fix: str) -> SpecError:
    """A weights file or checkpoint safe_load refused, in words: too large says how to raise the limit; damaged (a
    checksum differs) or not a safetensors file at all says `fix`. `what` names the file in the message ("the
    checkpoint X"), or None for the refusal's own words."""
    if isinstance(e, FileTooLarge):
        return SpecError.at(None, str(e), SIZE_HINT)
    if isinstance(e, ChecksumMismatch) or what is None:
        return SpecError.at(None, str(e), fix)
    return SpecError.at(None, f"{what} is damaged ({e})", fix)


def prune(folder: Path, keep: int) -> None:
    """Keep the newest `keep` epoch checkpoints; called only after a newer one is on disk."""
    for old in [p for p in checkpoints(folder) if p.name.startswith("epoch-")][:-keep]:
        old.unlink()
