"""Shared fixtures: `device` runs a test once per device, skipping (with the reason) devices this machine lacks."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# NOTE: bytecode caches (in the gitignored __pycache__) even under PYTHONDONTWRITEBYTECODE: the suite starts hundreds
# of `specgrad` child processes, which read them, and with none each compiled specgrad from source (a run took 20%
# longer); set before specgrad is first imported, so its modules are written too
sys.dont_write_bytecode = False

from specgrad import Device  # noqa: E402
from specgrad.device import DeviceUnavailable, DTypeUnavailable  # noqa: E402

ALL_DEVICES = ("CPU", "CLANG", "GPU")
pytest_plugins = ["compile_report"]


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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A case marked slow_on(devices) is in the slow tier on those devices: the fast tier runs it on the others (a
    device runs there what it adds; docs/testing.md). Before -m 'not slow' deselects."""
    for item in items:
        marker = item.get_closest_marker("slow_on")
        params = getattr(item, "callspec", None) and item.callspec.params
        if marker is not None and params and params.get("device") in marker.args:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(params=ALL_DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    problem = device_problem(request.param)
    if problem:
        pytest.skip(f"{request.param} unavailable: {problem}")
    return request.param


@pytest.fixture(scope="session")
def cc() -> str:
    """A C compiler for the exported C programs (cc, else clang); skips where there is none."""
    found = shutil.which("cc") or shutil.which("clang")
    if found is None:
        pytest.skip("no C compiler")
    return found


@pytest.fixture
def dev(device: str) -> Iterator[str]:
    """`device`, also made the default so a layer's own tensors (created at construction) live there."""
    before = Device.DEFAULT
    Device.DEFAULT = device
    yield device
    Device.DEFAULT = before


@pytest.fixture(scope="session")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """specs/digits_mlp.yaml's weights and metadata as `specgrad train` writes them, without the training."""
    from specgrad.modelspec.validate import validate_file
    from specgrad.nn.state import get_state_dict, safe_save
    from specgrad.train.trainer import Trainer

    trainer = Trainer.create(validate_file(Path(__file__).resolve().parents[1] / "specs" / "digits_mlp.yaml"))
    path = tmp_path_factory.mktemp("weights") / "mlp.safetensors"
    safe_save(get_state_dict(trainer.model), path, metadata=trainer.metadata())
    return path


@pytest.fixture
def clang() -> None:
    """For tests of the CLANG device alone: skips (with the reason) where it cannot run."""
    if problem := device_problem("CLANG"):
        pytest.skip(f"CLANG unavailable: {problem}")


@pytest.fixture(autouse=True)
def keep_default_device() -> object:
    """A test (or a CLI command it runs in-process) that changes Device.DEFAULT does not leak it to the next test."""
    before = Device.DEFAULT
    yield
    Device._default = before


def _skip_a_missing_dtype() -> Iterator[None]:
    """A device that lacks a dtype (PoCL's CPU device has no half) skips the test with the device's own reason.
    Turned into a skip as it is raised: a failure's report would first format the whole traceback (0.1-0.7 s each)."""
    try:
        return (yield)
    except DTypeUnavailable as e:
        raise pytest.skip.Exception(str(e), _use_item_location=True) from None  # NOTE: what skipif reports


pytest_runtest_setup = pytest.hookimpl(wrapper=True)(_skip_a_missing_dtype)
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_skip_a_missing_dtype)
