"""The split and the data contract every reader's examples pass: shuffled (or stratified) training, validation and test
indices from data.split_seed (else the spec's seed), and the checks of data the model cannot learn from as written
(output width vs classes, loss vs task, labels out of range, too few examples), collected and raised together. Imports
numpy, specgrad.datasets, modelspec (errors, validate) and sources.base.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specgrad.datasets import split
from specgrad.modelspec.errors import Location, Problem, SpecError
from specgrad.modelspec.validate import REGRESSION_LOSSES, TRAIN, ValidSpec
from specgrad.train.sources.base import (
    MAX_CLASSES,
    MAX_PROBLEMS,
    Dataset,
    _context,
    _count,
    _quoted,
    _raise_all,
    _shown,
    _shown_names,
    _Source,
)

MAX_LABEL = 2**31 - 1  # NOTE: labels are int32 on the device; a larger one must be an error, never a wrap


def _indices(src: _Source, n: int, labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled (train, held-out) indices, drawn from data.split_seed (else the spec's seed): the held-out part is the
    validation examples, or the test examples when src.held is "test". valid_split 0 keeps every example not held for
    testing for training. The test examples come from the end of the shuffled order, so the validation examples are
    the same with a test split or without. With class `labels` (and data.stratify) each class keeps its share."""
    if src.test_file is not None:
        return np.zeros(0, dtype=np.int64), np.arange(n)
    valid_split, test_split, seed = src.data["valid_split"], src.data["test_split"], split_seed(src.spec)
    if labels is not None and is_stratified(src.spec):
        train, valid, test = stratified_split(labels, valid_split, test_split, seed)
        return train, (test if src.held == "test" else valid)
    if valid_split == 0:
        train, valid = np.random.default_rng(seed).permutation(n), np.zeros(0, dtype=np.int64)
    else:
        train, valid = split(n, valid_split, seed)
    kept = len(train) - _test_count(n, test_split, len(train))
    return train[:kept], (train[kept:] if src.held == "test" else valid)


def split_seed(spec: ValidSpec) -> int:
    """The seed of the validation and test split: data.split_seed, else the spec's seed (as before split_seed was)."""
    given = (spec.values.get("data") or {}).get("split_seed")
    return int(given if given is not None else spec.values["seed"])


# NOTE: run_folder.RESOLVED, which imports this module: a run folder's spec as trained
RUN_SPEC = "spec.resolved.yaml"


def is_stratified(spec: ValidSpec) -> bool:
    """data.stratify, except for a run folder written before the key existed: its spec.resolved.yaml leaves the key out
    (newer ones always write it: run_folder.resolved_spec_text) and its examples were split at random, so a resume,
    evaluate or new run of it splits them at random again."""
    return bool((spec.values.get("data") or {}).get("stratify")) and not is_random_split_run(spec)


def is_random_split_run(spec: ValidSpec) -> bool:
    """A run folder's spec.resolved.yaml without data.stratify: written before stratified splits existed."""
    return Path(spec.path).name == RUN_SPEC and spec.node("data") is not None and spec.node("data", "stratify") is None


