"""How good a trained model is on examples: the figures `specgrad evaluate` reports, from outputs and targets as numpy
arrays (no Tensor graphs). Every figure is computed in float64 and is a plain Python number, so a report is JSON.

- classify: accuracy, top-k accuracy (k = 5, where there are more than 5 classes), per-class precision, recall, F1
  and support with the class names, their macro averages, the AUC of two classes, and the confusion matrix (rows: true
  class, columns: predicted class). One logit per example (binary_cross_entropy) is the two classes' scores [0, x].
  A precision with no prediction of the class, or a recall with no example of it, is None (null):
  there is nothing to divide, and 0 would claim the model got something wrong.
- regress: MAE, RMSE and R^2 per target column and over all of them, in the target's own units (the caller passes
  predictions and targets un-standardized).
- language: the mean cross-entropy per predicted token (in nats), its perplexity exp(loss), and the accuracy of the
  most likely token.

Imports numpy only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

TOP_K = 5  # NOTE: reported where there are more classes than this; with fewer, top-5 accuracy is always 1


def classification(logits: np.ndarray, labels: np.ndarray, class_names: list[str] | None = None) -> dict[str, Any]:
    """Figures for class scores `logits` (..., C) against integer `labels` (...), every position one example."""
    scores = two_class(np.asarray(logits, np.float64).reshape(-1, np.shape(logits)[-1]))
    truth = np.asarray(labels).reshape(-1).astype(np.int64)
    classes = scores.shape[1]
    _check_labels(truth, classes, len(scores))
    names = list(class_names) if class_names is not None else [str(i) for i in range(classes)]
    predicted = scores.argmax(1)
    confusion = np.zeros((classes, classes), np.int64)
    np.add.at(confusion, (truth, predicted), 1)
    hits, support, called = np.diag(confusion), confusion.sum(1), confusion.sum(0)
    per_class = []
    for c in range(classes):
        precision = _ratio(hits[c], called[c])
        recall = _ratio(hits[c], support[c])
        # NOTE: 2TP / (2TP + FP + FN): 0 for a class seen but never predicted, undefined only for one neither seen
        # nor predicted (precision and recall may each be undefined where F1 is not)
        f1 = _ratio(2 * hits[c], support[c] + called[c])
        per_class.append({"name": names[c], "precision": precision, "recall": recall, "f1": f1,
                          "support": int(support[c])})  # fmt: skip
    ret: dict[str, Any] = {"examples": len(truth), "accuracy": _ratio(int(hits.sum()), len(truth))}
    if classes > TOP_K:
        ret["top_k"] = {"k": TOP_K, "accuracy": top_k_accuracy(scores, truth, TOP_K)}
    if classes == 2:
        ret["auc"] = auc(scores[:, 1] - scores[:, 0], truth)
    ret["macro"] = {key: _mean([c[key] for c in per_class]) for key in ("precision", "recall", "f1")}
    ret["classes"] = per_class
    ret["confusion"] = confusion.tolist()
    return ret


def two_class(scores: np.ndarray) -> np.ndarray:
    """Scores (N, C) as they are; one logit x per example (binary_cross_entropy) as the two classes' scores [0, x],
    whose softmax is [1 - sigmoid(x), sigmoid(x)]."""
    return np.concatenate([np.zeros_like(scores), scores], 1) if scores.shape[1] == 1 else scores


def top_k_accuracy(scores: np.ndarray, truth: np.ndarray, k: int) -> float | None:
    """The share of examples whose label is among the k highest of their scores (N, C); 1 where k >= C."""
    if k >= scores.shape[1]:
        return _ratio(len(truth), len(truth))
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return _ratio(int((top == truth[:, None]).any(1).sum()), len(truth))


def auc(scores: np.ndarray, truth: np.ndarray) -> float | None:
    """The area under the ROC curve of `scores` (higher: class 1) against labels 0 and 1: the chance that an example
    of class 1 scores above one of class 0, ties counting half (the Mann-Whitney U over both counts, from average
    ranks); None without examples of both classes."""
    s, positive = np.asarray(scores, np.float64).reshape(-1), np.asarray(truth).reshape(-1) == 1
    pos, neg = int(positive.sum()), int((~positive).sum())
    if not pos or not neg:
        return None
    order = np.argsort(s, kind="stable")
    _, first, counts = np.unique(s[order], return_index=True, return_counts=True)
    ranks = np.empty(len(s), np.float64)
    ranks[order] = np.repeat(first + (counts + 1) / 2, counts)  # NOTE: 1-based, tied scores share their mean rank
    return float((ranks[positive].sum() - pos * (pos + 1) / 2) / (pos * neg))


def chosen(task: str, metrics: tuple[str, ...], out: np.ndarray, truth: np.ndarray,
           target_stats: dict[str, np.ndarray] | None = None) -> dict[str, float | None]:  # fmt: skip
    """The figures named in `metrics` (those of classification or regression, and top<k>) of outputs `out` against
    `truth`, as training reports them each epoch: regression outputs and targets standardized with `target_stats`
    are put back in the target's units first."""
    if task == "regress":
        pred, true = np.asarray(out, np.float64), np.asarray(truth, np.float64)
        if target_stats:
            std, mean = (np.asarray(target_stats[k], np.float64) for k in ("std", "mean"))
            pred, true = pred.reshape(true.shape) * std + mean, true * std + mean
        figures = regression(pred.reshape(true.shape), true)
        return {m: figures[m] for m in metrics if m in figures}
    report = classification(out, truth)
    figures = {"accuracy": report["accuracy"], **report["macro"], "auc": report.get("auc")}
    scores = two_class(np.asarray(out, np.float64).reshape(-1, np.shape(out)[-1]))
    labels = np.asarray(truth).reshape(-1).astype(np.int64)
    return {m: top_k_accuracy(scores, labels, int(m[3:])) if m.startswith("top") else figures.get(m) for m in metrics}


