"""Optimizers (SGD, Adam, AdamW), gradient clipping and learning-rate schedules, with PyTorch's update formulas.

Every piece of state (lr, momenta, the step counter) is a Tensor changed with `assign`, so a step captured by a JIT
replays with the current values. Imports tensor and dtype.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

import numpy as np

from specgrad.dtype import dtypes
from specgrad.tensor import Tensor


def _scalar(value: float, device: str | None) -> Tensor:
    """A realized float32 0-d tensor (a buffer, not a constant the compiler would fold into a kernel)."""
    return Tensor(np.array(value, dtype=dtypes.float32.np), device=device).realize()


def _one_minus_pow(b: float, t: Tensor) -> Tensor:
    """1 - b**t (0 <= b < 1) from the int32 step counter t, in the graph so a replayed step reads the current t.

    With y = t*log2(b) and u = 2**y: 1 - u alone loses ~10 bits for u near 1 (b2 = 0.999 at small t), so there it is
    expm1 by Kahan's trick, (u-1) * y/log2(u), exact to a few ulps (https://people.eecs.berkeley.edu/~wkahan/Math128/
    Sumnfrac.pdf); for u <= 0.5, 1 - u is already exact to an ulp, and it is 1 where u underflows to 0 (where the
    trick would give y/-inf = 0). t is exact to 2**31; its float32 cast only rounds y by an ulp past 2**24.
    """
    y = t.cast(dtypes.float32) * (math.log2(b) if b else -math.inf)
    u = y.exp2()
    # NOTE: where selects, so the nan or 0 of the unused branches (u = 0 or 1) never reaches the result
    small = (u == 1).where(-y * math.log(2), (1 - u) * y / u.log2())
    return (u <= 0.5).where(1 - u, small)


def _lerp(x: Tensor, end: Tensor, w: float) -> Tensor:
    """torch.lerp(x, end, w): x + w*(end - x), in the form torch rounds (its weight, 1 - b, is exact to an ulp where
    b itself, near 1 in float32, is not: float32(0.99999) is off by 0.14% of 1 - b)."""
    return x + w * (end - x) if w < 0.5 else end - (end - x) * (1 - w)


class Optimizer:
    """Base optimizer: owns the trainable params and the lr Tensor; `step()` is one schedule."""

    def __init__(self, params: list[Tensor], lr: float, lr_scales: Sequence[float] | None = None):
        """`lr_scales` (one per param) multiply the learning rate of each param; a frozen param (requires_grad False)
        is left out, and a param listed twice is kept once (with its first scale)."""
        for p in params:
            if p.requires_grad is None:  # NOTE: tinygrad's rule: an optimizer's params are trainable unless told not
                p.requires_grad = True
        scales = list(lr_scales) if lr_scales is not None else [1.0] * len(params)
        if len(scales) != len(params):
            raise ValueError(f"lr_scales has {len(scales)} values for {len(params)} params")
        kept: dict[int, tuple[Tensor, float]] = {}
        for p, s in zip(params, scales):
            if p.requires_grad and id(p) not in kept:
                kept[id(p)] = (p, float(s))
        self.params: list[Tensor] = [p for p, _ in kept.values()]
        self.lr_scales: list[float] = [s for _, s in kept.values()]
        self.device: str | None = self.params[0].device if self.params else None
        self.lr, self.initial_lr = _scalar(lr, self.device), lr  # NOTE: schedules start from the exact Python lr

    def lr_of(self, i: int) -> Tensor:
        """The learning rate of param i: the (scheduled) lr, times its scale when that is not 1."""
        return self.lr if self.lr_scales[i] == 1.0 else self.lr * self.lr_scales[i]

    def zero_grad(self) -> None:
        """Forget every param's gradient (PyTorch's set_to_none)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Update every param that has a gradient, realizing params and state in one schedule."""
        live = [(i, p, p.grad.detach()) for i, p in enumerate(self.params) if p.grad is not None]
        if live:
            Tensor.corealize(self._update(live))

    def _update(self, live: list[tuple[int, Tensor, Tensor]]) -> list[Tensor]:
        """Assign new values to params (index, param, grad) and state; return every tensor assigned."""
        raise NotImplementedError

    def _zeros(self) -> list[Tensor]:
        """One zero buffer per param, for momentum-like state."""
        # NOTE: not Tensor.zeros(...).contiguous(): the lazy cache gives equal-shaped ones one shared buffer
        return [Tensor(np.zeros(p.shape, dtype=p.dtype.np), device=p.device) for p in self.params]


class SGD(Optimizer):
    """torch.optim.SGD (dampening 0): L2 weight decay, optional (Nesterov) momentum."""

    def __init__(
        self,
        params: list[Tensor],
        lr: float = 0.001,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        lr_scales: Sequence[float] | None = None,
    ):
        if nesterov and momentum <= 0:
            raise ValueError(f"nesterov momentum needs momentum > 0, got momentum={momentum}")
        super().__init__(params, lr, lr_scales)
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov
        self.b = self._zeros() if momentum else []

    def _update(self, live: list[tuple[int, Tensor, Tensor]]) -> list[Tensor]:
        out: list[Tensor] = []
        for i, p, g in live:
            p0 = p.detach()
            g = g + self.weight_decay * p0 if self.weight_decay else g
            if self.momentum:
                # NOTE: the buffer starts at 0, so the first step gives b = g, as PyTorch's clone(grad)
                b = self.b[i].assign(self.momentum * self.b[i] + g)
                g = g + self.momentum * b if self.nesterov else b
                out.append(b)
            out.append(p.assign(p0 - self.lr_of(i) * g))
        return out


class Adam(Optimizer):
    """torch.optim.Adam: L2 weight decay added to the gradient, bias-corrected moments."""

    decoupled = False

    def __init__(
        self,
        params: list[Tensor],
        lr: float = 0.001,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        lr_scales: Sequence[float] | None = None,
    ):
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ValueError(f"betas must be in [0, 1), got b1={b1}, b2={b2}")
        super().__init__(params, lr, lr_scales)
        self.b1, self.b2, self.eps, self.weight_decay = b1, b2, eps, weight_decay
        self.m, self.v = self._zeros(), self._zeros()
        # NOTE: an int32 counter: a float32 one stops counting at 2**24 steps
        self.t = Tensor(np.array(0, dtype=dtypes.int32.np), device=self.device).realize()

    def _update(self, live: list[tuple[int, Tensor, Tensor]]) -> list[Tensor]:
        # https://github.com/pytorch/pytorch/blob/main/torch/optim/adam.py (_single_tensor_adam)
        t = self.t.assign(self.t + 1)
        bias1, bias2 = _one_minus_pow(self.b1, t), _one_minus_pow(self.b2, t)
        out = [t]
        for i, p, g in live:
            p0 = p.detach()
            if self.weight_decay and self.decoupled:
                # NOTE: torch's p * (1 - lr*wd) rounds 1 - lr*wd the same way every step, a drift of up to T ulps
                p0 = p0 - (self.lr_of(i) * self.weight_decay) * p0
            elif self.weight_decay:
                g = g + self.weight_decay * p0
            m = self.m[i].assign(_lerp(self.m[i], g, 1 - self.b1))
            # NOTE: torch rounds v as b2*v + (1-b2)*g*g; the lerp form is the same sum without float32(b2)'s error
            v = self.v[i].assign(_lerp(self.v[i], g * g, 1 - self.b2))
            denom = v.sqrt() / bias2.sqrt() + self.eps
            out += [m, v, p.assign(p0 - (self.lr_of(i) / bias1) * m / denom)]
        return out


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (p -= lr*wd*p before the Adam step)."""

    decoupled = True

    def __init__(
        self,
        params: list[Tensor],
        lr: float = 0.001,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        lr_scales: Sequence[float] | None = None,
    ):
        super().__init__(params, lr, b1, b2, eps, weight_decay, lr_scales)


