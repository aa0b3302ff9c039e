"""The csv source: a table with a header, one column per feature and a target column (data.target, else the last).

A csv's delimiter is data.delimiter or sniffed, its decimal mark data.decimal; a missing cell (data.missing_values) is
filled as data.missing and data.missing_columns say, with values of the training rows saved in Columns.missing, and a
row whose target is missing is left out before the split. A categorical column's categories are the training split's
distinct values (sorted as class names are); a one_hot column gives one value per category, an index column one code
(see modelspec.contract.Columns, which is saved with the weights so that `run` encodes its input the same way). One-hot
values are left 0 and 1 by normalization. Each column's kind (numeric, categorical, binary, ID-like, text) is inferred
for `validate` and for input.shape: auto. Imports numpy, modelspec (auto, contract, errors, schema, validate) and
sources.base and .split.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.modelspec.auto import DataWidths
from specgrad.modelspec.contract import Columns
from specgrad.modelspec.errors import Location, Problem, SpecError
from specgrad.modelspec.schema import did_you_mean
from specgrad.modelspec.validate import DELIMITERS, MISSING_VALUES, ValidSpec, index_mix_problem, is_float
from specgrad.train.sources.base import (
    EXACT_FLOAT32,
    FLOAT32_MAX,
    MAX_CLASSES,
    MAX_PROBLEMS,
    Dataset,
    SourceDef,
    _check_shape,
    _class_order,
    _count,
    _cut,
    _decode,
    _int,
    _numbered,
    _quoted,
    _raise_all,
    _read_bytes,
    _shown_names,
    _Source,
    _vocab,
)
from specgrad.train.sources.split import _indices, _loss_problem, _split, _Target

MAX_CSV_CELLS = 20_000_000  # NOTE: a cell is a Python string until it is parsed: about 60 bytes each
MAX_ENCODED = 1 << 28  # NOTE: values of a csv's examples once one-hot encoded (1 GiB of float32)
NONFINITE_HINT = "missing or infinite values cannot be learned from: fill in a number, or remove the row"
SNIFFED_LINES, SNIFFED_CHARS = 20, 1 << 16  # NOTE: rows after the header a csv's delimiter is sniffed from, at most
# NOTE: a number whose digits are grouped in threes by ',', '.', a space or an apostrophe: 1,234.5, 1.234,5, 1 234
THOUSANDS = re.compile(r"[+-]?\d{1,3}([,. \u00a0'])\d{3}(?:\1\d{3})*(?:[.,]\d*)?")
FEW_WHOLE = 10  # NOTE: at most this many distinct whole numbers (and a fifth of the rows): a code or a count, said so
ID_SPREAD = 1.25  # NOTE: distinct whole numbers spanning less than this many per row count like a numbering: an ID
MIN_ID_ROWS = 3  # NOTE: fewer rows than this hold distinct values by chance: no column of theirs is called an ID
# NOTE: column kinds input.shape: auto leaves out (unless data.features lists them), and why, for validate
LEFT_OUT = {"id": "left out: an ID tells the model nothing of new rows", "empty": "left out: it holds no value",
            "text": "left out: free text (most values written once), not categories"}  # fmt: skip


@dataclass(frozen=True)
class Dialect:
    """How a csv is written: what separates its cells (data.delimiter, or sniffed when None), its decimal mark and the
    cells that are missing (data.missing_values, lowercased: compared case-insensitively)."""

    delimiter: str | None = ","
    decimal: str = "."
    missing: frozenset[str] = frozenset(v.lower() for v in MISSING_VALUES)
    sniffed: bool = False  # the delimiter was sniffed from the file, not given

    def is_missing(self, cell: str) -> bool:
        return cell.strip().lower() in self.missing

    def describe(self) -> str:
        """E.g. "delimiter ';' (sniffed), decimal ','", for validate."""
        shown = "tab" if self.delimiter == "\t" else f"'{self.delimiter}'"
        return f"delimiter {shown}{' (sniffed)' * self.sniffed}, decimal '{self.decimal}'"


def dialect_of(data: dict[str, Any]) -> Dialect:
    """The dialect a csv spec's data section gives (delimiter None: csv_table sniffs it)."""
    missing = data.get("missing_values")
    missing = MISSING_VALUES if missing is None else missing
    return Dialect(data.get("delimiter"), data.get("decimal") or ".", frozenset(v.strip().lower() for v in missing))


@dataclass(frozen=True)
class CsvNotes:
    """What validate says of a csv beyond its examples: its dialect, the rows left out (their target missing, or a
    drop_row column's cell), and per feature column how many of its cells are missing (what fills them is in
    Dataset.columns.missing)."""

    dialect: Dialect
    no_target: int
    dropped: int
    missing: dict[str, int]
    kinds: dict[str, ColumnKind] = field(default_factory=dict)  # every column's kind, in header order (column_kinds)
    target_tokens: dict[str, int] = field(default_factory=dict)  # the missing-value tokens the target held, counted


def _sniff(text: str) -> str:
    """The delimiter among DELIMITERS that splits the header and the first rows into the same number of cells, the most
    of them (',' where none does better): so a ';' file with decimal commas (3,5;2,1) is read as ';'."""
    head = text[:SNIFFED_CHARS].splitlines()
    head = head[:-1] if len(text) > SNIFFED_CHARS and len(head) > 1 else head  # NOTE: its last line may be cut short
    lines = [x for x in head[: SNIFFED_LINES + 1] if x.strip()]

    def widths(d: str) -> list[int]:
        try:
            return [len(r) for r in csv.reader(lines, delimiter=d)]
        except csv.Error:
            return [0]

    counts = {d: widths(d) for d in DELIMITERS}
    even = [d for d, w in counts.items() if w and w[0] > 1 and len(set(w)) == 1]
    return max(even or DELIMITERS, key=lambda d: (counts[d][0] if counts[d] else 0, -DELIMITERS.index(d)))


def _csv_rows(text: str, file: Path, delimiter: str = ",") -> list[tuple[int, list[str]]]:
    """(line, cells) of every row with a value in it; a row's line is where it starts. At most MAX_CSV_CELLS cells."""
    reader, rows, line, cells_read = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), [], 1, 0
    try:
        for cells in reader:
            cells_read += len(cells)
            if cells_read > MAX_CSV_CELLS:
                raise SpecError.at(Location(str(file), line, 1), f"{file.name} has more than {MAX_CSV_CELLS:,} cells, "
                                   "more than a CSV file is read into memory for",
                                   "save large data with numpy, np.savez(path, x=inputs, y=targets), and use source: "
                                   "npz")  # fmt: skip
            if any(c.strip() for c in cells):
                rows.append((line, cells))
            line = reader.line_num + 1
    except csv.Error as e:
        raise SpecError.at(Location(str(file), line, 1), f"{file.name}: this row cannot be read as CSV ({e})") from None
    return rows


