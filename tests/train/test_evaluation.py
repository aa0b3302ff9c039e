"""The figures `specgrad evaluate` reports, against hand-worked examples and brute force."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from specgrad.train.evaluation import classification, language, regression


def one_hot_scores(predicted: list[int], classes: int) -> np.ndarray:
    return np.eye(classes)[predicted] * 3.0 - 1.0


def test_classification_by_hand() -> None:
    # true:      0 0 1 1 2 2
    # predicted: 0 1 1 1 1 2  -> class 0: P 1/1 R 1/2; class 1: P 2/4 R 2/2; class 2: P 1/1 R 1/2
    report = classification(one_hot_scores([0, 1, 1, 1, 1, 2], 3), np.array([0, 0, 1, 1, 2, 2]), ["cat", "dog", "eel"])
    assert report["examples"] == 6 and report["accuracy"] == pytest.approx(4 / 6)
    assert report["confusion"] == [[1, 1, 0], [0, 2, 0], [0, 1, 1]]
    dog = report["classes"][1]
    assert dog == {"name": "dog", "precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3), "support": 2}
    assert report["classes"][0]["f1"] == pytest.approx(2 / 3) and report["classes"][2]["recall"] == 0.5
    assert report["macro"]["precision"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert "top_k" not in report, "three classes: top-5 would always be right"
    json.dumps(report)  # NOTE: plain numbers only


def test_a_class_never_predicted_or_never_seen_has_no_precision_or_recall_but_f1_where_seen() -> None:
    report = classification(one_hot_scores([0, 0, 1], 3), np.array([0, 2, 1]))
    never_predicted = report["classes"][2]
    assert never_predicted["precision"] is None and never_predicted["recall"] == 0.0 and never_predicted["f1"] == 0
    seen_nowhere = classification(one_hot_scores([0, 1], 3), np.array([0, 1]))["classes"][2]
    assert seen_nowhere["precision"] is None and seen_nowhere["recall"] is None and seen_nowhere["support"] == 0
    assert seen_nowhere["f1"] is None, "no example and no prediction: nothing to score"
    assert report["macro"]["f1"] == pytest.approx((2 / 3 + 1 + 0) / 3), "a class seen but never predicted scores 0"


def test_top_k_against_brute_force() -> None:
    rng = np.random.default_rng(0)
    scores, labels = rng.standard_normal((200, 12)), rng.integers(0, 12, 200)
    report = classification(scores, labels)
    ranks = [(scores[i] > scores[i, labels[i]]).sum() for i in range(200)]
    assert report["top_k"] == {"k": 5, "accuracy": pytest.approx(np.mean([r < 5 for r in ranks]))}
    assert report["accuracy"] == pytest.approx(np.mean([r == 0 for r in ranks]))
    assert np.sum(report["confusion"]) == 200


def test_positions_are_examples_and_bad_labels_are_refused() -> None:
    scores = one_hot_scores([0, 1, 1, 0], 2).reshape(2, 2, 2)
    assert classification(scores, np.array([[0, 1], [0, 0]]))["accuracy"] == 0.75
    with pytest.raises(ValueError, match=r"labels must lie in 0..1, got 0..2"):
        classification(one_hot_scores([0, 1], 2), np.array([0, 2]))
    with pytest.raises(ValueError, match="3 labels for 2 examples"):
        classification(one_hot_scores([0, 1], 2), np.array([0, 1, 1]))


def test_regression_by_hand() -> None:
    report = regression(np.array([[1.0], [2.0], [3.0]]), np.array([[1.0], [2.0], [4.0]]), ["price"])
    assert report["mae"] == pytest.approx(1 / 3) and report["rmse"] == pytest.approx(math.sqrt(1 / 3))
    assert report["r2"] == pytest.approx(1 - 1 / (42 / 9))
    assert report["targets"] == [{"name": "price", "mae": report["mae"], "rmse": report["rmse"], "r2": report["r2"]}]


def test_regression_columns_and_a_constant_target() -> None:
    pred, true = np.array([[1.0, 5.0], [3.0, 5.0]]), np.array([[1.0, 5.0], [2.0, 5.0]])
    report = regression(pred, true)
    assert [c["name"] for c in report["targets"]] == ["0", "1"] and report["targets"][1]["r2"] is None
    assert report["targets"][1]["mae"] == 0.0 and report["mae"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="do not match"):
        regression(pred, true[:, :1])


def test_language_loss_and_perplexity() -> None:
    uniform = language(np.zeros((4, 10, 65)), np.zeros((4, 10), np.int64))
    assert uniform["tokens"] == 40 and uniform["loss"] == pytest.approx(math.log(65))
    assert uniform["perplexity"] == pytest.approx(65)
    rng = np.random.default_rng(1)
    logits, labels = rng.standard_normal((3, 7, 11)) * 4, rng.integers(0, 11, (3, 7))
    flat, truth = logits.reshape(-1, 11), labels.reshape(-1)
    want = np.mean([math.log(np.exp(row).sum()) - row[t] for row, t in zip(flat, truth)])
    report = language(logits, labels)
    assert report["loss"] == pytest.approx(want) and report["perplexity"] == pytest.approx(math.exp(want))
    assert report["accuracy"] == pytest.approx(np.mean(flat.argmax(1) == truth))
