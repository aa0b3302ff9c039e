"""TinyJit: run a step function normally once, capture the kernels it runs on the second call, and from then on
replay them with the new inputs' buffers swapped in, with no Python graph building or scheduling. Each call is first
checked against the captured one, so a call the captured kernels cannot serve is a JitError, not a wrong result.

Imports tensor, realize, device, dtype and shape.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import sys
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from specgrad import realize as realize_mod
from specgrad.device import Buffer
from specgrad.dtype import DType
from specgrad.realize import ExecItem
from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import Node, Variable, sint
from specgrad.tensor import Tensor

ReturnType = TypeVar("ReturnType")
RESET = "call .reset() on the jitted function to capture it anew"


class JitError(ValueError):
    """A call that does not fit what TinyJit captured (the message says what differs)."""


@dataclass
class _Call:
    """One call: what the function receives, and its leaves by path ("x", "xs[1]", "cfg['w']") in a fixed order."""

    args: tuple
    kwargs: dict
    inputs: list[tuple[str, Tensor]]  # the Tensors, realized, each with a buffer of its own
    buffers: list[Buffer]  # theirs, taken before the function runs (it may assign to an input)
    values: list[tuple[str, Any]]  # everything else


@dataclass(frozen=True)
class _Signature:
    """What a later call must match: each Tensor's path, shape (Variables unbound), dtype and device; other values."""

    tensors: tuple[tuple[str, tuple[sint, ...], DType, str], ...]
    values: tuple[tuple[str, Any], ...]

    @staticmethod
    def of(call: _Call) -> _Signature:
        tensors = tuple((p, _unbound_shape(t), t.dtype, t.device) for p, t in call.inputs)
        return _Signature(tensors, tuple(call.values))


def _unbound_shape(t: Tensor) -> tuple[sint, ...]:
    return t.shape if all(isinstance(s, int) for s in t.shape) else t.lazydata.st.unbind()[0].shape


