"""UOps: the linear, SSA-style program a Linearizer produces and a renderer prints. Imports dtype, ops, shape."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from specgrad.dtype import DType


class UOps(Enum):
    DEFINE_GLOBAL = auto()  # a buffer argument; arg: (buffer index, dtype)
    DEFINE_VAR = auto()  # an int argument for a symbolic shape Variable; arg: the Variable
    DEFINE_LOCAL = auto()  # a work-group's local memory for one staged load; arg: (load's buffer op index, elements)
    SPECIAL = auto()  # a GPU id; arg: (kind: global, group or local, axis, loop Variable)
    LOOP = auto()  # for (var = 0; var < end; var++) {; arg: (loop Variable, end, split across threads?)
    ENDLOOP = auto()  # }; vin: (LOOP,)
    DEFINE_ACC = auto()  # a reduce accumulator; arg: its start value
    LOAD = auto()  # vin: (DEFINE_GLOBAL or DEFINE_LOCAL,); arg: (index Node, validity Node)
    CONST = auto()  # arg: (value, validity Node)
    ALU = auto()  # vin: operands; arg: a UnaryOps, BinaryOps or TernaryOps (a CAST's target is the dtype)
    ASSIGN = auto()  # acc = value; vin: (DEFINE_ACC, value)
    STORE = auto()  # vin: (DEFINE_GLOBAL or DEFINE_LOCAL, value); arg: index Node
    BARRIER = auto()  # every work item of the group waits here, and sees the others' local memory writes
    VECTORIZE = auto()  # a vector from `width` scalars; vin: the lanes in order
    LANE = auto()  # one lane of a vector; vin: (vector,); arg: the lane
    HORIZONTAL = auto()  # a scalar combining a vector's lanes in order; vin: (vector,); arg: BinaryOps.ADD or MAX


@dataclass(eq=False)
class UOp:
    """One instruction. Identity is the object: the linearizer deduplicates, the renderer names each UOp once."""

    uop: UOps
    dtype: DType | None
    vin: tuple[UOp, ...]
    arg: Any
    width: int = 1  # > 1: a vector of this many lanes (LOAD: that many consecutive elements; STORE: its value's)

    def __repr__(self) -> str:
        dtype = f"{self.dtype}x{self.width}" if self.width > 1 else str(self.dtype)
        return f"{self.uop.name:14s} {dtype:16s} {self.arg}"


def render_uops(uops: list[UOp]) -> str:
    """A numbered listing (DEBUG=3)."""
    num = {id(u): i for i, u in enumerate(uops)}
    return "\n".join(f"{i:4d} {u!r}  <- {[num[id(v)] for v in u.vin]}" for i, u in enumerate(uops))
