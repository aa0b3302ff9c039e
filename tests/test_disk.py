"""The DISK device: tensors that are views of a file, copied to a compute device reading only the bytes they cover;
no compute and no writes on it, and a clear ValueError for every path it cannot map."""

from __future__ import annotations

import os
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from specgrad import Device, Tensor, dtypes
from specgrad.device import DeviceUnavailable

A = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    """A file holding A's float32 bytes, as numpy writes them."""
    path = tmp_path / "a.bin"
    A.tofile(path)
    return path


def on_disk(path: Path, shape: tuple[int, ...] = (4, 6), dtype=dtypes.float32) -> Tensor:
    return Tensor.empty(*shape, dtype=dtype, device=f"disk:{path}")


def test_a_file_maps_as_a_tensor_and_copies_to_each_device(raw: Path, device: str) -> None:
    t = on_disk(raw)
    assert t.device == f"DISK:{raw}" and t.shape == (4, 6) and t.dtype == dtypes.float32
    moved = t.to(device)
    assert moved.device == device
    np.testing.assert_array_equal(moved.numpy(), np.fromfile(raw, dtype=np.float32).reshape(4, 6))
    np.testing.assert_array_equal(t.numpy(), A)  # numpy() copies out from the disk device directly
    np.testing.assert_array_equal((moved * 2).sum(axis=1).numpy(), (A * 2).sum(axis=1))


VIEWS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = {
    "shrink rows": (lambda t: t.shrink(((1, 3), None)), lambda a: a[1:3]),
    "shrink block": (lambda t: t.shrink(((1, 4), (2, 5))), lambda a: a[1:4, 2:5]),
    "reshape then shrink": (lambda t: t.reshape(3, 8).shrink(((2, 3), (1, 7))), lambda a: a.reshape(3, 8)[2:3, 1:7]),
    "permute": (lambda t: t.permute(1, 0), lambda a: a.T),
    "flip": (lambda t: t.flip(0), lambda a: a[::-1]),
    "strided slice": (lambda t: t[::2, 1::3], lambda a: a[::2, 1::3]),
    "one element": (lambda t: t.shrink(((3, 4), (5, 6))).reshape(()), lambda a: a[3, 5]),
    "empty shrink": (lambda t: t.shrink(((2, 2), None)), lambda a: a[2:2]),
}


@pytest.mark.parametrize("view", VIEWS)
def test_views_copy_what_numpy_reads_from_the_file(raw: Path, device: str, view: str) -> None:
    fn, ref = VIEWS[view]
    expected = ref(np.memmap(raw, dtype=np.float32, mode="r", shape=(4, 6)))
    got = fn(on_disk(raw)).to(device).numpy()
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def sparse_file(path: Path, size: int, writes: dict[int, bytes]) -> None:
    """A file of `size` bytes that are holes (zeros taking no space) except for `writes`; skips where the filesystem
    cannot hold a file that large."""
    with open(path, "wb") as f:
        try:
            f.truncate(size)
        except OSError as e:
            pytest.skip(f"this filesystem cannot hold a sparse file of {size} bytes: {e}")
        for offset, data in writes.items():
            f.seek(offset)
            f.write(data)


def test_a_copy_reads_only_the_bytes_of_its_view(tmp_path: Path, device: str) -> None:
    """A 1 TiB file (sparse: it takes no space) cannot be read whole on any machine that runs this; a view's copy
    reads its own bytes only, and allocates nothing near the file's size (tracemalloc sees numpy's allocations)."""
    n = 2**38  # float32s: 1 TiB
    tail, head = np.array([1.5, -2.0, 3.25, 4.0], dtype=np.float32), np.array([9, 8], dtype=np.float32)
    path = tmp_path / "huge.bin"
    sparse_file(path, n * 4, {0: head.tobytes(), n * 4 - 16: tail.tobytes()})
    t = on_disk(path, (n,))
    tracemalloc.start()
    try:
        got_tail = t.shrink(((n - 4, n),)).to(device).numpy()
        got_head = t.shrink(((0, 2),)).to(device).numpy()
        got_hole = t.reshape(2**19, 2**19).shrink(((1000, 1002), (7, 10))).to(device).numpy()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(got_tail, tail)
    np.testing.assert_array_equal(got_head, head)
    np.testing.assert_array_equal(got_hole, np.zeros((2, 3), dtype=np.float32))
    assert peak < 2**20, f"copying 36 bytes out of a 1 TiB file allocated {peak} bytes"


