"""Fixtures of the hostile suite: one session folder (assets made once, the shared kernel cache, a sentinel folder
outside the pytest folders that no case may change or print), and for each case a fresh project and the folders
beside it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from tests.hostile.harness import Assets, Folders, base_project, write_secrets


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis keeps its files (constants it reads from the test modules when they are collected, patches of
    failing examples) in a temporary folder of this session, not in the repository's .hypothesis."""
    folder = tempfile.mkdtemp(prefix="specgrad-hypothesis-")
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    set_hypothesis_home_dir(folder)


@dataclass
class Session:
    folder: Path
    sentinel: Path
    cache: Path
    assets: Assets

    def folders(self, root: Path) -> Folders:
        return Folders(root, self.sentinel, self.cache, self.folder / "scratch", self.assets)


@pytest.fixture(scope="session")
def hostile_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    folder = tmp_path_factory.mktemp("hostile-session")
    sentinel = Path(tempfile.mkdtemp(prefix="specgrad-hostile-sentinel-"))
    write_secrets(sentinel)
    cache = folder / "cache"
    cache.mkdir(mode=0o700)
    session = Session(folder, sentinel, cache, None)  # type: ignore[arg-type]
    session.assets = Assets(folder / "assets", session.folders)
    try:
        yield session
    finally:
        shutil.rmtree(sentinel)


@pytest.fixture
def folders(hostile_session: Session, tmp_path: Path) -> Folders:
    """tmp_path/project (the current folder of the command), tmp_path/outside (secrets), tmp_path/home and tmp."""
    ctx = hostile_session.folders(tmp_path)
    base_project(ctx)
    return ctx
