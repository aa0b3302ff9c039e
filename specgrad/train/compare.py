"""Runs side by side: each run folder's final and best validation metrics (from metrics.jsonl), its test figures when
`specgrad evaluate --split test` wrote them, the spec keys whose values differ between runs (from the
spec.resolved.yaml files, defaults included, files as absolute paths), and one plot of their curves. `specgrad
compare` prints them; a sweep's summary is made of them. Reads run folders only, through train.folder_io (regular
files inside the folder, never through a link, up to a cap); writes nothing itself. What it keeps is bounded whatever
the files say: MAX_METRICS metric names a run, MAX_SKIPPED line numbers, and a plot of at most plots.MAX_PANELS
panels, MAX_LINES runs and MAX_POINTS points a line.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specgrad.modelspec.errors import SpecError, excerpt
from specgrad.modelspec.schema import did_you_mean
from specgrad.modelspec.validate import METRIC_WORDS, higher_is_better, is_metric, validate_file
from specgrad.modelspec.validate import METRICS as METRIC_NAMES
from specgrad.train.folder_io import LOG_CAP, STATE_CAP, json_lines, parse_json, read_in, regular_file
from specgrad.train.plots import MAX_PANELS, panels, plain, plottable, png, quiet
from specgrad.train.run_folder import FINAL, METRICS, PATH_KEYS, RESOLVED, is_count, is_run_folder, resolved_spec_file

# NOTE: specgrad writes a loss (and an accuracy) per output and one total: a few names, not thousands
MAX_METRICS = 64  # metric names kept per run, the first to appear (loss and accuracy come first); the rest left out
MAX_SKIPPED = 100  # numbers of unreadable lines of metrics.jsonl kept (all are counted)
MAX_LINES = 50  # runs drawn in a plot: the first given (a sweep's best)
MAX_POINTS = 2000  # points of one line: a longer curve is thinned evenly, its first and last points kept
BOOKKEEPING = ("split", "epoch", "step", "lr", "examples_per_s")


@dataclass
class Run:
    """What a run folder says about how its training went."""

    folder: Path
    spec: dict[str, Any]  # spec.resolved.yaml's values
    finished: bool  # model.safetensors is written
    metric: str  # the validation metric that picks the best epoch (train.early_stopping.metric, else loss)
    epochs: int  # epochs finished
    steps: int
    final: dict[str, float]  # the last validation record's metrics
    train_loss: float | None  # the last epoch's mean training loss
    best: float | None = None  # the best value of `metric`, and its epoch
    best_epoch: int | None = None
    test: dict[str, float] = field(default_factory=dict)  # headline figures of evaluation-test.json, when written
    curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # "train loss", "valid loss", ... by epoch
    skipped: list[int] = field(default_factory=list)  # lines of metrics.jsonl that are not records (damaged, cut short)
    skipped_count: int = 0  # all of them (skipped holds the first MAX_SKIPPED)
    metrics_left_out: bool = False  # metrics.jsonl names more than MAX_METRICS metrics: the first are kept

    def as_json(self) -> dict[str, Any]:
        return {"run": str(self.folder), "finished": self.finished, "epochs": self.epochs, "steps": self.steps,
                "metric": self.metric, "best": self.best, "best_epoch": self.best_epoch, "final": self.final,
                "train_loss": self.train_loss, "test": self.test, "skipped_lines": self.skipped,
                "skipped_count": self.skipped_count, "metrics_left_out": self.metrics_left_out}  # fmt: skip


class NoMetric(SpecError):
    """A run has no validation figure of the metric asked to rank by: an error of the whole ranking, not of the run."""


def read_run(folder: Path, rank_by: str | None = None) -> Run:
    """A run folder's summary; a folder that is not a run folder, or a damaged spec, is a SpecError naming it. Its
    metric is `rank_by` where given (a run without it is an error listing those it has), else the one that picks its
    best epoch (train.early_stopping.metric, or loss where no validation record has it)."""
    if not os.path.isdir(folder):
        raise SpecError.at(None, f"no such run folder: {folder}", "pass folders that `specgrad train` wrote")
    if not is_run_folder(folder):
        raise SpecError.at(None, f"{folder} is not a run folder (it has no {RESOLVED})",
                           "pass folders that `specgrad train` wrote, e.g. runs/<name>-1")  # fmt: skip
    # NOTE: validated, so that defaults left out of the file compare as their values (data files are not read)
    resolved = resolved_spec_file(folder)  # NOTE: a link there is refused before the loader could quote it
    spec = _with_real_paths(validate_file(resolved, data_files=False, init_file=False).values, folder)
    metric = rank_by or ((spec.get("train") or {}).get("early_stopping") or {}).get("metric", "loss")
    log = _read_log(folder, metric)
    if rank_by is not None and rank_by not in log.present and log.names:  # NOTE: no record yet: ranked last
        has = ", ".join(log.names) or "none: no validation record"
        raise NoMetric.at(None, f"--rank-by {rank_by}: {folder} has no validation {rank_by} (its metrics: {has})",
                          "rank by one every run has; a run records only the metrics its train.metrics names "
                          "and that fit its task (docs/training.md, Validation metrics)")  # fmt: skip
    metric = metric if metric in log.present else "loss"
    best, best_epoch = log.best.get(metric, (None, None))
    return Run(folder, spec, regular_file(folder, FINAL) is not None, metric, log.epochs, log.steps, log.final,
               log.train_loss, best, best_epoch, _test_figures(folder), {k: c.points() for k, c in log.curves.items()},
               log.skipped, log.skipped_count, log.left_out)  # fmt: skip


def _with_real_paths(values: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The files a run's spec names (relative to its folder) as absolute paths: two runs in different folders that
    read the same file do not differ by it."""
    data, init = values.get("data"), values.get("init")
    if isinstance(data, dict):
        values["data"] = {**data, **{k: os.path.realpath(folder / data[k]) for k in PATH_KEYS if data.get(k)}}
    if isinstance(init, dict) and isinstance(init.get("from"), str):
        values["init"] = {**init, "from": os.path.realpath(folder / init["from"])}
    return values


