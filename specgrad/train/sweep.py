"""A sweep: one spec trained with several sets of overrides, each trial an ordinary run folder under one sweep folder.

The plan (sweep.json) is written before any trial starts and never changes: the spec (by its path and the SHA-256 of
its bytes), the --set overrides every trial shares, the grid, and each trial's own overrides. `--grid key=v1,v2` lists
values (each parsed as --set parses it; commas inside [...] or {...} do not split); the trials are every combination,
or with `--random N` N of them drawn with `--seed` (a `key=low..high` range is then drawn from: whole numbers
uniformly, positive numbers log-uniformly, others uniformly). A trial's state comes from its folder (model.safetensors:
finished) and from the sweep's record of how each process ended (results.json): so an interrupted sweep resumes with
the trials not finished, and a trial that failed stays a recorded failure.

A sweep folder may come from someone else: every file in it is read and written through folder_io (no link or
special file below it is followed), and sweep.json and results.json are checked field by field against what `specgrad
sweep` writes, so a hand-edited plan cannot name another file as the spec, train nothing or forever, or list more
trials than a sweep may have; a trial's folder counts only when its spec is the one the plan gives it
(check_as_planned), and every text written to results.json and the summaries is escaped for a terminal. Imports
numpy, modelspec and train.compare / folder_io / run_folder; never runs a trial itself (cli/sweep.py does, one process
each).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import itertools
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.device import is_compute_device
from specgrad.modelspec.errors import Location, SpecError, excerpt, label
from specgrad.modelspec.files import open_regular
from specgrad.modelspec.loader import MAX_BYTES, resolve_scalar
from specgrad.modelspec.validate import TRAIN
from specgrad.train.compare import MAX_METRICS, NoMetric, Run, differences, ranked, read_run
from specgrad.train.folder_io import entry_kind, read_json_in, write_in
from specgrad.train.run_folder import FINAL, RESOLVED

PLAN, RESULTS, LOGS = "sweep.json", "results.json", "logs"
TRIAL_NAME = re.compile(r"trial-[0-9]{3,5}")
MAX_TRIALS = 10_000  # NOTE: a grid multiplies out fast; more trials than this is a typo, not a sweep
MAX_SEED = (1 << 32) - 1  # NOTE: as the command line's --seed (and a spec's seed)
MAX_WHOLE = 2**53  # NOTE: the ends of a range of whole numbers: exact as floats, and drawn within int64
MAX_ERROR = 500  # NOTE: characters of a failed trial's error kept in results.json
MAX_TEXT = 1 << 17  # NOTE: characters of one override or grid value (Linux's limit on one command-line argument)
NUMBER = r"[-+]?(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
RANGE = re.compile(rf"^\s*({NUMBER})\s*\.\.\s*({NUMBER})\s*$")  # low..high (a path such as ../x is a value)
ENDS = re.compile(r"^\s*([^/\\]*?)\s*\.\.\s*([^/\\]*?)\s*$")  # NOTE: what was meant as low..high, its ends not numbers
LENGTHS = ("epochs", "steps")  # NOTE: a plan's --epochs or --steps, in the ranges of train.epochs and train.steps
SHA256 = re.compile(r"[0-9a-f]{64}")
GRID_HINT = "write --grid key=value1,value2 (for example --grid train.lr=0.001,0.01), or key=low..high with --random N"
PLAN_HINT = ("sweep.json is written by `specgrad sweep` before the first trial and never changes: restore it, or start "
             "the sweep again in a new folder")  # fmt: skip
RESULTS_HINT = ("results.json records how each trial's process ended: restore it, or remove it (failed trials then "
                "run again; finished ones stay finished)")  # fmt: skip
INTERRUPTED = 130  # NOTE: the exit code of a trial stopped by Ctrl-C (or a sweep stopped while it ran): resumed
BUSY = 75  # NOTE: (EX_TEMPFAIL) a trial whose folder another process holds: not run, and tried again when resumed


@dataclass(frozen=True)
class Trial:
    name: str  # its folder in the sweep folder: trial-001, ...
    overrides: list[str]  # key=value, one per grid key


@dataclass(frozen=True)
class Plan:
    spec: str  # the spec file, absolute
    spec_sha256: str  # its bytes when the sweep was planned: a plan names no other file, and a spec edited since
    overrides: list[str]  # --set: every trial's
    epochs: int | None
    steps: int | None
    device: str | None
    grid: dict[str, list[str]]  # key -> its values (or one "low..high" range) as written
    random: int | None
    seed: int
    trials: list[Trial]

    def write(self, folder: Path) -> None:
        write_in(folder, PLAN, (json.dumps(asdict(self), indent=2) + "\n").encode())

    @staticmethod
    def read(folder: Path) -> Plan:
        """The plan of the sweep folder, every field checked, and its spec checked to be the file it was made with."""
        if not folder.is_dir() or entry_kind(folder, PLAN) == "missing":
            raise SpecError.at(None, f"{folder} is not a sweep folder (it has no {PLAN})",
                               "pass a folder `specgrad sweep` wrote, e.g. runs/<name>-sweep-1")  # fmt: skip
        plan = _plan_of(read_json_in(folder, PLAN), folder / PLAN)
        plan.check_spec()
        return plan

    def check_spec(self) -> None:
        """The spec file is the one the sweep was planned with: its bytes hash as sweep.json says, so a plan edited to
        name another file (a key, a credentials file) is refused before a byte of that file is parsed or shown."""
        if spec_digest(self.spec, f"the spec {PLAN} names") != self.spec_sha256:
            raise SpecError.at(None, f"{self.spec} is not the spec this sweep was planned with (its SHA-256 is not "
                               f"the one {PLAN} records)", "a sweep trains one spec from start to end: restore the "
                               "spec as it was, or start a new sweep")  # fmt: skip


def spec_digest(path: str, key: str) -> str:
    """The SHA-256 of a spec file's bytes, read as the loader reads a spec (a regular file, at most its size limit);
    refusals name the file and what it is, never what it holds."""
    f, size = open_regular(path, None, key, missing_hint="was the spec moved or removed since the sweep started?")
    with f:
        if size > MAX_BYTES:
            raise SpecError.at(None, f"{key}: {path} is {size:,} bytes, more than a spec may be ({MAX_BYTES:,})")
        return hashlib.sha256(f.read(MAX_BYTES + 1)).hexdigest()


# *** sweep.json, checked ***


def _damaged(path: Path, what: str, hint: str = PLAN_HINT) -> SpecError:
    return SpecError.at(None, f"{path} is damaged: {what}", hint)


def _kind(v: Any) -> str:
    """What a JSON value is, in words, never what it says (it may come from anywhere)."""
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return f"{v:,}" if abs(v) < 10**30 else "a number of more than 30 digits"
    if isinstance(v, float):
        return repr(v)  # NOTE: 1.0, not 1: a decimal number where a whole one goes is the mistake to see
    return {str: "a text", list: "a list", dict: "a mapping"}.get(type(v), "another kind of value")


def _whole(doc: dict[str, Any], key: str, low: int, high: int, path: Path, none: bool = True) -> int | None:
    v = doc[key]
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise _damaged(path, f"{key} must be a whole number from {low:,} to {high:,}{' (or null)' * none}, not "
                       f"{_kind(v)}")  # fmt: skip
    return v


def _texts(v: Any, what: str, path: Path, limit: int = MAX_TEXT) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(s, str) and 0 < len(s) <= limit for s in v):
        raise _damaged(path, f"{what} must be a list of texts (of 1 to {limit:,} characters)")
    return v


def _plan_of(doc: Any, path: Path) -> Plan:
    """sweep.json's document as a Plan: every field of the type and range `specgrad sweep` writes, the trials exactly
    those the grid gives; anything else is an error naming the file and the field (never quoting a text from it)."""
    names = [f.name for f in dataclasses.fields(Plan)]
    if not isinstance(doc, dict):
        raise _damaged(path, f"it holds {_kind(doc)}, not the mapping of a sweep's plan")
    if missing := [k for k in names if k not in doc]:
        hint = (f"{PLAN} was written by an older specgrad, before sweeps recorded their spec's SHA-256: start the "
                "sweep again" if missing == ["spec_sha256"] else PLAN_HINT)  # fmt: skip
        raise _damaged(path, f"it has no {missing[0]}", hint)
    if extra := [k for k in doc if k not in names]:
        raise _damaged(path, f"it has the key '{excerpt(extra[0], 40)}', which specgrad does not write")
    spec = doc["spec"]
    if not isinstance(spec, str) or not 0 < len(spec) <= 4096 or "\0" in spec or not os.path.isabs(spec):
        raise _damaged(path, "spec must be the absolute path of a spec file")
    if not isinstance(doc["spec_sha256"], str) or not SHA256.fullmatch(doc["spec_sha256"]):
        raise _damaged(path, "spec_sha256 must be 64 hexadecimal digits")
    epochs, steps = (_whole(doc, k, int(TRAIN.fields[k].min), int(TRAIN.fields[k].max), path) for k in LENGTHS)
    if epochs is not None and steps is not None:
        raise _damaged(path, "it gives both epochs and steps, which a sweep never does")
    if doc["device"] is not None and not (isinstance(doc["device"], str) and is_compute_device(doc["device"])):
        raise _damaged(path, "device must name a device to train on (CPU, CLANG or GPU) or be null")
    grid = _grid_of(doc["grid"], path)
    random = _whole(doc, "random", 1, MAX_TRIALS, path)
    seed = _whole(doc, "seed", 0, MAX_SEED, path, none=False)
    trials = _trials_of(doc["trials"], grid, random, path)
    return Plan(spec, doc["spec_sha256"], _texts(doc["overrides"], "overrides", path), epochs, steps, doc["device"],
                grid, random, seed, trials)  # fmt: skip


def _grid_of(v: Any, path: Path) -> dict[str, list[str]]:
    if not isinstance(v, dict) or not v:
        raise _damaged(path, "grid must be a mapping of keys to their values")
    for key, values in v.items():
        if not key or "=" in key or len(key) > MAX_TEXT:
            raise _damaged(path, "grid has a key that --grid cannot give")
        if len(set(_texts(values, "each grid key's values", path))) != len(values) or not values:
            raise _damaged(path, "grid lists no value, or a value twice, for a key")
    return v


def _trials_of(v: Any, grid: dict[str, list[str]], random: int | None, path: Path) -> list[Trial]:
    """The trials as the grid gives them: all its combinations in order, or `random` different ones drawn from it."""
    if not isinstance(v, list):
        raise _damaged(path, "trials must be a list")
    if len(v) > MAX_TRIALS:
        raise _damaged(path, f"it lists {len(v):,} trials, more than a sweep may have ({MAX_TRIALS:,})")
    total = math.prod(len(values) for values in grid.values())
    if len(v) != (count := total if random is None else random):
        raise _damaged(path, f"it lists {len(v):,} trial{'s' * (len(v) != 1)} where its grid gives {_kind(count)}")
    if not all(isinstance(t, dict) and set(t) == {"name", "overrides"} for t in v):
        raise _damaged(path, "each trial must be a mapping of its name and overrides")
    trials = [Trial(t["name"], t["overrides"]) for t in v]
    keys = list(grid)
    if random is None:
        if trials != [_trial(i, keys, c) for i, c in enumerate(itertools.product(*grid.values()))]:
            raise _damaged(path, "its trials are not the combinations of its grid, in order")
        return trials
    try:
        ranges = _ranges(grid)
    except SpecError:
        raise _damaged(path, "grid holds a range --grid does not accept") from None
    if not ranges and random > total:
        raise _damaged(path, f"random asks for more trials than its grid has ({total:,})")
    for i, t in enumerate(trials):
        if t.name != f"trial-{i + 1:03d}" or not _is_drawn(t.overrides, grid, ranges):
            raise _damaged(path, f"trial {i + 1} is not one its grid could give")
    if len({tuple(t.overrides) for t in trials}) != len(trials):
        raise _damaged(path, "it lists a trial twice")
    return trials


def _is_drawn(overrides: Any, grid: dict[str, list[str]], ranges: dict[str, tuple[float, float, bool]]) -> bool:
    """Whether `overrides` is a draw from the grid: key=value for each key in order, a listed value or one in range."""
    if not isinstance(overrides, list) or len(overrides) != len(grid):
        return False
    for text, (key, values) in zip(overrides, grid.items()):
        if not isinstance(text, str) or not text.startswith(f"{key}="):
            return False
        value = text[len(key) + 1 :]
        if not (value in values if key not in ranges else _in_range(value, ranges[key])):
            return False
    return True


def _in_range(value: str, spec: tuple[float, float, bool]) -> bool:
    low, high, whole = spec
    if whole:
        return re.fullmatch(r"-?[0-9]{1,16}", value) is not None and low <= int(value) <= high
    try:
        x = float(value)
    except ValueError:
        return False
    slack = 1e-3 * max(abs(low), abs(high))  # NOTE: a draw is written with 4 significant digits
    return math.isfinite(x) and low - slack <= x <= high + slack


# *** the grid ***


def parse_grid(texts: list[str]) -> dict[str, list[str]]:
    """`key=v1,v2` options as key -> values (text, parsed later as --set parses a value); errors are located in the
    option's text."""
    grid: dict[str, list[str]] = {}
    for text in texts:
        file = f"--grid {excerpt(text, 200)}"
        key, eq, values = text.partition("=")
        if not eq or not key.strip():
            raise SpecError.at(Location(file, 1, 1), "this --grid has no 'key=' before its values", GRID_HINT)
        key = key.strip()
        if key in grid:
            raise SpecError.at(Location(file, 1, 1), f"--grid names {key} twice", "give its values in one --grid")
        items = _split_values(values)
        if not items or any(not v for v in items):
            raise SpecError.at(Location(file, 1, len(key) + 2), f"--grid {key} has an empty value", GRID_HINT)
        if len(items) != len(set(items)):
            raise SpecError.at(Location(file, 1, len(key) + 2), f"--grid {key} lists a value twice", "list each once")
        grid[key] = items
    return grid


