"""Shared fixtures: `device` runs a test once per device, skipping (with the reason) devices this machine lacks."""

from __future__ import annotations

import pytest

from specgrad import Device
from specgrad.device import DeviceUnavailable

ALL_DEVICES = ("CPU", "CLANG", "GPU")


def device_problem(name: str) -> str | None:
    """Why `name` cannot run here, or None when it can."""
    try:
        Device[name]
    except DeviceUnavailable as e:
        return str(e)
    return None


def pytest_report_header() -> list[str]:
    try:
        import torch
    except ImportError:
        return ["torch: not installed, torch comparisons are skipped (numpy and finite differences still run)"]
    return [f"torch: {torch.__version__}, ops are also compared with torch autograd"]


@pytest.fixture(params=ALL_DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    problem = device_problem(request.param)
    if problem:
        pytest.skip(f"{request.param} unavailable: {problem}")
    return request.param
