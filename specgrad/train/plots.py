"""PNG figures for the run folder and the CLI, with matplotlib (the `plot` extra) when it is installed.

Figures are made without pyplot: no global figure registry to close, no GUI backend to choose, and less to import
(a training writes metrics.png at its end, so this is on the time to result).
"""

from __future__ import annotations

import io
from typing import Any

MISSING = "matplotlib is not installed (pip install 'specgrad[plot]')"


def panels(count: int, width: float, height: float) -> tuple[Any, list[Any]] | None:
    """A figure of `count` panels side by side, each width x height inches, and its axes; None without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    fig = Figure(figsize=(width * count, height))
    return fig, list(fig.subplots(1, count, squeeze=False)[0])


def png(fig: Any, margins: tuple[float, float, float, float] | None = None) -> bytes:
    """The figure as PNG bytes. margins (left, bottom, right, top, in inches) place the panels at once; without them
    matplotlib measures every label first (tight_layout), which draws the figure twice."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if margins is None:
        fig.tight_layout()
    else:
        width, height = fig.get_size_inches()
        left, bottom, right, top = margins
        fig.subplots_adjust(left=left / width, bottom=bottom / height, right=1 - right / width, top=1 - top / height,
                            wspace=0.3)  # fmt: skip
    buf = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buf)
    return buf.getvalue()