def _split_values(text: str) -> list[str]:
    """Comma-separated values; commas inside brackets or quotes belong to the value."""
    out, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return [*out, text[start:].strip()]


def plan_trials(grid: dict[str, list[str]], random: int | None, seed: int) -> list[Trial]:
    """Every combination of the grid's values in order, or `random` of them drawn with `seed` (ranges drawn from).
    The number of trials is known from the grid's factors before any trial is made: a grid too large is refused
    without being built."""
    if not 0 <= seed <= MAX_SEED:
        raise SpecError.at(None, f"--seed must be a whole number from 0 to {MAX_SEED:,}, not {_kind(seed)}")
    ranges = _ranges(grid)
    keys = list(grid)
    total = math.prod(len(v) for v in grid.values())  # NOTE: a Python int: exact at any size
    if random is None:
        if ranges:
            key = next(iter(ranges))
            loc = Location(f"--grid {key}={excerpt(grid[key][0], 200)}", 1, len(key) + 2)
            raise SpecError.at(loc, f"--grid {key} is a range, which only --random N draws from",
                               f"add --random N, or list values: {GRID_HINT}")  # fmt: skip
        _check_count(total)
        return [_trial(i, keys, c) for i, c in enumerate(itertools.product(*grid.values()))]
    _check_count(random)
    rng = np.random.default_rng(seed)
    if not ranges:
        if random > total:
            raise SpecError.at(None, f"--random {random} asks for more trials than the grid has combinations "
                               f"({total:,})", f"use --random {total} or fewer, or leave --random out for all "
                               "of them")  # fmt: skip
        if total <= np.iinfo(np.int64).max:
            picks = rng.choice(total, size=random, replace=False)
            return [_trial(i, keys, _combination(grid, int(p))) for i, p in enumerate(picks)]
    combos: dict[tuple[str, ...], None] = {}
    for _ in range(100 * random):  # NOTE: without repeats; ranges of few whole numbers run out
        combo = tuple(_draw(ranges[k], rng) if k in ranges else grid[k][int(rng.integers(len(grid[k])))] for k in keys)
        combos.setdefault(combo)
        if len(combos) == random:
            return [_trial(i, keys, c) for i, c in enumerate(combos)]
    raise SpecError.at(None, f"--random {random} asks for more different trials than the grid and its ranges give "
                       f"({len(combos)} found)", "ask for fewer, or widen the ranges (a range of whole numbers "
                       "holds only those: write 0.0..1 for fractions)")  # fmt: skip


