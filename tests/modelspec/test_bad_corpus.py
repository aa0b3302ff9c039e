"""The corpus of bad specs in tests/modelspec/bad/, through the command line: each exits 1 with no traceback, and its
first error is the one its `# error:` line names, at that line:col (in the spec, or in another file it names: a base
spec, or a data file beside it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

BAD = sorted((Path(__file__).resolve().parent / "bad").glob("*.yaml"))


def expected(path: Path) -> tuple[str | None, str, str]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    match = re.search(r"# error: (?:([^\s:]+\.(?:yaml|csv)):)?(\d+:\d+): (.*)", text)
    assert match, f"{path.name} has no '# error: LINE:COL: message' line"
    return match.group(1), match.group(2), match.group(3)


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_spec_exits_1_with_its_located_error(path: Path) -> None:
    file, where, message = expected(path)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    first = result.output.strip().splitlines()[0].replace(f"{path.parent}/", "")
    assert f"{file or path.name}:{where}: error: " in first, first
    assert message.split(" (")[0][:40] in first, (message, first)


def test_the_corpus_is_large() -> None:
    assert len(BAD) >= 20
