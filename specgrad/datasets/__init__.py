"""Small datasets bundled with specgrad, for tests and examples (nothing is downloaded).

digits: the 1797 8x8 handwritten digits of the UCI "Optical Recognition of Handwritten Digits" test set
(E. Alpaydin, C. Kaynak, 1998; licence CC BY 4.0), as scikit-learn also ships them. sonnets: eight of
Shakespeare's sonnets (1609; public domain), a small text for character-level models. See docs/datasets.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """(images (1797, 8, 8) uint8 with pixel values 0..16, labels (1797,) uint8 in 0..9)."""
    with np.load(_HERE / "digits.npz") as f:
        return f["images"], f["labels"]


def load_text(name: str) -> str:
    """A bundled text by name: 'sonnets'."""
    texts = {"sonnets": "sonnets.txt"}
    if name not in texts:
        raise ValueError(f"no bundled text named {name!r}; bundled: {', '.join(texts)}")
    return (_HERE / texts[name]).read_text(encoding="utf-8")


def split(n: int, valid_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled (train indices, validation indices) of n items, reproducible from the seed."""
    if not 0 < valid_fraction < 1:
        raise ValueError(f"valid_fraction must be between 0 and 1, got {valid_fraction}")
    order = np.random.default_rng(seed).permutation(n)
    n_valid = max(1, round(n * valid_fraction))
    return order[n_valid:], order[:n_valid]
