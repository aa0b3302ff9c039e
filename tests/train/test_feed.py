"""DeviceFeed: the dataset on the device, batches gathered by index, byte for byte `batches()`'s, from the same draws
of the same generator; a captured training step fed by it trains bit-identically to one fed new tensors per step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from specgrad import Tensor, TinyJit
from specgrad.device import HostView, device_memory
from specgrad.helpers import InvalidArgument
from specgrad.modelspec.validate import validate_file
from specgrad.nn.state import get_state_dict
from specgrad.train import feed as feed_mod
from specgrad.train.data import batches, fields
from specgrad.train.feed import DeviceFeed, draw_order, make_feed
from specgrad.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
N, B = 103, 16  # NOTE: 16 does not divide 103: 6 full batches, 7 examples dropped


def structured(fields_: dict[str, tuple[type, tuple[int, ...]]], rng: np.random.Generator) -> np.ndarray:
    out = np.empty(N, np.dtype([(k, t, s) for k, (t, s) in fields_.items()]))
    for k, (t, s) in fields_.items():
        out[k] = rng.normal(size=(N, *s)) if t is np.float32 else rng.integers(0, 5, (N, *s))
    return out


def plain(xt: type, xs: tuple[int, ...], yt: type) -> Callable[[np.random.Generator], tuple]:
    return lambda rng: ((rng.normal(size=(N, *xs)) * 50).astype(xt), rng.integers(0, 10, N).astype(yt), ["x"], ["y"])


CASES = {
    "float32 rows, int32 labels": plain(np.float32, (64,), np.int32),
    "float32 images, int64 labels": plain(np.float32, (1, 8, 8), np.int64),
    "byte rows, bool labels": plain(np.uint8, (5,), np.bool_),
    "several inputs and outputs": lambda rng: (
        structured({"sensor": (np.float32, (8,)), "context": (np.float32, (3,))}, rng),
        structured({"fault": (np.int32, ()), "load": (np.float32, (1,))}, rng),
        ["sensor", "context"], ["fault", "load"]),
}  # fmt: skip


def check_batch(got: tuple[list[Tensor], list[Tensor]], x: np.ndarray, y: np.ndarray, names: tuple[list, list],
                device: str) -> None:  # fmt: skip
    """The feed's batch holds what Trainer.tensors makes of (x, y): the same dtypes, shapes and bytes."""
    want = fields(x, names[0]) + fields(y, names[1])
    assert len(got[0]) + len(got[1]) == len(want)
    for t, a in zip(got[0] + got[1], want):
        assert (t.dtype, t.shape, t.device) == (Tensor(a, device=device).dtype, a.shape, device)
        assert t.numpy().tobytes() == a.tobytes()


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("case", CASES)
def test_the_feed_gives_the_batches_batches_gives(device: str, case: str, seed: int) -> None:
    x, y, xn, yn = CASES[case](np.random.default_rng(100 + seed))
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    feed = DeviceFeed.create(x, y, xn, yn, B, device)
    for _ in range(2):
        want = list(batches(x, y, B, True, theirs))
        feed.order(draw_order(N, True, ours))
        assert ours.bit_generator.state == theirs.bit_generator.state  # NOTE: what checkpoints save
        assert feed.steps == len(want) == N // B
        for i, (xb, yb) in enumerate(want):
            check_batch(feed.batch(i), xb, yb, (xn, yn), device)


def test_without_shuffle_the_batches_are_in_the_data_order(device: str) -> None:
    x, y, xn, yn = CASES["several inputs and outputs"](np.random.default_rng(0))
    feed = DeviceFeed.create(x, y, xn, yn, B, device)
    feed.order(np.random.default_rng(0).permutation(N))  # NOTE: a shuffled epoch, then the data's order again
    feed.order(draw_order(N, False, None))
    for i, (xb, yb) in reversed(list(enumerate(batches(x, y, B, False)))):  # NOTE: any batch, without the ones before
        check_batch(feed.batch(i), xb, yb, (xn, yn), device)


def buffer_of(t: Tensor) -> object:
    return t.lazydata.base.realized


