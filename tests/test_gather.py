"""Buffer.gather_rows on each device (rows picked by an index buffer, on the device) and HostView (a host device's
buffer over a numpy array's own memory)."""

from __future__ import annotations

import numpy as np
import pytest

from specgrad import Device
from specgrad.device import Buffer, HostView, device_memory
from specgrad.dtype import dtypes
from specgrad.helpers import InvalidArgument


def on(device: str, a: np.ndarray) -> Buffer:
    return Buffer(device, a.size, dtypes.from_np(a.dtype)).copyin(memoryview(np.ascontiguousarray(a).reshape(-1)))


@pytest.mark.parametrize("dtype, shape", [(np.float32, (50, 3, 4)), (np.int64, (50,)), (np.uint8, (50, 3)),
                                          (np.int16, (50, 1))])  # fmt: skip
def test_gather_rows_copies_the_indexed_rows(device: str, dtype: type, shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(1).integers(0, 100, shape).astype(dtype)
    perm = np.random.default_rng(2).permutation(50)
    perm[27] = 49  # NOTE: the last row, at the last position gathered
    out = Buffer(device, 12 * x[0].size, dtypes.from_np(x.dtype))
    out.gather_rows(on(device, x), on(device, perm), 16, 12)
    np.testing.assert_array_equal(out.numpy().reshape(12, *shape[1:]), x[perm[16:28]])


def test_an_index_out_of_range_reads_the_first_or_last_row(device: str) -> None:
    """The feed checks its indices on the host; the device never reads outside the source even so."""
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    out = Buffer(device, 12, dtypes.float32)
    out.gather_rows(on(device, x), on(device, np.array([3, -7, 10_000], dtype=np.int64)), 0, 3)
    np.testing.assert_array_equal(out.numpy().reshape(3, 4), x[[3, 0, 9]])


def test_gather_rows_refuses_what_does_not_fit(device: str) -> None:
    src, index = on(device, np.zeros((10, 4), np.float32)), on(device, np.arange(10, dtype=np.int64))
    out = Buffer(device, 8, dtypes.float32)
    with pytest.raises(InvalidArgument, match="rows 9..11 of an index of 10"):
        out.gather_rows(src, index, 9, 2)
    with pytest.raises(InvalidArgument, match="int64 index"):
        out.gather_rows(src, on(device, np.arange(10, dtype=np.int32)), 0, 2)
    with pytest.raises(InvalidArgument, match="is not 3 rows"):
        out.gather_rows(src, index, 0, 3)
    other = "CPU" if device != "CPU" else "CLANG"
    if Device.is_available(other):
        with pytest.raises(InvalidArgument, match=f"on {device}"):
            out.gather_rows(on(other, np.zeros((10, 4), np.float32)), index, 0, 2)


@pytest.mark.parametrize("name", ["CPU", "CLANG"])
def test_a_host_view_is_the_array_itself_and_never_recycled(name: str) -> None:
    if not Device.is_available(name):
        pytest.skip(f"{name} unavailable")
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    view = HostView(name, x)
    assert np.shares_memory(view._buf, x) and view.size == 24 and view.dtype == dtypes.float32
    allocator, nbytes = view.allocator, view.nbytes
    del view
    assert not any(np.shares_memory(b, x) for b in allocator.cache[nbytes])  # NOTE: never handed out as new memory
    with pytest.raises(InvalidArgument, match="non-contiguous"):
        HostView(name, x[:, ::2])


def test_device_memory_is_known_for_the_gpu_device_only(device: str) -> None:
    memory = device_memory(device)
    assert (memory is None) == (device != "GPU")
    if memory is not None:
        assert 0 < memory[1] <= memory[0]
