"""`specgrad evaluate`: how good trained weights are on the validation or the test split, or on a file of examples in
the data's format, per output: classifiers'
accuracy, per-class figures and confusion matrix, regression errors in the target's units, language models' loss and
perplexity (specgrad.train.evaluation computes them). Printed, and written into the run folder as JSON (and the
confusion matrix as a PNG with the plot extra)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.table import Column, Table
from rich.text import Text
from specgrad.cli.console import Console
from specgrad.cli.run import check_outputs, load_model, prepare, read_contract, spec_and_weights, to_result

from specgrad import Tensor
from specgrad.device import Device
from specgrad.helpers import atomic_write
from specgrad.modelspec.contract import RunContract
from specgrad.modelspec.errors import SpecError, label, printable
from specgrad.modelspec.validate import ValidSpec, is_float
from specgrad.train.data import APPLIES, Dataset, fields, load_data
from specgrad.train.evaluation import classification, language, regression
from specgrad.train.plots import panels, plain, png
from specgrad.train.validation import ShapeJits

SPLITS = {"validation": ("valid", "valid_split"), "test": ("test", "test_split")}  # --split -> (held, data key)
MAX_CONFUSION = 20  # NOTE: classes beyond this make the text table unreadable; the JSON and the PNG have them all


def evaluate(spec_path: Path, weights: Path | None, overrides: list[str], device: str | None, as_json: bool,
             split: str = "validation") -> None:  # fmt: skip
    if not split:
        raise SpecError.at(None, "--split is empty", "name validation, test, or a file of examples")
    held, key = SPLITS.get(split, ("test", None))
    test_file = None if split in SPLITS else Path(split)  # NOTE: read with the run's statistics and classes
    spec, weights = spec_and_weights(spec_path, weights, overrides, data_files=True)
    if test_file is not None:
        _check_file_source(spec, split)
    if device is not None:
        Device.DEFAULT = device
    data = load_data(_unstandardized(spec), held=held, test_file=test_file)
    if not len(data.x_valid):
        hint = "train with a validation split, e.g. --set data.valid_split=0.2"
        if split == "test":
            hint = ("train with a test split, e.g. --set data.test_split=0.1 (the same data and seed then give the "
                    "same validation examples), or evaluate a file of examples: --split FILE")  # fmt: skip
        raise SpecError.at(None, f"{spec.path} has no {split} examples to evaluate on (data.{key} is 0)", hint)
    model, meta = load_model(spec, weights)
    # NOTE: the figures are those of the model run and export serve: its inputs standardized with the statistics in
    # the weights, its regression outputs in units with theirs; weights whose metadata run and export refuse (a task,
    # statistics or class names training did not write) are refused here too
    contract = read_contract(spec, meta, weights)
    outputs = list(spec.outputs)
    where = str(test_file) if test_file is not None else f"the {split} examples of {spec_path}"
    got = _outputs(model, spec, contract, data, where)
    truths = fields(data.y_valid, outputs)
    reports = {name: _report(_head(data, name), out, truth, spec) for name, out, truth in zip(outputs, got, truths)}
    document = {"split": split, "examples": len(data.x_valid), "weights": str(weights), "outputs": reports}
    if test_file is not None and data.table is not None:
        document["left_out"] = {"no_target": data.table.no_target, "drop_row": data.table.dropped}
    written = _write(spec_path, document) if spec_path.is_dir() else []
    if as_json:
        typer.echo(json.dumps({**document, "written": [str(p) for p in written]}, indent=2, allow_nan=False))
        return
    console = Console(width=120)
    what = f"examples of {printable(split)}" if test_file else f"{split} examples"
    where = f"{printable(str(spec_path))}: {len(data.x_valid)} {what}"
    console.print(f"{where}, weights {printable(str(weights))}", markup=False)  # NOTE: a path's '[' is no markup
    if test_file is not None and data.table is not None and (data.table.no_target or data.table.dropped):
        left = data.table.no_target + data.table.dropped
        console.print(f"{left} row(s) of {printable(split)} left out: {data.table.no_target} without a target, "
                      f"{data.table.dropped} with a missing cell in a drop_row column", markup=False)  # fmt: skip
    for name, report in reports.items():
        _print(console, name if len(reports) > 1 else None, report)
    if written:
        console.print("wrote " + ", ".join(printable(str(p)) for p in written), markup=False)
    else:
        console.print("(a spec file, not a run folder: nothing written; give the run folder to keep the figures)")


def _check_file_source(spec: ValidSpec, split: str) -> None:
    """--split FILE reads the file with the data source's own reader; a source that makes its examples (spirals,
    sine, the bundled digits) has no file format, so the file would be ignored and the figures be the split's."""
    source = (spec.values.get("data") or {}).get("source")
    if source is None or source in APPLIES["test_path"]:  # NOTE: no data at all: load_data says so
        return
    *some, last = APPLIES["test_path"]
    raise SpecError.at(None, f"--split {label(split)}: the data of {spec.path} is source {source}, which makes "
                       "its examples and reads no file, so there is no file of examples to evaluate",
                       "evaluate its validation split (--split validation) or its test split (--split test, with "
                       f"data.test_split); a file of examples is for the {', '.join(some)} and {last} "
                       "sources")  # fmt: skip


