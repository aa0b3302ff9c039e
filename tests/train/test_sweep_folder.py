"""A sweep's plan and state from someone else (issue 30): the grid's size known from its factors before anything is
built, ranges a draw can take, sweep.json and results.json checked field by field, a failed trial's error kept without
the rest of its log, a log's tail read without leaving the folder, and a Ray address that does not answer refused
before any folder is made."""

from __future__ import annotations

import itertools
import json
import socket
import tracemalloc
from pathlib import Path

import pytest
import typer
from specgrad.cli import sweep as cli_sweep

from specgrad.helpers import DeviceUnavailable
from specgrad.modelspec.errors import SpecError
from specgrad.train.folder_io import read_tail_in
from specgrad.train.sweep import (
    BUSY,
    MAX_ERROR,
    PLAN,
    Plan,
    Trial,
    _combination,
    _plan_of,
    parse_grid,
    plan_trials,
    read_results,
    record_result,
    spec_digest,
    state,
    summary_csv,
)

SPEC = "specgrad: 1\nname: t\ninput: {shape: [2]}\nmodel: [{linear: 2}]\n"


def test_a_grid_too_large_is_refused_from_its_factors(tmp_path: Path) -> None:
    grid = parse_grid([f"vars.k{i}=0,1,2,3,4,5,6,7,8,9" for i in range(30)])  # NOTE: 10^30 combinations
    tracemalloc.start()
    try:
        with pytest.raises(SpecError, match="would have a number of more than 30 digits trials"):
            plan_trials(grid, None, 0)
        drawn = plan_trials(grid, 5, 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak:,} bytes: the grid was built"
    assert len(drawn) == 5 and len({tuple(t.overrides) for t in drawn}) == 5
    many = parse_grid([f"vars.k{i}=0,1,2,3,4,5,6,7,8,9" for i in range(9)])  # NOTE: 10^9: drawn by index
    assert len(plan_trials(many, 3, 1)) == 3


def test_a_drawn_combination_is_the_product_s_own() -> None:
    """--random picks the same trials as when it built the whole product (a seed keeps its sweep)."""
    grid = parse_grid(["a=1,2,3", "b=x,y", "c=p,q,r,s"])
    everything = list(itertools.product(*grid.values()))
    assert [_combination(grid, i) for i in range(len(everything))] == everything


@pytest.mark.parametrize("value,said", [
    (f"seed=0..{10**30}", "a range of whole numbers must lie within"),
    ("seed=-9007199254740993..0", "a range of whole numbers must lie within"),
    ("train.lr=-1e308..1.7e308", "the ends of a range must lie within -1e300..1e300"),
    ("train.lr=1e999..2e999", "the ends of a range must lie within"),
    ("train.lr=0.5..0.5", "the low end must be below the high end"),
])  # fmt: skip
def test_ranges_a_draw_cannot_take_are_refused(value: str, said: str) -> None:
    with pytest.raises(SpecError, match=said):
        plan_trials(parse_grid([value]), 2, 0)
    wide = plan_trials(parse_grid(["train.lr=-1e300..1e300", f"seed=0..{2**53}"]), 4, 0)
    assert len(wide) == 4


def _plan_doc(tmp_path: Path, **changes) -> dict:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    grid = parse_grid(["train.lr=0.1,0.2"])
    plan = Plan(str(spec), spec_digest(str(spec), "SPEC"), [], None, 2, None, grid, None, 0, plan_trials(grid, None, 0))
    doc = json.loads(json.dumps(plan.__dict__, default=lambda t: t.__dict__))
    return {**doc, **changes}