def _combination(grid: dict[str, list[str]], index: int) -> tuple[str, ...]:
    """The `index`th combination of itertools.product(*grid.values()), without making the ones before it."""
    values = []
    for options in reversed(grid.values()):
        index, i = divmod(index, len(options))
        values.append(options[i])
    return tuple(reversed(values))


def _check_count(n: int) -> None:
    if n > MAX_TRIALS:
        raise SpecError.at(None, f"the sweep would have {_kind(n)} trials, more than {MAX_TRIALS:,}",
                           "use fewer values, or --random N to draw some of them")  # fmt: skip
    if n < 1:
        raise SpecError.at(None, "the sweep has no trials", GRID_HINT)


def _ranges(grid: dict[str, list[str]]) -> dict[str, tuple[float, float, bool]]:
    return {k: _range(k, v[0]) for k, v in grid.items() if len(v) == 1 and _is_range(k, v[0])}


def _is_range(key: str, text: str) -> bool:
    """Whether a key's one value is a `low..high` range; one that looks meant as a range (a number at one end) but
    has an end that is not a number (nan..1, 1..2..3, 1..) is an error naming that end, not a value taken as text."""
    if RANGE.match(text):
        return True
    m = ENDS.match(text)
    if m is None or not any(_is_number(end) for end in m.groups()):
        return False  # NOTE: a text such as ../x or a..b is a value
    which, end = next((w, e) for w, e in zip(("low", "high"), m.groups()) if not re.fullmatch(NUMBER, e))
    said = f"it has no {which} end" if not end else f"its {which} end '{excerpt(end, 40)}' is not a finite number"
    shown = f"--grid {key}={excerpt(text, 100)}"
    raise SpecError.at(Location(shown, 1, len(key) + 2), f"{shown} is not a range: {said}",
                       "write a range as low..high with a finite number at each end (0.001..0.1), with --random N; "
                       "or list values: --grid key=value1,value2")  # fmt: skip