def _unstandardized(spec: ValidSpec) -> ValidSpec:
    """The spec as evaluate reads its examples: inputs as the data holds them, not standardized with the data's own
    statistics, so that `_outputs` applies the weights' as run does (float inputs kept as the sources' float32, which
    is what training standardizes before casting to a float16 input). Regression targets are still standardized with
    the data's statistics, and `_report` puts them back with the same ones."""
    data = spec.values.get("data") or {}
    inputs = {k: (shape, "float32" if is_float(dtype) else dtype) for k, (shape, dtype) in spec.inputs.items()}
    return replace(spec, values={**spec.values, "data": {**data, "normalize": False}}, inputs=inputs)


def _outputs(model: Any, spec: ValidSpec, contract: RunContract, data: Dataset, where: str) -> list[np.ndarray]:
    """Every output of the model on every example, as numpy, in the spec's output order, computed as run computes
    them (run's own functions): the inputs standardized with the weights' statistics, a value infinite once
    standardized refused, and every output checked for NaN and infinity, naming the example and position. A
    classifier's and a language model's outputs are their scores; a regression's are in the target's units (the
    weights' target statistics)."""
    names = list(spec.inputs)
    xs = [prepare(x, spec, contract, Path(f"{where}[{k}]" if len(names) > 1 else where), k, allow_nonfinite=None)
          for k, x in zip(names, fields(data.x_valid, names))]  # fmt: skip
    parts: list[list[np.ndarray]] = [[] for _ in spec.outputs]
    forward = ShapeJits(_forward(model))
    for i in range(0, len(xs[0]), spec.batch_size):
        for part, out in zip(parts, forward([Tensor(x[i : i + spec.batch_size]) for x in xs])):
            part.append(out.numpy())  # NOTE: a copy: the next replay refills the same tensors
    ret = []
    for o, part in zip(spec.outputs, parts):
        head = contract.heads.get(o, RunContract()) if contract.task == "multi" else contract
        out = np.concatenate(part)
        with np.errstate(all="ignore"):  # NOTE: an overflow is said in words below, never as a RuntimeWarning
            result = to_result(head, out)
        check_outputs(result, None, f"output {o}" if len(spec.outputs) > 1 else "output")
        ret.append(result if head.task == "regress" else out)
    return ret


def _forward(model: Any) -> Callable[[list[Tensor]], tuple[Tensor, ...]]:
    """The model's outputs on one batch, for ShapeJits to capture: each made contiguous and realized in turn, as
    .numpy() did before the forward was captured (the same kernels, so the same figures), and read after the call."""
    return lambda xs: tuple(out.contiguous().realize() for out in model.outputs(*xs))


def _head(data: Dataset, name: str) -> dict[str, Any]:
    """The task, classes and target statistics of one output."""
    if data.heads:
        h = data.heads[name]
        return {"task": h.task, "class_names": h.class_names, "target_stats": h.target_stats}
    return {"task": data.task, "class_names": data.class_names, "target_stats": data.target_stats}


def _report(head: dict[str, Any], out: np.ndarray, truth: np.ndarray, spec: ValidSpec) -> dict[str, Any]:
    """One output's figures; `out` a regression's predictions in the target's units already (`_outputs`)."""
    task = head["task"]
    if task == "classify":
        return {"task": task, **classification(out, truth, head["class_names"])}
    if task == "language":
        return {"task": task, **language(out, truth)}
    stats = head["target_stats"]
    if stats:  # NOTE: the data's targets standardized with its own statistics: back in the target's own units
        truth = truth * stats["std"] + stats["mean"]
    return {"task": task, **regression(out, truth, _target_names(spec, truth))}


