"""folder_io: files inside a run or sweep folder are read and written without leaving it (issue 30 item 1)."""

from __future__ import annotations

import os
import stat

import pytest

from specgrad.helpers import WriteError
from specgrad.modelspec.errors import SpecError
from specgrad.train.folder_io import (
    JSON_DEPTH,
    append_in,
    entry_kind,
    open_append_in,
    read_in,
    read_json_in,
    write_in,
)

SECRET = "SECRET-folder-io"


@pytest.fixture
def dirs(tmp_path):
    """A folder, and a folder outside it holding a secret and a place an attacker would like written."""
    inside, outside = tmp_path / "run", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "target.log").write_text("kept\n")
    return inside, outside


def test_round_trip_makes_folders_below(dirs):
    inside, _ = dirs
    write_in(inside, "logs/trial-001.log", b"a", create=True)
    append_in(inside, "logs/trial-001.log", b"b")
    assert read_in(inside, "logs/trial-001.log", cap=10) == b"ab"
    assert read_in(inside, "logs/none.log", cap=10, missing_ok=True) is None
    assert entry_kind(inside, "logs") == "folder" and entry_kind(inside, "logs/trial-001.log") == "file"


def test_the_folder_itself_may_be_a_link(dirs, tmp_path):
    """The user names the folder (a link to it is theirs to make); only what is below it must be specgrad's own."""
    inside, _ = dirs
    (tmp_path / "alias").symlink_to(inside)
    write_in(tmp_path / "alias", "a.json", b"{}")
    assert read_json_in(inside, "a.json") == {}


@pytest.mark.parametrize("planted", ["file-link", "folder-link", "fifo"])
def test_nothing_below_the_folder_is_followed(dirs, planted):
    inside, outside = dirs
    (inside / "logs").mkdir()
    if planted == "file-link":
        (inside / "logs" / "t.log").symlink_to(outside / "secret.txt")
        rel = "logs/t.log"
    elif planted == "folder-link":
        (inside / "logs").rmdir()
        (inside / "logs").symlink_to(outside)
        rel = "logs/secret.txt"
    else:
        os.mkfifo(inside / "logs" / "t.log")
        rel = "logs/t.log"
    with pytest.raises(SpecError) as e:
        read_in(inside, rel, cap=1 << 20)
    assert SECRET not in str(e.value) and ("symbolic link" in str(e.value) or "FIFO" in str(e.value))
    with pytest.raises((SpecError, WriteError)):
        append_in(inside, rel.replace("secret.txt", "target.log"), b"attack\n")
    with pytest.raises((SpecError, WriteError)):
        write_in(inside, rel.replace("secret.txt", "target.log"), b"attack\n")
    assert (outside / "target.log").read_text() == "kept\n" and (outside / "secret.txt").read_text() == SECRET + "\n"
    kind = (inside / rel).parent if planted == "folder-link" else inside / rel
    assert stat.S_IFMT(os.lstat(kind).st_mode) in (stat.S_IFLNK, stat.S_IFIFO)  # NOTE: left as it was


def test_caps_and_damaged_json(dirs):
    inside, _ = dirs
    (inside / "big.json").write_bytes(b" " * 2048)
    with pytest.raises(SpecError, match="more than specgrad writes"):
        read_in(inside, "big.json", cap=1024)
    (inside / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(SpecError, match=f"more than {JSON_DEPTH} deep"):
        read_json_in(inside, "deep.json")
    (inside / "digits.json").write_text('{"steps": ' + "9" * 5000 + "}")
    with pytest.raises(SpecError, match="number too long"):
        read_json_in(inside, "digits.json")
    (inside / "bad.json").write_text('{"a": ' + SECRET)
    with pytest.raises(SpecError, match="not valid JSON") as e:
        read_json_in(inside, "bad.json")
    assert SECRET not in str(e.value)
    (inside / "latin.json").write_bytes(b'"\xff"')
    with pytest.raises(SpecError, match="not UTF-8"):
        read_json_in(inside, "latin.json")


def test_append_never_waits_on_a_fifo(dirs):
    inside, _ = dirs
    os.mkfifo(inside / "t.log")
    with pytest.raises(SpecError, match="FIFO"):
        open_append_in(inside, "t.log")


def test_paths_leaving_the_folder_are_a_callers_bug(dirs):
    inside, _ = dirs
    for rel in ("../outside/target.log", "/etc/passwd", "a/../../b"):
        with pytest.raises(ValueError):
            read_in(inside, rel, cap=10)
