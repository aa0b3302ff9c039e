"""The hostile-input corpus (issue 14 item 7): bad specs, data files, weights, checkpoints, command lines and kernel
caches, each run through the CLI as a user runs it (a child process, at most LIMIT_S seconds and LIMIT_DATA bytes of
memory), each checked for its exit code and message, no traceback, no secret from outside the project printed, no raw
escape sequence, and nothing changed outside the paths it may write (harness.check). Every bullet of the issue's first
list has a case in the default (fast) tier; heavier cases are marked slow. A case needing root (chown, mount) or not
root (read-only folders) is skipped with the reason elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.hostile import makers as mk
from tests.hostile.harness import (
    ROWS,
    SECRET,
    TABLE,
    TINY,
    Asset,
    Case,
    Fifo,
    Folder,
    Folders,
    Link,
    Sparse,
    needs_met,
)
from tests.hostile.harness import check as check_case

HEAD = mk.HEAD
RUN = ("run", "tiny.yaml", "--weights", "w.safetensors", "--input", "x.npy", "--device", "CPU")
CLANG_RUN = ("run", "tiny.yaml", "--weights", "w.safetensors", "--input", "x.npy", "--device", "CLANG")
RESUME = ("train", "--resume", "run", "--device", "CPU")
CKPT = "run/checkpoints/epoch-00001.safetensors"
MY_CACHE = {"CACHEDIR": "<project>/kc"}
CACHE_REFUSED = "not using the kernel cache"
FULL = "the disk is full"
GB20 = 20 << 30
INIT = TINY + "init: {from: %s, map: {0.weight: w}}\n"  # NOTE: 0.weight is [8, 2]
INIT_TRAIN = ("train", "i.yaml", "--out", "out", "--device", "CPU")


def _init_file(dtype: str, shape: list[int], data: bytes) -> bytes:
    return mk.safetensors_bytes({"w": {"dtype": dtype, "shape": shape, "data_offsets": [0, len(data)]}}, data)


PICS = (
    "specgrad: 1\nname: pics\ninput: {shape: [1, 2, 2]}\nmodel: [flatten, {linear: 2}]\n"
    "data: {source: images, path: photos, batch_size: 1, valid_split: 0}\n"
)

# NOTE: the lines of issue 14's first list; every one needs a fast case (test_every_bullet_has_a_fast_case)
BULLETS = {
    "cache": "code execution through a kernel cache from someone else",
    "write-target": "atomic_write onto a symlink, FIFO or device node (/dev/full)",
    "name-escape": "a spec name with ../ or an absolute path",
    "read-outside": "extends / data.path outside the project",
    "echo": "error messages echoing other files' lines",
    "alias-bomb": "an alias of a long string repeated",
    "alias-arith": "aliased arithmetic in variables",
    "nested-repeat": "a nested block repeat",
    "extends-chain": "an extends chain 3,000 deep",
    "fifo": "a FIFO as extends or data.path",
    "dev-zero": "a symlink to /dev/zero",
    "sparse-csv": "a sparse 20 GB CSV",
    "zip-bomb": "an .npz zip bomb",
    "huge-safetensors": "a 10 GB safetensors file",
    "npy-header": "an .npy with a huge header",
    "null-byte": "a null byte in a path or a name",
    "layer-names": "bad characters in layer names",
    "out-file": "--out naming a file",
    "full-disk": "a full disk while writing a checkpoint",
    "export-folder": "export --format onnx --out naming a folder",
    "weights-meta": "weights whose metadata does not match the spec",
    "json-input": "JSON input with huge integers or deep nesting",
    "engine-bug": "real engine bugs not turned into 'invalid input'",
    "nonfinite": "NaN/inf input to run",
    "flipped-bit": "a checkpoint with one flipped bit resumed",
    "c-runner": "the exported C runner fed junk",
    "more": "beyond the issue's list",
}


def _is_chardev(path: str):
    def check(ctx: Folders) -> None:
        assert stat.S_ISCHR(os.lstat(path).st_mode), f"{path} is no longer a character device"

    return check


def _two_run_folders(ctx: Folders) -> None:
    made = sorted(p.name for p in (ctx.project / "out").iterdir())
    assert made == ["tiny-1", "tiny-2"], made
    for run in made:
        assert (ctx.project / "out" / run / "model.safetensors").is_file()


def _no_temporaries(folder: str):
    def check(ctx: Folders) -> None:
        left = [p for p in (ctx.project / folder).rglob(".*") if p.name != ".lock"]
        assert not left, f"temporary files left: {left}"

    return check


# NOTE: patches run in the child before the CLI: an engine bug planted in a function, or a disk that fills up
ENGINE_BUG = """
import specgrad.{module} as m
def broken(*args, **kwargs):
    raise {error}("{message}")
