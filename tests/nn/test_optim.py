"""Optimizers, clip_grad_norm_ and lr schedules vs float64 numpy references of PyTorch's formulas (and torch.optim)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import gpu_keeps

from specgrad import Tensor, TinyJit, dtypes
from specgrad.nn import optim
from specgrad.nn.state import get_state_dict, load_state_dict, safe_load, safe_save

try:
    import torch
except ImportError:
    torch = None

STEPS = 6
RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((8, 3)).astype(np.float32), RNG.standard_normal((8, 2)).astype(np.float32)
W0, B0 = RNG.standard_normal((3, 2)).astype(np.float32), RNG.standard_normal(2).astype(np.float32)


# ***** float64 references of torch.optim's single-tensor update formulas *****


def ref_grads(w: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """Gradients of mean((X @ w + b - Y)**2) for the tiny linear model."""
    r = 2 * (X.astype(np.float64) @ w + b - Y) / Y.size
    return [X.T @ r, r.sum(0)]


def ref_sgd(p: np.ndarray, g: np.ndarray, st: dict, lr: float, momentum=0.0, weight_decay=0.0, nesterov=False):
    g = g + weight_decay * p
    if momentum:
        st["b"] = g.copy() if "b" not in st else momentum * st["b"] + g
        g = g + momentum * st["b"] if nesterov else st["b"]
    return p - lr * g


def ref_adam(p: np.ndarray, g: np.ndarray, st: dict, lr: float, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, w=False):
    st["t"] = t = st.get("t", 0) + 1
    if w:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    denom = np.sqrt(st["v"]) / math.sqrt(1 - b2**t) + eps
    return p - lr / (1 - b1**t) * st["m"] / denom


# (name, specgrad optimizer, numpy reference, torch optimizer, kwargs)
CASES: list[tuple[str, Callable, Callable, str, dict[str, Any]]] = [
    ("sgd", optim.SGD, ref_sgd, "SGD", {"lr": 0.1}),
    ("sgd_momentum", optim.SGD, ref_sgd, "SGD", {"lr": 0.05, "momentum": 0.9}),
    ("sgd_nesterov", optim.SGD, ref_sgd, "SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True}),
    ("sgd_wd", optim.SGD, ref_sgd, "SGD", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.1}),
    ("adam", optim.Adam, ref_adam, "Adam", {"lr": 0.01}),
    ("adam_wd", optim.Adam, ref_adam, "Adam", {"lr": 0.01, "b1": 0.8, "b2": 0.99, "eps": 1e-6, "weight_decay": 0.1}),
    ("adamw", optim.AdamW, ref_adam, "AdamW", {"lr": 0.01}),
    ("adamw_wd", optim.AdamW, ref_adam, "AdamW", {"lr": 0.02, "b1": 0.8, "weight_decay": 0.5}),
]


def torch_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    ret = {k: v for k, v in kwargs.items() if k not in ("b1", "b2")}
    return ret | ({"betas": (kwargs.get("b1", 0.9), kwargs.get("b2", 0.999))} if "b1" in kwargs else {})


def sg_linear_step(w: Tensor, b: Tensor, device: str) -> None:
    x, y = Tensor(X, device=device), Tensor(Y, device=device)
    ((x @ w + b - y) ** 2).mean().backward()


# NOTE: an optimizer's step is elementwise kernels; on the GPU the fast tier takes one of each optimizer, with every
# term it can have (momentum, weight decay), the slow tier the rest
OPTIMIZERS_ON_GPU = {"sgd_wd", "adam_wd", "adamw_wd"}


@pytest.mark.parametrize("case", gpu_keeps({c[0]: c for c in CASES}, OPTIMIZERS_ON_GPU))
def test_optimizer_matches_reference(device: str, case: tuple) -> None:
    _, make, ref, torch_name, kwargs = case
    w, b = Tensor(W0, device=device), Tensor(B0, device=device)
    opt = make([w, b], **kwargs)
    ref_kwargs = kwargs | ({"w": True} if torch_name == "AdamW" else {})
    ref_kwargs.setdefault("weight_decay", 0.01 if torch_name == "AdamW" else 0.0)
    ps, states = [W0.astype(np.float64), B0.astype(np.float64)], [{}, {}]
    if torch is not None:
        tps = [torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)]
        topt = getattr(torch.optim, torch_name)(tps, **torch_kwargs(kwargs))
    for step in range(STEPS):
        opt.zero_grad()
        sg_linear_step(w, b, device)
        opt.step()
        ps = [ref(p, g, st, **ref_kwargs) for p, g, st in zip(ps, ref_grads(*ps), states)]
        for name, got, want in zip("wb", (w, b), ps):
            np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=2e-6, err_msg=f"{name} step {step}")
        if torch is not None:
            topt.zero_grad()
            ((torch.tensor(X) @ tps[0] + tps[1] - torch.tensor(Y)) ** 2).mean().backward()
            topt.step()
            for name, got, want in zip("wb", (w, b), tps):
                np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=2e-5, atol=2e-6, err_msg=name)
    if isinstance(opt, optim.Adam):
        assert opt.t.item() == STEPS


@pytest.mark.parametrize("b", [0.0, 0.5, 0.9, 0.99, 0.999, 0.99999, 0.9999999])
def test_bias_correction_is_accurate_at_every_step(device: str, b: float) -> None:
    """1 - b**t to a few float32 ulps for every int32 step count: no cancellation at small t (b2 = 0.999 loses ~10
    bits as 1 - float32(b**t)) and exactly 1, not 0, where b**t underflows (b = 0.9 from t ~ 987: the NaN of issue 12).
    """
    t = np.unique(np.geomspace(1, 2**31 - 1, 3000).astype(np.int64)).astype(np.int32)
    got = optim._one_minus_pow(b, Tensor(t, device=device)).numpy()
    want = -np.expm1(t * math.log(b)) if b else np.ones(len(t))
    np.testing.assert_allclose(got, want, rtol=8 * 2**-24, atol=0)


def test_step_is_one_schedule(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    w, b = Tensor(W0, device=device), Tensor(B0, device=device)
    opt = optim.Adam([w, b], lr=0.01)
    sg_linear_step(w, b, device)
    calls: list[list[Tensor]] = []
    real = Tensor.corealize
    monkeypatch.setattr(Tensor, "corealize", staticmethod(lambda ts: calls.append(list(ts)) or real(ts)))
    opt.step()
    assert len(calls) == 1
    assigned = [w, b, opt.t, *opt.m, *opt.v]
    assert {id(t) for t in calls[0]} == {id(t) for t in assigned}
    assert all(t.lazydata.realized is not None for t in assigned)


def test_params_without_grad_are_skipped(device: str) -> None:
    used, unused = Tensor([1.0, 2.0], device=device), Tensor([3.0, 4.0], device=device)
    frozen = Tensor([5.0], device=device, requires_grad=False)
    opt = optim.SGD([used, unused, used, frozen], lr=0.5, momentum=0.9)
    assert opt.params == [used, unused] and used.requires_grad and unused.requires_grad
    (used * used).sum().backward()
    assert unused.grad is None
    opt.step()
    np.testing.assert_allclose(used.numpy(), [0.0, 0.0])
    np.testing.assert_allclose(unused.numpy(), [3.0, 4.0])
    np.testing.assert_allclose(opt.b[1].numpy(), [0.0, 0.0])  # its momentum did not move either


def test_zero_grad(device: str) -> None:
    w = Tensor([1.0, 2.0], device=device)
    opt = optim.Adam([w])
    (w * 3).sum().backward()
    assert w.grad is not None
    opt.zero_grad()
    assert w.grad is None
    opt.step()  # NOTE: nothing has a grad: no update, and the step counter stays put
    np.testing.assert_allclose(w.numpy(), [1.0, 2.0])
    assert opt.t.item() == 0


@pytest.mark.parametrize("max_norm", [0.5, 100.0], ids=["clip", "no_clip"])
def test_clip_grad_norm(device: str, max_norm: float) -> None:
    rng = np.random.default_rng(1)
    g1, g2 = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    a, b, c = (Tensor(np.ones(shape, np.float32), device=device) for shape in ((3, 4), 5, 1))
    a.grad, b.grad = Tensor(g1, device=device), Tensor(g2, device=device)
    total = optim.clip_grad_norm_([a, b, c], max_norm)
    norm = math.sqrt(float((g1.astype(np.float64) ** 2).sum() + (g2.astype(np.float64) ** 2).sum()))
    coef = min(1.0, max_norm / (norm + 1e-6))
    np.testing.assert_allclose(total.item(), norm, rtol=1e-6)
    np.testing.assert_allclose(a.grad.numpy(), g1 * coef, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(b.grad.numpy(), g2 * coef, rtol=1e-6, atol=1e-7)
    assert c.grad is None
    if torch is not None:
        tps = [torch.ones(3, 4, requires_grad=True), torch.ones(5, requires_grad=True)]
        tps[0].grad, tps[1].grad = torch.tensor(g1), torch.tensor(g2)
        np.testing.assert_allclose(total.item(), torch.nn.utils.clip_grad_norm_(tps, max_norm).item(), rtol=1e-6)
        np.testing.assert_allclose(a.grad.numpy(), tps[0].grad.numpy(), rtol=1e-6, atol=1e-7)


def test_lr_tensor_changes_the_update(device: str) -> None:
    w = Tensor([1.0], device=device)
    opt = optim.SGD([w], lr=0.1)
    lr = opt.lr
    sched = optim.StepLR(opt, step_size=1, gamma=0.5)
    for want_lr, want_w in [(0.1, 0.9), (0.05, 0.85), (0.025, 0.825)]:
        assert opt.lr.item() == pytest.approx(want_lr) and sched.get_lr() == pytest.approx(want_lr)
        opt.zero_grad()
        w.sum().backward()
        opt.step()
        np.testing.assert_allclose(w.numpy(), [want_w], rtol=1e-6)
        sched.step()
    assert opt.lr is lr and opt.lr.lazydata.realized is not None  # NOTE: assigned, not replaced: a JIT sees it


@pytest.mark.parametrize("case", [CASES[3], CASES[7]], ids=[CASES[3][0], CASES[7][0]])
def test_jit_replayed_step_with_schedule(device: str, case: tuple) -> None:
    """A captured step replays with the current params, state, step counter and scheduled lr (all assigned in place)."""
    _, make, ref, torch_name, kwargs = case
    w, b = Tensor(W0, device=device), Tensor(B0, device=device)
    opt = make([w, b], **kwargs)
    sched = optim.LinearWarmup(opt, 2, after=optim.CosineAnnealingLR(opt, 6))
    x, y = Tensor(X, device=device), Tensor(Y, device=device)

    @TinyJit
    def train_step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.realize()

    ref_kwargs = kwargs | ({"w": True, "weight_decay": kwargs["weight_decay"]} if torch_name == "AdamW" else {})
    ps, states = [W0.astype(np.float64), B0.astype(np.float64)], [{}, {}]
    for step in range(8):
        train_step(x, y)
        ps = [ref(p, g, st, **(ref_kwargs | {"lr": sched.get_lr()})) for p, g, st in zip(ps, ref_grads(*ps), states)]
        sched.step()
        for name, got, want in zip("wb", (w, b), ps):
            np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=2e-6, err_msg=f"{name} step {step}")
    assert train_step.cnt == 8


# ***** lr schedules: (name, specgrad schedule, reference lr(epoch) for base lr 0.1, torch schedule or None) *****


def ref_warmup(e: int, w: int, after: Callable[[int], float] = lambda e: 0.1) -> float:
    return 0.1 * (1 / w + (1 - 1 / w) * e / w) if e < w else after(e - w)


def ref_cosine(e: int, t_max: int = 6, eta_min: float = 0.01) -> float:
    return eta_min + (0.1 - eta_min) * (1 + math.cos(math.pi * e / t_max)) / 2


def lrs() -> Any:
    """torch.optim.lr_scheduler (called only where torch imports)."""
    return torch.optim.lr_scheduler


def torch_warmup_cosine(o: Any) -> Any:
    lin, cos = lrs().LinearLR(o, start_factor=1 / 4, total_iters=4), lrs().CosineAnnealingLR(o, 6, eta_min=0.01)
    return lrs().SequentialLR(o, [lin, cos], milestones=[4])


SCHEDULES: list[tuple[str, Callable, Callable[[int], float], Callable | None]] = [
    ("constant", optim.Constant, lambda e: 0.1, None),
    (
        "step",
        lambda o: optim.StepLR(o, 3, gamma=0.5),
        lambda e: 0.1 * 0.5 ** (e // 3),
        lambda o: lrs().StepLR(o, 3, gamma=0.5),
    ),
    (
        "exponential",
        lambda o: optim.ExponentialLR(o, 0.8),
        lambda e: 0.1 * 0.8**e,
        lambda o: lrs().ExponentialLR(o, 0.8),
    ),
    (
        "cosine",
        lambda o: optim.CosineAnnealingLR(o, 6, 0.01),
        ref_cosine,
        lambda o: lrs().CosineAnnealingLR(o, 6, 0.01),
    ),
    (
        "warmup",
        lambda o: optim.LinearWarmup(o, 4),
        lambda e: ref_warmup(e, 4),
        lambda o: lrs().LinearLR(o, 1 / 4, total_iters=4),
    ),
    (
        "warmup_cosine",
        lambda o: optim.LinearWarmup(o, 4, after=optim.CosineAnnealingLR(o, 6, 0.01)),
        lambda e: ref_warmup(e, 4, ref_cosine),
        torch_warmup_cosine,
    ),
]


@pytest.mark.parametrize("case", SCHEDULES, ids=[c[0] for c in SCHEDULES])
def test_schedule(case: tuple) -> None:
    _, make, ref, torch_make = case
    opt = optim.SGD([Tensor([0.0])], lr=0.1)
    sched = make(opt)
    got = [sched.get_lr()]
    assert opt.lr.item() == pytest.approx(got[0], rel=1e-6)
    for _ in range(11):
        sched.step()
        got.append(sched.get_lr())
        assert opt.lr.item() == pytest.approx(got[-1], rel=1e-6)
    np.testing.assert_allclose(got, [ref(e) for e in range(12)], rtol=1e-12)
    if torch is not None and torch_make is not None:
        np.testing.assert_allclose(got, torch_lrs(torch_make, 11), rtol=1e-9)


def test_a_schedule_writes_the_lr_only_when_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A constant rate (or a step schedule between its steps) costs no device write per step; a value put into
    optimizer.lr from outside (a loaded state dict) is still replaced by the schedule's on its next step."""
    writes, real = [0], optim._scalar

    def scalar(value: float, device: str | None) -> Tensor:
        writes[0] += 1
        return real(value, device)

    monkeypatch.setattr(optim, "_scalar", scalar)
    opt = optim.SGD([Tensor([0.0])], lr=0.1)
    constant, writes[0] = optim.Constant(opt), 0
    for _ in range(5):
        constant.step()
    assert writes[0] == 0 and opt.lr.item() == np.float32(0.1)
    load_state_dict(opt, {"lr": Tensor(np.array(0.5, np.float32))}, strict=False)
    constant.step()
    assert writes[0] == 1 and opt.lr.item() == np.float32(0.1)
    stepped, writes[0] = optim.StepLR(opt, 3, gamma=0.5), 0
    for _ in range(6):
        stepped.step()
    assert writes[0] == 2 and opt.lr.item() == np.float32(0.025)  # NOTE: at epochs 3 and 6


