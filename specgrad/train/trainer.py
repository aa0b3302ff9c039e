"""Train a validated spec: its model, data, optimizer and schedule, one TinyJit-captured step, an evaluation per
epoch, and a run folder (see train.run_folder): metrics, checkpoints written atomically, the final weights.

A run is exactly train.steps optimizer steps (or train.epochs whole epochs); the last epoch may be partial. Its
position (epochs and steps done, the data order's and dropout's random state, the best metric) is in every
checkpoint, so --resume continues from the newest one and ends with the same weights as an uninterrupted run.

Imports the public API (Tensor, TinyJit, nn, nn.optim, nn.state) and modelspec.builder, train.data, train.run_folder and
modelspec.validate.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specgrad import Tensor, TinyJit
from specgrad.helpers import NonFiniteLoss, atomic_write
from specgrad.modelspec.builder import Model, build_model
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import ValidSpec, higher_is_better, is_metric, run_steps
from specgrad.modelspec.weights import check_init_layout
from specgrad.nn import optim
from specgrad.nn.state import (
    SafetensorsError,
    StateMismatch,
    get_parameters,
    get_state_dict,
    load_state_dict,
    safe_load,
    safe_save,
    safetensors_bytes,
    snapshot,
)
from specgrad.train.data import FLOAT32_MAX, Dataset, batches, eval_batches, fields, load_data
from specgrad.train.evaluation import chosen
from specgrad.train.feed import Batches, DeviceFeed, draw_order, held_batches, make_feed
from specgrad.train.folder_io import regular_file
from specgrad.train.metrics import asked_metrics, check_metrics, class_weights, reported_metrics
from specgrad.train.plots import MISSING, metrics_png
from specgrad.train.run_folder import (
    CHECKPOINTS,
    FINAL,
    MAX_REASON,
    MetricsLog,
    checkpoint_folder,
    checkpoints,
    cleanup_partial_files,
    data_layout,
    extensions,
    newest_checkpoint,
    prune,
    spec_hash,
    unusable,
)
from specgrad.train.validation import SlotPass
from specgrad.train.writer import EpochWriter

LossFn = Callable[[Tensor, Tensor], Tensor]
# NOTE: what the data decides
DATA_META = ("task", "normalization", "target_normalization", "class_names", "columns", "outputs")


def make_optimizer(model: Model, t: dict[str, Any]) -> optim.Optimizer:
    params = [p for p in get_parameters(model) if p.requires_grad]
    if not params:
        raise SpecError.at(None, "the model has no trainable weights: every layer with weights says trainable: false",
                           "let at least one layer train (remove trainable: false from it)")  # fmt: skip
    scales = [model.lr_scales.get(id(p), 1.0) for p in params]
    if t["optimizer"] == "sgd":
        return optim.SGD(params, lr=t["lr"], momentum=t["momentum"], weight_decay=t["weight_decay"],
                         nesterov=t["nesterov"], lr_scales=scales)  # fmt: skip
    cls = optim.AdamW if t["optimizer"] == "adamw" else optim.Adam
    return cls(params, lr=t["lr"], weight_decay=t["weight_decay"], lr_scales=scales)


def make_schedule(opt: optim.Optimizer, t: dict[str, Any], total_steps: int, steps_per_epoch: int
                  ) -> optim.LRScheduler:  # fmt: skip
    """The spec's schedule, stepped once per training step (step_size counts epochs), after any warm-up; it spans
    the run's real number of steps."""
    after_warmup = max(1, total_steps - t["warmup_steps"])
    schedules: dict[str, Callable[[], optim.LRScheduler]] = {
        "constant": lambda: optim.Constant(opt),
        "step": lambda: optim.StepLR(opt, step_size=t["step_size"] * steps_per_epoch, gamma=t["gamma"]),
        "exponential": lambda: optim.ExponentialLR(opt, gamma=t["gamma"] ** (1 / steps_per_epoch)),
        "cosine": lambda: optim.CosineAnnealingLR(opt, T_max=after_warmup, eta_min=t["min_lr"]),
    }
    schedule = schedules[t["schedule"]]()
    return optim.LinearWarmup(opt, t["warmup_steps"], after=schedule) if t["warmup_steps"] else schedule


@dataclass(frozen=True)
class OutputLoss:
    """One output's part of the training objective: its task, weight, and (what training minimises, what is
    reported): the same, except for standardized regression targets, reported in the target's own units. `loss` is
    its kind (train.loss), `hits` counts a classifier's right answers, `metrics` are the figures the validation pass
    reports for it besides its loss (computed from its outputs where `from_outputs`)."""

    name: str
    task: str
    weight: float
    train: LossFn
    reported: LossFn
    loss: str = "cross_entropy"
    hits: LossFn = field(default=lambda out, y: correct(out, y))
    metrics: tuple[str, ...] = ()
    class_weights: np.ndarray | None = None  # NOTE: train.class_weights, one per class; the loss is their weighted mean

    def weight_sum(self, out: Tensor, y: Tensor) -> Tensor:
        """The sum of w[label] over a batch, as the weighted loss divides by it, so that the validation loss is the
        split's weighted mean (the batches' sums of w x loss over the sum of w), whatever the batch size."""
        assert self.class_weights is not None
        w = self.class_weights.astype(np.float32)
        if self.loss == "binary_cross_entropy":
            return (y.reshape(-1).cast(out.dtype) * float(w[1] - w[0]) + float(w[0])).sum()
        return (y.reshape(-1).one_hot(len(w)).cast(out.dtype) * Tensor(w)).sum()

    @property
    def from_outputs(self) -> bool:
        """Whether a figure needs the whole split's outputs (accuracy comes from hits, a mse's rmse from its loss)."""
        return any(m not in ("accuracy", "loss") and not (m == "rmse" and self.loss == "mse") for m in self.metrics)