def _is_number(text: str) -> bool:
    """A number as a range's end could be written, or a word YAML reads as one (nan, inf) that no draw can take."""
    return re.fullmatch(NUMBER, text) is not None or text.lower().lstrip("+-.") in ("nan", "inf", "infinity")


def _range(key: str, text: str) -> tuple[float, float, bool]:
    """(low, high, whole numbers) of a `low..high` value: ends a draw can take (whole numbers within +-2^53, other
    numbers finite and less than the largest float apart)."""
    low, high = (resolve_scalar(s) for s in RANGE.match(text).groups())  # NOTE: 1..3 whole numbers, 1.0..3 fractions
    shown = f"--grid {key}={excerpt(text, 100)}"
    loc = Location(shown, 1, len(key) + 2)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        raise SpecError.at(loc, f"{shown} is not a range of numbers", GRID_HINT)
    whole = isinstance(low, int) and isinstance(high, int)
    if whole and not -MAX_WHOLE <= low <= high <= MAX_WHOLE:
        raise SpecError.at(loc, f"{shown}: a range of whole numbers must lie within -{MAX_WHOLE:,}..{MAX_WHOLE:,}",
                           "use smaller numbers, or write the ends as fractions (1e3..1e20) to draw from them "
                           "log-uniformly")  # fmt: skip
    if not whole and not all(abs(v) <= 1e300 for v in (low, high)):
        raise SpecError.at(loc, f"{shown}: the ends of a range must lie within -1e300..1e300", GRID_HINT)
    if not low < high:
        raise SpecError.at(loc, f"{shown}: the low end must be below the high end")
    return float(low), float(high), whole