def torch_lrs(torch_make, steps: int) -> list[float]:
    """The learning rates torch's own schedule gives, at epoch 0 and after each of `steps` steps."""
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    tsched = torch_make(topt)
    want = [tsched.get_last_lr()[0]]
    for _ in range(steps):
        topt.step()
        tsched.step()
        want.append(tsched.get_last_lr()[0])
    return want


# ***** long runs: every optimizer, jitted as the trainer runs it, vs float64 and torch for thousands of steps *****

LONG_RNG = np.random.default_rng(12)
NOISE = (0.5 * LONG_RNG.standard_normal((10_000, 4))).astype(np.float32)
P_START, P_GOAL = LONG_RNG.standard_normal(4).astype(np.float32), LONG_RNG.standard_normal(4).astype(np.float32)
CURVATURE = 0.5
NEAR_1 = {"b1": 0.99, "b2": 0.99999}  # NOTE: float32(0.99999) is off by 0.14% of 1 - b2

# (name, specgrad optimizer, numpy reference, torch optimizer, kwargs, scale of the params and their goal)
LONG_CASES: list[tuple[str, Callable, Callable, str, dict[str, Any], float]] = [
    ("sgd", optim.SGD, ref_sgd, "SGD", {"lr": 0.05}, 1.0),
    ("sgd_momentum", optim.SGD, ref_sgd, "SGD", {"lr": 0.01, "momentum": 0.9}, 1.0),
    ("sgd_nesterov", optim.SGD, ref_sgd, "SGD", {"lr": 0.005, "momentum": 0.99, "nesterov": True}, 1.0),
    ("sgd_wd", optim.SGD, ref_sgd, "SGD", {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1}, 1.0),
    ("sgd_tiny_lr", optim.SGD, ref_sgd, "SGD", {"lr": 1e-7, "momentum": 0.9}, 1e-3),
    ("adam", optim.Adam, ref_adam, "Adam", {"lr": 0.01}, 1.0),
    ("adam_betas_near_1", optim.Adam, ref_adam, "Adam", {"lr": 1e-3, **NEAR_1}, 1.0),
    ("adam_tiny_lr", optim.Adam, ref_adam, "Adam", {"lr": 1e-7, **NEAR_1}, 1e-3),
    ("adam_wd", optim.Adam, ref_adam, "Adam", {"lr": 0.01, "b1": 0.8, "b2": 0.99, "eps": 1e-6, "weight_decay": 0.1}, 1),
    ("adamw", optim.AdamW, ref_adam, "AdamW", {"lr": 0.01}, 1.0),
    ("adamw_betas_near_1", optim.AdamW, ref_adam, "AdamW", {"lr": 1e-3, **NEAR_1, "weight_decay": 0.5}, 1.0),
]


