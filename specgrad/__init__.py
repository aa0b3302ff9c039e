"""specgrad: a declarative model-spec toolchain on a small lazy tensor compiler.

Public names only: Tensor, Device, dtypes, Variable, TinyJit, no_grad, Context.
"""

import importlib

# NOTE: each public name is imported on first use, so `import specgrad.flags` (or the CLI's `validate`) does not pay
# for the whole engine: the tensor, the devices and numpy take most of a command's start-up (issue 31)
_PUBLIC = {"Tensor": "specgrad.tensor", "no_grad": "specgrad.tensor", "Device": "specgrad.device",
           "dtypes": "specgrad.dtype", "Context": "specgrad.flags", "TinyJit": "specgrad.jit",
           "Variable": "specgrad.shape.symbolic"}  # fmt: skip

__all__ = ["Tensor", "Device", "dtypes", "Variable", "TinyJit", "no_grad", "Context"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'specgrad' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # NOTE: found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