def test_the_last_row_and_the_same_buffers_every_step(device: str) -> None:
    x, y, xn, yn = CASES["float32 rows, int32 labels"](np.random.default_rng(3))
    feed = DeviceFeed.create(x, y, xn, yn, B, device)
    perm = np.random.default_rng(3).permutation(N)
    last = N // B * B - 1  # NOTE: the last position gathered holds the last row
    perm[[last, int(np.flatnonzero(perm == N - 1)[0])]] = perm[[int(np.flatnonzero(perm == N - 1)[0]), last]]
    feed.order(perm)
    first = feed.batch(0)
    xs, ys = feed.batch(N // B - 1)
    assert buffer_of(xs[0]) is buffer_of(first[0][0]) and buffer_of(ys[0]) is buffer_of(first[1][0])
    np.testing.assert_array_equal(xs[0].numpy()[-1], x[N - 1])
    assert ys[0].numpy()[-1] == y[N - 1]


def test_orders_and_batches_out_of_range_are_refused(device: str) -> None:
    x, y, xn, yn = CASES["float32 rows, int32 labels"](np.random.default_rng(0))
    feed = DeviceFeed.create(x, y, xn, yn, B, device)
    for bad in (np.arange(N - 1), np.arange(N) - 1, np.arange(N) + 1):
        with pytest.raises(InvalidArgument, match=f"needs an order of {N} indices in 0..{N - 1}"):
            feed.order(bad)
    with pytest.raises(InvalidArgument, match="batch 6 of an epoch of 6 batches"):
        feed.batch(N // B)
    with pytest.raises(InvalidArgument, match="cannot give batches of 104"):
        DeviceFeed.create(x, y, xn, yn, N + 1, device)


def test_make_feed_keeps_the_host_path_for_augmented_or_too_large_data(device: str, monkeypatch: pytest.MonkeyPatch
                                                                       ) -> None:  # fmt: skip
    x, y, xn, yn = CASES["several inputs and outputs"](np.random.default_rng(0))
    assert make_feed(x, y, xn, yn, B, device, augment={"noise": 0.1}) is None
    assert isinstance(make_feed(x, y, xn, yn, B, device), DeviceFeed)
    monkeypatch.setattr(feed_mod, "HOST_COPY_MAX", 0)
    monkeypatch.setattr(feed_mod, "DEVICE_SHARE", 1 << 60)
    assert make_feed(x, y, xn, yn, B, device) is None  # NOTE: structured fields are copied to be contiguous
    px, py, pxn, pyn = CASES["float32 rows, int32 labels"](np.random.default_rng(0))
    ours = make_feed(px, py, pxn, pyn, B, device)
    if device_memory(device) is None:  # NOTE: a host device reads the arrays themselves: nothing to copy
        assert ours is not None and isinstance(ours.sources[0], HostView)
        assert np.shares_memory(ours.sources[0]._buf, px) and np.shares_memory(ours.sources[1]._buf, py)
    else:
        assert ours is None


def train_steps(spec: str, device: str, fed: bool, steps: int = 6) -> tuple[list[float], list[bytes], DeviceFeed | None,
                                                                        Trainer]:  # fmt: skip
    """The losses and final weights of `steps` training steps fed as fit feeds them today or by a DeviceFeed (a new
    trainer each: the model's init and dropout draw from the global generator, which Trainer.create seeds)."""
    trainer = Trainer.create(validate_file(ROOT / spec))
    data, size = trainer.data, trainer.spec.batch_size
    names = list(trainer.spec.inputs), [p.name for p in trainer.losses]
    feed = make_feed(data.x_train, data.y_train, *names, size, device) if fed else None
    rng, losses = np.random.default_rng(5), []
    if feed is not None:
        feed.order(draw_order(len(data.x_train), True, rng))
        losses = [trainer.step_fn(*feed.batch(i)).item() for i in range(steps)]
    else:
        pairs = zip(batches(data.x_train, data.y_train, size, True, rng), range(steps))
        losses = [trainer.step_fn(*trainer.tensors(x, y)).item() for (x, y), _ in pairs]
    return losses, [t.numpy().tobytes() for t in get_state_dict(trainer.model).values()], feed, trainer


@pytest.mark.parametrize("spec", ["specs/digits_mlp.yaml", "docs/examples/two_heads.yaml"])
def test_a_captured_step_fed_by_the_feed_trains_bit_identically(dev: str, spec: str) -> None:
    """Steps past TinyJit's capture: the same losses and weights, byte for byte, as fed today; the captured kernels
    read the feed's own buffers (no copy per replay)."""
    losses, weights, _, _ = train_steps(spec, dev, False)
    fed_losses, fed_weights, feed, trainer = train_steps(spec, dev, True)
    assert feed is not None and len(set(losses)) == 6
    assert fed_losses == losses and fed_weights == weights
    jit, own = trainer.step_fn, {id(b) for b in feed.batch_buffers}
    assert {id(jit.items[i].bufs[j]) for i, j, _ in jit.input_slots} == own and not own & jit.written


def test_a_value_computed_from_an_earlier_batch_is_not_this_batch_s(device: str) -> None:
    """The feed refills its buffers in place; a node built from an earlier batch's tensors and still held (here `kept`)
    must not be handed back for this batch's (the lazy cache keys nodes by their sources), with or without TinyJit."""
    x, y, xn, yn = CASES["float32 rows, int32 labels"](np.random.default_rng(5))
    feed = DeviceFeed.create(x, y, xn, yn, B, device)
    kept = [feed.batch(0)[0][0].sum().realize()]
    assert feed.batch(1)[0][0].sum().item() == pytest.approx(float(x[B : 2 * B].sum()), rel=1e-5)

    @TinyJit
    def total(xs: list[Tensor]) -> Tensor:
        return (xs[0] * 2).sum().realize()

    sums = []
    for i in range(5):
        kept.append(xs := feed.batch(i)[0])
        kept.append(xs[0] * 2)  # NOTE: held across the next call, as a caller might
        sums.append(total(xs).item())
    assert sums == pytest.approx([float(x[i * B : (i + 1) * B].sum() * 2) for i in range(5)], rel=1e-5)
