"""Bounds on the spec language, as a spec from someone else would test them: extends depth and size, expanded values
and text, expression length and value, layers after blocks are repeated, and the names that become folders, values
and table rows. Each ends, within a time and memory bound (a guard against hangs, not a speed test), with a located
error (exit 1) that names the limit and its value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from specgrad.cli.main import app
from test_hostile_reading import bounded
from typer.testing import CliRunner

import specgrad.modelspec.resolve as resolve_module
from specgrad.modelspec.graph import MAX_STEPS
from specgrad.modelspec.loader import MAX_BYTES, MAX_TEXT
from specgrad.modelspec.resolve import MAX_EXPR, MAX_EXTENDS

HEAD = "specgrad: 1\nname: t\ninput: {shape: [4]}\n"
runner = CliRunner()


def validate(spec: Path, seconds: float = 20.0, mib: int = 256) -> tuple[int, str]:
    with bounded(seconds, mib):
        result = runner.invoke(app, ["validate", str(spec)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def refused(spec: Path, where: str, message: str) -> str:
    """validate exits 1 with `message` as its first error, at `where` ('file:line:col' or 'line:col' in the spec)."""
    code, output = validate(spec)
    where = where if where.count(":") == 2 else f"{spec}:{where}"
    assert code == 1 and output.startswith(f"{where}: error: {message}"), output
    assert len(output) < 20_000, "a bounded error prints a bounded message"
    return output


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# *** extends ***


def chain(folder: Path, n: int) -> Path:
    """c0.yaml extends c1.yaml ... extends c{n}.yaml, the one with the settings."""
    for i in range(n):
        write(folder / f"c{i}.yaml", f"extends: c{i + 1}.yaml\n")
    write(folder / f"c{n}.yaml", HEAD + "model: [relu]\n")
    return folder / "c0.yaml"


def test_an_extends_chain_of_3000_ends_at_once_at_the_limit(tmp_path: Path) -> None:
    """3000 deep took 48 s: the chain stops at MAX_EXTENDS bases."""
    top = chain(tmp_path, 3000)
    refused(top, f"{tmp_path / f'c{MAX_EXTENDS}.yaml'}:1:10", f"extends goes more than {MAX_EXTENDS} specs deep")
    (tmp_path / "ok").mkdir()
    assert validate(chain(tmp_path / "ok", MAX_EXTENDS))[0] == 0  # NOTE: MAX_EXTENDS bases are fine


def test_the_files_of_an_extends_chain_are_as_big_as_one_spec_in_all(tmp_path: Path) -> None:
    text = "x" * (MAX_BYTES // 3)
    write(tmp_path / "b.yaml", HEAD + f"model: [relu]\ndescription: {text}\n")
    write(tmp_path / "a.yaml", f"extends: b.yaml\ndescription: {text}\n")
    top = write(tmp_path / "top.yaml", f"extends: a.yaml\ndescription: {text}\n")
    total = sum((tmp_path / f).stat().st_size for f in ("top.yaml", "a.yaml", "b.yaml"))
    refused(top, f"{tmp_path / 'a.yaml'}:1:10", f"with {tmp_path / 'b.yaml'}, the specs of this extends chain are "
            f"{total:,} bytes in all, but a spec with its bases may be at most {MAX_BYTES:,} bytes")  # fmt: skip


# *** aliases and text ***


def test_an_alias_of_a_long_string_repeated_is_refused_at_the_alias(tmp_path: Path) -> None:
    """100 copies of 100,000 characters: 10 MB of text from a 100 KB file (memory, and megabytes of messages)."""
    copies = ", ".join(["*s"] * 100)
    spec = write(tmp_path / "s.yaml", HEAD + f"model: [relu]\ndescription: &s {'x' * 100_000}\nexport: [{copies}]\n")
    refused(spec, "6:162", f"alias *s makes the spec's text too long: more than {MAX_TEXT:,} characters in all")


def test_aliased_arithmetic_is_evaluated_once_per_expression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 copies of one expression (aliases keep their anchor's place) are parsed once, not 2,000 times (more
    copies only take the YAML parser longer)."""
    parsed = []

    class Counted(resolve_module._Parser):
        def parse(self) -> Any:
            parsed.append(self.text)
            return super().parse()

    monkeypatch.setattr(resolve_module, "_Parser", Counted)
    expr = " + ".join(["$d"] * 40)
    uses = ", ".join(f"v{i}: *e" for i in range(2_000))
    spec = write(tmp_path / "s.yaml", HEAD + f"vars: {{d: 1}}\nmodel: [{{linear: &e '{expr}'}}]\nextra: {{{uses}}}\n")
    refused(spec, "6:1", "unknown key 'extra' at the top level")
    assert 1 <= len(parsed) <= 2, len(parsed)  # NOTE: validate resolves the spec, and so does the data check