class TinyJit(Generic[ReturnType]):
    """Decorate a step function that takes Tensors (in any nesting of lists, tuples and dicts) and returns Tensors.
    Calls 1 and 2 run it for real (2 is captured); later calls replay the captured kernels and return the Tensors of
    the capture, refilled. A call that differs from the captured one (tensor shapes, other argument values, state
    it reads replaced) raises JitError; see docs/python-api.md for what is checked."""

    def __init__(self, fxn: Callable[..., ReturnType]):
        self.fxn = fxn
        functools.update_wrapper(self, fxn)  # type: ignore[arg-type]
        try:
            self.params: inspect.Signature | None = inspect.signature(fxn)
        except (TypeError, ValueError):  # NOTE: some builtins have no signature: arguments are then named by position
            self.params = None
        self.reset()

    def reset(self) -> None:
        """Forget the capture: the next two calls run the function for real again."""
        self.cnt = 0
        self.items: list[ExecItem] = []
        self.input_slots: list[tuple[int, int, int]] = []  # (item, buffer position, input index)
        self.signature: _Signature | None = None
        self.ret: Any = None
        self.aliases: tuple[int, ...] = ()  # per input, the first input with the same buffer in the captured call
        self.written: set[int] = set()  # ids of the buffers the captured kernels write (inputs aside)
        self.state: list[tuple[Buffer, int]] = []  # (buffer read but not an input, references the jit holds to it)
        self.symbolic = False  # whether the captured call had Variables (in a shape, or passed): replays bind them
        self.first_call_buffers: weakref.WeakSet[Buffer] = weakref.WeakSet()

    def __get__(self, obj: Any, objtype: Any = None) -> Callable[..., ReturnType]:
        return self if obj is None else functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> ReturnType:
        call = _bind(self.params, args, kwargs)
        signature = _Signature.of(call)
        if self.signature is not None and (problem := _mismatch(self.signature, signature)):
            raise JitError(problem)
        self.signature = signature
        if self.cnt == 0:
            ret = self._run_first(call)
        elif self.cnt == 1:
            try:
                ret = self._capture(call)
            except JitError:
                self.reset()
                raise
        else:
            ret = self._replay(call)
        self.cnt += 1
        return ret

    def _run_first(self, call: _Call) -> ReturnType:
        with _recording() as items:
            ret = self.fxn(*call.args, **call.kwargs)
        _check_returns(ret, call)
        self.first_call_buffers = weakref.WeakSet(b for item in items for b in item.bufs)
        return ret

    def _capture(self, call: _Call) -> ReturnType:
        with _recording() as items:
            ret = self.fxn(*call.args, **call.kwargs)
            _check_returns(ret, call)
            Tensor.corealize(_tensors_in(ret))
        if not items:
            raise JitError(
                "TinyJit captured no kernels on call 2: the function computed nothing on the device (it returned "
                "tensors computed before, or ran only Python), so replays would do nothing; call it without TinyJit"
            )
        buffers = call.buffers
        first = {id(b): k for k, b in reversed(list(enumerate(buffers)))}
        self.aliases = tuple(first[id(b)] for b in buffers)
        self.input_slots = [(i, j, first[id(b)]) for i, item in enumerate(items) for j, b in enumerate(item.bufs)
                            if id(b) in first]  # fmt: skip
        slots = {(i, j) for i, j, _ in self.input_slots}
        self.written = {id(item.bufs[0]) for i, item in enumerate(items) if (i, 0) not in slots}
        self.items, self.ret = items, ret
        for t in _tensors_in(ret):
            if t._ctx is not None:  # NOTE: replays build no graph: a backward through the captured one would be stale
                t._ctx, t.requires_grad = None, False
        state = _state_buffers(items, slots, self.first_call_buffers)
        outside = _outside_refs(state)
        if any(n <= 0 and buf in self.first_call_buffers for (buf, _), n in zip(state, outside)):
            raise JitError(
                "TinyJit: the function read a tensor the previous call computed and then dropped it (it replaced "
                "state, as in self.h = f(self.h), instead of updating it), so every replay would start again from "
                "the captured call's value. Update state in place with .assign(), or pass it in as an argument"
            )
        self.state = [s for s, n in zip(state, outside) if n > 0]
        self.symbolic = _is_symbolic(self.signature)
        return ret

    def _replay(self, call: _Call) -> ReturnType:
        if _is_dropped(self.state):
            raise JitError(
                "TinyJit: a tensor the captured kernels read without taking it as an argument (a weight or other "
                "state reached through a closure or an attribute) is held by nothing but this jit any more: it was "
                "replaced or deleted since the capture (or only an unrealized tensor computed from it held it, and "
                "that was realized), so a replay would read its old value. Change such tensors in place with "
                f".assign(), pass them as arguments, or {RESET}"
            )
        buffers = self._input_buffers(call)
        for i, j, k in self.input_slots:
            self.items[i].bufs[j] = buffers[k]
        # NOTE: a call that matches a capture without Variables has none: its inputs are whole contiguous tensors of
        # the captured (integer) shapes, so each kernel runs with the values it was captured with
        var_vals = _var_vals(call) if self.symbolic else {}
        if not var_vals:
            for item in self.items:
                item.run(item.bufs, item.var_vals)
            return self.ret
        for item in self.items:
            item.run(item.bufs, {v: var_vals.get(v, val) for v, val in item.var_vals.items()})
        _rebind(self.ret, var_vals)
        return self.ret

    def _input_buffers(self, call: _Call) -> list[Buffer]:
        """The inputs' buffers, copied where the captured kernels would otherwise write one while reading it: an input
        that is a buffer they write (this jit's own output from the last call, as in h = step(x, h)), or a tensor
        passed twice where the captured call had two."""
        buffers, seen = list(call.buffers), set()
        for k, b in enumerate(call.buffers):
            want = self.aliases[k]
            if want != k:
                if call.buffers[want] is not b:
                    names = f"'{call.inputs[want][0]}' and '{call.inputs[k][0]}'"
                    raise JitError(
                        f"TinyJit captured arguments {names} as one tensor and this call passes two: the captured "
                        f"kernels read one buffer for both; pass one tensor twice, or {RESET}"
                    )
                buffers[k] = buffers[want]
            elif id(b) in seen or id(b) in self.written:
                buffers[k] = Buffer(b.device, b.size, b.dtype).copy_from(b)
            seen.add(id(b))
        return buffers


@contextlib.contextmanager
def _recording() -> Iterator[list[ExecItem]]:
    """Record every ExecItem run inside the block."""
    prev, realize_mod.CAPTURING = realize_mod.CAPTURING, []
    try:
        yield realize_mod.CAPTURING
    finally:
        realize_mod.CAPTURING = prev


# ***** arguments *****


def _bind(params: inspect.Signature | None, args: tuple, kwargs: dict) -> _Call:
    """The call with its Tensors realized (a view or a lazy tensor made contiguous first) and its leaves named by
    parameter, so a tensor passed by position or by keyword, in any order, lands in the same place."""
    args = tuple(_prepared(a) for a in args)
    kwargs = {k: _prepared(v) for k, v in kwargs.items()}
    inputs: list[tuple[str, Tensor]] = []
    values: list[tuple[str, Any]] = []
    for path, leaf in (leaf for name, v in _named(params, args, kwargs) for leaf in _leaves(v, name)):
        (inputs if isinstance(leaf, Tensor) else values).append((path, leaf))
    return _Call(args, kwargs, inputs, [t.lazydata.base.realized for _, t in inputs], values)


