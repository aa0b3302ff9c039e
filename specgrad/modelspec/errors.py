"""The one error type of spec/: problems located at file:line:col, in plain words for people who do not program.
Imports nothing from specgrad."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_EXCERPT = 60  # NOTE: characters of a spec's text a message quotes at most; a value can be a megabyte long
MAX_LABEL = 40  # NOTE: characters of a name from data (a class, a category, a column) printed at most


@dataclass(frozen=True)
class Location:
    """A place in a spec file: line and col are 1-based, col counts characters (not bytes)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec, where it is, and optionally how to fix it."""

    message: str
    loc: Location | None = None
    hint: str | None = None

    def __str__(self) -> str:
        """The problem as printed: file:line:col, the message and the hint, control characters escaped (a path or
        value from a spec cannot drive the terminal)."""
        head = f"{self.loc}: error: {self.message}" if self.loc is not None else f"error: {self.message}"
        return printable(head if self.hint is None else f"{head}\n  hint: {self.hint}")


class SpecError(Exception):
    """A spec cannot be used; carries at least one Problem, printed one per line."""

    def __init__(self, problems: Problem | Iterable[Problem]) -> None:
        self.problems: list[Problem] = [problems] if isinstance(problems, Problem) else list(problems)
        if not self.problems:
            raise ValueError("SpecError needs at least one Problem")
        super().__init__(self.problems)

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    @classmethod
    def at(cls, loc: Location | None, message: str, hint: str | None = None) -> SpecError:
        return cls([Problem(message, loc, hint)])


def _escaped(c: str) -> str:
    """`c`, or its escape where it is not printable: C0 and C1 controls (ESC starts a terminal's escape sequences),
    format characters (Cf: the bidi embeddings, overrides and isolates U+202A-U+202E and U+2066-U+2069, marks such as
    U+200E, zero-width ones), line and paragraph separators, surrogates, private and unassigned code points."""
    return c if c.isprintable() else repr(c)[1:-1] if ord(c) < 128 else f"\\u{ord(c):04x}"


def excerpt(text: str, limit: int = MAX_EXCERPT) -> str:
    """`text` as a message quotes it: on one line (control and format characters escaped), cut to `limit` characters."""
    shown = "".join(map(_escaped, text[: limit + 1]))
    return shown if len(shown) <= limit and len(text) <= limit else shown[: limit - 3] + "..."


def printable(text: str) -> str:
    """`text` with control and format characters escaped, line breaks kept: what may be printed to a terminal (an
    escape sequence in a path or a name would otherwise be run by it)."""
    return text if text.isprintable() else "\n".join("".join(map(_escaped, line)) for line in text.split("\n"))


def label(text: str, limit: int | None = MAX_LABEL) -> str:
    """Text from data (a class name, a category, a column name, a target) as printed beside other words: on one line
    (line breaks escaped too), control, format and bidi characters escaped, cut to `limit` characters (None: whole).
    It is still text, not rich markup: where rich prints it, pass it as a rich Text ('[bold]x' stays as it is)."""
    return excerpt(text, limit) if limit is not None else "".join(map(_escaped, text))
