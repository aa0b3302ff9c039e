"""Every environment and context flag, in one registry: name, default, help.

The only module that reads the environment. Imports nothing from specgrad.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(eq=False)
class Flag:
    """An integer or string setting read once from the environment, overridable with `Context`."""

    name: str
    default: int | str
    help: str
    doc_default: str | None = None  # how docs show a default that depends on the machine

    def __post_init__(self) -> None:
        raw = os.environ.get(self.name)
        initial = self.default if raw is None else self._parse(raw)
        self._var: contextvars.ContextVar = contextvars.ContextVar(self.name, default=initial)

    def _parse(self, raw: str) -> int | str:
        if isinstance(self.default, str):
            return raw
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"environment variable {self.name}={raw!r} must be an integer ({self.help})") from None

    @property
    def value(self) -> int | str:
        return self._var.get()

    def set(self, value: int | str) -> None:
        """Set the flag for the rest of this context (tests prefer `with Context(...)`)."""
        self._var.set(value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return int(self.value)

    def __ge__(self, other: int) -> bool:
        return int(self.value) >= other

    def __gt__(self, other: int) -> bool:
        return int(self.value) > other

    def __le__(self, other: int) -> bool:
        return int(self.value) <= other

    def __lt__(self, other: int) -> bool:
        return int(self.value) < other

    def __eq__(self, other: object) -> bool:
        return self.value == other

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"{self.name}={self.value!r}"


REGISTRY: dict[str, Flag] = {}


def flag(name: str, default: int | str, help: str, doc_default: str | None = None) -> Flag:
    if name in REGISTRY:
        raise ValueError(f"flag {name} is registered twice")
    REGISTRY[name] = ret = Flag(name, default, help, doc_default)
    return ret


@contextlib.contextmanager
def Context(**overrides: int | str) -> Iterator[None]:
    """Override flags for the duration of a `with` block: `with Context(DEBUG=2): ...`."""
    unknown = [k for k in overrides if k not in REGISTRY]
    if unknown:
        raise KeyError(f"unknown flag(s) {unknown}; known flags: {sorted(REGISTRY)}")
    tokens = [(REGISTRY[k], REGISTRY[k]._var.set(v)) for k, v in overrides.items()]
    try:
        yield
    finally:
        for f, token in reversed(tokens):
            f._var.reset(token)


def render_flags_markdown() -> str:
    """The table in docs/flags.md, generated from the registry."""
    rows = [f"| `{f.name}` | `{f.doc_default or repr(f.default)}` | {f.help} |" for f in REGISTRY.values()]
    return "\n".join(["| flag | default | what it does |", "| --- | --- | --- |", *rows]) + "\n"


DEBUG = flag("DEBUG", 0, "debug output: 1 kernel counts per schedule, 2 each kernel run, 3 asts, 4 generated source")
CPU = flag("CPU", 0, "set to 1 to make the interpreted numpy device the default")
CLANG = flag("CLANG", 0, "set to 1 to make the CLANG (C compiler) device the default")
GPU = flag("GPU", 0, "set to 1 to make the GPU (OpenCL) device the default")
DEVICE = flag("DEVICE", "", "name of the default device (CPU, CLANG, GPU); overrides the CPU/CLANG/GPU flags")
LAZYCACHE = flag("LAZYCACHE", 1, "deduplicate identical lazy subgraphs (0 turns it off)")
LRU = flag("LRU", 1, "keep freed device buffers for reuse by the next allocation of the same size (0 frees at once)")
CC = flag("CC", "", "C compiler for the CLANG device (default: clang, else cc)")
CACHEDIR = flag(
    "CACHEDIR",
    os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "specgrad"),
    "folder for compiled kernels (the CLANG device's shared objects, the GPU device's program binaries)",
    doc_default="$XDG_CACHE_HOME/specgrad or ~/.cache/specgrad",
)
SPEC_MEMORY_GB = flag(
    "SPEC_MEMORY_GB", 4, "memory budget (GiB) that validate checks one training step of a spec against"
)
SPEC_ROOT = flag(
    "SPEC_ROOT",
    "",
    "folder that files a spec names (extends, data.path) must stay inside, besides the spec's own folder (CLI: --root)",
    doc_default="the current folder",
)
SPEC_ALLOW_OUTSIDE = flag(
    "SPEC_ALLOW_OUTSIDE", 0, "set to 1 to let a spec name files outside its folder and SPEC_ROOT (CLI: --allow-outside)"
)
MAX_FILE_MB = flag(
    "MAX_FILE_MB", 1024, "largest data, weights or checkpoint file (MiB) that is read (CLI: --max-file-mb)"
)
COMPILE_CACHE = flag("COMPILE_CACHE", 1, "reuse compiled kernels from CACHEDIR across runs (0 compiles every kernel)")
THREADS = flag(
    "THREADS",
    0,
    "threads a CLANG kernel's outer loop is split across (0: one per core); results do not depend on it",
    doc_default="0 (one per core)",
)
OPT = flag("OPT", 1, "kernel opts: 1 picks vector lanes, register tiles and unrolling per kernel; 0 plain loops")
COMPILE_JOBS = flag("COMPILE_JOBS", 0, "kernels compiled at once when a schedule needs several (0: one per core)",
                    doc_default="0 (one per core)")  # fmt: skip
CPU_TARGET = flag(
    "CPU_TARGET",
    "native",
    "CPU the CLANG device compiles for (-march=): native, or a narrower one such as x86-64-v3 (AVX2, no AVX-512); "
    "vector widths come from what the compiler enables for it",
)
CL_VECTOR_WIDTH = flag(
    "CL_VECTOR_WIDTH",
    0,
    "most float lanes of the GPU device's vectors (4, 8, 16; 1 for none); 0: the widest its probe kernel proves right",
)
CL_WORK_GROUPS = flag(
    "CL_WORK_GROUPS",
    -1,
    "work-group shapes and local-memory tiles for the GPU device's matmuls and convolutions: -1 on a GPU only (a CPU "
    "OpenCL device keeps the runtime's group sizes and its caches), 1 on any OpenCL device, 0 never",
)