def _named(params: inspect.Signature | None, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    if params is None:
        return [(f"argument {i}", a) for i, a in enumerate(args)] + sorted(kwargs.items())
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not kwargs and len(args) == len(params.parameters) and all(p.kind in plain for p in params.parameters.values()):
        return list(zip(params.parameters, args))  # NOTE: the common call, without inspect's slower bind
    bound = params.bind(*args, **kwargs)  # NOTE: a call that does not fit raises Python's own TypeError
    bound.apply_defaults()
    ret: list[tuple[str, Any]] = []
    for name, value in bound.arguments.items():
        kind = params.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            ret += [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        elif kind is inspect.Parameter.VAR_KEYWORD:
            ret += sorted(value.items())
        else:
            ret.append((name, value))
    return ret


def _is_container(x: Any) -> bool:
    return type(x) in (list, tuple, dict) or (isinstance(x, tuple) and hasattr(x, "_fields"))


def _prepared(x: Any) -> Any:
    if isinstance(x, Tensor):
        lb = x.lazydata
        whole = lb.base.realized is not None and lb.st.contiguous and (lb.base is lb or lb.size == lb.base.size)
        return x if whole else x.contiguous().realize()
    if not _is_container(x) or not x:
        return x
    if isinstance(x, dict):
        return {k: _prepared(v) for k, v in x.items()}
    items = [_prepared(v) for v in x]
    if all(a is b for a, b in zip(items, x)):
        return x
    return type(x)._make(items) if hasattr(x, "_fields") else type(x)(items)


def _leaves(x: Any, path: str) -> Iterator[tuple[str, Any]]:
    """The leaves of nested lists, tuples and dicts (dicts by sorted key), each with its path."""
    if not _is_container(x):
        yield path, x
    elif isinstance(x, dict):
        for k in sorted(x, key=repr):
            yield from _leaves(x[k], f"{path}[{k!r}]")
    else:
        for i, v in enumerate(x):
            yield from _leaves(v, f"{path}[{i}]")


def _var_vals(call: _Call) -> dict[Variable, int]:
    """Values of the bound Variables in the inputs' shapes and of Variables passed as arguments."""
    ret: dict[Variable, int] = {}
    for _, t in call.inputs:
        ret.update(t.lazydata.st.var_vals)
    for _, v in call.values:
        if isinstance(v, Variable) and v.val is not None:
            ret[v.unbound] = v.val
    return ret


# ***** checks *****

PLAIN = (type(None), bool, int, float, complex, str, bytes, DType, np.generic, type)


def _same(a: Any, b: Any) -> bool:
    """Whether two non-Tensor argument values are the same for the captured kernels: equal plain values (numbers,
    strings, dtypes, numpy arrays), the same Variable with any bound value, otherwise the same object."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, Variable):
        return a.unbound == b.unbound
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, (float, np.floating)) and a != a:
        return bool(b != b)  # NOTE: nan is the same nan
    if isinstance(a, (*PLAIN, Node, frozenset, enum.Enum)):
        return bool(a == b)
    return False


def _show(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"a numpy array {v.shape} {v.dtype}"
    text = repr(v) if isinstance(v, (*PLAIN, Node)) else f"a {type(v).__name__} object at {id(v):#x}"
    return text if len(text) <= 60 else text[:57] + "..."


def _mismatch(want: _Signature, got: _Signature) -> str | None:
    """What differs between the captured call and this one, in words, or None."""
    if want.tensors == got.tensors and len(want.values) == len(got.values):
        if all(pw == pg and _same(w, g) for (pw, w), (pg, g) in zip(want.values, got.values)):
            return None
    want_kinds = {p: "Tensor" for p, *_ in want.tensors} | {p: type(v).__name__ for p, v in want.values}
    got_kinds = {p: "Tensor" for p, *_ in got.tensors} | {p: type(v).__name__ for p, v in got.values}
    if want_kinds.keys() != got_kinds.keys():
        return f"TinyJit captured arguments {list(want_kinds)}, this call passes {list(got_kinds)}; to change, {RESET}"
    for p, kind in want_kinds.items():
        if (kind == "Tensor") != (got_kinds[p] == "Tensor"):
            return f"TinyJit captured argument '{p}' as a {kind}, this call passes a {got_kinds[p]}; to change, {RESET}"
    for (p, *w), (_, *g) in zip(want.tensors, got.tensors):
        if w != g:
            was, now = f"shape {w[0]} {w[1].name} on {w[2]}", f"shape {g[0]} {g[1].name} on {g[2]}"
            return f"TinyJit argument '{p}' was captured as {was}, this call passes {now}; to change, {RESET}"
    for (p, w), (_, g) in zip(want.values, got.values):
        if not _same(w, g):
            shared = p == "self"  # NOTE: a TinyJit in a class body decorates the method of every instance
            hint = " (a TinyJit in a class body is shared by all instances: make one per instance)" if shared else ""
            return (
                f"TinyJit argument '{p}' was {_show(w)} in the captured call, this call passes {_show(g)}{hint}: the "
                "captured kernels use the old value. Pass a value that changes as a Tensor (or as a shape Variable "
                f"bound with .bind()), or {RESET}"
            )
    return None


def _check_returns(ret: Any, call: _Call) -> None:
    """A replay returns the captured call's Tensors: anything else it returns would be stale."""
    input_buffers = {id(b): p for (p, _), b in zip(call.inputs, call.buffers)}
    for path, leaf in _leaves(ret, "ret"):
        if leaf is not None and not isinstance(leaf, Tensor):
            raise JitError(
                f"TinyJit's function returned a {type(leaf).__name__} (as {path}); a replay runs only the captured "
                "kernels, so a Python value would stay the captured call's. Return Tensors and call .item() or "
                ".numpy() on them after the call"
            )
        if leaf is None:
            continue
        base = leaf.lazydata.base
        buf = base.realized if base.assign_target is None else base.assign_target.realized  # NOTE: also after assign
        if (p := input_buffers.get(id(buf))) is not None:
            raise JitError(
                f"TinyJit's function returns its argument '{p}' (or a view of it); a replay returns the captured "
                f"call's tensors, so it would hand back the captured call's '{p}', not this call's. Don't return "
                "arguments: the caller holds them already (an in-place .assign() to one is replayed into the new one)"
            )


def _rebind(ret: Any, var_vals: dict[Variable, int]) -> None:
    """Give each returned tensor whose shape holds a bound Variable this call's value of it: the captured tensor kept
    the capture's (a (5, 48) result after a call with 8 rows); its buffer has room for the largest value."""
    for t in _tensors_in(ret):
        st = t.lazydata.st
        bound = {v: v.unbound.bind(var_vals[v.unbound]) for v in st.vars()
                 if v.val is not None and v.unbound in var_vals and v.val != var_vals[v.unbound]}  # fmt: skip
        if bound:
            t.lazydata = t.lazydata._view(ShapeTracker(tuple(view.substitute(bound) for view in st.views)))


def _tensors_in(ret: Any) -> list[Tensor]:
    return [t for _, t in _leaves(ret, "") if isinstance(t, Tensor)]


# ***** state the kernels read *****


def _state_buffers(
    items: list[ExecItem], slots: set[tuple[int, int]], first_call: weakref.WeakSet[Buffer]
) -> list[tuple[Buffer, int]]:
    """The buffers the captured kernels use that are not inputs and existed before the capture (read before being
    written, or used by call 1), each with the number of references the jit will hold to it (its slots in the items
    and this entry)."""
    seen: dict[int, list] = {}  # id -> [buffer, slots, existed]
    for i, item in enumerate(items):
        for j, b in enumerate(item.bufs):
            if (i, j) not in slots:
                entry = seen.setdefault(id(b), [b, 0, any(x is b for x in item.bufs[1:]) or b in first_call])
                entry[1] += 1
    return [(b, n + 1) for b, n, existed in seen.values() if existed]


def _is_symbolic(signature: _Signature | None) -> bool:
    """Whether a call's tensors have a symbolic dimension or it passes a Variable."""
    if signature is None:
        return False
    dims = (d for _, shape, _, _ in signature.tensors for d in shape)
    return any(not isinstance(d, int) for d in dims) or any(isinstance(v, Variable) for _, v in signature.values)


def _is_dropped(state: list[tuple[Buffer, int]]) -> bool:
    """Whether some state buffer is held by nothing but the jit (as _outside_refs, stopping at the first)."""
    overhead, refcount = _REF_OVERHEAD, sys.getrefcount
    return any(refcount(buf) - own - overhead <= 0 for buf, own in state)


def _outside_refs(state: list[tuple[Buffer, int]]) -> list[int]:
    """For each (buffer, references the jit holds), how many other references exist: 0 when only the jit holds it,
    i.e. the tensors that held it were replaced or deleted."""
    return [sys.getrefcount(buf) - own - _REF_OVERHEAD for buf, own in state]


_REF_OVERHEAD = 0
_REF_OVERHEAD = _outside_refs([(object(), 1)])[0]  # type: ignore[list-item]  # getrefcount's own argument and the loop
