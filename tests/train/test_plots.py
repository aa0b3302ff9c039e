"""metrics.png drawn ahead (specgrad/train/plots.py): a child process imports matplotlib while a training runs and
draws the figure at its end, the same bytes as drawing it in the command's own process; whatever goes wrong with the
child, the figure is drawn in-process instead."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from specgrad.train import plots
from specgrad.train.trainer import write_plot

pytest.importorskip("matplotlib")

RECORDS = [
    *({"split": "train", "epoch": e, "step": 10 * e, "loss": 1.0 / e} for e in (1, 2, 3)),
    *({"split": "train_epoch", "epoch": e, "step": 10 * e, "loss": 1.2 / e, "lr": 0.01} for e in (1, 2, 3)),
    *({"split": "valid", "epoch": e, "step": 10 * e, "loss": 1.1 / e, "accuracy": 0.3 * e} for e in (1, 2, 3)),
    {"split": "valid", "epoch": 4, "step": 40, "loss": math.nan, "accuracy": 0.95},  # NOTE: a hole in the loss curve
]
BEST = ("accuracy", 4)


def in_process() -> bytes | None:
    drawn = [r for r in RECORDS if r["split"] in plots.SPLITS]
    return plots.draw_metrics(plots.metric_names(RECORDS), drawn, BEST)


@pytest.fixture
def a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child is started here too (this test process has imported matplotlib, and may run on one core)."""
    monkeypatch.setattr(plots, "is_worth_a_child", lambda: True)


def test_the_child_draws_the_same_figure(a_child: None, tmp_path: Path) -> None:
    with plots.drawing_ahead():
        child = plots._AHEAD.get()
        assert child is not None
        write_plot(tmp_path, RECORDS, print, BEST)
        assert child.returncode == 0, "the child answered"
    assert (tmp_path / "metrics.png").read_bytes() == in_process()


def test_a_child_that_fails_leaves_the_figure_to_the_process(a_child: None, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:  # fmt: skip
    for child in ("import sys; sys.exit(3)", "import sys; sys.stdout.write('nonsense')", "raise SystemExit"):
        monkeypatch.setattr(plots, "CHILD", child)
        with plots.drawing_ahead():
            assert plots.metrics_png(RECORDS, BEST) == in_process()
    monkeypatch.setattr(plots, "ANSWER_S", 0.5)
    monkeypatch.setattr(plots, "CHILD", "import time; time.sleep(60)")
    with plots.drawing_ahead():
        hung = plots._AHEAD.get()
        assert plots.metrics_png(RECORDS, BEST) == in_process(), "one that does not answer in time"
    assert hung is not None and hung.returncode is not None, "and is ended with the block"


def test_a_child_without_matplotlib_says_so(a_child: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(plots, "CHILD", "import sys; sys.stdin.read(); sys.stdout.buffer.write(b'missing')")
    said: list[str] = []
    with plots.drawing_ahead():
        write_plot(tmp_path, RECORDS, said.append, BEST)
    assert said == [f"{plots.MISSING}, so there is no metrics.png"] and not (tmp_path / "metrics.png").exists()


def test_a_child_never_asked_is_ended_with_the_block(a_child: None) -> None:
    with plots.drawing_ahead():
        child = plots._AHEAD.get()
    assert child is not None and child.returncode is not None
    assert plots._AHEAD.get() is None


def test_a_child_only_where_a_core_is_to_spare(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "matplotlib.figure", raising=False)
    monkeypatch.setattr(plots, "cores", lambda: 2)
    for others, spare in ((0, True), (0.99, True), (1, False), (4.3, False)):
        monkeypatch.setattr(plots, "others_running", lambda others=others: others)
        assert plots.has_a_spare_core() is spare and plots.is_worth_a_child() is spare, others
    monkeypatch.setattr(plots, "cores", lambda: 1)
    monkeypatch.setattr(plots, "others_running", lambda: 0)
    assert not plots.is_worth_a_child(), "one core: the child would take the training's"


def test_other_threads_are_counted_now_not_over_the_last_minute(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """/proc/loadavg's runnable count less this thread; the one-minute average only where the file is missing or not
    Linux's, and nothing where neither exists."""
    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(plots, "LOADAVG", str(loadavg))
    monkeypatch.setattr(plots.os, "getloadavg", lambda: (3.5, 3.0, 2.0))
    for text, others in (("3.50 3.00 2.00 1/245 1234", 0), ("3.50 3.00 2.00 4/245 1234", 3), ("0 0 0 0/1 1", 0)):
        loadavg.write_text(text + "\n")
        assert plots.others_running() == others, text
    for text in ("garbage", "1 2 3 x/y 4", ""):
        loadavg.write_text(text)
        assert plots.others_running() == 3.5, text
    loadavg.unlink()
    assert plots.others_running() == 3.5

    def no_loadavg() -> tuple[float, float, float]:
        raise OSError("none here")

    monkeypatch.setattr(plots.os, "getloadavg", no_loadavg)
    assert plots.others_running() == 0.0


def test_no_child_where_matplotlib_is_imported_already(monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.figure  # noqa: F401

    monkeypatch.setattr(plots, "has_a_spare_core", lambda: True)
    assert not plots.is_worth_a_child(), "drawing here takes 0.1 s: a child would only add its start"
    with plots.drawing_ahead():
        assert plots._AHEAD.get() is None
        assert plots.metrics_png(RECORDS, BEST) == in_process()


def test_the_child_is_this_specgrad_and_ignores_ctrl_c(tmp_path: Path) -> None:
    """It runs the checkout the command runs (not another installed copy) from any folder, and Ctrl-C, which reaches
    every process of the terminal's group, is the training's to handle: the child still answers."""
    root = str(Path(plots.__file__).resolve().parents[2])
    ignore = "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    assert ignore in plots.CHILD
    code = plots.CHILD.replace(ignore, ignore + "import os\nos.kill(os.getpid(), signal.SIGINT)\n")
    drawn = [r for r in RECORDS if r["split"] in plots.SPLITS]
    job = plots.json.dumps({"names": plots.metric_names(RECORDS), "records": drawn, "best": list(BEST)}).encode()
    res = subprocess.run([sys.executable, "-c", code, root], input=job, capture_output=True, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout == b"png:" + in_process()