def _column_hint(name: str, header: list[str]) -> str:
    parts = [did_you_mean(name, header) or ""]
    if len(header) == 1 and any(sep in header[0] for sep in DELIMITERS):
        parts.append("the file seems to separate its cells with another character: set data.delimiter (',', ';', "
                     "'\\t' or '|').")  # fmt: skip
    elif header and all(is_number(h) for h in header):
        parts.append("the first row holds numbers: it must be a header row naming the columns.")
    more = f", and {len(header) - 20} more" if len(header) > 20 else ""
    parts.append(f"the header has: {', '.join(_quoted(h) for h in header[:20])}{more}")
    return " ".join(p for p in parts if p)


def is_number(s: str) -> bool:
    """Whether a CSV cell reads as a number (float's syntax: nan and inf included)."""
    try:
        float(s)
    except ValueError:
        return False
    return True


def _csv_columns(src: _Source, header: list[str], line: int, file: Path) -> tuple[list[str], list[int]]:
    """(feature names, column indices of the features then the target), every name checked against the header."""
    features, problems, _ = _named_columns(src, header, line, file)
    _raise_all(problems, src.spec.path)
    return features, [header.index(n) for n in [*features, src.data["target"]]]


def _named_columns(src: _Source, header: list[str], line: int, file: Path) -> tuple[list[str], list[Problem], bool]:
    """(the feature names the header has, every problem with the names, whether the features are as the spec means
    them: else the input's width and dtype are not checked, as they would change with the fix). A name the header
    lacks is reported at the spec key that names it (the header's place as context) for the training data, at the
    header for a test file (whose columns are at fault)."""
    target, categorical = src.data["target"], src.data["categorical"] or {}
    features = src.data["features"] or [h for h in header if h != target]
    problems = []
    if target in (src.data["features"] or []):
        problems.append(Problem(f"data.features includes the target column '{_quoted(target)}': the model would be "
                                "given the answer", _item_loc(src, "features", target) or src.near("features"),
                                "remove it from features"))  # fmt: skip
    # NOTE: with data.features, the keys naming columns are checked against it (validate.py) before the data is read
    listed = [] if src.data["features"] else list(categorical)
    given = (src.spec.values.get("data") or {}).get("features")  # NOTE: the user's (auto may have chosen src's)
    filled = [] if given else list(src.data.get("missing_columns") or {})
    context = f" ({file.name}:{line}:1)" if src.test_file is None else ""
    for key, names in (("features", features), ("target", [target]), ("categorical", listed),
                       ("missing_columns", filled)):  # fmt: skip
        problems += [Problem(f"data.{key} names the column '{_quoted(name)}', but {file.name} has no such column"
                             f"{context}", _column_loc(src, key, name, Location(str(file), line, 1)),
                             _column_hint(name, header))
                     for name in dict.fromkeys(names) if name not in header]  # fmt: skip
    known = not problems
    features = [f for f in features if f in header and f != target]
    index = [k for k, enc in categorical.items() if enc == "index"]
    others = [f for f in features if categorical.get(f) != "index"]
    if index and others and known:
        node = src.node("data", "categorical", index[0])
        problems.append(index_mix_problem(index[0], others, node.loc if node is not None else src.near("categorical")))
        known = False
    for name in [*features, target]:
        at = [i for i, h in enumerate(header) if h == name]
        if len(at) > 1:
            problems.append(Problem(f"the header names the column '{_quoted(name)}' {len(at)} times (columns "
                                    f"{', '.join(str(i + 1) for i in at)})", Location(str(file), line, at[1] + 1),
                                    "give each column its own name"))  # fmt: skip
        if name == "" and at:
            last = at[0] == len(header) - 1  # NOTE: a line ending with the delimiter has an empty last cell
            problems.append(Problem(f"column {at[0] + 1} has no name in the header",
                                    Location(str(file), line, at[0] + 1),
                                    ("a line ending with the delimiter makes an empty last column: remove the "
                                     "delimiter at the end of the lines, or " if last else "") +
                                    "name it, or list the columns to use in data.features"))  # fmt: skip
    return features, problems, known


def _item_loc(src: _Source, key: str, name: str) -> Location | None:
    """Where the list data.<key> (features) writes `name`, when the spec as written holds the list being used."""
    node = src.node("data", key)
    if node is None or node.kind != "seq" or node.to_plain() != src.data[key]:
        return None
    return next((x.loc for x in node.value if x.kind == "scalar" and x.value == name), None)


def _column_loc(src: _Source, key: str, name: str, header: Location) -> Location | None:
    """Where the spec names a column the data lacks: the features item, the target, the categorical key (else the
    data section); a test file's columns are at fault, not the spec's: its header."""
    if src.test_file is not None:
        return header
    if key in ("categorical", "missing_columns"):
        node = src.node("data", key)
        keys = (node.key_locs or {}) if node is not None and node.kind == "map" else {}
        return keys.get(name) or src.near("categorical")
    return (_item_loc(src, key, name) if key == "features" else None) or src.near(key)


def _cell(text: str, line: int, col: int, name: str, file: Path, nonfinite_hint: str | None = NONFINITE_HINT,
          dialect: Dialect = Dialect(), fill: str | None = None, served: bool = False
          ) -> tuple[float, Problem | None]:  # fmt: skip
    """The number in one cell, or the problem with it; NaN and infinity are read as they are when `nonfinite_hint` is
    None, else refused with it. A missing cell is `fill` (the number's text), else a problem (`served`: in a file
    given to a trained model; run --allow-nonfinite still reads a 'nan' as NaN)."""
    s, loc, name = text.strip(), Location(str(file), line, col + 1), _quoted(name)
    if dialect.is_missing(s) and fill is not None:
        return float(fill), None
    if dialect.is_missing(s) and not (nonfinite_hint is None and is_number(s)):
        return 0.0, _missing_problem(s, line, name, loc, "a number", served)
    try:
        v = float(_decimal_point(s, dialect))
    except ValueError:
        return 0.0, Problem(f"row {line}, column '{name}': '{_quoted(s)}' is not a number", loc,
                            _number_hint(s, dialect))  # fmt: skip
    if not math.isfinite(v) and nonfinite_hint is not None:
        return 0.0, Problem(f"row {line}, column '{name}': '{_quoted(s)}' is not a finite number", loc, nonfinite_hint)
    if abs(v) > FLOAT32_MAX and nonfinite_hint is not None:  # NOTE: it would become infinity as a float32
        return 0.0, Problem(f"row {line}, column '{name}': '{_quoted(s)}' is beyond float32's range (about "
                            f"{FLOAT32_MAX:.3g})", loc, "rescale the column, or remove the row")  # fmt: skip
    return v, None


def _missing_problem(s: str, line: int, name: str, loc: Location, what: str, served: bool) -> Problem:
    """A missing cell that nothing fills: in training data the hint names the keys that fill it; in a file given to
    a trained model (`served`), it says the model has no value for it."""
    said = f"row {line}, column '{name}' is " + (f"missing ('{_quoted(s)}')" if s else "empty")
    if served:
        nan = "; or pass --allow-nonfinite to run it as NaN" if is_number(s) else ""
        return Problem(said, loc, f"fill in {what}, or remove the row: the model was trained without a value to fill "
                       f"this column with (data.missing, or drop_row for it){nan}")  # fmt: skip
    return Problem(said, loc, f"fill in {what}, or remove the row; or let specgrad fill missing cells: data.missing: "
                   f"mean, median, mode, drop_row or {{fill: VALUE}} (for one column: data.missing_columns: "
                   f"{{{name}: ...}})")  # fmt: skip


