"""Hostile sweep folders and sweep command lines (issue 30, second round): a sweep folder from someone else (links and
FIFOs in place of its logs, a sweep.json naming another file as the spec or holding values specgrad never writes,
damaged results.json, trial folders that are links or hold leftovers, metrics with thousands of names) and command
lines that ask for too much (grids of 10^10 trials, ranges past what a draw can take, a Ray cluster that is not
there). Each runs through the CLI as a user runs it, under harness.check: exit code, message, no traceback, no secret
printed, nothing changed outside the sweep folder, no hang."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.harness import SECRET, TINY, Asset, Assets, Case, Fifo, Folder, Folders, Link, Made, needs_met
from tests.hostile.harness import check as check_case

RESUME = ("sweep", "--resume", "sw")
SWEEP = ("sweep", "tiny.yaml", "--device", "CPU", "--steps", "1")
DECADE = "0,1,2,3,4,5,6,7,8,9"


def plan(values: tuple[str, ...] = ("0.01", "0.02"), edit: Callable[[dict], None] | None = None, **changes: Any
         ) -> Made:  # fmt: skip
    """sweep.json as `specgrad sweep tiny.yaml --grid train.lr=VALUES --steps 1 --device CPU` writes it in sw/, with
    `changes` to its keys ("<project>" in a text is the project folder; _GONE removes the key), then `edit`."""

    def make(path: Path, assets: Assets) -> None:
        project = path.parent.parent
        doc = {"spec": str(project / "tiny.yaml"),
               "spec_sha256": hashlib.sha256((project / "tiny.yaml").read_bytes()).hexdigest(),
               "overrides": [], "epochs": None, "steps": 1, "device": "CPU", "grid": {"train.lr": list(values)},
               "random": None, "seed": 0,
               "trials": [{"name": f"trial-{i + 1:03d}", "overrides": [f"train.lr={v}"]} for i, v in
                          enumerate(values)]}  # fmt: skip
        for key, value in changes.items():
            if value is _GONE:
                del doc[key]
            else:
                doc[key] = value.replace("<project>", str(project)) if isinstance(value, str) else value
        if edit is not None:
            edit(doc)
        path.write_text(json.dumps(doc, indent=2))

    return Made(make)


_GONE = object()
DONE = json.dumps({"trial-001": {"exit_code": 0, "error": ""}, "trial-002": {"exit_code": 0, "error": ""}})


def _many_metrics(count: int = 3000) -> Made:
    """A finished run's metrics.jsonl whose validation records hold `count` metric names (about 41 KB)."""

    def make(path: Path, assets: Assets) -> None:
        names = {f"m{i:04d}": 0.5 for i in range(count)}
        lines = [{"split": "train_epoch", "epoch": 1, "step": 4, "loss": 0.7},
                 {"split": "valid", "epoch": 1, "step": 4, "loss": 0.6, **names}]  # fmt: skip
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))

    return Made(make)


def _escaped_names() -> Made:
    """The (planted) run's metrics.jsonl with a validation record naming metrics with ESC and BEL, and in CJK."""

    def make(path: Path, assets: Assets) -> None:
        record = {"split": "valid", "epoch": 1, "step": 4, "\x1b[31mX\x07": 0.5, "\u4e2d\u6587 loss": 0.4}
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")

    return Made(make)