def test_a_long_expression_is_refused_by_its_length(tmp_path: Path) -> None:
    expr = " + ".join(["$d"] * 100)
    spec = write(tmp_path / "s.yaml", HEAD + f"vars: {{d: 1}}\nmodel: [{{linear: '{expr}'}}]\n")
    output = refused(spec, "5:18", f"this expression is {len(expr)} characters long, over the {MAX_EXPR} an expression "
                     "may have: '$d + $d")  # fmt: skip
    assert len(output.splitlines()[0]) < 300


def test_numbers_from_expressions_are_bounded(tmp_path: Path) -> None:
    spec = write(tmp_path / "s.yaml", HEAD + "vars: {d: 3037000500}\nmodel: [{linear: $d * $d}]\n")
    refused(spec, "5:21", "'$d * $d' gives a number too large to use (over 9,223,372,036,854,775,807)")


# *** layers after repeat ***


def test_a_repeat_inside_a_repeat_ends_at_the_step_limit(tmp_path: Path) -> None:
    """1000 copies of a block of 1000 copies: a million layers, refused at the model's node once past MAX_STEPS."""
    blocks = """blocks:
  inner: {graph: [{name: out, layer: relu, from: in}]}
  outer: {graph: [{name: out, block: inner, repeat: 1000, from: in}]}
model:
  graph:
    - {name: body, block: outer, repeat: 1000, from: input}
  outputs: [body]
"""
    spec = write(tmp_path / "s.yaml", HEAD + blocks)
    refused(spec, "9:7", f"the model has more than {MAX_STEPS:,} layers and ops once its blocks are expanded")


def test_a_long_layer_list_ends_at_the_step_limit(tmp_path: Path) -> None:
    spec = write(tmp_path / "s.yaml", HEAD + "model:\n" + "  - relu\n" * (MAX_STEPS + 5))
    refused(spec, f"{MAX_STEPS + 5}:5", f"the model has more than {MAX_STEPS:,} layers and ops")
    assert validate(write(tmp_path / "ok.yaml", HEAD + "model:\n" + "  - relu\n" * 50))[0] == 0


# *** names ***


@pytest.mark.parametrize(("name", "why"), [
    (".", "starts with '.'"), ("..", "starts with '.'"), ("a/b", "holds '/', a path separator"),
    ('"a\\0b"', "holds '\\x00'"), ("x" * 101, "is 101 characters long, over 100")])  # fmt: skip
def test_a_spec_name_is_one_plain_folder_name(tmp_path: Path, name: str, why: str) -> None:
    spec = write(tmp_path / "s.yaml", f"specgrad: 1\nname: {name}\ninput: {{shape: [4]}}\nmodel: [relu]\n")
    refused(spec, "2:7", f"name {why}: it names the run folders")


@pytest.mark.parametrize(("name", "why"), [
    ("'[/x]'", "holds '['"), ("a.b", "holds '.', which separates the copies of a block's nodes"),
    ("'a b'", "holds ' '"), ('"\\e[31mred"', "holds '\\\\x1b'"), ("''", "is empty"), ("-a", "starts with '-'"),
    ("x" * 65, "is 65 characters long, over 64")])  # fmt: skip
def test_node_names_are_plain_words(tmp_path: Path, name: str, why: str) -> None:
    """A name with '[' used to crash the summary table (rich markup), and an escape sequence reached the terminal."""
    graph = f"model:\n  graph:\n    - {{name: {name}, layer: relu, from: input}}\n  outputs: [{name}]\n"
    refused(write(tmp_path / "s.yaml", HEAD + graph), "6:14", "the node name '")
    assert why in validate(tmp_path / "s.yaml")[1]


def test_a_node_cannot_take_an_inputs_name_and_input_names_are_plain_words(tmp_path: Path) -> None:
    graph = "model:\n  graph:\n    - {name: input, layer: relu, from: input}\n  outputs: [input]\n"
    refused(write(tmp_path / "s.yaml", HEAD + graph), "6:7", "node 'input' has the name of an input")
    spec = "specgrad: 1\nname: t\ninputs: {'a[b]': {shape: [2]}}\nmodel:\n  graph:\n    - {name: n, layer: relu, " \
           "from: 'a[b]'}\n  outputs: [n]\n"  # fmt: skip
    refused(write(tmp_path / "s.yaml", spec), "3:10", "the input name 'a[b]' holds '['")