def _decimal_point(s: str, dialect: Dialect) -> str:
    """A cell's number with a point for its decimal mark; with data.decimal ',' a '.' is no number's (1.5 in a file of
    3,5s is a typo, 1.234 a thousand): it comes back as '' (which float refuses)."""
    if dialect.decimal == ".":
        return s
    return "" if "." in s else s.replace(",", ".", 1)


def _number_hint(s: str, dialect: Dialect) -> str:
    """Why a cell is not a number as the dialect reads it, and the key that reads it."""
    if m := THOUSANDS.fullmatch(s):  # NOTE: float refused it, so the groups of three are no decimals
        sep = m.group(1)
        maybe = "; if ',' is its decimal mark, set data.decimal: ','" if sep == "," and s.count(",") == 1 and \
            "." not in s and dialect.decimal == "." else _decimal_key(s, dialect)  # fmt: skip
        return f"'{sep}' groups its digits in thousands, which specgrad does not read: write it without them " \
            f"({s.replace(sep, '')}){maybe}"  # fmt: skip
    if dialect.decimal == "." and re.fullmatch(r"[+-]?\d*,\d+", s):
        return "it has a decimal comma: set data.decimal: ',' (the cells then separated by ';' or tabs: " \
            "data.delimiter)"  # fmt: skip
    if dialect.decimal == "," and re.fullmatch(r"[+-]?\d*\.\d+", s):
        return "it has a decimal point, but data.decimal is ',': write it with a comma, or set data.decimal: '.'"
    mark = "a point" if dialect.decimal == "." else "a comma (data.decimal)"
    return f"write a plain number such as 1200 or 3{dialect.decimal}5: {mark} for decimals, no units, no thousands " \
        "separators"  # fmt: skip


def _decimal_key(s: str, dialect: Dialect) -> str:
    """The decimal mark a number grouped in thousands uses, where it is not data.decimal."""
    mark = "," if re.search(r"\.\d{3},\d*$", s) else "." if re.search(r",\d{3}\.\d*$", s) else None
    return f"; its decimal mark is '{mark}': set data.decimal: '{mark}'" if mark and mark != dialect.decimal else ""


def _ragged(line: int, cells: list[str], header: list[str], file: Path) -> Problem:
    """A row with another number of cells than the header has columns, located where it goes wrong."""
    return Problem(
        f"row {line} has {len(cells)} cells, but the header has {len(header)} columns",
        Location(str(file), line, min(len(cells), len(header)) + 1),
        "check for a missing or extra comma; a value with a comma in it goes in quotes",
    )


def _csv_numbers(rows: list[tuple[int, list[str]]], header: list[str], cols: list[int], file: Path,
                 dialect: Dialect = Dialect()) -> tuple[np.ndarray, list[Problem]]:  # fmt: skip
    """(N, len(cols)) numbers of the given columns, and every ragged row and bad cell."""
    out, problems = np.zeros((len(rows), len(cols))), []
    for i, (line, cells) in enumerate(rows):
        if len(cells) != len(header):
            problems.append(_ragged(line, cells, header, file))
            continue
        for j, c in enumerate(cols):
            out[i, j], problem = _cell(cells[c], line, c, header[c], file, dialect=dialect)
            problems += [problem] if problem else []
    return out, problems


def _is_whole(s: str) -> bool:
    return _int(s) is not None or (is_number(s) and float(s).is_integer())


def _csv_labels(rows: list[tuple[int, list[str]]], header: list[str], col: int, file: Path,
                classes: list[str] | None = None) -> tuple[np.ndarray, list[str] | None, list[Problem]]:  # fmt: skip
    """(N,) labels of a target column: indices into the sorted class names when any cell is text, else the numbers
    themselves (Python ints where the text is a whole number, so a huge label is exact; checked to be labels later);
    ragged rows are left to _csv_numbers. A test file gives `classes`, the training split's class names: its labels
    are indices into those."""
    cells = [(line, c[col].strip()) for line, c in rows if len(c) == len(header)]
    if not any(s and not is_number(s) for _, s in cells) and not (classes and classes != _numbered(len(classes))):
        values, problems = _csv_numbers([(line, c) for line, c in rows if len(c) == len(header)], header, [col], file)
        exact = [n if (n := _int(s)) is not None else v for (_, s), v in zip(cells, values[:, 0].tolist())]
        return np.array(exact, dtype=object), None, problems
    names = classes or sorted({s for _, s in cells if s}, key=_class_order)
    index = {name: i for i, name in enumerate(names)}
    problems = [Problem(f"row {line}, column '{_quoted(header[col])}' is empty", Location(str(file), line, col + 1),
                        "fill in its class, or remove the row") for line, s in cells if not s]  # fmt: skip
    problems += [Problem(f"row {line}, column '{_quoted(header[col])}': '{_quoted(s)}' is not one of the classes the "
                         "model was trained on", Location(str(file), line, col + 1),
                         f"{did_you_mean(s, names) or ''} the classes are: {_shown_names(names)}".strip())
                 for line, s in cells if s and s not in index][:MAX_PROBLEMS]  # fmt: skip
    return np.array([index.get(s, 0) for _, s in cells], dtype=np.float64), names, problems


def _stray_text_problems(rows: list[tuple[int, list[str]]], header: list[str], col: int, file: Path
                         ) -> list[Problem]:  # fmt: skip
    """A column of mostly whole numbers with a few words in it is numbered classes or targets with typos, not text
    classes (which would sort '10' before '2'): each word is reported, unless data.task: classify says otherwise."""
    cells = [(line, c[col].strip()) for line, c in rows if len(c) == len(header) and c[col].strip()]
    words = [(line, s) for line, s in cells if not is_number(s)]
    whole = sum(_is_whole(s) for _, s in cells)
    if not words or 2 * whole <= len(cells):
        return []
    hint = "correct it or remove the row; if the column holds class names, set data.task: classify"
    return [Problem(f"row {line}, column '{_quoted(header[col])}': '{_quoted(s)}' is not a number, but {whole} of "
                    f"the column's "
                    f"{len(cells)} values are whole numbers, so it is probably a typo",
                    Location(str(file), line, col + 1), hint if n == 0 else None)
            for n, (line, s) in enumerate(words)]  # fmt: skip


def _big_target_problems(rows: list[tuple[int, list[str]]], header: list[str], col: int, file: Path
                         ) -> list[Problem]:  # fmt: skip
    """Whole-number regression targets past EXACT_FLOAT32 would be rounded as float32 (as in an npz array)."""
    big = [(line, n) for line, c in rows if len(c) == len(header) and (n := _int(c[col].strip())) is not None
           and abs(n) > EXACT_FLOAT32]  # fmt: skip
    return [Problem(f"row {line}, column '{_quoted(header[col])}' is {n}: regression targets are float32, which "
                    "holds whole "
                    f"numbers exactly up to {EXACT_FLOAT32} only", Location(str(file), line, col + 1),
                    "scale the targets down (thousands instead of units, say)" if k == 0 else None)
            for k, (line, n) in enumerate(big)]  # fmt: skip


