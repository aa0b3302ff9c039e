"""PNG figures for the run folder and the CLI, with matplotlib (the `plot` extra) when it is installed.

Figures are made without pyplot: no global figure registry to close, no GUI backend to choose, and less to import
(a training writes metrics.png at its end, so this is on the time to result).
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Iterator
from typing import Any

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