def stratified_split(labels: np.ndarray, valid_split: float, test_split: float, seed: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(train, valid, test) indices, each in the seed's shuffled order, with every class's share of the valid and test
    examples within one example of its share of all of them; the totals are those of a random split. A class's first
    examples (in that order) validate and its last ones test, so validation is the same with a test split or without.
    The result depends on which examples share a class, never on how classes are numbered."""
    n = len(labels)
    order = np.random.default_rng(seed).permutation(n)
    _, first, strata = np.unique(labels[order], return_index=True, return_inverse=True)
    strata = np.argsort(np.argsort(first))[strata.reshape(-1)]  # NOTE: classes renumbered by first appearance
    counts = np.bincount(strata)
    n_valid = max(1, round(n * valid_split)) if valid_split > 0 else 0
    valid_k = _shares(counts, n_valid, counts)
    test_k = _shares(counts, _test_count(n, test_split, n - n_valid), counts - valid_k)
    by_class = np.argsort(strata, kind="stable")
    rank = np.empty(n, dtype=np.int64)  # position of each example among its class's, in the shuffled order
    rank[by_class] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    valid = rank < valid_k[strata]
    test = rank >= (counts - test_k)[strata]
    return order[~valid & ~test], order[valid], order[test]


def _shares(counts: np.ndarray, k: int, room: np.ndarray) -> np.ndarray:
    """How many examples of each class (of `counts`) k held-out examples take, at most `room` each: each class its
    exact share of k rounded down, and the rest one each to the largest remainders (classes that keep a training
    example after it first; ties to the class seen first), so each class is within one example of its share."""
    exact = counts * k / max(int(counts.sum()), 1)
    got = np.minimum(np.floor(exact).astype(np.int64), room)
    while got.sum() < k and (got < room).any():
        for j in sorted(range(len(counts)), key=lambda j: (bool(got[j] + 1 >= room[j]), -(exact[j] - got[j]), j)):
            if got.sum() < k and got[j] < room[j]:
                got[j] += 1
    return got


def _test_count(n: int, test_split: float, most: int) -> int:
    """How many of n examples test_split holds out (at least one when it is above 0), of the `most` not validating."""
    return min(most, max(1, round(n * test_split))) if test_split > 0 else 0


def _split(src: _Source, x: np.ndarray, y: np.ndarray, target: _Target, where: Location | None, what: str,
           found: list[Problem] | None = None) -> Dataset:  # fmt: skip
    """Examples checked against the model (the data contract), then split; `what` says where the examples come from,
    `where` is their place. Every problem is raised at once: those of the contract, of the split, and `found`, those
    the loader found before (a loader goes on past a problem where the later checks still mean something)."""
    y, num_classes, problems = _contract(src, y, target)
    if src.test_file is None:
        problems += _class_name_problems(src, target, num_classes)
    train, valid = _indices(src, len(x), y if target.task == "classify" and y.ndim == 1 else None)
    names = (src.data["class_names"] or src.classes or target.names or [str(i) for i in range(num_classes)]) \
        if target.task == "classify" and num_classes is not None else None  # fmt: skip
    ds = Dataset(x[train], y[train], x[valid], y[valid], target.task, num_classes, class_names=names,
                 test_examples=_test_count(len(x), src.data["test_split"], len(x)))  # fmt: skip
    _raise_all([*(found or []), *problems, *_enough_problems(src, ds, where, what)], src.spec.path)
    return ds


def _class_name_problems(src: _Source, target: _Target, num_classes: int | None) -> list[Problem]:
    """data.class_names names whole-number labels: one distinct, non-empty name per class of the model."""
    names = src.data["class_names"]
    if names is None:
        return []
    loc, hint = src.near("class_names"), "remove data.class_names"
    if target.task != "classify":
        return [Problem(f"data.class_names names class labels, but {target.what} are numbers to predict (task "
                        f"{target.task})", loc, hint)]  # fmt: skip
    if target.names is not None:
        return [Problem(f"data.class_names names whole-number labels, but {target.what} are named by the data "
                        f"already ({_shown_names(target.names)})", loc,
                        hint + ": the data's names are used")]  # fmt: skip
    if len(names) != num_classes:
        return [Problem(f"data.class_names has {_count(len(names), 'name')}, but the model has "
                        f"{_count(num_classes or 0, 'class')} (labels 0 to {(num_classes or 1) - 1})", loc,
                        f"give {num_classes} names, the name of label k at position k")]  # fmt: skip
    problems = [Problem(f"data.class_names: name {k} (of label {k}) is empty", loc, "give every class a name")
                for k, n in enumerate(names) if not n.strip()]  # fmt: skip
    twice = sorted({n for n in names if names.count(n) > 1})
    problems += [Problem(f"data.class_names names '{_quoted(n)}' more than once", loc, "give each class its own name")
                 for n in twice]  # fmt: skip
    return problems


@dataclass(frozen=True)
class _Target:
    """What a loader knows of its targets: the task, words for messages, and (for class labels from a file) where
    example i's label is written, as ('row 5, column 'y'' or 'y[4] in d.npz', its location)."""

    task: str  # "classify", "regress" or "language"
    what: str  # e.g. "the values of column 'price' in houses.csv"
    label_at: Callable[[int], tuple[str, Location]] | None = None
    names: list[str] | None = None  # class names of text labels (y holds their indices)
    settable: bool = False  # data.task can change the task (csv and npz targets)
    per_row: bool = False  # label_at gives each example its own place (a csv row), so each is reported


def _check_contract(src: _Source, y: np.ndarray, target: _Target) -> tuple[np.ndarray, int | None]:
    """(y as the trainer takes it, the number of classes); every disagreement between data, loss and model raised."""
    y, num_classes, problems = _contract(src, y, target)
    if problems:
        raise SpecError(problems)
    return y, num_classes


def _contract(src: _Source, y: np.ndarray, target: _Target) -> tuple[np.ndarray, int | None, list[Problem]]:
    """(y as the trainer takes it, the number of classes (None when a label cannot be one), every disagreement
    between data, loss and model). A loss that does not fit the targets stops no other check: the output's width is
    checked for the loss that fits them (cross_entropy's one value per class)."""
    problem = _loss_problem(src, target)
    problems = [problem] if problem is not None else []
    if target.task == "regress":
        return y.astype(np.float32), None, problems + _regress_problems(src, y, target)
    # NOTE: float64 is exact for every label that can be valid, and orders the rest right; y itself (an integer array,
    # or the Python ints of a csv column) gives the exact value of a bad label for its message
    labels = y.astype(np.float64)
    # NOTE: binary_cross_entropy's one logit tells two classes apart
    width = 2 if src.loss == "binary_cross_entropy" else src.output()[0][-1]
    if bad := _label_problems(src, labels, y, target, width if problem is None else MAX_LABEL + 1):
        return labels, None, problems + bad
    if problem is not None and len(labels) and labels.max() >= MAX_CLASSES:  # NOTE: numbers to regress, not classes
        return labels, None, problems
    # NOTE: a test file need not hold every class, or two: its labels only have to be ones the model gives
    num_classes = width if src.test_file is not None else int(labels.max()) + 1 if len(labels) else 0
    problems += (src.test_file is None and _class_count_problems(src, labels, target)) or \
        _width_problems(src, labels, target, num_classes)  # fmt: skip
    return labels.astype(np.int32), num_classes, problems


def _loss_problem(src: _Source, target: _Target) -> Problem | None:
    loss, want = src.loss, "mse" if target.task == "regress" else "cross_entropy"
    if loss == want or (loss in REGRESSION_LOSSES) == (target.task == "regress") and target.task != "language":
        return None
    loc = src.loss_loc() or src.near("target" if src.given("target") else "source")
    default = " (the default)" if src.node("train", "loss") is None and loss == TRAIN.fields["loss"].default else ""
    if target.task == "regress":
        hint = "use loss: mse" + ("; if the numbers are class labels 0, 1, 2, ..., set data.task: classify"
                                  if target.settable else "")  # fmt: skip
        return Problem(f"train.loss is {loss}{default}, which learns class labels, but {target.what} are "
                       "numbers to predict (a regression)", loc, hint)  # fmt: skip
    kind = "class labels" if target.task == "classify" else "next characters"
    hint = "use loss: cross_entropy" + ("; to predict the numbers themselves, set data.task: regress"
                                        if target.settable and target.names is None else "")  # fmt: skip
    return Problem(f"train.loss is {loss}, but {target.what} are {kind}, which cross_entropy learns", loc, hint)


def _regress_problems(src: _Source, y: np.ndarray, target: _Target) -> list[Problem]:
    """The output must hold one number per target number."""
    out, loc = src.output()
    n, per = math.prod(out), math.prod(y.shape[1:])
    if n == per:
        return []
    fix = f"set the last layer's out to {per}" if len(out) == 1 and y.ndim == 2 else f"make the output shape " \
          f"{list(y.shape[1:])}"  # fmt: skip
    return [Problem(f"the model's output {list(out)} holds {n} values per example, but each target holds {per} "
                    f"({target.what})", loc, fix)]  # fmt: skip


def _label_problems(src: _Source, labels: np.ndarray, exact: np.ndarray, target: _Target, limit: int
                    ) -> list[Problem]:  # fmt: skip
    """Every label must be a whole number in [0, limit): limit is the model's output width (or the int32 range).
    Labels in a csv are reported row by row; those of an array once per kind of problem, with a count."""
    if target.label_at is None:
        return []
    flat, exact = labels.reshape(len(labels), -1), exact.reshape(len(exact), -1)  # (N, labels per example)
    whole = flat == np.round(flat)
    cap = max(limit, MAX_CLASSES if limit <= MAX_LABEL else MAX_LABEL + 1)  # NOTE: past cap, no model could fit it
    fits = whole & (flat < cap)
    top = int(flat[fits].max()) if fits.any() else 0
    out_line = src.output()[1].line
    classes = f"the model's {_count(limit, 'class')} (0..{limit - 1})" if limit <= MAX_LABEL else "int32 class labels"
    kinds = [  # (bad labels, the message after "<name> is <value>", the hint)
        (~whole, ", not a whole number, so it cannot be a class label",
         f"to predict the numbers themselves, {src.regress_fix}"),
        (whole & (flat < 0), ": class labels are 0 or more", "number the classes 0, 1, 2, ..."),
        (whole & (flat >= limit) & (flat < cap), f", out of range of {classes}: its output has one value per class",
         f"binary_cross_entropy learns two classes, 0 and 1: the labels go up to {top}, so use loss: cross_entropy "
         f"and set the out of the last layer (line {out_line}) to {top + 1}, or correct the label"
         if src.loss == "binary_cross_entropy" else
         f"the labels go up to {top}: set the out of the last layer (line {out_line}) to {top + 1}, or correct the "
         "label"),
        (whole & (flat >= cap), f", too large: out of range of {classes}",
         f"correct the label: classes are numbered 0, 1, 2, ..., and a model has at most {MAX_CLASSES} of them"
         if limit <= MAX_LABEL else f"class labels are at most {MAX_LABEL}: number the classes 0, 1, 2, ..."),
    ]  # fmt: skip
    problems: list[tuple[int, Problem]] = []
    total = 0
    for bad, message, hint in kinds:
        rows = np.nonzero(bad.any(axis=1))[0].tolist()
        total += len(rows) if target.per_row else min(1, len(rows))
        for n, i in enumerate(rows[: MAX_PROBLEMS if target.per_row else 1]):
            name, loc = target.label_at(i)
            more = f" (and {_count(len(rows) - 1, 'more example')} like it)" if (
                not target.per_row and len(rows) > 1) else ""  # fmt: skip
            shown = _shown(exact[i][bad[i]][0])
            problems.append((i, Problem(f"{name} is {shown}{message}{more}", loc, hint if n == 0 else None)))
    ret = [p for _, p in sorted(problems, key=lambda t: t[0])][:MAX_PROBLEMS]
    if total > len(ret):
        ret.append(Problem(f"... and {total - len(ret)} more rows with labels that cannot be used"))
    return ret


def _class_count_problems(src: _Source, labels: np.ndarray, target: _Target) -> list[Problem]:
    """A classifier needs examples of at least two classes: with one, it has nothing to tell apart."""
    present = np.unique(labels)
    if len(present) >= 2:
        return []
    only = _quoted(target.names[int(present[0])]) if target.names else str(int(present[0])) if len(present) else \
        "none"  # fmt: skip
    near = src.near("target" if src.given("target") else "source")
    loc = target.label_at(0)[1] if target.label_at is not None else near
    regress = f"; to predict the numbers themselves, {src.regress_fix}"
    hint = "add examples of the other classes" + (regress if target.settable and target.names is None else "")
    message = f"{target.what} hold only one class ({only}): a classifier needs examples of at least 2 classes"
    return [Problem(message, loc, hint)]


def _width_problems(src: _Source, labels: np.ndarray, target: _Target, num_classes: int) -> list[Problem]:
    """One output value per class, and one set of class scores per label."""
    out, loc = src.output()
    if tuple(out[:-1]) != labels.shape[1:]:
        want = [*labels.shape[1:], out[-1]]
        return [Problem(f"the model's output {list(out)} does not fit {target.what}: the output needs shape {want} "
                        "(class scores on its last axis)", loc,
                        "flatten before the last layer" if len(out) > 1 else None)]  # fmt: skip
    if src.loss == "binary_cross_entropy":  # NOTE: one logit: the score of class 1 against class 0
        return [] if out[-1] == 1 else [Problem(
            f"the model's output has {_count(out[-1], 'value')} per example, but binary_cross_entropy learns two "
            "classes from one value (a logit: above 0 is the second class)", loc,
            "set the out of this last layer to 1, or use loss: cross_entropy (one value per class)")]  # fmt: skip
    if out[-1] == num_classes:
        return []
    names = target.names or [str(i) for i in range(num_classes)]
    shown = ", ".join(_quoted(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    message = f"the model's output has {_count(out[-1], 'value')} per example, one per class, but {target.what} " \
              f"hold {_count(num_classes, 'class')} ({shown})"  # fmt: skip
    return [Problem(message, loc, f"set the out of this last layer to {num_classes}")]


def _check_enough(src: _Source, ds: Dataset, where: Location | None, what: str) -> None:
    if problems := _enough_problems(src, ds, where, what):
        raise SpecError(problems)


def _enough_problems(src: _Source, ds: Dataset, where: Location | None, what: str) -> list[Problem]:
    """At least one full training batch, and a held-out example (validation, or test for evaluate) when the split
    asks for some: at the key that asks for them where the spec writes it, the examples' place (`where`) as
    context."""
    bs, ts = src.data["batch_size"], src.data["test_split"]
    if src.test_file is not None:
        if len(ds.x_valid):
            return []
        file = src.file()
        need = f" (a text of at least {src.data['context'] + 1} characters)" if ds.task == "language" else ""
        return [Problem(f"{file.name} holds no complete example{need}", Location(str(file), 1, 1),
                        "add examples to it")]  # fmt: skip
    problems = []
    if len(ds.x_train) < bs:
        splits = "data.valid_split" + (" or data.test_split" if ts > 0 else "")
        problems.append(Problem(f"batch_size {bs} is more than the training split has: {what} leave "
                                f"{len(ds.x_train)} training examples, and training uses full batches only"
                                f"{_context(src, 'batch_size', where)}", src.loc("batch_size") or where,
                                f"lower data.batch_size or {splits}, or add examples"))  # fmt: skip
    held, key = ("test", "test_split") if src.held == "test" else ("validation", "valid_split")
    if src.data[key] > 0 and len(ds.x_valid) == 0:
        problems.append(Problem(f"{what} leave no {held} examples{_context(src, key, where)}",
                                src.loc(key) or where, f"add examples, or set {key}: 0"))  # fmt: skip
    return problems