def _target_names(spec: ValidSpec, truth: np.ndarray) -> list[str] | None:
    """The target column's name for one value per example (a csv column, an npz array); else numbered columns."""
    target = (spec.values.get("data") or {}).get("target")
    return [target] if target and target != "input" and int(np.prod(truth.shape[1:])) == 1 else None


def _write(folder: Path, document: dict[str, Any]) -> list[Path]:
    """evaluation-<split>.json (evaluation-file-<name>-<8 hex digits of its path>.json for a file), and the confusion
    matrices as a PNG when matplotlib is installed."""
    split = document["split"]
    if split not in SPLITS:  # NOTE: a file: its name in characters any file system takes, and which file it is
        where = hashlib.sha256(os.path.realpath(split).encode("utf-8", "surrogateescape")).hexdigest()[:8]
        split = f"file-{re.sub(r'[^A-Za-z0-9_-]+', '_', Path(split).stem)[:80]}-{where}"
    path = folder / f"evaluation-{split}.json"
    atomic_write(path, (json.dumps(document, indent=2, allow_nan=False) + "\n").encode())  # NOTE: standard JSON
    written = [path]
    confusions = {k: r for k, r in document["outputs"].items() if r["task"] == "classify"}
    if confusions and (png := _confusion_png(confusions)) is not None:
        atomic_write(folder / f"evaluation-{split}-confusion.png", png)
        written.append(folder / f"evaluation-{split}-confusion.png")
    return written


def _confusion_png(reports: dict[str, dict[str, Any]]) -> bytes | None:
    made = panels(len(reports), 6, 5)
    if made is None:
        return None
    fig, axes = made
    for ax, (name, report) in zip(axes, reports.items()):
        matrix, names = np.array(report["confusion"]), [plain(label(str(c["name"]), None)) for c in report["classes"]]
        image = ax.imshow(matrix, cmap="Blues")
        ax.set_title(f"{name}: accuracy {report['accuracy']:.4f}")
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        if len(names) <= MAX_CONFUSION:
            ax.set_xticks(range(len(names)), names, rotation=90)
            ax.set_yticks(range(len(names)), names)
            for (i, j), v in np.ndenumerate(matrix):
                ax.text(j, i, str(v), ha="center", va="center", fontsize=7,
                        color="white" if v > matrix.max() / 2 else "black")  # fmt: skip
        fig.colorbar(image, ax=ax)
    return png(fig)


# *** the printed report ***


def _print(console: Console, name: str | None, report: dict[str, Any]) -> None:
    prefix = f"{name}: " if name else ""
    if report["task"] == "language":
        console.print(f"{prefix}loss {_num(report['loss'])} per token ({report['tokens']} tokens), perplexity "
                      f"{_num(report['perplexity'])}, next-character accuracy {_num(report['accuracy'])}")  # fmt: skip
        return
    if report["task"] == "regress":
        console.print(f"{prefix}MAE {_num(report['mae'])}, RMSE {_num(report['rmse'])}, R^2 {_num(report['r2'])} "
                      "(in the target's units)")  # fmt: skip
        if len(report["targets"]) > 1:
            table = Table("target", "MAE", "RMSE", "R^2")
            for t in report["targets"]:
                table.add_row(Text(label(str(t["name"]))), _num(t["mae"]), _num(t["rmse"]), _num(t["r2"]))
            console.print(table)
        return
    top = f", top-{report['top_k']['k']} {_num(report['top_k']['accuracy'])}" if "top_k" in report else ""
    top += f", AUC {_num(report['auc'])}" if "auc" in report else ""
    macro = report["macro"]
    console.print(f"{prefix}accuracy {_num(report['accuracy'])}{top}; macro precision {_num(macro['precision'])}, "
                  f"recall {_num(macro['recall'])}, F1 {_num(macro['f1'])}")  # fmt: skip
    table = Table("class", "precision", "recall", "F1", "support")
    for c in report["classes"]:
        table.add_row(Text(label(str(c["name"]))), _num(c["precision"]), _num(c["recall"]), _num(c["f1"]),
                      str(c["support"]))  # fmt: skip
    console.print(table)
    names = [Text(label(str(c["name"]))) for c in report["classes"]]  # NOTE: Text: a class '[bold]x' is not markup
    if len(names) > MAX_CONFUSION:
        console.print(f"(the confusion matrix of {len(names)} classes is in the JSON)")
        return
    matrix = Table("true \\ predicted", *[Column(header=n) for n in names], title="confusion matrix")
    for row_name, row in zip(names, report["confusion"]):
        matrix.add_row(row_name, *[str(v) for v in row])
    console.print(matrix)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
