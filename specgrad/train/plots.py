"""PNG figures for the run folder and the CLI, with matplotlib (the `plot` extra) when it is installed.

Figures are made without pyplot: no global figure registry to close, no GUI backend to choose, and less to import
(a training writes metrics.png at its end, so this is on the time to result). Importing matplotlib takes about 0.4 s,
so where a core is to spare a training starts a child process that imports it, and draws a throwaway figure, while
the steps run (`drawing_ahead`); at the end that child draws metrics.png (about 0.1 s), the same bytes as drawn here.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import json
import math
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from importlib.util import find_spec
from typing import Any

from specgrad.helpers import cores
from specgrad.modelspec.errors import excerpt

MISSING = "matplotlib is not installed (pip install 'specgrad[plot]')"
# NOTE: bounds on every figure, whatever its data says (3,000 metric names would be a 1.6 million pixel wide image):
# at most MAX_PANELS panels, and at most MAX_INCHES a side (at matplotlib's 100 dpi, 8,000 pixels)
MAX_PANELS = 12
MAX_INCHES = 80.0
MAX_VALUE = 3.4028234663852886e38  # NOTE: float32's largest: metrics are means of float32 values; far beyond it,
# matplotlib's tick arithmetic overflows (a curve from -1e308 to 1e308 is an exception, not a plot)
MAX_TEXT = 80  # NOTE: characters of a title, label or tick label taken from a file


def plottable(v: Any) -> bool:
    """Whether a value from a file can be a point of a curve: a finite number no larger than MAX_VALUE."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= MAX_VALUE


def plain(text: str) -> str:
    """Text from a file (a metric, class or folder name) as matplotlib shows it literally, on one line, at most MAX_TEXT
    characters: control, format and bidi characters escaped as a terminal's text is (ESC or BEL has no glyph: drawn, it
    is a box and a warning quoting the raw byte), and a '$' escaped (it would start math text, which matplotlib parses
    and can refuse with an exception)."""
    return excerpt(text, MAX_TEXT).replace("$", r"\$")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """matplotlib's warnings silenced while a figure is built and drawn: a name from a file in a script the font lacks
    (CJK, Thai) warns "Glyph ... missing" once per text drawn, with a source line, on the command's stderr.
    NOTE: only around figure code: every warning raised inside is matplotlib's (or numpy's under it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def panels(count: int, width: float, height: float) -> tuple[Any, list[Any]] | None:
    """A figure of `count` panels side by side (at most MAX_PANELS: callers draw into the axes they get, so the rest
    are left out), each width x height inches (less when the figure would pass MAX_INCHES), and its axes; None without
    matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    count = max(1, min(count, MAX_PANELS))
    fig = Figure(figsize=(min(width * count, MAX_INCHES), min(height, MAX_INCHES)))
    return fig, list(fig.subplots(1, count, squeeze=False)[0])


def png(fig: Any, margins: tuple[float, float, float, float] | None = None) -> bytes:
    """The figure as PNG bytes. margins (left, bottom, right, top, in inches) place the panels at once; without them
    matplotlib measures every label first (tight_layout), which draws the figure twice."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buf = io.BytesIO()
    with quiet():
        if margins is None:
            fig.tight_layout()
        else:
            width, height = fig.get_size_inches()
            left, bottom, right, top = margins
            fig.subplots_adjust(left=left / width, bottom=bottom / height, right=1 - right / width,
                                top=1 - top / height, wspace=0.3)  # fmt: skip
        FigureCanvasAgg(fig).print_png(buf)
    return buf.getvalue()


# *** metrics.png: the run folder's curves, drawn by a child process that imported matplotlib while training ran ***

SPLITS = ("train_epoch", "valid")  # NOTE: the records metrics.png draws (per epoch, training and validation)
MARGINS = (0.75, 0.55, 0.15, 0.35)  # NOTE: inches: room for a loss's tick labels such as 0.0005 or 1e-05 and titles
ANSWER_S = 60.0  # NOTE: the most a training waits for its child's figure before it draws the figure itself


def metric_names(records: list[dict[str, Any]]) -> list[str]:
    """The panels of metrics.png: the loss, and the accuracy where any record has one."""
    return ["loss"] + (["accuracy"] if any("accuracy" in r for r in records) else [])


def draw_metrics(names: list[str], records: list[dict[str, Any]], best: tuple[str, int | None]) -> bytes | None:
    """metrics.png: a panel per name, the training and validation curves per epoch, the best epoch (by the watched
    validation metric, `best`) marked on each; None without matplotlib."""
    made = panels(len(names), 5, 4)
    if made is None:
        return None
    from matplotlib.ticker import MaxNLocator

    fig, axes = made
    for ax, name in zip(axes, names):
        for split in SPLITS:
            rows = [r for r in records if r["split"] == split and plottable(r.get(name))]
            if rows:
                label = "train" if split == "train_epoch" else "valid"
                ax.plot([r["epoch"] for r in rows], [r[name] for r in rows], marker=".", label=label)
        metric, epoch = best
        if epoch is not None:
            ax.axvline(epoch, color="gray", linestyle="--", linewidth=1,
                       label=plain(f"best valid {metric} (epoch {epoch})"))  # fmt: skip
        ax.set_title(name)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    # NOTE: fixed margins: a third of the time tight_layout takes
    return png(fig, margins=MARGINS)


def warm_up() -> None:
    """matplotlib imported and a figure of metrics.png's kind drawn and dropped: the fonts loaded and laid out once."""
    records = [{"split": split, "epoch": 1, "loss": 0.5, "accuracy": 0.5} for split in SPLITS]
    draw_metrics(["loss", "accuracy"], records, ("accuracy", 1))


