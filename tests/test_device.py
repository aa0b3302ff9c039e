"""Devices: the registry, Buffers and allocators, kernel counters and DEBUG output."""

from __future__ import annotations

import numpy as np
import pytest

from specgrad import Context, Device, Tensor, dtypes
from specgrad.device import Buffer, DeviceUnavailable, GlobalCounters, LRUAllocator


def test_registry_knows_cpu_and_names_unknown_devices() -> None:
    assert Device["CPU"] is Device["cpu"]
    with pytest.raises(DeviceUnavailable, match="unknown device 'TPU'; known devices: CLANG, GPU, CPU"):
        Device["TPU"]


def test_default_device_can_be_set() -> None:
    before = Device.DEFAULT
    try:
        Device.DEFAULT = "cpu"
        assert Device.DEFAULT == "CPU" and Tensor([1.0]).device == "CPU"
        with pytest.raises(DeviceUnavailable):
            Device.DEFAULT = "NOPE"
    finally:
        Device.DEFAULT = before


def test_buffer_roundtrip(device: str) -> None:
    data = np.arange(10, dtype=np.float32)
    buf = Buffer(device, 10, dtypes.float32).copyin(memoryview(data))
    np.testing.assert_equal(buf.numpy(), data)
    with pytest.raises(ValueError, match="copyin of 8 bytes into a buffer of 40 bytes"):
        buf.copyin(memoryview(np.zeros(2, dtype=np.float32)))


class CountingAllocator(LRUAllocator):
    def __init__(self) -> None:
        super().__init__()
        self.allocs = 0
        self.frees = 0

    def _alloc(self, nbytes: int) -> bytearray:
        self.allocs += 1
        return bytearray(nbytes)

    def _free(self, opaque: bytearray) -> None:
        self.frees += 1


def test_lru_allocator_reuses_freed_blocks() -> None:
    alloc = CountingAllocator()
    a = alloc.alloc(64)
    alloc.free(a, 64)
    assert alloc.alloc(64) is a and alloc.allocs == 1
    b = alloc.alloc(32)
    alloc.free(b, 32)
    with Context(LRU=0):
        c = alloc.alloc(16)
        alloc.free(c, 16)
    assert alloc.frees == 1
    alloc.free_cache()
    assert alloc.frees == 2 and not any(alloc.cache.values())


def test_lru_allocator_frees_cache_on_memory_error() -> None:
    class Tight(CountingAllocator):
        def _alloc(self, nbytes: int) -> bytearray:
            if self.cache and any(self.cache.values()):
                raise MemoryError
            return super()._alloc(nbytes)

    alloc = Tight()
    alloc.free(alloc.alloc(8), 8)
    assert alloc.alloc(16) is not None and alloc.frees == 1


def test_global_counters_count_kernels_and_flops() -> None:
    a, b = Tensor.rand(16, 16).realize(), Tensor.rand(16, 16).realize()
    GlobalCounters.reset()
    (a @ b).realize()
    assert GlobalCounters.kernel_count == 1
    assert GlobalCounters.global_ops == 16 * 16 * 16 * 2
    assert GlobalCounters.global_mem >= 3 * 16 * 16 * 4
    assert GlobalCounters.time_sum_s > 0


def test_debug_output(capsys: pytest.CaptureFixture[str]) -> None:
    a = Tensor.rand(4, 4, device="CPU").realize()
    with Context(DEBUG=3):
        ((a + 1).sum() * 2).realize()
    out = capsys.readouterr().out
    assert "scheduled 1 kernel(s)" in out
    assert "r_16" in out and "GFLOP/s" in out
    assert "STORE" in out and "LOAD" in out and "SUM" in out


def test_copy_between_devices_keeps_values(device: str) -> None:
    t = Tensor([1.0, 2.0, 3.0], device="CPU")
    np.testing.assert_equal(t.to(device).numpy(), [1.0, 2.0, 3.0])


def test_default_device_from_environment() -> None:
    import subprocess
    import sys

    code = "from specgrad import Device; print(Device.DEFAULT)"
    ok = subprocess.run([sys.executable, "-c", code], env={"DEVICE": "cpu", "PATH": ""}, capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip() == "CPU"
    bad = subprocess.run(
        [sys.executable, "-c", code], env={"DEVICE": "TPU", "PATH": ""}, capture_output=True, text=True
    )
    assert bad.returncode != 0 and "the environment variable DEVICE is 'TPU', but DEVICE takes CPU, CLANG or GPU" in (
        bad.stderr
    )


def test_the_device_flag_takes_the_devices_that_compute() -> None:
    """flags.py cannot import device.py (it is below it): the DEVICE flag's choices are kept equal to the table."""
    from specgrad.device import DEVICE_TABLE
    from specgrad.flags import DEVICE

    assert set(DEVICE.choices) == set(DEVICE_TABLE) - {"DISK"}


def test_the_opt_flag_takes_effect_after_the_first_kernel(device: str) -> None:
    if device == "CPU":
        pytest.skip("the interpreted device has no kernel opts")
    name = device
    x = Tensor(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096, device=name).realize()
    want = x.numpy() @ x.numpy()
    np.testing.assert_allclose((x @ x).numpy(), want, rtol=1e-5)
    with Context(OPT=0):
        np.testing.assert_allclose((x @ x).numpy(), want, rtol=1e-5)
    runners = Device[name].runners
    by_opt = {o.optimize: r for (ast, o), r in runners.items() if r.name.startswith("r_")}
    assert set(by_opt) == {True, False}, "the same matmul was lowered again, without opts, under OPT=0"
    assert by_opt[True].src != by_opt[False].src


@pytest.mark.parametrize("nbytes", [1, 100, 4096, 1 << 20])
def test_host_buffers_start_on_a_cache_line(nbytes: int) -> None:
    """A kernel's speed must not depend on where malloc put its operands (16-byte aligned: a 256 x 256 matmul ran at
    half speed in some runs); host buffers start on 64 bytes, however many are made and freed around them."""
    keep = [Buffer("CPU", nbytes + k, dtypes.uint8) for k in range(40)]
    for buf in keep:
        assert buf._buf.ctypes.data % 64 == 0 and buf._buf.nbytes == buf.nbytes
    del keep[::2]
    buf = Buffer("CPU", nbytes, dtypes.uint8)
    assert buf._buf.ctypes.data % 64 == 0
