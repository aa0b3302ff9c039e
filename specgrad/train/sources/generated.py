"""The bundled and generated sources: digits (scikit-learn's 8x8 digits, bundled), spirals (two interleaved spirals,
two classes) and sine (regression of sin x); the generated points come from the split's seed. Imports numpy,
specgrad.datasets and sources.base and .split.
"""

from __future__ import annotations

import math

import numpy as np

from specgrad.datasets import load_digits
from specgrad.train.sources.base import Dataset, SourceDef, _check_shape, _Source
from specgrad.train.sources.split import _split, _Target, split_seed


def _load_digits(src: _Source) -> Dataset:
    images, labels = load_digits()
    x = (images.astype(np.float32) / 16).reshape(len(images), *src.shape)
    what = f"the {len(x)} digits with valid_split {src.data['valid_split']}"
    if src.data["target"] == "input":
        out = src.spec.output_shape(src.spec.outputs[0])
        # NOTE: the target is the unnormalized image in 0..1 (what a sigmoid can rebuild), even when x is standardized
        y = x.reshape(len(x), *(out if math.prod(out) == math.prod(src.shape) else src.shape)).copy()
        return _split(src, x, y, _Target("regress", "the digit images"), src.near("batch_size"), what)
    return _split(src, x, labels, _Target("classify", "the digit labels"), src.near("batch_size"), what)


def _spiral_points(n: int, noise: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals of 1.5 turns in the unit disc; labels alternate 0, 1."""
    label = np.arange(n) % 2
    r = np.sqrt(rng.uniform(0, 1, n))  # NOTE: sqrt spreads points evenly over the area
    angle = 3 * np.pi * r + np.pi * label
    x = np.stack([r * np.cos(angle), r * np.sin(angle)], axis=1) + noise * rng.standard_normal((n, 2))
    return x.astype(np.float32), label.astype(np.int32)


def _load_spirals(src: _Source) -> Dataset:
    _check_shape(src, (2,), "spirals are points in the plane, shape [2] per example")
    # NOTE: the points themselves come from the split's seed: with data.split_seed, every training seed sees them all
    x, y = _spiral_points(src.data["samples"], src.data["noise"], np.random.default_rng(split_seed(src.spec)))
    return _split(src, x, y, _Target("classify", "the spiral labels"), src.near("samples"), f"{len(x)} samples")


def _load_sine(src: _Source) -> Dataset:
    _check_shape(src, (1,), "sine examples are one number x, shape [1] per example")
    rng = np.random.default_rng(split_seed(src.spec))  # NOTE: as the spirals' points
    x = rng.uniform(-3, 3, (src.data["samples"], 1))
    y = np.sin(x) + src.data["noise"] * rng.standard_normal(x.shape)
    return _split(src, x.astype(np.float32), y.astype(np.float32), _Target("regress", "the sine values"),
                  src.near("samples"), f"{len(x)} samples")  # fmt: skip


SPIRALS_KEYS = ("samples", "noise", "split_seed", "class_names")
DEFS = (
    SourceDef("digits", _load_digits, ("split_seed", "class_names"), floats=True, targets=(None, "input"), axis=None),
    SourceDef("spirals", _load_spirals, SPIRALS_KEYS, floats=True, targets=(None,)),
    SourceDef("sine", _load_sine, ("samples", "noise", "split_seed"), floats=True, targets=(None,)),
)
