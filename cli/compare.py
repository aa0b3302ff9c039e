"""`specgrad compare RUN_DIR...`: runs side by side (specgrad.train.compare reads them): a table of each run's final
and best validation metrics and test figures, the spec keys that differ with each run's value, and with --plot one
PNG of their curves."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console as RichConsole
from rich.table import Column, Table
from rich.text import Text
from specgrad.cli.console import Console
from specgrad.cli.errors import check_output_option

from specgrad.helpers import atomic_write
from specgrad.modelspec.errors import SpecError, label, printable
from specgrad.train.compare import (
    MAX_LINES,
    MAX_METRICS,
    Run,
    check_rank_by,
    curves_png,
    differences,
    plotted,
    ranked,
    read_run,
    shown,
)
from specgrad.train.plots import MAX_PANELS

MAX_COLUMNS = 6  # NOTE: differing keys shown as table columns; more go into a table of their own


def compare(folders: list[Path], as_json: bool, plot: Path | None, rank_by: str | None = None) -> None:
    check_rank_by(rank_by)
    if plot is not None:
        check_output_option(plot, "--plot")  # NOTE: before any work; atomic_write checks again when writing
        if plot.suffix.lower() != ".png":  # NOTE: PNG bytes under another name would open as a broken file
            raise SpecError.at(None, f"--plot {printable(str(plot))}: the plot is a PNG image, so its name must end "
                               "in .png", f"name it {printable(plot.stem or 'curves')}.png")  # fmt: skip
    seen: dict[Path, Path] = {}
    for f in folders:
        if (real := f.resolve()) in seen:
            raise SpecError.at(None, f"{f} is named twice (as {seen[real]} before)", "name each run once")
        seen[real] = f
    runs = [read_run(f, rank_by) for f in folders]
    runs = ranked(runs) if rank_by is not None else runs  # NOTE: else in the order given
    for r in runs:
        log = printable(str(r.folder / "metrics.jsonl"))
        if r.skipped:
            lines = ", ".join(map(str, r.skipped[:5])) + (", ..." if r.skipped_count > 5 else "")
            typer.echo(f"note: {log}: line{'s' * (r.skipped_count > 1)} {lines} could not be read (cut short or "
                       "damaged) and are left out", err=True)  # fmt: skip
        if r.metrics_left_out:
            typer.echo(f"note: {log} names more than {MAX_METRICS} metrics: the first {MAX_METRICS} are shown",
                       err=True)  # fmt: skip
    if plot is not None:
        plot_notes(runs)
    diff = differences([r.spec for r in runs])
    png = curves_png(runs, labels(runs, diff)) if plot is not None else None
    if plot is not None and png is None:
        raise SpecError.at(None, "--plot needs matplotlib, which is not installed", "pip install 'specgrad[plot]'")
    if png is not None:
        atomic_write(plot, png)
    if as_json:
        doc = {"runs": [r.as_json() for r in runs], "differences": diff, "plot": str(plot) if plot else None}
        typer.echo(json.dumps(doc, indent=2))
        return
    console = Console(width=160)
    print_table(console, runs, diff)
    if plot is not None:
        console.print(f"wrote {printable(str(plot))}")


def plot_notes(runs: list[Run]) -> None:
    """What the plot leaves out (it is bounded in panels, runs and points before it is drawn), said once."""
    _, left_out = plotted(runs)
    if left_out:
        shown_names = ", ".join(printable(n) for n in left_out[:5]) + (", ..." if len(left_out) > 5 else "")
        typer.echo(f"note: the plot has {MAX_PANELS} panels at most: {len(left_out)} curves are left out of it "
                   f"({shown_names}); they are in the table", err=True)  # fmt: skip
    if len(runs) > MAX_LINES:
        typer.echo(f"note: the plot draws the first {MAX_LINES} of the {len(runs)} runs", err=True)


def labels(runs: list[Run], diff: dict[str, list]) -> list[str]:
    """Each run's name in a legend: its folder and, when few keys differ, their values."""
    shown_keys = list(diff)[:3]
    return [r.folder.name + "".join(f" {k}={shown(diff[k][i])}" for k in shown_keys) for i, r in enumerate(runs)]


def print_table(console: RichConsole, runs: list[Run], diff: dict[str, list]) -> None:
    """One row per run, in the given order: the differing spec keys (up to MAX_COLUMNS as columns), epochs, the last
    training loss, the last validation metrics, the best watched metric and its epoch, and the test figures. Names and
    values from the run folders are plain text (_cell), never rich markup."""
    keys = list(diff)[:MAX_COLUMNS] if len(diff) <= MAX_COLUMNS else []
    finals = list(dict.fromkeys(k for r in runs for k in r.final))
    tests = list(dict.fromkeys(k for r in runs for k in r.test))
    headers = ["run", *keys, "epochs", "train loss", *(f"valid {k}" for k in finals), "best (epoch)",
               *(f"test {k}" for k in tests)]  # fmt: skip
    table = Table(*(Column(header=_cell(h)) for h in headers))
    for i, r in enumerate(runs):
        state = "" if r.finished else " (unfinished)"
        best = f"{r.metric} {_num(r.best)} ({r.best_epoch})" if r.best is not None else "-"
        table.add_row(_cell(r.folder.name + state), *(_cell(shown(diff[k][i])) for k in keys), str(r.epochs),
                      _num(r.train_loss), *(_num(r.final.get(k)) for k in finals), _cell(best),
                      *(_num(r.test.get(k)) for k in tests))  # fmt: skip
    console.print(table)
    if len(diff) > MAX_COLUMNS:
        by_key = Table("spec key", *(Column(header=_cell(r.folder.name)) for r in runs), title="spec keys that differ")
        for k, values in diff.items():
            by_key.add_row(_cell(k), *(_cell(shown(v)) for v in values))
        console.print(by_key)
    elif not diff and len(runs) > 1:
        console.print("(the runs' specs are the same)")


def _cell(text: str) -> Text:
    """Text from a run folder (a metric or folder name, a spec value) as a table shows it: escaped, not markup."""
    return Text(label(text, None))


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
