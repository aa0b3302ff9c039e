"""Hostile input, second round (issue 30), the flags' area: environment flags with values they do not take, names
longer than a file system takes, names from data that would drive the terminal, and run-folder entries or options
that used to end in exit 70. Each case runs through the CLI as a user runs it (harness.check): exit code, message,
no traceback, no secret printed, no raw escape sequence, nothing changed outside the paths it may write."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tests.hostile.harness import TINY, Asset, Assets, Case, Folders, Made, needs_met
from tests.hostile.harness import check as check_case

RESUME = ("train", "--resume", "run", "--device", "CPU")
TRAIN = ("train", "tiny.yaml", "--out", "out", "--device", "CPU")
RUN = ("run", "tiny.yaml", "--weights", "w.safetensors", "--input", "x.npy", "--device", "CPU")
TAKES = "unset it for the default"
# NOTE: what must never reach a terminal raw: C0 controls (less tab and line breaks), DEL, C1 controls (0x9b is a
# one-byte CSI), and the bidi embeddings, overrides and isolates (U+202E makes 'abc' read 'cba')
RAW = {chr(c) for c in (*range(0, 9), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0))}
BIDI = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)}

# *** a CSV whose class names and column names are terminal escapes, bidi overrides and rich markup ***

LABELS = ["\x1b[31mred", "\x1b]0;pwned\x07", "ab\u202ecba", "[bold]x", "c\u2066d\u2069", "e\u202af\u202c", "a\nb",
          "g\x9bh", "plain"]  # fmt: skip
COLUMN = "col\x1b[1m"
LAB = f"""\
specgrad: 1
name: lab
seed: 0
input: {{shape: [4]}}
model: [{{linear: {len(LABELS)}}}]
data: {{source: csv, path: lab.csv, target: y, batch_size: 8, categorical: {{"col\\e[1m": one_hot}}}}
train: {{epochs: 1, lr: 0.01}}
"""


def lab_csv() -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["x", COLUMN, "y"])
    for i in range(72):
        w.writerow([i % 7, ["u", "\x1b[32mv", "[red]w"][i % 3], LABELS[i % len(LABELS)]])
    return buf.getvalue()


LAB_FILES = {"lab.yaml": LAB, "lab.csv": lab_csv()}
SHOWN = "\\x1b]0;pwned\\x07"  # NOTE: how the OSC label is printed, escaped


def _swap_for_folder(path: Path, assets: Assets) -> None:
    path.unlink()
    path.mkdir()


FOLDER_INSTEAD = Made(_swap_for_folder)  # NOTE: a folder where the run folder holds a file


def long_name(name: str) -> str:
    return TINY.replace("name: tiny", f"name: {name}")


# fmt: off
CASES = [
    # *** environment flags: one line naming the flag, its value and what it takes; exit 2, before any work ***
    Case("flag-threads-junk", "flags", {}, ("validate", "tiny.yaml"), 2,
         f"error: the environment variable THREADS is 'abc', but THREADS takes a whole number from 0 to 1,024; {TAKES}",
         env={"THREADS": "abc"}),
    Case("flag-compile-jobs-negative", "flags", {}, ("train", "tiny.yaml", "--out", "out", "--device", "CLANG"), 2,
         "COMPILE_JOBS is '-5', but COMPILE_JOBS takes a whole number from 0 to 1,024", env={"COMPILE_JOBS": "-5"}),
    Case("flag-threads-huge", "flags", {}, TRAIN, 2, "THREADS is '100000', but THREADS takes",
         env={"THREADS": "100000"}),
    Case("flag-5000-digits", "flags", {}, ("validate", "tiny.yaml"), 2, "DEBUG is '9999999999",
         env={"DEBUG": "9" * 5000}),
    Case("flag-onoff-2", "flags", {}, RUN, 2, "OPT is '2', but OPT takes 0 or 1", env={"OPT": "2"}),
    Case("flag-max-file-mb-negative-resume", "flags", {"run": Asset("run")}, RESUME, 2,
         "MAX_FILE_MB is '-1', but MAX_FILE_MB takes a whole number from 0 to", env={"MAX_FILE_MB": "-1"}),
    Case("flag-device-unknown", "flags", {}, ("run", "tiny.yaml", "--weights", "w.safetensors", "--input", "x.npy"), 2,
         "DEVICE is 'TPU', but DEVICE takes CPU, CLANG or GPU (in any case)", env={"DEVICE": "TPU"}),
    Case("flag-cpu-target-an-option", "flags", {}, ("validate", "tiny.yaml"), 2,
         "CPU_TARGET is '-fplugin=x.so', but CPU_TARGET takes a CPU name for -march=",
         env={"CPU_TARGET": "-fplugin=x.so"}),
    Case("flag-two-bad", "flags", {}, ("schema",), 2, "LRU is 'yes', but LRU takes 0 or 1",
         env={"LRU": "yes", "CL_WORK_GROUPS": "2"}),
    Case("flag-escape-sequence", "flags", {}, ("validate", "tiny.yaml"), 2, "THREADS is '\\x1b[2J'",
         env={"THREADS": "\x1b[2J"}, tty=True),
    Case("flag-empty-is-the-default", "flags", {}, ("validate", "tiny.yaml"), 0, "valid", env={"THREADS": ""}),
    Case("flag-help-still-works", "flags", {}, ("--help",), 0, "Usage", env={"THREADS": "abc"}),
    Case("flag-command-help-still-works", "flags", {}, ("train", "--help",), 0, "--resume", env={"THREADS": "abc"}),
    Case("flag-cachedir-empty-is-the-default", "flags", {}, ("run", "tiny.yaml", "--weights", "w.safetensors",
         "--input", "x.npy", "--device", "CLANG"), 0, "0: class", env={"CACHEDIR": ""}, writes=("../home",),
         needs=("clang",)),
    # *** names the file system cannot take: refused at validation with file:line:col, or a clear exit 1 ***
    Case("name-multibyte-past-255-bytes", "names", {"s.yaml": long_name("\U0001d400" * 90)},
         ("train", "s.yaml", "--out", "out", "--device", "CPU"), 1,
         "s.yaml:2:7: error: name is 360 bytes long in UTF-8 (90 characters, some of several bytes), over 239"),
    Case("name-multibyte-set", "names", {}, ("validate", "tiny.yaml", "--set", "name=" + "\u4e00" * 80), 1,
         "error: name is 240 bytes long in UTF-8"),
    Case("name-multibyte-fits", "names", {"s.yaml": long_name("\U0001d400" * 59)},
         ("train", "s.yaml", "--out", "out", "--device", "CPU"), 0, "final weights", writes=("out",)),
    Case("out-component-too-long", "names", {}, ("train", "tiny.yaml", "--out", "runs/" + "x" * 300, "--device",
         "CPU"), 1, "longer than the file system allows", writes=("runs",)),
    Case("spec-path-too-long", "names", {}, ("validate", "x" * 300 + ".yaml"), 1,
         "longer than the file system allows"),
    # *** names from data, printed escaped and never as markup ***
    Case("csv-labels-validate", "terminal", LAB_FILES, ("validate", "lab.yaml"), 0, SHOWN, tty=True),
    Case("csv-labels-validate-piped", "terminal", LAB_FILES, ("validate", "lab.yaml"), 0, "col\\x1b[1m (3 values)"),
    Case("csv-labels-train", "terminal", LAB_FILES, ("train", "lab.yaml", "--out", "out", "--device", "CPU"), 0,
         "9 classes (\\x1b[31mred, " + SHOWN + ", [bold]x, a\\nb, ab\\u202ecba, c\\u2066d\\u2069, e\\u202af\\u202c, "
         "g\\u009bh, plain)", writes=("out",), tty=True),
    # *** a run-folder entry of the wrong kind, and options past what a spec may ask: exit 1 or 2, not 70 ***
    Case("resume-lock-is-a-folder", "exit70", {"run": Asset("run"), "run/.lock": FOLDER_INSTEAD}, RESUME, 1,
         "run/.lock"),
    Case("resume-metrics-is-a-folder", "exit70", {"run": Asset("run"), "run/metrics.jsonl": FOLDER_INSTEAD}, RESUME, 1,
         "metrics.jsonl", writes=("run",)),
    Case("train-epochs-past-the-spec-limit", "exit70", {}, (*TRAIN, "--epochs", "99999999999999999999"), 2,
         "--epochs"),
    Case("train-steps-past-the-spec-limit", "exit70", {}, (*TRAIN, "--steps", str(1 << 41)), 2, "--steps"),
    Case("demo-seed-negative", "exit70", {}, ("demo", "--steps", "1", "--seed", "-5", "--device", "CPU"), 2,
         "--seed"),
    Case("sweep-seed-negative", "exit70", {}, ("sweep", "tiny.yaml", "--grid", "train.lr=0.1,0.2", "--random", "1",
         "--seed", "-1", "--out", "out", "--device", "CPU"), 2, "--seed"),
    Case("bench-seconds-infinite", "exit70", {}, ("bench", "--seconds", "inf", "--only", "sum"), 2, "--seconds"),
]
# fmt: on


def _params() -> list:
    return [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in CASES]


@pytest.mark.parametrize("case", _params())
def test_round2_flags_case(case: Case, folders: Folders) -> None:
    if why := needs_met(case.needs):
        pytest.skip(why)
    out = check_case(folders, case).output
    raw = sorted({c for c in out if c in RAW | BIDI})
    assert not raw, f"raw control or bidi characters {raw} reached the output:\n{out!r}"


def test_every_bad_flag_is_named_once(folders: Folders) -> None:
    """Several bad flags: each gets its own error line, and nothing else is said."""
    case = Case("flags-three-bad", "flags", {}, ("validate", "tiny.yaml"), 2, "THREADS",
                env={"THREADS": "abc", "OPT": "7", "SPEC_MEMORY_GB": "-1"})  # fmt: skip
    lines = check_case(folders, case).output.strip().splitlines()
    assert [line.split(" is ")[0] for line in lines] == [
        f"error: the environment variable {name}" for name in ("SPEC_MEMORY_GB", "THREADS", "OPT")
    ], lines


def test_a_trained_classifier_of_hostile_labels_is_evaluated_and_run_escaped(folders: Folders) -> None:
    """Train on the CSV, then evaluate (the per-class table and the confusion matrix, rich tables) and run it, all on
    a terminal: every label escaped, '[bold]x' shown as it is (not made bold), nothing raw."""
    train = Case("labels-train", "terminal", LAB_FILES, ("train", "lab.yaml", "--out", "out", "--device", "CPU"), 0,
                 "final weights", writes=("out",), tty=True)  # fmt: skip
    check_case(folders, train)
    evaluate = Case("labels-evaluate", "terminal", {}, ("evaluate", "out/lab-1", "--device", "CPU"), 0,
                    "confusion matrix", writes=("out/lab-1",), tty=True)  # fmt: skip
    out = check_case(folders, evaluate).output
    assert SHOWN in out and "[bold]x" in out and "ab\\u202ecba" in out, out
    (folders.project / "in.csv").write_text("x,col\x1b[1m\n1,u\n2,[red]w\n")
    run = Case("labels-run", "terminal", {}, ("run", "out/lab-1", "--input", "in.csv", "--device", "CPU"), 0, "class",
               tty=True)  # fmt: skip
    out += check_case(folders, run).output
    raw = sorted({c for c in out if c in RAW | BIDI})
    assert not raw, f"raw control or bidi characters {raw} reached the output:\n{out!r}"
