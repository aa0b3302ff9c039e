"""A sweep: one spec trained with several sets of overrides, each trial an ordinary run folder under one sweep folder.

The plan (sweep.json) is written before any trial starts and never changes: the spec, the --set overrides every trial
shares, the grid, and each trial's own overrides. `--grid key=v1,v2` lists values (each parsed as --set parses it;
commas inside [...] or {...} do not split); the trials are every combination, or with `--random N` N of them drawn
with `--seed` (a `key=low..high` range is then drawn from: whole numbers uniformly, positive numbers log-uniformly,
others uniformly). A trial's state comes from its folder (model.safetensors: finished) and from the sweep's record of
how each process ended (results.json): so an interrupted sweep resumes with the trials not finished, and a trial that
failed stays a recorded failure. Imports numpy, modelspec and train.compare / run_folder; never runs a trial itself
(cli/sweep.py does, one process each).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.helpers import atomic_write
from specgrad.modelspec.errors import Location, SpecError, excerpt
from specgrad.modelspec.files import read_data
from specgrad.modelspec.loader import resolve_scalar
from specgrad.train.compare import Run, ranked, read_run
from specgrad.train.run_folder import FINAL, RESOLVED

PLAN, RESULTS = "sweep.json", "results.json"
TRIAL_NAME = re.compile(r"trial-[0-9]{3,5}")
MAX_TRIALS = 10_000  # NOTE: a grid multiplies out fast; more trials than this is a typo, not a sweep
NUMBER = r"[-+]?(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
RANGE = re.compile(rf"^\s*({NUMBER})\s*\.\.\s*({NUMBER})\s*$")  # low..high (a path such as ../x is a value)
GRID_HINT = "write --grid key=value1,value2 (for example --grid train.lr=0.001,0.01), or key=low..high with --random N"
INTERRUPTED = 130  # NOTE: the exit code of a trial stopped by Ctrl-C (or a sweep stopped while it ran): resumed


@dataclass(frozen=True)
class Trial:
    name: str  # its folder in the sweep folder: trial-001, ...
    overrides: list[str]  # key=value, one per grid key


@dataclass(frozen=True)
class Plan:
    spec: str  # the spec file, absolute
    overrides: list[str]  # --set: every trial's
    epochs: int | None
    steps: int | None
    device: str | None
    grid: dict[str, list[str]]  # key -> its values (or one "low..high" range) as written
    random: int | None
    seed: int
    trials: list[Trial]

    def write(self, folder: Path) -> None:
        atomic_write(folder / PLAN, (json.dumps(asdict(self), indent=2) + "\n").encode())

    @staticmethod
    def read(folder: Path) -> Plan:
        path = folder / PLAN
        if not folder.is_dir() or not path.exists():
            raise SpecError.at(None, f"{folder} is not a sweep folder (it has no {PLAN})",
                               "pass a folder `specgrad sweep` wrote, e.g. runs/<name>-sweep-1")  # fmt: skip
        try:
            doc = json.loads(read_data(str(path), None, PLAN))
            plan = Plan(**{**doc, "trials": [Trial(**t) for t in doc["trials"]]})
            names = [t.name for t in plan.trials]
            # NOTE: a trial's name becomes a path: only the names a sweep gives, each once
            if len(set(names)) != len(names) or not all(TRIAL_NAME.fullmatch(str(n)) for n in names):
                raise ValueError("its trials are not named trial-001, trial-002, ...")
            if not all(isinstance(o, str) for t in plan.trials for o in t.overrides):
                raise ValueError("a trial's overrides are not key=value texts")
            return plan
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError, AttributeError, ValueError) as e:
            raise SpecError.at(None, f"{path} is damaged ({excerpt(str(e), 80)})",
                               "start the sweep again in a new folder") from None  # fmt: skip


# *** the grid ***


def parse_grid(texts: list[str]) -> dict[str, list[str]]:
    """`key=v1,v2` options as key -> values (text, parsed later as --set parses a value); errors are located in the
    option's text."""
    grid: dict[str, list[str]] = {}
    for text in texts:
        file = f"--grid {text}"
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
    """Every combination of the grid's values in order, or `random` of them drawn with `seed` (ranges drawn from)."""
    ranges = {k: _range(k, v[0]) for k, v in grid.items() if len(v) == 1 and RANGE.match(v[0])}
    keys = list(grid)
    if random is None:
        if ranges:
            key = next(iter(ranges))
            loc = Location(f"--grid {key}={grid[key][0]}", 1, len(key) + 2)
            raise SpecError.at(loc, f"--grid {key} is a range, which only --random N draws from",
                               f"add --random N, or list values: {GRID_HINT}")  # fmt: skip
        combos = list(itertools.product(*grid.values()))
        _check_count(len(combos))
        return [_trial(i, keys, c) for i, c in enumerate(combos)]
    _check_count(random)
    rng = np.random.default_rng(seed)
    if not ranges:
        total = math.prod(len(v) for v in grid.values())
        if random > total:
            raise SpecError.at(None, f"--random {random} asks for more trials than the grid has combinations "
                               f"({total})", f"use --random {total} or fewer, or leave --random out for all "
                               "of them")  # fmt: skip
        picks = rng.choice(total, size=random, replace=False)
        combos = list(itertools.product(*grid.values()))
        return [_trial(i, keys, combos[int(p)]) for i, p in enumerate(picks)]
    combos: dict[tuple[str, ...], None] = {}
    for _ in range(100 * random):  # NOTE: without repeats; ranges of few whole numbers run out
        combo = tuple(_draw(ranges[k], rng) if k in ranges else grid[k][int(rng.integers(len(grid[k])))] for k in keys)
        combos.setdefault(combo)
        if len(combos) == random:
            return [_trial(i, keys, c) for i, c in enumerate(combos)]
    raise SpecError.at(None, f"--random {random} asks for more different trials than the grid and its ranges give "
                       f"({len(combos)} found)", "ask for fewer, or widen the ranges (a range of whole numbers "
                       "holds only those: write 0.0..1 for fractions)")  # fmt: skip