class _Curve:
    """The points of one curve as they come, in bounded memory: every `stride`-th point is kept, and when twice
    MAX_POINTS are held every other one is dropped and the stride doubled (the last point is kept aside)."""

    def __init__(self) -> None:
        self.kept: list[tuple[int, float]] = []
        self.stride, self.seen, self.last = 1, 0, None

    def add(self, epoch: int, value: float) -> None:
        if self.seen % self.stride == 0:
            self.kept.append((epoch, value))
            if len(self.kept) >= 2 * MAX_POINTS:
                self.kept, self.stride = self.kept[::2], self.stride * 2
        self.seen, self.last = self.seen + 1, (epoch, value)

    def points(self) -> list[tuple[int, float]]:
        return self.kept + ([self.last] if self.last is not None and self.kept[-1] != self.last else [])


@dataclass
class _Log:
    """What compare keeps of metrics.jsonl, in memory bounded whatever its size: the last validation metrics (of at
    most MAX_METRICS names in all), the best value and epoch of each watched metric, the curves (a _Curve each), the
    epochs and the last step, and the lines that are not records."""

    watched: tuple[str, ...]  # the metric that picks the best epoch, and the loss
    names: dict[str, None] = field(default_factory=dict)  # the validation metrics kept, in the order they came
    present: set[str] = field(default_factory=set)  # the watched metrics some validation record has
    final: dict[str, float | None] = field(default_factory=dict)
    best: dict[str, tuple[float, int]] = field(default_factory=dict)
    curves: dict[str, _Curve] = field(default_factory=dict)
    epochs: int = 0
    steps: int = 0
    train_loss: float | None = None
    skipped: list[int] = field(default_factory=list)
    skipped_count: int = 0
    left_out: bool = False

    def add_valid(self, epoch: int, record: dict[str, Any]) -> None:
        self.final = {}
        for k, v in _numbers(record).items():
            if k not in self.names and len(self.names) < MAX_METRICS:
                self.names[k] = None
                self.curves[f"valid {k}"] = _Curve()
            if k not in self.names:
                self.left_out = True
                continue
            self.final[k] = v = _finite_or_none(v)
            if v is not None:
                self.curves[f"valid {k}"].add(epoch, v)
        for k in self.watched:
            self.present |= {k} & self.final.keys()
            v, old, sign = self.final.get(k), self.best.get(k), -1 if higher_is_better(k) else 1
            if v is not None and (old is None or (sign * v, epoch) < (sign * old[0], old[1])):
                self.best[k] = (v, epoch)  # NOTE: the first of equal ones

    def add_epoch(self, epoch: int, record: dict[str, Any]) -> None:
        self.epochs, self.train_loss = max(self.epochs, epoch), _finite_or_none(record.get("loss"))
        if self.train_loss is not None:
            self.curves.setdefault("train loss", _Curve()).add(epoch, self.train_loss)


