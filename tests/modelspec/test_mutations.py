"""Mutated example specs (lines dropped or doubled, values swapped for other kinds, keys misspelled, indentation
broken) must give a SpecError or validate: never another exception, so never a traceback for a user."""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest

from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file

SPECS_DIR = Path(__file__).resolve().parents[2] / "specs"
VALUES = ["0", "-1", "1e9", "3.5", ".nan", "yes", "'text'", "[]", "{}", "[1, 2]", "null", "$nope", "2 * $hidden",
          "!!str x", "&a 1", "*a", "10000000000000000000000"]  # fmt: skip


def mutate(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    i = rng.randrange(len(lines))
    kind = rng.randrange(6)
    if kind == 0:
        del lines[i]
    elif kind == 1:
        lines.insert(i, lines[i])
    elif kind == 2 and ":" in lines[i]:
        key, _, _ = lines[i].partition(":")
        lines[i] = f"{key}: {rng.choice(VALUES)}"
    elif kind == 3:
        lines[i] = re.sub(r"\b\d+\b", lambda m: rng.choice(VALUES), lines[i], count=1)
    elif kind == 4:
        lines[i] = re.sub(r"[a-z_]{3,}", lambda m: m.group(0)[::-1], lines[i], count=1)
    else:
        lines[i] = " " * rng.randrange(1, 5) + lines[i]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(150))
def test_mutated_spec_never_crashes(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    source = sorted(SPECS_DIR.glob("*.yaml"))[seed % len(list(SPECS_DIR.glob("*.yaml")))]
    shutil.copytree(SPECS_DIR, tmp_path / "specs")
    path = tmp_path / "specs" / source.name
    text = source.read_text()
    for _ in range(rng.randrange(1, 4)):
        text = mutate(text, rng)
    path.write_text(text)
    try:
        validate_file(path)
    except SpecError as e:
        assert e.problems and all(str(p) for p in e.problems)