def csv_table(raw: bytes, file: Path, dialect: Dialect = Dialect()
              ) -> tuple[int, list[str], list[tuple[int, list[str]]], Dialect]:  # fmt: skip
    """(the header's line, its column names, the (line, cells) of every row after it, the dialect read: its delimiter
    sniffed when the dialect has none) of a CSV file's bytes: training data or `run --input`. An empty file, or a
    header without rows, is an error; a byte-order mark is dropped, and so is the empty, nameless last column of a
    file whose every line ends with the delimiter (as some spreadsheets save)."""
    text = _decode(raw, file)
    if dialect.delimiter is None:
        dialect = replace(dialect, delimiter=_sniff(text), sniffed=True)
    if dialect.delimiter == dialect.decimal:
        raise SpecError.at(Location(str(file), 1, 1), f"{file.name} separates its cells with '{dialect.delimiter}', "
                           f"which is data.decimal too: a cell 3{dialect.decimal}5 would be two cells",
                           "save the file with ';' between cells (and set data.delimiter: ';'), or set data.decimal: "
                           "'.'")  # fmt: skip
    rows = _csv_rows(text, file, dialect.delimiter)
    if not rows:
        raise SpecError.at(Location(str(file), 1, 1), f"{file.name} is empty: a CSV file needs a header row naming "
                           "the columns, then one row per example")  # fmt: skip
    (hline, header), rows = (rows[0][0], [h.strip() for h in rows[0][1]]), rows[1:]
    if not rows:
        raise SpecError.at(Location(str(file), hline + 1, 1), f"{file.name} has a header but no rows of data")
    if len(header) > 1 and header[-1] == "" and all(len(c) == len(header) and not c[-1].strip() for _, c in rows):
        header, rows = header[:-1], [(n, c[:-1]) for n, c in rows]  # NOTE: every line ends with the delimiter
    return hline, header, rows, dialect


def encode_rows(rows: list[tuple[int, list[str]]], header: list[str], cols: list[int], columns: Columns, file: Path,
                nonfinite_hint: str | None, unseen: str, dialect: Dialect = Dialect(), served: bool = False
                ) -> tuple[np.ndarray, list[Problem]]:  # fmt: skip
    """(N, columns.width) examples of the feature columns at `cols` (float64, or int64 codes when every feature is an
    index column), and every ragged row and bad cell. `nonfinite_hint` is the hint for NaN or infinity (None: read
    them as they are); `unseen` follows a categorical value the vocabulary does not hold, in its message. A missing
    cell (as the dialect says) takes its column's fill (columns.missing), else it is a problem (`served`: in a file
    given to a trained model)."""
    out = np.zeros((len(rows), columns.width), np.int64 if columns.is_index else np.float64)
    problems, slots = [], columns.slots()
    fills = [columns.fill(f) for f in columns.features]
    for i, (line, cells) in enumerate(rows):
        if len(cells) != len(header):
            problems.append(_ragged(line, cells, header, file))
            continue
        for c, (at, enc, codes), fill in zip(cols, slots, fills):
            if enc is None:
                out[i, at], problem = _cell(cells[c], line, c, header[c], file, nonfinite_hint, dialect, fill, served)
            else:
                text = fill if fill is not None and dialect.is_missing(cells[c]) else cells[c]
                code, problem = _category(text, line, c, header[c], file, codes, unseen, dialect, served)
                out[i, at + code * (enc == "one_hot")] = 1 if enc == "one_hot" else code
            problems += [problem] if problem else []
    return out, problems


def _category(text: str, line: int, col: int, name: str, file: Path, codes: dict[str, int], unseen: str,
              dialect: Dialect = Dialect(), served: bool = False) -> tuple[int, Problem | None]:  # fmt: skip
    """The code of one categorical cell (its one-hot position, or index code), or the problem with it (a missing cell
    comes filled, or is one)."""
    s, loc, name = text.strip(), Location(str(file), line, col + 1), _quoted(name)
    if s not in codes and dialect.is_missing(s):
        return 0, _missing_problem(s, line, name, loc, "its category", served)
    if s in codes:
        return codes[s], None
    known = list(codes)
    hint = did_you_mean(s, known) or ""
    return 0, Problem(f"row {line}, column '{name}': '{_quoted(s)}' {unseen}", loc,
                      f"{hint} the categories are: {_shown_names(known)}".strip())  # fmt: skip


def _vocabulary(rows: list[tuple[int, list[str]]], train: np.ndarray, col: int, width: int, dialect: Dialect,
                fill: str | None = None) -> tuple[str, ...]:  # fmt: skip
    """The distinct values of a categorical column in the training rows (none missing, and `fill`, a category that
    fills missing cells: its own category when the rows do not hold it), sorted as class names are."""
    values = {rows[i][1][col].strip() for i in train.tolist() if len(rows[i][1]) == width}
    values = {v for v in values if v and not dialect.is_missing(v)} | ({fill} if fill is not None else set())
    return tuple(sorted(values, key=_class_order))


def _text_columns(rows: list[tuple[int, list[str]]], header: list[str], cols: list[int], columns: Columns,
                  file: Path, hline: int, dialect: Dialect = Dialect()) -> list[Problem]:  # fmt: skip
    """A number column that holds mostly text is a column of categories nobody said so of: one problem for it, not
    one per cell (missing cells are neither)."""
    problems = []
    for c in (c for c, name in zip(cols, columns.features) if name not in columns.categorical):
        cells = [s for _, cells in rows if len(cells) == len(header) and not dialect.is_missing(s := cells[c].strip())]
        words = [s for s in cells if not is_number(_decimal_point(s, dialect)) and not THOUSANDS.fullmatch(s)]
        if words and 2 * len(words) > len(cells):
            shown = ", ".join(f"'{_quoted(w)}'" for w in list(dict.fromkeys(words))[:3])
            name = _quoted(header[c])
            problems.append(Problem(f"column '{name}' holds text ({shown}, ...), not numbers",
                                    Location(str(file), hline, c + 1),
                                    f"to feed it to the model as categories, add it to data.categorical, e.g. "
                                    f"categorical: {{{name}: one_hot}}; to leave it out, list the other columns in "
                                    "data.features"))  # fmt: skip
    return problems


