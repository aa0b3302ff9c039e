"""The training benchmark runs end to end (it prints figures; tests never assert on time)."""

from __future__ import annotations

import pytest

from specgrad.bench import main


def test_training_benchmark_prints_every_workload(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--steps", "1"])
    out = capsys.readouterr().out
    assert "MLP 784-256-10" in out and "CNN 2 convs" in out and "TinyJit" in out


def test_validation_benchmark_prints_each_spec(capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    main(["--validate", str(Path(__file__).resolve().parents[2] / "specs")])
    out = capsys.readouterr().out
    assert "validate digits_mlp.yaml" in out and " ms" in out
