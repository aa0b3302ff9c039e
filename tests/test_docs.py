"""Every docs example is a tested program."""

from __future__ import annotations

import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.slow_on("GPU")  # NOTE: a training of the guide's length on PoCL; the GPU's ops are tested one by one
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
    """Each `$ specgrad ...` in docs/tutorial.md before the section after training runs from the repo root; shown
    output must match, errors exit 1."""
    monkeypatch.chdir(ROOT)
    text = (ROOT / "docs" / "tutorial.md").read_text()
    blocks = re.findall(r"```console\n(.*?)```", text[: text.index(AFTER_TRAINING)], flags=re.S)
    assert len(blocks) >= 3
    _run_console_blocks(blocks)


AFTER_TRAINING = "## 7. Train, evaluate, compare, sweep"


def test_tutorial_after_training_runs_as_shown(tmp_path: Path, monkeypatch) -> None:
    """The train -> evaluate -> compare -> sweep section, in order, in a fresh folder holding a copy of specs/ (the
    run folders it names are the first ones there)."""
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "tutorial.md").read_text()
    section = text[text.index(AFTER_TRAINING) :].split("\n## ")[0]
    blocks = re.findall(r"```console\n(.*?)```", section, flags=re.S)
    assert [b.split()[2] for b in blocks] == ["train", "evaluate", "train", "compare", "sweep"]
    _run_console_blocks(blocks)
    assert (tmp_path / "runs" / "digits-mlp-sweep-1" / "compare.png").exists()


OWN_TABLE = "## 8. Your own table, as it comes"


def test_tutorial_own_table_runs_as_shown(tmp_path: Path, monkeypatch) -> None:
    """The messy-CSV section, validate to run, in a fresh folder holding a copy of docs/examples/ (its run folder is
    the first there); the table written begins as the text says."""
    shutil.copytree(ROOT / "docs" / "examples", tmp_path / "docs" / "examples")
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "tutorial.md").read_text()
    section = text[text.index(OWN_TABLE) :].split("\n## ")[0]
    blocks = re.findall(r"```console\n(.*?)```", section, flags=re.S)
    assert [b.split()[2] for b in blocks] == ["validate", "train", "evaluate", "run"]
    _run_console_blocks(blocks)
    header = (tmp_path / "preds.csv").read_text().splitlines()[0]
    assert f"`preds.csv` begins `{header}`" in section


def _run_console_blocks(blocks: list[str]) -> None:
    """Each `$ specgrad ...` block: its command runs, and every line shown is in its output (errors exit 1)."""
    import shlex

    from specgrad.cli.main import app
    from typer.testing import CliRunner

    for block in blocks:
        command, *shown = block.strip().splitlines()
        assert command.startswith("$ specgrad ")
        result = CliRunner().invoke(app, shlex.split(command)[2:])
        expect_error = any(": error:" in line for line in shown)
        assert result.exit_code == (1 if expect_error else 0), (command, result.output)
        for line in shown:
            assert line in result.output, (command, line, result.output)


def _spec_md_examples() -> list[tuple[str | None, str, str]]:
    """Each ```yaml block of docs/spec.md: (the example file its first line names, how: 'file' for the whole file or
    'from' for some of its lines, the block without that line); (None, 'spec', block) for a block that is a spec."""
    ret: list[tuple[str | None, str, str]] = []
    for block in re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "spec.md").read_text(), flags=re.S):
        first, _, rest = block.partition("\n")
        named = re.fullmatch(r"# (from )?(docs/examples/[\w.-]+\.yaml)", first)
        ret.append((named.group(2), "from" if named.group(1) else "file", rest) if named else (None, "spec", block))
    return ret


def _expected_errors(path: Path) -> list[str]:
    return re.findall(r"^# error: (\d+:\d+: .*)$", path.read_text(), flags=re.M)


def test_every_yaml_block_of_the_spec_docs_is_a_tested_example(tmp_path: Path) -> None:
    """docs/spec.md shows example files of docs/examples/ (whole, or some of their lines), or specs that validate;
    each file validates, or fails with exactly the `# error: line:col: message` lines it starts with, in order."""
    from specgrad.modelspec.errors import SpecError
    from specgrad.modelspec.validate import validate_file
    from specgrad.train.data import data_widths

    examples = _spec_md_examples()
    assert len(examples) >= 6 and any(how == "file" for _, how, _ in examples)
    for name, how, text in examples:
        if name is None:
            (tmp_path / "shown.yaml").write_text(text)
            validate_file(tmp_path / "shown.yaml")
            continue
        path = ROOT / name
        if how == "file":
            assert text == path.read_text(), f"docs/spec.md shows {name} other than it is"
        else:
            lines = path.read_text().splitlines()
            assert all(line in lines for line in text.splitlines()), f"docs/spec.md shows lines {name} does not have"
        expected = _expected_errors(path)
        try:
            validate_file(path, data_files=False, widths=data_widths)  # NOTE: an `auto` width reads the data
        except SpecError as e:
            got = [str(p).split("\n")[0].removeprefix(f"{name}:").removeprefix(f"{path}:") for p in e.problems]
            assert got == [f"{x.split(': ', 1)[0]}: error: {x.split(': ', 1)[1]}" for x in expected], (name, got)
        else:
            assert not expected, f"{name} should fail with {expected}"