def clip_grad_norm_(params: list[Tensor], max_norm: float) -> Tensor:
    """Scale all grads by min(1, max_norm/(norm+1e-6)) and return the total 2-norm (torch.nn.utils semantics)."""
    grads = [p for p in params if p.grad is not None]
    if not grads:
        return Tensor(0.0)
    sq = [p.grad.detach().float().square().sum() for p in grads]  # type: ignore[union-attr]
    total = sum(sq[1:], sq[0]).sqrt()
    coef = (max_norm / (total + 1e-6)).minimum(1.0)
    for p in grads:
        g = p.grad.detach()  # type: ignore[union-attr]
        p.grad = g * coef.cast(g.dtype)
    return total


# ***** learning-rate schedules *****


class LRScheduler:
    """Base schedule: `step()` advances `last_epoch` and assigns `lr_at(last_epoch)` to optimizer.lr."""

    def __init__(self, optimizer: Optimizer):
        self.optimizer, self.base_lr = optimizer, optimizer.initial_lr
        self.last_epoch = -1
        self._written: tuple[bytes, weakref.ref] | None = None  # NOTE: what it last wrote, and into which lazydata
        self.step()  # NOTE: as PyTorch, construction is epoch 0

    def lr_at(self, epoch: int) -> float:
        """The learning rate at `epoch` (closed form)."""
        raise NotImplementedError

    def get_lr(self) -> float:
        """The current learning rate."""
        return self.lr

    def step(self, epoch: int | None = None) -> None:
        """Go to the next epoch (or to `epoch`) and set optimizer.lr for it. A rate that float32 rounds to the value
        this schedule last wrote, still there (nothing assigned to optimizer.lr since), is not written again: a
        constant rate costs a training loop no device work per step."""
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        self.lr = self.lr_at(self.last_epoch)
        lr, bits = self.optimizer.lr, np.float32(self.lr).tobytes()
        if self._written is None or self._written[0] != bits or self._written[1]() is not lr.lazydata:
            self._written = (bits, weakref.ref(lr.assign(_scalar(self.lr, lr.device)).realize().lazydata))


