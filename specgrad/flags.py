"""Every environment and context flag, in one registry: name, default, what values it takes, help.

The only module that reads the environment. Imports nothing from specgrad.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

MAX_DIGITS = 18  # NOTE: an integer flag's digits at most: every range below fits, and int() never sees 5,000 digits
INTEGER = re.compile(rf"[+-]?[0-9]{{1,{MAX_DIGITS}}}")


class FlagError(ValueError):
    """An environment variable holds a value its flag does not take. The message is one line: the flag, the value
    and what the flag takes (the command line reports it as a bad setting of the command, exit code 2)."""


@dataclass(eq=False)
class Flag:
    """An integer or string setting read once from the environment, overridable with `Context`. What it takes:
    `low`..`high` (integers), `choices` (a few values; strings in any case), `pattern` (a string's whole value),
    described in words by `accepts` where a pattern needs them. An empty variable is the default, as if unset."""

    name: str
    default: int | str
    help: str
    doc_default: str | None = None  # how docs show a default that depends on the machine
    low: int | None = None
    high: int | None = None
    choices: tuple[int | str, ...] = ()
    pattern: str | None = None
    accepts: str | None = None

    def __post_init__(self) -> None:
        # NOTE: read at import as always, but a bad value is kept, not raised: an import never fails, the command
        # line reports every bad flag in one line each (check_environment), and code reading it gets the FlagError
        raw = os.environ.get(self.name, "")
        try:
            self._initial: int | str | FlagError = self.default if raw == "" else self.parse(raw)
        except FlagError as e:
            self._initial = e
        # NOTE: a good value is the variable's default, so a read (DEBUG: every kernel launch) is one get
        self._var: contextvars.ContextVar = contextvars.ContextVar(self.name) if isinstance(self._initial, FlagError) \
            else contextvars.ContextVar(self.name, default=self._initial)  # fmt: skip

    def parse(self, raw: str) -> int | str:
        """`raw` as this flag takes it; a FlagError naming the flag, the value and what it takes."""
        value: int | str | None = raw
        if not isinstance(self.default, str):
            value = int(raw.strip()) if INTEGER.fullmatch(raw.strip()) else None
        if value is None or not self.takes(value):
            shown = repr(raw[:40] + ("..." if len(raw) > 40 else ""))  # NOTE: repr escapes what could drive a terminal
            raise FlagError(f"the environment variable {self.name} is {shown}, but {self.name} takes "
                            f"{self.describe()}; unset it for the default")  # fmt: skip
        return value

    def takes(self, value: int | str) -> bool:
        if self.choices:
            return (value.upper() if isinstance(value, str) else value) in self.choices
        if isinstance(value, int):
            return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)
        return self.pattern is None or re.fullmatch(self.pattern, value) is not None

    def describe(self) -> str:
        """What the flag takes, in words: 'a whole number from 0 to 1024', '0 or 1', ..."""
        if self.accepts is not None:
            return self.accepts
        if self.choices:
            words = [str(c) for c in self.choices]
            listed = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
            return listed + (" (in any case)" if isinstance(self.default, str) else "")
        if isinstance(self.default, str):
            return "any text"
        if self.high is None:
            return f"a whole number, {self.low} or more"
        return f"a whole number from {self.low:,} to {self.high:,}"

    @property
    def value(self) -> int | str:
        try:
            return self._var.get()
        except LookupError:  # NOTE: only where the environment's value was refused and nothing set another
            raise self._initial from None  # type: ignore[misc]

    @property
    def error(self) -> FlagError | None:
        """Why the environment's value was refused, or None."""
        return self._initial if isinstance(self._initial, FlagError) else None

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
        return f"{self.name}={self._var.get(self._initial)!r}"


REGISTRY: dict[str, Flag] = {}


def flag(name: str, default: int | str, help: str, doc_default: str | None = None, **takes: object) -> Flag:
    """Register a flag; `takes` are Flag's low, high, choices, pattern and accepts."""
    if name in REGISTRY:
        raise ValueError(f"flag {name} is registered twice")
    REGISTRY[name] = ret = Flag(name, default, help, doc_default, **takes)  # type: ignore[arg-type]
    return ret


def check_environment() -> None:
    """Every flag's environment variable holds a value the flag takes; else one FlagError, a line per bad flag.
    The command line calls it before any work, so a bad flag stops a command at once, whichever code reads it."""
    if errors := [str(f.error) for f in REGISTRY.values() if f.error is not None]:
        raise FlagError("\n".join(errors))


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
    rows = [f"| `{f.name}` | `{f.doc_default or repr(f.default)}` | {f.describe()} | {f.help} |"
            for f in REGISTRY.values()]  # fmt: skip
    head = ["| flag | default | takes | what it does |", "| --- | --- | --- | --- |"]
    return "\n".join([*head, *rows]) + "\n"


ONOFF = (0, 1)
COUNT = 1024  # NOTE: the most threads or compile jobs (the CLANG device's pool clamps its threads lower)

DEBUG = flag("DEBUG", 0, "debug output: 1 kernel counts per schedule, 2 each kernel run, 3 asts, 4 generated source "
             "(more is as 4)", low=0, high=99)  # fmt: skip
CPU = flag("CPU", 0, "set to 1 to make the interpreted numpy device the default", choices=ONOFF)
CLANG = flag("CLANG", 0, "set to 1 to make the CLANG (C compiler) device the default", choices=ONOFF)
GPU = flag("GPU", 0, "set to 1 to make the GPU (OpenCL) device the default", choices=ONOFF)
# NOTE: the devices one computes on: device.py's DEVICE_TABLE less DISK (a test checks they agree)
DEVICE = flag("DEVICE", "", "name of the default device (CPU, CLANG, GPU); overrides the CPU/CLANG/GPU flags",
              choices=("CPU", "CLANG", "GPU"))  # fmt: skip
LAZYCACHE = flag("LAZYCACHE", 1, "deduplicate identical lazy subgraphs (0 turns it off)", choices=ONOFF)
LRU = flag("LRU", 1, "keep freed device buffers for reuse by the next allocation of the same size (0 frees at once)",
           choices=ONOFF)  # fmt: skip
CC = flag("CC", "", "C compiler for the CLANG device (default: clang, else cc)", accepts="a command or a path")
CACHEDIR = flag(
    "CACHEDIR",
    os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "specgrad"),
    "folder for compiled kernels (the CLANG device's shared objects, the GPU device's program binaries)",
    doc_default="$XDG_CACHE_HOME/specgrad or ~/.cache/specgrad",
    accepts="a folder's path",
)
CACHE_SECRET = flag(
    "CACHE_SECRET",
    os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config"), "specgrad",
                 "cache-secret"),
    "file holding your key that signs each kernel cache entry (made 0600 on first use; one inside CACHEDIR turns the "
    "cache off; keep it out of caches others can restore)",
    doc_default="$XDG_CONFIG_HOME/specgrad/cache-secret or ~/.config/specgrad/cache-secret",
    accepts="a file's path",
)  # fmt: skip
SPEC_MEMORY_GB = flag(
    "SPEC_MEMORY_GB", 4, "memory budget (GiB) that validate checks one training step of a spec against", low=0,
    high=1 << 20,
)  # fmt: skip
SPEC_ROOT = flag(
    "SPEC_ROOT",
    "",
    "folder that files a spec names (extends, data.path) must stay inside, besides the spec's own folder (CLI: --root)",
    doc_default="the current folder",
    accepts="a folder's path",
)
SPEC_ALLOW_OUTSIDE = flag(
    "SPEC_ALLOW_OUTSIDE",
    0,
    "set to 1 to let a spec name files outside its folder and SPEC_ROOT (CLI: --allow-outside)",
    choices=ONOFF,
)
MAX_FILE_MB = flag(
    "MAX_FILE_MB", 1024, "largest data, weights or checkpoint file (MiB) that is read (CLI: --max-file-mb)", low=0,
    high=1 << 30,
)  # fmt: skip
COMPILE_CACHE = flag("COMPILE_CACHE", 1, "reuse compiled kernels from CACHEDIR across runs (0 compiles every kernel)",
                     choices=ONOFF)  # fmt: skip
