"""`specgrad bench` through typer's CliRunner: --quick runs, the JSON document and the exit codes (never timings).

Every workload checks its result against numpy (training: against PyTorch's losses from the same weights, where
torch is installed) and exits 1 when they disagree, so exit code 0 also means every result was right.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from conftest import device_problem
from specgrad.cli.main import app
from typer.testing import CliRunner

import specgrad.bench

pytestmark = pytest.mark.xdist_group("bench_cli")  # NOTE: on one worker: one bench run read by many tests

runner = CliRunner()
QUICK = ["bench", "--quick", "--seconds", "0", "--repeat", "2"]
KERNELS = ["matmul", "elementwise", "sum", "softmax", "conv2d", "conv2d"]  # NOTE: conv2d forward, then backward


def bench_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*QUICK, "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check_document(doc: dict[str, Any], device: str, names: list[str]) -> None:
    assert doc["device"] == device and doc["quick"] is True and doc["threads"] >= 1 and doc["numpy"]
    assert {"device_description", "cpu", "cores", "python", "torch", "seconds", "repeat", "statistic", "numpy_threads",
            "torch_threads", "peak_gflops", "peak_derivation"} <= doc.keys()  # fmt: skip
    assert [r["name"].split()[0] for r in doc["results"]] == names
    for r in doc["results"]:
        assert set(r) == {"name", "unit", "specgrad", "reference", "reference_value", "ratio", "target", "met",
                          "peak_share", "at_most"}  # fmt: skip
        assert r["at_most"] == r["name"].startswith("command"), r
        assert (r["peak_share"] is not None) == (r["unit"] == "GFLOP/s" and doc["peak_gflops"] is not None), r
        assert r["specgrad"] > 0, r
        if r["reference_value"] is not None:
            assert r["reference_value"] > 0 and r["ratio"] > 0, r
        assert r["met"] is None if r["target"] is None else isinstance(r["met"], bool), r


@pytest.fixture(scope="module")
def cpu_run() -> dict[str, Any]:
    # NOTE: --repeat 1 changes no other row (--seconds 0 times one run); the command rows then run each process twice
    return bench_json("--device", "CPU", "--repeat", "1")


def test_quick_run_on_cpu_has_every_workload(cpu_run: dict[str, Any]) -> None:
    names = ["matmul", "matmul", *KERNELS[1:], "train", "train", "train", "ResNet", "train", "train", *["command"] * 4,
             "start", "start"]  # fmt: skip
    check_document(cpu_run, "CPU", names)
    units = {r["name"].split()[0]: r["unit"] for r in cpu_run["results"]}
    assert units == {"matmul": "GFLOP/s", "elementwise": "GB/s", "sum": "GB/s", "softmax": "GB/s",
                     "conv2d": "GFLOP/s", "train": "steps/s", "ResNet": "steps/s", "command": "s",
                     "start": "s"}  # fmt: skip
    assert all(r["reference"].startswith("numpy") for r in cpu_run["results"][:5])
    conv = cpu_run["results"][5]["reference"]
    assert conv.startswith("torch conv2d, ") if cpu_run["torch"] else conv == "numpy im2col+matmul"


def test_start_up_reports_cold_warm_and_their_ratio(cpu_run: dict[str, Any]) -> None:
    cold, warm = cpu_run["results"][-2:]
    assert "cold cache" in cold["name"] and cold["ratio"] is None
    assert "warm cache" in warm["name"] and warm["reference"] == "cold cache"
    assert cold["target"] is cold["met"] is warm["target"] is None, "--quick judges no target (they are for full sizes)"
    assert warm["ratio"] == pytest.approx(cold["specgrad"] / warm["specgrad"])


def test_the_train_command_is_timed_against_torch_and_its_captured_work(cpu_run: dict[str, Any]) -> None:
    """The command rows: the whole `specgrad train` process of digits_mlp and of the generated table (at --quick's
    epochs), over the PyTorch script's process and over its own captured steps and evaluations; the median of one
    round (--repeat 1) after a warm-up run, no target judged at --quick."""
    rows = [r for r in cpu_run["results"] if r["name"].startswith("command")]
    digits, table = "command digits_mlp 1 epochs", "command csv 160x4 3 classes 2 epochs"
    assert [r["name"] for r in rows] == [digits, f"{digits} / captured", table, f"{table} / captured"]
    threads = f"{cpu_run['threads']} thread{'s' * (cpu_run['threads'] != 1)}"
    for versus, captured in (rows[:2], rows[2:]):
        assert versus["specgrad"] == captured["specgrad"] > 0 and versus["unit"] == captured["unit"] == "s"
        assert captured["reference"] == "its captured steps + evals, median of 1"
        assert captured["ratio"] == pytest.approx(captured["specgrad"] / captured["reference_value"])
        assert captured["target"] is captured["met"] is versus["target"] is versus["met"] is None
        if cpu_run["torch"]:
            assert versus["reference"] == f"torch script, {threads}, median of 1"
            assert versus["ratio"] == pytest.approx(versus["specgrad"] / versus["reference_value"])
        else:
            assert versus["reference"] is versus["ratio"] is None


def test_training_is_compared_with_torch(cpu_run: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    train = [r for r in cpu_run["results"] if r["unit"] == "steps/s"]
    assert [r["name"].split()[1] for r in train] == ["MLP", "CNN", "GPT", "basic", "GPT-2-small", "LSTM"]
    threads = f"{cpu_run['threads']} thread{'s' * (cpu_run['threads'] != 1)}"
    assert all(r["reference"] == f"torch eager, {threads}" for r in train) and cpu_run["torch"]
    assert cpu_run["torch_threads"] == cpu_run["threads"], "torch runs at specgrad's thread count"


def test_every_side_runs_at_the_thread_count_asked_for() -> None:
    """--threads 1: specgrad, numpy's OpenBLAS and torch each on one thread during the run, and as before after."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    doc = bench_json("--device", "CLANG", "--threads", "1", "--only", "conv2d")
    assert doc["threads"] == 1 and doc["torch_threads"] == 1 and doc["numpy_threads"] in (1, None)
    assert all(r["reference"].endswith(", 1 thread") for r in doc["results"])
    assert torch.get_num_threads() == before
    assert doc["peak_derivation"].startswith("1 core x ")
    assert runner.invoke(app, ["bench", "--threads", "0"]).exit_code == 2