def long_schedule(opt: Any, steps: int, torch_opt: bool = False) -> Any:
    """Warm-up then cosine to 0 over the run: every step replays with a new lr."""
    if torch_opt:
        parts = [lrs().LinearLR(opt, 1 / 100, total_iters=100), lrs().CosineAnnealingLR(opt, steps - 100)]
        return lrs().SequentialLR(opt, parts, milestones=[100])
    return optim.LinearWarmup(opt, 100, after=optim.CosineAnnealingLR(opt, steps - 100))


def sg_long_run(make: Callable, kwargs: dict[str, Any], steps: int, scale: float, device: str) -> np.ndarray:
    """The params after each step, training on loss = p.noise + curvature/2 |p - goal|^2 through TinyJit."""
    p, goal = Tensor(P_START * scale, device=device), Tensor(P_GOAL * scale, device=device)
    opt = make([p], **kwargs)
    sched = long_schedule(opt, steps)

    @TinyJit
    def train_step(noise: Tensor) -> Tensor:
        opt.zero_grad()
        ((p * noise).sum() + CURVATURE / 2 * ((p - goal) ** 2).sum()).backward()
        opt.step()
        return p.realize()

    ret = np.stack([(train_step(Tensor(NOISE[i], device=device)).numpy(), sched.step())[0] for i in range(steps)])
    assert train_step.cnt == steps and (not isinstance(opt, optim.Adam) or opt.t.item() == steps)
    return ret