class Constant(LRScheduler):
    """Keep the optimizer's lr."""

    def lr_at(self, epoch: int) -> float:
        return self.base_lr


class StepLR(LRScheduler):
    """torch StepLR: lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer)

    def lr_at(self, epoch: int) -> float:
        return self.base_lr * self.gamma ** (epoch // self.step_size)


class ExponentialLR(LRScheduler):
    """torch ExponentialLR: lr * gamma ** epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float):
        self.gamma = gamma
        super().__init__(optimizer)

    def lr_at(self, epoch: int) -> float:
        return self.base_lr * self.gamma**epoch


class CosineAnnealingLR(LRScheduler):
    """torch CosineAnnealingLR, closed form (periodic past T_max): eta_min + (lr-eta_min)*(1+cos(pi*epoch/T_max))/2."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer)

    def lr_at(self, epoch: int) -> float:
        # NOTE: (1 + cos(pi*e/T))/2 = sin(pi*(T-e)/(2T))**2 keeps full relative precision near e = T, where 1 + cos
        # cancels (and is exactly 0 there); the period 2T is taken off in integers, so a large epoch is not rounded
        t = self.T_max
        return self.eta_min + (self.base_lr - self.eta_min) * math.sin(math.pi * (t - epoch % (2 * t)) / (2 * t)) ** 2


class LinearWarmup(LRScheduler):
    """Linear warm-up from lr/warmup_steps to lr over warmup_steps epochs, then `after` (restarted at its epoch 0).

    Exactly torch's SequentialLR([LinearLR(start_factor=1/W, total_iters=W), after], milestones=[W]):
    lr_e = lr * (1/W + (1 - 1/W) * e/W) for e < W, then after.lr_at(e - W) (just lr when `after` is None).
    """

    def __init__(self, optimizer: Optimizer, warmup_steps: int, after: LRScheduler | None = None):
        if warmup_steps < 1:
            raise ValueError(f"warmup_steps must be at least 1, got {warmup_steps}")
        self.warmup_steps, self.after = warmup_steps, after
        super().__init__(optimizer)

    def lr_at(self, epoch: int) -> float:
        w = self.warmup_steps
        if epoch >= w:
            return self.after.lr_at(epoch - w) if self.after is not None else self.base_lr
        return self.base_lr * ((w + (w - 1) * epoch) / (w * w))  # NOTE: 1/w + (1 - 1/w)*e/w, rounded once