def _read_log(folder: Path, metric: str) -> _Log:
    """metrics.jsonl read as far as it goes: records with a split, an epoch and a step (counts); the numbers of the
    lines that are not (cut short by a crash, or damaged). A link or FIFO in its place is refused by name."""
    log = _Log((metric, "loss"))
    for n, record in json_lines(read_in(folder, METRICS, LOG_CAP, missing_ok=True) or b""):
        if not (isinstance(record, dict) and isinstance(record.get("split"), str) and
                all(is_count(record.get(k)) for k in ("epoch", "step"))):  # fmt: skip
            log.skipped_count += 1
            if len(log.skipped) < MAX_SKIPPED:
                log.skipped.append(n)
            continue
        log.steps = max(log.steps, record["step"])
        if record["split"] == "train_epoch":
            log.add_epoch(record["epoch"], record)
        elif record["split"] == "valid":
            log.add_valid(record["epoch"], record)
    return log


def _numbers(record: dict[str, Any]) -> dict[str, Any]:
    """A record's numeric values, without its bookkeeping."""
    return {k: v for k, v in record.items() if k not in BOOKKEEPING and isinstance(v, (int, float)) and
            not isinstance(v, bool)}  # fmt: skip


def _finite_or_none(v: Any) -> float | None:
    """A number as JSON can hold it: NaN and infinity (a loss that blew up) become None."""
    return v if _finite(v) else None


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _test_figures(folder: Path) -> dict[str, float]:
    """The headline figures of the test split (accuracy, RMSE, perplexity) per output, when evaluate wrote them (at
    most MAX_METRICS)."""
    report_file = "evaluation-test.json"
    data = read_in(folder, report_file, STATE_CAP, missing_ok=True)  # NOTE: a link or FIFO there is refused by name
    if data is None:
        return {}
    try:
        doc = parse_json(data, folder / report_file)
    except SpecError:
        return {}  # NOTE: a damaged report is left out, never a reason to stop comparing
    outputs = doc.get("outputs") if isinstance(doc, dict) else None
    figures: dict[str, float] = {}
    for name, report in outputs.items() if isinstance(outputs, dict) else ():
        prefix = f"{name}." if len(outputs) > 1 else ""
        for key in ("accuracy", "rmse", "perplexity"):
            if isinstance(report, dict) and _finite(report.get(key)) and len(figures) < MAX_METRICS:
                figures[f"{prefix}{key}"] = report[key]
    return figures


# *** what differs ***


