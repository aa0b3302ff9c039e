"""Issue 30, run folders: what `specgrad train` writes, read back by validate, run, export, evaluate, generate,
compare and `train --resume` from a folder someone else made. Each case runs through the CLI as a user runs it
(harness.check: exit code, message, no traceback, no secret printed, nothing changed outside `writes`):

- links and special files inside a run folder are refused by name, never followed (a resolved spec linked to a
  secret is never quoted; compare never reads a linked metrics.jsonl or evaluation-test.json outside the run);
- a FIFO where metrics.jsonl belongs does not hang `train --resume`;
- checkpoint positions specgrad never writes (past the last step or epoch, a skip past an epoch's batches, a best
  epoch after the epoch, a step that does not follow from the epoch) are refused naming the checkpoint and field;
  a run whose final weights are its best epoch's, its best checkpoint removed, is refused naming it (never the last
  weights written as model.safetensors, with a false reason);
- deep or 4,300-digit JSON in metrics.jsonl, evaluation JSON and checkpoint metadata, values a metrics record never
  holds, a '.lock' or metrics.jsonl that is a folder: a clear error or the record left out, never exit 70;
- compare's plot is bounded before a figure is made: 3,000 metric names are a few panels, not 3.7 GB;
- names drawn into the plot (metric and run folder names with ESC or BEL, CJK text the font lacks) are escaped as a
  terminal's text is, and matplotlib's "Glyph missing" warnings (a source line and the raw bytes) never reach stderr.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from tests.hostile import makers as mk
from tests.hostile.harness import Asset, Assets, Case, Fifo, Folder, Folders, Link, Made, needs_met
from tests.hostile.harness import check as check_case

RESUME = ("train", "--resume", "run", "--device", "CPU")
CKPT = "run/checkpoints/epoch-00001.safetensors"
LINKED = "is a symbolic link, not a regular file"
HAS_PLOT = importlib.util.find_spec("matplotlib") is not None

# NOTE: issue 30's classes these cases cover
CLASSES = {
    "read-link": "reads through links that print what they read",
    "hang": "hangs",
    "bomb": "resource bombs",
    "silent": "silent wrong results: checkpoint positions specgrad never writes",
    "state": "unchecked state files: deep or 4,300-digit JSON",
    "exit-70": "exit 70 where a clear error belongs",
    "plot-text": "names from files drawn into a figure: escaped, no matplotlib warning on stderr",
}


# *** makers of run-folder files ***


def reposition(**fields: object) -> Made:
    """The run asset's checkpoint (epoch-00001) with fields of its position changed, its step and epoch metadata
    kept in step with them (as an edit would); tensors and checksums unchanged."""

    def make(path: Path, assets: Assets) -> None:
        src = assets.path("run") / "checkpoints" / "epoch-00001.safetensors"
        with safe_open(str(src), "np") as f:
            meta = dict(f.metadata())
        position = {**json.loads(meta["position"]), **fields}
        meta.update(position=json.dumps(position), step=str(position["step"]), epoch=str(position["epoch"]))
        if os.path.lexists(path):
            path.unlink()
        save_file(load_file(str(src)), str(path), metadata=meta)

    return Made(make)


def appended(text: str) -> Made:
    """The (already planted) file with `text` added at its end."""

    def make(path: Path, assets: Assets) -> None:
        with open(path, "a") as f:
            f.write(text)

    return Made(make)


def replaced_by_folder() -> Made:
    def make(path: Path, assets: Assets) -> None:
        path.unlink()
        path.mkdir()

    return Made(make)


def valid_record(**metrics: object) -> str:
    return json.dumps({"split": "valid", "epoch": 1, "step": 3, **metrics}) + "\n"


DEEP = "[" * 100_000 + "]" * 100_000 + "\n"
DIGITS = '{"split": "valid", "epoch": 1, "step": ' + "9" * 5000 + "}\n"
ESCAPED = "r\x1b]0;pwn\x07R"  # NOTE: a run folder whose name sets a terminal's title
MANY_NAMES = valid_record(**{f"m{i:04d}": 0.5 for i in range(3000)})  # NOTE: 41 KB

SPEC_READERS = {
    "validate": ("validate", "run"),
    "run": ("run", "run", "--input", "x.npy", "--device", "CPU"),
    "export": ("export", "run", "--format", "safetensors", "--out", "m.safetensors"),
    "evaluate": ("evaluate", "run", "--device", "CPU"),
    "generate": ("generate", "run", "--prompt", "a", "--device", "CPU"),
    "compare": ("compare", "run"),
    "resume": RESUME,
}

# fmt: off
CASES = [
    # *** a resolved spec linked to a secret is refused, never parsed and quoted, by every command that reads it ***
    *(Case(f"spec-resolved-link-{name}", "read-link", {"run": Asset("run"), "run/spec.resolved.yaml": Link(
        "../../outside/secret.yaml")}, cmd, 1, f"run/spec.resolved.yaml {LINKED}")
      for name, cmd in SPEC_READERS.items()),
    Case("spec-resolved-fifo-compare", "hang", {"run": Asset("run"), "run/spec.resolved.yaml": Made(
        lambda p, a: (p.unlink(), os.mkfifo(p)))}, ("compare", "run"), 1, "FIFO"),
    # *** compare reads only the run's own files ***
    Case("compare-metrics-link-outside", "read-link", {"run": Asset("run"), "run/metrics.jsonl": Link(
        "../../outside/target.json")}, ("compare", "run"), 1, f"run/metrics.jsonl {LINKED}"),
    Case("compare-evaluation-link-outside", "read-link", {"run": Asset("run"), "run/evaluation-test.json": Link(
        "../../outside/target.json")}, ("compare", "run"), 1, f"run/evaluation-test.json {LINKED}"),
    Case("compare-evaluation-folder", "read-link", {"run": Asset("run"), "run/evaluation-test.json": Folder()},
         ("compare", "run"), 1, "run/evaluation-test.json is a folder"),
    # *** weights and checkpoints are read from the run folder only ***
    Case("run-model-link-outside", "read-link", {"run": Asset("run"), "run/model.safetensors": Link(
        "../../outside/secret.txt")}, SPEC_READERS["run"], 1, f"run/model.safetensors {LINKED}"),
    Case("resume-checkpoint-link-outside", "read-link", {"run": Asset("run"),
         "run/checkpoints/epoch-00002.safetensors": Link("../../../outside/secret.txt")}, RESUME, 1,
         f"run/checkpoints/epoch-00002.safetensors {LINKED}"),
    Case("run-checkpoints-a-file", "exit-70", {"run": Asset("run"), "run/model.safetensors": Made(
        lambda p, a: p.unlink()), "run/checkpoints/": Made(lambda p, a: (shutil.rmtree(p), p.write_text("x")))},
         SPEC_READERS["run"], 1, "run/checkpoints is a file, not a folder"),
    Case("resume-csv-link-refused-before-any-write", "read-link", {"run": Asset("run"), "run/metrics.csv": Link(
        "../../outside/target.json")}, RESUME, 1, f"run/metrics.csv {LINKED}"),
    # *** hangs ***
    Case("resume-metrics-fifo", "hang", {"run": Asset("run"), "run/metrics.jsonl": Fifo()}, RESUME, 1,
         "run/metrics.jsonl is a named pipe (FIFO)"),
    Case("resume-lock-fifo", "hang", {"run": Asset("run"), "run/.lock": Fifo()}, RESUME, 1,
         "run/.lock is a named pipe"),
    # *** exit 70 where a clear error belongs ***
    Case("resume-lock-folder", "exit-70", {"run": Asset("run"), "run/.lock": replaced_by_folder()}, RESUME, 1,
         "run/.lock is a folder, not a regular file"),
    Case("resume-metrics-folder", "exit-70", {"run": Asset("run"), "run/metrics.jsonl": replaced_by_folder()}, RESUME,
         1, "run/metrics.jsonl is a folder, not a regular file"),
    Case("compare-metric-names-markup-and-escapes", "exit-70", {"run": Asset("run"), "run/metrics.jsonl": appended(
        valid_record(**{"[/x]": 1.0, "\x1b[31mred": 2.0}))}, ("compare", "run"), 0, "[/x]", tty=True),
    Case("resume-metrics-string-loss", "exit-70", {"run": Asset("run"), "run/metrics.jsonl": appended(valid_record(
        loss="x"))}, RESUME, 0, "valid loss 0.", writes=("run",)),
    Case("resume-metrics-huge-losses", "exit-70", {"run": Asset("run"), "run/metrics.jsonl": appended(valid_record(
        loss=-1e308) + valid_record(loss=1e308))}, RESUME, 0, "has finished", writes=("run",)),
    # *** deep or 4,300-digit JSON ***
    Case("resume-metrics-deep-json", "state", {"run": Asset("run"), "run/metrics.jsonl": appended(DEEP)}, RESUME, 0,
         "has finished", writes=("run",)),
    Case("resume-metrics-4300-digits", "state", {"run": Asset("run"), "run/metrics.jsonl": appended(DIGITS)}, RESUME,
         0, "has finished", writes=("run",)),
    Case("compare-metrics-deep-json", "state", {"run": Asset("run"), "run/metrics.jsonl": appended(DEEP)},
         ("compare", "run"), 0, "could not be read"),
    Case("compare-metrics-4300-digits", "state", {"run": Asset("run"), "run/metrics.jsonl": appended(DIGITS)},
         ("compare", "run"), 0, "could not be read"),
    Case("compare-evaluation-deep-json", "state", {"run": Asset("run"), "run/evaluation-test.json": DEEP},
         ("compare", "run", "--json"), 0, '"test": {}'),
    Case("compare-evaluation-4300-digits", "state", {"run": Asset("run"), "run/evaluation-test.json":
         '{"outputs": {"y": {"accuracy": ' + "9" * 5000 + "}}}"}, ("compare", "run", "--json"), 0, '"test": {}'),
    Case("resume-position-deep-json", "state", {"run": Asset("run"), CKPT: mk.remeta("run",
         "checkpoints/epoch-00001.safetensors", position=DEEP)}, RESUME, 1, "epoch-00001.safetensors is damaged"),
    Case("resume-rng-4300-digits", "state", {"run": Asset("run"), CKPT: mk.remeta("run",
         "checkpoints/epoch-00001.safetensors", tensor_rng="9" * 5000)}, RESUME, 1,
         "epoch-00001.safetensors is damaged"),
    # *** checkpoint positions specgrad never writes (the asset: 1 epoch of 3 steps) ***
    Case("resume-step-past-the-end", "silent", {"run": Asset("run"), CKPT: reposition(step=1000)}, RESUME, 1,
         "epoch-00001.safetensors is damaged (its position's step 1000 is past the run's last step, 3)"),
    Case("resume-epoch-99", "silent", {"run": Asset("run"), CKPT: reposition(epoch=99)}, RESUME, 1,
         "its position's epoch 99 is past the run's last epoch, 1"),
    Case("resume-huge-skip", "silent", {"run": Asset("run"), CKPT: reposition(epoch=0, skip=10**9)}, RESUME, 1,
         "its position's skip 1000000000 is more than the 3 batches of an epoch"),
    Case("resume-step-not-from-epoch", "silent", {"run": Asset("run"), CKPT: reposition(step=1)}, RESUME, 1,
         "its position's step 1 does not follow from its epoch 1 and skip 0"),
    Case("resume-best-epoch-after-epoch", "silent", {"run": Asset("run"), CKPT: reposition(best_epoch=50)}, RESUME, 1,
         "its position's best_epoch 50 is not one of its 1 epoch"),
    Case("resume-negative-step", "silent", {"run": Asset("run"), CKPT: reposition(step=-1)}, RESUME, 1,
         "epoch-00001.safetensors is damaged"),
    Case("resume-skip-in-an-epoch-checkpoint", "silent", {"run": Asset("run"), CKPT: reposition(epoch=0, step=2,
         skip=2, losses=[0.5, 0.5])}, RESUME, 1, "its position's skip 2 is not what specgrad writes into "
         "epoch-00001.safetensors"),
    Case("resume-best-checkpoint-removed", "silent", {"run": Asset("run"), "run/checkpoints/best.safetensors": Made(
        lambda p, a: p.unlink())}, RESUME, 1, "run/checkpoints/best.safetensors is missing: it holds the weights of "
        "epoch 1, the best"),
    Case("resume-stopped-without-early-stopping", "silent", {"run": Asset("run"), CKPT: reposition(stopped="x")},
         RESUME, 1, "stopped early, which this run's spec or position rules out"),
]
PLOT_CASES = [
    # *** compare's plot, bounded before any figure is made ***
    Case("compare-plot-3000-metric-names", "bomb", {"run": Asset("run"), "run/metrics.jsonl": appended(MANY_NAMES)},
         ("compare", "run", "--plot", "c.png"), 0, "the first 64 are shown", writes=("c.png",)),
    Case("compare-plot-math-text-name", "exit-70", {"run": Asset("run"), "run/metrics.jsonl": appended(valid_record(
        **{"$\\foo$": 0.5}))}, ("compare", "run", "--plot", "c.png"), 0, "wrote c.png", writes=("c.png",)),
    Case("compare-plot-huge-values", "exit-70", {"run": Asset("run"), "run/metrics.jsonl": appended(
        json.dumps({"split": "valid", "epoch": 2, "step": 6, "loss": -1e308}) + "\n" + json.dumps({"split": "valid",
        "epoch": 3, "step": 9, "loss": 1e308}) + "\n")}, ("compare", "run", "--plot", "c.png"), 0, "wrote c.png",
        writes=("c.png",)),
    # *** names from the files drawn as text, escaped as a terminal's text is; no matplotlib warning on stderr ***
    Case("compare-plot-metric-names-escapes-and-cjk", "plot-text", {"run": Asset("run"), "run/metrics.jsonl": appended(
        valid_record(**{"\x1b[31mX\x07": 0.5, "\u4e2d\u6587 loss": 0.4}))}, ("compare", "run", "--plot", "c.png"), 0,
        "wrote c.png", writes=("c.png",)),
    Case("compare-plot-folder-name-escapes", "plot-text", {"run": Asset("run"), ESCAPED: Asset("run")}, ("compare",
         ESCAPED, "run", "--plot", "c.png"), 0, "wrote c.png", writes=("c.png",)),
]
# fmt: on


def _params(cases: list[Case]) -> list:
    return [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in cases]


@pytest.mark.parametrize("case", _params(CASES))
def test_run_folder_case(case: Case, folders: Folders) -> None:
    if why := needs_met(case.needs):
        pytest.skip(why)
    check_case(folders, case)


@pytest.mark.skipif(not HAS_PLOT, reason="needs matplotlib (the plot extra)")
@pytest.mark.parametrize("case", _params(PLOT_CASES))
def test_run_folder_plot_case(case: Case, folders: Folders) -> None:
    result = check_case(folders, case)
    assert "Warning" not in result.output, result.output  # NOTE: matplotlib's, with a source line and the raw name
    assert (folders.project / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.seconds < 30, f"{case.id} took {result.seconds:.0f} s"  # NOTE: a bound on the work, not a speed test


def test_every_class_has_a_case() -> None:
    cases = CASES + PLOT_CASES
    assert len({c.id for c in cases}) == len(cases), "case ids must be unique"
    assert {c.bullet for c in cases} == set(CLASSES)
