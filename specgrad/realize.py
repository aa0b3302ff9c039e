"""Run a schedule: allocate each output, copy between devices, launch each kernel. Imports device, ops, lazy."""

from __future__ import annotations

from specgrad.device import Buffer, Device
from specgrad.lazy import LazyBuffer
from specgrad.ops import LoadOps, ScheduleItem
from specgrad.schedule import create_schedule
from specgrad.shape.symbolic import sym_infer


def run_schedule(schedule: list[ScheduleItem]) -> None:
    for si in schedule:
        missing = [x for x in si.inputs if x.realized is None]
        if missing:
            raise RuntimeError(f"schedule out of order: inputs {missing} of {si.out} are not realized")
        out = si.out
        buf = Buffer(out.device, _numel(out), out.dtype)
        if si.ast.op is LoadOps.FROM:
            buf.copy_from(si.inputs[0].realized)
        elif si.ast.op is LoadOps.CUSTOM:
            si.ast.arg(buf, *[x.realized for x in si.inputs])
        elif si.ast.op is not LoadOps.EMPTY and _numel(out) > 0:
            Device[out.device].get_runner(si.ast).exec([buf, *[x.realized for x in si.inputs]], si.var_vals)
        out.realized = buf


def realize(outs: list[LazyBuffer]) -> None:
    """Compute every LazyBuffer in `outs` (views realize their base)."""
    run_schedule(create_schedule(outs))


def _numel(lb: LazyBuffer) -> int:
    """Elements to allocate; a symbolic shape takes the values its Variables are bound to."""
    try:
        return sym_infer(lb.st.size(), {})
    except KeyError as e:
        raise ValueError(f"cannot realize shape {lb.shape}: {e.args[0]} (bind it: Variable(...).bind(n))") from None
