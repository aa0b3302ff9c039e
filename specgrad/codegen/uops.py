"""UOps: the linear, SSA-style program a Linearizer produces and a renderer prints. Imports dtype, ops, shape."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from specgrad.dtype import DType


class UOps(Enum):
    DEFINE_GLOBAL = auto()  # a buffer argument; arg: (buffer index, dtype)
    DEFINE_VAR = auto()  # an int argument for a symbolic shape Variable; arg: the Variable
    SPECIAL = auto()  # a GPU global id; arg: (axis, loop Variable)
    LOOP = auto()  # for (var = 0; var < end; var++) {; arg: (loop Variable, end)
    ENDLOOP = auto()  # }; vin: (LOOP,)
    DEFINE_ACC = auto()  # a reduce accumulator; arg: its start value
    LOAD = auto()  # vin: (DEFINE_GLOBAL,); arg: (index Node, validity Node)
    CONST = auto()  # arg: (value, validity Node)
    ALU = auto()  # vin: operands; arg: a UnaryOps, BinaryOps or TernaryOps (a CAST's target is the dtype)
    ASSIGN = auto()  # acc = value; vin: (DEFINE_ACC, value)
    STORE = auto()  # vin: (DEFINE_GLOBAL, value); arg: index Node


@dataclass(eq=False)
class UOp:
    """One instruction. Identity is the object: the linearizer deduplicates, the renderer names each UOp once."""

    uop: UOps
    dtype: DType | None
    vin: tuple[UOp, ...]
    arg: Any

    def __repr__(self) -> str:
        return f"{self.uop.name:14s} {str(self.dtype):16s} {self.arg}"


def render_uops(uops: list[UOp]) -> str:
    """A numbered listing (DEBUG=3)."""
    num = {id(u): i for i, u in enumerate(uops)}
    return "\n".join(f"{i:4d} {u!r}  <- {[num[id(v)] for v in u.vin]}" for i, u in enumerate(uops))