def make_losses(task: str, kind: str, target_stats: dict[str, np.ndarray], shape: tuple[int, ...], delta: float = 1.0,
                class_weights: np.ndarray | None = None) -> tuple[LossFn, LossFn]:  # fmt: skip
    """(what training minimises, what is reported) for targets of `shape` per example. A regression's reported loss is
    in the target's units (its standardized residual r times std: mse r^2 std^2, mae |r| std, huber std^2 times the
    huber of r with delta / std, which is the huber of the residual in units with `delta`)."""
    if task in ("classify", "language") and kind in ("cross_entropy", "binary_cross_entropy"):
        ce = _binary_ce(class_weights) if kind == "binary_cross_entropy" else _cross_entropy(class_weights)
        return ce, ce
    std = np.asarray(target_stats.get("std", np.ones(1)), dtype=np.float64).reshape(-1)
    per = std.size == math.prod(shape)
    if kind == "mse":
        mse: LossFn = lambda out, y: (out.reshape(y.shape) - y).square().mean()
        if "std" not in target_stats:
            return mse, mse
        scale = Tensor((std**2).astype(np.float32).reshape(shape if per else -1))
        return mse, lambda out, y: ((out.reshape(y.shape) - y).square() * scale).mean()
    if kind == "mae":
        units = Tensor(std.astype(np.float32).reshape(shape if per else -1))
        return lambda out, y: (out.reshape(y.shape) - y).abs().mean(), \
            lambda out, y: ((out.reshape(y.shape) - y).abs() * units).mean()  # fmt: skip
    d = Tensor((delta / std).astype(np.float32).reshape(shape if per else -1))
    scale = Tensor((std**2).astype(np.float32).reshape(shape if per else -1))
    return lambda out, y: _huber(out.reshape(y.shape) - y, d).mean(), \
        lambda out, y: (_huber(out.reshape(y.shape) - y, d) * scale).mean()  # fmt: skip


def _huber(r: Tensor, d: Tensor) -> Tensor:
    """PyTorch's HuberLoss per value: r^2 / 2 within d, d (|r| - d / 2) beyond."""
    a = r.abs()
    return (a <= d).where(r.square() * 0.5, d * (a - d * 0.5))


def _cross_entropy(class_weights: np.ndarray | None) -> LossFn:
    """Mean cross-entropy; with class weights, PyTorch's: sum of w[y] * nll over the sum of w[y]."""
    if class_weights is None:
        return lambda out, y: out.reshape(-1, out.shape[-1]).sparse_categorical_crossentropy(y.reshape(-1))
    w = Tensor(class_weights.astype(np.float32))

    def weighted_ce(out: Tensor, y: Tensor) -> Tensor:
        hot = y.reshape(-1).one_hot(len(class_weights)).cast(out.dtype)
        wy = (hot * w).sum(-1)
        return -((out.reshape(-1, out.shape[-1]).log_softmax(-1) * hot).sum(-1) * wy).sum() / wy.sum()

    return weighted_ce


def _binary_ce(class_weights: np.ndarray | None) -> LossFn:
    """Binary cross-entropy of one logit per example against labels 0 and 1; with class weights, the sum of w[y] times
    each example's over the sum of w[y] (as the weighted cross_entropy)."""
    if class_weights is None:
        return lambda out, y: out.reshape(-1).binary_crossentropy_logits(y.reshape(-1).cast(out.dtype))
    w0, w1 = (float(v) for v in class_weights.astype(np.float32))

    def weighted_bce(out: Tensor, y: Tensor) -> Tensor:
        x, t = out.reshape(-1), y.reshape(-1).cast(out.dtype)
        wy = t * (w1 - w0) + w0
        return ((x.relu() - x * t + (1 + (-x.abs()).exp()).log()) * wy).sum() / wy.sum()

    return weighted_bce


def binary_correct(out: Tensor, y: Tensor) -> Tensor:
    """How many labels a single logit gets right: class 1 where it is above 0."""
    return ((out.reshape(y.shape) > 0).cast(y.dtype) == y).sum()


def output_losses(spec: ValidSpec, data: Dataset) -> list[OutputLoss]:
    """Every output's loss, in the order of the model's outputs: the data's heads (several outputs), else the spec's
    one loss for the one output, with the metrics it reports."""
    t = spec.values["train"]
    delta = t.get("huber_delta", 1.0)
    weights = None
    if data.heads:
        shape = {o: data.y_train.dtype[o].shape for o in data.heads}
        parts = [(o, h.task, h.weight, h.loss, make_losses(h.task, h.loss, h.target_stats, shape[o], delta))
                 for o, h in data.heads.items()]  # fmt: skip
    else:
        weights = class_weights(spec, data)
        ((name, (loss, _)),) = spec.losses.items()
        made = make_losses(data.task, loss, data.target_stats, data.y_train.shape[1:], delta, weights)
        parts = [(name, data.task, 1.0, loss, made)]
    asked = asked_metrics(spec)
    return [OutputLoss(o, task, w, *fns, loss, binary_correct if loss == "binary_cross_entropy" else correct,
                       reported_metrics(task, loss, asked), weights) for o, task, w, loss, fns in parts]  # fmt: skip


def weighted(losses: list[OutputLoss], outs: tuple[Tensor, ...], ys: list[Tensor], reported: bool = False) -> Tensor:
    """The total loss: the weighted sum of every output's (one output: its loss itself)."""
    parts = [(x.reported if reported else x.train)(out, y) for x, out, y in zip(losses, outs, ys)]
    if len(parts) == 1:
        return parts[0]
    return sum((p * x.weight for p, x in zip(parts[1:], losses[1:])), parts[0] * losses[0].weight)


def _plain(stats: dict[str, np.ndarray]) -> dict[str, Any]:
    return {k: np.asarray(v).tolist() for k, v in stats.items()}


def _listed(stats: dict[str, np.ndarray]) -> str:
    return json.dumps(_plain(stats))


def correct(out: Tensor, y: Tensor) -> Tensor:
    """How many predictions (per example, or per token) match their labels."""
    return (out.argmax(-1) == y).sum()


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass
class Position:
    """Where a run stands; every checkpoint records it (as JSON in its metadata)."""

    epoch: int = 0  # epochs finished
    step: int = 0  # optimizer steps taken
    skip: int = 0  # batches of epoch + 1 already trained (an interruption mid-epoch)
    data_rng: dict[str, Any] | None = None  # the data order's generator at the start of epoch + 1
    losses: list[float] = field(default_factory=list)  # the training losses of epoch + 1 so far
    best: float | None = None  # the best value of the watched metric, and the epoch it came from
    best_epoch: int | None = None
    ref: float | None = None  # the value early stopping compares with: the last that improved by more than min_delta
    stale: int = 0  # epochs since the watched metric last improved by more than min_delta
    stopped: str | None = None  # why training stopped before its last step (early stopping)

    def to_meta(self) -> dict[str, str]:
        return {"position": json.dumps(asdict(self)), "epoch": str(self.epoch), "step": str(self.step)}

    @staticmethod
    def from_meta(meta: dict[str, str]) -> Position:
        """The position a checkpoint's metadata records; a BadMetadata when it is not one specgrad writes (the
        checksums cover the tensors, not the metadata)."""
        fields = from_json(meta, "position")
        if not isinstance(fields, dict) or set(fields) != set(POSITION_TYPES):
            raise BadMetadata("its position does not have the fields specgrad writes")
        for k, types in POSITION_TYPES.items():
            v = fields[k]
            if not isinstance(v, types) or isinstance(v, bool) or (isinstance(v, int) and not 0 <= v < 1 << 62):
                raise BadMetadata(f"its position's {k} is not what specgrad writes")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in fields["losses"]):
            raise BadMetadata("its position's losses are not numbers")
        if fields["data_rng"] is not None:
            check_rng_state(fields["data_rng"], "its position's data order")
        return Position(**fields)


