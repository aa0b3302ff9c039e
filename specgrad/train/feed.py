"""Training batches from a dataset held on the device: each input and target field uploaded once (on a host-memory
device, CPU or CLANG, the numpy arrays themselves), the epoch's order uploaded once per epoch, and each batch gathered
by index into the same buffers every step, so a captured step (TinyJit) replays on the same input buffers. Imports
numpy, tensor, lazy, device and helpers.

The batches are `data.batches()`'s, byte for byte: the order comes from the same draws of the same generator
(`draw_order`), batch i holds rows order[i * batch_size : (i + 1) * batch_size] and the last partial batch is dropped.
Data the spec augments (data.augment) keeps the host path: its changes are drawn per batch on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specgrad import Device, Tensor
from specgrad.device import Buffer, HostAllocator, HostView, device_memory
from specgrad.dtype import dtypes
from specgrad.helpers import InvalidArgument, prod
from specgrad.lazy import LazyBuffer

HOST_COPY_MAX = 1 << 30  # bytes a feed on a host-memory device may copy (fields of structured data) to hold a dataset
DEVICE_SHARE = 4  # a feed on a device with memory of its own takes at most this fraction (1/4) of it


def draw_order(n: int, shuffle: bool, rng: np.random.Generator | None) -> np.ndarray | None:
    """The epoch's order of `n` examples, from the same draws `data.batches()` makes without augmentation (so the
    generator's state saved in checkpoints is the same after it); None: the data's own order."""
    if not shuffle:
        return None
    if rng is None:
        raise ValueError("draw_order(shuffle=True) needs an np.random.Generator")
    return rng.permutation(n)


def split_fields(a: np.ndarray, names: Sequence[str]) -> list[np.ndarray]:
    """The arrays a batch gives the model as `data.fields()` takes them apart (a structured array's fields by name, else
    the array itself), each as it is: a field of a structured array is a strided view."""
    return [a[n] for n in names] if a.dtype.names else [a]


def in_host_memory(device: str) -> bool:
    """Whether `device`'s buffers are the process's memory (CPU, CLANG): the feed reads numpy arrays there in place."""
    return isinstance(Device[device].allocator, HostAllocator)


def feed_bytes(arrays: list[np.ndarray], batch_size: int, device: str) -> int:
    """Bytes a feed of `arrays` adds on `device`: on a host-memory device the copies it makes (of arrays that are not
    contiguous); elsewhere every array, the order (int64 per example) and a batch of each."""
    if in_host_memory(device):
        return sum(a.nbytes for a in arrays if not a.flags.c_contiguous)
    rows = len(arrays[0]) if arrays else 0
    return sum(a.nbytes + a.nbytes // max(rows, 1) * batch_size for a in arrays) + 8 * rows


def fits(arrays: list[np.ndarray], batch_size: int, device: str) -> bool:
    """Whether a feed of `arrays` fits `device`'s budget: HOST_COPY_MAX bytes of copies on a host-memory device; else
    1/DEVICE_SHARE of the device's memory, and no array over its largest buffer."""
    need = feed_bytes(arrays, batch_size, device)
    if in_host_memory(device) or (memory := device_memory(device)) is None:
        return in_host_memory(device) and need <= HOST_COPY_MAX  # NOTE: a device of unknown memory: no feed
    return need <= memory[0] // DEVICE_SHARE and all(a.nbytes <= memory[1] for a in arrays)


