"""The CLANG device's vector math helpers: float32 exp2 is a branch-free polynomial in GCC vector extensions (not a
libm call per lane), so it is checked here in ulps against numpy over the whole finite range and at the specials."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from conftest import device_problem

from specgrad import Device, Tensor, dtypes
from specgrad.codegen.linearizer import linearize
from specgrad.device import DeviceUnavailable
from specgrad.flags import CPU_TARGET
from specgrad.ops import BufferOps, UnaryOps
from specgrad.renderer.cstyle import C_DIALECT, SCALAR_EXP2F, c_vector_helpers, render
from specgrad.runtime.ops_clang import check_target, target_flags, target_vector_bytes
from specgrad.schedule import create_schedule

INF, NAN = np.inf, np.nan
# NOTE: 2^127.99.. is finite, 2^128 is inf; [-149, -126] is the subnormal range, -150 ties to +0
SPECIALS = np.array([INF, -INF, NAN, -NAN, 0.0, -0.0, 1, -1, 0.5, -0.5, 127, 128, 127.99999, 128.00002, 129, 1e30,
                     -126, -126.5, -127, -149, -149.5, -150, -150.00002, -149.99998, -151, -160, -1e30, 1e-30, -1e-30,
                     1.4e-45, -1.4e-45, 1e-38], dtype=np.float32)  # fmt: skip


def exp2_inputs() -> np.ndarray:
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-160, 130, 1 << 20), rng.uniform(-1, 1, 1 << 16), rng.uniform(-151, -125, 1 << 16),
          rng.uniform(126, 128, 1 << 16), np.arange(-160, 131), np.arange(-160, 131) + 0.5, SPECIALS]  # fmt: skip
    x = np.concatenate(xs).astype(np.float32)
    return np.concatenate([x, np.zeros(-len(x) % 16, np.float32)])  # NOTE: a multiple of 16, so the kernel vectorizes


def raw_exp2(x: np.ndarray, device: str = "CLANG") -> Tensor:
    """UnaryOps.EXP2 alone (Tensor.exp2 is exp(x * ln 2), which rounds x * ln 2 * log2(e) on the way)."""
    return Tensor(Tensor(x, device=device).lazydata.e(UnaryOps.EXP2))


@pytest.fixture(params=["CLANG", "GPU"])
def own_exp2(request: pytest.FixtureRequest) -> str:
    """A device whose float32 exp2 is our polynomial (C and OpenCL render the same one), skipped where it is missing."""
    if problem := device_problem(request.param):
        pytest.skip(f"{request.param} unavailable: {problem}")
    return request.param


def test_exp2_kernel_uses_vector_helper(clang: None) -> None:
    t = raw_exp2(exp2_inputs())
    asts = [si.ast for si in create_schedule([t.lazydata]) if si.ast.op is BufferOps.STORE]
    src = "\n".join(render(linearize(ast, Device["CLANG"].opts), C_DIALECT) for ast in asts)
    assert re.search(r"static inline sg_float\d+ sg_float\d+_exp2\(", src), src
    assert not re.search(r"\bexp2f\(", src), "float32 exp2 still calls libm per lane"


def test_exp2_within_2_ulp_of_numpy(own_exp2: str) -> None:
    x = exp2_inputs()
    got = raw_exp2(x, own_exp2).numpy()
    with np.errstate(all="ignore"):
        want, exact = np.exp2(x), np.exp2(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(want) & (want > 0))
    finite = np.isfinite(want)
    np.testing.assert_array_max_ulp(got[finite], want[finite], maxulp=2)
    np.testing.assert_array_max_ulp(got[finite], exact[finite], maxulp=1)  # NOTE: numpy's own float32 exp2 is 3 off
    assert not np.signbit(got[~np.isnan(got)]).any(), "exp2 is never -0"


def test_exp2_specials_exact(own_exp2: str) -> None:
    x = np.concatenate([SPECIALS, np.zeros(-len(SPECIALS) % 16, np.float32)])
    got = raw_exp2(x, own_exp2).numpy()[: len(SPECIALS)]
    by_x = dict(zip(SPECIALS.tolist(), got.tolist(), strict=False))

    def at(x: float) -> float:
        return by_x[np.float32(x).item()]

    assert at(INF) == INF and at(128) == INF and at(128.00002) == INF and at(1e30) == INF
    assert np.isfinite(at(127.99999))
    assert at(-INF) == 0 and at(-150) == 0 and at(-160) == 0 and at(-1e30) == 0
    assert np.isnan(got[np.isnan(SPECIALS)]).all()
    for n in (0, 1, -1, 127, -126, -127, -149):
        assert at(n) == 2.0**n, f"exp2({n}) = {at(n)!r}, not exact"
    assert at(-0.0) == 1 and at(-149.99998) == 2.0**-149 and at(-150.00002) == 0


def test_exp_and_exp2_match_numpy(clang: None) -> None:
    x = np.random.default_rng(1).uniform(-100, 88, 1 << 16).astype(np.float32)
    got = Tensor(x, device="CLANG").exp().numpy()
    np.testing.assert_allclose(got, np.exp(x), atol=1e-5, rtol=1e-3)  # NOTE: test_ops' tolerance for exp
    np.testing.assert_allclose(got[x > -80], np.exp(x[x > -80]), rtol=1e-5)  # NOTE: x * log2(e) rounds once
    np.testing.assert_allclose(Tensor(x, device="CLANG").exp2().numpy(), np.exp2(x), atol=1e-5, rtol=2e-5)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
def test_exp2_helper_compiles(cc: str, width: int) -> None:
    """The helper is plain GCC vector extensions: both compilers take it at every width the target (CPU_TARGET) has
    registers for, warning-free. A wider vector is never rendered: gcc warns (-Wpsabi) that it changes the ABI.
    Width 1 is its scalar twin, plain C."""
    if (path := shutil.which(cc)) is None:
        pytest.skip(f"{cc} not installed")
    try:
        vector_bytes = target_vector_bytes(check_target(path, str(CPU_TARGET.value)))
    except DeviceUnavailable as e:
        pytest.skip(str(e))
    if 4 * width > vector_bytes:
        pytest.skip(f"-march={CPU_TARGET.value} has no {4 * width}-byte vectors for {cc}, so kernels never use them")
    if width == 1:
        src = f"{SCALAR_EXP2F}\nfloat f(float x) {{ return sg_exp2f(x); }}\n"
    else:
        helpers = "\n".join(c_vector_helpers(dtypes.float32, width, {"exp2"}))
        vt = f"sg_float{width}"
        src = f"#include <math.h>\n{helpers}\n{vt} f({vt} x) {{ return {vt}_exp2(x); }}\n"
    flags = ["-O2", *target_flags(str(CPU_TARGET.value)), "-fno-math-errno", "-ffp-contract=off", "-fwrapv", "-Wall",
             "-Werror"]  # fmt: skip
    res = subprocess.run([cc, *flags, "-Wno-unused-function", "-fsyntax-only", "-x", "c", "-"], input=src,
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stderr
