"""Pure pieces: the flag registry, dtypes and promotion, helpers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specgrad.dtype import dtypes, to_dtype
from specgrad.flags import DEBUG, REGISTRY, Context, Flag, render_flags_markdown
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
    monkeypatch.setenv("SG_TEST_FLAG", "seven")
    with pytest.raises(ValueError, match="SG_TEST_FLAG='seven' must be an integer"):
        Flag("SG_TEST_FLAG", 0, "test")


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
