"""Fixtures of the nn layer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specgrad import Device


@pytest.fixture
def dev(device: str) -> Iterator[str]:
    """`device`, also made the default so a layer's own tensors (created at construction) live there."""
    before = Device.DEFAULT
    Device.DEFAULT = device
    yield device
    Device.DEFAULT = before