@dataclass(eq=False)
class DeviceFeed:
    """A dataset's fields on one device and the batch tensors filled from them (see the module's docstring). Make one
    with `create` (or `make_feed`), then per epoch `order(draw_order(...))` and `batch(i)` for each batch trained."""

    device: str
    batch_size: int
    rows: int
    sources: list[Buffer]  # inputs then targets, each the whole dataset's field
    batch_buffers: list[Buffer]  # a batch of each source, the same buffers, refilled, every step
    shapes: list[tuple[int, ...]]  # of each batch tensor
    inputs: int  # how many of them are the model's inputs (the rest are the outputs' targets)
    index: Buffer | None = None
    is_identity: bool = False  # the order is the data's own (arange), already in `index`

    @staticmethod
    def create(x: np.ndarray, y: np.ndarray, input_names: Sequence[str], target_names: Sequence[str],
               batch_size: int, device: str | None = None) -> DeviceFeed:  # fmt: skip
        """Upload x's inputs and y's targets (split as `data.fields()` splits them) to `device` (Device.DEFAULT when
        None, where Trainer.tensors makes its tensors), and make the batch buffers, in the data's order."""
        device = Device.canonicalize(device or Device.DEFAULT)
        inputs, targets = split_fields(x, input_names), split_fields(y, target_names)
        if len(x) != len(y) or not 0 < batch_size <= len(x):
            raise InvalidArgument(f"a feed of {len(x)} inputs and {len(y)} targets cannot give batches of {batch_size}")
        sources = [upload(a, device) for a in inputs + targets]
        shapes = [(batch_size, *a.shape[1:]) for a in inputs + targets]
        batch = [Buffer(device, prod(shape), dtypes.from_np(a.dtype)) for shape, a in zip(shapes, inputs + targets)]
        ret = DeviceFeed(device, batch_size, len(x), sources, batch, shapes, len(inputs))
        ret.order(None)
        return ret

    @property
    def steps(self) -> int:
        """Full batches per epoch."""
        return self.rows // self.batch_size

    def order(self, perm: np.ndarray | None) -> None:
        """This epoch's order (draw_order's), checked here, on the host, so the device never reads outside the data;
        None: the data's own order. Uploaded once, before the epoch's batches."""
        if perm is None and self.is_identity:
            return
        identity = perm is None
        perm = np.arange(self.rows, dtype=np.int64) if perm is None else np.ascontiguousarray(perm, dtype=np.int64)
        if perm.shape != (self.rows,) or (self.rows and not 0 <= perm.min() <= perm.max() < self.rows):
            raise InvalidArgument(f"a feed of {self.rows} examples needs an order of {self.rows} indices in "
                                  f"0..{self.rows - 1}, got {perm.shape} values")  # fmt: skip
        if in_host_memory(self.device):
            self.index = HostView(self.device, perm)  # NOTE: the array itself: nothing copied
        else:
            if self.index is None:
                self.index = Buffer(self.device, self.rows, dtypes.int64)
            self.index.copyin(memoryview(perm))
        self.is_identity = identity

    def batch(self, i: int) -> tuple[list[Tensor], list[Tensor]]:
        """Batch i of the epoch as (inputs, targets): new tensors over the feed's own buffers, refilled in place on
        the device. The next call overwrites those buffers: a step must use its tensors (or copy them) before it."""
        if not 0 <= i < self.steps:
            raise InvalidArgument(f"batch {i} of an epoch of {self.steps} batches")
        assert self.index is not None  # NOTE: create() sets the data's order
        for src, dest in zip(self.sources, self.batch_buffers):
            dest.gather_rows(src, self.index, i * self.batch_size, self.batch_size)
        # NOTE: new tensors over the same buffers: a node computed from last step's tensors and still held somewhere
        # is not this step's (the lazy cache keys nodes by their sources), and TinyJit sees the same input buffers
        batch = [Tensor(LazyBuffer.of_buffer(buf, shape), device=self.device)
                 for buf, shape in zip(self.batch_buffers, self.shapes)]  # fmt: skip
        return batch[: self.inputs], batch[self.inputs :]


def make_feed(x: np.ndarray, y: np.ndarray, input_names: Sequence[str], target_names: Sequence[str], batch_size: int,
              device: str | None = None, augment: dict | None = None) -> DeviceFeed | None:  # fmt: skip
    """A DeviceFeed where the data fits the device's budget (`fits`) and is not augmented; else None: the caller
    keeps today's path (`data.batches()` and a new tensor per field per step)."""
    device = Device.canonicalize(device or Device.DEFAULT)
    if augment or not fits(split_fields(x, input_names) + split_fields(y, target_names), batch_size, device):
        return None
    return DeviceFeed.create(x, y, input_names, target_names, batch_size, device)


Batches = list[tuple[list[Tensor], list[Tensor]]]  # (inputs, targets) per batch


def held_batches(x: np.ndarray, y: np.ndarray, input_names: Sequence[str], target_names: Sequence[str],
                 batch_size: int, device: str | None = None) -> Batches | None:  # fmt: skip
    """A split's batches as `data.eval_batches()` cuts them (every example in order, the last batch shorter) as tensors
    made once and used by every pass over the split (validation after each epoch): on a host-memory device over the
    arrays' own memory, elsewhere uploaded once. None where the split does not fit the feed's budget (`fits`): the
    caller makes each pass's tensors from numpy. The tensors are read, never written."""
    device = Device.canonicalize(device or Device.DEFAULT)
    inputs = split_fields(x, input_names)
    if not fits(inputs + split_fields(y, target_names), batch_size, device):
        return None
    arrays = [np.ascontiguousarray(a) for a in inputs + split_fields(y, target_names)]
    ret = []
    for start in range(0, len(x), batch_size):
        parts = [a[start : start + batch_size] for a in arrays]  # NOTE: contiguous: a HostView reads it in place
        batch = [Tensor(LazyBuffer.of_buffer(upload(p, device), p.shape), device=device) for p in parts]
        ret.append((batch[: len(inputs)], batch[len(inputs) :]))
    return ret


def upload(a: np.ndarray, device: str) -> Buffer:
    """A field on `device`: on a host-memory device the array's own memory when it is contiguous (else one contiguous
    copy); elsewhere a buffer of its bytes."""
    if in_host_memory(device):
        return HostView(device, np.ascontiguousarray(a))
    return Buffer(device, a.size, dtypes.from_np(a.dtype)).copyin(memoryview(np.ascontiguousarray(a).reshape(-1)))
