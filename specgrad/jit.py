"""TinyJit: run a step function normally once, capture the kernels it runs on the second call, and from then on
replay them with the new inputs' buffers swapped in, with no Python graph building or scheduling.

Imports tensor, realize and shape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from specgrad import realize as realize_mod
from specgrad.device import Buffer
from specgrad.dtype import DType
from specgrad.realize import ExecItem
from specgrad.shape.symbolic import Variable, sint
from specgrad.tensor import Tensor

ReturnType = TypeVar("ReturnType")


class JitError(ValueError):
    """A call that does not fit what TinyJit captured (the message says what differs)."""


def _signature(t: Tensor) -> tuple[tuple[sint, ...], DType, str]:
    """What a replay must match: the shape with Variables unbound (any value replays), the dtype, the device."""
    return t.lazydata.st.unbind()[0].shape, t.dtype, t.device


class TinyJit(Generic[ReturnType]):
    """Decorate a step function whose inputs and outputs are Tensors (realized inputs; it should realize what it
    returns). Calls 1 and 2 run it for real (2 is captured); later calls replay the captured kernels. The returned
    Tensors are the ones from the capture, refilled by each replay. Python values computed inside the function
    (an .item(), a branch) are frozen at capture: keep them out of a jitted function."""

    def __init__(self, fxn: Callable[..., ReturnType]):
        self.fxn = fxn
        functools.update_wrapper(self, fxn)  # type: ignore[arg-type]
        self.reset()

    def reset(self) -> None:
        """Forget the capture: the next two calls run the function for real again."""
        self.cnt = 0
        self.items: list[ExecItem] = []
        self.input_slots: list[tuple[int, int, int]] = []  # (item, buffer position, input index)
        self.signature: tuple | None = None
        self.ret: Any = None

    def __get__(self, obj: Any, objtype: Any = None) -> Callable[..., ReturnType]:
        return self if obj is None else functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> ReturnType:
        args, kwargs, inputs = _realized_inputs(args, kwargs)
        signature = (tuple(_signature(t) for t in inputs), tuple(sorted(kwargs)))
        if self.signature is not None and signature != self.signature:
            raise JitError(_mismatch(self.signature, signature))
        self.signature = signature
        var_vals = _var_vals(inputs, args, kwargs)
        if self.cnt == 0:
            ret = self.fxn(*args, **kwargs)
        elif self.cnt == 1:
            ret = self._capture(args, kwargs, inputs)
        else:
            self._replay([t.lazydata.base.realized for t in inputs], var_vals)
            ret = self.ret
        self.cnt += 1
        return ret

    def _capture(self, args: tuple, kwargs: dict, inputs: list[Tensor]) -> ReturnType:
        realize_mod.CAPTURING = captured = []
        try:
            ret = self.fxn(*args, **kwargs)
            Tensor.corealize(_tensors_in(ret))
        finally:
            realize_mod.CAPTURING = None
        buffers = [t.lazydata.base.realized for t in inputs]
        self.items, self.ret = captured, ret
        self.input_slots = [(i, j, k) for i, item in enumerate(captured) for j, b in enumerate(item.bufs)
                            for k, ib in enumerate(buffers) if b is ib]  # fmt: skip
        return ret

    def _replay(self, buffers: list[Buffer], var_vals: dict[Variable, int]) -> None:
        for i, j, k in self.input_slots:
            self.items[i].bufs[j] = buffers[k]
        for item in self.items:
            item.run(item.bufs, {v: var_vals.get(v, val) for v, val in item.var_vals.items()})


def _realized_inputs(args: tuple, kwargs: dict) -> tuple[tuple, dict, list[Tensor]]:
    """The call's Tensors as realized buffers of their own (a view or a lazy tensor is made contiguous first), in a
    fixed order: positional, then keyword by name."""

    def prepare(x: Any) -> Any:
        if not isinstance(x, Tensor):
            return x
        lb = x.lazydata
        whole = lb.st.contiguous and lb.size == lb.base.size and lb.base.realized is not None
        return x if whole else x.contiguous().realize()

    args = tuple(prepare(a) for a in args)
    kwargs = {k: prepare(v) for k, v in kwargs.items()}
    named = [kwargs[k] for k in sorted(kwargs) if isinstance(kwargs[k], Tensor)]
    return args, kwargs, [a for a in args if isinstance(a, Tensor)] + named


def _var_vals(inputs: list[Tensor], args: tuple, kwargs: dict) -> dict[Variable, int]:
    """Values of the bound Variables in the inputs' shapes and of Variables passed as arguments."""
    ret: dict[Variable, int] = {}
    for t in inputs:
        ret.update(t.lazydata.st.var_vals)
    for v in (*args, *kwargs.values()):
        if isinstance(v, Variable) and v.val is not None:
            ret[v.unbound] = v.val
    return ret


def _tensors_in(ret: Any) -> list[Tensor]:
    if isinstance(ret, Tensor):
        return [ret]
    if isinstance(ret, (list, tuple)):
        return [t for x in ret for t in _tensors_in(x)]
    if isinstance(ret, dict):
        return [t for x in ret.values() for t in _tensors_in(x)]
    return []


def _mismatch(want: tuple, got: tuple) -> str:
    (want_t, want_k), (got_t, got_k) = want, got
    if want_k != got_k:
        return f"TinyJit captured keyword arguments {list(want_k)}, this call passes {list(got_k)}"
    if len(want_t) != len(got_t):
        return f"TinyJit captured {len(want_t)} tensor inputs, this call passes {len(got_t)}"
    for i, (w, g) in enumerate(zip(want_t, got_t)):
        if w != g:
            return (
                f"TinyJit input {i} was captured as shape {w[0]} {w[1].name} on {w[2]}, this call passes shape "
                f"{g[0]} {g[1].name} on {g[2]}; call .reset() on the jitted function to capture again"
            )
    return "TinyJit inputs differ from the captured ones"