class BadMetadata(ValueError):
    """A checkpoint's metadata is not what specgrad writes (damage, or an edit): bad input, never a bug."""


def check_position(pos: Position, meta: dict[str, str], name: str, steps_per_epoch: int, total_steps: int,
                   early_stopping: bool) -> None:  # fmt: skip
    """A BadMetadata naming the field, unless `pos` is a position specgrad writes into the checkpoint `name` of this
    run (its steps per epoch and last step): the end of an epoch (epoch-NNNNN, best), or an interruption after a
    whole step (interrupted). Then a resumed run ends exactly at its last step, as an uninterrupted one does."""
    spe, last = steps_per_epoch, math.ceil(total_steps / steps_per_epoch)
    if meta.get("step") != str(pos.step) or meta.get("epoch") != str(pos.epoch):
        raise BadMetadata(f"its step and epoch metadata differ from its position's step {pos.step} and epoch "
                          f"{pos.epoch}")  # fmt: skip
    if pos.epoch > last:
        raise BadMetadata(f"its position's epoch {pos.epoch} is past the run's last epoch, {last}")
    if pos.step > total_steps:
        raise BadMetadata(f"its position's step {pos.step} is past the run's last step, {total_steps}")
    if pos.skip > spe:
        raise BadMetadata(f"its position's skip {pos.skip} is more than the {spe} batches of an epoch")
    at = pos.epoch * spe + pos.skip if pos.skip else min(pos.epoch * spe, total_steps)
    if pos.step != at or (pos.skip and pos.step >= total_steps):
        raise BadMetadata(f"its position's step {pos.step} does not follow from its epoch {pos.epoch} and skip "
                          f"{pos.skip} (an epoch is {plural(spe, 'step')} of the run's {total_steps})")  # fmt: skip
    if (pos.skip > 0) != (name == "interrupted.safetensors"):
        raise BadMetadata(f"its position's skip {pos.skip} is not what specgrad writes into {name}")
    if name.startswith("epoch-") and name != f"epoch-{pos.epoch:05d}.safetensors":
        raise BadMetadata(f"its position's epoch {pos.epoch} is not the epoch its name says")
    if len(pos.losses) != pos.skip or not all(math.isfinite(x) for x in pos.losses):
        raise BadMetadata(f"its position's losses are not one finite loss for each of the {pos.skip} batches it "
                          "skips")  # fmt: skip
    _check_best(pos, early_stopping)


def _check_best(pos: Position, early_stopping: bool) -> None:
    """The best epoch and early stopping's state, as the end of an epoch leaves them."""
    if (pos.best is None) != (pos.best_epoch is None) or (pos.best is None) != (pos.ref is None):
        raise BadMetadata("its position's best, best_epoch and ref are not all set or all unset")
    for name, value in (("best", pos.best), ("ref", pos.ref)):  # NOTE: a loss or an accuracy, as float32 gave it
        # NOTE: NaN or infinity too: a first epoch whose validation loss overflowed is still the best so far
        # NOTE: R^2 may be below 0
        if value is not None and not (math.isnan(value) or value == math.inf or -FLOAT32_MAX <= value <= FLOAT32_MAX):
            raise BadMetadata(f"its position's {name} is not a value a loss or a metric takes")
    if pos.best_epoch is not None and not 1 <= pos.best_epoch <= pos.epoch:
        raise BadMetadata(f"its position's best_epoch {pos.best_epoch} is not one of its {plural(pos.epoch, 'epoch')}")
    if pos.stale > pos.epoch:
        raise BadMetadata(f"its position's stale {pos.stale} counts more epochs than its {pos.epoch}")
    if pos.stopped is not None and (not early_stopping or pos.skip or not pos.stopped or len(pos.stopped) > MAX_REASON):
        raise BadMetadata("its position says it stopped early, which this run's spec or position rules out")


# NOTE: each field's JSON types, as Position.to_meta writes them (an int field is a count: 0 <= v < 2**62)
POSITION_TYPES: dict[str, tuple[type, ...]] = {
    "epoch": (int,), "step": (int,), "skip": (int,), "data_rng": (dict, type(None)), "losses": (list,),
    "best": (float, int, type(None)), "best_epoch": (int, type(None)), "ref": (float, int, type(None)),
    "stale": (int,), "stopped": (str, type(None))}  # fmt: skip


def from_json(meta: dict[str, str], key: str) -> Any:
    """The JSON value of a checkpoint's metadata key, or a BadMetadata naming the key."""
    try:
        return json.loads(meta[key])
    except (KeyError, ValueError, RecursionError):
        raise BadMetadata(f"its {key} is not the JSON specgrad writes") from None


def check_rng_state(state: Any, what: str) -> None:
    """A random generator's state as numpy gives it (PCG64), or a BadMetadata saying `what` it is not."""
    try:
        np.random.PCG64().state = state
    except (TypeError, ValueError, KeyError, OverflowError):
        raise BadMetadata(f"{what} is not a random generator's state") from None


@dataclass
class Summary:
    """How a run ended: the last validation metrics, the best one, and which weights are final."""

    valid: dict[str, float]
    metric: str
    best: float | None
    best_epoch: int | None
    final: str  # "best" or "last": what model.safetensors holds
    chosen: str  # what train.final_weights asked for
    final_epoch: int
    stopped: str | None
    weights: Path
    last_checkpoint: Path | None


LOSS_WINDOW = 64  # NOTE: steps whose losses the device holds between two reads by the host
READ_EVERY_S = 0.25  # NOTE: the host reads them at least this often too (the progress bar's loss)
OnStep = Callable[[int, int, float | None], None]  # NOTE: (epoch, step, the newest training loss read)


