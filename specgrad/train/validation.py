"""Evaluation compiled like training: a forward captured with TinyJit once per batch shape and replayed (ShapeJits), and
a pass over a split whose figures per batch (each output's loss, its hit count) stay on the device, one slot per batch,
until the pass ends and each is read once (SlotPass).

Imports the public API (Tensor, TinyJit) only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from specgrad import Tensor, TinyJit

Batch = list[Tensor]
# NOTE: slots per figure on the device: a slot write selects over every slot (O(SLOTS)), so a pass of more batches
# reads its figures every SLOTS batches, a host read per 256 batches instead of a write cost growing with the split
SLOTS = 256


class ShapeJits:
    """`fxn` (taking lists of Tensors) captured once per shape of its tensors and replayed: a split's full batches
    share one capture and its last, shorter batch has its own, since a TinyJit replays one shape only."""

    def __init__(self, fxn: Callable[..., Any]):
        self.fxn = fxn
        self.jits: dict[tuple[tuple[Any, ...], ...], TinyJit] = {}

    def __call__(self, *groups: Batch) -> Any:
        key = tuple(t.shape for group in groups for t in group)
        if (jit := self.jits.get(key)) is None:
            jit = self.jits[key] = TinyJit(self.fxn)
        return jit(*groups)


class SlotPass:
    """A pass over `batches` batches in which `measure` gives each batch's figures (Tensors, realized: scalars, or of
    one shape for every batch, such as a batch's outputs padded to a whole batch), and the
    captured step writes figure k of batch b into slot b % SLOTS of figure k's device buffer. A device-side counter
    says which slot, so a replay takes nothing from the host but the batch itself; the figures are read after the pass
    (and every SLOTS batches of a longer one).

    The weights and other state `measure` reads through closures change in place (assign) between passes, as in a
    captured training step, so each pass replays the same kernels on the current weights."""

    def __init__(self, measure: Callable[[Batch, Batch], list[Tensor]], batches: int):
        self.measure, self.batches = measure, batches
        self.size = max(1, min(batches, SLOTS))  # NOTE: slots per figure
        self.reset()

    def reset(self) -> None:
        """Forget the captures and the buffers: the next pass captures anew."""
        self.step = ShapeJits(self._step)
        self.slots: list[Tensor] = []  # per figure, (size,): filled by the pass, read every `size` batches
        # NOTE: () the next batch's number in the pass (back to 0 after the last; its slot is that % size), and
        # (size,) 0, 1, ... size - 1
        self.state: tuple[Tensor, Tensor] | None = None

    def run(self, pairs: Iterable[tuple[Batch, Batch]]) -> list[np.ndarray]:
        """Every batch through the captured step; then each figure's values, one per batch in order (batches, ...)."""
        done, read = 0, []
        try:
            for xs, ys in pairs:
                self.step(xs, ys)
                done += 1
                if done % self.size == 0:
                    read.append([slot.numpy() for slot in self.slots])
            if done != self.batches:
                raise ValueError(f"a pass of {done} batches, where SlotPass has {self.batches} slots")
        except BaseException:
            self.reset()  # NOTE: the counter stopped short of a whole pass
            raise
        if done % self.size:
            read.append([slot.numpy()[: done % self.size] for slot in self.slots])
        return [np.concatenate([part[k] for part in read]) for k in range(len(self.slots))]

    def _step(self, xs: Batch, ys: Batch) -> None:
        figures = self.measure(xs, ys)
        if self.state is None:
            self.state = self._make_state(figures)
        at, positions = self.state
        for slot, figure in zip(self.slots, figures):
            # NOTE: a select, never a multiply by a mask (an infinite loss times 0 is NaN), so each slot holds the
            # figure's own bits. The comparison is no variable: one still held when the counter moves would be
            # computed into a buffer of its own first (schedule.py, _add_assign_readers), a kernel per batch more.
            # A figure with axes (a batch's outputs) fills a slot of its shape
            here = positions == at % self.size
            here = here.reshape(self.size, *[1] * figure.ndim) if figure.ndim else here
            slot.assign(here.where(figure, slot)).realize()
        at.assign((at + 1) % self.batches).realize()  # NOTE: after the slots, which read it; 0 again after the pass

    def _make_state(self, figures: list[Tensor]) -> tuple[Tensor, Tensor]:
        """The slots, the counter and the positions on the figures' device, before the capture (which then updates
        them in place). Each from numpy, a buffer of its own: the lazy cache would give equal zeros one buffer."""
        device = figures[0].device
        self.slots = [Tensor(np.zeros((self.size, *f.shape), f.dtype.np), device=device) for f in figures]
        positions = np.arange(self.size, dtype=np.int32)
        return Tensor(np.zeros((), np.int32), device=device), Tensor(positions, device=device)
