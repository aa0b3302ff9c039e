"""The `specgrad` command line through typer's CliRunner."""

from __future__ import annotations

from specgrad.cli.main import app
from typer.testing import CliRunner

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and "specgrad 0.1.0" in result.output


def test_demo_trains() -> None:
    result = runner.invoke(app, ["demo", "--steps", "60", "--device", "CPU"])
    assert result.exit_code == 0, result.output
    loss = float(result.output.split("loss ")[-1].split(",")[0])
    assert loss < 0.5, result.output


def test_demo_unknown_device_exits_3() -> None:
    result = runner.invoke(app, ["demo", "--device", "NOPE"])
    assert result.exit_code == 3
    assert "unknown device 'NOPE'" in result.output
    assert "Traceback" not in result.output


def test_bad_option_exits_2() -> None:
    result = runner.invoke(app, ["demo", "--steps", "zero"])
    assert result.exit_code == 2
