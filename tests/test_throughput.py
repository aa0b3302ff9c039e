"""The CLANG device's register tile probe (runtime/throughput.py): which tile it keeps, that it never stops the
device, that its verdict is cached, and that whichever tile wins computes the same bits."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specgrad import Tensor
from specgrad.codegen.linearizer import LinearizerOptions, linearize
from specgrad.device import BuildFailed, Device, DeviceUnavailable
from specgrad.runtime import throughput
from specgrad.runtime.throughput import CANDIDATES, CHAIN, TIE, Throughput, choose, measured_throughput, probe_ast


def times(**us: float) -> dict[int, float]:
    return {int(k[1:]): v * 1e-6 for k, v in us.items()}


def test_the_rule_tile_stays_unless_another_is_clearly_faster() -> None:
    assert choose(times(t1=1000, t8=290, t16=290 * TIE * 0.99), 64).accumulators == 16, "within TIE: kept"
    assert choose(times(t1=1000, t8=200, t16=300), 64).accumulators == 8
    assert choose(times(t1=1000, t8=300, t16=250), 32).accumulators == 16, "AVX2's rule (8) is beaten"


def test_the_figures_are_the_fastest_tile_and_the_chain() -> None:
    m, k, n = throughput.PROBE_MATMUL
    got = choose(times(t1=1000, t8=250, t16=260), 64)
    assert got.gflops == pytest.approx(2 * m * k * n / 250e-6 / 1e9)
    assert got.chain_gflops == pytest.approx(2 * m * k * n / 1000e-6 / 1e9)
    assert Throughput(16, 116, 32).fma_units == 1 and Throughput(16, 230, 30).fma_units == 2


def test_the_probe_kernels_differ_only_in_the_tile() -> None:
    opts = [linearize(probe_ast(), LinearizerOptions(optimize=True, vector_bytes=64, threads=True, accumulators=a))
            for a in (CHAIN, *CANDIDATES)]  # fmt: skip
    tiles = [int(np.prod([o.amount for o in prg.opts if o.op == "UPCAST"] or [1])) for prg in opts]
    assert tiles == [1, 8, 16]


def test_a_probe_that_cannot_build_leaves_the_rule(tmp_path: object) -> None:
    def broken(src: str) -> bytes:
        raise BuildFailed("no compiler today")

    assert measured_throughput(f"broken {tmp_path}", broken, 64) is None
    assert measured_throughput("any", broken, 0) is None, "no vectors: nothing to measure"


def test_the_device_uses_what_it_measured_and_caches_it() -> None:
    try:
        dev = Device["CLANG"]
    except DeviceUnavailable as e:
        pytest.skip(f"CLANG unavailable: {e}")
    if dev.throughput is None:
        pytest.skip("the probe did not run here")
    assert dev.opts.accumulators == dev.throughput.accumulators in CANDIDATES  # type: ignore[attr-defined]
    assert dev.throughput.gflops > dev.throughput.chain_gflops > 0

    def never(src: str) -> bytes:
        raise AssertionError("the cached verdict was not used")

    from specgrad.flags import CPU_TARGET
    from specgrad.runtime.ops_clang import CFLAGS, compiler_version, cpu_identity, find_compiler, target_flags

    path = find_compiler()
    flags = (*CFLAGS, *target_flags(str(CPU_TARGET.value)))
    identity = f"{path} {compiler_version(path)} {' '.join(flags)} {cpu_identity()}"
    assert measured_throughput(identity, never, dev.opts.vector_bytes) == dev.throughput  # type: ignore[attr-defined]


@pytest.mark.parametrize("accumulators", [CHAIN, *CANDIDATES])
def test_every_tile_computes_the_same_bits(clang: None, accumulators: int) -> None:
    """A tile changes which outputs are computed together, never how one adds up: a matmul, a convolution and a
    weight gradient give the bits of the rule's tile whatever the probe picks."""
    dev = Device["CLANG"]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 200)).astype(np.float32), rng.standard_normal((200, 64)).astype(np.float32)
    x, w = rng.standard_normal((4, 8, 14, 14)).astype(np.float32), rng.standard_normal((16, 8, 3, 3))

    def compute() -> list[np.ndarray]:
        xt, wt = Tensor(x, device="CLANG", requires_grad=True), Tensor(w.astype(np.float32), device="CLANG",
                                                                      requires_grad=True)  # fmt: skip
        xt.conv2d(wt, padding=1).relu().sum().backward()
        return [(Tensor(a, device="CLANG") @ Tensor(b, device="CLANG")).numpy(), wt.grad.numpy(), xt.grad.numpy()]  # type: ignore[union-attr]

    want = compute()
    before = dev.opts
    dev.opts = replace(before, accumulators=accumulators)  # type: ignore[union-attr]
    try:
        got = compute()
    finally:
        dev.opts = before  # type: ignore[union-attr]
    for g, wv in zip(got, want):
        np.testing.assert_array_equal(g, wv)
