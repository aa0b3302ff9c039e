"""specgrad: a declarative model-spec toolchain on a small lazy tensor compiler.

Public names only: Tensor, Device, dtypes, Variable, TinyJit, no_grad, Context.
"""

from specgrad.device import Device
from specgrad.dtype import dtypes
from specgrad.flags import Context
from specgrad.jit import TinyJit
from specgrad.shape.symbolic import Variable
from specgrad.tensor import Tensor, no_grad

__all__ = ["Tensor", "Device", "dtypes", "Variable", "TinyJit", "no_grad", "Context"]
__version__ = "0.1.0"