class LossWindow:
    """The training losses the host has not read yet, kept on the device. The captured step writes its loss into the
    slot a device-side counter names and moves the counter on (no host input per step); the host reads the whole
    window at once, when it is full or READ_EVERY_S has passed, and before anything is written. So a step costs no
    host synchronisation (a stall on a GPU), and every step's loss is still known: one per slot."""

    def __init__(self, size: int, device: str | None):
        # NOTE: from numpy, not Tensor.zeros(...).contiguous(): the lazy cache gives equal-shaped ones one buffer
        self.size, self.values = size, Tensor(np.zeros(size, np.float32), device=device)  # (size,) losses by slot
        self.slot = Tensor(np.zeros((), np.int32), device=device)  # NOTE: where the next step's loss goes
        self.index = Tensor(np.arange(size, dtype=np.int32), device=device)
        self.first = 0  # NOTE: the slot of the first step not read yet
        self.unread: list[tuple[int, int, float | None]] = []  # NOTE: (epoch, step, lr if it is logged) of each
        self.read_at, self.last = time.perf_counter(), None  # NOTE: when it was last read, and the newest loss read

    def record(self, loss: Tensor) -> None:
        """Inside the captured step: `loss` into the current slot, then the counter on to the next one."""
        value = loss.detach().reshape(()).cast(self.values.dtype)  # NOTE: exact: the loss is float32 or narrower
        self.values.assign((self.index == self.slot).where(value, self.values))
        self.values.realize()
        self.slot.assign((self.slot == self.size - 1).where(0, self.slot + 1)).realize()  # NOTE: one kernel

    def start(self) -> None:
        """Before a run's first step: the slot the next loss goes into (the step function may have run before)."""
        self.first, self.unread, self.read_at = int(self.slot.item()), [], time.perf_counter()

    def add(self, epoch: int, step: int, lr: float | None) -> bool:
        """A step has run; whether the window is due to be read."""
        self.unread.append((epoch, step, lr))
        return len(self.unread) >= self.size or time.perf_counter() - self.read_at >= READ_EVERY_S

    def read(self) -> list[tuple[int, int, float | None, float]]:
        """(epoch, step, lr or None, loss) of each step not read yet, in step order: one copy from the device."""
        if not self.unread:
            return []
        values = self.values.numpy().tolist()  # NOTE: float32 as Python floats, exactly as .item() gives them
        ret = [(*s, values[(self.first + k) % self.size]) for k, s in enumerate(self.unread)]
        self.first = (self.first + len(self.unread)) % self.size
        self.unread, self.read_at, self.last = [], time.perf_counter(), ret[-1][3]
        return ret