def ref_long_run(ref: Callable, kwargs: dict[str, Any], steps: int, scale: float, sched: Any) -> np.ndarray:
    p, goal, st, ret = P_START.astype(np.float64) * scale, P_GOAL.astype(np.float64) * scale, {}, []
    for i in range(steps):
        p = ref(p, NOISE[i] + CURVATURE * (p - goal), st, **(kwargs | {"lr": sched.lr_at(i)}))
        ret.append(p)
    return np.stack(ret)


def torch_long_run(name: str, kwargs: dict[str, Any], steps: int, scale: float) -> np.ndarray:
    p, goal = torch.tensor(P_START * scale, requires_grad=True), torch.tensor(P_GOAL * scale)
    opt = getattr(torch.optim, name)([p], **torch_kwargs(kwargs))
    sched, ret = long_schedule(opt, steps, torch_opt=True), []
    for i in range(steps):
        opt.zero_grad()
        ((p * torch.from_numpy(NOISE[i])).sum() + CURVATURE / 2 * ((p - goal) ** 2).sum()).backward()
        opt.step()
        sched.step()
        ret.append(p.detach().numpy().copy())
    return np.stack(ret)


def check_long_run(case: tuple, steps: int) -> None:
    """Step for step within float32 rounding of the float64 reference; vs torch within torch's own float32 drift.

    The params round to float32 at every step, errors that walk randomly: after T steps about sqrt(T) half-ulps of the
    largest param, so we allow 4 sqrt(T) 2**-24 of it. torch rounds its constants (1 - lr*wd, b2 near 1) to float32
    and so drifts one way every step, up to T 2**-24: the bound for torch vs the reference and for us vs torch.
    """
    name, make, ref, torch_name, kwargs, scale = case
    got = sg_long_run(make, kwargs, steps, scale, "CLANG")
    decoupled = {"w": True, "weight_decay": kwargs.get("weight_decay", 0.01)} if torch_name == "AdamW" else {}
    ref_kwargs = kwargs | decoupled
    sched = long_schedule(optim.SGD([Tensor([0.0])], lr=kwargs["lr"]), steps)
    want = ref_long_run(ref, ref_kwargs, steps, scale, sched)
    assert np.isfinite(got).all(), f"{name}: first non-finite step {np.flatnonzero(~np.isfinite(got).all(1))[0] + 1}"
    size = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * math.sqrt(steps) * 2**-24 * size, err_msg=name)
    if torch is not None:
        theirs = torch_long_run(torch_name, kwargs, steps, scale)
        np.testing.assert_allclose(theirs, want, rtol=0, atol=steps * 2**-24 * size, err_msg=f"{name}: torch vs ref")
        np.testing.assert_allclose(got, theirs, rtol=0, atol=steps * 2**-24 * size, err_msg=f"{name}: vs torch")


