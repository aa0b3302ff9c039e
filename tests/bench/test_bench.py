"""The benchmark's parts: timing, results, the numpy references and the torch twins (tests never assert on time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specgrad import Tensor
from specgrad.bench import (
    GPT,
    MODELS,
    QUICK,
    TARGETS,
    Result,
    Timer,
    conv2d_grads_np,
    conv2d_np,
    main,
    softmax_np,
    torch_model,
    workloads,
)
from specgrad.helpers import cores
from specgrad.nn.state import get_state_dict


def test_timer_warm_up_is_the_callers_and_at_least_one_run_is_timed() -> None:
    calls: list[int] = []
    assert Timer(seconds=0, repeat=50).best(lambda: calls.append(1)) >= 0 and len(calls) == 1
    calls.clear()
    Timer(seconds=60, repeat=3).best(lambda: calls.append(1))
    assert len(calls) == 3


def test_ratio_is_specgrad_over_reference_and_targets_read_by_unit() -> None:
    r = Result.of("x", "GB/s", 2.0, "numpy", 8.0, target=0.5)
    assert r.ratio == 0.25 and r.met is False
    assert Result.of("x", "GB/s", 4.0, "numpy", 8.0, target=0.5).met is True
    assert Result.of("x", "GB/s", 4.0, "numpy", 8.0).met is None
    assert (
        Result.of("start", "s", 2.5, target=3.0).met is True and Result.of("start", "s", 3.5, target=3.0).met is False
    )
    assert Result.of("start", "s", 1.0, "cold", 4.0, ratio=4.0).ratio == 4.0


def test_im2col_conv_matches_a_direct_loop() -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 5, 6)), rng.standard_normal((4, 3, 3, 3))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((2, 4, 5, 6))
    for i in range(5):
        for j in range(6):
            want[:, :, i, j] = np.einsum("nchw,ochw->no", padded[:, :, i : i + 3, j : j + 3], w)
    np.testing.assert_allclose(conv2d_np(x, w), want, rtol=1e-10)


def test_numpy_softmax_rows_sum_to_one() -> None:
    x = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32) * 30
    out = softmax_np(x.copy())
    np.testing.assert_allclose(out.sum(1), 1, rtol=1e-6)
    assert out.argmax(1).tolist() == x.argmax(1).tolist()


def test_every_workload_has_a_distinct_name() -> None:
    names = [w.name for w in workloads(QUICK)]
    assert len(names) == len(set(names)) and names[-1] == "start"


@pytest.mark.parametrize("name", list(MODELS))
def test_torch_twins_have_the_same_parameters(name: str) -> None:
    pytest.importorskip("torch")
    kwargs = {"GPT": {"d": 32, "heads": 4, "context": 16}, "Block": {"d": 32, "heads": 4}, "ResNet": {"c": 8},
              "LSTM": {"hidden": 16}}.get(name, {})  # fmt: skip
    ours = {k: tuple(v.shape) for k, v in get_state_dict(MODELS[name](**kwargs)).items()}
    theirs = {k: tuple(v.shape) for k, v in torch_model(name, **kwargs).state_dict().items()}
    assert ours == theirs


def test_gpt_gives_logits_per_position() -> None:
    model = GPT(vocab=65, d=16, heads=2, context=8, layers=1)
    assert model(Tensor(np.zeros((3, 8), dtype=np.int32))).shape == (3, 8, 65)


def test_module_entry_point_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--device", "CPU", "--only", "sum", "--seconds", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("specgrad bench on CPU") and out[3].startswith("sum of 64K floats")


def test_zoo_rows_run_and_agree_with_torch(capsys: pytest.CaptureFixture[str]) -> None:
    """The ResNet block, GPT-2-small layer and LSTM rows at --quick sizes: each checks its losses against PyTorch
    from the same weights (where torch is installed; finite losses without it) before it prints a row."""
    assert main(["--quick", "--device", "CPU", "--only", "zoo", "--seconds", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = out[next(i for i, line in enumerate(out) if line.startswith("workload")) + 1 :]
    assert [r.split()[0] for r in rows] == ["ResNet", "train", "train"], rows
    assert "GPT-2-small layer" in rows[1] and "LSTM LM" in rows[2]


def test_module_entry_point_reports_an_unknown_device(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--device", "NOPE", "--only", "sum"]) == 3
    assert "unknown device 'NOPE'" in capsys.readouterr().err


def test_validation_benchmark_prints_each_spec(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--validate", str(Path(__file__).resolve().parents[2] / "specs")])
    out = capsys.readouterr().out
    assert "validate digits_mlp.yaml" in out and " ms" in out


def test_targets_are_the_issue_goals() -> None:
    assert TARGETS["matmul"] == 0.8 and TARGETS["elementwise"] == 0.9 and TARGETS["train"] == 1.0
    assert TARGETS["conv2d"] == 0.8 and (TARGETS["start cold"], TARGETS["start warm"]) == (2.0, 1.0)


def test_numpy_conv_gradients_are_the_adjoints_of_the_convolution() -> None:
    """A convolution is linear in x and in w, so sum(conv(x, w) * g) = sum(x * dx) = sum(w * dw) for the gradients
    of the output gradient g: the reference the backward row is checked against."""
    rng = np.random.default_rng(0)
    x, w, g = rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((4, 3, 3, 3)), rng.standard_normal((2, 4, 6, 5))
    dx, dw = conv2d_grads_np(x, w, g)
    total = (conv2d_np(x, w) * g).sum()
    assert dx.shape == x.shape and dw.shape == w.shape
    np.testing.assert_allclose([(x * dx).sum(), (w * dw).sum()], [total, total], rtol=1e-10)


def test_the_peak_is_threads_times_what_one_core_was_measured_at() -> None:
    from specgrad.bench import Peak
    from specgrad.device import Device

    peak, two = Peak.of_cpu(1), Peak.of_cpu(2)
    if peak is None or two is None:
        pytest.skip("no C compiler")
    measured = Device["CLANG"].throughput
    if measured is None:
        pytest.skip("the register tile probe did not run here")
    assert peak.gflops == pytest.approx(measured.gflops) and two.gflops == pytest.approx(min(2, cores()) * peak.gflops)
    units = measured.fma_units
    assert f"{measured.gflops:.0f} GFLOP/s measured on one core" in peak.derivation
    assert f"about {units} FMA unit" in peak.derivation and 1 <= units <= 4


def test_without_the_probe_the_peak_is_threads_times_clock_times_flops_per_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from specgrad.bench import Peak
    from specgrad.device import Device, DeviceUnavailable

    try:
        monkeypatch.setattr(Device["CLANG"], "throughput", None)
    except DeviceUnavailable:
        pytest.skip("no C compiler")
    peak = Peak.of_cpu(1)
    if peak is None:
        pytest.skip("no known clock")
    lanes, fma = (int(peak.derivation.split(" x ")[2].split("(")[1].split()[0]), "FMA units" in peak.derivation)
    ghz = float(peak.derivation.split(" x ")[1].split()[0])
    assert peak.gflops == pytest.approx(ghz * lanes * 2 * (2 if fma else 1), rel=1e-2)


def test_a_time_ratio_row_is_met_at_most_its_target() -> None:
    """The command rows: specgrad's seconds over the reference's, met when the ratio is at most the target."""
    from specgrad.bench import row

    slow = Result.of("command x", "s", 3.0, "torch script", 2.0, target=1.0, at_most=True)
    assert slow.ratio == 1.5 and slow.met is False and slow.at_most
    assert Result.of("command x", "s", 2.0, "torch script", 4.0, target=1.0, at_most=True).met is True
    assert row(slow).split()[-5:] == ["1.5x", "<=", "1x", "missed", "-"]
    assert Result.of("start", "s", 2.5, target=3.0).at_most is False, "other rows read their targets as before"


def test_the_generated_table_is_a_spec_that_loads(tmp_path: Path) -> None:
    """The csv command row's table: its rows, feature columns and text labels of every class, and a spec that
    validates and loads as a classifier with the 80/20 split."""
    from specgrad.bench import write_table
    from specgrad.modelspec.validate import validate_file
    from specgrad.train.data import load_data

    recipe = write_table(tmp_path, 50, 3, 4, 2)
    lines = (tmp_path / "table.csv").read_text().splitlines()
    assert lines[0] == "f0,f1,f2,label" and len(lines) == 51
    assert {line.rsplit(",", 1)[1] for line in lines[1:]} == {"class0", "class1", "class2", "class3"}
    assert recipe.spec == tmp_path / "table.yaml" and recipe.label == "csv 50x3 4 classes 2 epochs"
    spec = validate_file(recipe.spec, [])
    data = load_data(spec)
    assert spec.values["train"]["epochs"] == 2 and data.task == "classify"
    assert (len(data.x_train), len(data.x_valid)) == (40, 10) and data.x_train.shape[1:] == (3,)
    assert write_table(tmp_path, 50, 3, 4, 2) == recipe
    assert (tmp_path / "table.csv").read_text().splitlines() == lines, "the same seed gives the same table"


def test_command_rounds_warm_each_side_then_interleave_them() -> None:
    """Each side runs once untimed, then the sides take turns: three rounds (fewer only under a lower --repeat)."""
    from specgrad.bench import command_rounds

    calls: list[str] = []
    sides = [lambda: calls.append("a") or 1.0, lambda: calls.append("b") or 2.0]
    assert command_rounds(sides, Timer(seconds=0, repeat=100)) == [[1.0] * 3, [2.0] * 3]
    assert calls == ["a", "b"] * 4
    calls.clear()
    assert command_rounds(sides, Timer(seconds=0, repeat=1)) == [[1.0], [2.0]] and calls == ["a", "b"] * 2


def test_the_command_rows_without_torch(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without PyTorch the command row has specgrad's seconds alone (no ratio, no target); the row against its own
    captured work still has its ratio."""
    import specgrad.bench

    monkeypatch.setattr(specgrad.bench, "_torch", lambda: None)
    assert main(["--quick", "--device", "CPU", "--only", "command csv", "--seconds", "0", "--repeat", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = out[next(i for i, line in enumerate(out) if line.startswith("workload")) + 1 :]
    name = "command csv 160x4 3 classes 2 epochs"
    assert [r[:48].rstrip() for r in rows] == [name, f"{name} / captured"]
    assert rows[0].split()[-4:] == ["-", "-", "-", "-"], rows[0]
    assert "its captured steps + evals, median of 1" in rows[1] and rows[1].split()[-3].endswith("x"), rows[1]