def _draw(spec: tuple[float, float, bool], rng: np.random.Generator) -> str:
    low, high, whole = spec
    if whole:
        return str(int(rng.integers(int(low), int(high) + 1)))
    if low > 0:
        return f"{math.exp(rng.uniform(math.log(low), math.log(high))):.4g}"
    return f"{rng.uniform(low, high):.4g}"


def _trial(i: int, keys: list[str], values: Any) -> Trial:
    return Trial(f"trial-{i + 1:03d}", [f"{k}={v}" for k, v in zip(keys, values)])


# *** what happened ***


def read_results(folder: Path, plan: Plan) -> dict[str, dict[str, Any]]:
    """How each trial's process ended (trial name -> exit_code, error), as the sweep recorded it; every entry checked
    against what the sweep writes."""
    doc = read_json_in(folder, RESULTS, missing_ok=True)
    if doc is None:
        return {}
    path, names = folder / RESULTS, {t.name for t in plan.trials}
    if not isinstance(doc, dict):
        raise _damaged(path, f"it holds {_kind(doc)}, not a mapping of trials", RESULTS_HINT)
    for name, result in doc.items():
        if name not in names:
            raise _damaged(path, f"'{excerpt(name, 40)}' is not a trial of this sweep", RESULTS_HINT)
        if not isinstance(result, dict) or set(result) != {"exit_code", "error"}:
            raise _damaged(path, f"{name} must be a mapping of exit_code and error", RESULTS_HINT)
        code, error = result["exit_code"], result["error"]
        if isinstance(code, bool) or not isinstance(code, int) or not -64 <= code <= 255:
            raise _damaged(path, f"{name}'s exit_code must be a process's exit code (-64 to 255)", RESULTS_HINT)
        if not isinstance(error, str) or len(error) > MAX_ERROR or (error and not is_failure(code)):
            raise _damaged(path, f"{name}'s error must be a text of at most {MAX_ERROR} characters, empty unless "
                           "the trial failed", RESULTS_HINT)  # fmt: skip
        if not error.isprintable():
            raise _damaged(path, f"{name}'s error holds control or format characters (a terminal's escape sequences, "
                           "bidi overrides), which specgrad escapes before it writes an error there",
                           RESULTS_HINT)  # fmt: skip
    return doc