@pytest.mark.parametrize("case", LONG_CASES, ids=[c[0] for c in LONG_CASES])
def test_long_run_matches_reference(case: tuple) -> None:
    """2,000 jitted steps: past step 987, where Adam's bias correction underflowed to 0 and the params became NaN."""
    check_long_run(case, 2_000)


@pytest.mark.slow
@pytest.mark.parametrize("case", LONG_CASES, ids=[c[0] for c in LONG_CASES])
def test_long_run_matches_reference_10k(case: tuple) -> None:
    check_long_run(case, 10_000)


# ***** resuming: a checkpoint's optimizer state, and a jump of the step counter *****


def adam_resumed_at(t0: int, b1: float, b2: float, device: str) -> tuple[optim.Adam, Tensor, dict]:
    """An Adam whose state is loaded as a resume loads it (strict=False, no params), at step t0 mid-run."""
    p = Tensor(P_START, device=device)
    opt = optim.Adam([p], lr=1e-3, b1=b1, b2=b2)
    m0, v0 = 0.1 * NOISE[0], NOISE[1] ** 2
    state = {"t": Tensor(np.array(t0, np.int32)), "m.0": Tensor(m0), "v.0": Tensor(v0)}
    assert set(state) <= set(get_state_dict(opt))
    load_state_dict(opt, state, strict=False)
    return opt, p, {"t": t0, "m": m0.astype(np.float64), "v": v0.astype(np.float64)}


