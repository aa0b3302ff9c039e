"""folder_io: files inside a run or sweep folder are read and written without leaving it (issue 30 item 1)."""

from __future__ import annotations

import os
import stat

import pytest

from specgrad.helpers import WriteError
from specgrad.modelspec.errors import SpecError
from specgrad.train.folder_io import (
    entry_kind,
    files_in,
    json_lines,
    open_append_in,
    read_in,
    read_json_in,
    regular_file,
    write_in,
)

SECRET = "SECRET-folder-io"


def append_in(folder, rel, data: bytes) -> None:
    fd = open_append_in(folder, rel)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


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
    with pytest.raises(SpecError, match="nested too deep"):
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


def test_regular_file_and_files_in_refuse_what_specgrad_never_writes(dirs):
    inside, outside = dirs
    (inside / "spec.yaml").write_text("a: 1\n")
    assert regular_file(inside, "spec.yaml") == inside / "spec.yaml" and regular_file(inside, "none") is None
    (inside / "link.yaml").symlink_to(outside / "secret.txt")
    os.mkfifo(inside / "pipe")
    (inside / "dir").mkdir()
    for name, what in (("link.yaml", "a symbolic link"), ("pipe", "FIFO"), ("dir", "a folder")):
        with pytest.raises(SpecError, match=what) as e:
            regular_file(inside, name)
        assert SECRET not in str(e.value)
    (inside / "ck").mkdir()
    for name in ("b.safetensors", "a.safetensors", ".a.safetensors.tmp", "notes.txt"):
        (inside / "ck" / name).write_bytes(b"")
    assert files_in(inside, "ck", ".safetensors") == ["a.safetensors", "b.safetensors"]
    assert files_in(inside, "none", ".safetensors") == []
    (inside / "ck" / "c.safetensors").symlink_to(outside / "secret.txt")
    with pytest.raises(SpecError, match="c.safetensors is a symbolic link"):
        files_in(inside, "ck", ".safetensors")
    (inside / "ck2").symlink_to(inside / "ck")
    (inside / "ck3").write_text("")
    with pytest.raises(SpecError, match="ck2 is a symbolic link, not a folder"):
        files_in(inside, "ck2")
    with pytest.raises(SpecError, match="ck3 is a file, not a folder"):
        files_in(inside, "ck3")


def test_a_folder_where_a_file_belongs_is_refused_by_name(dirs):
    inside, _ = dirs
    (inside / "metrics.jsonl").mkdir()
    with pytest.raises(SpecError, match="metrics.jsonl is a folder, not a regular file"):
        read_in(inside, "metrics.jsonl", cap=10)


def test_json_lines_skips_what_specgrad_could_not_have_written():
    data = b'{"a": 1}\n\n' + b"[" * 100_000 + b"]" * 100_000 + b"\n" + b"9" * 5000 + b'\n"\xff"\n{"cut\n[2]\n'
    assert list(json_lines(data)) == [(1, {"a": 1}), (3, None), (4, None), (5, None), (6, None), (7, [2])]


def test_an_append_never_reaches_another_hard_link(dirs):
    """A log hard-linked to a file outside the folder (or a snapshot made with cp -al) gets a copy of its own first:
    the other name keeps its bytes, this one keeps them and gains the new ones."""
    inside, outside = dirs
    (inside / "logs").mkdir()
    os.link(outside / "target.log", inside / "logs" / "t.log")
    append_in(inside, "logs/t.log", b"appended\n")
    assert (outside / "target.log").read_text() == "kept\n"
    assert (inside / "logs" / "t.log").read_text() == "kept\nappended\n"
    assert os.stat(inside / "logs" / "t.log").st_nlink == 1
