"""Pure pieces: the flag registry, dtypes and promotion, helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specgrad.dtype import dtypes, to_dtype
from specgrad.flags import DEBUG, REGISTRY, Context, Flag, FlagError, render_flags_markdown
from specgrad.helpers import argfix, dedup, flatten, make_pair, merge_dicts, partition, prod

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_context_overrides_and_restores() -> None:
    before = DEBUG.value
    with Context(DEBUG=3):
        assert DEBUG >= 3 and DEBUG.value == 3
        with Context(DEBUG=1):
            assert DEBUG.value == 1
        assert DEBUG.value == 3
    assert DEBUG.value == before


def test_context_rejects_unknown_flag() -> None:
    with pytest.raises(KeyError, match="NOT_A_FLAG"):
        with Context(NOT_A_FLAG=1):
            pass


def test_flag_reads_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SG_TEST_FLAG", "7")
    assert Flag("SG_TEST_FLAG", 0, "test").value == 7
    monkeypatch.setenv("SG_TEST_FLAG", "")
    assert Flag("SG_TEST_FLAG", 5, "test").value == 5, "an empty variable is the default, as if unset"
    monkeypatch.setenv("SG_TEST_FLAG", "seven")
    bad = Flag("SG_TEST_FLAG", 0, "test", low=0, high=9)  # NOTE: made (imported) without an error
    with pytest.raises(FlagError, match="^the environment variable SG_TEST_FLAG is 'seven', but SG_TEST_FLAG takes a "
                       "whole number from 0 to 9; unset it for the default$"):  # fmt: skip
        int(bad)
    bad.set(3)
    assert bad.value == 3, "a value set in code is used, whatever the environment says"


@pytest.mark.parametrize("f", list(REGISTRY.values()), ids=list(REGISTRY))
def test_every_flag_takes_its_default_and_refuses_what_it_does_not_take(f: Flag) -> None:
    """Each flag's values: its default and the ends of its range parse; one past them, junk, a sign where there is
    none, 5,000 digits (past int()'s own limit) and for a string flag a value outside its choices or pattern are a
    FlagError of one line naming the flag and the value."""
    if f.default != "":
        assert f.parse(str(f.default)) == f.default
    bad = ["abc", "1.5", "9" * 5000, "0x10", " ", "1 2"] if isinstance(f.default, int) else []
    if f.choices:
        good = [str(c) for c in f.choices] + [str(c).lower() for c in f.choices if isinstance(c, str)]
        bad += ["2"] if isinstance(f.default, int) else ["TPU", "DISK", "CPU:1"]
    elif isinstance(f.default, int):
        good, bad = [str(f.low), str(f.high)], bad + [str(f.low - 1), str(f.high + 1)]
    else:
        good = ["x86-64-v3", "native", "/usr/bin/clang", "runs/my cache"] if f.pattern is None else ["x86-64-v3"]
        bad += ["-O0", "native -fplugin=x.so", "a" * 65, "\x1b[2J"] if f.pattern else []
    for raw in good:
        f.parse(raw)
    for raw in bad:
        with pytest.raises(FlagError) as e:
            f.parse(raw)
        message = str(e.value)
        assert "\n" not in message and f"the environment variable {f.name} is " in message, message
        assert f"{f.name} takes {f.describe()}" in message and "\x1b" not in message, message


def test_every_bad_flag_is_reported_once_each_and_imports_still_work() -> None:
    """Bad values are kept at import (nothing raises there): check_environment names each one on its own line, and
    the flag itself raises the same FlagError where code reads it."""
    code = """
import specgrad.flags as f
from specgrad import Context
with Context(THREADS=2):
    assert int(f.THREADS) == 2
for check in (f.check_environment, lambda: int(f.THREADS)):
    try:
        check()
    except f.FlagError as e:
        print(e)
"""
    env = {"PATH": os.environ.get("PATH", ""), "THREADS": "abc", "COMPILE_JOBS": "-5", "OPT": "2", "DEBUG": ""}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" is ")[0].rpartition(" ")[2] for line in lines] == ["THREADS", "OPT", "COMPILE_JOBS", "THREADS"]
    assert "COMPILE_JOBS is '-5', but COMPILE_JOBS takes a whole number from 0 to 1,024" in lines[2]


def test_every_flag_has_help_and_docs_are_current() -> None:
    assert all(f.help for f in REGISTRY.values())
    assert render_flags_markdown() in (DOCS / "flags.md").read_text(), "regenerate docs/flags.md from the registry"


def test_dtype_promotion_follows_pytorch() -> None:
    assert dtypes.promote(dtypes.int32, dtypes.float16) == dtypes.float16
    assert dtypes.promote(dtypes.bool, dtypes.int8) == dtypes.int8
    assert dtypes.promote(dtypes.uint8, dtypes.int8) == dtypes.int16
    assert dtypes.promote(dtypes.float32, dtypes.float64) == dtypes.float64
    assert dtypes.promote(dtypes.int64, dtypes.float32) == dtypes.float32


def test_dtype_conversions() -> None:
    assert dtypes.from_np(np.float32) == dtypes.float32 and dtypes.from_np(np.int64) == dtypes.int64
    assert dtypes.from_np(np.bool_) == dtypes.bool
    assert to_dtype("half") == dtypes.float16 and to_dtype("float32") == dtypes.float32
    assert (
        dtypes.from_py(True) == dtypes.bool
        and dtypes.from_py(3) == dtypes.int32
        and dtypes.from_py(1.5) == dtypes.float32
    )
    assert dtypes.from_py([1, 2.5]) == dtypes.float32
    with pytest.raises(TypeError, match="unknown dtype 'float8'"):
        to_dtype("float8")
    with pytest.raises(TypeError, match="complex"):
        dtypes.from_np(np.complex64)


def test_helpers() -> None:
    assert prod([2, 3, 4]) == 24 and prod([]) == 1
    assert dedup([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert flatten([[1, 2], [3]]) == [1, 2, 3]
    assert argfix(1, 2) == (1, 2) and argfix((1, 2)) == (1, 2) and argfix([1, 2]) == (1, 2)
    assert make_pair(3) == (3, 3) and make_pair((1, 2)) == (1, 2)
    assert partition([1, 2, 3, 4], lambda x: x % 2 == 0) == ([2, 4], [1, 3])
    assert merge_dicts([{"a": 1}, {"b": 2}, {"a": 1}]) == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="conflicting"):
        merge_dicts([{"a": 1}, {"a": 2}])
