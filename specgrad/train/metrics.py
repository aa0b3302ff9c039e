"""Which validation metrics a run reports for each output (validate.METRICS: train.metrics and the watched
train.early_stopping.metric, where they fit the output's task), the checks of those and of train.class_weights against
the data (run by `specgrad validate` and by train), and the class weights themselves.

Imports numpy, modelspec (errors, schema, validate) and train.data only: `validate` uses it without loading the
trainer.
"""

from __future__ import annotations

import numpy as np

from specgrad.modelspec.errors import Problem, SpecError, excerpt
from specgrad.modelspec.schema import did_you_mean
from specgrad.modelspec.validate import METRICS, ValidSpec, top_k
from specgrad.train.data import Dataset


def asked_metrics(spec: ValidSpec) -> list[str]:
    """train.metrics, and the metric early stopping watches (of any output)."""
    t = spec.values["train"]
    watched = (t["early_stopping"] or {}).get("metric", "loss").rpartition(".")[2]
    return [*t["metrics"], watched]


def reported_metrics(task: str, loss: str, asked: list[str]) -> tuple[str, ...]:
    """The validation figures of an output besides its loss: a classifier's accuracy, a mse regression's rmse (its
    loss in the target's units), and those asked for that fit its task, in METRICS order then top-k by k."""
    if task == "language":
        return ("accuracy",)
    fits = ("accuracy", "precision", "recall", "f1", "auc") if task == "classify" else ("mae", "rmse", "r2")
    given = {"accuracy"} if task == "classify" else {"rmse"} if loss == "mse" else set()
    ret = [m for m in METRICS if m in fits and (m in given or m in asked)]
    ks = sorted({k for m in asked if (k := top_k(m)) is not None}) if task == "classify" else []
    return (*ret, *(f"top{k}" for k in ks))


def outputs_metrics(spec: ValidSpec, data: Dataset) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """Each output's (name, task, loss, the metrics it reports besides its loss), in the model's order."""
    asked = asked_metrics(spec)
    if data.heads:
        return [(o, h.task, h.loss, reported_metrics(h.task, h.loss, asked)) for o, h in data.heads.items()]
    ((name, (loss, _)),) = spec.losses.items()
    return [(name, data.task, loss, reported_metrics(data.task, loss, asked))]


def check_metrics(spec: ValidSpec, data: Dataset) -> None:
    """Each metric asked for that fits an output fits its data (AUC: two classes; top-k: more than k classes), the
    watched one (train.early_stopping.metric) is one the run reports, and train.class_weights names the data's
    classes: else every such problem at once, each at the spec's line. Run by validate (on the data) and by train."""
    if problems := metric_problems(spec, data):
        raise SpecError(problems)


def metric_problems(spec: ValidSpec, data: Dataset) -> list[Problem]:
    """What check_metrics raises: every problem of the metrics and class weights with the data, in the spec's
    order."""
    t, outputs, problems = spec.values["train"], outputs_metrics(spec, data), []
    if data.heads and t.get("class_weights") is not None:
        node = spec.node("train", "class_weights")
        problems.append(Problem("train.class_weights is for a model with one output; this one has several",
                                node.loc if node is not None else None, "remove train.class_weights"))  # fmt: skip
    try:
        class_weights(spec, data)
    except SpecError as e:
        problems += e.problems
    classes = {o: (data.heads[o].num_classes if data.heads else data.num_classes) or 0 for o, *_ in outputs}
    listed = spec.node("train", "metrics")
    for i, m in enumerate(t["metrics"]):
        loc = listed.value[i].loc if listed is not None and listed.kind == "seq" and i < len(listed.value) else None
        for o, _, _, metrics in outputs:
            if m == "auc" and m in metrics and classes[o] != 2:
                problems.append(Problem(f"auc is the area under the ROC curve of two classes, but the data has "
                                        f"{classes[o]}", loc,
                                        "use f1, precision or recall (macro averages)"))  # fmt: skip
            if (k := top_k(m)) is not None and m in metrics and k >= classes[o]:
                problems.append(Problem(f"{m} counts the label among the {k} best scores, but the data has "
                                        f"{classes[o]} classes, so it would always be 1", loc,
                                        f"use top{max(2, classes[o] - 1)} or fewer, or accuracy"))  # fmt: skip
    return problems + _watched_problems(spec, data, outputs)


def _watched_problems(spec: ValidSpec, data: Dataset, outputs: list[tuple[str, str, str, tuple[str, ...]]]
                      ) -> list[Problem]:  # fmt: skip
    """train.early_stopping.metric must be a figure the run reports."""
    stop = spec.values["train"]["early_stopping"]
    if not stop or stop["metric"] == "accuracy":  # NOTE: accuracy without a classifier watches the loss
        return []
    has = ["loss", *outputs[0][3]] if len(outputs) == 1 else \
        ["loss", *(f"{o}.{m}" for o, _, _, metrics in outputs for m in ("loss", *metrics))]  # fmt: skip
    if stop["metric"] in has:
        return []
    node = spec.node("train", "early_stopping", "metric")
    return [Problem(f"train.early_stopping.metric is {stop['metric']}, which this run does not report (its "
                    f"{data.task} data has: {', '.join(has)})", node.loc if node is not None else None,
                    did_you_mean(stop["metric"], has) or f"watch one of {', '.join(has)}")]  # fmt: skip


def class_weights(spec: ValidSpec, data: Dataset) -> np.ndarray | None:
    """train.class_weights as one weight per class of the data (float64), or None; a class the data does not have is
    an error at its key."""
    given = spec.values["train"].get("class_weights")
    if given is None:
        return None
    node = spec.node("train", "class_weights")
    loc = node.loc if node is not None else None
    if data.heads:
        return None
    if spec.losses[spec.outputs[0]][0] not in ("cross_entropy", "binary_cross_entropy") or data.task != "classify":
        raise SpecError.at(loc, "train.class_weights weighs the classes of cross_entropy or binary_cross_entropy, but "
                           f"this model's loss is {spec.losses[spec.outputs[0]][0]} on a {data.task} task",
                           "remove train.class_weights")  # fmt: skip
    names = list(data.class_names or [str(k) for k in range(data.num_classes or 0)])
    if given == "balanced":  # NOTE: scikit-learn's: n / (classes * count); a class with no training example weighs n
        counts = np.bincount(np.asarray(data.y_train).reshape(-1), minlength=len(names)).astype(np.float64)
        return len(data.y_train) / (len(names) * np.maximum(counts, 1))
    ret, unknown = np.ones(len(names), np.float64), []
    for k, v in given.items():
        if str(k) not in names:
            at = node.key_locs[k] if node is not None and node.key_locs and k in node.key_locs else loc
            shown = f"{', '.join(names[:20])}{', ...' if len(names) > 20 else ''}"
            hint = did_you_mean(str(k), names) or "name the classes as the data writes them"
            unknown.append(Problem(f"train.class_weights names the class '{excerpt(str(k))}', which the data does not "
                                   f"have (its classes: {shown})", at, hint))  # fmt: skip
            continue
        ret[names.index(str(k))] = float(v)
    if unknown:
        raise SpecError(unknown)
    if not ret.sum() > 0:
        raise SpecError.at(loc, "every class weighs 0 in train.class_weights, so there would be nothing to learn",
                           "give at least one class a weight above 0")  # fmt: skip
    return ret