def flatten(values: Any, prefix: str = "") -> dict[str, Any]:
    """A spec's values as dotted keys: mappings by key, lists that hold mappings (model layers) by index; a list of
    plain values (a shape) stays one value."""
    if isinstance(values, dict):
        items = values.items()
    elif isinstance(values, list) and any(isinstance(v, (dict, list)) for v in values):
        items = ((str(i), v) for i, v in enumerate(values))
    else:
        return {prefix: values}
    out: dict[str, Any] = {}
    for k, v in items:
        out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def differences(specs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The dotted keys whose values are not the same in every spec, with each spec's value (None where it has none),
    in the order the keys first appear."""
    flat = [flatten(s) for s in specs]
    keys = dict.fromkeys(k for f in flat for k in f)
    return {k: [f.get(k) for f in flat] for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1}


def shown(value: Any) -> str:
    """A spec value as a table cell: YAML-like, short."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
    return excerpt(text, 40)


def check_rank_by(metric: str | None) -> None:
    """--rank-by names a validation metric (of the model, or <output>.<metric> of one output)."""
    if metric is not None and not is_metric(metric):
        raise SpecError.at(None, f"--rank-by {metric!r} is not a metric: {METRIC_WORDS}",
                           did_you_mean(metric, [*METRIC_NAMES, "top5"]))  # fmt: skip


def ranked(runs: list[Run]) -> list[Run]:
    """Best first by each run's best validation metric (higher for accuracy, r2, f1, ..., lower for loss, mae and
    rmse: validate.METRICS); runs without one last."""

    def key(r: Run) -> tuple[bool, float]:
        if r.best is None:
            return True, 0.0
        return False, -r.best if higher_is_better(r.metric) else r.best

    return sorted(runs, key=key)


# *** the plot ***


def plotted(runs: list[Run]) -> tuple[list[str], list[str]]:
    """(the curves the plot draws, a panel each, in order: the validation metrics, the validation loss first, then the
    training loss; those left out past plots.MAX_PANELS, the validation and training loss kept)."""
    names = list(dict.fromkeys(n for r in runs for n in r.curves if r.curves[n]))
    chosen = sorted(names, key=lambda n: (n != "valid loss", n != "train loss", n))[:MAX_PANELS]
    order = sorted(chosen, key=lambda n: (not n.startswith("valid"), n != "valid loss", n))
    return order, [n for n in names if n not in chosen]


def thinned(points: list[tuple[int, float]], most: int = MAX_POINTS) -> list[tuple[int, float]]:
    """At most `most` of the points, evenly spaced, the first and the last among them."""
    if len(points) <= most:
        return points
    return [points[round(i * (len(points) - 1) / (most - 1))] for i in range(most)]


def curves_png(runs: list[Run], labels: list[str]) -> bytes | None:
    """One figure: a panel per validation metric (and the training loss), a line per run; None without matplotlib.
    Bounded before anything is drawn: plotted's panels, the first MAX_LINES runs, MAX_POINTS points a line."""
    names, _ = plotted(runs)
    runs, labels = runs[:MAX_LINES], labels[:MAX_LINES]
    made = panels(max(1, len(names)), 5.5, 4.2)
    if made is None:
        return None
    fig, axes = made
    with quiet():
        for ax, name in zip(axes, names):
            _panel(ax, name, [(plain(label), run.curves.get(name) or []) for run, label in zip(runs, labels)])
        if axes[0].get_legend_handles_labels()[0]:  # NOTE: no line drawn (nothing plottable): no legend, no warning
            axes[0].legend(fontsize=7)
    return png(fig)


def _panel(ax: Any, name: str, lines: list[tuple[str, list[tuple[int, Any]]]]) -> None:
    """The panel of curve `name`: a line per run, (its legend entry, already plain, and its points)."""
    from matplotlib.ticker import MaxNLocator

    values = []
    for label, curve in lines:
        points = thinned([(e, v) for e, v in curve if plottable(v)])
        values += [v for _, v in points]
        if points:
            ax.plot([e for e, _ in points], [v for _, v in points], marker=".", label=label)
    if name.endswith("loss") and values and min(values) > 0 and max(values) > 100 * min(values):
        ax.set_yscale("log")  # NOTE: runs far apart, or a loss falling by orders of magnitude
    ax.set_title(plain(name))
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