def _check_columns(src: _Source, columns: Columns, ids: list[str] | None = None) -> None:
    """The encoded width is the input's; numbers and one-hot values need a float input, index codes an integer one
    read by an embedding with room for every code. A width that counts ID-like columns (`ids`) is not widened to
    them: the hint leaves them out."""
    n = len(columns.features)
    what = f"data.features gives {n} columns ({', '.join(columns.features)}), shape [{n}] per example" if not \
        columns.categorical else f"the columns give {columns.explain()}"  # fmt: skip
    if columns.is_index == is_float(src.dtype):
        hint = "use dtype int32 (the codes feed an embedding)" if columns.is_index else "use dtype float32"
        why = "index columns give whole-number codes for an embedding" if columns.is_index else \
            f"source csv gives numbers with fractions{' and one-hot values' * bool(columns.categorical)}"  # fmt: skip
        raise SpecError.at(src.input_loc("dtype") or src.input_loc(), f"{why}, but the input's dtype is {src.dtype}",
                           hint)  # fmt: skip
    if ids and (columns.width,) != src.shape:
        without = columns.width - sum(_encoded_width(columns, f) for f in ids)
        raise SpecError.at(src.input_loc(), f"{what}, but the input's shape is {list(src.shape)}",
                           _id_hint(src, ids, without))  # fmt: skip
    _check_shape(src, (columns.width,), what)
    if not columns.is_index:
        return
    codes, (vocab, from_model) = columns.codes, _vocab(src)
    parts = " + ".join(f"{f} ({len(columns.categorical[f][1])})" for f in columns.features)
    if codes - 1 > np.iinfo(src.dtype).max:
        raise SpecError.at(src.input_loc("dtype"), f"the index columns have {codes} codes ({parts} categories), more "
                           f"than {src.dtype} holds", "use dtype int32")  # fmt: skip
    if not from_model:
        raise SpecError.at(src.input_loc(), f"index columns give codes for an embedding, but no embedding layer reads "
                           f"the input '{src.name}'", f"start the model with an embedding of vocab {codes} "
                           f"({parts} categories), e.g. {{embedding: {{vocab: {codes}, dim: 8}}}}")  # fmt: skip
    if vocab < codes:
        step = next(s for s in src.spec.steps if s.what == "embedding" and src.name in s.srcs)
        raise SpecError.at(step.loc, f"the embedding's vocab is {vocab}, but the index columns have {codes} codes in "
                           f"all: {parts} categories, numbered one column after the other",
                           f"set vocab to {codes}")  # fmt: skip


def _encoded_width(columns: Columns, name: str) -> int:
    """Values one feature takes in an example: its categories one-hot, else one (a number or an index code)."""
    return len(columns.categorical[name][1]) if columns.encoding(name) == "one_hot" else 1


def _id_hint(src: _Source, ids: list[str], width: int) -> str:
    """Leave ID-like columns out (never widen the input to take them): how, and the width without them."""
    shown = ", ".join(f"'{_quoted(f)}'" for f in ids[:5])
    how = "remove it from data.features" if src.data["features"] else "list the other columns in data.features"
    return f"{shown} look{'s' * (len(ids) == 1)} like an ID (a distinct value in every row), which tells the model " \
        f"nothing of new rows: {how} (the input is then [{width}]), or write input.shape: auto, which leaves ID-like " \
        "columns out"  # fmt: skip


def _strategies(src: _Source, features: list[str]) -> dict[str, tuple[str, Any]]:
    """Feature -> (strategy, the {fill: VALUE}'s VALUE or None) for the features data.missing or
    data.missing_columns gives one; mean and median by default on a categorical column are its mode. A test file's
    are the training data's (src.columns)."""
    if src.columns is not None:
        return dict(src.columns.missing)
    default, per, categorical = src.data["missing"], src.data["missing_columns"] or {}, src.data["categorical"] or {}
    ret = {}
    for f in features:
        how = per.get(f, default)
        if isinstance(how, dict):
            ret[f] = ("fill", how["fill"])
        elif how is not None:
            ret[f] = ("mode", None) if how in ("mean", "median") and f in categorical and f not in per else (how, None)
    return ret


def _left_out(rows: list[tuple[int, list[str]]], header: list[str], cols: list[int], features: list[str],
              strategies: dict[str, tuple[str, Any]], dialect: Dialect
              ) -> tuple[list[tuple[int, list[str]]], CsvNotes]:  # fmt: skip
    """The rows kept: every row but those whose target is missing (a target is never filled) or whose drop_row
    column is; what validate says of them (ragged rows are kept, for encode_rows to report)."""
    drop = [c for f, c in zip(features, cols) if strategies.get(f, ("",))[0] == "drop_row"]
    counts, kept, no_target, dropped, tokens = dict.fromkeys(features, 0), [], 0, 0, Counter()
    for line, cells in rows:
        if len(cells) != len(header):
            kept.append((line, cells))
            continue
        for f, c in zip(features, cols):
            counts[f] += dialect.is_missing(cells[c])
        if dialect.is_missing(cells[cols[-1]]):
            no_target += 1
            tokens[cells[cols[-1]].strip()] += 1
        elif any(dialect.is_missing(cells[c]) for c in drop):
            dropped += 1
        else:
            kept.append((line, cells))
    return kept, CsvNotes(dialect, no_target, dropped, {f: n for f, n in counts.items() if n},
                          target_tokens=dict(tokens.most_common()))  # fmt: skip


def _strategy_loc(src: _Source, name: str) -> Location | None:
    """Where the strategy of a column is written: data.missing_columns.<name>, else data.missing."""
    node = src.node("data", "missing_columns", name)
    return node.loc if node is not None else src.near("missing")


def _fill_text(src: _Source, name: str, value: Any, categorical: bool) -> str:
    """A {fill: VALUE} as the cell it stands for: a category's text, or a number's repr (a numeric column's VALUE must
    be a number)."""
    if categorical:
        return str(value).strip()
    if isinstance(value, str) and src.data.get("decimal") == "," and value.count(",") == 1 and "." not in value:
        value = value.replace(",", ".")  # NOTE: written as the file writes its numbers: "2,5" is 2.5
    try:
        v = float(value)
    except ValueError:
        v = math.nan
    if not math.isfinite(v):
        raise SpecError.at(_strategy_loc(src, name), f"the column '{_quoted(name)}' holds numbers, but its missing "
                           f"cells are filled with '{_quoted(str(value))}', which is not a finite number",
                           f"fill it with a number, or give it its own strategy: data.missing_columns: "
                           f"{{{_quoted(name)}: median}}")  # fmt: skip
    return repr(v)


def _statistic(src: _Source, rows: list[tuple[int, list[str]]], train: np.ndarray, c: int, name: str, how: str,
               categorical: bool, dialect: Dialect, width: int) -> str:  # fmt: skip
    """The mean, median or mode of a column's cells in the training rows (none missing; bad cells are left to
    encode_rows), as the cell it fills a missing one with: a category, or a number's repr."""
    cells = [s for i in train.tolist() if len(rows[i][1]) == width and not dialect.is_missing(s := rows[i][1][c])]
    cells = [s.strip() for s in cells]
    if not categorical:
        numbers = [
            repr(v) for s in cells if is_number(t := _decimal_point(s, dialect)) and math.isfinite(v := float(t))
        ]
        if 2 * (len(cells) - len(numbers)) > len(cells):
            return "0.0"  # NOTE: a column of text: _text_columns reports it (not categorical), this fill is never used
        cells = numbers
    if not cells:
        raise SpecError.at(_strategy_loc(src, name), f"the column '{_quoted(name)}' has no value in the training rows "
                           f"to take its {how} from", "fill it with a value, {fill: VALUE}, or leave the column out "
                           "of data.features")  # fmt: skip
    if how == "mode":
        counts: dict[str, int] = {}
        for s in cells:
            counts[s] = counts.get(s, 0) + 1
        order: Callable[[str], Any] = _class_order if categorical else float
        return min(counts, key=lambda v: (-counts[v], order(v)))  # NOTE: ties: the smallest value, or the first name
    values = np.array([float(v) for v in cells])
    return repr(float(np.mean(values) if how == "mean" else np.median(values)))


