"""`specgrad train SPEC`: validate, load the data, train with a progress bar, and write a run folder."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from specgrad import Device
from specgrad.device import DeviceUnavailable
from specgrad.spec.errors import SpecError
from specgrad.spec.trainer import Interrupted, NonFiniteLoss, Run, Trainer, new_run_folder, write_resolved_spec
from specgrad.spec.validate import validate_file


def train(spec_path: Path, overrides: list[str], device: str | None, out: Path, epochs: int | None,
          steps: int | None, resume: Path | None = None) -> None:  # fmt: skip
    try:
        spec = validate_file(spec_path, overrides)
        if device is not None:
            Device.DEFAULT = device
        trainer = Trainer.create(spec, epochs=epochs, steps=steps)
    except SpecError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(1) from None
    except DeviceUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(3) from None
    except ValueError as e:
        typer.echo(f"{spec_path}: error: {e}", err=True)
        raise typer.Exit(1) from None
    if resume is not None:
        if not (resume / "checkpoints").is_dir():
            typer.echo(f"error: {resume} is not a run folder with checkpoints", err=True)
            raise typer.Exit(1)
        run = Run(resume)
    else:
        run = Run(new_run_folder(out, str(spec.values["name"])))
        write_resolved_spec(spec, run.folder)
    total = trainer.epochs * trainer.steps_per_epoch
    typer.echo(f"training {spec.values['name']} on {Device.DEFAULT}: {trainer.epochs} epochs of "
               f"{trainer.steps_per_epoch} steps; run folder {run.folder}")  # fmt: skip
    columns = (TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("step {task.completed}/{task.total}"),
               TextColumn("loss {task.fields[loss]:.4f}"), TextColumn("{task.fields[speed]:.0f} examples/s"),
               TextColumn("{task.fields[valid]}"), TimeRemainingColumn())  # fmt: skip
    started = time.perf_counter()
    try:
        with Progress(*columns, transient=True) as progress:
            bar = progress.add_task("train", total=total, epoch=1, loss=float("nan"), speed=0.0, valid="")

            steps_here = [0]

            def on_step(epoch: int, step: int, loss: float) -> None:
                steps_here[0] += 1
                valid = next((r for r in reversed(run.metrics) if r["split"] == "valid"), None)
                shown = ", ".join(f"valid {k} {v:.3f}" for k, v in (valid or {}).items() if k in ("loss", "accuracy"))
                speed = steps_here[0] * spec.batch_size / max(time.perf_counter() - started, 1e-9)
                progress.update(bar, completed=step, epoch=epoch, loss=loss, speed=speed, valid=shown)

            valid = trainer.fit(run, on_step, resume=resume)
    except NonFiniteLoss as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(4) from None
    except ValueError as e:  # NOTE: a damaged checkpoint or one from another spec, when resuming
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    except Interrupted as e:
        typer.echo(f"interrupted: training state saved to {e.path}; continue with\n"
                   f"  specgrad train {spec_path} --resume {run.folder}", err=True)  # fmt: skip
        raise typer.Exit(130) from None
    except KeyboardInterrupt:  # NOTE: before the first step (compiling): nothing to save
        typer.echo("interrupted before training started", err=True)
        raise typer.Exit(130) from None
    for record in run.metrics:
        if record["split"] == "valid":
            metrics = ", ".join(f"{k} {v:.4f}" for k, v in record.items() if k not in ("split", "epoch", "step"))
            typer.echo(f"epoch {record['epoch']:3d}  valid {metrics}")
    summary = ", ".join(f"{k} {v:.4f}" for k, v in valid.items())
    typer.echo(f"done: {summary}; weights in {run.folder / 'model.safetensors'}")
