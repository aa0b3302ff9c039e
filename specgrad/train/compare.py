"""Runs side by side: each run folder's final and best validation metrics (from metrics.jsonl), its test figures when
`specgrad evaluate --split test` wrote them, the spec keys whose values differ between runs (from the
spec.resolved.yaml files, defaults included, files as absolute paths), and one plot of their curves. `specgrad
compare` prints them; a sweep's summary is made of them. Reads run folders only (as a spec file is read: regular files
of bounded size); writes nothing itself.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specgrad.modelspec.errors import SpecError, excerpt
from specgrad.modelspec.files import read_data
from specgrad.modelspec.validate import validate_file
from specgrad.train.plots import panels, png
from specgrad.train.run_folder import FINAL, PATH_KEYS, RESOLVED, is_run_folder

HIGHER_IS_BETTER = ("accuracy",)  # NOTE: every other metric (loss) is better lower


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

    def as_json(self) -> dict[str, Any]:
        return {"run": str(self.folder), "finished": self.finished, "epochs": self.epochs, "steps": self.steps,
                "metric": self.metric, "best": self.best, "best_epoch": self.best_epoch, "final": self.final,
                "train_loss": self.train_loss, "test": self.test, "skipped_lines": self.skipped}  # fmt: skip


def read_run(folder: Path) -> Run:
    """A run folder's summary; a folder that is not a run folder, or a damaged spec, is a SpecError naming it."""
    if not os.path.isdir(folder):
        raise SpecError.at(None, f"no such run folder: {folder}", "pass folders that `specgrad train` wrote")
    if not is_run_folder(folder):
        raise SpecError.at(None, f"{folder} is not a run folder (it has no {RESOLVED})",
                           "pass folders that `specgrad train` wrote, e.g. runs/<name>-1")  # fmt: skip
    # NOTE: validated, so that defaults left out of the file compare as their values (data files are not read)
    spec = _with_real_paths(validate_file(folder / RESOLVED, data_files=False, init_file=False).values, folder)
    records, skipped = _records(folder / "metrics.jsonl")
    valid = [r for r in records if r["split"] == "valid"]
    epochs = [r for r in records if r["split"] == "train_epoch"]
    metric = ((spec.get("train") or {}).get("early_stopping") or {}).get("metric", "loss")
    if not any(metric in r for r in valid):
        metric = "loss"
    run = Run(folder, spec, (folder / FINAL).exists(), metric, max((r["epoch"] for r in epochs), default=0),
              max((r["step"] for r in records), default=0), _metrics(valid[-1]) if valid else {},
              _finite_or_none(epochs[-1].get("loss")) if epochs else None, test=_test_figures(folder),
              skipped=skipped)  # fmt: skip
    scored = [(r[metric], r["epoch"]) for r in valid if _finite(r.get(metric))]
    if scored:
        sign = -1 if metric in HIGHER_IS_BETTER else 1
        run.best, run.best_epoch = min(scored, key=lambda t: (sign * t[0], t[1]))  # NOTE: the first of equal ones
    for name in dict.fromkeys(k for r in valid for k in _metrics(r)):
        run.curves[f"valid {name}"] = [(r["epoch"], r[name]) for r in valid if _finite(r.get(name))]
    run.curves["train loss"] = [(r["epoch"], r["loss"]) for r in epochs if _finite(r.get("loss"))]
    return run


def _with_real_paths(values: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The files a run's spec names (relative to its folder) as absolute paths: two runs in different folders that
    read the same file do not differ by it."""
    data, init = values.get("data"), values.get("init")
    if isinstance(data, dict):
        values["data"] = {**data, **{k: os.path.realpath(folder / data[k]) for k in PATH_KEYS if data.get(k)}}
    if isinstance(init, dict) and isinstance(init.get("from"), str):
        values["init"] = {**init, "from": os.path.realpath(folder / init["from"])}
    return values


def _records(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """(metrics.jsonl's records with a split, an epoch and a step; the numbers of the lines that are not: cut short
    by a crash, or damaged)."""
    if not path.exists():
        return [], []
    raw = read_data(str(path), None, "metrics.jsonl")  # NOTE: at most MAX_FILE_MB, as every file a spec names
    out, skipped = [], []
    for n, line in enumerate(raw.splitlines(), 1):
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            record = None
        if isinstance(record, dict) and isinstance(record.get("split"), str) and \
                all(isinstance(record.get(k), int) for k in ("epoch", "step")):  # fmt: skip
            out.append(record)
        elif line.strip():
            skipped.append(n)
    return out, skipped


def _metrics(record: dict[str, Any]) -> dict[str, float | None]:
    """A record's metric values (loss, accuracy, per-output ones; None where not finite), without its bookkeeping."""
    return {k: _finite_or_none(v) for k, v in record.items() if k not in ("split", "epoch", "step", "lr",
            "examples_per_s") and isinstance(v, (int, float)) and not isinstance(v, bool)}  # fmt: skip


def _finite_or_none(v: Any) -> float | None:
    """A number as JSON can hold it: NaN and infinity (a loss that blew up) become None."""
    return v if _finite(v) else None


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _test_figures(folder: Path) -> dict[str, float]:
    """The headline figures of the test split (accuracy, RMSE, perplexity) per output, when evaluate wrote them."""
    path = folder / "evaluation-test.json"
    if not path.exists():
        return {}
    try:
        outputs = json.loads(read_data(str(path), None, "evaluation-test.json")).get("outputs") or {}
    except (SpecError, json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return {}  # NOTE: a damaged report is left out, never a reason to stop comparing
    figures = {}
    for name, report in outputs.items() if isinstance(outputs, dict) else ():
        prefix = f"{name}." if len(outputs) > 1 else ""
        for key in ("accuracy", "rmse", "perplexity"):
            if isinstance(report, dict) and _finite(report.get(key)):
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


def ranked(runs: list[Run]) -> list[Run]:
    """Best first by each run's best validation metric (accuracy higher, loss lower); runs without one last."""

    def key(r: Run) -> tuple[bool, float]:
        if r.best is None:
            return True, 0.0
        return False, -r.best if r.metric in HIGHER_IS_BETTER else r.best

    return sorted(runs, key=key)


# *** the plot ***


def curves_png(runs: list[Run], labels: list[str]) -> bytes | None:
    """One figure: a panel per validation metric (and the training loss), a line per run; None without matplotlib."""
    names = list(dict.fromkeys(n for r in runs for n in r.curves if r.curves[n]))
    names = sorted(names, key=lambda n: (not n.startswith("valid"), n != "valid loss", n))
    made = panels(max(1, len(names)), 5.5, 4.2)
    if made is None:
        return None
    from matplotlib.ticker import MaxNLocator

    fig, axes = made
    for ax, name in zip(axes, names):
        for run, label in zip(runs, labels):
            points = run.curves.get(name) or []
            if points:
                ax.plot([e for e, _ in points], [v for _, v in points], marker=".", label=label)
        values = [v for r in runs for _, v in r.curves.get(name) or []]
        if name.endswith("loss") and values and min(values) > 0 and max(values) > 100 * min(values):
            ax.set_yscale("log")  # NOTE: runs far apart, or a loss falling by orders of magnitude
        ax.set_title(name)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if names:
        axes[0].legend(fontsize=7)
    return png(fig)