def is_failure(code: int) -> bool:
    """An exit code that another try would repeat (an error), not an interruption, a kill by a signal, or a trial
    not run because another process held its folder."""
    return code > 0 and code not in (INTERRUPTED, BUSY)


def record_result(folder: Path, results: dict[str, dict[str, Any]], trial: Trial, code: int, error: str) -> None:
    """Keep how a trial's process ended (results.json is rewritten whole, atomically, by the sweep process only); its
    error escaped (control, format and bidi characters), as it is read back."""
    results[trial.name] = {"exit_code": code, "error": label(error, MAX_ERROR) if is_failure(code) else ""}
    write_in(folder, RESULTS, (json.dumps(results, indent=2) + "\n").encode())


def state(folder: Path, trial: Trial, results: dict[str, dict[str, Any]]) -> str:
    """finished, failed (its process ended with an error that another try would repeat), or to do (never started,
    interrupted, or cut off: resumed from its newest checkpoint). Nothing is followed: a trial folder that is a link
    is not finished, whatever it leads to."""
    if entry_kind(folder, f"{trial.name}/{FINAL}") == "file":
        return "finished"
    code = results.get(trial.name, {}).get("exit_code")
    return "failed" if isinstance(code, int) and is_failure(code) else "to do"


def trial_run(folder: Path, trial: Trial, rank_by: str | None = None) -> tuple[Run | None, str | None]:
    """(the trial's run as compare reads it, ranked by `rank_by` or its watched metric, or None; why it could not be
    read): only a folder of the sweep folder holding a regular spec.resolved.yaml is read. A finished run without the
    `rank_by` metric is an error of the whole summary (NoMetric), not of the trial."""
    kind = entry_kind(folder, trial.name)
    if kind == "missing":
        return None, None
    if kind != "folder":
        return None, f"{trial.name} is not a folder but {'a regular file' if kind == 'file' else kind}"
    spec = entry_kind(folder, f"{trial.name}/{RESOLVED}")
    if spec == "missing":
        return None, None
    if spec != "file":
        return None, f"{trial.name}/{RESOLVED} is {'a folder' if spec == 'folder' else spec}, not a regular file"
    try:
        return read_run(folder / trial.name, rank_by), None
    except NoMetric:
        raise
    except SpecError as e:
        return None, e.problems[0].message[:MAX_ERROR]  # NOTE: its first problem, without the excerpt and hints


def check_as_planned(run: Path, trial: Trial, planned: dict[str, Any], trained: dict[str, Any]) -> None:
    """A trial's run folder holds the spec the plan gives it (`planned`: the plan's spec, its --set, the trial's
    overrides and --epochs or --steps, validated, its files by real path), not another (its spec.resolved.yaml edited,
    or a run of something else put in its place): the keys that differ are named, never their values."""
    if keys := list(differences([planned, trained])):
        shown = ", ".join(excerpt(k, 60) for k in keys[:5]) + ", ..." * (len(keys) > 5)
        raise SpecError.at(None, f"{run / RESOLVED} is not the spec this sweep plans for {trial.name} ({shown} "
                           f"differ{'s' * (len(keys) == 1)}): the sweep trains and sums up only what its plan says",
                           f"move or remove {run} (and {trial.name}'s entry in {RESULTS}), then resume the sweep to "
                           "train it afresh")  # fmt: skip