@pytest.mark.parametrize(
    "compute, what",
    [
        (lambda t: t + 1, r"cannot compute \(ADD\)"),
        (lambda t: t.sum(), r"cannot compute \(SUM\)"),
        (lambda t: t.cast(dtypes.int32), r"cannot compute \(CAST\)"),
        (lambda t: t.exp(), r"cannot compute \("),
        (lambda t: t.pad(((1, 0), None)), "not a pad"),
        (lambda t: t.reshape(4, 1, 6).expand(4, 3, 6), "not an expand"),
    ],
)
def test_computing_on_the_disk_device_is_refused(raw: Path, compute: Callable, what: str) -> None:
    t = on_disk(raw)
    with pytest.raises(ValueError, match=what) as e:
        compute(t).to("CPU").numpy()
    assert f"DISK:{raw}" in str(e.value) and "move the tensor to a compute device first" in str(e.value)
    np.testing.assert_array_equal(compute(t.to("CPU")).numpy(), compute(Tensor(A, device="CPU")).numpy())


def test_writing_to_a_disk_tensor_is_refused_and_writes_nothing(raw: Path) -> None:
    before = raw.read_bytes()
    t = on_disk(raw)
    writes = [
        lambda: t.assign(Tensor.zeros(4, 6, device="CPU")),
        lambda: t.assign(on_disk(raw)),
        lambda: Tensor(np.zeros((4, 6), dtype=np.float32), device=f"disk:{raw}"),
        lambda: Tensor(np.zeros(3, dtype=np.float32), device="CPU").to(f"disk:{raw}").realize(),
        lambda: Tensor.rand(4, device=f"disk:{raw}").realize(),
    ]
    for write in writes:
        with pytest.raises(ValueError, match="read-only") as e:
            write()
        assert str(raw) in str(e.value) and "nothing was written" in str(e.value)
    assert raw.read_bytes() == before and [p.name for p in raw.parent.iterdir()] == [raw.name]
    np.testing.assert_array_equal(t.numpy(), A)


def raises_soon(fn: Callable[[], object], seconds: float = 20.0) -> BaseException:
    """The exception `fn` raises, failing the test if it takes longer than `seconds` (opening a FIFO can block)."""
    caught: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 (handed back to the test)
            caught.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    assert caught, "expected an error"
    return caught[0]


def test_paths_it_cannot_map_are_value_errors_naming_them(tmp_path: Path, raw: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    cases = {
        tmp_path / "missing.bin": "no such file",
        tmp_path: "is a directory, not a regular file",
        fifo: "is a FIFO, not a regular file",
        raw: "has 96 bytes, fewer than the 400 the tensor needs",
    }
    for path, what in cases.items():
        e = raises_soon(lambda path=path: on_disk(path, (100,)))
        assert isinstance(e, ValueError) and str(path) in str(e) and what in str(e), repr(e)
    with pytest.raises(DeviceUnavailable, match="the DISK device needs a file: device='disk:/path/to/file'"):
        Tensor.empty(2, device="disk")


def test_a_disk_device_is_named_by_its_absolute_path(raw: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(raw.parent)
    assert Device.canonicalize("disk:a.bin") == f"DISK:{raw}" == Device.canonicalize(f"DISK:{raw}")
    assert Device["disk:a.bin"] is Device[f"disk:{raw}"]
    t = Tensor.empty(24, device="disk:a.bin")
    assert t.device == f"DISK:{raw}" and t.numpy().tolist() == A.reshape(-1).tolist()


@pytest.mark.parametrize("dtype", list(dtypes.fields()))
def test_every_dtype_reads_its_bytes(tmp_path: Path, device: str, dtype: str) -> None:
    dt = dtypes.fields()[dtype]
    path = tmp_path / f"{dtype}.bin"
    (np.random.default_rng(1).standard_normal(10) * 40).astype(dt.np).tofile(path)
    got = on_disk(path, (2, 5), dt).shrink(((1, 2), (1, 4))).to(device).numpy()  # a float16 on GPU skips (no half)
    np.testing.assert_array_equal(got, np.fromfile(path, dtype=dt.np).reshape(2, 5)[1:2, 1:4])
    assert got.dtype == dt.np