# NOTE: the child ignores Ctrl-C (the parent stops the training and ends the child), warms up only while no job is
# waiting (a short training asks before the import is done), and answers "png:" and the bytes, or "missing" without
# matplotlib; an empty job (the parent closed its end) is no question. It ends with os._exit: the interpreter's
# shutdown with matplotlib loaded took 0.1-0.2 s, which the command would wait for. Its first line drops the current
# folder that `python -c` puts first on sys.path: a json.py or matplotlib.py there would be run (the command itself,
# an installed script, never imports from there)
CHILD = r"""
import sys
sys.path[:] = [sys.argv[1], *(p for p in sys.path if p)]
import json, os, select, signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
from specgrad.train.plots import draw_metrics, warm_up
if not select.select([sys.stdin], [], [], 0)[0]:
    warm_up()
job = sys.stdin.buffer.read()
if job:
    job = json.loads(job)
    png = draw_metrics(job["names"], job["records"], tuple(job["best"]))
    sys.stdout.buffer.write(b"missing" if png is None else b"png:" + png)
    sys.stdout.buffer.flush()
os._exit(0)
"""

_AHEAD: contextvars.ContextVar[subprocess.Popen | None] = contextvars.ContextVar("plot_ahead", default=None)


def is_worth_a_child() -> bool:
    """Whether a child should import matplotlib meanwhile: it is installed and not imported here yet (then drawing here
    takes 0.1 s), and a core is to spare besides the training's (where the cores are busy, as in a sweep running a trial
    per core, the child would only take the trainings' time: measured, a busy 2-core machine's command took longer)."""
    return "matplotlib.figure" not in sys.modules and has_a_spare_core() and find_spec("matplotlib") is not None


def has_a_spare_core() -> bool:
    """A core is free besides the training's: fewer threads of other processes are running now than the cores this
    process may use less one. "Now" is the kernel's count of runnable threads (/proc/loadavg), not the one-minute load
    average, which stays high for a minute after a previous command ended (a series of trainings, one after another,
    never got a child). The training's own threads (THREADS) do not count: a small model's kernels leave the other
    cores idle most of the time (measured on 2 cores, all of them training digits_mlp: 1.47 s with the child, 1.82 s
    without); other processes do (a sweep running a trial per core)."""
    return others_running() < cores() - 1


LOADAVG = "/proc/loadavg"  # NOTE: Linux: "0.52 0.58 0.59 3/245 1234", the fourth field runnable/all threads


def others_running() -> float:
    """Threads of other processes running or ready to run now: /proc/loadavg's count less this one; the one-minute
    load average where there is no such file (not Linux), 0 where there is neither (Windows)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(LOADAVG) as f:
            return max(int(f.read().split()[3].split("/")[0]) - 1, 0)
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


@contextlib.contextmanager
def drawing_ahead() -> Iterator[None]:
    """metrics_png in this block asks a child process started here, which imports matplotlib while the block runs
    (where is_worth_a_child); the child is ended with the block, answered or not."""
    proc = None
    if is_worth_a_child():
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # NOTE: this specgrad's
        with contextlib.suppress(OSError):
            proc = subprocess.Popen([sys.executable, "-c", CHILD, root], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)  # fmt: skip
    token = _AHEAD.set(proc)
    try:
        yield
    finally:
        _AHEAD.reset(token)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc is not None:
            proc.stdin.close()
            proc.stdout.close()


def metrics_png(records: list[dict[str, Any]], best: tuple[str, int | None]) -> bytes | None:
    """metrics.png's bytes (draw_metrics), from the child drawing ahead where there is one and it answers, else drawn
    here; None without matplotlib."""
    names, proc = metric_names(records), _AHEAD.get()
    drawn = [r for r in records if r["split"] in SPLITS]
    if proc is not None and (answer := _ask(proc, names, drawn, best)) is not None:
        return answer[0]
    return draw_metrics(names, drawn, best)


def _ask(proc: subprocess.Popen, names: list[str], records: list[dict[str, Any]], best: tuple[str, int | None]
         ) -> tuple[bytes | None] | None:  # fmt: skip
    """The child's figure (in a tuple: (None,) without matplotlib), or None where it did not answer in time or
    crashed. NOTE: records hold only JSON's values (they come from metrics.jsonl), NaN and infinity included."""
    job = json.dumps({"names": names, "records": records, "best": list(best)}).encode()
    try:
        out, _ = proc.communicate(job, timeout=ANSWER_S)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None  # NOTE: drawing_ahead ends it
    if proc.returncode != 0:
        return None
    if out == b"missing":
        return (None,)
    return (out[4:],) if out.startswith(b"png:") else None