@pytest.mark.parametrize("t0", [10**6, 2**24 - 2], ids=["1e6", "2**24"])
@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.99, 0.99999), (0.9, 0.9999999)], ids=str)
def test_adam_continues_at_a_large_step(device: str, t0: int, betas: tuple[float, float]) -> None:
    """The next steps after a jump to step 10**6 (or across 2**24, where a float32 counter stops) are finite and
    match the reference; the counter counts exactly."""
    opt, p, st = adam_resumed_at(t0, *betas, device)
    train_step = TinyJit(lambda noise: ((p * noise).sum().backward(), opt.step(), p.realize())[-1])
    want = P_START.astype(np.float64)
    for i in range(4):
        opt.zero_grad()
        got = train_step(Tensor(NOISE[2 + i], device=device)).numpy()
        want = ref_adam(want, NOISE[2 + i].astype(np.float64), st, lr=1e-3, b1=betas[0], b2=betas[1])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=f"step {t0 + i + 1}")
    assert opt.t.item() == t0 + 4 and opt.t.dtype == dtypes.int32


def test_a_float32_step_counter_still_loads(device: str) -> None:
    """Checkpoints written before the counter became int32 hold a float32 `t`; it loads as the same count."""
    opt = optim.AdamW([Tensor(P_START, device=device)])
    load_state_dict(opt, {"t": Tensor(np.array(123456, np.float32))}, strict=False)
    assert opt.t.item() == 123456 and opt.t.dtype == dtypes.int32


