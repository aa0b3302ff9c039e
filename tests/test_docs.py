"""Every docs example is a tested program."""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_abstractions_tour_runs() -> None:
    runpy.run_path(str(ROOT / "docs" / "abstractions.py"), run_name="__main__")


def test_readme_python_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks, "README.md should show Python usage"
    for block in blocks:
        subprocess.run([sys.executable, "-c", block], check=True, cwd=ROOT, capture_output=True, timeout=120)


def test_readme_has_two_command_quick_start_matching_ci() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", quick, flags=re.S)
    assert len(commands) == 2, commands
    assert commands[1] in (ROOT / ".ci" / "run").read_text()


def test_python_api_guide_trains_digits_to_97_percent(device: str) -> None:
    """docs/python-api.md, run in order as one program: an MLP on the bundled digits with Adam, a warm-up + cosine
    schedule and TinyJit, asserting >= 97% validation accuracy, then a safetensors round trip."""
    from specgrad import Device

    before = Device.DEFAULT
    Device.DEFAULT = device
    try:
        namespace: dict = {"__name__": "__main__"}
        for block in re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python-api.md").read_text(), flags=re.S):
            exec(compile(block, "docs/python-api.md", "exec"), namespace)
        assert namespace["valid_accuracy"] >= 0.97
    finally:
        Device.DEFAULT = before


def test_tutorial_commands_give_what_the_tutorial_shows(monkeypatch) -> None:
    """Each `$ specgrad ...` in docs/tutorial.md runs from the repo root; shown output must match, errors exit 1."""
    import shlex

    from specgrad.cli.main import app
    from typer.testing import CliRunner

    monkeypatch.chdir(ROOT)
    blocks = re.findall(r"```console\n(.*?)```", (ROOT / "docs" / "tutorial.md").read_text(), flags=re.S)
    assert len(blocks) >= 3
    for block in blocks:
        command, *shown = block.strip().splitlines()
        assert command.startswith("$ specgrad ")
        result = CliRunner().invoke(app, shlex.split(command)[2:])
        expect_error = any(": error:" in line for line in shown)
        assert result.exit_code == (1 if expect_error else 0), (command, result.output)
        for line in shown:
            assert line in result.output, (command, line, result.output)