def test_every_docs_example_is_shown() -> None:
    shown = {name for name, _, _ in _spec_md_examples()} | set(
        re.findall(r"docs/examples/[\w.-]+\.yaml", (ROOT / "docs" / "tutorial.md").read_text())
    )
    assert {f"docs/examples/{p.name}" for p in (ROOT / "docs" / "examples").glob("*.yaml")} <= shown


# *** the generated reference of docs/spec.md and the examples' files ***


def test_spec_md_reference_is_generated_once_with_every_nested_key() -> None:
    """docs/spec.md holds one reference, between one pair of markers, as the schema generates it now (regenerate:
    python -m specgrad.modelspec.reference), with a row for every key of every section, nested ones too."""
    from specgrad.modelspec.reference import BEGIN, END, nested_sections, with_reference
    from specgrad.modelspec.validate import TOP

    text = (ROOT / "docs" / "spec.md").read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "docs/spec.md should hold one pair of reference markers"
    assert with_reference(text) == text, "docs/spec.md is stale: python -m specgrad.modelspec.reference"
    keys = [f"{dotted}{k}" for dotted, section, _ in nested_sections(TOP) for k in section.fields]
    assert {"train.early_stopping.patience", "train.checkpoint.keep_best", "data.augment.flip",
            "train.losses.<output>.weight", "inputs.<input>.shape"} <= set(keys)  # fmt: skip
    assert all(f"| `{key}` |" in text for key in keys), [key for key in keys if f"| `{key}` |" not in text]


def test_reference_picks_up_keys_added_to_the_schema(monkeypatch) -> None:
    """A key added to a nested section, or a new nested section, appears in the reference without other changes."""
    from dataclasses import replace

    from specgrad.modelspec import reference
    from specgrad.modelspec.schema import Field, Section
    from specgrad.modelspec.validate import TOP

    deeper = Section("limits", "when to give up", {"wall_hours": Field("float", "hours at most", 24.0, min=0.5)})
    es = TOP.fields["train"].section.fields["early_stopping"].section
    es = replace(es, fields={**es.fields, "mode": Field("str", "which way is better", "min", choices=("min", "max")),
                             "limits": Field("map", "limits", None, section=deeper)})  # fmt: skip
    train = TOP.fields["train"].section
    stopping = replace(train.fields["early_stopping"], section=es)
    train = replace(train, fields={**train.fields, "early_stopping": stopping})
    top = replace(TOP, fields={**TOP.fields, "train": replace(TOP.fields["train"], section=train)})
    monkeypatch.setattr(reference, "TOP", top)
    text = reference.render_reference()
    assert "| `train.early_stopping.mode` | text (`min` / `max`) | `min` | which way is better |" in text
    assert "#### `train.early_stopping.limits`\n\nWhen to give up.\n" in text
    assert "| `train.early_stopping.limits.wall_hours` | number (0.5..) | `24.0` | hours at most |" in text
    assert "| `train.early_stopping.limits` | mapping (keys below) | - | limits |" in text
    before, after = "intro\n" + reference.BEGIN + "\nold\n" + reference.END + "\n", "\nmore prose\n"
    assert reference.with_reference(before + after) == "intro\n" + text + after


def _examples() -> list[Path]:
    return sorted((ROOT / "docs" / "examples").glob("*.yaml"))


def _is_broken(path: Path) -> bool:
    """An example of mistakes: it starts with the errors it gives, or is named *_broken.yaml (the tutorial shows its
    errors)."""
    return bool(_expected_errors(path)) or path.stem.endswith("_broken")


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.name)
def test_docs_example_uses_only_shipped_files(path: Path) -> None:
    """Each file a docs example names (data.path, data.test_path, init.from, extends) is in the repository, and the
    example validates with its data and weights files read, or fails with exactly the errors it starts with."""
    from specgrad.modelspec.errors import SpecError
    from specgrad.modelspec.validate import validate_file
    from specgrad.train.data import data_widths

    named = re.findall(r"^extends: *(\S+)", path.read_text(), flags=re.M)
    expected = _expected_errors(path)
    try:
        spec = validate_file(path, widths=data_widths)
    except SpecError as e:
        got = [str(p).split("\n")[0].removeprefix(f"{path}:") for p in e.problems]
        assert _is_broken(path) and not any("no such file" in line for line in got), got
        assert not expected or got == [f"{x.split(': ', 1)[0]}: error: {x.split(': ', 1)[1]}" for x in expected], got
    else:
        assert not _is_broken(path), f"{path.name} should fail with {expected or 'the errors the tutorial shows'}"
        data, init = spec.values.get("data") or {}, spec.values.get("init") or {}
        named += [x for x in (data.get("path"), data.get("test_path"), init.get("from")) if x is not None]
    for name in named:
        where = (path.parent / name).resolve()
        assert where.is_relative_to(ROOT) and where.exists(), f"{path.name} names {name}, which is not shipped"


def test_docs_examples_with_data_load_it_as_validate_does() -> None:
    """`specgrad validate` (which reads the data the spec names) accepts every example that has no expected error."""
    from specgrad.cli.main import app
    from typer.testing import CliRunner

    for path in _examples():
        if not _is_broken(path):
            result = CliRunner().invoke(app, ["validate", str(path)])
            assert result.exit_code == 0 and ": valid;" in result.output, (path.name, result.output)