def _check_count(n: int) -> None:
    if n > MAX_TRIALS:
        raise SpecError.at(None, f"the sweep would have {n:,} trials, more than {MAX_TRIALS:,}",
                           "use fewer values, or --random N to draw some of them")  # fmt: skip
    if n < 1:
        raise SpecError.at(None, "the sweep has no trials", GRID_HINT)


def _range(key: str, text: str) -> tuple[float, float, bool]:
    """(low, high, whole numbers) of a `low..high` value."""
    low, high = (resolve_scalar(s) for s in RANGE.match(text).groups())  # NOTE: 1..3 whole numbers, 1.0..3 fractions
    loc = Location(f"--grid {key}={text}", 1, len(key) + 2)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        raise SpecError.at(loc, f"--grid {key}={text} is not a range of numbers", GRID_HINT)
    if not low < high:
        raise SpecError.at(loc, f"--grid {key}={text}: the low end must be below the high end")
    return float(low), float(high), isinstance(low, int) and isinstance(high, int)


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


def read_results(folder: Path) -> dict[str, dict[str, Any]]:
    """How each trial's process ended (trial name -> exit_code, error), as the sweep recorded it."""
    path = folder / RESULTS
    if not path.exists():
        return {}
    try:
        doc = json.loads(read_data(str(path), None, RESULTS))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}  # NOTE: written atomically, so only a hand edit breaks it: the trials' folders still say enough
    return doc if isinstance(doc, dict) else {}


def record_result(folder: Path, results: dict[str, dict[str, Any]], trial: Trial, code: int, error: str) -> None:
    """Keep how a trial's process ended (results.json is rewritten whole, atomically, by the sweep process only)."""
    results[trial.name] = {"exit_code": code, "error": error}
    atomic_write(folder / RESULTS, (json.dumps(results, indent=2) + "\n").encode())


def state(folder: Path, trial: Trial, results: dict[str, dict[str, Any]]) -> str:
    """finished, failed (its process ended with an error that another try would repeat), or to do (never started,
    interrupted, or cut off: resumed from its newest checkpoint)."""
    if (folder / trial.name / FINAL).exists():
        return "finished"
    code = results.get(trial.name, {}).get("exit_code")
    return "failed" if isinstance(code, int) and code > 0 and code != INTERRUPTED else "to do"


def summary(folder: Path, plan: Plan) -> tuple[list[dict[str, Any]], list[Run]]:
    """(every trial with its overrides, state and run figures, best first, failed and unfinished ones last; the
    finished trials' runs in that order)."""
    results, rows, runs = read_results(folder), {}, []
    for trial in plan.trials:
        run = read_run(folder / trial.name) if (folder / trial.name / RESOLVED).exists() else None
        rows[trial.name] = {"trial": trial.name, "state": state(folder, trial, results),
                            "overrides": dict(o.split("=", 1) for o in trial.overrides),
                            "error": results.get(trial.name, {}).get("error") or None,
                            **(run.as_json() if run is not None else {"run": str(folder / trial.name)})}  # fmt: skip
        if run is not None:
            runs.append(run)
    order = [r.folder.name for r in ranked(runs)]
    ordered = sorted(rows.values(), key=lambda r: (r["state"] != "finished", order.index(r["trial"]) if r["trial"] in
                                                   order else len(order), r["trial"]))  # fmt: skip
    by_name = {r.folder.name: r for r in runs}
    return ordered, [by_name[r["trial"]] for r in ordered if r["state"] == "finished"]


def summary_csv(rows: list[dict[str, Any]], keys: list[str]) -> str:
    """One line per trial, best first: trial, state, each grid key's value, then the run's figures."""
    finals = list(dict.fromkeys(k for r in rows for k in r.get("final") or {}))
    tests = list(dict.fromkeys(k for r in rows for k in r.get("test") or {}))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["trial", "state", *keys, "epochs", "train_loss", *(f"valid_{k}" for k in finals), "metric",
                     "best", "best_epoch", *(f"test_{k}" for k in tests), "error", "folder"])  # fmt: skip
    for r in rows:
        final, test = r.get("final") or {}, r.get("test") or {}
        writer.writerow([r["trial"], r["state"], *(r["overrides"].get(k) for k in keys), r.get("epochs"),
                         r.get("train_loss"), *(final.get(k) for k in finals), r.get("metric"), r.get("best"),
                         r.get("best_epoch"), *(test.get(k) for k in tests), r.get("error"), r["run"]])  # fmt: skip
    return out.getvalue()