RESUME_CASES = [c for c in LONG_CASES if c[0] in ("sgd_nesterov", "sgd_wd", "adam_betas_near_1", "adamw")]


@pytest.mark.parametrize("case", RESUME_CASES, ids=[c[0] for c in RESUME_CASES])
def test_checkpoint_resume_is_bit_exact(device: str, case: tuple, tmp_path: Any) -> None:
    """N steps, save (as the trainer: the optimizer's state dict without params.*), a fresh optimizer and schedule
    loaded from the file and jumped to step N, M more steps: bit for bit the uninterrupted N + M steps."""
    _, make, _, _, kwargs, _ = case

    def run(start: int, stop: int, load: str | None) -> tuple[np.ndarray, Any]:
        p = Tensor(P_START, device=device)
        opt = make([p], **kwargs)
        sched = long_schedule(opt, 200)
        if load is not None:
            state = safe_load(tmp_path / load)
            p.assign(state.pop("p").to(device)).realize()
            load_state_dict(opt, state, strict=False)
            sched.step(epoch=start)
        train_step = TinyJit(lambda noise: ((p * noise + p * p).sum().backward(), opt.step(), p.realize())[-1])
        for i in range(start, stop):
            opt.zero_grad()
            train_step(Tensor(NOISE[i], device=device))
            sched.step()
        state = {k: v for k, v in get_state_dict(opt).items() if not k.startswith("params.")}
        safe_save(state | {"p": p}, tmp_path / f"at{stop}.safetensors")
        return p.numpy(), state

    whole, whole_state = run(0, 60, None)
    run(0, 25, None)
    resumed, resumed_state = run(25, 60, "at25.safetensors")
    np.testing.assert_array_equal(resumed, whole)
    assert set(resumed_state) == set(whole_state)
    for k in whole_state:
        np.testing.assert_array_equal(resumed_state[k].numpy(), whole_state[k].numpy(), err_msg=k)


# ***** lr schedules over long runs, jumps (a resume's step(epoch=k)) and large epochs *****

LONG_SCHEDULES: list[tuple[str, Callable, Callable | None]] = [
    ("constant", optim.Constant, None),
    ("step", lambda o: optim.StepLR(o, 700, gamma=0.5), lambda o: lrs().StepLR(o, 700, gamma=0.5)),
    ("exponential", lambda o: optim.ExponentialLR(o, 0.9995), lambda o: lrs().ExponentialLR(o, 0.9995)),
    ("cosine", lambda o: optim.CosineAnnealingLR(o, 10_000), lambda o: lrs().CosineAnnealingLR(o, 10_000)),
    (
        "cosine_periodic",
        lambda o: optim.CosineAnnealingLR(o, 300, 1e-4),
        lambda o: lrs().CosineAnnealingLR(o, 300, 1e-4),
    ),
    ("warmup", lambda o: optim.LinearWarmup(o, 500), lambda o: lrs().LinearLR(o, 1 / 500, total_iters=500)),
    ("warmup_cosine", lambda o: long_schedule(o, 10_000), lambda o: long_schedule(o, 10_000, torch_opt=True)),
    (
        "warmup_exponential",
        lambda o: optim.LinearWarmup(o, 100, after=optim.ExponentialLR(o, 0.999)),
        lambda o: lrs().SequentialLR(
            o, [lrs().LinearLR(o, 1 / 100, total_iters=100), lrs().ExponentialLR(o, 0.999)], milestones=[100]
        ),
    ),
]