def _closed_port() -> int:
    """A TCP port of this machine that nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nothing_made(ctx: Folders) -> None:
    assert not (ctx.project / "runs").exists(), "no sweep folder is made before the command's checks pass"


def _no_secret_in_sweep_folder(ctx: Folders) -> None:
    for p in (ctx.project / "sw").rglob("*"):
        if p.is_file() and not p.is_symlink():
            assert SECRET not in p.read_text(errors="replace"), f"{p} holds a secret"


def _summary_row(trial: str, state: str, error: str):
    def check(ctx: Folders) -> None:
        rows = {r["trial"]: r for r in csv.DictReader((ctx.project / "sw" / "summary.csv").open())}
        assert rows[trial]["state"] == state and error in rows[trial]["error"], rows[trial]
        _no_secret_in_sweep_folder(ctx)

    return check


def _columns_bounded(ctx: Folders) -> None:
    """summary.csv holds the metrics a summary keeps (compare's 64 a run), not the 3,000 names a file lists."""
    header = next(csv.reader((ctx.project / "sw" / "summary.csv").open()))
    assert sum(h.startswith("valid_") for h in header) <= 64, len(header)


def _with_trial(extra: dict[str, Any]):
    def change(doc: dict[str, Any]) -> None:
        doc["trials"].append(extra)

    return change


def _trial_of(edits: dict[str, str], finished: bool = True) -> Made:
    """The `run` asset (tiny.yaml trained: train.lr 0.01, epochs 1) as a trial's folder, its spec.resolved.yaml edited
    (text -> text); unless `finished`, cut back to its spec alone, as a trial stopped before its first checkpoint."""

    def make(path: Path, assets: Assets) -> None:
        shutil.copytree(assets.path("run"), path, symlinks=True)
        spec = path / "spec.resolved.yaml"
        text = spec.read_text()
        for old, new in edits.items():
            assert old in text, old
            text = text.replace(old, new)
        spec.write_text(text)
        if not finished:
            shutil.rmtree(path / "checkpoints")
            for name in ("model.safetensors", "metrics.jsonl", "metrics.csv", "metrics.png"):
                (path / name).unlink(missing_ok=True)

    return Made(make)


def _not_trained(ctx: Folders) -> None:
    """The edited trial failed with its reason; nothing was trained from its edited spec."""
    _summary_row("trial-001", "failed", "is not the spec this sweep plans for trial-001")(ctx)
    assert not (ctx.project / "sw/trial-001/model.safetensors").exists(), "the edited spec was trained"


def _escaped_everywhere(ctx: Folders) -> None:
    """A failed trial's error with a terminal's escape sequences is kept escaped, in results.json and the summaries."""
    error = json.loads((ctx.project / "sw/results.json").read_text())["trial-001"]["error"]
    assert error.isprintable() and "\\x1b]0;pwned" in error, error
    text = (ctx.project / "sw/summary.csv").read_text()
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text and "\\u202eevil" in text
    rows = json.loads((ctx.project / "sw/summary.json").read_text())["trials"]
    assert all(r["error"] is None or r["error"].isprintable() for r in rows), rows


ONE = {"sw/sweep.json": plan(("0.01",), steps=None)}  # NOTE: one trial, the `run` asset's own spec
HOSTILE_ERROR = "\x1b]0;pwned\x07\x1b[2J\u202eevil"
W = ("sw",)
LIMIT_NAME = "\u0e01" * 69 + "\u00e9" + "a" * 30  # NOTE: 100 characters, 239 bytes: validation's two limits at once
LIMIT_SPEC = TINY.replace("name: tiny", f"name: {LIMIT_NAME}")

# fmt: off
CASES = [
    # *** writes through links, and hangs on what is not a file ***
    Case("sweep-log-link-outside", "writes-through-links", {"sw/sweep.json": plan(),
         "sw/logs/trial-001.log": Link("<outside>/secret.txt")}, RESUME, 1,
         "logs/trial-001.log is a symbolic link, not a regular file", writes=W),
    Case("sweep-logs-folder-link-outside", "writes-through-links", {"sw/sweep.json": plan(),
         "sw/logs": Link("<outside>")}, RESUME, 1, "sw/logs is a symbolic link, not a folder", writes=W),
    Case("sweep-log-fifo", "hangs", {"sw/sweep.json": plan(), "sw/logs/trial-002.log": Fifo()}, RESUME, 1,
         "logs/trial-002.log is a named pipe (FIFO)", writes=W),
    Case("sweep-plan-link-outside", "writes-through-links", {"sw/sweep.json": Link("<outside>/target.json")},
         RESUME, 1, "sw/sweep.json is a symbolic link", writes=W),
    Case("sweep-results-link-outside", "writes-through-links", {"sw/sweep.json": plan(),
         "sw/results.json": Link("<outside>/target.json")}, RESUME, 1, "results.json is a symbolic link", writes=W),
    Case("sweep-trial-folder-link-outside", "writes-through-links", {"../outside/run": Asset("run"),
         "sw/sweep.json": plan(), "sw/trial-001": Link("<outside>/run")}, RESUME, 0,
         "trial-001 is not a folder but a symbolic link", writes=W,
         check=_summary_row("trial-001", "failed", "is not a folder but a symbolic link")),
    # *** reads that print what they read ***
    Case("sweep-spec-names-a-secret", "reads-that-print", {"sw/sweep.json": plan(spec="<project>/../outside/"
         "secret.yaml")}, RESUME, 1, "is not the spec this sweep was planned with", writes=W,
         check=_no_secret_in_sweep_folder),
    Case("sweep-spec-is-a-link-to-a-secret", "reads-that-print", {"s.yaml": Link("<outside>/secret.txt"),
         "sw/sweep.json": plan(spec="<project>/s.yaml")}, RESUME, 1, "is not the spec this sweep was planned with",
         writes=W, check=_no_secret_in_sweep_folder),
    Case("sweep-spec-is-a-fifo", "hangs", {"f.yaml": Fifo(), "sw/sweep.json": plan(spec="<project>/f.yaml")}, RESUME,
         1, "it is a FIFO", writes=W),
    Case("sweep-spec-relative", "reads-that-print", {"sw/sweep.json": plan(spec="../outside/secret.yaml")}, RESUME,
         1, "spec must be the absolute path of a spec file", writes=W),
    Case("sweep-plan-before-spec-sha256", "state", {"sw/sweep.json": plan(spec_sha256=_GONE)}, RESUME, 1,
         "written by an older specgrad", writes=W),
    # *** sweep.json checked like a spec ***
    Case("sweep-steps-negative", "state", {"sw/sweep.json": plan(steps=-5)}, RESUME, 1,
         "steps must be a whole number from 1 to", writes=W),
    Case("sweep-steps-1e308", "state", {"sw/sweep.json": plan(steps=1e308)}, RESUME, 1, "not 1e+308", writes=W),
    Case("sweep-epochs-a-text", "state", {"sw/sweep.json": plan(steps=None, epochs="10")}, RESUME, 1,
         "epochs must be a whole number from 1 to 1,000,000 (or null), not a text", writes=W),
    Case("sweep-seed-bool", "state", {"sw/sweep.json": plan(seed=True)}, RESUME, 1, "seed must be a whole number",
         writes=W),
    Case("sweep-device-disk", "state", {"sw/sweep.json": plan(device="DISK:../outside/secret.txt")}, RESUME, 1,
         "device must name a device to train on", writes=W),
    Case("sweep-trials-huge-list", "state", {"sw/sweep.json": plan(tuple(f"0.{i:05d}1" for i in range(20_000)))},
         RESUME, 1, "it lists 20,000 trials, more than a sweep may have (10,000)", writes=W),
    Case("sweep-trial-not-of-the-grid", "state", {"sw/sweep.json": plan(edit=_with_trial(
         {"name": "trial-003", "overrides": ["train.lr=0.03"]}))}, RESUME, 1,
         "it lists 3 trials where its grid gives 2", writes=W),
    Case("sweep-trial-name-escapes", "state", {"sw/sweep.json": plan(edit=lambda d: d["trials"][1].update(
         name="../../escape"))}, RESUME, 1, "its trials are not the combinations of its grid", writes=W),
    Case("sweep-unknown-key", "state", {"sw/sweep.json": plan(reading_policy="anything")}, RESUME, 1,
         "it has the key 'reading_policy', which specgrad does not write", writes=W),
    Case("sweep-plan-deep", "state", {"sw/sweep.json": "[" * 100_000 + "]" * 100_000}, RESUME, 1,
         "is nested too deep", writes=W),
    Case("sweep-plan-4300-digits", "state", {"sw/sweep.json": '{"seed": 1' + "0" * 5000 + "}"}, RESUME, 1,
         "holds a number too long", writes=W),
    Case("sweep-plan-not-utf8", "state", {"sw/sweep.json": b'{"spec": "\xff"}'}, RESUME, 1, "is not UTF-8",
         writes=W),
    Case("sweep-results-deep", "state", {"sw/sweep.json": plan(), "sw/results.json": "{\"a\": " * 10_000},
         RESUME, 1, "results.json is nested too deep", writes=W),
    Case("sweep-results-4300-digits", "state", {"sw/sweep.json": plan(), "sw/results.json": '{"trial-001": '
         '{"exit_code": 1' + "0" * 5000 + ', "error": ""}}'}, RESUME, 1, "holds a number too long", writes=W),
    Case("sweep-results-exit-code-a-text", "state", {"sw/sweep.json": plan(), "sw/results.json": json.dumps(
         {"trial-001": {"exit_code": "0", "error": ""}})}, RESUME, 1,
         "trial-001's exit_code must be a process's exit code", writes=W),
    Case("sweep-results-unknown-trial", "state", {"sw/sweep.json": plan(), "sw/results.json": json.dumps(
         {"trial-999": {"exit_code": 1, "error": "x"}})}, RESUME, 1, "'trial-999' is not a trial of this sweep",
         writes=W),
    Case("sweep-results-error-escapes", "terminal", {"sw/sweep.json": plan(), "sw/results.json": json.dumps(
         {"trial-001": {"exit_code": 1, "error": HOSTILE_ERROR}, "trial-002": {"exit_code": 0, "error": ""}})},
         RESUME, 1, "trial-001's error holds control or format characters", writes=W),
    Case("sweep-trial-log-error-escapes", "terminal", {"sw/sweep.json": plan(), "sw/results.json": json.dumps(
         {"trial-002": {"exit_code": 0, "error": ""}}), "sw/trial-002": Asset("run"), "sw/trial-001/notes.txt": "mine",
         "sw/logs/trial-001.log": f"error: {HOSTILE_ERROR}\n"}, RESUME, 0, "trial-001 (train.lr=0.01): failed",
         writes=W, check=_escaped_everywhere),
    Case("sweep-epochs-decimal", "state", {"sw/sweep.json": plan(steps=None, epochs=1.0)}, RESUME, 1,
         "epochs must be a whole number from 1 to 1,000,000 (or null), not 1.0", writes=W),
    # *** a trial trains what the plan says, not what its folder says ***
    Case("sweep-resume-trial-spec-edited", "state", {**ONE, "sw/trial-001": _trial_of({"lr: 0.01": "lr: 0.9",
         "linear: 8": "linear: 64"}, finished=False)}, RESUME, 0,
         "trial-001/spec.resolved.yaml is not the spec this sweep plans for trial-001 (model.0.linear, train.lr "
         "differ)",
         writes=W, check=_not_trained),
    Case("sweep-finished-trial-of-another-spec", "state", {**ONE, "sw/results.json": json.dumps({"trial-001": {
         "exit_code": 0, "error": ""}}), "sw/trial-001": _trial_of({"lr: 0.01": "lr: 0.9"})}, RESUME, 0,
         "0 finished, 1 failed", writes=W, check=_summary_row("trial-001", "failed", "(train.lr differs)")),
    Case("sweep-trial-data-path-edited", "state", {**ONE, "sw/trial-001": _trial_of({"source: spirals":
         "source: csv\n  path: ../../../outside/secret.txt\n  target: y"}, finished=False)}, RESUME, 0,
         "is not the spec this sweep plans for trial-001 (data.source, data.path", writes=W, check=_not_trained),
    Case("sweep-grid-range-end-nan", "state", {}, (*SWEEP, "--random", "2", "--grid", "train.lr=nan..1"), 1,
         "--grid train.lr=nan..1 is not a range: its low end 'nan' is not a finite number", check=_nothing_made),
    Case("sweep-grid-range-three-ends", "state", {}, (*SWEEP, "--random", "2", "--grid", "train.lr=1..2..3"), 1,
         "its high end '2..3' is not a finite number", check=_nothing_made),
    # *** exit 70 where a clear error belongs ***
    Case("sweep-lock-is-a-folder", "exit-70", {"sw/sweep.json": plan(), "sw/.lock": Folder()}, RESUME, 1,
         "sw/.lock is a folder, not a regular file", writes=W),
    Case("sweep-logs-is-a-file", "exit-70", {"sw/sweep.json": plan(), "sw/logs": "not a folder"}, RESUME, 1,
         "sw/logs is a regular file, not a folder", writes=W),
    Case("sweep-trial-leftover-file", "exit-70", {"sw/sweep.json": plan(), "sw/results.json": json.dumps(
         {"trial-002": {"exit_code": 0, "error": ""}}), "sw/trial-002": Asset("run"), "sw/trial-001/notes.txt": "mine"},
         RESUME, 0, "trial-001 holds 1 entry (such as 'notes.txt') but no spec.resolved.yaml", writes=W,
         check=lambda ctx: (ctx.project / "sw/trial-001/notes.txt").read_text() == "mine" or pytest.fail("removed")),
    Case("sweep-trial-lock-is-a-folder", "exit-70", {"sw/sweep.json": plan(), "sw/results.json": json.dumps(
         {"trial-002": {"exit_code": 0, "error": ""}}), "sw/trial-002": Asset("run"), "sw/trial-001/.lock": Folder()},
         RESUME, 0, "trial-001 holds 1 entry (such as '.lock')", writes=W, slow=True),
    Case("sweep-device-unknown", "exit-70", {}, ("sweep", "tiny.yaml", "--grid", "seed=1,2", "--device", "TPU"), 3,
         "is not a device to train on", check=_nothing_made),
    # *** resource bombs: bounds computed before work ***
    Case("sweep-grid-of-1e10", "bombs", {}, (*SWEEP, *[a for i in range(10) for a in ("--grid", f"vars.k{i}="
         f"{DECADE}")]), 1, "the sweep would have 10,000,000,000 trials, more than 10,000", check=_nothing_made),
    Case("sweep-random-from-1e10", "bombs", {}, (*SWEEP, "--random", "3", *[a for i in range(10) for a in (
         "--grid", f"vars.k{i}={DECADE}")]), 1, "trial-003 (vars.k0=", check=_nothing_made),
    Case("sweep-random-from-1e30", "bombs", {}, (*SWEEP, "--random", "3", *[a for i in range(30) for a in (
         "--grid", f"vars.k{i}={DECADE}")]), 1, "trial-003 (vars.k0=", check=_nothing_made),
    Case("sweep-random-int-range-1e30", "bombs", {}, (*SWEEP, "--random", "2", "--grid", f"seed=0..{10**30}"), 1,
         "a range of whole numbers must lie within", check=_nothing_made),
    Case("sweep-random-float-range-1e308", "bombs", {}, (*SWEEP, "--random", "2", "--grid",
         "train.lr=-1e308..1.7e308"), 1, "the ends of a range must lie within -1e300..1e300", check=_nothing_made),
    Case("sweep-random-range-4300-digits", "bombs", {}, (*SWEEP, "--random", "2", "--grid", "seed=1" + "0" * 5000 +
         "..2"), 1, "the ends of a range must lie within", check=_nothing_made),
    Case("sweep-summary-of-3000-metrics", "bombs", {"sw/sweep.json": plan(steps=None), "sw/results.json": DONE,
         "sw/trial-001": Asset("run"), "sw/trial-002": Asset("run"), "sw/trial-001/metrics.jsonl": _many_metrics()},
         RESUME, 0, "names more than 64 metrics", writes=W, check=_columns_bounded),
    # *** a Ray cluster that is not there: said before any folder is made ***
    # *** a name validation and train accept, a sweep accepts: its folder <name>-sweep-<n> fits in 255 bytes ***
    Case("sweep-name-at-validation-s-limits", "state", {"long.yaml": LIMIT_SPEC}, ("sweep", "long.yaml", "--grid",
         "train.lr=0.01", "--steps", "1", "--device", "CPU", "--out", "runs"), 0, f"runs/{LIMIT_NAME}-sweep-1",
         writes=("runs",)),
    Case("sweep-ray-address-nothing-listening", "hangs", {}, ("sweep", "tiny.yaml", "--grid", "train.lr=0.01,0.02",
         "--backend", "ray", "--address", f"127.0.0.1:{_closed_port()}"), 3, "does not answer (connection refused)",
         check=_nothing_made),
    Case("sweep-ray-address-client-nothing-listening", "hangs", {}, ("sweep", "tiny.yaml", "--grid",
         "train.lr=0.01,0.02", "--backend", "ray", "--address", f"ray://localhost:{_closed_port()}"), 3,
         "does not answer", check=_nothing_made),
    Case("sweep-ray-address-not-an-address", "hangs", {}, ("sweep", "tiny.yaml", "--grid", "train.lr=0.01,0.02",
         "--backend", "ray", "--address", "no port here"), 2, "is not a Ray address", check=_nothing_made),
]
PLOT_CASES = [
    # *** names from the trials' files drawn into compare.png: escaped, and no matplotlib warning on stderr ***
    Case("sweep-summary-plot-names-escapes", "terminal", {**ONE, "sw/results.json": json.dumps({"trial-001": {
         "exit_code": 0, "error": ""}}), "sw/trial-001": Asset("run"), "sw/trial-001/metrics.jsonl": _escaped_names()},
         RESUME, 0, "1 finished", writes=W),
]
# fmt: on


def _params() -> list:
    return [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in CASES]


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (the plot extra)")
@pytest.mark.parametrize("case", PLOT_CASES, ids=[c.id for c in PLOT_CASES])
def test_hostile_sweep_plot_case(case: Case, folders: Folders) -> None:
    result = check_case(folders, case)
    assert "Warning" not in result.output, result.output  # NOTE: matplotlib's, with a source line and the raw name
    assert (folders.project / "sw" / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("case", _params())
def test_hostile_sweep_case(case: Case, folders: Folders) -> None:
    if why := needs_met(case.needs):
        pytest.skip(why)
    check_case(folders, case)


def test_case_ids_are_unique() -> None:
    assert len({c.id for c in CASES + PLOT_CASES}) == len(CASES + PLOT_CASES)
