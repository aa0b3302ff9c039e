"""`specgrad bench` through typer's CliRunner: --quick runs, the JSON document and the exit codes (never timings).

Every workload checks its result against numpy (training: against PyTorch's losses from the same weights, where
torch is installed) and exits 1 when they disagree, so exit code 0 also means every result was right.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import device_problem
from specgrad.cli.main import app
from typer.testing import CliRunner

import specgrad.bench

runner = CliRunner()
QUICK = ["bench", "--quick", "--seconds", "0", "--repeat", "2"]
KERNELS = ["matmul", "elementwise", "sum", "softmax", "conv2d"]


def bench_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*QUICK, "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check_document(doc: dict[str, Any], device: str, names: list[str]) -> None:
    assert doc["device"] == device and doc["quick"] is True and doc["threads"] >= 1 and doc["numpy"]
    assert {"device_description", "cpu", "cores", "python", "torch", "seconds", "repeat", "statistic"} <= doc.keys()
    assert [r["name"].split()[0] for r in doc["results"]] == names
    for r in doc["results"]:
        assert set(r) == {"name", "unit", "specgrad", "reference", "reference_value", "ratio", "target", "met"}
        assert r["specgrad"] > 0, r
        if r["reference_value"] is not None:
            assert r["reference_value"] > 0 and r["ratio"] > 0, r
        assert r["met"] is None if r["target"] is None else isinstance(r["met"], bool), r


@pytest.fixture(scope="module")
def cpu_run() -> dict[str, Any]:
    return bench_json("--device", "CPU")


def test_quick_run_on_cpu_has_every_workload(cpu_run: dict[str, Any]) -> None:
    names = ["matmul", "matmul", *KERNELS[1:], "train", "train", "train", "start", "start"]
    check_document(cpu_run, "CPU", names)
    units = {r["name"].split()[0]: r["unit"] for r in cpu_run["results"]}
    assert units == {"matmul": "GFLOP/s", "elementwise": "GB/s", "sum": "GB/s", "softmax": "GB/s",
                     "conv2d": "GFLOP/s", "train": "steps/s", "start": "s"}  # fmt: skip
    assert all(r["reference"].startswith("numpy") for r in cpu_run["results"][:6])


def test_start_up_reports_cold_warm_and_their_ratio(cpu_run: dict[str, Any]) -> None:
    cold, warm = cpu_run["results"][-2:]
    assert "cold cache" in cold["name"] and cold["ratio"] is None
    assert "warm cache" in warm["name"] and warm["reference"] == "cold cache"
    assert cold["target"] is cold["met"] is warm["target"] is None, "--quick judges no target (they are for full sizes)"
    assert warm["ratio"] == pytest.approx(cold["specgrad"] / warm["specgrad"])


def test_training_is_compared_with_torch(cpu_run: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    train = [r for r in cpu_run["results"] if r["name"].startswith("train")]
    assert [r["name"].split()[1] for r in train] == ["MLP", "CNN", "GPT"]
    assert all(r["reference"] == "torch eager, 1 thread" for r in train) and cpu_run["torch"]


@pytest.mark.parametrize("device", ["CLANG", pytest.param("GPU", marks=pytest.mark.slow)])
def test_quick_kernels_and_training_on_compiled_devices(device: str) -> None:
    if problem := device_problem(device):
        pytest.skip(f"{device} unavailable: {problem}")
    only = [arg for name in [*KERNELS, "train"] for arg in ("--only", name)]
    doc = bench_json("--device", device, *only)
    check_document(doc, device, ["matmul", "matmul", *KERNELS[1:], "train", "train", "train"])


@pytest.mark.slow
@pytest.mark.parametrize("device", ["CLANG", "GPU"])
def test_start_up_on_compiled_devices(device: str) -> None:
    if problem := device_problem(device):
        pytest.skip(f"{device} unavailable: {problem}")
    check_document(bench_json("--device", device, "--only", "start"), device, ["start", "start"])


def test_table_has_a_row_per_workload() -> None:
    result = runner.invoke(app, [*QUICK, "--device", "CPU", "--only", "matmul", "--only", "sum"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("specgrad bench on CPU") and lines[1].split() == [
        "workload", "specgrad", "reference", "ratio", "target"]  # fmt: skip
    assert [line.split()[0] for line in lines[2:]] == ["matmul", "matmul", "sum"]
    assert "GFLOP/s numpy matmul" in lines[2] and lines[2].split()[-1] == "-", "--quick judges no target"


def test_unknown_device_exits_3() -> None:
    result = runner.invoke(app, ["bench", "--device", "NOPE"])
    assert result.exit_code == 3 and "unknown device 'NOPE'" in result.output
    assert "Traceback" not in result.output


def test_only_matching_nothing_exits_2_with_the_names() -> None:
    result = runner.invoke(app, ["bench", "--only", "nothing-like-this"])
    assert result.exit_code == 2 and "no workload matches nothing-like-this" in result.output
    assert "matmul N=256" in result.output and "start" in result.output


def test_a_wrong_result_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(specgrad.bench, "softmax_np", lambda x: x)
    result = runner.invoke(app, [*QUICK, "--device", "CPU", "--only", "softmax"])
    assert result.exit_code == 1 and "softmax rows" in result.output and "on CPU" in result.output
    assert "Traceback" not in result.output


def test_every_command_in_the_docs_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Each command in docs/performance.md's "Running specgrad bench" shown at tiny sizes on CPU (one workload)."""
    import re
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text()
    section = text.split("## Running specgrad bench", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```bash\n(.*?)```", section, flags=re.S)[0]
    commands = [shlex.split(line.split("#")[0].split(">")[0]) for line in block.splitlines() if line.strip()]
    assert len(commands) >= 5
    tiny = ["--quick", "--seconds", "0", "--device", "CPU", "--only", "sum"]
    for command in commands:
        if command[:2] == ["specgrad", "bench"]:
            result = runner.invoke(app, [*command[1:], *tiny])
            assert result.exit_code == 0, (command, result.output)
        else:
            assert command[:3] == ["python", "-m", "specgrad.bench"], command
            assert specgrad.bench.main([*command[3:], *tiny]) == 0, (command, capsys.readouterr())