@pytest.mark.parametrize("case", LONG_SCHEDULES, ids=[c[0] for c in LONG_SCHEDULES])
def test_schedule_matches_torch_for_10k_steps(case: tuple) -> None:
    """torch's schedules are recursive (lr_e from lr_e-1); its cosine loses ~1e-9 relative near T_max, where
    1 + cos cancels, so that is the tolerance. The optimizer's float32 lr is the schedule's lr, rounded once."""
    _, make, torch_make = case
    if torch is None or torch_make is None:  # NOTE: the optimizer's lr is checked without torch in the test below
        pytest.skip("torch is not installed" if torch is None else "torch has no schedule of its own for this")
    opt = optim.SGD([Tensor([0.0])], lr=0.1)
    sched = make(opt)
    got = [sched.get_lr()] + [(sched.step(), sched.get_lr())[1] for _ in range(10_000)]
    assert opt.lr.item() == float(np.float32(got[-1]))
    np.testing.assert_allclose(got, torch_lrs(torch_make, 10_000), rtol=5e-9, atol=1e-300)


@pytest.mark.parametrize("case", LONG_SCHEDULES, ids=[c[0] for c in LONG_SCHEDULES])
def test_schedule_jump_equals_stepping(case: tuple) -> None:
    """A resume calls step(epoch=k): the same lr, in the optimizer too, as k single steps."""
    _, make, _ = case
    opt = optim.SGD([Tensor([0.0])], lr=0.1)
    sched = make(opt)
    stepped = {}
    for k in range(1, 1201):
        sched.step()
        stepped[k] = (sched.get_lr(), opt.lr.item())
    for k in (1, 2, 99, 100, 101, 299, 300, 301, 499, 500, 700, 1200):
        jopt = optim.SGD([Tensor([0.0])], lr=0.1)
        jumped = make(jopt)
        jumped.step(epoch=k)
        assert (jumped.get_lr(), jopt.lr.item()) == stepped[k], f"epoch {k}"


def mp_lr(name: str, e: int) -> float:
    """The LONG_SCHEDULES lr at epoch e to 40 digits (mpmath; constants as the binary floats they are)."""
    import mpmath

    mp, f = mpmath.mp.clone(), mpmath.mpf
    mp.dps = 40

    def cosine(e: int, t: int, eta: float) -> Any:
        return f(eta) + (f(0.1) - f(eta)) * (1 + mp.cos(mp.pi * e / t)) / 2

    def warmup(e: int, w: int, after: Callable[[int], Any]) -> Any:
        return f(0.1) * (f(1) / w + (1 - f(1) / w) * e / w) if e < w else after(e - w)

    table = {
        "constant": lambda: f(0.1),
        "step": lambda: f(0.1) * f(0.5) ** (e // 700),
        "exponential": lambda: f(0.1) * f(0.9995) ** e,
        "cosine": lambda: cosine(e, 10_000, 0.0),
        "cosine_periodic": lambda: cosine(e, 300, 1e-4),
        "warmup": lambda: warmup(e, 500, lambda e: f(0.1)),
        "warmup_cosine": lambda: warmup(e, 100, lambda e: cosine(e, 9_900, 0.0)),
        "warmup_exponential": lambda: warmup(e, 100, lambda e: f(0.1) * f(0.999) ** e),
    }
    return float(table[name]())


@pytest.mark.parametrize("case", LONG_SCHEDULES, ids=[c[0] for c in LONG_SCHEDULES])
def test_schedule_is_exact_at_large_epochs(case: tuple) -> None:
    """lr_at to a few float64 ulps at any epoch, also 10**9 (a cosine's angle is reduced in integers first)."""
    pytest.importorskip("mpmath")
    name, make, _ = case
    sched = make(optim.SGD([Tensor([0.0])], lr=0.1))
    epochs = [0, 1, 99, 100, 299, 300, 9_899, 9_900, 9_999, 10_000, 10**6 + 1, 10**9 + 7, 2**31 - 1]
    got, want = [sched.lr_at(e) for e in epochs], [mp_lr(name, e) for e in epochs]
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)