def _new_columns(src: _Source, rows: list[tuple[int, list[str]]], train: np.ndarray, header: list[str],
                 features: list[str], cols: list[int], strategies: dict[str, tuple[str, Any]], dialect: Dialect
                 ) -> Columns:  # fmt: skip
    """The columns training reads: the categorical ones' vocabularies and each strategy's fill, from the training
    rows (a fill that is a new category is one more category)."""
    categorical, at = src.data["categorical"] or {}, dict(zip(features, cols))
    given = {f: _fill_text(src, f, v, f in categorical) for f, (how, v) in strategies.items() if how == "fill"}
    vocabularies = {f: (categorical[f], _vocabulary(rows, train, c, len(header), dialect, given.get(f)))
                    for f, c in zip(features, cols) if f in categorical}  # fmt: skip
    missing = {f: (how, given[f] if how == "fill" else None if how == "drop_row" else
                   _statistic(src, rows, train, at[f], f, how, f in categorical, dialect, len(header)))
               for f, (how, _) in strategies.items()}  # fmt: skip
    return Columns(tuple(features), vocabularies, missing)


def _decimal_targets(rows: list[tuple[int, list[str]]], col: int, dialect: Dialect, width: int
                     ) -> list[tuple[int, list[str]]]:  # fmt: skip
    """The rows with the target column's numbers written with a point (data.decimal ','), so that 3,5 is a number to
    learn, not a class name."""
    if dialect.decimal == ".":
        return rows
    ret = []
    for line, cells in rows:
        if len(cells) == width and is_number(point := _decimal_point(cells[col].strip(), dialect)):
            cells = [*cells[:col], point, *cells[col + 1 :]]
        ret.append((line, cells))
    return ret


def _load_csv(src: _Source) -> Dataset:
    """A csv's rows as examples. Every problem is reported at once: a check stops only where an earlier problem makes
    it meaningless (a column the header lacks stops the checks of the columns' contents; a problem with the input
    columns stops none of the target's: the loss, the labels, the output's width and the split are still checked)."""
    file = src.file()
    hline, header, rows, dialect = csv_table(_read_bytes(src, file), file, dialect_of(src.data))
    kinds = column_kinds(rows, header, src.data["target"], dialect)
    features, found, known = _named_columns(src, header, hline, file)
    if src.data["target"] not in header:  # NOTE: which rows are examples, the split and the task need the target
        # NOTE: features the spec lists are still checked; every other column would count the real target among them
        shown = Columns(tuple(features), {f: (e, ()) for f, e in (src.data["categorical"] or {}).items()})
        cols = [header.index(f) for f in features] if src.data["features"] and src.test_file is None else []
        _raise_all(found + _text_columns(rows, header, cols, shown, file, hline, dialect), src.spec.path)
    cols = [header.index(n) for n in [*features, src.data["target"]]]
    strategies = _strategies(src, features)
    rows, notes = _left_out(rows, header, cols, features, strategies, dialect)
    if not rows:
        hint = ("a row without its target is always left out (a target is never filled): add the targets to the file"
                if not notes.dropped else "fill the missing cells, or let data.missing fill the features' cells "
                "(mean, median, mode or {fill: VALUE}) instead of drop_row")  # fmt: skip
        _raise_all([*found, Problem(f"every row of {file.name} is left out: {notes.no_target} with its target missing, "
                                   f"{notes.dropped} with a missing cell in a drop_row column", src.path_loc(file),
                                   hint)], src.spec.path)  # fmt: skip
    rows = _decimal_targets(rows, cols[-1], dialect, len(header))
    col = cols[-1]
    train, _ = _indices(src, len(rows), _csv_strata(src, rows, header, col, file))
    ids = tuple(h for h, k in kinds.items() if k.kind == "id")
    columns, x, inputs, cells = _csv_inputs(src, rows, header, features, cols[:-1], train, strategies, dialect,
                                            hline, known, ids)  # fmt: skip
    whole = [i for i, (_, c) in enumerate(rows) if len(c) == len(header)]  # NOTE: the inputs' cells say which are not
    target, y, more = _csv_target(src, [rows[i] for i in whole], header, col, not cells)
    found += inputs + _cut(cells + more, file)
    if more:  # NOTE: the targets cannot all be read: of the contract, the loss still fits the task or not
        loss = _loss_problem(src, target) if target is not None else None
        _raise_all([*found, *([loss] if loss is not None else [])], src.spec.path)
    assert target is not None
    x = x[whole] if x is not None else np.zeros((len(whole), 0), np.float32)
    where = f"the {len(rows)} data rows of {file.name} with valid_split {src.data['valid_split']}"
    x = x if columns is not None and columns.is_index else x.astype(np.float32)
    ds = _split(src, x, y, target, Location(str(file), rows[-1][0], 1), where, found)
    ds.columns, ds.table = columns, replace(notes, kinds=kinds)
    return ds


def _csv_inputs(src: _Source, rows: list[tuple[int, list[str]]], header: list[str], features: list[str],
                cols: list[int], train: np.ndarray, strategies: dict[str, tuple[str, Any]], dialect: Dialect,
                hline: int, known: bool, ids: tuple[str, ...] = ()
                ) -> tuple[Columns | None, np.ndarray | None, list[Problem], list[Problem]]:  # fmt: skip
    """(the columns, the encoded examples (None when they cannot be), the problems with the columns, those with their
    cells): a column of text nobody marked categorical is reported once (its cells are not); the input's width and
    dtype are checked when the features are `known` (as the spec means them), never widened to ID-like `ids`."""
    file = src.file()
    try:
        columns = src.columns or _new_columns(src, rows, train, header, features, cols, strategies, dialect)
    except SpecError as e:  # NOTE: a fill that cannot be made: the cells cannot be read without it
        return None, None, e.problems, []
    # NOTE: a trained model's columns are what they are: a test file's bad cells are its own
    text = _text_columns(rows, header, cols, columns, file, hline, dialect) if src.test_file is None else []
    problems = list(text)
    if known:
        problems += _width_problems_as_hinted(src, columns, text, rows, train, header, dialect, ids)
    if len(rows) * columns.width > MAX_ENCODED:
        return columns, None, problems + [Problem(
            f"{len(rows):,} rows of {columns.width:,} values each (one-hot encoded) are more than {MAX_ENCODED:,} "
            "values", src.input_loc(), "encode the columns with many categories as index, or merge rare "
            "categories")], []  # fmt: skip
    unseen = "is in validation rows only: the categories are those of the training rows, so the model never learns it"
    if src.test_file is not None:
        unseen = "is not among the categories of the training rows, which the model learned"
    skip = {p.loc.col - 1 for p in text if p.loc is not None}
    read = Columns(tuple(f for f, c in zip(columns.features, cols) if c not in skip), columns.categorical,
                   columns.missing) if skip else columns  # fmt: skip
    x, cells = encode_rows(rows, header, [c for c in cols if c not in skip], read, file, NONFINITE_HINT, unseen,
                           dialect, served=src.test_file is not None)  # fmt: skip
    return columns, x, problems, cells


