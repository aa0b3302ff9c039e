"""Attacks on issue 31's faster training loop (device feed, loss window, captured validation, the plot child): each
test here failed on the code as first written."""

from __future__ import annotations

from pathlib import Path

import pytest

from specgrad.train import plots

RECORDS = [
    {"split": "train_epoch", "epoch": 1, "step": 10, "loss": 1.2, "lr": 0.01},
    {"split": "valid", "epoch": 1, "step": 10, "loss": 1.1, "accuracy": 0.3},
]
BEST = ("accuracy", 1)


def test_the_plot_child_imports_nothing_from_the_current_folder(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:  # fmt: skip
    """`python -c` puts the current folder first on sys.path, so a json.py or select.py in the folder a training runs
    in (a data folder from someone else) was run by the child; the command itself never imports from there."""
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(plots, "is_worth_a_child", lambda: True)
    marker = tmp_path / "ran"
    for name in ("json", "select", "matplotlib"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\nraise ImportError\n")
    monkeypatch.chdir(tmp_path)
    with plots.drawing_ahead():
        child = plots._AHEAD.get()
        assert child is not None
        figure = plots.metrics_png(RECORDS, BEST)
        assert child.returncode == 0, "the child answered"
    assert not marker.exists(), f"the child ran {marker.read_text()}.py from the current folder"
    drawn = [r for r in RECORDS if r["split"] in plots.SPLITS]
    assert figure == plots.draw_metrics(plots.metric_names(RECORDS), drawn, BEST)