def _as_planned(folder: Path, trial: Trial, planned: Callable[[Trial], dict[str, Any]], run: Run | None,
                problem: str | None) -> tuple[Run | None, str | None]:  # fmt: skip
    """(the trial's run, or None; why not): a run of another spec than the plan's is no figure of this sweep."""
    if run is None:
        return run, problem
    try:
        check_as_planned(folder / trial.name, trial, planned(trial), run.spec)
    except SpecError as e:
        return None, e.problems[0].message[:MAX_ERROR]
    return run, None


def summary(folder: Path, plan: Plan, results: dict[str, dict[str, Any]], planned: Callable[[Trial], dict[str, Any]],
            rank_by: str | None = None) -> tuple[list[dict[str, Any]], list[Run]]:  # fmt: skip
    """(every trial with its overrides, state and run figures, best first, failed and unfinished ones last; the
    finished trials' runs in that order). `planned` gives a trial's spec values as its run's spec should hold them
    (check_as_planned): a trial whose folder holds another spec is summed up as failed, with the keys that differ."""
    read = {t.name: _as_planned(folder, t, planned, *trial_run(folder, t, rank_by)) for t in plan.trials}
    runs = ranked([run for run, _ in read.values() if run is not None])
    _same_metrics(runs)
    rows = [_row(folder, t, results, *read[t.name]) for t in plan.trials]
    order = {r.folder.name: i for i, r in enumerate(runs)}
    rows.sort(key=lambda r: (r["state"] != "finished", order.get(r["trial"], len(order)), r["trial"]))
    by_name = {r.folder.name: r for r in runs}
    return rows, [by_name[r["trial"]] for r in rows if r["state"] == "finished" and r["trial"] in by_name]


def _row(folder: Path, trial: Trial, results: dict[str, dict[str, Any]], run: Run | None, problem: str | None
         ) -> dict[str, Any]:  # fmt: skip
    """A trial's line of the summary; texts escaped (control, format and bidi characters), as a terminal may show
    summary.csv. A trial finished but not summed up (its folder unreadable, or of another spec) is failed."""
    done = state(folder, trial, results)
    error = results.get(trial.name, {}).get("error") or problem
    return {"trial": trial.name, "state": "failed" if done == "finished" and problem else done,
            "overrides": {k: label(v, None) for k, v in (o.split("=", 1) for o in trial.overrides)},
            "error": label(error, MAX_ERROR) if error else error,
            **(run.as_json() if run is not None else {"run": str(folder / trial.name)})}  # fmt: skip


def _same_metrics(runs: list[Run]) -> None:
    """Every run's figures and curves cut to the first MAX_METRICS names of all of them, best run first: compare keeps
    at most that many a run, but trials naming different ones would make a table and a plot of thousands."""
    for figures in ("final", "test", "curves"):
        names = list(dict.fromkeys(k for r in runs for k in getattr(r, figures)))
        keep = {*names[:MAX_METRICS], "train loss"}
        for r in runs:
            setattr(r, figures, {k: v for k, v in getattr(r, figures).items() if k in keep})


def summary_csv(rows: list[dict[str, Any]], keys: list[str]) -> str:
    """One line per trial, best first: trial, state, each grid key's value, then the run's figures."""
    finals = list(dict.fromkeys(k for r in rows for k in r.get("final") or {}))
    tests = list(dict.fromkeys(k for r in rows for k in r.get("test") or {}))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")

    def line(cells: list[Any]) -> None:  # NOTE: every text escaped: `cat summary.csv` must not drive a terminal
        writer.writerow([label(c, None) if isinstance(c, str) else c for c in cells])

    line(["trial", "state", *keys, "epochs", "train_loss", *(f"valid_{k}" for k in finals), "metric", "best",
          "best_epoch", *(f"test_{k}" for k in tests), "error", "folder"])  # fmt: skip
    for r in rows:
        final, test = r.get("final") or {}, r.get("test") or {}
        line([r["trial"], r["state"], *(r["overrides"].get(k) for k in keys), r.get("epochs"), r.get("train_loss"),
              *(final.get(k) for k in finals), r.get("metric"), r.get("best"), r.get("best_epoch"),
              *(test.get(k) for k in tests), r.get("error"), r["run"]])  # fmt: skip
    return out.getvalue()