def _width_problems_as_hinted(src: _Source, columns: Columns, text: list[Problem], rows: list[tuple[int, list[str]]],
                              train: np.ndarray, header: list[str], dialect: Dialect, ids: tuple[str, ...]
                              ) -> list[Problem]:  # fmt: skip
    """The input's width and dtype checked as they will be once each column of text (`text`, its problems) is made
    categorical as its hint says (one_hot, the training rows' values): the width to set is the one after that fix."""
    named = [header[p.loc.col - 1] for p in text if p.loc is not None]
    hinted = {f: ("one_hot", _vocabulary(rows, train, header.index(f), len(header), dialect)) for f in named}
    try:
        _check_columns(src, replace(columns, categorical={**columns.categorical, **hinted}),
                       [f for f in columns.features if f in ids])  # fmt: skip
    except SpecError as e:
        said = f" (with {', '.join(repr(_quoted(f)) for f in named)} one-hot encoded, as data.categorical would " \
            "encode it)" if named else ""  # fmt: skip
        return [replace(p, message=p.message + said) for p in e.problems]
    return []


def _csv_target(src: _Source, rows: list[tuple[int, list[str]]], header: list[str], col: int, inputs_read: bool
                ) -> tuple[_Target | None, np.ndarray, list[Problem]]:  # fmt: skip
    """(what the target column is, its values, the problems with its cells) of the whole rows (those with every
    cell); no _Target when words among numbers leave the task itself unknown. Whole-number targets too large for
    float32 are checked once the inputs could be read (`inputs_read`), as before."""
    file = src.file()
    what = f"the values of column '{_quoted(header[col])}' in {file.name}"
    if src.data["task"] is None and (stray := _stray_text_problems(rows, header, col, file)):
        return None, np.zeros(0), stray  # NOTE: typos or class names: the task is unknown
    task = _csv_task(src, rows, header, col)
    if task == "regress":
        (y, problems), names = _csv_numbers(rows, header, [col], file), None  # (N, 1)
        problems = problems or (_big_target_problems(rows, header, col, file) if inputs_read else [])
    else:
        y, names, problems = _csv_labels(rows, header, col, file, src.classes)
        what = f"the classes in column '{_quoted(header[col])}' of {file.name}"

    def label_at(i: int) -> tuple[str, Location]:
        return f"row {rows[i][0]}, column '{_quoted(header[col])}'", Location(str(file), rows[i][0], col + 1)

    target = _Target(task, what, label_at if names is None else None, names, settable=True, per_row=True)
    return target, y, problems


def _csv_task(src: _Source, rows: list[tuple[int, list[str]]], header: list[str], col: int) -> str:
    """data.task, else classify for a target column holding text (or a test file of a classifier), else regress."""
    texts = any(len(c) == len(header) and c[col].strip() and not is_number(c[col].strip()) for _, c in rows)
    return src.data["task"] or ("classify" if texts or src.classes else "regress")


def _csv_strata(src: _Source, rows: list[tuple[int, list[str]]], header: list[str], col: int, file: Path
                ) -> np.ndarray | None:  # fmt: skip
    """The class of each row, for a stratified split before the rows are encoded (the categorical vocabularies are the
    training rows'): the same classes _split stratifies by later, so both draw the same split. None for a regression
    target, or rows with problems (reported once the rows are read)."""
    if _csv_task(src, rows, header, col) != "classify":
        return None
    labels, _, problems = _csv_labels(rows, header, col, file, src.classes)
    return labels.astype(np.float64) if not problems and len(labels) == len(rows) else None


def input_columns(spec: ValidSpec, saved: Columns | None, header: list[str], hline: int, file: Path
                  ) -> tuple[Columns, list[int]]:  # fmt: skip
    """The columns of a CSV input to `run` that the model reads, and where they are: the columns saved with the
    weights (with their vocabularies); without them (weights another tool wrote), a csv spec's data.features, or every
    column but its target; a model trained on other data reads every column, in order."""
    data = spec.values.get("data") or {}
    if saved is None and data.get("source") == "csv" and data.get("categorical"):
        raise SpecError.at(None, "the weights hold no vocabulary for the categorical columns (data.categorical), so "
                           "their values cannot be encoded", "pass weights that `specgrad train` wrote")  # fmt: skip
    if saved is None and data.get("source") != "csv":
        if all(is_number(h) for h in header):
            raise SpecError.at(Location(str(file), hline, 1), f"the first row of {file.name} holds numbers: a CSV "
                               "input needs a header row naming the columns", "add a header row")  # fmt: skip
        return Columns(tuple(header)), list(range(len(header)))
    columns = saved or Columns(tuple(data.get("features") or [h for h in header if h != data.get("target")]))
    missing = [f for f in columns.features if f not in header]
    if missing:
        raise SpecError.at(Location(str(file), hline, 1), f"the model reads the columns "
                           f"{', '.join(_quoted(f) for f in columns.features[:20])}, but {file.name} has no column "
                           f"{', '.join(repr(_quoted(m)) for m in missing[:20])}",
                           _column_hint(missing[0], header))  # fmt: skip
    return columns, [header.index(f) for f in columns.features]


@dataclass(frozen=True)
class ColumnKind:
    """What a csv column holds, read from its cells (every row, missing cells aside): "numeric", "categorical" (text
    whose values repeat), "text" (free text: most of its values are written once), "binary" (two distinct values),
    "id" (a distinct value in every row: text, or whole numbers counting up), "empty" (no value at all) or "target";
    `few`: whole numbers with few distinct values (a code, or a count)."""

    kind: str
    distinct: int
    text: bool = False
    few: bool = False


def column_kinds(rows: list[tuple[int, list[str]]], header: list[str], target: str | None, dialect: Dialect
                 ) -> dict[str, ColumnKind]:  # fmt: skip
    """Each column's kind (see ColumnKind), in header order."""
    whole = [cells for _, cells in rows if len(cells) == len(header)]  # NOTE: ragged rows are reported by the reader
    ret = {}
    for c, name in enumerate(header):
        cells = [s for cells in whole if not dialect.is_missing(s := cells[c].strip())]
        ret[name] = ColumnKind("target", len(set(cells))) if name == target else _kind(cells, len(whole), dialect,
                                                                                         name)  # fmt: skip
    return ret


def _is_id_name(name: str) -> bool:
    """A header that names an identifier: id, ID, customer_id, orderId, key, row, index, no, number."""
    words = re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", name).lower())
    return bool(words) and words[-1] in ("id", "key", "row", "index", "no", "number", "uuid", "guid")


