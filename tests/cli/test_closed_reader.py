"""A reader that goes away (`specgrad ... | head`) ends every command that prints the same way, as docs/cli.md
promises: exit 141 (128 + SIGPIPE), nothing on stderr. evaluate, validate and compare print through rich, whose
Console exits 1 on a broken pipe by itself (issue 30: `evaluate | head -c 1` ended with 1 and no word said), and so
do --help (typer's rich formatting) and --version (click), printed before any command's handled() runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

from specgrad.device import Device
from tests.hostile.harness import TINY

pytestmark = pytest.mark.xdist_group("closed-reader")  # NOTE: on one worker: the runs are trained once

runner = CliRunner()
BOOT = "from specgrad.cli.main import app\napp(prog_name='specgrad')\n"  # NOTE: what the `specgrad` script runs
LM = """\
specgrad: 1
name: lm
seed: 0
input: {shape: [8], dtype: int32}
model:
  - {embedding: {vocab: 128, dim: 8}}
  - {linear: 128}
data: {source: text, corpus: sonnets, context: 8, batch_size: 4}
train: {steps: 3, lr: 0.01}
"""
CPU = ("--device", "CPU")
COMMANDS = {
    "validate": ("validate", "tiny.yaml"),
    "validate-run": ("validate", "runs/tiny-1"),
    "train": ("train", "tiny.yaml", "--out", "more", *CPU),
    "run": ("run", "runs/tiny-1", "--input", "x.json", *CPU),
    "run-json": ("run", "runs/tiny-1", "--input", "x.json", "--json", *CPU),
    "evaluate": ("evaluate", "runs/tiny-1", *CPU),
    "evaluate-json": ("evaluate", "runs/tiny-1", "--json", *CPU),
    "compare": ("compare", "runs/tiny-1", "runs/tiny-2"),
    "export": ("export", "runs/tiny-1", "--format", "safetensors", "--out", "copy.safetensors"),
    "generate": ("generate", "runs/lm-1", "--prompt", "Shall", "--tokens", "5", *CPU),
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of a tiny classifier, one of a character model, and an example for `run`."""
    root = tmp_path_factory.mktemp("closed-reader")
    (root / "tiny.yaml").write_text(TINY)
    (root / "lm.yaml").write_text(LM)
    (root / "x.json").write_text("[[0.5, 0.1]]")
    before = Device.DEFAULT  # NOTE: train sets it in-process; a module fixture runs outside conftest's guard
    try:
        for spec in ("tiny.yaml", "tiny.yaml", "lm.yaml"):
            done = runner.invoke(app, ["train", str(root / spec), "--out", str(root / "runs"), *CPU])
            assert done.exit_code == 0, done.output
    finally:
        Device._default = before
    return root


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_reader_gone_before_the_first_line_ends_the_command_with_141(project: Path, name: str) -> None:
    """stdout is a pipe whose reading end is closed, so the first write fails whatever the timing."""
    assert to_a_closed_reader(COMMANDS[name], project, 300) == (141, "")


def to_a_closed_reader(args: tuple[str, ...], cwd: Path, timeout: int) -> tuple[int, str]:
    """(exit code, stderr) of the command with a stdout whose reader is already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-c", BOOT, *args], cwd=cwd, stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=timeout)  # fmt: skip
    finally:
        os.close(write)
    return done.returncode, done.stderr


# NOTE: printed by typer's rich formatting and click before any command runs (no run folder needed)
HELP = {"help": ("--help",), "train-help": ("train", "--help"), "sweep-help": ("sweep", "--help"),
        "no-arguments": (), "version": ("--version",)}  # fmt: skip


@pytest.mark.parametrize("name", list(HELP))
def test_help_to_a_reader_gone_ends_with_141(tmp_path: Path, name: str) -> None:
    """--help (and the help a bare `specgrad` prints, and --version) end as the commands do: rich's Console and click
    each exit 1 on a broken pipe by themselves."""
    assert to_a_closed_reader(HELP[name], tmp_path, 60) == (141, "")


def test_help_to_a_reader_still_there_is_unchanged(tmp_path: Path) -> None:
    """Only a reader gone turns exit 1 into 141: the help itself, and a bad command line (exit 2), are as before."""
    done = subprocess.run([sys.executable, "-c", BOOT, "train", "--help"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0 and "--resume" in done.stdout and done.stderr == "", done
    done = subprocess.run([sys.executable, "-c", BOOT, "no-such-command"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 2 and "No such command" in done.stderr, done
