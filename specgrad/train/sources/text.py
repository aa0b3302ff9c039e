"""The text source: a character model's examples from a text file (data.path) or a bundled corpus (data.corpus).

Text examples are windows of `context` characters (x) and the same window shifted by one character (y); windows start
every context // 2 characters, so a small text gives twice the examples of non-overlapping windows. The last
valid_split of the text (by position) is the validation text, so no window spans both splits. Characters are their
code points, checked against the model's embedding. Imports numpy, specgrad.datasets and sources.base and .split.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from specgrad.datasets import load_text
from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.train.sources.base import MAX_PROBLEMS, Dataset, SourceDef, _decode, _read_bytes, _Source, _vocab
from specgrad.train.sources.split import _check_enough, _loss_problem, _Target

MAX_TEXT_CHARS = 64_000_000  # NOTE: a text source's windows take 16 bytes per character (x and y, int32, overlapping)


def _check_language(src: _Source, codes: np.ndarray, what: str) -> None:
    """cross_entropy, and one output value per character code at every position."""
    target = _Target("language", what)
    problem = _loss_problem(src, target)
    if problem is not None:
        raise SpecError(problem)
    out, loc = src.output()
    context = src.data["context"]
    if tuple(out[:-1]) != (context,):
        raise SpecError.at(loc, f"the model's output {list(out)} does not fit {what}: the output needs shape "
                           f"[{context}, <characters>] (scores of every character at every position)")  # fmt: skip
    top = int(codes.max()) if len(codes) else 0
    if top >= out[-1]:
        raise SpecError.at(loc, f"the model's output has {out[-1]} values per position, one per character code, but "
                           f"{what} hold the character {chr(top)!r} (code {top})",
                           f"set the out of this last layer to at least {top + 1} (the embedding's vocab)")  # fmt: skip


def _line_col(text: str, i: int) -> tuple[int, int]:
    """1-based line and column (in characters) of text[i]."""
    return text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i)


def _text(src: _Source) -> tuple[str, str]:
    """(the text, the file name used in locations)."""
    if src.data["path"] is not None and src.data["corpus"] is not None:
        raise SpecError.at(src.near("corpus"), "data has both path and corpus: give one of them")
    if src.data["corpus"] is not None and src.test_file is None:
        return load_text(src.data["corpus"]), f"{src.data['corpus']} (bundled)"
    file = src.file()
    raw = _read_bytes(src, file)
    if len(raw) > 4 * MAX_TEXT_CHARS or len(text := _decode(raw, file)) > MAX_TEXT_CHARS:  # NOTE: 4 bytes a character
        raise SpecError.at(src.path_loc(file), f"{file.name} has more than {MAX_TEXT_CHARS:,} characters, more than "
                           "a text source trains on (its examples take 16 bytes of memory per character)",
                           "use a shorter text")  # fmt: skip
    return text.replace("\r\n", "\n").replace("\r", "\n"), str(file)


def _check_vocab(text: str, codes: np.ndarray, file: str, vocab: int, from_model: bool) -> None:
    """Every character must be a token the model knows: one problem per distinct character, at its first place."""
    bad = np.nonzero(codes >= vocab)[0]
    if len(bad) == 0:
        return
    chars, first = np.unique(codes[bad], return_index=True)
    problems = []
    for code, i in sorted(zip(chars.tolist(), bad[first].tolist()), key=lambda t: t[1])[:MAX_PROBLEMS]:
        count = int((codes[bad] == code).sum())
        raise_it = f", or raise the embedding's vocab (now {vocab}) to at least {code + 1}" if from_model else ""
        problems.append(Problem(f"the character '{excerpt(chr(code))}' (U+{code:04X}) is outside the model's {vocab} "
                                f"characters (codes 0..{vocab - 1}); it appears {count} time{'s' * (count > 1)}",
                                Location(file, *_line_col(text, i)), f"remove or replace it{raise_it}"))  # fmt: skip
    if len(chars) > MAX_PROBLEMS:
        problems.append(Problem(f"... and {len(chars) - MAX_PROBLEMS} more characters outside the vocabulary; the "
                                f"largest code in the text is {int(chars[-1])}"))  # fmt: skip
    raise SpecError(problems)


def _windows(codes: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): windows of `context` codes every context // 2 codes, and the same windows shifted by one."""
    if len(codes) < context + 1:
        return np.zeros((0, context), np.int32), np.zeros((0, context), np.int32)
    w = np.lib.stride_tricks.sliding_window_view(codes, context + 1)[:: max(1, context // 2)]  # (W, context + 1)
    return np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:])


def _load_text(src: _Source) -> Dataset:
    context = src.data["context"]
    if src.shape != (context,):
        raise SpecError.at(src.near("context"), f"data.context is {context}, but the input '{src.name}' has shape "
                           f"{list(src.shape)}", f"set the input's shape to [{context}]")  # fmt: skip
    text, file = _text(src)
    codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.int32)
    vocab, from_model = _vocab(src)
    _check_vocab(text, codes, file, vocab, from_model)
    vs, ts = src.data["valid_split"], src.data["test_split"]
    # NOTE: by position: training text, then validation, then test, so no window spans two parts (a test file is
    # all test text)
    test_cut = 0 if src.test_file is not None else len(codes) - (round(len(codes) * ts) if ts > 0 else 0)
    cut = test_cut - (round(len(codes) * vs) if vs > 0 and src.test_file is None else 0)
    held = codes[test_cut:] if src.held == "test" else codes[cut:test_cut]
    (x_train, y_train), (x_valid, y_valid) = _windows(codes[:cut], context), _windows(held, context)
    _check_language(src, codes, f"the characters of {Path(file).name}")
    ds = Dataset(x_train, y_train, x_valid, y_valid, "language", vocab,
                 test_examples=len(_windows(codes[test_cut:], context)[0]))  # fmt: skip
    what = f"the {len(codes)} characters of {file} with context {context} and valid_split {vs}"
    _check_enough(src, ds, src.near("context"), what)
    return ds


DEFS = (SourceDef("text", _load_text, ("path", "test_path", "corpus", "context"), targets=(None,), normalizes=False),)
