"""Differential fuzzing: random graphs through the public Tensor API, forward and every gradient vs float64.

The reference is torch autograd in float64 where torch is installed; without it the forward is checked against a
float64 numpy evaluation and gradients are skipped (the torch-only tests say so). A mismatch is shrunk to a minimal
graph and reported as a runnable snippet; each one found becomes a named test in test_regressions.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.fuzz import graphs
from tests.fuzz.graphs import (
    OPS,
    Graph,
    Node,
    mismatch,
    np_conv2d,
    random_graph,
    run_numpy,
    run_torch,
    shrink,
    size,
    torch,
    worst,
)

# graphs per device in the default run (the GPU's each compile about 7 kernels at 0.3 s under PoCL, so it takes
# fewer: its OpenCL is each op's, which tests/test_ops.py checks one by one)
FAST = {"CPU": 300, "CLANG": 60, "GPU": 5}
SLOW = {"CPU": 1000, "CLANG": 300, "GPU": 100}
FAST_OPS, SLOW_OPS = 6, 8
# (device, seed) of graphs whose mismatch is a known engine bug, pinned by a strict xfail in test_regressions.py
KNOWN: dict[tuple[str, int], str] = {}  # (device, seed) -> the regression test that pins a known engine bug

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed: no float64 autograd reference")


def report(g: Graph, device: str) -> str:
    """Shrink a failing graph and describe it as minimal runnable code."""
    small = shrink(g, lambda c: mismatch(c, device) is not None)
    ops, numel = size(small)
    return (
        f"seed {g.seed} on {device}: {mismatch(g, device)}\n"
        f"minimal graph ({ops} ops, {numel} elements): {mismatch(small, device)}\n{small!r}\n{small.to_code(device)}"
    )


def fuzz(device: str, seeds: range, n_ops: int) -> None:
    graphs = (random_graph(s, n_ops) for s in seeds if (device, s) not in KNOWN)
    failures = [report(g, device) for g in graphs if mismatch(g, device)]
    assert not failures, f"{len(failures)} of {len(seeds)} graphs mismatch:\n\n" + "\n\n".join(failures)


def test_fast_tier(device: str) -> None:
    fuzz(device, range(FAST[device]), FAST_OPS)


@pytest.mark.slow
def test_slow_tier(device: str) -> None:
    fuzz(device, range(10_000, 10_000 + SLOW[device]), SLOW_OPS)


# ***** the fuzzer's own parts *****


def test_generator_covers_every_op_and_is_seeded() -> None:
    graphs = [random_graph(s) for s in range(150)]
    seen = {nd.kind for g in graphs for nd in g.nodes}
    assert seen == set(OPS) | {"input"}, f"never generated: {set(OPS) - seen}"
    assert all(g.shapes() is not None for g in graphs)
    assert random_graph(7) == random_graph(7)
    dims = {d for g in graphs for s in g.shapes() for d in s}
    assert 1 in dims and 128 in dims


def test_tolerance_catches_one_element_off_by_a_percent_of_the_scale_but_not_float32_rounding() -> None:
    want = np.random.default_rng(0).standard_normal((64, 64))
    assert worst(want.astype(np.float32), want) < 0.01
    off = want.copy()
    off[3, 5] += 0.01 * np.abs(want).max()
    assert worst(off, want) > 1
    assert worst(want[:, :-1], want) == np.inf


@needs_torch
def test_numpy_reference_matches_torch() -> None:
    for seed in range(60):
        g = random_graph(seed)
        np.testing.assert_allclose(run_numpy(g), run_torch(g, torch.float64)[0], rtol=1e-9, atol=1e-9, err_msg=repr(g))


def test_numpy_conv2d_matches_a_direct_loop() -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 4, 5, 6)), rng.standard_normal((6, 2, 2, 3))
    got = np_conv2d(x, w, 2, 1, 1, 2)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for o in range(6):
        grp = o // 3
        for i in range(got.shape[2]):
            for j in range(got.shape[3]):
                patch = xp[0, grp * 2 : grp * 2 + 2, 2 * i : 2 * i + 2, 2 * j : 2 * j + 3]
                assert np.isclose(got[0, o, i, j], (patch * w[o]).sum())


def test_shrinker_finds_the_minimal_graph() -> None:
    def fails(c: Graph) -> bool:  # a pretend bug: any matmul with K >= 3
        shapes = c.shapes()
        return any(nd.kind == "matmul" and shapes[nd.args[1]][0] >= 3 for nd in c.nodes)

    g = next(g for g in map(lambda s: random_graph(s, 8), range(200)) if fails(g) and size(g)[0] >= 6)
    small = shrink(g, fails, budget=2000)
    assert fails(small)
    assert [nd.kind for nd in small.nodes] == ["input", "input", "matmul"], small
    assert size(small)[1] <= 3 + 3 + 1, small


@needs_torch
def test_printed_code_runs_and_agrees() -> None:
    g = Graph(
        (
            Node("input", (), ((2, 3), 1.0)),
            Node("input", (), ((3, 4), 0.5)),
            Node("matmul", (0, 1)),
            Node("softmax", (2,), (1,)),
        ),
        seed=3,
    )
    printed: list[str] = []
    exec(g.to_code("CPU"), {"print": lambda *a: printed.append(a)})
    assert [p[0] for p in printed] == ["forward", "grad x0", "grad x1"]
    assert all(p[1] < 1e-5 for p in printed), printed


def test_without_torch_the_forward_is_checked_against_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graphs, "torch", None)
    fuzz("CPU", range(30), FAST_OPS)
