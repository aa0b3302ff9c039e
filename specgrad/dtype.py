"""DType and the dtypes namespace. Imports nothing from specgrad."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np


@dataclass(frozen=True, order=True)
class DType:
    """A scalar type: `priority` orders promotion, `fmt` is its numpy/struct character."""

    priority: int
    itemsize: int
    name: str
    fmt: str

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.fmt)


class dtypes:
    """The supported dtypes, with PyTorch-style aliases."""

    bool: Final[DType] = DType(0, 1, "bool", "?")
    int8: Final[DType] = DType(1, 1, "int8", "b")
    uint8: Final[DType] = DType(2, 1, "uint8", "B")
    int16: Final[DType] = DType(3, 2, "int16", "h")
    uint16: Final[DType] = DType(4, 2, "uint16", "H")
    int32: Final[DType] = DType(5, 4, "int32", "i")
    uint32: Final[DType] = DType(6, 4, "uint32", "I")
    int64: Final[DType] = DType(7, 8, "int64", "q")
    uint64: Final[DType] = DType(8, 8, "uint64", "Q")
    float16: Final[DType] = DType(9, 2, "float16", "e")
    float32: Final[DType] = DType(10, 4, "float32", "f")
    float64: Final[DType] = DType(11, 8, "float64", "d")

    half = float16
    float = float32
    double = float64
    int = int32
    long = int64
    default_float: DType = float32
    default_int: DType = int32

    @staticmethod
    def fields() -> dict[str, DType]:
        return _BY_NAME

    @staticmethod
    def is_float(x: DType) -> bool:
        return x in (dtypes.float16, dtypes.float32, dtypes.float64)

    @staticmethod
    def is_int(x: DType) -> bool:
        return x not in (dtypes.bool, dtypes.float16, dtypes.float32, dtypes.float64)

    @staticmethod
    def is_unsigned(x: DType) -> bool:
        return x in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)

    @staticmethod
    def from_np(x: Any) -> DType:
        char = np.dtype(x).char
        for d in _BY_NAME.values():
            if np.dtype(d.fmt).char == char or np.dtype(d.fmt) == np.dtype(x):
                return d
        raise TypeError(f"numpy dtype {np.dtype(x)} has no specgrad dtype; use one of {sorted(_BY_NAME)}")

    @staticmethod
    def from_py(x: Any) -> DType:
        """The dtype a Python scalar (or nested list of them) becomes by default."""
        if isinstance(x, (list, tuple)):
            return max((dtypes.from_py(v) for v in x), default=dtypes.default_float)
        if isinstance(x, (bool, np.bool_)):
            return dtypes.bool
        if isinstance(x, (int, np.integer)):
            return dtypes.default_int
        return dtypes.default_float

    @staticmethod
    def promote(a: DType, b: DType) -> DType:
        """Result dtype of a binary op, following PyTorch: a float operand wins over ints and bools."""
        if a == b or b == dtypes.bool:
            return a
        if a == dtypes.bool:
            return b
        if dtypes.is_float(a) != dtypes.is_float(b):
            return a if dtypes.is_float(a) else b
        return dtypes.from_np(np.promote_types(a.np, b.np))


_BY_NAME: dict[str, DType] = {
    v.name: v for v in vars(dtypes).values() if isinstance(v, DType) and v.name not in ("default_float", "default_int")
}


def to_dtype(x: DType | str | Any) -> DType:
    """Accept a DType, its name ('float32') or a numpy dtype."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        if x in _BY_NAME:
            return _BY_NAME[x]
        alias = getattr(dtypes, x, None)
        if isinstance(alias, DType):
            return alias
        raise TypeError(f"unknown dtype {x!r}; known: {sorted(_BY_NAME)}")
    return dtypes.from_np(x)
