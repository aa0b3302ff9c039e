"""The training loss stays on the device (trainer.LossWindow): the host reads a window of steps at once, and what a run
writes (metrics, checkpoints, weights, the non-finite loss error) is the same wherever the reads fall."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from specgrad.cli.main import app
from typer.testing import CliRunner

import specgrad.train.trainer as trainer_module
from specgrad import Tensor, TinyJit
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_parameters, safe_load, safe_load_metadata
from specgrad.train.run_folder import MetricsLog, new_run_folder
from specgrad.train.trainer import LossWindow, Trainer

SPECS = Path(__file__).resolve().parents[2] / "specs"
runner = CliRunner()
# NOTE: 89 steps of batch 16 an epoch (1437 training digits), every loss logged
FAST = ("--set", "data.batch_size=16", "--set", "vars.hidden=32", "--set", "train.log_every=1")


def train(out: Path, *args: str, spec: str = "digits_mlp.yaml") -> tuple[int, str, Path | None]:
    result = runner.invoke(app, ["train", str(SPECS / spec), "--out", str(out), *args])
    folders = sorted(out.glob("*")) if out.exists() else []
    return result.exit_code, result.output, folders[-1] if folders else None


def records(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "examples_per_s"} for r in rows]


def tensors(path: Path) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in safe_load(path).items()}


def same_files(a: Path, b: Path) -> None:
    """Every checkpoint and the final weights: the same files, tensors and metadata (the position included)."""
    names = sorted(str(p.relative_to(a)) for p in a.rglob("*.safetensors"))
    assert names == sorted(str(p.relative_to(b)) for p in b.rglob("*.safetensors"))
    for name in names:
        x, y = tensors(a / name), tensors(b / name)
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x), name
        assert safe_load_metadata(a / name) == safe_load_metadata(b / name), name


def reads_every(patch: pytest.MonkeyPatch, steps: int) -> None:
    """The window of `steps` steps, read when full (and before anything is written), never for the time passed."""
    patch.setattr(trainer_module, "LOSS_WINDOW", steps)
    patch.setattr(trainer_module, "READ_EVERY_S", math.inf)


def test_the_window_holds_every_steps_loss_in_order() -> None:
    window = LossWindow(4, None)

    @TinyJit
    def step(x: Tensor) -> Tensor:
        loss = x.sum().realize()
        window.record(loss)
        return loss

    values = np.random.default_rng(0).standard_normal((11, 3)).astype(np.float32)
    got = []
    window.start()
    for i, v in enumerate(values):
        step(Tensor(v))
        window.add(1, i + 1, None)
        if i in (2, 3, 6, 10):  # NOTE: reads at uneven points, across the wrap of the 4 slots
            got += window.read()
    assert [(s, loss) for _, s, _, loss in got] == [(i + 1, float(v.sum(dtype=np.float32))) for i, v in
                                                     enumerate(values)]  # fmt: skip
    assert window.last == got[-1][3]
    step(Tensor(values[0]))  # NOTE: a step outside a run: the next run starts where the device says
    window.start()
    step(Tensor(values[1]))
    window.add(1, 1, None)
    assert window.read()[0][3] == float(values[1].sum(dtype=np.float32))


def test_steps_are_not_read_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies from the device inside the training steps: one per window of 8 steps, where there was one per step."""
    reads, inside, real_step, real_numpy = [0], [False], Trainer._step, Tensor.numpy

    def step(self, *args, **kwargs):
        inside[0] = True
        try:
            real_step(self, *args, **kwargs)
        finally:
            inside[0] = False

    def numpy(self):
        reads[0] += inside[0]
        return real_numpy(self)

    reads_every(monkeypatch, 8)
    monkeypatch.setattr(Trainer, "_step", step)
    monkeypatch.setattr(Tensor, "numpy", numpy)
    trainer = Trainer.create(validate_file(SPECS / "digits_mlp.yaml", ["data.batch_size=16", "vars.hidden=32"]))
    trainer.fit(MetricsLog(new_run_folder(tmp_path, "run")), say=lambda line: None, on_step=lambda *a: None)
    assert trainer.total_steps == 15 * 89 and reads[0] == 15 * (89 // 8)


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two epochs and a bit (200 steps), the loss read after every step, as before the window."""
    with pytest.MonkeyPatch.context() as patch:
        reads_every(patch, 1)
        code, output, folder = train(tmp_path_factory.mktemp("straight"), *FAST, "--steps", "200")
    assert code == 0 and folder is not None, output
    return folder


def test_where_the_reads_fall_changes_nothing_written(tmp_path: Path, straight: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    reads_every(monkeypatch, 7)  # NOTE: epochs of 89 steps: windows that end anywhere in an epoch
    code, output, folder = train(tmp_path, *FAST, "--steps", "200")
    assert code == 0 and folder is not None, output
    assert records(folder) == records(straight)
    same_files(straight, folder)


@pytest.mark.parametrize("at", [13, 100])
def test_ctrl_c_between_reads_resumes_bit_identically(tmp_path: Path, straight: Path, at: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Ctrl-C at a step that is no read point (windows of 8: 13 and 89 + 11): the interrupted checkpoint holds every
    loss of its epoch so far, and the resumed run ends with the weights, checkpoints and metrics of the straight one."""
    calls = [0]

    @contextlib.contextmanager
    def pressed_at_step():
        def pressed() -> bool:
            calls[0] += 1
            return calls[0] == at

        yield pressed

    with monkeypatch.context() as patch:
        reads_every(patch, 8)
        patch.setattr(trainer_module, "_deferred_interrupt", pressed_at_step)
        code, output, folder = train(tmp_path, *FAST, "--steps", "200")
    assert code == 130 and folder is not None, output
    position = json.loads(safe_load_metadata(folder / "checkpoints" / "interrupted.safetensors")["position"])
    logged = [r["loss"] for r in records(straight) if r["split"] == "train" and at - position["skip"] < r["step"] <= at]
    assert position["step"] == at and position["losses"] == logged and len(logged) == position["skip"]
    with monkeypatch.context() as patch:
        reads_every(patch, 8)
        result = runner.invoke(app, ["train", "--resume", str(folder)])
    assert result.exit_code == 0, result.output
    assert records(folder) == records(straight)
    same_files(straight, folder)


def poisoned_after(patch: pytest.MonkeyPatch, step: int) -> None:
    """After the run's `step`-th step, a weight becomes NaN: the next step's loss is the first that is not finite."""
    real = Trainer._step

    def poisoning(self, log, pos, *args, **kwargs):
        real(self, log, pos, *args, **kwargs)
        if pos.step == step:
            weight = get_parameters(self.model)[0]
            weight.assign(Tensor.full(weight.shape, math.nan)).realize()

    patch.setattr(Trainer, "_step", poisoning)


@pytest.mark.parametrize(("window", "said"), [(1, "(epoch 3)"), (64, "(epoch 3; noticed at step 30, when the "
                                                                     "losses were read)")])  # fmt: skip
def test_a_non_finite_loss_names_its_step_and_writes_nothing_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      window: int, said: str) -> None:  # fmt: skip
    """Read after every step or once an epoch (10 steps), the error names step 23, the first whose loss is NaN, and the
    last good checkpoint; nothing later is written (epoch 3's checkpoint, model.safetensors)."""
    reads_every(monkeypatch, window)
    poisoned_after(monkeypatch, 22)
    code, output, folder = train(tmp_path, "--set", "train.log_every=1", spec="house_prices.yaml")
    assert code == 4 and folder is not None, output
    assert f"the loss became nan at step 23 {said}; last good checkpoint: " in " ".join(output.split())
    assert f"{folder}/checkpoints/epoch-00002.safetensors" in output.replace("\n", "")
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == ["best.safetensors",
                                                                           "epoch-00001.safetensors",
                                                                           "epoch-00002.safetensors"]  # fmt: skip
    assert not (folder / "model.safetensors").exists()
    assert [r["step"] for r in records(folder) if r["split"] == "train"] == list(range(1, 23))


def test_the_progress_bar_moves_every_step_and_shows_the_newest_loss_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal: before the first read there is no loss to show (a dash), then the newest one read."""
    import io

    import specgrad.cli.train as cli_train
    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr(cli_train, "Console", lambda: Console(file=screen, force_terminal=True, width=120))
    trainer = Trainer.create(validate_file(SPECS / "digits_mlp.yaml"))
    with cli_train._progress(trainer, 32) as (on_step, say):
        on_step(1, 1, None)
        on_step(1, 2, None)
        on_step(1, 3, 0.123456)
        say("a line")
    text = screen.getvalue()
    assert "loss -" in text and "step 3/" in text and "loss 0.1235" in text and "a line" in text
