"""Run a schedule: get every kernel's runner first (a device compiles the new ones together), then allocate each
output (or reuse an assign's buffer), copy between devices and launch each kernel.

Every step is an ExecItem; while TinyJit captures, they are recorded for replay. Imports device, ops, shape, lazy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specgrad.device import Buffer, Device, Runner
from specgrad.lazy import LazyBuffer
from specgrad.ops import BufferOps, LoadOps, ScheduleItem
from specgrad.schedule import create_schedule
from specgrad.shape.symbolic import Node, Variable


@dataclass
class ExecItem:
    """One step of running a schedule: `run(bufs, var_vals)`; bufs[0] is what it writes."""

    run: Callable[[list[Buffer], dict[Variable, int]], object]
    bufs: list[Buffer]
    var_vals: dict[Variable, int]


# NOTE: set by TinyJit while it captures a step; every ExecItem run is appended to it
CAPTURING: list[ExecItem] | None = None


def _exec(item: ExecItem) -> None:
    item.run(item.bufs, item.var_vals)
    if CAPTURING is not None:
        CAPTURING.append(item)


def _copy(bufs: list[Buffer], var_vals: dict[Variable, int]) -> None:
    bufs[0].copy_from(bufs[1])


def run_schedule(schedule: list[ScheduleItem]) -> None:
    runners = _prepare_runners(schedule)
    for i, si in enumerate(schedule):
        missing = [x for x in si.inputs if x.realized is None]
        if missing:
            raise RuntimeError(f"schedule out of order: inputs {missing} of {si.out} are not realized")
        out = si.out
        target = out.output_buffer
        buf = target if target is not None else Buffer(out.device, _numel(out), out.dtype)
        inputs = [x.realized for x in si.inputs]
        if si.ast.op is LoadOps.FROM:
            _exec(ExecItem(_copy, [buf, inputs[0]], {}))
        elif si.ast.op is LoadOps.CUSTOM:
            _exec(ExecItem(lambda bufs, var_vals, fn=si.ast.arg: fn(*bufs), [buf, *inputs], {}))
        elif _is_kernel(si):
            runner = runners[i]
            if target is not None and not _in_place_is_safe(si, target):
                tmp = Buffer(out.device, _numel(out), out.dtype)
                _exec(ExecItem(runner.exec, [tmp, *inputs], si.var_vals))
                _exec(ExecItem(_copy, [target, tmp], {}))
            else:
                _exec(ExecItem(runner.exec, [buf, *inputs], si.var_vals))
        out.realized = buf


def _is_kernel(si: ScheduleItem) -> bool:
    return si.ast.op not in (LoadOps.FROM, LoadOps.CUSTOM, LoadOps.EMPTY) and _numel(si.out) > 0


def _prepare_runners(schedule: list[ScheduleItem]) -> dict[int, Runner]:
    """Every kernel's runner by its position in `schedule`, got before the first one runs, so a compiled device
    builds the new ones together."""
    kernels: dict[str, list[int]] = {}
    for i, si in enumerate(schedule):
        if _is_kernel(si):
            kernels.setdefault(si.out.device, []).append(i)
    runners: dict[int, Runner] = {}
    for device, positions in kernels.items():
        runners.update(zip(positions, Device[device].get_runners([schedule[i].ast for i in positions])))
    return runners


def _in_place_is_safe(si: ScheduleItem, target: Buffer) -> bool:
    """Writing into a buffer the kernel also reads is safe only when each element reads its own position."""
    out_st = si.ast.arg.st
    loads = [x.arg for x in si.ast.lazyops() if x.op is BufferOps.LOAD]
    return all(si.inputs[m.idx - 1].realized is not target or m.st.simplify() == out_st for m in loads)


def realize(outs: list[LazyBuffer]) -> None:
    """Compute every LazyBuffer in `outs` (views realize their base)."""
    run_schedule(create_schedule(outs))


def _numel(lb: LazyBuffer) -> int:
    """Elements to allocate. A symbolic shape gets room for the largest values its Variables allow, so a captured
    step can replay with any of them."""
    size = lb.st.size()
    if isinstance(size, Node):
        return size.max
    return size