@pytest.mark.parametrize("changes,said", [
    ({"steps": -5}, "steps must be a whole number from 1 to 1,099,511,627,776 (or null), not -5"),
    ({"steps": 1e308}, "not 1e+308"),
    ({"steps": 1.0}, "steps must be a whole number from 1 to 1,099,511,627,776 (or null), not 1.0"),
    ({"steps": True}, "not true"),
    ({"steps": None, "epochs": 10**40}, "not a number of more than 30 digits"),
    ({"epochs": 3}, "both epochs and steps"),
    ({"overrides": ["x=1", 5]}, "overrides must be a list of texts"),
    ({"grid": {"train.lr": ["0.1", "0.1"]}}, "a value twice"),
    ({"grid": {"a=b": ["1"]}}, "a key that --grid cannot give"),
    ({"random": 0}, "random must be a whole number from 1 to 10,000"),
    ({"random": 2}, "trial 1 is not one its grid could give"),
    ({"seed": 1 << 32}, "seed must be a whole number from 0 to 4,294,967,295"),
    ({"device": "DISK:/etc/passwd"}, "device must name a device to train on"),
    ({"spec_sha256": "SECRET"}, "spec_sha256 must be 64 hexadecimal digits"),
    ({"trials": [{"name": "trial-001", "overrides": ["train.lr=0.1"]}, {"name": "trial-002", "more": 1}]},
     "each trial must be a mapping"),
])  # fmt: skip
def test_every_field_of_a_plan_is_checked(tmp_path: Path, changes: dict, said: str) -> None:
    doc = _plan_doc(tmp_path, **changes)
    if "random" in changes and changes["random"] == 2:
        doc["trials"][0]["overrides"] = ["train.lr=0.3"]
    with pytest.raises(SpecError, match=said.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")) as e:
        _plan_of(doc, tmp_path / PLAN)
    assert "SECRET" not in str(e.value) and str(tmp_path / PLAN) in str(e.value)
    assert _plan_of(_plan_doc(tmp_path), tmp_path / PLAN).trials[1] == Trial("trial-002", ["train.lr=0.2"])


def test_a_plan_is_bound_to_its_spec_s_bytes(tmp_path: Path) -> None:
    folder = tmp_path / "sw"
    folder.mkdir()
    (folder / PLAN).write_text(json.dumps(_plan_doc(tmp_path)))
    assert Plan.read(folder).spec == str(tmp_path / "s.yaml")
    (tmp_path / "s.yaml").write_text(SPEC + "seed: 3\n")
    with pytest.raises(SpecError, match="is not the spec this sweep was planned with"):
        Plan.read(folder)


def test_results_are_checked_against_the_plan(tmp_path: Path) -> None:
    folder = tmp_path / "sw"
    folder.mkdir()
    (folder / PLAN).write_text(json.dumps(_plan_doc(tmp_path)))
    plan = Plan.read(folder)
    ok = {"trial-001": {"exit_code": 4, "error": "error: the loss became NaN"}, "trial-002": {"exit_code": -9,
          "error": ""}}  # fmt: skip
    (folder / "results.json").write_text(json.dumps(ok))
    assert read_results(folder, plan) == ok
    for bad, said in (([], "not a mapping of trials"), ({"trial-001": {"exit_code": 0, "error": "x"}}, "empty unless"),
                      ({"trial-001": {"exit_code": 0, "error": "x" * (MAX_ERROR + 1)}}, "at most 500"),
                      ({"trial-001": {"exit_code": 1 << 40, "error": ""}}, "exit_code must be"),
                      ({"trial-001": []}, "must be a mapping of exit_code and error")):  # fmt: skip
        (folder / "results.json").write_text(json.dumps(bad))
        with pytest.raises(SpecError, match=said):
            read_results(folder, plan)


def test_an_error_is_escaped_when_written_and_refused_unescaped_when_read(tmp_path: Path) -> None:
    """specgrad escapes the errors it records (results.json), so one holding a terminal's escape sequences or a bidi
    override was not written by it: damage, never copied on into summary.csv."""
    folder = tmp_path / "sw"
    folder.mkdir()
    (folder / PLAN).write_text(json.dumps(_plan_doc(tmp_path)))
    plan, results = Plan.read(folder), {}
    record_result(folder, results, plan.trials[0], 1, "error: \x1b]0;title\x07\x1b[2J\u202eevil\tend")
    kept = read_results(folder, plan)["trial-001"]["error"]
    assert kept == "error: \\x1b]0;title\\x07\\x1b[2J\\u202eevil\\tend" and kept == results["trial-001"]["error"]
    record_result(folder, results, plan.trials[1], 1, "\x1b" * MAX_ERROR)
    assert len(read_results(folder, plan)["trial-002"]["error"]) == MAX_ERROR, "escaped, then cut to its size"
    for error in ("\x1b[2J", "a\u202eb", "\x07", "line\nbreak", "\u2066isolate"):
        (folder / "results.json").write_text(json.dumps({"trial-001": {"exit_code": 1, "error": error}}))
        with pytest.raises(SpecError, match="trial-001's error holds control or format characters"):
            read_results(folder, plan)


def test_the_summary_s_texts_are_escaped() -> None:
    rows = [{"trial": "trial-001", "state": "failed", "overrides": {"vars.tag": "\x1b[31mred\u202e"},
             "error": "\x1b]0;x\x07", "run": "sw/trial-001"}]  # fmt: skip
    text = summary_csv(rows, ["vars.tag"])
    assert len(text.splitlines()) == 2 and all(line.isprintable() for line in text.splitlines()), text
    assert "\\x1b[31mred\\u202e" in text and "\\x1b]0;x\\x07" in text


def test_a_trial_whose_folder_was_busy_is_tried_again(tmp_path: Path) -> None:
    """A trial not run because another process held its folder is recorded, but not as a failure: --resume runs it."""
    folder = tmp_path / "sw"
    folder.mkdir()
    (folder / PLAN).write_text(json.dumps(_plan_doc(tmp_path)))
    plan, results = Plan.read(folder), {}
    record_result(folder, results, plan.trials[0], BUSY, "error: sw/trial-001 is in use by another specgrad process")
    record_result(folder, results, plan.trials[1], 1, "error: it failed")
    again = read_results(folder, plan)
    assert again["trial-001"] == {"exit_code": BUSY, "error": ""}
    assert [state(folder, t, again) for t in plan.trials] == ["to do", "failed"]


def test_a_failed_trial_s_error_keeps_only_its_error_and_hint_lines(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    trial = Trial("trial-001", ["train.lr=0.1"])
    log = ("training t on CPU\n" * 5000 + "epoch 1/1 SECRET-looking progress\n"
           "t.yaml:3:7: error: train.lr must be a number\n  hint: write a number\n")  # fmt: skip
    (tmp_path / "logs" / "trial-001.log").write_text(log)
    assert cli_sweep._error(tmp_path, trial) == "t.yaml:3:7: error: train.lr must be a number hint: write a number"
    (tmp_path / "logs" / "trial-001.log").write_text("Segmentation fault SECRET\n")
    assert cli_sweep._error(tmp_path, trial) == "it printed no error: see logs/trial-001.log"
    (tmp_path / "logs" / "trial-001.log").unlink()
    (tmp_path / "logs" / "trial-001.log").symlink_to(tmp_path / "elsewhere")
    assert "is a symbolic link" in cli_sweep._error(tmp_path, trial)


def test_the_tail_of_a_log_is_read_without_the_rest(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_bytes(b"x" * (8 << 20) + b"the end\n")
    assert read_tail_in(tmp_path, "big.log", 8) == b"the end\n"
    assert read_tail_in(tmp_path, "small.log", 8) == b""
    (tmp_path / "link.log").symlink_to(tmp_path / "big.log")
    with pytest.raises(SpecError, match="symbolic link"):
        read_tail_in(tmp_path, "link.log", 8)


def test_a_ray_address_that_does_not_answer_is_refused_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(address, timeout):
        assert timeout == cli_sweep.RAY_TIMEOUT_S
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", never)
    with pytest.raises(DeviceUnavailable, match="does not answer \\(no answer within 10 s\\)"):
        cli_sweep.check_answers("10.255.255.1:6379")
    with pytest.raises(DeviceUnavailable, match="does not answer"):
        cli_sweep.check_answers("ray://[::1]:10001")
    cli_sweep.check_answers("auto")  # NOTE: Ray's own look-up of a cluster on this machine
    for bad in ("nowhere", "host:0", "host:99999", "http://host:1"):
        with pytest.raises(typer.BadParameter, match="is not a Ray address"):
            cli_sweep.check_answers(bad)


def test_ray_not_installed_is_said_before_any_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_sweep.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="pip install 'specgrad\\[ray\\]'"):
        with cli_sweep._backend("ray", None):
            pytest.fail("ray is not installed: nothing runs")


# NOTE: names at validation's limits: 100 characters; 239 bytes (81 characters of 3 bytes and 1); both at once
LIMIT_NAMES = ["a" * 100, "\u0e01" * 79 + "ab", "\u0e01" * 69 + "\u00e9" + "a" * 30]


@pytest.mark.parametrize("name", LIMIT_NAMES, ids=["100-characters", "239-bytes", "100-characters-239-bytes"])
def test_a_sweep_takes_every_name_validation_takes(tmp_path: Path, name: str) -> None:
    """A spec's name leaves room for the folder a sweep adds: <name>-sweep-<n> fits a file system's 255 bytes
    whenever validation accepts the name (it is the spec's name the rule is about, not the folder's)."""
    from specgrad.modelspec.validate import MAX_NAME, MAX_NAME_BYTES, validate_file

    assert len(name) == MAX_NAME or len(name.encode()) == MAX_NAME_BYTES
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("name: t", f"name: {name}"), encoding="utf-8")
    assert validate_file(str(spec)).values["name"] == name
    folder, plan = cli_sweep._start(spec, ["train.lr=0.01,0.02"], None, 0, [], None, 1, None, tmp_path / "runs")
    assert folder == tmp_path / "runs" / f"{name}-sweep-1" and (folder / PLAN).is_file()
    assert len(f"{name}-sweep-999999999".encode()) <= 255 and len(plan.trials) == 2