@dataclass
class Trainer:
    """Everything one training run needs, built from a validated spec."""

    spec: ValidSpec
    data: Dataset
    model: Model
    opt: optim.Optimizer
    step_fn: Callable[[list[Tensor], list[Tensor]], Tensor]
    schedule: optim.LRScheduler
    total_steps: int
    steps_per_epoch: int
    losses: list[OutputLoss]  # one per output, in the model's order
    history: LossWindow  # the training losses not read yet, which the captured step writes on the device
    validation: SlotPass | None = None  # the captured validation pass, made by evaluate for its split's batches
    # the validation split's batches, made once for the split's arrays (None: they did not fit, see held_batches)
    valid_batches: tuple[np.ndarray, np.ndarray, Batches | None] | None = None
    writer: EpochWriter = field(default_factory=EpochWriter)  # the end-of-epoch files, written while training goes on

    @property
    def epochs(self) -> int:
        """Epochs the run touches: the last may be partial."""
        return math.ceil(self.total_steps / self.steps_per_epoch)

    @property
    def train(self) -> dict[str, Any]:
        return self.spec.values["train"]

    @staticmethod
    def create(spec: ValidSpec, init: bool = True) -> Trainer:
        """Data, model, optimizer and the captured step; `init` loads the spec's init: weights (a resumed run loads
        its checkpoint instead)."""
        data = load_data(spec)
        if init and not data.heads and (problems := check_init_layout(spec, *data_layout(data), run_steps)):
            raise SpecError(problems)  # NOTE: names and shapes agree, but the run read other columns or classes
        model = build_model(spec, init=init)
        t = spec.values["train"]
        if len(data.x_train) < spec.batch_size:
            raise SpecError.at(None, f"the training split has {len(data.x_train)} examples, fewer than one batch of "
                               f"{spec.batch_size}", "lower data.batch_size")  # fmt: skip
        steps_per_epoch = len(data.x_train) // spec.batch_size
        total = t["steps"] or t["epochs"] * steps_per_epoch
        opt = make_optimizer(model, t)
        check_metrics(spec, data)
        losses = output_losses(spec, data)
        same = all(x.reported is x.train for x in losses)
        clip = t["clip_grad_norm"]

        @TinyJit
        def train_step(xs: list[Tensor], ys: list[Tensor]) -> Tensor:
            with Tensor.train():
                outs = model.outputs(*xs)
                loss = weighted(losses, outs, ys)
                opt.zero_grad()
                loss.backward()
                # NOTE: realized before the step, in a schedule of its own (the step would store it too, as every
                # value a Tensor still holds: schedule.py, _add_assign_readers)
                reported = (loss if same else weighted(losses, tuple(o.detach() for o in outs), ys, True)).realize()
                if clip is not None:
                    optim.clip_grad_norm_(opt.params, clip)
                opt.step()
                history.record(reported)
            return reported

        history = LossWindow(LOSS_WINDOW, opt.device)  # NOTE: beside the weights
        schedule = make_schedule(opt, t, total, steps_per_epoch)
        return Trainer(spec, data, model, opt, train_step, schedule, total, steps_per_epoch, losses, history)

    def tensors(self, x: np.ndarray, y: np.ndarray) -> tuple[list[Tensor], list[Tensor]]:
        """A batch as the model's inputs and the outputs' targets."""
        return [Tensor(a) for a in fields(x, list(self.spec.inputs))], \
            [Tensor(a) for a in fields(y, [part.name for part in self.losses])]  # fmt: skip

    def evaluate(self) -> dict[str, float]:
        """Loss (in the target's units) and accuracy (for classifiers and language models) on the validation split;
        with several outputs, the weighted total loss, and each output's loss and accuracy as <output>.loss and
        <output>.accuracy. The pass is captured once per batch shape and replayed (train.validation), its figures read
        once at the end; they are an uncaptured pass's, bit for bit: each batch's float32 loss times its examples,
        summed in float64 in batch order (with train.class_weights, times the batch's sum of weights, over the split's
        sum: the split's weighted mean, as spec.md says), and exact hit counts."""
        data, size, n = self.data, self.spec.batch_size, len(self.data.x_valid)
        lengths = [min(size, n - i) for i in range(0, n, size)]
        counted = [x.task in ("classify", "language") for x in self.losses]
        if self.validation is None or self.validation.batches != len(lengths):  # NOTE: a slot per batch
            self.validation = SlotPass(self._measure, len(lengths))
        held = self.valid_batches
        if held is None or held[0] is not data.x_valid or held[1] is not data.y_valid:  # NOTE: once per split
            names = list(self.spec.inputs), [part.name for part in self.losses]
            held = self.valid_batches = (data.x_valid, data.y_valid, held_batches(data.x_valid, data.y_valid, *names,
                                                                                  size))  # fmt: skip
        pairs = held[2] or (self.tensors(x, y) for x, y in eval_batches(data.x_valid, data.y_valid, size))
        read = self.validation.run(pairs)  # NOTE: none without examples
        figures = iter([v.tolist() for v in read[: len(read) - sum(x.from_outputs for x in self.losses)]])
        outputs = iter(read[len(read) - sum(x.from_outputs for x in self.losses) :])
        per: dict[str, dict[str, float]] = {}
        for part, has_hits in zip(self.losses, counted):
            loss, values = 0.0, next(figures, [])
            if part.class_weights is not None:  # NOTE: the split's weighted mean: sum of w x loss over sum of w
                sums = next(figures, [])
                total = math.fsum(sums)
                per[part.name] = {"loss": math.fsum(v * w for v, w in zip(values, sums)) / total if total else 0.0}
            else:
                for value, m in zip(values, lengths):
                    loss += value * m  # NOTE: the float32 loss as .item() gives it, times the batch's examples
                per[part.name] = {"loss": loss / max(n, 1)}
            if has_hits:
                hits, labels = sum(next(figures, [])), self._labels(part.name)
                per[part.name] |= {"accuracy": hits / labels} if labels else {}
            if part.loss == "mse" and "rmse" in part.metrics and n:  # NOTE: the mean squared error, in units
                per[part.name]["rmse"] = math.sqrt(per[part.name]["loss"])
            if part.from_outputs and n:
                per[part.name] |= self._from_outputs(part, next(outputs), n)
        if len(per) == 1:
            return next(iter(per.values()))
        ret = {"loss": sum(per[x.name]["loss"] * x.weight for x in self.losses)}
        return ret | {f"{name}.{k}": v for name, metrics in per.items() for k, v in metrics.items()}

    def _measure(self, xs: list[Tensor], ys: list[Tensor]) -> list[Tensor]:
        """One validation batch's figures, in the order evaluate reads them: per output its reported loss, its sum of
        class weights (with train.class_weights), then (for classifiers and language models) its hit count, each
        realized as .item() realizes it and in the same order, so the kernels, and their results, are those of an
        uncaptured pass. Last, the outputs of those whose metrics need the whole split (F1, AUC, R^2, ...),
        (batch_size, values) each: a shorter last batch padded with zeros, so every batch fills a slot of one shape,
        and the pass reads them once (train.validation)."""
        ret, kept = [], []
        for part, out, y in zip(self.losses, self.model.outputs(*xs), ys):
            ret.append(part.reported(out, y).contiguous().realize())
            if part.class_weights is not None:
                ret.append(part.weight_sum(out, y).contiguous().realize())
            if part.task in ("classify", "language"):
                ret.append(part.hits(out, y).contiguous().realize())
            if part.from_outputs:
                flat = out.reshape(out.shape[0], -1)
                kept.append(flat.pad(((0, self.spec.batch_size - flat.shape[0]), None)).contiguous().realize())
        return ret + kept

    def _from_outputs(self, part: OutputLoss, outputs: np.ndarray, n: int) -> dict[str, float]:
        """The metrics of one output that need the whole split, from its outputs as the pass read them (batches,
        batch_size, values), against the validation targets; an undefined one (R^2 of a constant target) is left
        out."""
        y = self.data.y_valid
        truth = y[part.name] if y.dtype.names else y
        out = outputs.reshape(-1, outputs.shape[-1])[:n]
        stats = self.data.heads[part.name].target_stats if self.data.heads else self.data.target_stats
        wanted = tuple(m for m in part.metrics if m != "accuracy" and not (m == "rmse" and part.loss == "mse"))
        with np.errstate(all="ignore"):
            figures = chosen(part.task, wanted, out, truth, stats if part.task == "regress" else None)
        return {k: v for k, v in figures.items() if v is not None}

    def _labels(self, name: str) -> int:
        """How many labels the validation split holds for one output (examples, times tokens for a language model)."""
        y = self.data.y_valid
        return int((y[name] if y.dtype.names else y).size)

    # *** the loop ***

    def fit(self, log: MetricsLog, resume: bool = False, on_step: OnStep | None = None,
            say: Callable[[str], None] = print) -> Summary:  # fmt: skip
        """Train until the run's last step (continuing from the newest checkpoint when resuming), evaluating and
        checkpointing after every epoch, stopping early when the spec says so. `on_step(epoch, step, loss)` follows
        every step with the newest training loss read (see LossWindow; None before the first read)."""
        folder = log.folder
        checkpoint_folder(folder)  # NOTE: a link in its place is refused before anything is read or cleaned up there
        cleanup_partial_files(folder)
        pos = self.restore(folder, say) if resume else Position()
        if resume:
            log.rewind(pos.step, pos.epoch)
        rng = np.random.default_rng(self.spec.values["seed"])
        if pos.data_rng is not None:
            rng.bit_generator.state = pos.data_rng
        valid = next((r for r in reversed(log.records) if r["split"] == "valid"), {})
        self.history.start()
        names = list(self.spec.inputs), [part.name for part in self.losses]
        feed = make_feed(self.data.x_train, self.data.y_train, *names, self.spec.batch_size, augment=self.data.augment)
        self.writer = EpochWriter()
        try:
            summary = self._loop(log, pos, rng, feed, valid, on_step, say)
        except BaseException:
            self.writer.close(raise_error=False)  # NOTE: the finished epochs' files are still written
            raise
        self.writer.close()
        return summary

    def _loop(self, log: MetricsLog, pos: Position, rng: np.random.Generator, feed: DeviceFeed | None,
              valid: dict[str, float], on_step: OnStep | None, say: Callable[[str], None]) -> Summary:  # fmt: skip
        folder = log.folder
        with _deferred_interrupt() as interrupted:
            while pos.step < self.total_steps and pos.stopped is None:
                epoch, start, pos.data_rng = pos.epoch + 1, time.perf_counter(), dict(rng.bit_generator.state)
                for i, xs, ys in self._batches(feed, rng, pos.skip):
                    self._step(log, pos, epoch, xs, ys, on_step)
                    if pos.step == self.total_steps:
                        break
                    if interrupted():
                        self._read_losses(log, pos)
                        pos.skip = i + 1
                        self.writer.wait()  # NOTE: the epochs' files first: interrupted is the newest checkpoint
                        raise Interrupted(self.save_checkpoint(folder, "interrupted", pos))
                self._read_losses(log, pos)
                trained = len(pos.losses)
                log.log({"split": "train_epoch", "epoch": epoch, "step": pos.step, "loss": float(np.mean(pos.losses)),
                         "lr": self.schedule.get_lr(), "examples_per_s": (trained - pos.skip) * self.spec.batch_size
                         / (time.perf_counter() - start)})  # fmt: skip
                pos.epoch, pos.skip, pos.losses, pos.data_rng = epoch, 0, [], dict(rng.bit_generator.state)
                valid = self._end_epoch(log, pos, say)
            return self._finish(log, pos, valid, say)  # NOTE: a Ctrl-C now waits until the final weights are written

    def _batches(self, feed: DeviceFeed | None, rng: np.random.Generator, skip: int
                 ) -> Iterator[tuple[int, list[Tensor], list[Tensor]]]:  # fmt: skip
        """The epoch's batches from batch `skip` on (a resumed epoch's first ones were trained before the interruption),
        numbered, as the model's inputs and the outputs' targets: gathered on the device by `feed` where it holds the
        training split, else copied from numpy each step (augmented data, or data beyond the feed's budget). Both draw
        the epoch's order from `rng` alike, so the batches, and the generator's state checkpoints save, are the same."""
        x, y, shuffle = self.data.x_train, self.data.y_train, self.spec.values["data"]["shuffle"]
        if feed is not None:
            feed.order(draw_order(len(x), shuffle, rng))
            for i in range(skip, feed.steps):  # NOTE: skipped batches are not gathered
                yield i, *feed.batch(i)
            return
        for i, (bx, by) in enumerate(batches(x, y, self.spec.batch_size, shuffle, rng, self.data.augment)):
            if i >= skip:
                yield i, *self.tensors(bx, by)

    def _step(self, log: MetricsLog, pos: Position, epoch: int, xs: list[Tensor], ys: list[Tensor],
              on_step: OnStep | None) -> None:  # fmt: skip
        """One captured step; its loss stays on the device until the window of losses is read."""
        self.step_fn(xs, ys)
        pos.step += 1
        lr = self.schedule.get_lr() if pos.step % self.train["log_every"] == 0 else None
        if self.history.add(epoch, pos.step, lr):
            self._read_losses(log, pos)
        self.schedule.step()
        if on_step is not None:
            on_step(epoch, pos.step, self.history.last)

    def _read_losses(self, log: MetricsLog, pos: Position) -> None:
        """The losses of the steps not read yet, into pos.losses and (every log_every steps) metrics.jsonl; a loss
        that is not finite stops the run, naming its step, before anything else is written."""
        for epoch, step, lr, loss in self.history.read():
            if not math.isfinite(loss):
                self.writer.wait()
                last = newest_checkpoint(log.folder)
                seen = f"; noticed at step {pos.step}, when the losses were read" if step != pos.step else ""
                raise NonFiniteLoss(f"the loss became {loss} at step {step} (epoch {epoch}{seen}); last good "
                                    f"checkpoint: {last[0] if last else 'none'}. Try a lower train.lr or set "
                                    "train.clip_grad_norm")  # fmt: skip
            pos.losses.append(loss)
            if lr is not None:
                log.log({"split": "train", "epoch": epoch, "step": step, "loss": loss, "lr": lr})

    def _end_epoch(self, log: MetricsLog, pos: Position, say: Callable[[str], None]) -> dict[str, float]:
        """Evaluate, keep the best, checkpoint, and decide whether to stop early."""
        t, ckpt, folder, epoch = self.train, self.checkpoint_config, log.folder, pos.epoch
        valid = self.evaluate() if len(self.data.x_valid) else {}
        if valid:
            log.log({"split": "valid", "epoch": epoch, "step": pos.step, **valid})
        improved = False
        if valid:
            value, delta = self._watched(valid), (t["early_stopping"] or {"min_delta": 0.0})["min_delta"]
            improved = pos.best is None or self._better(value, pos.best, 0.0)
            if improved:
                pos.best, pos.best_epoch = value, epoch
            pos.ref, pos.stale = (value, 0) if pos.ref is None or self._better(value, pos.ref, delta) else \
                (pos.ref, pos.stale + 1)  # fmt: skip
        stop = t["early_stopping"]
        if stop and valid and pos.stale >= stop["patience"] and pos.step < self.total_steps:
            best = f"{pos.best:.4g}" if pos.best is not None else "none"
            pos.stopped = (f"valid {self.metric} did not improve by more than {stop['min_delta']:g} for "
                           f"{plural(stop['patience'], 'epoch')} (best {best} at epoch {pos.best_epoch})")  # fmt: skip
            log.log({"split": "stop", "epoch": epoch, "step": pos.step, "reason": pos.stopped})
        say(self.epoch_line(epoch, log))
        writes = []  # NOTE: in this order, by the writer thread, while the next epoch trains
        if improved and (ckpt["keep_best"] or self.final_choice == "best"):
            writes.append(self.checkpoint_write(folder, "best", pos)[1])
        if epoch % ckpt["every_epochs"] == 0 or pos.step == self.total_steps or pos.stopped:
            writes.append(self.checkpoint_write(folder, f"epoch-{epoch:05d}", pos)[1])
            writes.append(functools.partial(_after_checkpoint, folder, ckpt["keep"]))
        if pos.stopped:
            say(f"early stopping after epoch {epoch}: {pos.stopped}")
        writes.append(log.csv_write())
        self.writer.submit(lambda: [write() for write in writes])
        return valid

    def epoch_line(self, epoch: int, log: MetricsLog) -> str:
        """One line per epoch, for the console: its training loss and validation metrics."""
        rows = [r for r in log.records if r.get("epoch") == epoch and r["split"] in ("train_epoch", "valid")]
        parts = [f"epoch {epoch:>{len(str(self.epochs))}}/{self.epochs}"]
        for r in rows:
            name = "train" if r["split"] == "train_epoch" else "valid"
            parts += [f"{name} {k} {v:.4f}" for k, v in r.items() if is_metric(k) and isinstance(v, (int, float))]
        return "  ".join(parts)

    def _finish(self, log: MetricsLog, pos: Position, valid: dict[str, float], say: Callable[[str], None]) -> Summary:
        """model.safetensors: the best epoch's weights or the last ones, as train.final_weights says; the plot."""
        folder = log.folder
        self.writer.wait()  # NOTE: the epochs' files are all on disk before the best one is read
        best = self.best_checkpoint(folder, pos)
        final = "best" if best is not None else "last"
        if final == "best":
            names = [f"model.{k}" for k in get_state_dict(self.model)]  # NOTE: its optimizer state is not needed
            try:
                tensors = {k[6:]: v for k, v in safe_load(best, keys=names).items()}
            except OSError as e:
                raise SpecError.at(None, f"cannot read the best checkpoint {best}: {e.strerror or e}") from None
            except SafetensorsError as e:
                raise unusable(e, f"the best checkpoint {best}", "delete it, then resume: the last weights become the "
                               "final ones") from None  # fmt: skip
        else:
            tensors = get_state_dict(self.model)
        final_epoch = pos.best_epoch if final == "best" else pos.epoch
        meta = {**self.metadata(), "weights": final, "epoch": str(final_epoch)}
        safe_save(tensors, folder / FINAL, metadata=meta)
        log.write_csv()
        write_plot(folder, log.records, say, (self.metric, pos.best_epoch))
        last = [p for p in checkpoints(folder) if p.name.startswith("epoch-")]
        return Summary(valid, self.metric, pos.best, pos.best_epoch, final, self.final_choice, final_epoch or pos.epoch,
                       pos.stopped, folder / FINAL, last[-1] if last else None)  # fmt: skip

    def best_checkpoint(self, folder: Path, pos: Position) -> Path | None:
        """checkpoints/best.safetensors when the final weights are the best epoch's (train.final_weights: best, and
        some epoch was best); None when they are the last. Missing then, it is an error, never the last weights under
        another name: train writes it at the end of every epoch that improves, so only someone else removed it."""
        if self.final_choice != "best" or pos.best_epoch is None:
            return None
        best = regular_file(folder, f"{CHECKPOINTS}/best.safetensors")  # NOTE: a link there is refused, not followed
        if best is None:
            raise SpecError.at(None, f"{folder / CHECKPOINTS / 'best.safetensors'} is missing: it holds the weights of "
                               f"epoch {pos.best_epoch}, the best, which train.final_weights: best makes the final "
                               "ones", "put it back and resume the run folder as `specgrad train` left it, or start "
                               "a new run (with train.final_weights: last, the last epoch's weights are the final "
                               "ones)")  # fmt: skip
        return best

    # *** what is watched ***

    @property
    def metric(self) -> str:
        """The validation metric that decides the best epoch (and early stopping); accuracy of a model without a
        classifier watches the loss (as specgrad always has: train.metrics' default is accuracy)."""
        metric = (self.train["early_stopping"] or {}).get("metric", "loss")
        return metric if metric != "accuracy" or self.data.task in ("classify", "language") else "loss"

    @property
    def final_choice(self) -> str:
        return self.train.get("final_weights") or "best"

    @property
    def checkpoint_config(self) -> dict[str, Any]:
        return self.train["checkpoint"] or {"every_epochs": 1, "keep": 3, "keep_best": True}

    def _watched(self, valid: dict[str, float]) -> float:
        """The watched metric's value; NaN (never better) where this epoch's is undefined (R^2 of a constant target)."""
        return valid.get(self.metric, math.nan)

    def _better(self, value: float, than: float, delta: float) -> bool:
        """Whether `value` of the watched metric improves on `than` by more than `delta`."""
        return value > than + delta if higher_is_better(self.metric) else value < than - delta

    # *** checkpoints ***

    def metadata(self) -> dict[str, str]:
        """What `specgrad run` and the exporters need besides the weights: the spec's hash, the task, the training
        split's input statistics, the regression targets' statistics, the class names and a csv's columns (with the
        categorical vocabularies)."""
        d = self.data
        meta = {"spec_hash": spec_hash(self.spec.values), "name": str(self.spec.values["name"]), "task": d.task,
                "normalization": _listed(d.stats), "target_normalization": _listed(d.target_stats)}  # fmt: skip
        columns, names = data_layout(d)
        if names is not None:
            meta["class_names"] = json.dumps(names)
        if columns is not None:
            meta["columns"] = columns
        if d.heads:  # NOTE: several inputs or outputs: statistics per input, and each output's own contract
            meta["normalization"] = json.dumps({k: _plain(v) for k, v in d.input_stats.items()})
            meta["outputs"] = json.dumps({o: {"task": h.task, "target_normalization": _plain(h.target_stats),
                                              **({"class_names": h.class_names} if h.task == "classify" else {})}
                                          for o, h in d.heads.items()})  # fmt: skip
        return meta

    def save_checkpoint(self, folder: Path, name: str, pos: Position) -> Path:
        """Model, optimizer and position, written atomically (a crash leaves the previous file)."""
        path, write = self.checkpoint_write(folder, name, pos)
        write()
        return path

    def checkpoint_write(self, folder: Path, name: str, pos: Position) -> tuple[Path, Callable[[], None]]:
        """A checkpoint's path, and the write of what it holds now (copied: training may go on before it runs)."""
        path = checkpoint_folder(folder) / f"{name}.safetensors"
        arrays = snapshot({
            **{f"model.{k}": v for k, v in get_state_dict(self.model).items()},
            **{f"optimizer.{k}": v for k, v in get_state_dict(self.opt).items() if not k.startswith("params.")},
        })  # fmt: skip
        meta = {**self.metadata(), **pos.to_meta(), "tensor_rng": json.dumps(Tensor._rng.bit_generator.state),
                "device": str(self.opt.device)}  # fmt: skip
        return path, functools.partial(atomic_write, path, safetensors_bytes(arrays, meta))

    def restore(self, folder: Path, say: Callable[[str], None]) -> Position:
        """The newest checkpoint of a run folder loaded into the model, optimizer, schedule and random state; a run
        stopped before its first checkpoint starts over. A damaged checkpoint or one of another spec is an error."""
        found = newest_checkpoint(folder)
        if found is None:
            say(f"{folder} has no checkpoint yet (the run stopped before its first one): starting it from step 0")
            return Position()
        path, meta = found
        lengths = extensions(folder)  # NOTE: a checkpoint from before the run's length changed is still its own
        if meta.get("spec_hash") not in self.spec_hashes(lengths) or "position" not in meta:
            raise SpecError.at(None, f"{path} was not written for the spec of {folder}",
                               "resume a run folder as `specgrad train` left it")  # fmt: skip
        now = self.metadata()  # NOTE: before the position, which is counted in batches of the data it was made on
        changed = [k for k in DATA_META if meta.get(k) != now.get(k)]
        if changed:
            raise SpecError.at(None, f"the data has changed since {folder} started: its {', '.join(changed)} differ "
                               "from what the checkpoints were trained with",
                               "restore the data the run started with, or start a new run")  # fmt: skip
        fix = "delete it to resume from the one before"
        try:
            pos, tensor_rng = Position.from_meta(meta), from_json(meta, "tensor_rng")
            check_position(pos, meta, path.name, self.steps_per_epoch, self.total_steps,
                           bool(self.train["early_stopping"]))  # fmt: skip
            check_rng_state(tensor_rng, "its tensor_rng")
        except BadMetadata as e:
            raise SpecError.at(None, f"the checkpoint {path} is damaged ({e})", fix) from None
        if pos.stopped and any(r["step"] >= pos.step for r in lengths):  # NOTE: lengthened since it stopped early
            pos.stopped, pos.stale = None, 0
        self.best_checkpoint(folder, pos)  # NOTE: before any step: the run could not end with the weights it asks for
        try:
            tensors = safe_load(path)  # NOTE: read whole before touching the model
        except OSError as e:
            raise SpecError.at(None, f"cannot read the checkpoint {path}: {e.strerror or e}") from None
        except SafetensorsError as e:
            raise unusable(e, f"the checkpoint {path}", fix) from None
        try:
            load_state_dict(self.model, {k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
            load_state_dict(self.opt, {k[10:]: v for k, v in tensors.items() if k.startswith("optimizer.")},
                            strict=False)  # fmt: skip
        except StateMismatch as e:
            raise SpecError.at(None, f"the checkpoint {path} does not fit the model of {folder}: {e}", fix) from None
        Tensor._rng.bit_generator.state = tensor_rng
        self.schedule.step(epoch=pos.step)
        if pos.step >= self.total_steps or pos.stopped:
            say(f"{folder} has finished ({plural(pos.step, 'step')}{', stopped early' if pos.stopped else ''}): "
                "writing its final weights again")  # fmt: skip
            return pos
        batches = len(self.data.x_train) // self.spec.batch_size
        where = f"epoch {pos.epoch + 1}, batch {pos.skip + 1}" if 0 < pos.skip < batches else \
            f"the end of epoch {pos.epoch + (pos.skip == batches)}"  # fmt: skip
        say(f"resuming from {path.name}: step {pos.step} of {self.total_steps} ({where})")
        return pos

    def spec_hashes(self, lengths: list[dict[str, Any]]) -> set[str]:
        """The spec hashes this run's checkpoints may carry: its spec's, and its spec's with each length it had before
        `train --resume --epochs/--steps` changed it (the `extend` records of metrics.jsonl)."""
        t = self.train
        before = [{**self.spec.values, "train": {**t, "epochs": r["epochs_before"], "steps": r["steps_before"] or None}}
                  for r in lengths]  # fmt: skip
        return {spec_hash(self.spec.values), *(spec_hash(v) for v in before)}

    def extension(self, folder: Path, before: ValidSpec, asked: str) -> dict[str, Any] | None:
        """The `extend` record for training the run in `folder` (its spec `before`) to this trainer's length instead
        (`asked`: the option, for errors), or None when the length is the same. Refused when the run has trained that
        many steps already, or its newest checkpoint ends a partial last epoch (train.steps): its next epoch would not
        start where a longer run's does."""
        t, spe = before.values["train"], self.steps_per_epoch
        old_total = t["steps"] or t["epochs"] * spe
        if old_total == self.total_steps:
            return None
        found, fix = newest_checkpoint(folder), "delete it to resume from the one before"
        pos = Position()
        if found is not None:
            try:
                pos = Position.from_meta(found[1])
                check_position(pos, found[1], found[0].name, spe, old_total, bool(t["early_stopping"]))
            except BadMetadata as e:
                raise SpecError.at(None, f"the checkpoint {found[0]} is damaged ({e})", fix) from None
        done = f"{plural(pos.step, 'step')} ({plural(pos.epoch, 'whole epoch')})"
        if self.total_steps <= pos.step:
            raise SpecError.at(None, f"{asked} asks for {plural(self.total_steps, 'step')}, but {folder} has trained "
                               f"{done} already", "give a longer length than the run has trained, or start a new run "
                               "for a shorter one")  # fmt: skip
        if pos.skip == 0 and pos.step != pos.epoch * spe:
            raise SpecError.at(None, f"{folder} ended in the middle of epoch {pos.epoch} (train.steps: {old_total}), "
                               "so it cannot be lengthened: its next epoch would not start where a longer run's does",
                               "start a new run with the length you want")  # fmt: skip
        return {"split": "extend", "epoch": pos.epoch, "step": pos.step, "epochs_before": t["epochs"],
                "steps_before": t["steps"] or 0, "total_steps_before": old_total, "epochs": self.train["epochs"],
                "steps": self.train["steps"] or 0, "total_steps": self.total_steps}  # fmt: skip


def _after_checkpoint(folder: Path, keep: int) -> None:
    """Once an epoch checkpoint is on disk: an interrupted one is older, and only the newest `keep` are kept."""
    (folder / CHECKPOINTS / "interrupted.safetensors").unlink(missing_ok=True)
    prune(folder, keep)


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


def write_plot(folder: Path, records: list[dict[str, Any]], say: Callable[[str], None],
               best: tuple[str, int | None] = ("loss", None)) -> None:  # fmt: skip
    """metrics.png: training and validation loss (and accuracy) per epoch, the best epoch (by the watched validation
    metric, `best`) marked on each, when matplotlib is installed (an optional extra); drawn by the child process
    `plots.drawing_ahead` started where the command has one."""
    if (figure := metrics_png(records, best)) is None:
        say(f"{MISSING}, so there is no metrics.png")
        return
    atomic_write(folder / "metrics.png", figure)
