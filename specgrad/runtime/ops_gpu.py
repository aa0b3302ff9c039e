"""The GPU device: kernels rendered to OpenCL C, built and run with pyopencl on any OpenCL platform (PoCL from pip
gives a CPU one). Imports flags, dtype, codegen, renderer and device; pyopencl is an optional dependency.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from specgrad.codegen.linearizer import LinearizerOptions, Program
from specgrad.device import Compiled, Compiler, DeviceUnavailable, LRUAllocator, sizes_with
from specgrad.dtype import DType, dtypes
from specgrad.flags import DEBUG, OPT
from specgrad.renderer.cstyle import OPENCL_DIALECT, render
from specgrad.shape.symbolic import Variable, sym_infer

INSTALL_HINT = "pip install 'pyopencl[pocl]' (PoCL gives a CPU OpenCL device), or install your GPU's OpenCL driver"

try:
    import pyopencl as cl
except ImportError:  # NOTE: only this device needs pyopencl; the others work without it
    cl = None


class CLContext:
    """The chosen OpenCL device (a GPU if there is one), its context and its profiling queue."""

    def __init__(self) -> None:
        if cl is None:
            raise DeviceUnavailable(f"the GPU device needs pyopencl, which is not installed: {INSTALL_HINT}")
        try:
            devices = [d for p in cl.get_platforms() for d in p.get_devices()]
        except cl.Error as e:
            raise DeviceUnavailable(f"no OpenCL platform found ({e}): {INSTALL_HINT}") from None
        if not devices:
            raise DeviceUnavailable(f"no OpenCL device found: {INSTALL_HINT}")
        self.device = next((d for d in devices if d.type & cl.device_type.GPU), devices[0])
        self.context = cl.Context(devices=[self.device])
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.name = f"{self.device.name.strip()} ({self.device.platform.name.strip()})"
        self.max_work_group = min(int(self.device.max_work_group_size), 256)

    def supported_dtypes(self) -> frozenset[DType]:
        """Every dtype, less half and double where the device lacks them (PoCL's CPU device has no half)."""
        ext = self.device.extensions.split()
        missing = {dtypes.float16} if "cl_khr_fp16" not in ext else set()
        if "cl_khr_fp64" not in ext and not self.device.double_fp_config:
            missing.add(dtypes.float64)
        return frozenset(d for d in dtypes.fields().values() if d not in missing)


class CLAllocator(LRUAllocator):
    def __init__(self, ctx: CLContext):
        super().__init__()
        self.ctx = ctx

    def _alloc(self, nbytes: int) -> Any:
        return cl.Buffer(self.ctx.context, cl.mem_flags.READ_WRITE, max(nbytes, 1))

    def copyin(self, dest: Any, src: memoryview) -> None:
        cl.enqueue_copy(self.ctx.queue, dest, np.frombuffer(src, dtype=np.uint8), is_blocking=True)

    def copyout(self, dest: memoryview, src: Any) -> None:
        cl.enqueue_copy(self.ctx.queue, np.frombuffer(dest, dtype=np.uint8), src, is_blocking=True)


def compile_cl(ctx: CLContext, src: str) -> bytes:
    try:
        prog = cl.Program(ctx.context, src).build()
    except cl.RuntimeError as e:
        raise RuntimeError(f"OpenCL failed to build a kernel on {ctx.name}:\n{e}\n--- source ---\n{src}") from None
    return prog.get_info(cl.program_info.BINARIES)[0]


def local_size(global_size: tuple[int, ...], budget: int) -> tuple[int, ...]:
    """A work-group shape that divides the global size: the largest power of two per axis that fits the budget."""
    ret = []
    for g in global_size:
        size = 1
        while size * 2 <= budget and g % (size * 2) == 0:
            size *= 2
        ret.append(size)
        budget //= size
    return tuple(ret)


class CLProgram:
    """One built kernel, launched over the program's global size."""

    def __init__(self, ctx: CLContext, prg: Program, binary: bytes):
        self.ctx, self.global_size, self.vars = ctx, prg.global_size or (1,), prg.vars
        program = cl.Program(ctx.context, [ctx.device], [binary]).build()
        self.kernel = getattr(program, prg.name)

    def __call__(self, bufs: list[Any], var_vals: dict[Variable, int], wait: bool) -> float | None:
        gs = sizes_with(self.global_size, var_vals)
        args = [*bufs, *[np.int32(sym_infer(v, var_vals)) for v in self.vars]]
        event = self.kernel(self.ctx.queue, gs, local_size(gs, self.ctx.max_work_group), *args)
        if not wait:
            return None
        event.wait()
        return (event.profile.end - event.profile.start) * 1e-9


def GPUDevice() -> Compiled:
    ctx = CLContext()
    dev = ctx.device
    identity = f"{dev.platform.name} {dev.platform.version} {dev.name} {dev.driver_version}"
    compiler = Compiler("opencl", identity, functools.partial(compile_cl, ctx))
    if DEBUG >= 1:
        print(f"GPU device: OpenCL on {ctx.name}")
    # NOTE: float4 at least (memory transactions); wider where the device says its vectors are (a CPU under PoCL)
    width = min(max(int(dev.preferred_vector_width_float), 4), 16)
    opts = LinearizerOptions(global_dims=3, optimize=bool(OPT), vector_bytes=4 * width)
    ret = Compiled("GPU", CLAllocator(ctx), opts, lambda prg: render(prg, OPENCL_DIALECT),
                   compiler, functools.partial(CLProgram, ctx))  # fmt: skip
    ret.supported_dtypes, ret.description = ctx.supported_dtypes(), f" (OpenCL on {ctx.name})"
    ret.synchronize = ctx.queue.finish  # type: ignore[method-assign]
    return ret
