"""Train a validated spec: its model, data, optimizer and schedule, one TinyJit-captured step, an evaluation per
epoch, and a run folder (resolved spec, metrics.jsonl, checkpoints written atomically, final model.safetensors).

Imports the public API (Tensor, TinyJit, nn, nn.optim, nn.state) and spec.builder, spec.data and spec.validate.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from specgrad import Tensor, TinyJit
from specgrad.nn import optim
from specgrad.nn.state import get_parameters, get_state_dict, safe_save
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

    def fit(self, run: Run, on_step: Callable[[int, int, float], None] | None = None) -> dict[str, float]:
        """Train for the configured epochs; log every epoch's train and validation metrics; checkpoint on cadence."""
        spec, t = self.spec, self.spec.values["train"]
        rng = np.random.default_rng(spec.values["seed"])
        checkpoint = t["checkpoint"] or {"every_epochs": 1, "keep": 3, "keep_best": True}
        step, last_good, valid = 0, None, {}
        for epoch in range(1, self.epochs + 1):
            start, losses = time.perf_counter(), []
            for x, y in batches(self.data.x_train, self.data.y_train, spec.batch_size, spec.values["data"]["shuffle"],
                                rng):  # fmt: skip
                loss = self.step_fn(Tensor(x), Tensor(y)).item()
                step += 1
                if not math.isfinite(loss):
                    raise NonFiniteLoss(
                        f"the loss became {loss} at step {step} (epoch {epoch}); last good checkpoint: "
                        f"{last_good or 'none'}. Try a lower train.lr or set train.clip_grad_norm"
                    )
                losses.append(loss)
                self.schedule.step()
                if on_step is not None:
                    on_step(epoch, step, loss)
            run.log({"split": "train", "epoch": epoch, "step": step, "loss": float(np.mean(losses)),
                     "lr": self.schedule.get_lr(), "examples_per_s": len(losses) * spec.batch_size /
                     (time.perf_counter() - start)})  # fmt: skip
            valid = self.evaluate()
            run.log({"split": "valid", "epoch": epoch, "step": step, **valid})
            if epoch % checkpoint["every_epochs"] == 0 or epoch == self.epochs:
                last_good = self.save_checkpoint(run.folder, epoch, checkpoint["keep"])
        safe_save(get_state_dict(self.model), run.folder / "model.safetensors",
                  metadata={"spec_hash": spec_hash(spec.values), "name": str(spec.values["name"])})  # fmt: skip
        return valid

    def save_checkpoint(self, folder: Path, epoch: int, keep: int) -> Path:
        """Model and optimizer state at the end of an epoch (atomic); only the newest `keep` are kept."""
        ckpts = folder / "checkpoints"
        ckpts.mkdir(exist_ok=True)
        path = ckpts / f"epoch-{epoch:05d}.safetensors"
        state = {
            **{f"model.{k}": v for k, v in get_state_dict(self.model).items()},
            **{f"optimizer.{k}": v for k, v in get_state_dict(self.opt).items() if not k.startswith("params.")},
        }
        safe_save(state, path, metadata={"epoch": str(epoch), "spec_hash": spec_hash(self.spec.values)})
        for old in sorted(ckpts.glob("epoch-*.safetensors"))[:-keep]:
            old.unlink()
        return path


def write_resolved_spec(spec: ValidSpec, folder: Path) -> None:
    """The spec as it was trained (after extends, vars and --set), with its hash."""
    text = yaml.safe_dump({"spec_hash": spec_hash(spec.values), **spec.values}, sort_keys=False)
    (folder / "spec.resolved.yaml").write_text(text)
