"""The CLANG thread pool: large kernels split their outer loop across threads, and no result depends on how many."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from specgrad import Tensor
from specgrad.device import Device
from specgrad.ops import BufferOps
from specgrad.schedule import create_schedule

PROGRAM = """
import hashlib, numpy as np
from specgrad import Tensor
rng = np.random.default_rng(0)
a, b = (Tensor(rng.standard_normal((192, 160), dtype=np.float32), device="CLANG") for _ in range(2))
outs = [a @ b.T, a.softmax(-1), a.sum(), (a * b).relu().mean(0), a.exp().sum(1)]
print(hashlib.sha256(b"".join(t.numpy().tobytes() for t in outs)).hexdigest())
"""


def run_with_threads(threads: int, tmp: str) -> str:
    env = {**os.environ, "THREADS": str(threads), "CACHEDIR": tmp}
    res = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_results_do_not_depend_on_the_thread_count(clang: None, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = str(tmp_path_factory.mktemp("cache"))
    digests = {threads: run_with_threads(threads, cache) for threads in (1, 2, 3)}
    assert len(set(digests.values())) == 1, f"results differ by thread count: {digests}"


def kernel_source(t: Tensor) -> str:
    (ast,) = [si.ast for si in create_schedule([t.lazydata]) if si.ast.op is BufferOps.STORE]
    return Device["CLANG"].get_runner(ast).src


def test_large_kernels_are_split_and_small_ones_are_not(clang: None) -> None:
    big = Tensor(np.ones((256, 256), np.float32), device="CLANG").realize()
    small = Tensor(np.ones((4, 4), np.float32), device="CLANG").realize()
    assert "sg_parallel_for(" in kernel_source(big * 2 + 1)
    assert "sg_parallel_for" not in kernel_source(small * 2 + 1)


def test_a_split_kernel_computes_every_element(clang: None) -> None:
    x = np.arange(1000 * 37, dtype=np.float32).reshape(1000, 37)  # NOTE: rows not divisible by the thread count
    np.testing.assert_array_equal((Tensor(x, device="CLANG") * 3 - 1).numpy(), x * 3 - 1)
    np.testing.assert_allclose(Tensor(x, device="CLANG").sum(1).numpy(), x.sum(1), rtol=1e-6)


def test_the_threads_flag_takes_effect_at_run_time(clang: None) -> None:
    from specgrad import Context
    from specgrad.helpers import cores

    if cores() < 2:
        pytest.skip("one core: the pool has no threads to hand out")
    x = np.arange(512 * 300, dtype=np.float32).reshape(512, 300) / 1000
    t = Tensor(x, device="CLANG").realize()
    with Context(THREADS=1):
        one = (t * 3 - 1).exp2().sum(1).numpy()
        pools = {id(r.fxn.pool): r.fxn.pool for r in Device["CLANG"].runners.values() if r.fxn.pool is not None}
        assert pools and all(p.active == 1 for p in pools.values())
    every = (t * 3 - 1).exp2().sum(1).numpy()
    assert all(p.active == min(cores(), p.threads) for p in pools.values())
    np.testing.assert_array_equal(one, every)
