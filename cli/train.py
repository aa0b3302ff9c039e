"""`specgrad train SPEC` and `specgrad train --resume RUN_DIR`: validate, load the data, train with a progress bar (a
line per epoch when the output is not a terminal), and write or continue a run folder."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from specgrad.cli.export import EXTENSIONS, write_export
from specgrad.cli.validate import csv_line, data_line

from specgrad import Device
from specgrad.device import is_compute_device
from specgrad.helpers import WriteError
from specgrad.modelspec.errors import SpecError, excerpt, printable
from specgrad.modelspec.validate import ValidSpec, validate_file
from specgrad.train.data import data_widths
from specgrad.train.plots import drawing_ahead
from specgrad.train.run_folder import (
    MetricsLog,
    locked,
    log_extension,
    new_folder,
    new_run_folder,
    newest_checkpoint,
    read_resolved_spec,
    spec_file,
    write_resolved_spec,
)
from specgrad.train.trainer import Interrupted, NonFiniteLoss, OnStep, Summary, Trainer, plural


def with_length(spec: ValidSpec, epochs: int | None, steps: int | None) -> ValidSpec:
    """The spec with --epochs or --steps written into train, so the run folder's resolved spec records them."""
    if epochs is None and steps is None:
        return spec
    train = {**spec.values["train"], "epochs": epochs or spec.values["train"]["epochs"], "steps": steps}
    return dataclasses.replace(spec, values={**spec.values, "train": train})


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def train(spec_path: Path | None, overrides: list[str], device: str | None, out: Path | None, epochs: int | None,
          steps: int | None, resume: Path | None = None, folder: Path | None = None) -> None:  # fmt: skip
    """Train into a new run folder (out/<name>-<n>, or `folder` itself, which must not exist: a sweep's trial), or
    continue the run folder `resume`."""
    if resume is None and spec_path is None:
        raise _fail("error: name a spec to train, or a run folder to continue with --resume RUN_DIR", 2)
    if resume is not None and (overrides or out is not None):
        raise _fail("error: --resume continues a run as it was started, in its own folder (its spec.resolved.yaml, "
                    "with every --set it had; only --epochs or --steps may give it a new length); to change the "
                    "recipe, start a new run", 2)  # fmt: skip
    before = None  # NOTE: the spec of a run whose length --epochs or --steps changes
    try:
        starts_over = resume is None or _starts_over(resume)
        if resume is not None:
            spec, device = read_resolved_spec(resume, init_file=starts_over), _resume_device(resume, device)
            if epochs or steps:
                before, spec = spec, with_length(spec, epochs, steps)
        else:
            spec = with_length(validate_file(spec_file(spec_path), overrides, widths=data_widths), epochs, steps)
        if device is not None:
            Device.DEFAULT = device
        trainer = Trainer.create(spec, init=starts_over)  # NOTE: init: weights, unless a checkpoint replaces them
        if resume is not None:
            folder = resume
        elif folder is not None:
            folder = new_folder(folder)
        else:
            folder = new_run_folder(out or Path("runs"), str(spec.values["name"]))
    except KeyboardInterrupt:  # NOTE: while loading the data or building the model: no run has started
        raise _fail("interrupted before training started", 130) from None
    with locked(folder):  # NOTE: every other error ends in cli/errors.py (a damaged checkpoint when resuming: exit 1)
        if resume is None:
            write_resolved_spec(spec, folder)
        elif spec_path is not None:
            typer.echo(
                printable(f"note: continuing {folder} with its own spec.resolved.yaml ({spec_path} is not read)")
            )
        if before is not None:
            _lengthen(folder, spec, trainer.extension(folder, before, f"--epochs {epochs}" if epochs else
                                                      f"--steps {steps}"))  # fmt: skip
        _train(spec, trainer, folder, resume is not None)


def _lengthen(folder: Path, spec: ValidSpec, record: dict | None) -> None:
    """A run's new length: the `extend` record first (checkpoints of the old length stay the run's own), then the
    resolved spec with the new length (a crash between the two leaves a run that resumes as it was)."""
    if record is None:
        return
    log_extension(folder, record)
    write_resolved_spec(spec, folder)
    old, new = plural(record["total_steps_before"], "step"), plural(record["total_steps"], "step")
    typer.echo(printable(f"lengthening {folder} at step {record['step']}: {old} -> {new}; the learning-rate schedule "
                         "spans the new length"))  # fmt: skip


def _starts_over(folder: Path) -> bool:
    """Whether a run to resume has no checkpoint yet (it starts over from step 0, its init: weights included)."""
    try:
        return newest_checkpoint(folder) is None
    except SpecError:  # NOTE: a damaged checkpoint: resuming reports it
        return False


def _resume_device(folder: Path, device: str | None) -> str | None:
    """The device the run trained on (another one computes other bits), unless --device says otherwise."""
    try:
        found = newest_checkpoint(folder)
    except SpecError:  # NOTE: a damaged checkpoint: resuming reports it, once stray files are cleaned up
        found = None
    trained_on = found[1].get("device") if found else None
    if trained_on is not None and not is_compute_device(trained_on):  # NOTE: metadata is not covered by checksums
        raise SpecError.at(None, f"the checkpoint {found[0]} is damaged (it names the device "
                           f"'{excerpt(trained_on, 40)}', which training does not run on)",
                           "delete it to resume from the one before, or pass --device")  # fmt: skip
    if device is not None and trained_on is not None and Device.canonicalize(device) != trained_on:
        typer.echo(f"note: {folder} trained on {trained_on}; on {device} its weights will not be bit-identical to "
                   "an uninterrupted run")  # fmt: skip
    return device or trained_on


