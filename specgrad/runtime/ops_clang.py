"""The CLANG device: kernels rendered to C, compiled to a shared object by clang (or the system cc), loaded with
ctypes and run on host memory. Imports flags, codegen, renderer and device.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from specgrad.codegen.linearizer import LinearizerOptions, Program
from specgrad.device import Compiled, Compiler, DeviceUnavailable, HostAllocator, timed
from specgrad.flags import CC, DEBUG
from specgrad.renderer.cstyle import C_DIALECT, render
from specgrad.shape.symbolic import Variable, sym_infer

# NOTE: no -ffast-math: it lets the compiler assume there is no inf or nan, and results for them must stay correct.
# -ffp-contract=off keeps a*b+c two roundings, as numpy computes it; -fwrapv makes signed overflow wrap, as the
# kernels (and numpy) expect.
CFLAGS = ("-shared", "-fPIC", "-O2", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-fwrapv")
INSTALL_HINT = "install clang (apt-get install clang) or gcc, or point the CC flag at a C compiler"


def find_compiler() -> str:
    """The compiler's path: the CC flag if set, else clang, else the system cc."""
    names = [str(CC.value)] if CC.value else ["clang", "cc"]
    for name in names:
        if path := shutil.which(name):
            return path
    raise DeviceUnavailable(f"no C compiler found for the CLANG device (looked for {', '.join(names)}): {INSTALL_HINT}")


@functools.cache
def compiler_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise DeviceUnavailable(f"the C compiler {path} does not run ({e}): {INSTALL_HINT}") from None
    return out.splitlines()[0].strip() if out else path


@functools.cache
def cpu_identity() -> str:
    """What -march=native depends on: the machine and the CPU's model and feature flags."""
    try:
        info = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    except OSError:
        info = platform.processor()
    return f"{platform.machine()} {hashlib.sha256(info.encode()).hexdigest()[:16]}"


def compile_c(path: str, src: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="specgrad-cc-") as tmp:
        out = Path(tmp) / "kernel.so"
        res = subprocess.run([path, *CFLAGS, "-x", "c", "-", "-o", str(out), "-lm"], input=src, capture_output=True,
                             text=True)  # fmt: skip
        if res.returncode != 0:
            raise RuntimeError(f"{path} failed to compile a kernel:\n{res.stderr}\n--- source ---\n{src}")
        return out.read_bytes()


class ClangProgram:
    """One compiled kernel: a function in a shared object, called with buffer pointers and shape variables."""

    def __init__(self, prg: Program, lib: bytes):
        with tempfile.NamedTemporaryFile(prefix="specgrad-", suffix=".so", delete=False) as f:
            f.write(lib)
        try:
            self.dll = ctypes.CDLL(f.name)
        finally:
            os.unlink(f.name)  # NOTE: the loaded library stays mapped after its file is gone
        self.fn = getattr(self.dll, prg.name)
        self.fn.argtypes = [ctypes.c_void_p] * len(prg.buffers) + [ctypes.c_int] * len(prg.vars)
        self.fn.restype = None
        self.vars: tuple[Variable, ...] = prg.vars

    def __call__(self, bufs: list[Any], var_vals: dict[Variable, int], wait: bool) -> float:
        args = [b.ctypes.data for b in bufs] + [sym_infer(v, var_vals) for v in self.vars]
        return timed(lambda: self.fn(*args))


def ClangDevice() -> Compiled:
    path = find_compiler()
    version = compiler_version(path)
    compiler = Compiler("clang", f"{path} {version} {' '.join(CFLAGS)} {cpu_identity()}",
                        functools.partial(compile_c, path))  # fmt: skip
    try:
        compiler.compile_cached("void sg_probe(void) {}\n")
    except RuntimeError as e:
        raise DeviceUnavailable(f"the C compiler {path} cannot build shared objects ({e}): {INSTALL_HINT}") from None
    if DEBUG >= 1:
        print(f"CLANG device: compiling with {version} ({path})")
    return Compiled("CLANG", HostAllocator(), LinearizerOptions(), lambda prg: render(prg, C_DIALECT), compiler,
                    ClangProgram)  # fmt: skip