THREADS = flag(
    "THREADS",
    0,
    "threads a CLANG kernel's outer loop is split across (0: one per core); results do not depend on it",
    doc_default="0 (one per core)",
    low=0,
    high=COUNT,
)
OPT = flag("OPT", 1, "kernel opts: 1 picks vector lanes, register tiles and unrolling per kernel; 0 plain loops",
           choices=ONOFF)  # fmt: skip
COMPILE_JOBS = flag("COMPILE_JOBS", 0, "kernels compiled at once when a schedule needs several (0: one per core)",
                    doc_default="0 (one per core)", low=0, high=COUNT)  # fmt: skip
CPU_TARGET = flag(
    "CPU_TARGET",
    "native",
    "CPU the CLANG device compiles for (-march=): native, or a narrower one such as x86-64-v3 (AVX2, no AVX-512); "
    "vector widths come from what the compiler enables for it",
    pattern=r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}",
    accepts="a CPU name for -march=: up to 64 letters, digits and '.', '_', '+', '-', not starting with '-'",
)
CL_VECTOR_WIDTH = flag(
    "CL_VECTOR_WIDTH",
    0,
    "most float lanes of the GPU device's vectors (4, 8, 16; 1 for none); 0: the widest its probe kernel proves right",
    choices=(0, 1, 4, 8, 16),
)
CL_WORK_GROUPS = flag(
    "CL_WORK_GROUPS",
    -1,
    "work-group shapes and local-memory tiles for the GPU device's matmuls and convolutions: -1 on a GPU only (a CPU "
    "OpenCL device keeps the runtime's group sizes and its caches), 1 on any OpenCL device, 0 never",
    choices=(-1, 0, 1),
)