def _train(spec: ValidSpec, trainer: Trainer, folder: Path, resume: bool) -> None:
    spe, total = trainer.steps_per_epoch, trainer.total_steps
    partial = ", the last one partial" if total % spe else ""
    length = f"{plural(total, 'step')} ({plural(trainer.epochs, 'epoch')} of {plural(spe, 'step')}{partial})"
    typer.echo(printable(f"training {spec.values['name']} on {Device.DEFAULT}: {length}; run folder {folder}"))
    typer.echo(data_line(trainer.data))
    if (csv := csv_line(trainer.data)) is not None and (trainer.data.table.no_target or trainer.data.table.missing):
        typer.echo(printable(csv))  # NOTE: rows left out or cells filled: said where the run starts too
    try:
        with _progress(trainer, spec.batch_size) as (on_step, say), drawing_ahead():
            summary = trainer.fit(MetricsLog(folder), resume=resume, on_step=on_step, say=say)
    except NonFiniteLoss as e:
        raise _fail(f"error: {e}", 4) from None
    except Interrupted as e:
        raise _fail(f"interrupted: training state saved to {e.path}; continue with\n"
                    f"  specgrad train --resume {folder}", 130) from None  # fmt: skip
    except KeyboardInterrupt:  # NOTE: before the first step (loading, compiling): the newest checkpoint is kept
        raise _fail(f"interrupted before training started; continue with\n  specgrad train --resume {folder}",
                    130) from None  # fmt: skip
    except WriteError:  # NOTE: a full or read-only disk: cli/errors.py says which file (exit 3); the run can go on
        typer.echo(f"note: training stopped when a file could not be written; once that is fixed, continue with\n"
                   f"  specgrad train --resume {folder}", err=True)  # fmt: skip
        raise
    report(summary)
    write_exports(spec, summary, folder)


def report(s: Summary) -> None:
    """How the run ended: the last metrics, the best one, which weights are final and where they are."""
    shown = ", ".join(f"{k} {v:.4f}" for k, v in s.valid.items() if k in ("loss", "accuracy"))
    best = f"; best valid {s.metric} {s.best:.4f} at epoch {s.best_epoch}" if s.best is not None else ""
    typer.echo(f"done: {('valid ' + shown) if shown else 'no validation split'}{best}")
    which = "the best epoch's" if s.final == "best" else "the last epoch's"
    why = " (no validation metric to pick the best by)" if s.final != s.chosen else ""
    typer.echo(printable(f"final weights ({which}, epoch {s.final_epoch}; train.final_weights: {s.chosen}{why}): "
                         f"{s.weights}"))  # fmt: skip
    if s.last_checkpoint is not None:
        typer.echo(printable(f"last checkpoint: {s.last_checkpoint}"))


def write_exports(spec: ValidSpec, summary: Summary, folder: Path) -> None:
    """The formats the spec's export: lists, written into the run folder from the final weights."""
    for fmt in spec.values["export"]:
        if fmt == "safetensors":
            continue  # NOTE: model.safetensors is that export
        try:
            typer.echo(write_export(spec, summary.weights, fmt, folder / f"model{EXTENSIONS[fmt]}"))
        except Exception:
            typer.echo(f"note: the weights are saved in {summary.weights}, but the {fmt} export failed:", err=True)
            raise  # NOTE: cli/errors.py says why, with its exit code


@contextlib.contextmanager
def _progress(trainer: Trainer, batch_size: int) -> Iterator[tuple[OnStep, Callable[[str], None]]]:
    """(on_step, say): a live bar on a terminal; elsewhere (a pipe, a CI log) only the lines said, each flushed. A line
    said is escaped (it can name a run folder) and never rich markup. The bar's step moves every step; its loss is the
    newest the trainer has read (a few times a second: see trainer.LossWindow)."""
    console = Console()
    if not console.is_terminal:

        def say(line: str) -> None:
            print(printable(line), flush=True)

        yield (lambda epoch, step, loss: None), say
        return
    columns = (TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("step {task.completed}/{task.total}"),
               TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[speed]} examples/s"),
               TimeRemainingColumn())  # fmt: skip
    started, steps_here = time.perf_counter(), [0]
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task("train", total=trainer.total_steps, epoch=1, loss="-", speed="-")

        def on_step(epoch: int, step: int, loss: float | None) -> None:
            steps_here[0] += 1
            speed = steps_here[0] * batch_size / max(time.perf_counter() - started, 1e-9)
            shown = "-" if loss is None else f"{loss:.4f}"
            progress.update(bar, completed=step, epoch=epoch, loss=shown, speed=f"{speed:.0f}")

        yield on_step, lambda line: progress.console.print(printable(line), markup=False, highlight=False)
    sys.stdout.flush()