def _kind(cells: list[str], rows: int, dialect: Dialect, name: str = "") -> ColumnKind:
    """A feature column's kind from its cells (none missing) of `rows` rows. A column of more text than numbers is
    text, as _text_columns says."""
    counts = Counter(cells)
    distinct = set(counts)
    unique = len(distinct) == len(cells) == rows >= MIN_ID_ROWS
    numbers = [float(t) for s in cells if is_number(t := _decimal_point(s, dialect))]
    if not cells:
        return ColumnKind("empty", 0)
    if 2 * (len(cells) - len(numbers)) > len(cells):
        once = sum(n == 1 for n in counts.values())
        kind = "id" if unique else "binary" if len(distinct) == 2 else "text" if 2 * once > len(distinct) else \
            "categorical"  # fmt: skip
        return ColumnKind(kind, len(distinct), True)
    values = set(numbers)
    whole = len(numbers) == len(cells) and all(math.isfinite(v) and v.is_integer() for v in numbers)
    # NOTE: distinct whole numbers in every row are an ID when they are nearly consecutive (a numbering, perhaps with
    # rows deleted) or the header says so; other distinct whole numbers (prices, counts) stay numbers
    dense = whole and unique and len(values) == rows and max(values) - min(values) < ID_SPREAD * rows
    if dense or (whole and unique and len(values) == rows and _is_id_name(name)):
        return ColumnKind("id", rows)
    if len(values) == 2:
        return ColumnKind("binary", 2)
    return ColumnKind("numeric", len(values), few=whole and 3 <= len(values) <= min(FEW_WHOLE, rows // 5))


def column_uses(kinds: dict[str, ColumnKind], columns: Columns, normalized: bool) -> list[tuple[str, str, str]]:
    """(column, kind, how it becomes inputs) of every column of a csv, for validate."""
    ret = []
    for name, k in kinds.items():
        kind = k.kind + (" (text)" if k.text and k.kind == "binary" else "")
        ret.append((name, kind, _use(name, k, columns, normalized)))
    return ret


def _use(name: str, k: ColumnKind, columns: Columns, normalized: bool) -> str:
    """How one column becomes inputs, in words."""
    if k.kind == "target":
        return "the target"
    if name not in columns.features:
        return LEFT_OUT.get(k.kind, "left out (not in data.features)")
    if (enc := columns.encoding(name)) is not None:
        n = len(columns.categorical[name][1])
        said = f"one_hot, {_count(n, 'value')}" if enc == "one_hot" else f"index, 1 code of {n}"
    else:
        said = "1 value" + (", standardized" if normalized else "")
        said += f"; {k.distinct} whole values: to one-hot them, data.categorical: {{{name}: one_hot}}" if k.few else ""
    return said + ("; it looks like an ID (a distinct value in every row): leave it out of data.features"
                   if k.kind == "id" else "")  # fmt: skip


def _auto_columns(src: _Source, header: list[str], kinds: dict[str, ColumnKind]) -> dict[str, Any]:
    """data.features and data.categorical as input.shape: auto chooses them (what the resolved spec then writes):
    data.features as given, else every column but the target and the LEFT_OUT kinds (a column data.categorical names
    is kept whatever its kind: the user says it holds categories); a text column one_hot, unless data.categorical
    gives it an encoding."""
    given = src.data["categorical"] or {}
    kept = [h for h in header if h in kinds and kinds[h].kind != "target" and (h in given or kinds[h].kind not in
                                                                               LEFT_OUT)]  # fmt: skip
    features = src.data["features"] or kept
    text = {f: "one_hot" for f in features if f in kinds and kinds[f].text and f not in given}
    ret: dict[str, Any] = {} if src.data["features"] else {"features": features}
    return {**ret, "categorical": {**given, **text}} if text else ret


def _check_fills_used(src: _Source, kinds: dict[str, ColumnKind]) -> None:
    """A column data.missing_columns fills must be one auto feeds the model: else the resolved spec would fill a
    column it leaves out (which validate refuses)."""
    node = src.node("data", "missing_columns")
    unused = [c for c in src.data.get("missing_columns") or {} if c in kinds and c not in src.data["features"]]
    if unused:
        keys = (node.key_locs or {}) if node is not None and node.kind == "map" else {}
        c = unused[0]
        why = LEFT_OUT.get(kinds[c].kind, "not a feature").removeprefix("left out: ")
        raise SpecError.at(keys.get(c) or src.near("missing_columns"), f"data.missing_columns fills the column "
                           f"'{_quoted(c)}', which input.shape: auto leaves out ({why})", "remove it from "
                           "missing_columns, or list the columns to use in data.features")  # fmt: skip


def _csv_widths(src: _Source, shape: bool) -> DataWidths:
    """The encoded width of the csv's columns (the training rows' categories; with `shape`, input.shape: auto, the
    columns _auto_columns chooses), and the output's width: one per class, or 1 (a regression, binary_cross_entropy's
    one logit)."""
    file = src.file()
    hline, header, rows, dialect = csv_table(_read_bytes(src, file), file, dialect_of(src.data))
    kinds = column_kinds(rows, header, src.data["target"], dialect)
    if shape:
        src = replace(src, data={**src.data, **_auto_columns(src, header, kinds)})
        _check_fills_used(src, kinds)
    if not src.data["features"] and shape:
        raise SpecError.at(src.input_loc(), f"input.shape is auto, but {file.name} has no column to feed the model: "
                           "every column but the target is an ID, free text or empty", "list the columns to use in "
                           "data.features")  # fmt: skip
    features, cols = _csv_columns(src, header, hline, file)
    strategies = _strategies(src, features)
    rows, _ = _left_out(rows, header, cols, features, strategies, dialect)
    if not rows:  # NOTE: load_data says which rows are left out, and why
        return DataWidths((len(features),), 1)
    rows = _decimal_targets(rows, cols[-1], dialect, len(header))
    train, _ = _indices(src, len(rows), _csv_strata(src, rows, header, cols[-1], file))
    columns = _new_columns(src, rows, train, header, features, cols, strategies, dialect)
    left = [h for h in header if kinds[h].kind in LEFT_OUT and h not in features]
    why = columns.explain() + (f"; left out: {', '.join(_quoted(h) for h in left)}" if left else "")
    out, out_why = _csv_out(src, rows, header, cols[-1], file)
    chosen = {k: src.data[k] for k in ("features", "categorical") if src.data[k] != (src.spec.values["data"][k])}
    return DataWidths((columns.width,), out, chosen, {"shape": why, "out": out_why})


def _csv_out(src: _Source, rows: list[tuple[int, list[str]]], header: list[str], col: int, file: Path
             ) -> tuple[int, str]:  # fmt: skip
    """The output's width for a csv's target column, and why."""
    if src.loss == "binary_cross_entropy":
        return 1, "binary_cross_entropy: one logit"
    if _csv_task(src, rows, header, col) == "regress":
        return 1, f"one number to predict, column '{_quoted(header[col])}'"
    labels, names, problems = _csv_labels(rows, header, col, file)
    if names is not None:
        return len(names), f"{_count(len(names), 'class')} in column '{_quoted(header[col])}'"
    whole = [int(v) for v in labels.tolist() if isinstance(v, int) or float(v).is_integer()]
    if problems or not whole or min(whole) < 0 or max(whole) >= MAX_CLASSES:
        return 1, "labels load_data reports"  # NOTE: the labels' problems are load_data's, said once
    return max(whole) + 1, f"labels 0 to {max(whole)} in column '{_quoted(header[col])}'"


CSV_KEYS = ("path", "test_path", "features", "categorical", "task", "delimiter", "decimal", "missing_values", "missing",
            "missing_columns", "split_seed", "class_names")  # fmt: skip
DEFS = (SourceDef("csv", _load_csv, CSV_KEYS, widths=_csv_widths),)