m.{name} = broken
"""
FULL_CHECKPOINTS = """
import errno, os
real_fsync = os.fsync
def fsync(fd):
    if "/checkpoints/." in os.readlink(f"/proc/self/fd/{fd}"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real_fsync(fd)
os.fsync = fsync
"""


def bug(module: str, name: str, error: str = "ValueError", message: str = "planted engine bug") -> str:
    return ENGINE_BUG.format(module=module, name=name, error=error, message=message)


# fmt: off
CASES = [
    # *** the kernel cache ***
    Case("cache-writable-by-others", "cache", {"kc": Asset("cache"), "kc/": mk.chmod_cache(folder_mode=0o777)},
         CLANG_RUN, 0, CACHE_REFUSED, env=MY_CACHE, needs=("clang",)),
    Case("cache-of-another-user", "cache", {"kc": Asset("cache"), "kc/": mk.chown_cache()}, CLANG_RUN, 0,
         CACHE_REFUSED, env=MY_CACHE, needs=("clang", "root"), slow=True),
    Case("cache-entries-are-fifos", "cache", {"kc": Asset("cache"), "kc/": mk.replace_entries("fifo")}, CLANG_RUN, 0,
         CACHE_REFUSED, env=MY_CACHE, needs=("clang",), slow=True),
    Case("cache-entries-link-outside", "cache", {"kc": Asset("cache"), "kc/": mk.replace_entries("link")}, CLANG_RUN,
         0, CACHE_REFUSED, env=MY_CACHE, needs=("clang",), slow=True),
    Case("cache-entries-writable-by-others", "cache", {"kc": Asset("cache"), "kc/": mk.chmod_cache(entry_mode=0o666)},
         CLANG_RUN, 0, CACHE_REFUSED, env=MY_CACHE, needs=("clang",), slow=True),
    Case("cache-in-a-shared-folder", "cache", {"shared": Folder(0o1777)}, CLANG_RUN, 0, CACHE_REFUSED,
         env={"CACHEDIR": "<project>/shared"}, needs=("clang",), slow=True),
    Case("cache-entries-garbage-are-rebuilt", "cache", {"kc": Asset("cache"), "kc/": mk.replace_entries("garbage")},
         CLANG_RUN, 0, "0: class", env=MY_CACHE, writes=("kc",), needs=("clang",), slow=True),
    # *** writing only regular files, only where asked ***
    Case("output-dev-full", "write-target", {}, (*RUN, "--output", "/dev/full"), 1, "character device",
         check=_is_chardev("/dev/full")),
    Case("output-link-outside", "write-target", {"o.json": Link("../outside/target.json")},
         (*RUN, "--output", "o.json"), 1, "symbolic link"),
    Case("output-fifo", "write-target", {"o.json": Fifo()}, (*RUN, "--output", "o.json"), 1, "FIFO"),
    Case("output-socket", "write-target", {"o.json": mk.socket_file()}, (*RUN, "--output", "o.json"), 1, "socket"),
    Case("output-folder", "write-target", {"o.json": Folder()}, (*RUN, "--output", "o.json"), 1, "folder"),
    Case("output-missing-folder", "write-target", {}, (*RUN, "--output", "no/such/o.json"), 1, "does not exist"),
    Case("output-good", "write-target", {}, (*RUN, "--output", "o.json"), 0, "wrote the probabilities",
         writes=("o.json",)),
    Case("export-out-link-outside", "write-target", {"m.safetensors": Link("../outside/target.json")},
         ("export", "tiny.yaml", "--weights", "w.safetensors", "--format", "safetensors", "--out", "m.safetensors"), 1,
         "symbolic link"),
    Case("export-c-header-link-outside", "write-target", {"m.h": Link("../outside/target.json")},
         ("export", "tiny.yaml", "--weights", "w.safetensors", "--format", "c", "--out", "m.c"), 1, "symbolic link"),
    Case("resume-metrics-link-outside", "write-target", {"run": Asset("run"), "run/metrics.jsonl": Link(
        "../../outside/secret.txt")}, RESUME, 1, "metrics.jsonl"),
    Case("resume-lock-link-outside", "write-target", {"run": Asset("run"), "run/.lock": Link(
        "../../outside/secret.txt")}, RESUME, 1, ".lock"),
    Case("resume-checkpoints-link-outside", "write-target", {"run": Asset("run"), "../outside/ck": Folder(),
         "run/checkpoints/": mk.Made(lambda p, a: _swap_for_link(p, "../../outside/ck"))}, RESUME, 1, "checkpoints"),
    Case("resume-model-link-outside", "write-target", {"run": Asset("run"), "run/model.safetensors": Link(
        "../../outside/target.json")}, RESUME, 1, "symbolic link", writes=("run",), slow=True),
    # *** names that would leave --out ***
    Case("name-dotdot", "name-escape", {"s.yaml": TINY.replace("name: tiny", "name: ../escape")},
         ("train", "s.yaml", "--out", "out", "--device", "CPU"), 1, "name holds '/'"),
    Case("name-absolute", "name-escape", {"s.yaml": TINY.replace("name: tiny", "name: <outside>/evil")},
         ("train", "s.yaml", "--out", "out", "--device", "CPU"), 1, "a path separator"),
    Case("name-is-dotdot", "name-escape", {"s.yaml": TINY.replace("name: tiny", "name: '..'")},
         ("train", "s.yaml", "--out", "out", "--device", "CPU"), 1, "starts with '.'"),
    Case("name-set-escapes", "name-escape", {}, ("train", "tiny.yaml", "--set", "name=../../outside/x", "--out", "out",
         "--device", "CPU"), 1, "name holds '/'"),
    Case("name-backslash", "name-escape", {"s.yaml": TINY.replace("name: tiny", "name: 'a\\\\b'")},
         ("validate", "s.yaml"), 1, "a path separator"),
    # *** reading only inside the project ***
    Case("extends-absolute-sentinel", "read-outside", {"s.yaml": "specgrad: 1\nextends: <sentinel>/secret.yaml\n"},
         ("validate", "s.yaml"), 1, "leaves the folders a spec may read from"),
    Case("extends-dotdot", "read-outside", {"s.yaml": "specgrad: 1\nextends: ../outside/secret.yaml\n"},
         ("validate", "s.yaml"), 1, "leaves the folders a spec may read from"),
    Case("extends-deep-dotdot", "read-outside",
         {"sub/s.yaml": "specgrad: 1\nextends: ../../../../../../../etc/passwd\n"},
         ("validate", "sub/s.yaml"), 1, "leaves the folders"),
    Case("data-path-outside", "read-outside", {"s.yaml": TABLE.replace("d.csv", "../outside/secret.csv")},
         ("validate", "s.yaml"), 1, "data.path '../outside/secret.csv' leaves"),
    Case("data-path-etc-passwd", "read-outside", {"s.yaml": TABLE.replace("d.csv", "/etc/passwd")},
         ("validate", "s.yaml"), 1, "leaves the folders"),
    Case("data-path-set-outside", "read-outside", {}, ("validate", "table.yaml", "--set",
         "data.path=../outside/secret.csv"), 1, "--set data.path=../outside/secret.csv:1:11: error: data.path"),
    Case("data-path-set-outside-train", "read-outside", {},
         ("train", "table.yaml", "--set", "data.path=<sentinel>/secret.csv",
         "--out", "out", "--device", "CPU"), 1, "leaves the folders"),
    Case("extends-link-leads-outside", "read-outside", {"base.yaml": Link("../outside/secret.yaml"),
         "s.yaml": "specgrad: 1\nextends: base.yaml\n"}, ("validate", "s.yaml"), 1, "a symbolic link on the way"),
    Case("data-folder-link-leads-outside", "read-outside", {"data": Link("../outside"),
         "s.yaml": TABLE.replace("d.csv", "data/secret.csv")}, ("validate", "s.yaml"), 1, "leaves the folders"),
    Case("resume-spec-reads-outside", "read-outside", {"run": Asset("run"), "run/spec.resolved.yaml": mk.rewrite(
        TABLE.replace("d.csv", "../../outside/secret.csv"))}, RESUME, 1, "leaves the folders"),
    Case("allow-outside-is-the-users-choice", "read-outside", {"../outside/base.yaml": HEAD,
         "s.yaml": "specgrad: 1\nextends: ../outside/base.yaml\n"}, ("validate", "s.yaml", "--allow-outside"), 0,
         "s.yaml: valid"),
    Case("root-is-the-users-choice", "read-outside", {"../outside/base.yaml": HEAD,
         "s.yaml": "specgrad: 1\nextends: ../outside/base.yaml\n"}, ("validate", "s.yaml", "--root", ".."), 0,
         "s.yaml: valid"),
    # *** messages quote spec files only, in short excerpts ***
    Case("echo-base-not-a-mapping", "echo", {"base.yaml": mk.long_line_with_secret(), "s.yaml":
         "specgrad: 1\nextends: base.yaml\n"}, ("validate", "s.yaml"), 1, "base.yaml"),
    Case("echo-base-bad-yaml", "echo", {"base.yaml": "a: [" + "y" * 200 + SECRET + "\n", "s.yaml":
         "specgrad: 1\nextends: base.yaml\n"}, ("validate", "s.yaml"), 1, "base.yaml"),
    Case("echo-csv-bad-cell", "echo", {"s.yaml": TABLE, "d.csv": ROWS + "z" * 100 + SECRET + ",3\n"},
         ("validate", "s.yaml"), 1, "d.csv"),
    Case("echo-csv-header", "echo", {"d.csv": "x," + "q" * 100 + SECRET + "\n1,2\n"}, ("validate", "table.yaml"), 1,
         "no such column"),
    Case("echo-text-data", "echo", {"s.yaml": "specgrad: 1\nname: t\ninput: {shape: [4], dtype: int32}\nmodel: [{embedding: {vocab: 128, dim: 2}}]\ndata: {source: text, path: t.txt, context: 4}\n",  # noqa: E501
         "t.txt": "w" * 100 + "\u00e9" + SECRET + "\n"}, ("validate", "s.yaml"), 1, "t.txt"),
    Case("echo-spec-value-long", "echo", {"s.yaml": HEAD + "train: {optimizer: " + "o" * 200 + SECRET + "}\n"},
         ("validate", "s.yaml"), 1, "train.optimizer"),
    # *** bombs ***
    Case("alias-string-bomb", "alias-bomb", {"s.yaml": mk.long_string_alias()}, ("validate", "s.yaml"), 1,
         "alias *s makes the spec's text too long"),
    Case("billion-laughs", "alias-bomb", {"s.yaml": mk.billion_laughs()}, ("validate", "s.yaml"), 1, "100,000"),
    Case("aliased-arithmetic", "alias-arith", {"s.yaml": mk.aliased_arithmetic()}, ("validate", "s.yaml"), 1,
         "unknown key 'extra'"),
    Case("nested-repeat", "nested-repeat", {"s.yaml": mk.nested_repeat()}, ("validate", "s.yaml"), 1,
         "more than 10,000 layers"),
    Case("extends-chain-3000", "extends-chain", {"s.yaml": mk.extends_chain(3000)}, ("validate", "s.yaml"), 1, "32"),
    Case("extends-cycle", "extends-chain", {"s.yaml": "specgrad: 1\nextends: b.yaml\n", "b.yaml":
         "specgrad: 1\nextends: s.yaml\n"}, ("validate", "s.yaml"), 1, "extends"),
    Case("deep-nesting", "more", {"s.yaml": mk.deep_nesting()}, ("validate", "s.yaml"), 1, "64"),
    Case("spec-one-long-line", "more", {"s.yaml": mk.one_long_line()}, ("validate", "s.yaml"), 1, "1,000,000"),
    # *** FIFOs, devices and folders where a file should be ***
    Case("extends-fifo", "fifo", {"f.yaml": Fifo(), "s.yaml": "specgrad: 1\nextends: f.yaml\n"},
         ("validate", "s.yaml"), 1, "FIFO"),
    Case("data-path-fifo", "fifo", {"f.csv": Fifo(), "s.yaml": TABLE.replace("d.csv", "f.csv")},
         ("validate", "s.yaml"), 1, "FIFO"),
    Case("data-path-fifo-train", "fifo", {"f.csv": Fifo(), "s.yaml": TABLE.replace("d.csv", "f.csv")},
         ("train", "s.yaml", "--out", "out", "--device", "CPU"), 1, "FIFO"),
    Case("spec-is-fifo", "fifo", {"f.yaml": Fifo()}, ("validate", "f.yaml"), 1, "FIFO"),
    Case("weights-fifo", "fifo", {"f.safetensors": Fifo()}, ("run", "tiny.yaml", "--weights", "f.safetensors",
         "--input", "x.npy", "--device", "CPU"), 1, "FIFO"),
    Case("input-fifo", "fifo", {"f.npy": Fifo()}, ("run", "tiny.yaml", "--weights", "w.safetensors", "--input",
         "f.npy", "--device", "CPU"), 1, "FIFO"),
    Case("resume-spec-fifo", "fifo", {"run": Asset("run"), "run/spec.resolved.yaml": mk.Made(
        lambda p, a: (p.unlink(), os.mkfifo(p)))}, RESUME, 1, "FIFO"),
    Case("weights-folder", "more", {"f.safetensors": Folder()}, ("run", "tiny.yaml", "--weights", "f.safetensors",
         "--input", "x.npy", "--device", "CPU"), 1, "folder"),
    Case("spec-is-folder", "more", {"dir.yaml": Folder()}, ("validate", "dir.yaml"), 1, "dir.yaml"),
    Case("data-path-dev-zero", "dev-zero", {"z.csv": Link("/dev/zero"), "s.yaml": TABLE.replace("d.csv", "z.csv")},
         ("validate", "s.yaml"), 1, "leaves the folders"),
    Case("data-path-dev-zero-allowed", "dev-zero", {"z.csv": Link("/dev/zero"), "s.yaml": TABLE.replace("d.csv",
         "z.csv")}, ("validate", "s.yaml", "--allow-outside"), 1, "character device"),
    Case("extends-dev-zero-allowed", "dev-zero", {"z.yaml": Link("/dev/zero"), "s.yaml":
         "specgrad: 1\nextends: z.yaml\n"}, ("validate", "s.yaml", "--allow-outside"), 1, "character device"),
    Case("spec-dev-zero", "dev-zero", {"z.yaml": Link("/dev/zero")}, ("validate", "z.yaml"), 1, "character device"),
    Case("weights-dev-zero", "dev-zero", {"z.safetensors": Link("/dev/zero")}, ("run", "tiny.yaml", "--weights",
         "z.safetensors", "--input", "x.npy", "--device", "CPU"), 1, "character device"),
    Case("input-dev-zero", "dev-zero", {"z.json": Link("/dev/zero")}, ("run", "tiny.yaml", "--weights",
         "w.safetensors", "--input", "z.json", "--device", "CPU"), 1, "character device"),
    # *** sizes ***
    Case("sparse-20gb-csv", "sparse-csv", {"big.csv": Sparse(GB20, b"x,y\n1,2\n"), "s.yaml": TABLE.replace("d.csv",
         "big.csv")}, ("validate", "s.yaml"), 1, "over the limit of 1,024 MiB"),
    Case("sparse-20gb-csv-limit-raised", "sparse-csv", {"big.csv": Sparse(GB20, b"x,y\n1,2\n"), "s.yaml":
         TABLE.replace("d.csv", "big.csv")}, ("validate", "s.yaml", "--max-file-mb", "100000"), 3, "out of memory"),
    Case("sparse-20gb-text", "sparse-csv", {"big.txt": Sparse(GB20), "s.yaml": "specgrad: 1\nname: t\ninput: {shape: [4], dtype: int32}\nmodel: [{embedding: {vocab: 128, dim: 2}}]\ndata: {source: text, path: big.txt, context: 4}\n"},  # noqa: E501
         ("validate", "s.yaml"), 1, "over the limit"),
    Case("sparse-20gb-input", "sparse-csv", {"big.csv": Sparse(GB20, b"a,b\n1,2\n")}, ("run", "tiny.yaml", "--weights",
         "w.safetensors", "--input", "big.csv", "--device", "CPU"), 1, "over the limit"),
    Case("npz-zip-bomb", "zip-bomb", {"b.npz": mk.Made(lambda p, a: p.write_bytes(mk.zip_bomb())), "s.yaml":
         HEAD + "data: {source: npz, path: b.npz}\n"}, ("validate", "s.yaml", "--max-file-mb", "64"), 1,
         "unpacks to 256.0 MiB"),
    Case("npz-lying-directory", "zip-bomb", {"b.npz": mk.lying_zip_directory(), "s.yaml":
         HEAD + "data: {source: npz, path: b.npz}\n"}, ("validate", "s.yaml"), 1, "b.npz"),
    Case("npz-many-members", "zip-bomb",
         {"b.npz": mk.many_members(), "s.yaml": HEAD + "data: {source: npz, path: b.npz}\n"},
         ("validate", "s.yaml"), 1, "256"),
    Case("npz-pickle", "zip-bomb", {"b.npz": mk.pickled_npz(), "s.yaml": HEAD + "data: {source: npz, path: b.npz}\n"},
         ("validate", "s.yaml"), 1, "Python objects"),
    Case("npz-garbage", "zip-bomb", {"b.npz": b"PK\x03\x04" + os.urandom(64), "s.yaml":
         HEAD + "data: {source: npz, path: b.npz}\n"}, ("validate", "s.yaml"), 1, "cannot be read as a .npz"),
    Case("npy-huge-header-data", "npy-header", {"x.npy": mk.npy_huge_header(), "s.yaml":
         HEAD + "data: {source: npz, path: x.npy, target: input, task: regress}\n"}, ("validate", "s.yaml"), 1,
         "header"),
    Case("npy-huge-header-input", "npy-header", {"h.npy": mk.npy_huge_header()}, ("run", "tiny.yaml", "--weights",
         "w.safetensors", "--input", "h.npy", "--device", "CPU"), 1, "h.npy"),
    Case("npy-input-pickle", "npy-header", {"p.npy": mk.npy_bytes(__import__("numpy").array([None, 1], dtype=object))},
         ("run", "tiny.yaml", "--weights", "w.safetensors", "--input", "p.npy", "--device", "CPU"), 1,
         "Python objects"),
    Case("npy-shape-beyond-data", "npy-header", {"x2.npy": mk._npy_header((1 << 40, 2)) + bytes(8), "s.yaml":
         HEAD + "data: {source: npz, path: x2.npy, target: input, task: regress}\n"}, ("validate", "s.yaml"), 1,
         "x2.npy"),
    # *** weights ***
    Case("huge-safetensors", "huge-safetensors", {"big.safetensors": mk.huge_safetensors()}, ("run", "tiny.yaml",
         "--weights", "big.safetensors", "--input", "x.npy", "--device", "CPU"), 1, "--max-file-mb"),
    Case("huge-safetensors-export", "huge-safetensors", {"big.safetensors": mk.huge_safetensors()}, ("export",
         "tiny.yaml", "--weights", "big.safetensors", "--format", "safetensors", "--out", "m.safetensors"), 1,
         "over the limit"),
    Case("resume-checkpoint-over-the-size-limit", "huge-safetensors", {"run": Asset("run")}, RESUME, 1,
         "is too large: loading it reads", env={"MAX_FILE_MB": "0"}),
    Case("safetensors-header-length-huge", "huge-safetensors", {"h.safetensors": (1 << 62).to_bytes(8, "little")},
         ("run", "tiny.yaml", "--weights", "h.safetensors", "--input", "x.npy", "--device", "CPU"), 1,
         "not a valid safetensors file"),
    Case("safetensors-deep-json", "huge-safetensors", {"h.safetensors": mk.safetensors_bytes(b"[" * 100_000)},
         ("run", "tiny.yaml", "--weights", "h.safetensors", "--input", "x.npy", "--device", "CPU"), 1,
         "not a valid safetensors file"),
    Case("safetensors-empty", "huge-safetensors", {"h.safetensors": b""}, ("run", "tiny.yaml", "--weights",
         "h.safetensors", "--input", "x.npy", "--device", "CPU"), 1, "not a valid safetensors file"),
    Case("safetensors-offsets-past-end", "huge-safetensors", {"h.safetensors": mk.safetensors_bytes(
        {"steps.0.1.weight": {"dtype": "F32", "shape": [8, 2], "data_offsets": [0, 64]}}, bytes(8))},
        ("run", "tiny.yaml", "--weights", "h.safetensors", "--input", "x.npy", "--device", "CPU"), 1, "truncated"),
    Case("weights-of-another-model", "weights-meta", {"o.safetensors": mk.other_model_weights()}, ("run", "tiny.yaml",
         "--weights", "o.safetensors", "--input", "x.npy", "--device", "CPU"), 1, "do not fit the model"),
    Case("weights-class-names-wrong", "weights-meta", {"m.safetensors": mk.remeta("w", class_names='["a"]')},
         ("run", "tiny.yaml", "--weights", "m.safetensors", "--input", "x.npy", "--device", "CPU"), 1,
         "class_names must be 2 strings"),
    Case("weights-normalization-deep-json", "weights-meta", {"m.safetensors": mk.remeta("w", normalization="[" *
         100_000)}, ("run", "tiny.yaml", "--weights", "m.safetensors", "--input", "x.npy", "--device", "CPU"), 1,
         "normalization"),
    Case("weights-normalization-wrong-shape", "weights-meta", {"m.safetensors": mk.remeta("w", normalization=json.dumps(
        {"mean": [1, 2, 3], "std": 1}))}, ("run", "tiny.yaml", "--weights", "m.safetensors", "--input", "x.npy",
        "--device", "CPU"), 1, "does not fit the shape [2]"),
    Case("weights-task-unknown", "weights-meta", {"m.safetensors": mk.remeta("w", task="exfiltrate")}, ("export",
         "tiny.yaml", "--weights", "m.safetensors", "--format", "onnx", "--out", "m.onnx"), 1, "task 'exfiltrate'"),
    Case("weights-checksums-not-json", "weights-meta", {"m.safetensors": mk.remeta("w", tensors_sha256="{nope")},
         ("run", "tiny.yaml", "--weights", "m.safetensors", "--input", "x.npy", "--device", "CPU"), 1, "damaged"),
    Case("resume-position-not-json", "weights-meta", {"run": Asset("run"), CKPT: mk.remeta("run",
         "checkpoints/epoch-00001.safetensors", position="{nope")}, RESUME, 1, "epoch-00001.safetensors"),
    Case("resume-position-wrong-fields", "weights-meta", {"run": Asset("run"), CKPT: mk.remeta("run",
         "checkpoints/epoch-00001.safetensors", position=json.dumps({"epoch": "a", "zzz": 1}))}, RESUME, 1,
         "epoch-00001.safetensors"),
    Case("resume-step-not-a-number", "weights-meta", {"run": Asset("run"), CKPT: mk.remeta("run",
         "checkpoints/epoch-00001.safetensors", step="x")}, RESUME, 1, "epoch-00001.safetensors"),
    Case("resume-rng-state-bad", "weights-meta", {"run": Asset("run"), CKPT: mk.remeta("run",
         "checkpoints/epoch-00001.safetensors", tensor_rng="[]")}, RESUME, 1, "epoch-00001.safetensors"),
    Case("resume-another-specs-checkpoint", "weights-meta", {"run": Asset("run"), CKPT: mk.remeta("run",
         "checkpoints/epoch-00001.safetensors", spec_hash="0" * 16)}, RESUME, 1, "was not written for"),
    # *** what used to be a traceback ***
    Case("null-byte-data-path", "null-byte", {"s.yaml": TABLE.replace("d.csv", '"d\\0.csv"')}, ("validate", "s.yaml"),
         1, "null character"),
    Case("null-byte-extends", "null-byte", {"s.yaml": 'specgrad: 1\nextends: "b\\0.yaml"\n'}, ("validate", "s.yaml"),
         1, "null character"),
    Case("null-byte-name", "null-byte", {"s.yaml": TINY.replace("name: tiny", 'name: "a\\0b"')}, ("train", "s.yaml",
         "--out", "out", "--device", "CPU"), 1, "name holds '\\x00'"),
    Case("null-byte-node-name", "null-byte", {"s.yaml": mk.graph_named("a\0b")}, ("validate", "s.yaml"), 1, "a\\x00b"),
    Case("null-byte-set", "null-byte", {}, ("validate", "table.yaml", "--set", "data.path=d\\0.csv"), 1,
         "no such file"),
    Case("node-name-brackets", "layer-names", {"s.yaml": mk.graph_named("a[b]")}, ("validate", "s.yaml"), 1, "a[b]"),
    Case("node-name-markup", "layer-names", {"s.yaml": mk.graph_named("[/]")}, ("validate", "s.yaml"), 1, "[/]"),
    Case("node-name-escape-sequence", "layer-names", {"s.yaml": mk.graph_named("a\x1b[31mred")}, ("validate",
         "s.yaml"), 1, "\\x1b", tty=True),
    Case("node-name-rtl-override", "layer-names", {"s.yaml": mk.graph_named("a\u202eb")}, ("validate", "s.yaml"), 1,
         "\\u202e"),
    Case("node-name-dot", "layer-names", {"s.yaml": mk.graph_named("body.0")}, ("validate", "s.yaml"), 1, "body.0"),
    Case("node-name-long", "layer-names", {"s.yaml": mk.graph_named("n" * 10_000)}, ("validate", "s.yaml"), 1, "64"),
    Case("input-name-slash", "layer-names", {"s.yaml": "specgrad: 1\nname: t\ninputs: {'../x': {shape: [2]}}\nmodel:\n  graph:\n    - {name: a, layer: linear, out: 2, from: '../x'}\n  outputs: [a]\n"},  # noqa: E501
         ("validate", "s.yaml"), 1, "../x"),
    Case("train-out-is-a-file", "out-file", {"out": "a file\n"}, ("train", "tiny.yaml", "--out", "out", "--device",
         "CPU"), 1, "--out"),
    Case("train-out-is-a-link-to-a-file", "out-file", {"out": Link("../outside/secret.txt")}, ("train", "tiny.yaml",
         "--out", "out", "--device", "CPU"), 1, "--out"),
    Case("export-out-missing-folder", "out-file", {}, ("export", "tiny.yaml", "--weights", "w.safetensors", "--format",
         "onnx", "--out", "no/m.onnx"), 1, "does not exist"),
    Case("export-onnx-out-folder", "export-folder", {"m.onnx": Folder()}, ("export", "tiny.yaml", "--weights",
         "w.safetensors", "--format", "onnx", "--out", "m.onnx"), 1, "is a folder"),
    Case("export-safetensors-out-folder", "export-folder", {}, ("export", "tiny.yaml", "--weights", "w.safetensors",
         "--format", "safetensors", "--out", "."), 1, "is a folder"),
    Case("export-c-out-without-extension", "export-folder", {}, ("export", "tiny.yaml", "--weights", "w.safetensors",
         "--format", "c", "--out", "model"), 1, "model.c"),
    Case("export-c-out-header", "export-folder", {}, ("export", "tiny.yaml", "--weights", "w.safetensors", "--format",
         "c", "--out", "m.h"), 1, "m.c"),
    Case("checkpoint-disk-full", "full-disk", {}, ("train", "tiny.yaml", "--out", "out", "--device", "CPU"), 3, FULL,
         writes=("out",), patch=FULL_CHECKPOINTS, check=_no_temporaries("out")),
    Case("checkpoint-disk-full-says-resume", "full-disk", {}, ("train", "tiny.yaml", "--out", "out", "--device", "CPU"),
         3, "specgrad train --resume out/tiny-1", writes=("out",), patch=FULL_CHECKPOINTS),
    Case("tmpfs-full", "full-disk", {}, ("train", "tiny.yaml", "--out", "out", "--device", "CPU"), 3, FULL,
         writes=("out",), mounts={"out": "size=12k"}, needs=("root",), slow=True, check=_no_temporaries("out")),
    Case("tmpfs-read-only", "full-disk", {}, ("train", "tiny.yaml", "--out", "out", "--device", "CPU"), 3, "read-only",
         mounts={"out": "ro,size=64k"}, needs=("root",), slow=True),
    Case("read-only-out", "full-disk", {"out": Folder(0o555)},
         ("train", "tiny.yaml", "--out", "out", "--device", "CPU"),
         3, "permission", needs=("nonroot",)),
    # *** run's input ***
    Case("json-huge-integer", "json-input", {"b.json": "[[1" + "0" * 400 + ", 2]]"}, ("run", "tiny.yaml", "--weights",
         "w.safetensors", "--input", "b.json", "--device", "CPU"), 1, "b.json"),
    Case("json-int-too-large-for-float", "json-input", {"b.json": "[[" + "9" * 5000 + ", 2]]"}, ("run", "tiny.yaml",
         "--weights", "w.safetensors", "--input", "b.json", "--device", "CPU"), 1, "b.json"),
    Case("json-deep-nesting", "json-input", {"d.json": "[" * 100_000 + "]" * 100_000}, ("run", "tiny.yaml",
         "--weights", "w.safetensors", "--input", "d.json", "--device", "CPU"), 1, "d.json"),
    Case("json-strings", "json-input", {"s.json": '[["a", "b"]]'}, ("run", "tiny.yaml", "--weights", "w.safetensors",
         "--input", "s.json", "--device", "CPU"), 1, "is not a number"),
    Case("json-empty", "json-input", {"e.json": ""}, ("run", "tiny.yaml", "--weights", "w.safetensors", "--input",
         "e.json", "--device", "CPU"), 1, "not valid JSON"),
    Case("input-nan-npy", "nonfinite", {"n.npy": mk.npy_bytes(__import__("numpy").array([[float("nan"), 1.0]],
         dtype="float32"))}, ("run", "tiny.yaml", "--weights", "w.safetensors", "--input", "n.npy", "--device", "CPU"),
         1, "NaN or infinite"),
    Case("input-inf-csv", "nonfinite", {"i.csv": "a,b\n1,inf\n"}, ("run", "tiny.yaml", "--weights", "w.safetensors",
         "--input", "i.csv", "--device", "CPU"), 1, "'inf' is not a finite number"),
    Case("input-nan-allowed", "nonfinite", {"n.json": "[[NaN, 1]]"}, ("run", "tiny.yaml", "--weights", "w.safetensors",
         "--input", "n.json", "--device", "CPU", "--allow-nonfinite"), 0, "warning"),
    Case("training-data-inf", "nonfinite", {"d.csv": ROWS + "inf,3\n"}, ("validate", "table.yaml"), 1, "inf"),
    # *** damage ***
    Case("resume-flipped-bit", "flipped-bit", {"run": Asset("run"), CKPT: mk.flip_bit("model.steps.0.1.weight")},
         RESUME, 1, "does not match its checksum"),
    Case("resume-flipped-bit-in-best", "flipped-bit", {"run": Asset("run"), "run/checkpoints/best.safetensors":
         mk.flip_bit("model.steps.2.1.bias", bit=7)}, RESUME, 1, "does not match its checksum",
         writes=("run",)),  # NOTE: a finished run's metrics are rewound before its best weights are read
    Case("run-flipped-bit", "flipped-bit", {"w.safetensors": mk.flip_bit("steps.2.1.weight", bit=3)}, RUN, 1,
         "does not match its checksum"),
    Case("run-checkpoint-flipped-optimizer-bit", "flipped-bit", {"run": Asset("run"), CKPT: mk.flip_bit(
        "optimizer.v.0")}, ("run", "tiny.yaml", "--weights", CKPT, "--input", "x.npy", "--device", "CPU"), 0,
         "0: class"),
    Case("resume-truncated-checkpoint", "flipped-bit", {"run": Asset("run"), CKPT: mk.truncate(100)}, RESUME, 1,
         "epoch-00001.safetensors"),
    # *** engine bugs are internal errors ***
    Case("engine-bug-in-run", "engine-bug", {}, RUN, 70, "internal error", patch=bug("tensor", "Tensor.numpy")),
    Case("engine-bug-in-load-state-dict", "engine-bug", {}, RUN, 70, "internal error",
         patch=bug("tensor", "Tensor.assign")),
    Case("engine-bug-in-safe-load", "engine-bug", {}, RUN, 70, "internal error",
         patch=bug("nn.state", "tensor_sha256")),
    Case("engine-bug-in-contract", "engine-bug", {}, RUN, 70, "internal error",
         patch=bug("modelspec.contract", "_stats")),
    Case("engine-bug-in-validate", "engine-bug", {}, ("validate", "tiny.yaml"), 70, "internal error",
         patch=bug("modelspec.validate", "infer")),
    Case("engine-bug-in-train", "engine-bug", {}, ("train", "tiny.yaml", "--out", "out", "--device", "CPU"), 70,
         "internal error", writes=("out",), patch=bug("tensor", "Tensor.backward", "RuntimeError")),
    Case("engine-bug-in-export", "engine-bug", {}, ("export", "tiny.yaml", "--weights", "w.safetensors", "--format",
         "onnx", "--out", "m.onnx"), 70, "internal error", patch=bug("export.onnx", "_export_step", "KeyError"),
         slow=True),
    # *** the exported C program ***
    Case("c-runner-junk", "c-runner", {"runner": Asset("runner")}, (), 1, "is not a number", program="runner",
         stdin=b"1 abc\n", needs=("clang",)),
    Case("c-runner-nan", "c-runner", {"runner": Asset("runner")}, (), 1, "error: example 0", program="runner",
         stdin=b"nan 1\n", needs=("clang",), slow=True),
    Case("c-runner-truncated", "c-runner", {"runner": Asset("runner")}, (), 1, "error", program="runner",
         stdin=b"1 2\n3\n", needs=("clang",), slow=True),
    Case("c-runner-huge-exponent", "c-runner", {"runner": Asset("runner")}, (), 1, "error", program="runner",
         stdin=b"1e99999 2\n", needs=("clang",), slow=True),
    Case("c-runner-binary", "c-runner", {"runner": Asset("runner")}, (), 1, "error", program="runner",
         stdin=bytes(range(256)), needs=("clang",), slow=True),
    Case("c-runner-good", "c-runner", {"runner": Asset("runner")}, (), 0, "", program="runner",
         stdin=b"0.5 -0.25\n1 2\n", needs=("clang",), slow=True),
    # *** more ***
    Case("spec-empty", "more", {"e.yaml": ""}, ("validate", "e.yaml"), 1, "e.yaml"),
    Case("spec-binary", "more", {"b.yaml": bytes(range(256)) * 4}, ("validate", "b.yaml"), 1, "b.yaml"),
    Case("spec-latin1", "more", {"l.yaml": HEAD.encode() + b"description: caf\xe9\n"}, ("validate", "l.yaml"), 1,
         "UTF-8"),
    Case("spec-bom-crlf", "more", {"c.yaml": "\ufeff" + HEAD.replace("\n", "\r\n")}, ("validate", "c.yaml"), 0,
         "c.yaml: valid"),
    Case("spec-tab-indent", "more", {"t.yaml": HEAD + "train:\n\tlr: 1\n"}, ("validate", "t.yaml"), 1, "t.yaml:6:1"),
    Case("yaml-python-tag", "more", {"p.yaml": HEAD + "seed: !!python/object/apply:os.system ['touch pwned']\n"},
         ("validate", "p.yaml"), 1, "p.yaml:5"),
    Case("yaml-custom-tag", "more", {"p.yaml": HEAD + "seed: !env HOME\n"}, ("validate", "p.yaml"), 1, "p.yaml:5"),
    Case("yaml-merge-key", "more", {"m.yaml": HEAD + "base: &b {lr: 0.1}\ntrain:\n  <<: *b\n"}, ("validate",
         "m.yaml"), 1, "m.yaml:"),
    Case("yaml-duplicate-key", "more", {"d.yaml": HEAD + "seed: 1\nseed: 2\n"}, ("validate", "d.yaml"), 1, "d.yaml:6"),
    Case("yaml-two-documents", "more", {"d.yaml": HEAD + "---\n" + HEAD}, ("validate", "d.yaml"), 1, "d.yaml"),
    Case("train-null", "more", {"n.yaml": HEAD + "train: null\ndata: null\n"}, ("validate", "n.yaml"), 0,
         "n.yaml: valid"),  # NOTE: a section set to null is all its defaults
    Case("set-train-null", "more", {}, ("validate", "tiny.yaml", "--set", "train=null"), 0, "tiny.yaml: valid"),
    Case("set-model-null", "more", {}, ("validate", "tiny.yaml", "--set", "model=null"), 1, "--set model=null"),
    Case("set-nan-lr", "more", {}, ("validate", "tiny.yaml", "--set", "train.lr=.nan"), 1, "train.lr"),
    Case("set-huge-width", "more", {}, ("validate", "tiny.yaml", "--set", "model.0.linear=99999999999999999999999"), 1,
         "model"),
    Case("set-too-many-parts", "more", {}, ("validate", "tiny.yaml", "--set", ".".join(["a"] * 70) + "=1"), 1,
         "64 parts"),
    Case("set-tag", "more", {}, ("validate", "tiny.yaml", "--set", "seed=!!python/name:os.system"), 1, "seed"),
    Case("set-alias-bomb", "more", {}, ("validate", "tiny.yaml", "--set", "vars.x=&a [*a]"), 1, "--set"),
    Case("set-escape-sequence", "more", {}, ("validate", "tiny.yaml", "--set", "name=a\x1b[2Jb"), 1, "name holds",
         tty=True),
    Case("spec-path-markup", "more", {"a[/]/s[bold].yaml": TINY}, ("validate", "a[/]/s[bold].yaml"), 0,
         "a[/]/s[bold].yaml"),
    Case("spec-path-unicode", "more", {"\u202eevil \U0001f600/s p\u00e9c.yaml": TINY},
         ("validate", "\u202eevil \U0001f600/s p\u00e9c.yaml"), 0, "valid"),
    Case("spec-path-escape-sequence", "more", {"e\x1b[31m.yaml": TINY}, ("validate", "e\x1b[31m.yaml"), 0, "valid",
         tty=True),
    Case("extends-escape-sequence", "more", {"s.yaml": 'specgrad: 1\nextends: "\\e]0;pwned\\a\\e[2Jb.yaml"\n'},
         ("validate", "s.yaml"), 1, "no such file", tty=True),
    Case("weights-class-names-escape-sequence", "more", {"m.safetensors": mk.remeta("w", class_names=json.dumps(
        ["\x1b[2Jzero", "\x1b]0;pwned\x07one"]))},
        ("run", "tiny.yaml", "--weights", "m.safetensors", "--input", "x.npy", "--device", "CPU"), 0, "\\x1b",
        tty=True),
    Case("weights-name-escape-sequence", "more", {"m.safetensors": mk.remeta("w", name="\x1b[2Jevil",
         spec_hash="f" * 16)}, ("run", "tiny.yaml", "--weights", "m.safetensors", "--input", "x.npy", "--device",
         "CPU"), 0, "trained with a different spec", tty=True),
    Case("resume-device-from-the-checkpoint", "weights-meta", {"run": Asset("run"), CKPT: mk.remeta("run",
         "checkpoints/epoch-00001.safetensors", device="DISK:../outside/secret.txt")}, ("train", "--resume", "run"), 1,
         "it names the device"),
    Case("run-folder-is-a-link", "more", {"run": Asset("run"), "r": Link("run")}, ("run", "r", "--input", "x.npy",
         "--device", "CPU"), 0, "0: class"),
    Case("run-folder-model-missing", "more", {"run": Asset("run"), "run/model.safetensors": mk.Made(
        lambda p, a: p.unlink())}, ("export", "run", "--format", "safetensors", "--out", "m.safetensors"), 1, "run"),
    Case("concurrent-trains-one-out", "more", {}, ("train", "tiny.yaml", "--out", "out", "--device", "CPU"), 0, "done",
         writes=("out",), times=2, check=_two_run_folders, slow=True),
    Case("max-file-mb-zero", "more", {}, ("validate", "tiny.yaml", "--max-file-mb", "0"), 2, "--max-file-mb"),
    Case("epochs-and-steps", "more", {}, ("train", "tiny.yaml", "--epochs", "1", "--steps", "1"), 2, "not both"),
    Case("unknown-device", "more", {}, ("run", "tiny.yaml", "--weights", "w.safetensors", "--input", "x.npy",
         "--device", "TPU"), 3, "TPU"),
    Case("read-only-run-folder", "more", {"run": Asset("run"), "run/": mk.Made(lambda p, a: p.chmod(0o555))}, RESUME,
         3, "permission", needs=("nonroot",)),
    # NOTE: the images source (issue 15 item 4): every file of a folder read under the same policy
    Case("images-class-folder-link-outside", "read-outside", {"pics.yaml": PICS, "photos/a/1.png": mk.png(),
         "photos/b": Link("<outside>")}, ("validate", "pics.yaml"), 1, "leaves the folders"),
    Case("images-file-link-outside", "read-outside", {"pics.yaml": PICS, "photos/a/1.png": mk.png(),
         "photos/b/s.png": Link("<outside>/secret.txt")}, ("validate", "pics.yaml"), 1, "leaves the folders"),
    Case("images-fifo", "fifo", {"pics.yaml": PICS, "photos/a/1.png": mk.png(), "photos/b/f.png": Fifo()},
         ("validate", "pics.yaml"), 1, "FIFO"),
    Case("images-dev-zero-allowed", "dev-zero", {"pics.yaml": PICS, "photos/a/1.png": mk.png(),
         "photos/b/z.png": Link("/dev/zero")}, ("validate", "pics.yaml", "--allow-outside"), 1, "character device"),
    Case("images-decompression-bomb", "more", {"pics.yaml": PICS, "photos/a/1.png": mk.png(),
         "photos/b/bomb.png": mk.png(100_000, 100_000, b"")}, ("validate", "pics.yaml"), 1, "decompression bomb"),
    Case("images-secret-as-png", "echo", {"pics.yaml": PICS, "photos/a/1.png": mk.png(),
         "photos/b/s.png": SECRET * 50}, ("validate", "pics.yaml"), 1, "is not a PNG or JPEG image"),
    Case("images-name-escape-sequence", "more", {"pics.yaml": PICS, "photos/a/1.png": mk.png(),
         "photos/b/\x1b[2Jx.png": b"junk"}, ("validate", "pics.yaml"), 1, "\\x1b", tty=True),
    Case("csv-text-column-secret", "echo", {"d.csv": "x,y\n" + "".join(f"{'q' * 100}{SECRET},{i}\n" for i in
         range(4))}, ("validate", "table.yaml"), 1, "holds text"),
    # NOTE: init: {from: ...} reads a weights file under the same policy as the files a spec names
    Case("init-fifo", "fifo", {"i.yaml": INIT % "f.safetensors", "f.safetensors": Fifo()}, ("validate", "i.yaml"), 1,
         "i.yaml:11:14: error: init.from: cannot read f.safetensors: it is a FIFO"),
    Case("init-link-outside", "read-outside", {"i.yaml": INIT % "s.safetensors", "s.safetensors": Link(
         "<outside>/secret.txt")}, ("validate", "i.yaml"), 1, "leaves the folders"),
    Case("init-dev-zero-allowed", "dev-zero", {"i.yaml": INIT % "z.safetensors", "z.safetensors": Link("/dev/zero")},
         ("validate", "i.yaml", "--allow-outside"), 1, "character device"),
    Case("init-folder", "more", {"i.yaml": INIT % "d.safetensors", "d.safetensors": Folder()}, INIT_TRAIN, 1,
         "is a folder, but not a run folder"),
    Case("init-huge-over-max-file-mb", "huge-safetensors", {"i.yaml": INIT.replace("linear: 8", "linear: 1048576") %
         "h.safetensors", "h.safetensors": mk.huge_safetensors(8 << 20, "w", [1048576, 2])},
         ("validate", "i.yaml", "--max-file-mb", "4"), 1, "over the limit of 4 MiB for a weights file"),
    Case("init-truncated", "more", {"i.yaml": INIT % "t.safetensors", "t.safetensors": _init_file("F32", [8, 2],
         bytes(64))[:-24]}, ("validate", "i.yaml"), 1, "is the file truncated?"),
    Case("init-int-tensor", "more", {"i.yaml": INIT % "n.safetensors", "n.safetensors": _init_file("I32", [8, 2],
         bytes(64))}, ("validate", "i.yaml"), 1, "holds int32 values, but the model's 0.weight is a weight of "
         "floating-point numbers"),
    Case("init-nan-tensor", "more", {"i.yaml": INIT % "n.safetensors", "n.safetensors": _init_file("F32", [8, 2],
         b"\x00\x00\xc0\x7f" * 16)}, INIT_TRAIN, 1, "i.yaml:11:45: error: init: 'w' in n.safetensors holds NaN"),
    Case("init-map-value-a-list", "more", {"i.yaml": (INIT % "n.safetensors").replace("0.weight: w", "0.weight: [w]")},
         ("validate", "i.yaml"), 1, "the value of 0.weight must name a tensor of n.safetensors, got a list"),
    Case("init-set-null", "more", {"i.yaml": INIT % "gone.safetensors"}, ("validate", "i.yaml", "--set", "init=null"),
         0, "i.yaml: valid"),
    Case("lstm-10000-steps", "more", {"l.yaml": "specgrad: 1\nname: l\ninput: {shape: [10000, 8]}\nmodel: [{lstm: "
         "1024}, {linear: 2}]\n"}, ("validate", "l.yaml"), 1, "l.yaml:4:9: error: layer 0 (lstm) cannot take shape "
         "[10000, 8] from the input (line 3): it needs at most 2,048 steps"),
    Case("upsample-memory", "more", {"u.yaml": "specgrad: 1\nname: u\ninput: {shape: [3, 1000, 1000]}\nmodel: "
         "[{upsample: 64}]\n"}, ("validate", "u.yaml"), 1, "over the 4 GiB budget"),
    Case("resume-metrics-garbage", "more", {"run": Asset("run"), "run/metrics.jsonl": mk.rewrite(
        "\0\0garbage\n{\"split\": 5}\n[1,2]\n")}, RESUME, 0, "has finished", writes=("run",)),
]
# fmt: on


def _swap_for_link(path: Path, target: str) -> None:
    shutil.rmtree(path)
    path.symlink_to(target)


def _params() -> list:
    return [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in CASES]


@pytest.mark.parametrize("case", _params())
def test_hostile_case(case: Case, folders: Folders) -> None:
    if why := needs_met(case.needs):
        pytest.skip(why)
    check_case(folders, case)


def test_the_corpus_is_big_and_every_bullet_has_a_fast_case() -> None:
    assert len(CASES) >= 80
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
    assert {c.bullet for c in CASES} <= set(BULLETS)
    missing = [b for b in BULLETS if not any(c.bullet == b and not c.slow for c in CASES)]
    assert not missing, f"bullets without a case in the default tier: {missing}"


def test_the_sentinel_and_outside_files_hold_the_secret(folders: Folders) -> None:
    """The secret check means something: the files a case may not print do hold it."""
    for folder in (folders.outside, folders.sentinel):
        assert all(SECRET in p.read_text() for p in Path(folder).iterdir())
