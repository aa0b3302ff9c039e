"""Train a validated spec: its model, data, optimizer and schedule, one TinyJit-captured step, an evaluation per
epoch, and a run folder (resolved spec, metrics.jsonl, checkpoints written atomically, final model.safetensors).

Imports the public API (Tensor, TinyJit, nn, nn.optim, nn.state) and spec.builder, spec.data and spec.validate.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from specgrad import Tensor, TinyJit
from specgrad.nn import optim
from specgrad.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save
from specgrad.spec.builder import Model, build_model
from specgrad.spec.data import Dataset, batches, eval_batches, load_data
from specgrad.spec.validate import ValidSpec


class NonFiniteLoss(RuntimeError):
    """Training produced a nan or inf loss; the message names the step and the last good checkpoint."""


@dataclass
class Run:
    """A training run's folder and what it recorded."""

    folder: Path
    metrics: list[dict[str, Any]] = field(default_factory=list)

    def log(self, record: dict[str, Any]) -> None:
        self.metrics.append(record)
        with open(self.folder / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")


def spec_hash(values: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


def new_run_folder(out: Path, name: str) -> Path:
    """out/<name>-<n>, the first n not taken."""
    out.mkdir(parents=True, exist_ok=True)
    n = 1
    while (out / f"{name}-{n}").exists():
        n += 1
    folder = out / f"{name}-{n}"
    folder.mkdir()
    return folder


def make_optimizer(model: Model, t: dict[str, Any]) -> optim.Optimizer:
    params = [p for p in get_parameters(model) if p.requires_grad]
    if t["optimizer"] == "sgd":
        return optim.SGD(params, lr=t["lr"], momentum=t["momentum"], weight_decay=t["weight_decay"],
                         nesterov=t["nesterov"])  # fmt: skip
    cls = optim.AdamW if t["optimizer"] == "adamw" else optim.Adam
    return cls(params, lr=t["lr"], weight_decay=t["weight_decay"])


def make_schedule(opt: optim.Optimizer, t: dict[str, Any], total_steps: int, steps_per_epoch: int
                  ) -> optim.LRScheduler:  # fmt: skip
    """The spec's schedule, stepped once per training step (step_size counts epochs), after any warm-up."""
    after_warmup = max(1, total_steps - t["warmup_steps"])
    schedules: dict[str, Callable[[], optim.LRScheduler]] = {
        "constant": lambda: optim.Constant(opt),
        "step": lambda: optim.StepLR(opt, step_size=t["step_size"] * steps_per_epoch, gamma=t["gamma"]),
        "exponential": lambda: optim.ExponentialLR(opt, gamma=t["gamma"] ** (1 / steps_per_epoch)),
        "cosine": lambda: optim.CosineAnnealingLR(opt, T_max=after_warmup, eta_min=t["min_lr"]),
    }
    schedule = schedules[t["schedule"]]()
    return optim.LinearWarmup(opt, t["warmup_steps"], after=schedule) if t["warmup_steps"] else schedule


def loss_fn(task: str, kind: str) -> Callable[[Tensor, Tensor], Tensor]:
    if task in ("classify", "language") and kind == "cross_entropy":
        return lambda out, y: out.reshape(-1, out.shape[-1]).sparse_categorical_crossentropy(y.reshape(-1))
    return lambda out, y: (out.reshape(y.shape) - y).square().mean()


def correct(task: str, out: Tensor, y: Tensor) -> Tensor:
    """How many predictions (per example, or per token) match their labels."""
    return (out.argmax(-1) == y).sum()


@dataclass
class Trainer:
    """Everything one training run needs, built from a validated spec."""

    spec: ValidSpec
    data: Dataset
    model: Model
    opt: optim.Optimizer
    step_fn: Callable[[Tensor, Tensor], Tensor]
    schedule: optim.LRScheduler
    epochs: int
    steps_per_epoch: int

    @staticmethod
    def create(spec: ValidSpec, epochs: int | None = None, steps: int | None = None) -> Trainer:
        data = load_data(spec)
        model = build_model(spec)
        t = spec.values["train"]
        steps_per_epoch = max(1, len(data.x_train) // spec.batch_size)
        if len(data.x_train) < spec.batch_size:
            raise ValueError(f"the training split has {len(data.x_train)} examples, fewer than one batch of "
                             f"{spec.batch_size}: lower data.batch_size")  # fmt: skip
        total = steps or t["steps"]
        n_epochs = epochs or (math.ceil(total / steps_per_epoch) if total else t["epochs"])
        total = total or n_epochs * steps_per_epoch
        opt = make_optimizer(model, t)
        loss_of = loss_fn(data.task, t["loss"])
        clip = t["clip_grad_norm"]

        @TinyJit
        def train_step(x: Tensor, y: Tensor) -> Tensor:
            with Tensor.train():
                loss = loss_of(model(x), y)
                opt.zero_grad()
                loss.backward()
                if clip is not None:
                    optim.clip_grad_norm_(opt.params, clip)
                opt.step()
            return loss.realize()

        schedule = make_schedule(opt, t, total, steps_per_epoch)
        return Trainer(spec, data, model, opt, train_step, schedule, n_epochs, steps_per_epoch)

    def evaluate(self) -> dict[str, float]:
        """Loss and accuracy (for classifiers and language models) on the validation split."""
        t, data = self.spec.values["train"], self.data
        loss_of, total_loss, hits, count, n = loss_fn(data.task, t["loss"]), 0.0, 0, 0, 0
        for x, y in eval_batches(data.x_valid, data.y_valid, self.spec.batch_size):
            out = self.model(Tensor(x))
            yt = Tensor(y)
            total_loss += loss_of(out, yt).item() * len(x)
            n += len(x)
            if data.task in ("classify", "language"):
                hits += int(correct(data.task, out, yt).item())
                count += int(np.prod(y.shape))
        ret = {"loss": total_loss / max(n, 1)}
        if count:
            ret["accuracy"] = hits / count
        return ret

    def fit(self, run: Run, on_step: Callable[[int, int, float], None] | None = None,
            resume: Path | None = None) -> dict[str, float]:  # fmt: skip
        """Train for the configured epochs (continuing from a checkpoint when resuming); log every epoch's train and
        validation metrics; checkpoint on cadence; stop early when the spec says so."""
        spec, t = self.spec, self.spec.values["train"]
        ckpt_cfg = t["checkpoint"] or {"every_epochs": 1, "keep": 3, "keep_best": True}
        cleanup_partial_files(run.folder)
        rng = np.random.default_rng(spec.values["seed"])
        first_epoch, step, best, stale, skip = 1, 0, None, 0, 0
        if resume is not None:
            first_epoch, step, best, stale, skip = self.load_checkpoint(resume, rng)
            first_epoch += 1
        last_good, valid = None, {}
        with _deferred_interrupt() as interrupted:
            for epoch in range(first_epoch, self.epochs + 1):
                start, losses, epoch_rng = time.perf_counter(), [], dict(rng.bit_generator.state)
                data = batches(
                    self.data.x_train, self.data.y_train, spec.batch_size, spec.values["data"]["shuffle"], rng
                )
                for i, (x, y) in enumerate(data):
                    if i < skip:
                        continue  # NOTE: resuming mid-epoch: these batches were trained before the interruption
                    loss = self.step_fn(Tensor(x), Tensor(y)).item()
                    step += 1
                    if not math.isfinite(loss):
                        raise NonFiniteLoss(f"the loss became {loss} at step {step} (epoch {epoch}); last good "
                                            f"checkpoint: {last_good or 'none'}. Try a lower train.lr or set "
                                            f"train.clip_grad_norm")  # fmt: skip
                    losses.append(loss)
                    if step % t["log_every"] == 0:
                        run.log({"split": "train", "epoch": epoch, "step": step, "loss": loss,
                                 "lr": self.schedule.get_lr()})  # fmt: skip
                    self.schedule.step()
                    if on_step is not None:
                        on_step(epoch, step, loss)
                    if interrupted():
                        state = (epoch - 1, step, best, stale, epoch_rng, i + 1)
                        raise Interrupted(self.save_checkpoint(run.folder / "checkpoints", "interrupted", state))
                skip = 0
                run.log({"split": "train_epoch", "epoch": epoch, "step": step, "loss": float(np.mean(losses)),
                         "lr": self.schedule.get_lr(), "examples_per_s": len(losses) * spec.batch_size /
                         (time.perf_counter() - start)})  # fmt: skip
                valid = self.evaluate()
                run.log({"split": "valid", "epoch": epoch, "step": step, **valid})
                watched = self._watched(valid)
                improved = best is None or self._better(watched, best)
                best, stale = (watched, 0) if improved else (best, stale + 1)
                state = (epoch, step, best, stale, dict(rng.bit_generator.state), 0)
                if epoch % ckpt_cfg["every_epochs"] == 0 or epoch == self.epochs:
                    last_good = self.save_checkpoint(run.folder / "checkpoints", f"epoch-{epoch:05d}", state)
                    prune(run.folder / "checkpoints", ckpt_cfg["keep"])
                if improved and ckpt_cfg["keep_best"]:
                    self.save_checkpoint(run.folder / "checkpoints", "best", state)
                stop = t["early_stopping"]
                if stop and stale >= stop["patience"]:
                    run.log({"split": "stop", "epoch": epoch, "step": step, "reason":
                             f"valid {stop['metric']} did not improve for {stop['patience']} epochs"})  # fmt: skip
                    break
        (run.folder / "checkpoints" / "interrupted.safetensors").unlink(missing_ok=True)
        safe_save(get_state_dict(self.model), run.folder / "model.safetensors", metadata=self.metadata())
        write_plot(run)
        return valid

    def _watched(self, valid: dict[str, float]) -> float:
        metric = (self.spec.values["train"]["early_stopping"] or {}).get("metric", "loss")
        return valid.get(metric, valid["loss"])

    def _better(self, value: float, best: float) -> bool:
        stop = self.spec.values["train"]["early_stopping"] or {"metric": "loss", "min_delta": 0.0}
        delta = stop["min_delta"]
        return value > best + delta if stop["metric"] == "accuracy" else value < best - delta

    def metadata(self) -> dict[str, str]:
        """What `specgrad run` needs besides the weights: the spec's hash and the training split's statistics."""
        stats = {k: np.asarray(v).tolist() for k, v in self.data.stats.items()}
        return {"spec_hash": spec_hash(self.spec.values), "name": str(self.spec.values["name"]),
                "task": self.data.task, "normalization": json.dumps(stats)}  # fmt: skip

    def save_checkpoint(self, folder: Path, name: str, state: tuple) -> Path:
        """Model, optimizer, data order and random state, written atomically (a crash leaves the previous file)."""
        epoch, step, best, stale, data_rng, skip = state
        folder.mkdir(exist_ok=True)
        path = folder / f"{name}.safetensors"
        tensors = {
            **{f"model.{k}": v for k, v in get_state_dict(self.model).items()},
            **{f"optimizer.{k}": v for k, v in get_state_dict(self.opt).items() if not k.startswith("params.")},
        }
        meta = {"epoch": str(epoch), "step": str(step), "best": json.dumps(best), "stale": str(stale),
                "data_rng": json.dumps(data_rng), "skip": str(skip),
                "tensor_rng": json.dumps(Tensor._rng.bit_generator.state),
                "spec_hash": spec_hash(self.spec.values)}  # fmt: skip
        safe_save(tensors, path, metadata=meta)
        return path

    def load_checkpoint(self, folder: Path, rng: np.random.Generator) -> tuple[int, int, float | None, int, int]:
        """Restore the newest checkpoint of a run folder (an epoch's, or the one an interruption wrote); refuse a
        damaged one or one from another spec. Returns (epochs done, steps done, best, stale, batches to skip)."""
        found = list((folder / "checkpoints").glob("epoch-*.safetensors"))
        found += list((folder / "checkpoints").glob("interrupted.safetensors"))
        if not found:
            raise ValueError(f"{folder} has no checkpoints to resume from")
        metas = {p: safe_load_metadata(p) for p in found}
        path = max(found, key=lambda p: int(metas[p].get("step", 0)))
        meta, tensors = metas[path], safe_load(path)  # NOTE: read whole before touching the model
        if meta.get("spec_hash") != spec_hash(self.spec.values):
            raise ValueError(f"{path} was written for a different spec (after --set and extends); resume with the "
                             f"spec.resolved.yaml of that run folder")  # fmt: skip
        load_state_dict(self.model, {k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        load_state_dict(self.opt, {k[10:]: v for k, v in tensors.items() if k.startswith("optimizer.")}, strict=False)
        rng.bit_generator.state = json.loads(meta["data_rng"])
        Tensor._rng.bit_generator.state = json.loads(meta["tensor_rng"])
        step = int(meta["step"])
        self.schedule.step(epoch=step)
        return int(meta["epoch"]), step, json.loads(meta["best"]), int(meta["stale"]), int(meta.get("skip", 0))


class Interrupted(Exception):
    """Ctrl-C: training stopped after a whole step; `path` is the checkpoint written for --resume."""

    def __init__(self, path: Path):
        super().__init__(str(path))
        self.path = path


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[Callable[[], bool]]:
    """Ctrl-C sets a flag the loop reads between steps, so a step is never cut in half."""
    pressed = [False]
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.__setitem__(0, True))
    try:
        yield lambda: pressed[0]
    finally:
        signal.signal(signal.SIGINT, previous)


def cleanup_partial_files(folder: Path) -> None:
    """Temporary files a crash left behind while writing (complete files are renamed into place)."""
    for tmp in list(folder.glob(".*.safetensors.*")) + list((folder / "checkpoints").glob(".*.safetensors.*")):
        tmp.unlink(missing_ok=True)


def prune(folder: Path, keep: int) -> None:
    for old in sorted(folder.glob("epoch-*.safetensors"))[:-keep]:
        old.unlink()


def write_plot(run: Run) -> None:
    """metrics.png: loss (and accuracy) per epoch, when matplotlib is installed (an optional extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed, so there is no metrics.png (pip install 'specgrad[plot]')")
        return
    names = ["loss"] + (["accuracy"] if any("accuracy" in r for r in run.metrics) else [])
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for split in ("train_epoch", "valid"):
            rows = [r for r in run.metrics if r["split"] == split and name in r]
            if rows:
                ax.plot([r["epoch"] for r in rows], [r[name] for r in rows], label=split)
        ax.set_title(name)
        ax.set_xlabel("epoch")
        ax.legend()
    fig.tight_layout()
    fig.savefig(run.folder / "metrics.png")
    plt.close(fig)


def write_resolved_spec(spec: ValidSpec, folder: Path) -> None:
    """The spec as it was trained (after extends, vars and --set), with its hash."""
    text = yaml.safe_dump({"spec_hash": spec_hash(spec.values), **spec.values}, sort_keys=False)
    (folder / "spec.resolved.yaml").write_text(text)
