"""The command line's side of issue 30's flags area: a bad environment flag is exit 2 (one line per flag), a path the
file system refuses is exit 1 naming it, options stay within what a spec may ask, and names from data are printed as
labels: one line, every control, format and bidi character escaped, never rich markup."""

from __future__ import annotations

import errno
import unicodedata

import pytest
from rich.console import Console
from rich.text import Text
from specgrad.cli.errors import INVALID, USAGE, describe
from specgrad.cli.main import MAX_EPOCHS, MAX_SEED, MAX_STEPS

from specgrad.flags import FlagError
from specgrad.helpers import WriteError
from specgrad.modelspec.errors import MAX_LABEL, label
from specgrad.modelspec.validate import TOP, TRAIN

BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]
CONTROLS = [*range(0, 0x20), *range(0x7F, 0xA0)]


def test_the_options_bounds_are_the_specs() -> None:
    """--epochs, --steps and --seed cannot ask for what the spec key they override may not hold."""
    assert (MAX_EPOCHS, MAX_STEPS) == (TRAIN.fields["epochs"].max, TRAIN.fields["steps"].max)
    assert MAX_SEED == TOP.fields["seed"].max


def test_a_bad_flag_is_a_usage_error_with_a_line_per_flag() -> None:
    code, message = describe(FlagError("the environment variable THREADS is 'abc', but ...\nthe environment ..."))
    assert code == USAGE and message.splitlines() == ["error: the environment variable THREADS is 'abc', but ...",
                                                      "error: the environment ..."]  # fmt: skip


@pytest.mark.parametrize("err", [errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR, errno.ELOOP])
def test_a_path_the_file_system_refuses_is_exit_1_naming_it(err: int) -> None:
    """Raised as they come from the os module (the path in filename) and as specgrad's WriteError."""
    code, message = describe(OSError(err, "why", "runs/" + "x" * 300))
    assert code == INVALID and message.startswith("error: runs/xxx") and "\n  hint: " in message, message
    code, message = describe(WriteError("runs/a/.lock", "cannot lock the run folder (why)", err))
    assert code == INVALID and "runs/a/.lock" in message, message


@pytest.mark.parametrize("c", [chr(c) for c in [*CONTROLS, *BIDI, 0x2028, 0x2029, 0xFEFF, 0xE000, 0xD800]])
def test_a_label_escapes_every_control_format_and_bidi_character(c: str) -> None:
    got = label(f"a{c}b")
    assert got.startswith("a\\") and got.endswith("b") and got.isprintable() and c not in got, repr(got)


def test_a_label_is_one_line_cut_and_never_markup() -> None:
    assert label("a\nb\rc") == "a\\nb\\rc"
    assert label("[bold]x") == "[bold]x" and label("café 中文") == "café 中文"
    assert (
        len(label("é" * 500)) == MAX_LABEL and label("é" * 500).endswith("...") and len(label("é" * 500, None)) == 500
    )
    console = Console(width=80, record=True, color_system=None)
    console.print(Text(label("[bold]x\u202e")))
    assert console.export_text().strip() == "[bold]x\\u202e"


def test_every_character_python_calls_unprintable_is_escaped() -> None:
    """The whole of Unicode's Cc, Cf, Cs, Co, Cn, Zl, Zp categories (what `str.isprintable` refuses, less the space)."""
    wrong = [hex(i) for i in range(0x110000) if not (s := label(chr(i))).isprintable() or (s == chr(i)) != (
        chr(i).isprintable())]  # fmt: skip
    assert not wrong, wrong[:20]
    assert unicodedata.category("\u202e") == "Cf" and label("\u202e") == "\\u202e"
