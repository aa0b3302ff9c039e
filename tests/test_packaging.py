"""What `pip install .` ships (not editable): every package of the source tree is listed in pyproject.toml, so a
module moved into a new subpackage is installed too (specgrad.train.sources once was not)."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_of_the_tree_is_installed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, dirs = set(config["packages"]), config["package-dir"]
    found = set()
    for name, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *rel.parts]))
    assert found <= listed, sorted(found - listed)