def test_compare_prints_each_workloads_change(tmp_path: Any) -> None:
    earlier = tmp_path / "old.json"
    earlier.write_text(json.dumps(bench_json("--device", "CPU", "--only", "sum", "--only", "softmax")))
    result = runner.invoke(app, [*QUICK, "--device", "CPU", "--only", "sum", "--compare", str(earlier)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = lines.index(f"compared with {earlier} (change: now / before, above 1 is faster)")
    assert lines[at + 1].split() == ["workload", "before", "now", "change", "ratio", "to", "reference"]
    assert lines[at + 2].startswith("sum of 64K floats") and len(lines) == at + 3, "softmax did not run now"
    doc = bench_json("--device", "CPU", "--only", "sum", "--compare", str(earlier))
    (change,) = doc["changes"]
    assert change["name"].startswith("sum") and change["change"] == pytest.approx(change["now"] / change["before"])
    earlier.write_text("{not json")
    bad = runner.invoke(app, [*QUICK, "--compare", str(earlier)])
    assert bad.exit_code == 2 and "is not a document `specgrad bench --json` wrote" in bad.output
    earlier.write_text("[" * 100_000)
    deep = runner.invoke(app, [*QUICK, "--compare", str(earlier)])
    assert deep.exit_code == 2 and "is not a document" in deep.output and "Traceback" not in deep.output
    os.mkfifo(tmp_path / "pipe")  # NOTE: refused by what it is, never waited on
    pipe = runner.invoke(app, [*QUICK, "--compare", str(tmp_path / "pipe")])
    assert pipe.exit_code == 2 and "it is a FIFO (named pipe), not a regular file" in pipe.output


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
    assert lines[0].startswith("specgrad bench on CPU") and lines[1].startswith("threads: ")
    assert lines[2].split() == ["workload", "specgrad", "reference", "ratio", "target", "peak"]
    assert [line.split()[0] for line in lines[3:]] == ["matmul", "matmul", "sum"]
    assert "GFLOP/s numpy matmul" in lines[3] and lines[3].split()[-2:] == ["-", "-"], "--quick judges no target"


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


def test_every_command_in_the_docs_runs(capsys: pytest.CaptureFixture[str], tmp_path: Any,
                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
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
    monkeypatch.chdir(tmp_path)  # NOTE: where `--compare bench.json` finds an earlier run's document
    (tmp_path / "bench.json").write_text(json.dumps(bench_json("--device", "CPU", "--only", "sum")))
    for command in commands:
        if command[:2] == ["specgrad", "bench"]:
            result = runner.invoke(app, [*command[1:], *tiny])
            assert result.exit_code == 0, (command, result.output)
        else:
            assert command[:3] == ["python", "-m", "specgrad.bench"], command
            assert specgrad.bench.main([*command[3:], *tiny]) == 0, (command, capsys.readouterr())