def regression(predictions: np.ndarray, targets: np.ndarray, names: list[str] | None = None) -> dict[str, Any]:
    """MAE, RMSE and R^2 of `predictions` against `targets` (both (N, ...), in the target's units), per target column
    (the values after the example axis, flattened) and over all of them."""
    pred = np.asarray(predictions, np.float64)
    true = np.asarray(targets, np.float64)
    if pred.shape != true.shape:
        raise ValueError(f"predictions of shape {pred.shape} do not match targets of shape {true.shape}")
    pred, true = pred.reshape(len(pred), -1), true.reshape(len(true), -1)
    names = list(names) if names is not None else [str(i) for i in range(true.shape[1])]
    columns = [{"name": name, **_errors(pred[:, i], true[:, i])} for i, name in enumerate(names)]
    return {"examples": len(true), **_errors(pred.reshape(-1), true.reshape(-1)), "targets": columns}


def language(logits: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Cross-entropy per token (nats), perplexity and next-token accuracy of `logits` (..., V) against `labels`."""
    scores = np.asarray(logits, np.float64).reshape(-1, np.shape(logits)[-1])
    truth = np.asarray(labels).reshape(-1).astype(np.int64)
    _check_labels(truth, scores.shape[1], len(scores))
    shifted = scores - scores.max(1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    loss = float(-log_probs[np.arange(len(truth)), truth].mean()) if len(truth) else None
    return {"tokens": len(truth), "loss": loss, "perplexity": None if loss is None else _exp(loss),
            "accuracy": _ratio(int((scores.argmax(1) == truth).sum()), len(truth))}  # fmt: skip


def _check_labels(truth: np.ndarray, classes: int, examples: int) -> None:
    if len(truth) != examples:
        raise ValueError(f"{len(truth)} labels for {examples} examples")
    if len(truth) and (truth.min() < 0 or truth.max() >= classes):
        raise ValueError(f"labels must lie in 0..{classes - 1}, got {int(truth.min())}..{int(truth.max())}")


def _errors(pred: np.ndarray, true: np.ndarray) -> dict[str, float | None]:
    if not len(true):
        return {"mae": None, "rmse": None, "r2": None}
    diff = pred - true
    spread = float(((true - true.mean()) ** 2).sum())
    # NOTE: R^2 of a constant target is undefined (nothing to explain): None, not -inf or nan
    r2 = 1.0 - float((diff**2).sum()) / spread if spread > 0 else None
    return {"mae": float(np.abs(diff).mean()), "rmse": math.sqrt(float((diff**2).mean())), "r2": r2}


def _ratio(num: float, den: float) -> float | None:
    return float(num) / float(den) if den else None


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _exp(x: float) -> float | None:
    return math.exp(x) if x < 709 else None  # NOTE: beyond a float64; a loss that large has no useful perplexity
