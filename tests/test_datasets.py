"""Bundled datasets load from the package, with the documented shapes and contents."""

from __future__ import annotations

import numpy as np
import pytest

from specgrad.datasets import load_digits, load_text, split


def test_digits() -> None:
    images, labels = load_digits()
    assert images.shape == (1797, 8, 8) and images.dtype == np.uint8 and images.max() == 16
    assert labels.shape == (1797,) and set(np.unique(labels)) == set(range(10))
    assert 170 <= np.bincount(labels).min() and np.bincount(labels).max() <= 185


def test_sonnets() -> None:
    text = load_text("sonnets")
    assert text.startswith("I\n\nFrom fairest creatures") and "Shall I compare thee to a summer's day?" in text
    assert max(map(ord, text)) < 128
    with pytest.raises(ValueError, match="no bundled text named 'poems'; bundled: sonnets"):
        load_text("poems")


def test_split_is_seeded_and_disjoint() -> None:
    train, valid = split(100, 0.2, seed=3)
    assert len(valid) == 20 and len(train) == 80 and not set(train) & set(valid)
    assert np.array_equal(split(100, 0.2, seed=3)[1], valid) and not np.array_equal(split(100, 0.2, seed=4)[1], valid)
    with pytest.raises(ValueError, match="between 0 and 1"):
        split(10, 1.5, seed=0)
