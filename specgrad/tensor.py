"""Tensor: the user-facing array with autograd. Everything beyond the mlops is composed here from them.

Names, signatures and semantics follow tinygrad 0.8 and PyTorch. Imports every engine layer below it.
"""

from __future__ import annotations

import contextlib
import math
import string
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from specgrad import mlops
from specgrad.device import Device, DeviceUnavailable
from specgrad.dtype import DType, dtypes, to_dtype
from specgrad.helpers import InvalidArgument, OutOfRange, all_int, argfix, flatten, make_pair, prod
from specgrad.lazy import HOLDERS, LazyBuffer, full_const
from specgrad.ops import BinaryOps, LoadOps
from specgrad.realize import realize
from specgrad.shape.symbolic import sint, sym_infer

Scalar = int | float | bool


class Tensor:
    """An n-dimensional array on a device, computed lazily; `backward()` fills `.grad`."""

    __slots__ = ("lazydata", "requires_grad", "grad", "_ctx", "__weakref__")  # NOTE: weak: lazy.HOLDERS
    __hash__ = object.__hash__  # NOTE: == is elementwise, so hashing is by identity
    training: ClassVar[bool] = False
    no_grad: ClassVar[bool] = False
    _rng: ClassVar[np.random.Generator] = np.random.default_rng(0)

    def __init__(
        self, data: Any, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None
    ):
        device = _device_name(device) if device is not None else Device.DEFAULT
        want = to_dtype(dtype) if dtype is not None else None
        if isinstance(data, LazyBuffer):
            lb = data.copy_to_device(device)
            lb = lb.cast(want) if want is not None else lb
        elif isinstance(data, (bool, int, float, np.generic)):
            natural = dtypes.from_np(data.dtype) if isinstance(data, np.generic) else dtypes.from_py(data)
            lb = full_const(data, (), want or natural, device)
        elif isinstance(data, (list, tuple, np.ndarray)):
            lb = LazyBuffer.from_numpy(_to_numpy(data, want), device)
        elif isinstance(data, Tensor):
            raise TypeError("Tensor(Tensor) is not supported: use .detach(), .to(device) or .cast(dtype)")
        else:
            raise TypeError(f"cannot make a Tensor from {type(data).__name__}")
        self.lazydata: LazyBuffer = lb
        self.requires_grad: bool | None = requires_grad
        self.grad: Tensor | None = None
        self._ctx: mlops.Function | None = None
        HOLDERS.add(self)

    @staticmethod
    def _wrap(lb: LazyBuffer, requires_grad: bool | None = None) -> Tensor:
        ret = Tensor.__new__(Tensor)
        ret.lazydata, ret.requires_grad, ret.grad, ret._ctx = lb, requires_grad, None, None
        HOLDERS.add(ret)
        return ret

    @staticmethod
    def _apply(fn: type[mlops.Function], *xs: Tensor, **kwargs: Any) -> Tensor:
        devices = {x.device for x in xs}
        if len(devices) > 1:
            raise InvalidArgument(f"{fn.__name__} got tensors on different devices {sorted(devices)}; use .to(device)")
        ctx = fn(xs[0].device, tuple(x.requires_grad for x in xs))
        lb = ctx.forward(*[x.lazydata for x in xs], **kwargs)
        # NOTE: bool and int results (comparisons, casts) have no gradient, as in PyTorch: the graph stops there
        requires_grad = ctx.requires_grad if dtypes.is_float(lb.dtype) else False
        ret = Tensor._wrap(lb, requires_grad)
        if requires_grad and not Tensor.no_grad:
            ctx.parents, ret._ctx = xs, ctx
        return ret

    def __repr__(self) -> str:
        return f"<Tensor {self.lazydata!r} on {self.device} with grad {self.grad.lazydata if self.grad else None!r}>"

    # ***** properties *****

    @property
    def device(self) -> str:
        return self.lazydata.device

    @property
    def shape(self) -> tuple[sint, ...]:
        return self.lazydata.shape

    @property
    def dtype(self) -> DType:
        return self.lazydata.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def T(self) -> Tensor:
        return self.transpose()

    def numel(self) -> sint:
        return prod(self.shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    def nbytes(self) -> sint:
        return self.numel() * self.element_size()

    def size(self, dim: int | None = None) -> sint | tuple[sint, ...]:
        return self.shape if dim is None else self.shape[self._dim(dim)]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def is_floating_point(self) -> bool:
        return dtypes.is_float(self.dtype)

    # ***** data access *****

    def realize(self) -> Tensor:
        realize([self.lazydata])
        return self

    @staticmethod
    def corealize(tensors: Sequence[Tensor]) -> None:
        """Realize several tensors in one schedule (shared work is done once)."""
        realize([t.lazydata for t in tensors])

    def numpy(self) -> np.ndarray:
        try:  # NOTE: a symbolic shape copies out at the values its Variables are bound to
            shape = tuple(sym_infer(s, {}) for s in self.shape)
        except KeyError as e:
            raise InvalidArgument(f"cannot copy out a tensor of shape {self.shape}: {e.args[0]}") from None
        if 0 in shape:
            return np.zeros(shape, dtype=self.dtype.np)
        lb = self.lazydata.contiguous()
        if lb.base.realized is None:  # NOTE: a realized buffer needs no schedule (tens of microseconds a call)
            realize([lb])
        return lb.base.realized.numpy()[: prod(shape)].reshape(shape)

    def item(self) -> Scalar:
        if self.numel() != 1:
            raise InvalidArgument(f"item() needs a tensor with one element, got shape {self.shape}")
        return self.numpy().item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise InvalidArgument(
                f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any() or .all()"
            )
        return bool(self.item())

    def detach(self) -> Tensor:
        return Tensor._wrap(self.lazydata, requires_grad=False)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    def to(self, device: str) -> Tensor:
        device = _device_name(device)
        if device == self.device:
            return self
        ret = Tensor._wrap(self.lazydata.copy_to_device(device), self.requires_grad)
        if self.grad is not None:
            ret.grad = self.grad.to(device)
        return ret

    def assign(self, x: Tensor | Any) -> Tensor:
        """Replace this tensor's value in place (same shape and dtype); used by optimizers."""
        if self.device.startswith("DISK"):  # NOTE: runtime/ops_disk.py maps files read-only
            raise InvalidArgument(f"cannot assign to a tensor on {self.device}: disk tensors are read-only "
                                  "(nothing was written); save tensors with specgrad.nn.state.safe_save")  # fmt: skip
        x = x if isinstance(x, Tensor) else Tensor(x, device=self.device, dtype=self.dtype)
        if x.shape != self.shape or x.dtype != self.dtype or x.device != self.device:
            raise InvalidArgument(
                f"assign of {x.shape} {x.dtype} on {x.device} to {self.shape} {self.dtype} on {self.device}"
            )
        # NOTE: a realized tensor keeps its buffer: the new value is computed into it (see LazyBuffer.assign)
        self.lazydata = x.lazydata.assign(self.lazydata)
        return self

    # ***** creation *****

    @staticmethod
    def _const(
        shape: tuple[sint, ...],
        value: Scalar,
        dtype: DType | str | None = None,
        device: str | None = None,
        requires_grad: bool | None = None,
    ) -> Tensor:
        shape = _shape_arg(shape)
        dtype = to_dtype(dtype) if dtype is not None else dtypes.from_py(value)
        device = _device_name(device) if device is not None else Device.DEFAULT
        return Tensor._wrap(full_const(value, shape, dtype, device), requires_grad)

    @staticmethod
    def full(shape: Sequence[sint] | int, fill_value: Scalar, **kwargs: Any) -> Tensor:
        if not isinstance(fill_value, (bool, int, float, np.bool_, np.integer, np.floating)):
            raise TypeError(
                f"fill_value must be a number, got {type(fill_value).__name__}"
                + (": use .expand(shape) or .repeat() for a Tensor" if isinstance(fill_value, Tensor) else "")
            )
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        return Tensor._const(shape, fill_value.item() if isinstance(fill_value, np.generic) else fill_value, **kwargs)

    @staticmethod
    def zeros(*shape: Any, **kwargs: Any) -> Tensor:
        return Tensor._const(argfix(*shape), 0.0, dtype=kwargs.pop("dtype", dtypes.default_float), **kwargs)

    @staticmethod
    def ones(*shape: Any, **kwargs: Any) -> Tensor:
        return Tensor._const(argfix(*shape), 1.0, dtype=kwargs.pop("dtype", dtypes.default_float), **kwargs)

    @staticmethod
    def empty(*shape: Any, dtype: DType | str | None = None, device: str | None = None, **kwargs: Any) -> Tensor:
        """Uninitialised memory; on "disk:/path/to/file", the file's first bytes, mapped read-only (docs/devices.md)."""
        dtype = to_dtype(dtype) if dtype is not None else dtypes.default_float
        device = Device.canonicalize(device) if device is not None else Device.DEFAULT
        lb = LazyBuffer.loadop(LoadOps.EMPTY, _shape_arg(argfix(*shape)), dtype, device)
        return Tensor(lb, device=device, **kwargs).realize()  # NOTE: allocates (or maps the file) now

    def full_like(self, fill_value: Scalar, **kwargs: Any) -> Tensor:
        kwargs.setdefault("dtype", self.dtype)
        kwargs.setdefault("device", self.device)
        return Tensor.full(self.shape, fill_value, **kwargs)

    def zeros_like(self, **kwargs: Any) -> Tensor:
        return self.full_like(0, **kwargs)

    def ones_like(self, **kwargs: Any) -> Tensor:
        return self.full_like(1, **kwargs)

    @staticmethod
    def arange(start: Scalar, stop: Scalar | None = None, step: Scalar = 1, **kwargs: Any) -> Tensor:
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise InvalidArgument("arange step must not be 0")
        natural = dtypes.default_int if all_int((start, stop, step)) else dtypes.default_float
        dtype = kwargs.pop("dtype", None) or natural
        return Tensor(np.arange(start, stop, step, dtype=to_dtype(dtype).np), **kwargs)

    @staticmethod
    def linspace(start: int | float, stop: int | float, steps: int, **kwargs: Any) -> Tensor:
        """`steps` evenly spaced values from start to stop, both included (torch.linspace)."""
        if not isinstance(steps, int) or isinstance(steps, bool):
            raise TypeError(f"linspace steps must be an int, got {steps!r}")
        if steps < 0:
            raise InvalidArgument(f"linspace steps must be non-negative, got {steps}")
        dtype = to_dtype(kwargs.pop("dtype", None) or dtypes.default_float)
        return Tensor(np.linspace(start, stop, steps).astype(dtype.np), **kwargs)

    @staticmethod
    def eye(n: int, m: int | None = None, **kwargs: Any) -> Tensor:
        dtype = to_dtype(kwargs.pop("dtype", dtypes.default_float))
        return Tensor(np.eye(n, m, dtype=dtype.np), **kwargs)

    @staticmethod
    def manual_seed(seed: int = 0) -> None:
        """Seed every random creation op (rand, randn, dropout, inits) for reproducible runs."""
        Tensor._rng = np.random.default_rng(seed)

    @staticmethod
    def _random(shape: Any, sample: Callable[[np.random.Generator, tuple], np.ndarray], dtype: DType | str | None,
                device: str | None = None, requires_grad: bool | None = None) -> Tensor:  # fmt: skip
        """Random values drawn into the tensor's buffer when it is realized, from a seed taken from the global
        generator (Tensor.manual_seed) at creation, so values follow creation order. A TinyJit replay, which
        creates nothing, takes the next seed when it runs: the same sequence as running the step without the jit."""
        shape, dtype = _shape_arg(shape), to_dtype(dtype) if dtype is not None else dtypes.default_float
        device = _device_name(device) if device is not None else Device.DEFAULT
        seeds = [int(Tensor._rng.integers(2**63))]

        def fill(buf: Any) -> None:
            seed = seeds.pop() if seeds else int(Tensor._rng.integers(2**63))
            values = sample(np.random.default_rng(seed), shape)
            buf.copyin(memoryview(np.ascontiguousarray(values, dtype=dtype.np).reshape(-1)))

        return Tensor._wrap(LazyBuffer.loadop(LoadOps.CUSTOM, shape, dtype, device, arg=fill), requires_grad)

    @staticmethod
    def rand(*shape: Any, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
        """Uniform samples in [0, 1)."""
        return Tensor._random(argfix(*shape), lambda g, s: g.random(s, dtype=np.float32), dtype, **kwargs)

    @staticmethod
    def randn(*shape: Any, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
        """Standard normal samples."""
        return Tensor._random(argfix(*shape), lambda g, s: g.standard_normal(s, dtype=np.float32), dtype, **kwargs)

    @staticmethod
    def randint(*shape: Any, low: int = 0, high: int = 10, **kwargs: Any) -> Tensor:
        """Integers uniform in [low, high)."""
        kwargs.setdefault("dtype", dtypes.int32)
        return Tensor._random(argfix(*shape), lambda g, s: g.integers(low, high, s), **kwargs)

    @staticmethod
    def normal(*shape: Any, mean: float = 0.0, std: float = 1.0, **kwargs: Any) -> Tensor:
        return Tensor.randn(*shape, **kwargs) * std + mean

    @staticmethod
    def uniform(*shape: Any, low: float = 0.0, high: float = 1.0, **kwargs: Any) -> Tensor:
        kwargs.setdefault("dtype", None)
        return Tensor._random(argfix(*shape), lambda g, s: g.uniform(low, high, s), **kwargs)

    @staticmethod
    def scaled_uniform(*shape: Any, **kwargs: Any) -> Tensor:
        shape = _shape_arg(argfix(*shape))
        return Tensor.uniform(*shape, low=-1.0, high=1.0, **kwargs) * (prod(shape) ** -0.5)

    @staticmethod
    def glorot_uniform(*shape: Any, **kwargs: Any) -> Tensor:
        shape = _shape_arg(argfix(*shape))
        bound = math.sqrt(6 / (shape[0] + prod(shape[1:])))
        return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

    @staticmethod
    def kaiming_uniform(*shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
        shape = _shape_arg(argfix(*shape))
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a**2)) / math.sqrt(prod(shape[1:]))
        return Tensor.uniform(*shape, low=-bound, high=bound, **kwargs)

    @staticmethod
    def kaiming_normal(*shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
        shape = _shape_arg(argfix(*shape))
        std = math.sqrt(2.0 / (1 + a**2)) / math.sqrt(prod(shape[1:]))
        return Tensor.normal(*shape, mean=0.0, std=std, **kwargs)

    # ***** autograd *****

    def _deepwalk(self) -> list[Tensor]:
        """Tensors with a graph behind them, each after its parents."""
        order: list[Tensor] = []
        visited: set[int] = set()
        stack: list[tuple[Tensor, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in visited or node._ctx is None:
                continue
            visited.add(id(node))
            stack.append((node, True))
            stack.extend((p, False) for p in node._ctx.parents if id(p) not in visited)
        return order

    def backward(self, gradient: Tensor | None = None) -> Tensor:
        """Accumulate d(self)/d(x) into x.grad for every x with requires_grad that self depends on."""
        if self._ctx is None:
            raise InvalidArgument("backward() on a tensor that does not require grad (no graph behind it)")
        if gradient is None:
            if self.numel() != 1:
                raise InvalidArgument(f"backward() without a gradient needs a single-element tensor, got {self.shape}")
            gradient = Tensor.ones(*self.shape, device=self.device, dtype=self.dtype, requires_grad=False)
        elif gradient.shape != self.shape:
            raise InvalidArgument(f"gradient shape {gradient.shape} does not match tensor shape {self.shape}")
        self.grad = gradient
        for t in reversed(self._deepwalk()):
            if t.grad is None:  # NOTE: no gradient reached it (every consumer returned None for it)
                t._ctx = None
                continue
            grads = t._ctx.backward(t.grad.lazydata)
            grads = grads if isinstance(grads, tuple) else (grads,)
            for parent, g in zip(t._ctx.parents, grads):
                if g is None or not parent.requires_grad:
                    continue
                if g.shape != parent.shape:
                    raise RuntimeError(f"internal error: gradient shape {g.shape} for a tensor of shape {parent.shape}")
                gt = Tensor._wrap(g, requires_grad=False)
                parent.grad = gt if parent.grad is None else parent.grad + gt
            t._ctx = None  # NOTE: free the graph; a second backward needs a new forward
        return self

    @staticmethod
    @contextlib.contextmanager
    def train(mode: bool = True) -> Iterator[None]:
        """`with Tensor.train():` turns on training behaviour (dropout) inside the block."""
        prev, Tensor.training = Tensor.training, mode
        try:
            yield
        finally:
            Tensor.training = prev

    # ***** movement *****

    def _dim(self, dim: int, extra: int = 0) -> int:
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise TypeError(f"a dimension must be an int, got {dim!r} of type {type(dim).__name__}")
        n = self.ndim + extra
        if not -max(n, 1) <= dim < max(n, 1):
            raise OutOfRange(f"dimension {dim} is out of range for a tensor of shape {self.shape}")
        return dim + n if dim < 0 else dim

    def reshape(self, shape: Any, *args: Any) -> Tensor:
        new = argfix(shape, *args)
        if not all(_is_size(s) for s in new):
            raise TypeError(f"reshape sizes must be integers, got {new}")
        if sum(1 for s in new if s == -1) > 1 or any(isinstance(s, int) and s < -1 for s in new):
            raise InvalidArgument(
                f"bad shape {new} for reshape of {self.shape}: use at most one -1 and no other negatives"
            )
        if -1 in new:
            known = prod(s for s in new if s != -1)
            if known == 0 or self.numel() % known != 0:
                raise InvalidArgument(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) to {new}")
            new = tuple(self.numel() // known if s == -1 else s for s in new)
        if not _same_size(prod(new), self.numel()):
            raise InvalidArgument(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) to {new}")
        return self if new == self.shape else Tensor._apply(mlops.Reshape, self, shape=tuple(new))

    def expand(self, shape: Any, *args: Any) -> Tensor:
        new = argfix(shape, *args)
        if len(new) < self.ndim:
            raise InvalidArgument(f"cannot expand shape {self.shape} to {new}: fewer dimensions")
        old = (1,) * (len(new) - self.ndim) + tuple(self.shape)
        new = tuple(o if n == -1 else n for o, n in zip(old, new))
        if any(o != n and o != 1 for o, n in zip(old, new)):
            raise InvalidArgument(f"cannot expand shape {self.shape} to {new}: only size-1 dimensions can grow")
        x = self.reshape(old)
        return x if new == x.shape else Tensor._apply(mlops.Expand, x, shape=new)

    def permute(self, order: Any, *args: Any) -> Tensor:
        order = argfix(order, *args)
        norm = tuple(self._dim(o) for o in order) if len(order) == self.ndim else order
        if sorted(norm) != list(range(self.ndim)):
            raise InvalidArgument(f"invalid permute {order} for shape {self.shape}")
        return self if norm == tuple(range(self.ndim)) else Tensor._apply(mlops.Permute, self, order=norm)

    def flip(self, axis: Any, *args: Any) -> Tensor:
        axes = tuple(self._dim(a) for a in argfix(axis, *args))
        return Tensor._apply(mlops.Flip, self, axis=axes) if axes else self

    def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
        """Shift elements along dims, wrapping around (torch.roll); without dims, over the flattened tensor."""
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        shifts, dims = argfix(shifts), argfix(dims)
        if len(shifts) != len(dims) or not all(_is_size(s) for s in shifts):
            raise InvalidArgument(f"roll needs one int shift per dim, got shifts {shifts} and dims {dims}")
        x = self
        for shift, dim in zip(shifts, dims):
            d = self._dim(dim)
            n = self.shape[d]
            k = int(shift) % n if n else 0
            if k:
                tail, head = [None] * self.ndim, [None] * self.ndim
                tail[d], head[d] = (n - k, n), (0, n - k)
                x = x.shrink(tail).cat(x.shrink(head), dim=d)
        return x

    def shrink(self, arg: Sequence[tuple[sint, sint] | None]) -> Tensor:
        """Keep [begin, end) on each axis (None keeps the whole axis)."""
        if len(arg) != self.ndim:
            raise InvalidArgument(f"shrink needs one range per dimension of shape {self.shape}, got {arg}")
        norm = tuple((0, s) if a is None else tuple(a) for a, s in zip(arg, self.shape))
        for (b, e), s in zip(norm, self.shape):
            if all_int((b, e, s)) and not 0 <= b <= e <= s:
                raise OutOfRange(f"shrink {arg} is out of range for shape {self.shape}")
        if all(b == 0 and e == s for (b, e), s in zip(norm, self.shape)):
            return self
        return Tensor._apply(mlops.Shrink, self, arg=norm)

    def pad(self, arg: Sequence[tuple[int, int] | None], value: Scalar = 0.0) -> Tensor:
        """Pad (before, after) on each axis (None for none); negative amounts crop."""
        norm = _pad_pairs(arg, self.shape)
        x = self.shrink(tuple((-min(b, 0), s + min(e, 0)) for (b, e), s in zip(norm, self.shape)))
        grow = tuple((max(b, 0), max(e, 0)) for b, e in norm)
        if all(b == 0 and e == 0 for b, e in grow):
            return x
        ret = Tensor._apply(mlops.Pad, x, arg=grow)
        if value == 0:
            return ret
        inside = Tensor._const(x.shape, True, dtype=dtypes.bool, device=self.device).pad(grow)
        return inside.where(ret, value)

    def pad2d(self, padding: Sequence[int], value: Scalar = 0.0) -> Tensor:
        """PyTorch F.pad order: (left, right, top, bottom, ...) starting from the last axis."""
        if len(padding) % 2 or len(padding) // 2 > self.ndim:
            raise InvalidArgument(f"pad2d needs pairs for at most {self.ndim} trailing axes, got {padding}")
        pairs = [(padding[i], padding[i + 1]) for i in range(0, len(padding), 2)][::-1]
        return self.pad([None] * (self.ndim - len(pairs)) + pairs, value)

    def transpose(self, ax1: int = 1, ax2: int = 0) -> Tensor:
        order = list(range(self.ndim))
        a, b = self._dim(ax1), self._dim(ax2)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        s, e = self._dim(start_dim), self._dim(end_dim)
        if s > e:
            raise InvalidArgument(f"flatten start_dim {start_dim} comes after end_dim {end_dim} (shape {self.shape})")
        return self.reshape(*self.shape[:s], prod(self.shape[s : e + 1]), *self.shape[e + 1 :])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        d = self._dim(dim)
        return self.reshape(*self.shape[:d], *sizes, *self.shape[d + 1 :])

    def squeeze(self, dim: int | None = None) -> Tensor:
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        if self.ndim == 0:
            return self
        d = self._dim(dim)
        return self if self.shape[d] != 1 else self.reshape(*self.shape[:d], *self.shape[d + 1 :])

    def unsqueeze(self, dim: int) -> Tensor:
        d = self._dim(dim, extra=1)
        return self.reshape(*self.shape[:d], 1, *self.shape[d:])

    def contiguous(self) -> Tensor:
        return Tensor._apply(mlops.Contiguous, self)

    def contiguous_backward(self) -> Tensor:
        return Tensor._apply(mlops.ContiguousBackward, self)

    def repeat(self, repeats: Any, *args: Any) -> Tensor:
        reps = argfix(repeats, *args)
        if not all(_is_size(r) and r >= 0 for r in reps):
            raise InvalidArgument(f"repeat counts must be non-negative integers, got {reps}")
        if len(reps) < self.ndim:
            raise InvalidArgument(f"repeat needs at least {self.ndim} counts for shape {self.shape}, got {reps}")
        base = (1,) * (len(reps) - self.ndim) + tuple(self.shape)
        x = self.reshape(flatten((1, s) for s in base))
        x = x.expand(flatten((r, s) for r, s in zip(reps, base)))
        return x.reshape(tuple(r * s for r, s in zip(reps, base)))

    def cat(self, *others: Tensor, dim: int = 0) -> Tensor:
        xs = (self, *others)
        if not all(isinstance(x, Tensor) for x in xs):
            raise TypeError(f"cat needs Tensors, got {[type(x).__name__ for x in xs]}")
        if any(x.ndim == 0 for x in xs):
            raise InvalidArgument(
                f"zero-dimensional tensors cannot be concatenated (shapes {[x.shape for x in xs]}): use stack"
            )
        d = self._dim(dim)
        for x in xs:
            if x.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, self.shape)) if i != d):
                raise InvalidArgument(f"cat needs equal shapes except in dim {dim}, got {[t.shape for t in xs]}")
        total, offset, parts = sum(x.shape[d] for x in xs), 0, []
        for x in xs:
            pad = [None] * self.ndim
            pad[d] = (offset, total - offset - x.shape[d])
            parts.append(x.pad(pad))
            offset += x.shape[d]
        return _sum_all(parts)

    @staticmethod
    def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
        if not tensors:
            raise InvalidArgument("stack needs at least one tensor")
        if not all(isinstance(t, Tensor) for t in tensors):
            raise TypeError(f"stack needs Tensors, got {[type(t).__name__ for t in tensors]}")
        first, *rest = tensors
        d = first._dim(dim, extra=1)
        if any(t.shape != first.shape for t in rest):
            raise InvalidArgument(f"stack needs equal shapes, got {[t.shape for t in tensors]}")
        return first.unsqueeze(d).cat(*[t.unsqueeze(d) for t in rest], dim=d)

    def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        d = self._dim(dim)
        n = self.shape[d]
        if isinstance(sizes, int):
            if sizes <= 0:
                raise InvalidArgument(f"split size must be positive, got {sizes}")
            sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
        if sum(sizes) != n:
            raise InvalidArgument(f"split sizes {list(sizes)} do not add up to {n} (dim {dim} of shape {self.shape})")
        starts = np.cumsum([0, *sizes[:-1]]).tolist()
        return tuple(
            self.shrink([(b, b + s) if i == d else None for i in range(self.ndim)]) for b, s in zip(starts, sizes)
        )

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        if not isinstance(chunks, int) or isinstance(chunks, bool):
            raise TypeError(f"chunk count must be an int, got {chunks!r}")
        if chunks <= 0:
            raise InvalidArgument(f"chunk count must be positive, got {chunks}")
        n = self.shape[self._dim(dim)]
        return self.split(max(1, math.ceil(n / chunks)), dim)

    # ***** indexing *****

    def __getitem__(self, indices: Any) -> Tensor:
        return indexing.getitem(self, indices if isinstance(indices, tuple) else (indices,))

    def gather(self, *args: Any, **kwargs: Any) -> Tensor:
        """out[i][j] = self[i][index[i][j]] for dim=1: PyTorch's gather(dim, index) and the seed's gather(idx, dim),
        positional in either order or by keyword (dim, index or idx)."""
        return indexing.gather(self, *args, **kwargs)

    def tril(self, diagonal: int = 0) -> Tensor:
        _check_matrix(self, "tril")
        return _tri_mask(self.shape[-2:], diagonal, lower=True, device=self.device).where(self, 0)

    def triu(self, diagonal: int = 0) -> Tensor:
        _check_matrix(self, "triu")
        return _tri_mask(self.shape[-2:], diagonal, lower=False, device=self.device).where(self, 0)

    # ***** elementwise math *****

    def _float(self) -> Tensor:
        return self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)

    def cast(self, dtype: DType | str) -> Tensor:
        dtype = to_dtype(dtype)
        return self if dtype == self.dtype else Tensor._apply(mlops.Cast, self, dtype=dtype)

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    def half(self) -> Tensor:
        return self.cast(dtypes.float16)

    def double(self) -> Tensor:
        return self.cast(dtypes.float64)

    def int(self) -> Tensor:
        return self.cast(dtypes.int32)

    def long(self) -> Tensor:
        return self.cast(dtypes.int64)

    def bool(self) -> Tensor:
        return self.cast(dtypes.bool)

    def neg(self) -> Tensor:
        return self.logical_not() if self.dtype == dtypes.bool else Tensor._apply(mlops.Neg, self)

    def logical_not(self) -> Tensor:
        return Tensor._apply(mlops.Neg, self.bool())

    def reciprocal(self) -> Tensor:
        return Tensor._apply(mlops.Reciprocal, self._float())

    def sqrt(self) -> Tensor:
        return Tensor._apply(mlops.Sqrt, self._float())

    def rsqrt(self) -> Tensor:
        return self.sqrt().reciprocal()

    def exp(self) -> Tensor:
        return Tensor._apply(mlops.Exp, self._float())

    def exp2(self) -> Tensor:
        return (self._float() * math.log(2)).exp()

    def log(self) -> Tensor:
        return Tensor._apply(mlops.Log, self._float())

    def log2(self) -> Tensor:
        return self.log() / math.log(2)

    def sin(self) -> Tensor:
        return Tensor._apply(mlops.Sin, self._float())

    def cos(self) -> Tensor:
        return ((math.pi / 2) - self._float()).sin()

    def tan(self) -> Tensor:
        return self.sin() / self.cos()

    def square(self) -> Tensor:
        return self * self

    def abs(self) -> Tensor:
        return self if self.dtype == dtypes.bool else self.relu() + (-self).relu()

    def sign(self) -> Tensor:
        value = (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
        if dtypes.is_float(self.dtype):
            value = self.isnan().where(self, value)  # NOTE: sign(nan) is nan, as in numpy
        return _no_grad_through(self, value)

    def trunc(self) -> Tensor:
        if not dtypes.is_float(self.dtype):
            return self
        # NOTE: floats at or above 2^52 are already whole, and casting them to an int could overflow
        small = self.detach().abs() < 2.0**52
        value = small.where(self.detach().cast(dtypes.int64).cast(self.dtype), self.detach())
        return _no_grad_through(self, value)

    def floor(self) -> Tensor:
        if not dtypes.is_float(self.dtype):
            return self
        t = self.trunc().detach()
        return _no_grad_through(self, (t > self.detach()).where(t - 1, t))

    def ceil(self) -> Tensor:
        if not dtypes.is_float(self.dtype):
            return self
        t = self.trunc().detach()
        return _no_grad_through(self, (t < self.detach()).where(t + 1, t))

    def round(self) -> Tensor:
        """Round half to even, as PyTorch and numpy do."""
        if not dtypes.is_float(self.dtype):
            return self
        x = self.detach()
        r = (x + 0.5).floor()
        is_tie, is_odd = (r - x) == 0.5, (r - (r * 0.5).floor() * 2) == 1
        return _no_grad_through(self, (is_tie & is_odd).where(r - 1, r))

    def pow(self, x: Tensor | Scalar, reverse: bool = False) -> Tensor:
        if not reverse and isinstance(x, (int, float)) and not isinstance(x, bool):
            return self._pow_scalar(x)
        base, exponent = self._broadcasted(x, reverse)
        if not dtypes.is_float(base.dtype):  # NOTE: exact like torch's integer pow (float64 holds ints up to 2^53)
            return base.cast(dtypes.float64).pow(exponent.cast(dtypes.float64)).round().cast(base.dtype)
        base, exponent = base._float(), exponent._float()
        mag = (exponent * base.abs().log()).exp()
        # NOTE: a negative base gives a real result only for whole exponents; (-1)^y decides its sign
        odd = (exponent.abs() - (exponent.abs() * 0.5).floor() * 2) == 1
        signed = odd.where(-mag, mag)
        whole = exponent == exponent.trunc()
        ret = (base < 0).where(whole.where(signed, _nan_at((base < 0) & whole.logical_not(), base, exponent)), mag)
        return (exponent == 0).where(1.0, ret)

    def _pow_scalar(self, x: int | float) -> Tensor:
        """self ** x for a Python number: the sign rule is decided in Python, not in the graph."""
        if isinstance(x, int) and x < 0 and not dtypes.is_float(self.dtype):
            raise InvalidArgument(
                f"integers to negative integer powers are not allowed ({self.dtype} ** {x}): cast first"
            )
        if x == 0:
            ones = self.ones_like(dtype=self._float().dtype if isinstance(x, float) else self.dtype)
            return _no_grad_through(self, ones)
        small = float(x).is_integer() and 1 <= x <= 3
        if small or (isinstance(x, int) and x > 0 and not dtypes.is_float(self.dtype)):
            base = self if isinstance(x, int) else self._float()
            return base if x == 1 else base * base.pow(int(x) - 1)
        if x == 0.5:
            return self.sqrt()
        if x == -1:
            return self.reciprocal()
        base = self._float()
        mag = (base.abs().log() * x).exp()
        if x != math.floor(x):
            return (base < 0).where(_nan_at(base < 0, base), mag)
        return (base < 0).where(-mag, mag) if int(x) % 2 else mag

    def maximum(self, x: Tensor | Scalar) -> Tensor:
        a, b = self._broadcasted(x)
        if not dtypes.is_float(a.dtype):  # NOTE: no gradient to share, and (a + b) / 2 in float32 would round big ints
            return (a < b).where(b, a)
        # NOTE: ties share the gradient equally, as in PyTorch; a nan on either side wins, as in numpy
        ret = (a < b).detach().where(b, (a == b).detach().where(a * 0.5 + b * 0.5, a))
        return b.isnan().detach().where(b, ret)

    def minimum(self, x: Tensor | Scalar) -> Tensor:
        a, b = self._broadcasted(x)
        return a._flip_order().maximum(b._flip_order())._flip_order()

    def _flip_order(self) -> Tensor:
        """An order-reversing map that is its own inverse and cannot overflow: -x, not x, or ~x for ints."""
        if dtypes.is_float(self.dtype):
            return -self
        if self.dtype == dtypes.bool:
            return self.logical_not()
        # NOTE: ~x as MAX - x or -1 - x; -x would wrap for unsigned ints and for the most negative int
        return (int(np.iinfo(self.dtype.np).max) if dtypes.is_unsigned(self.dtype) else -1) - self

    def where(self, x: Tensor | Scalar, y: Tensor | Scalar) -> Tensor:
        """Elementwise `x if self else y`, broadcasting all three."""
        cond = self.bool()
        if isinstance(x, Tensor):
            x, y = x._broadcasted(y)
        elif isinstance(y, Tensor):
            y, x = y._broadcasted(x)
        else:
            x, y = Tensor(x, device=self.device)._broadcasted(y)
        cond, x = cond._broadcast_shapes(x)
        cond, y = cond._broadcast_shapes(y)
        x, y = x._broadcast_shapes(y)
        return Tensor._apply(mlops.Where, cond, x, y)

    def masked_fill(self, mask: Tensor, value: Tensor | Scalar) -> Tensor:
        """`value` where the bool `mask` holds, self elsewhere (torch.Tensor.masked_fill)."""
        if not isinstance(mask, Tensor) or mask.dtype != dtypes.bool:
            raise TypeError(f"masked_fill needs a bool Tensor mask, got {getattr(mask, 'dtype', type(mask).__name__)}")
        return mask.where(value, self)

    def lerp(self, end: Tensor | Scalar, weight: Tensor | Scalar) -> Tensor:
        """self + weight * (end - self) (torch.lerp)."""
        return self + (end - self if isinstance(end, Tensor) else -self + end) * weight

    def clip(self, min_: Scalar | None = None, max_: Scalar | None = None) -> Tensor:
        ret = self if min_ is None else self.maximum(min_)
        return ret if max_ is None else ret.minimum(max_)

    clamp = clip

    # ***** activations *****

    def relu(self) -> Tensor:
        return Tensor._apply(mlops.Relu, self)

    def sigmoid(self) -> Tensor:
        return Tensor._apply(mlops.Sigmoid, self._float())

    def tanh(self) -> Tensor:
        return 2.0 * ((2.0 * self).sigmoid()) - 1.0

    def sinh(self) -> Tensor:
        return (self.exp() - (-self).exp()) * 0.5

    def cosh(self) -> Tensor:
        return (self.exp() + (-self).exp()) * 0.5

    def asinh(self) -> Tensor:
        # NOTE: odd, computed on |x| so a large negative x does not cancel (x + sqrt(x^2 + 1) would round to 0)
        neg = self < 0
        ax = neg.where(-self, self)
        ret = (ax + (ax * ax + 1).sqrt()).log()
        return neg.where(-ret, ret)

    def acosh(self) -> Tensor:
        return (self + (self * self - 1).sqrt()).log()

    def atanh(self) -> Tensor:
        return ((1 + self) / (1 - self)).log() * 0.5

    def relu6(self) -> Tensor:
        return self.relu() - (self - 6).relu()

    def leakyrelu(self, neg_slope: float = 0.01) -> Tensor:
        return self.relu() - (-neg_slope * self).relu()

    def elu(self, alpha: float = 1.0) -> Tensor:
        return self.relu() - alpha * (1 - self.exp()).relu()

    def celu(self, alpha: float = 1.0) -> Tensor:
        return self.maximum(0) + (alpha * ((self / alpha).exp() - 1)).minimum(0)

    def gelu(self, approximate: str = "tanh") -> Tensor:
        """GELU; 'tanh' (tinygrad's default) or 'none' for the exact erf form (PyTorch's default)."""
        if approximate == "none":
            return 0.5 * self * (1 + (self * (1 / math.sqrt(2))).erf())
        return 0.5 * self * (1 + (math.sqrt(2 / math.pi) * (self + 0.044715 * self * self * self)).tanh())

    def quick_gelu(self) -> Tensor:
        return self * (self * 1.702).sigmoid()

    def silu(self) -> Tensor:
        return self * self.sigmoid()

    swish = silu

    def hardtanh(self, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
        return self.clip(min_val, max_val)

    def softplus(self, beta: float = 1.0) -> Tensor:
        # NOTE: max(x, 0) + log(1 + e^-|x|) never overflows
        x = self * beta
        return (x.relu() + (1 + (-x.abs()).exp()).log()) * (1 / beta)

    def softsign(self) -> Tensor:
        return self / (1 + self.abs())

    def mish(self) -> Tensor:
        return self * self.softplus().tanh()

    def hardswish(self) -> Tensor:
        return self * (self + 3).relu6() * (1 / 6)

    def hardsigmoid(self) -> Tensor:
        return (self + 3).relu6() * (1 / 6)

    def logsigmoid(self) -> Tensor:
        return -(-self).softplus()

    def erf(self) -> Tensor:
        # https://en.wikipedia.org/wiki/Error_function#Numerical_approximations (Abramowitz-Stegun 7.1.26)
        t = 1.0 / (1.0 + 0.3275911 * self.abs())
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        return self.sign() * (1.0 - poly * (-(self * self)).exp())

    # ***** broadcasting and binary ops *****

    def _broadcast_shapes(self, y: Tensor) -> tuple[Tensor, Tensor]:
        shape = broadcast_shape(self.shape, y.shape)
        return self.expand(shape), y.expand(shape)

    def _broadcasted(self, y: Tensor | Scalar, reverse: bool = False) -> tuple[Tensor, Tensor]:
        """Both operands as tensors of one shape and one (promoted) dtype."""
        x: Tensor = self
        if not isinstance(y, Tensor):
            if not isinstance(y, (bool, int, float, np.generic)):
                raise TypeError(f"cannot combine a Tensor with {type(y).__name__}")
            y = Tensor._const((), y, dtype=_scalar_dtype(y, x.dtype), device=x.device)
        if x.device != y.device:
            raise InvalidArgument(f"operands are on different devices: {x.device} and {y.device}")
        dtype = dtypes.promote(x.dtype, y.dtype)
        x, y = x.cast(dtype), y.cast(dtype)
        if reverse:
            x, y = y, x
        return x._broadcast_shapes(y)

    def add(self, x: Tensor | Scalar, reverse: bool = False) -> Tensor:
        return Tensor._apply(mlops.Add, *self._broadcasted(x, reverse))

    def sub(self, x: Tensor | Scalar, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(x, reverse)
        if a.dtype == dtypes.bool:
            raise TypeError("subtraction of bool tensors is not supported; use logical_xor or ^")
        return Tensor._apply(mlops.Sub, a, b)

    def mul(self, x: Tensor | Scalar, reverse: bool = False) -> Tensor:
        return Tensor._apply(mlops.Mul, *self._broadcasted(x, reverse))

    def div(self, x: Tensor | Scalar, reverse: bool = False) -> Tensor:
        """True division (ints give floats), as PyTorch."""
        a, b = self._broadcasted(x, reverse)
        return Tensor._apply(mlops.Div, a._float(), b._float())

    def floordiv(self, x: Tensor | Scalar, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(x, reverse)
        if dtypes.is_float(a.dtype):
            return (a / b).floor()
        q = Tensor._wrap(a.lazydata.e(BinaryOps.DIV, b.lazydata))
        r = Tensor._wrap(a.lazydata.e(BinaryOps.MOD, b.lazydata))
        return ((r != 0) & ((r < 0) != (b < 0))).where(q - 1, q)

    def mod(self, x: Tensor | Scalar, reverse: bool = False) -> Tensor:
        """Remainder with the sign of the divisor, as Python and PyTorch."""
        a, b = self._broadcasted(x, reverse)
        if dtypes.is_float(a.dtype):
            return a - (a / b).floor().detach() * b
        r = Tensor._wrap(a.lazydata.e(BinaryOps.MOD, b.lazydata))
        return ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)

    def _cmp_lt(self, x: Tensor | Scalar, reverse: bool = False) -> Tensor:
        return Tensor._apply(mlops.Less, *self._broadcasted(x, reverse))

    def __lt__(self, x: Tensor | Scalar) -> Tensor:  # type: ignore[override]
        return self._cmp_lt(x)

    def __gt__(self, x: Tensor | Scalar) -> Tensor:  # type: ignore[override]
        return self._cmp_lt(x, reverse=True)

    def __ge__(self, x: Tensor | Scalar) -> Tensor:  # type: ignore[override]
        a, b = self._broadcasted(x)
        return (a > b) | (a == b)

    def __le__(self, x: Tensor | Scalar) -> Tensor:  # type: ignore[override]
        a, b = self._broadcasted(x)
        return (a < b) | (a == b)

    def __ne__(self, x: Any) -> Tensor:  # type: ignore[override]
        a, b = self._broadcasted(x)
        ret = a._cmp_lt(b) | b._cmp_lt(a)
        # NOTE: nan is unequal to everything, itself included, but neither < nor > anything
        return ret | a.isnan() | b.isnan() if dtypes.is_float(a.dtype) else ret

    def __eq__(self, x: Any) -> Tensor:  # type: ignore[override]
        return (self != x).logical_not()

    def isnan(self) -> Tensor:
        """True where the value is nan (nan is neither below inf nor above -inf)."""
        if not dtypes.is_float(self.dtype):
            return self._const(self.shape, False, dtype=dtypes.bool, device=self.device)
        return ((self < math.inf) | (self > -math.inf)).logical_not()

    def isinf(self) -> Tensor:
        return (self == math.inf) | (self == -math.inf) if dtypes.is_float(self.dtype) else self.isnan()

    def __and__(self, x: Tensor | Scalar) -> Tensor:
        a, b = self._bool_operands(x)
        return Tensor._wrap(a.lazydata.e(BinaryOps.MUL, b.lazydata))

    def __or__(self, x: Tensor | Scalar) -> Tensor:
        a, b = self._bool_operands(x)
        return Tensor._wrap(a.lazydata.e(BinaryOps.ADD, b.lazydata))

    def __xor__(self, x: Tensor | Scalar) -> Tensor:
        """Logical xor of bools, bitwise xor of integers."""
        a, b = self._broadcasted(x)
        if dtypes.is_int(a.dtype):
            return _xor_ints(a, b)
        a, b = self._bool_operands(x)
        return a != b

    def __rand__(self, x: Scalar) -> Tensor:
        return self & x  # NOTE: and, or and xor are symmetric, so `True & t` and `5 ^ t` are t's own

    def __ror__(self, x: Scalar) -> Tensor:
        return self | x

    def __rxor__(self, x: Scalar) -> Tensor:
        return self ^ x

    def __invert__(self) -> Tensor:
        return self._bool_operands(True)[0].logical_not()

    def _bool_operands(self, x: Tensor | Scalar) -> tuple[Tensor, Tensor]:
        a, b = self._broadcasted(x)
        if a.dtype != dtypes.bool:
            raise TypeError(f"logical operators need bool tensors (^ takes integers too), got {a.dtype}")
        return a, b

    def __neg__(self) -> Tensor:
        return self.neg()

    def __abs__(self) -> Tensor:
        return self.abs()

    def __iter__(self) -> Iterator[Tensor]:
        """The sub-tensors along the first axis, as torch."""
        return (self[i] for i in range(len(self)))

    def __add__(self, x: Any) -> Tensor:
        return self.add(x)

    def __radd__(self, x: Any) -> Tensor:
        return self.add(x, reverse=True)

    def __sub__(self, x: Any) -> Tensor:
        return self.sub(x)

    def __rsub__(self, x: Any) -> Tensor:
        return self.sub(x, reverse=True)

    def __mul__(self, x: Any) -> Tensor:
        return self.mul(x)

    def __rmul__(self, x: Any) -> Tensor:
        return self.mul(x, reverse=True)

    def __truediv__(self, x: Any) -> Tensor:
        return self.div(x)

    def __rtruediv__(self, x: Any) -> Tensor:
        return self.div(x, reverse=True)

    def __floordiv__(self, x: Any) -> Tensor:
        return self.floordiv(x)

    def __rfloordiv__(self, x: Any) -> Tensor:
        return self.floordiv(x, reverse=True)

    def __mod__(self, x: Any) -> Tensor:
        return self.mod(x)

    def __rmod__(self, x: Any) -> Tensor:
        return self.mod(x, reverse=True)

    def __pow__(self, x: Any) -> Tensor:
        return self.pow(x)

    def __rpow__(self, x: Any) -> Tensor:
        return self.pow(x, reverse=True)

    def __matmul__(self, x: Tensor) -> Tensor:
        return self.matmul(x)

    def __rmatmul__(self, x: Tensor) -> Tensor:
        return x.matmul(self)

    def __iadd__(self, x: Any) -> Tensor:
        return self.assign(self.add(x))

    def __isub__(self, x: Any) -> Tensor:
        return self.assign(self.sub(x))

    def __imul__(self, x: Any) -> Tensor:
        return self.assign(self.mul(x))

    def __itruediv__(self, x: Any) -> Tensor:
        return self.assign(self.div(x))

    # ***** reductions *****

    def _axes(self, axis: int | Sequence[int] | None) -> tuple[int, ...]:
        if axis is None:
            return tuple(range(self.ndim))
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        return tuple(sorted({self._dim(a) for a in axes}))

    def _reduce(self, fn: type[mlops.Function], axis: int | Sequence[int] | None, keepdim: bool) -> Tensor:
        axes = self._axes(axis)
        new_shape = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
        ret = Tensor._apply(fn, self, new_shape=new_shape)
        return ret if keepdim else ret.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

    def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        x = (
            self.cast(dtypes.default_int)
            if self.dtype == dtypes.bool or (dtypes.is_int(self.dtype) and self.dtype.itemsize < 4)
            else self
        )
        return x._reduce(mlops.Sum, axis, keepdim)

    def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The maximum; an empty reduced axis raises ValueError (it has no identity), as numpy."""
        if any(self.shape[a] == 0 for a in self._axes(axis)):
            raise InvalidArgument(f"max/min of an empty axis (axis {axis} of shape {self.shape}) has no identity")
        return self._reduce(mlops.Max, axis, keepdim)

    def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._flip_order().max(axis, keepdim)._flip_order()

    def any(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self.bool()._reduce(mlops.Max, axis, keepdim)  # NOTE: any() of nothing is False

    def all(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self.logical_not().any(axis, keepdim).logical_not()

    def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        x = self._float()
        count = prod(self.shape[a] for a in self._axes(axis))
        return x.sum(axis, keepdim) * (1 / count if count else math.nan)

    def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        x = self._float()
        count = prod(self.shape[a] for a in self._axes(axis))
        sq = (x - x.mean(axis, keepdim=True)).square().sum(axis, keepdim)
        return sq / max(count - correction, 0)

    def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        return self.var(axis, keepdim, correction).sqrt()

    def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first maximum (of the flattened tensor when axis is None), as int32."""
        if axis is None:
            return self.flatten().argmax(0, keepdim=False).reshape((1,) * self.ndim if keepdim else ())
        d = self._dim(axis)
        n = self.shape[d]
        is_max = self == self.max(d, keepdim=True)
        countdown = Tensor.arange(n, 0, -1, device=self.device).reshape(n, *[1] * (self.ndim - d - 1))
        first = (is_max.cast(dtypes.default_int) * countdown).max(d, keepdim)
        return (n - first).cast(dtypes.int32).detach()

    def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        return self._flip_order().argmax(axis, keepdim)

    def _softmax(self, axis: int) -> tuple[Tensor, Tensor, Tensor]:
        # NOTE: the max only shifts for range (the result does not depend on it), so it takes no gradient: its
        # backward's x == max mask fails when a kernel recomputes x with other rounding (0/0 on CLANG, issue 13)
        m = self - self.max(axis, keepdim=True).detach()
        e = m.exp()
        return m, e, e.sum(axis, keepdim=True)

    def softmax(self, axis: int = -1) -> Tensor:
        _, e, ss = self._float()._softmax(axis)
        return e.div(ss)

    def log_softmax(self, axis: int = -1) -> Tensor:
        m, _, ss = self._float()._softmax(axis)
        return m - ss.log()

    def logsumexp(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        x = self._float()
        m = x.max(axis, keepdim=True).detach()
        m = (m.abs() == math.inf).where(0.0, m)  # NOTE: keeps all -inf rows at -inf instead of nan
        ret = (x - m).exp().sum(axis, keepdim=True).log() + m
        return ret if keepdim else ret.reshape(tuple(s for i, s in enumerate(self.shape) if i not in self._axes(axis)))

    def cumsum(self, axis: int = 0) -> Tensor:
        d = self._dim(axis)
        n = self.shape[d]
        x = self.transpose(d, -1).unsqueeze(-2)  # (..., 1, n)
        ret = (x * _tri_mask((n, n), 0, lower=True, device=self.device)).sum(-1)  # (..., n)
        return ret.transpose(d, -1)

    # ***** linear algebra *****

    def matmul(self, w: Tensor) -> Tensor:
        return self.dot(w)

    def dot(self, w: Tensor) -> Tensor:
        if not isinstance(w, Tensor):
            raise TypeError(f"matmul needs a Tensor operand, got {type(w).__name__}")
        n1, n2 = self.ndim, w.ndim
        if n1 == 0 or n2 == 0:
            raise InvalidArgument(f"matmul needs at least 1-d tensors, got shapes {self.shape} and {w.shape}")
        if self.shape[-1] != w.shape[-min(n2, 2)]:
            raise InvalidArgument(
                f"matmul shape mismatch: {self.shape} @ {w.shape} ({self.shape[-1]} != {w.shape[-min(n2, 2)]})"
            )
        try:
            broadcast_shape(self.shape[:-2], w.shape[:-2])
        except ValueError:
            raise InvalidArgument(
                f"matmul batch shapes {self.shape[:-2]} and {w.shape[:-2]} do not broadcast: {self.shape} @ {w.shape}"
            ) from None
        x = self.reshape(*self.shape[:-1], *[1] * min(n1 - 1, n2 - 1, 1), self.shape[-1])
        w = w.reshape(*w.shape[:-2], *[1] * min(n1 - 1, n2 - 1, 1), *w.shape[-min(n2, 2) :]).transpose(-1, -min(n2, 2))
        return (x * w).sum(-1)

    def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """self @ weight + bias, with weight of shape (in, out) as in tinygrad (a 1-d weight scales)."""
        x = self * weight if weight.ndim == 1 else self.dot(weight)
        return x + bias if bias is not None else x

    def sequential(self, layers: Sequence[Any]) -> Tensor:
        x = self
        for f in layers:
            x = f(x)
        return x

    @staticmethod
    def einsum(formula: str, *operands: Tensor) -> Tensor:
        """Einstein summation over single-letter axes, e.g. 'ij,jk->ik'."""
        return _einsum(formula, operands)

    # ***** convolution and pooling *****

    def _pool(
        self, kernel: tuple[int, ...], stride: int | tuple[int, ...] = 1, dilation: int | tuple[int, ...] = 1
    ) -> Tensor:
        """Sliding windows over the last len(kernel) axes: (..., *out_spatial, *kernel)."""
        return convolution.pool(self, kernel, make_pair(stride, len(kernel)), make_pair(dilation, len(kernel)))

    def conv2d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        groups: int = 1,
        stride: int | Sequence[int] = 1,
        dilation: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
    ) -> Tensor:
        """N-d convolution (input (N, C, *spatial), weight (Cout, C/groups, *kernel)); padding per axis
        (symmetric) or as (left, right, top, bottom, ...) pairs like pad2d."""
        return convolution.conv(self, weight, bias, groups, stride, dilation, padding)

    def conv1d(self, weight: Tensor, bias: Tensor | None = None, **kwargs: Any) -> Tensor:
        convolution.check_conv_dims(self, weight, 1)
        return self.conv2d(weight, bias, **kwargs)

    def conv3d(self, weight: Tensor, bias: Tensor | None = None, **kwargs: Any) -> Tensor:
        convolution.check_conv_dims(self, weight, 3)
        return self.conv2d(weight, bias, **kwargs)

    def conv_transpose2d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        groups: int = 1,
        stride: int | Sequence[int] = 1,
        dilation: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        output_padding: int | Sequence[int] = 0,
    ) -> Tensor:
        """Transposed N-d convolution, weight (Cin, Cout/groups, *kernel) as in PyTorch."""
        return convolution.conv_transpose(self, weight, bias, groups, stride, dilation, padding, output_padding)

    def max_pool2d(
        self,
        kernel_size: int | tuple[int, ...] = (2, 2),
        stride: int | tuple[int, ...] | None = None,
        dilation: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] = 0,
    ) -> Tensor:
        """Max over sliding windows of the last len(kernel_size) axes (padding reads as -inf)."""
        windows = convolution.pooling_windows(self, kernel_size, stride, dilation, padding, fill=-math.inf)
        return windows.max(tuple(range(-len(make_pair(kernel_size)), 0)))

    def avg_pool2d(
        self,
        kernel_size: int | tuple[int, ...] = (2, 2),
        stride: int | tuple[int, ...] | None = None,
        dilation: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] = 0,
    ) -> Tensor:
        """Mean over sliding windows of the last len(kernel_size) axes (padding counts as 0, as in PyTorch)."""
        windows = convolution.pooling_windows(self, kernel_size, stride, dilation, padding, fill=0.0)
        return windows.mean(tuple(range(-len(make_pair(kernel_size)), 0)))

    # ***** normalisation, regularisation, sampling *****

    def layernorm(self, axis: int | Sequence[int] = -1, eps: float = 1e-5) -> Tensor:
        y = self - self.mean(axis, keepdim=True)
        return y * (y * y).mean(axis, keepdim=True).add(eps).rsqrt()

    def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor) -> Tensor:
        """(x - mean) * invstd * weight + bias with per-channel (axis 1) statistics."""
        shape = (1, -1) + (1,) * (self.ndim - 2)
        x = self - mean.reshape(shape)
        if weight is not None:
            x = x * weight.reshape(shape)
        ret = x * (invstd.reshape(shape) if invstd.ndim == 1 else invstd)
        return ret + bias.reshape(shape) if bias is not None else ret

    def dropout(self, p: float = 0.5) -> Tensor:
        if not 0 <= p <= 1:
            raise InvalidArgument(f"dropout probability must be in [0, 1], got {p}")
        if not Tensor.training or p == 0:
            return self
        keep = Tensor.rand(*self.shape, device=self.device, requires_grad=False) >= p
        return keep.where(self, 0) * (1 / (1 - p)) if p < 1 else self * 0

    def one_hot(self, num_classes: int) -> Tensor:
        if not isinstance(num_classes, int) or num_classes < 1:
            raise InvalidArgument(f"one_hot needs num_classes >= 1, got {num_classes!r}")
        if not dtypes.is_int(self.dtype):
            raise TypeError(f"one_hot needs an integer tensor of classes, got {self.dtype}")
        return indexing.onehot(self, num_classes).cast(dtypes.default_int)

    def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
        """Sample indices from the (unnormalised) weights in the last axis; int32."""
        if not 1 <= self.ndim <= 2 or num_samples < 1:
            raise InvalidArgument(f"multinomial needs 1-d or 2-d weights and num_samples >= 1, got {self.shape}")
        if not replacement and num_samples != 1:
            raise InvalidArgument("multinomial without replacement supports num_samples=1 only")
        w = self.unsqueeze(0) if self.ndim == 1 else self
        cw = w._float().cumsum(1)
        cdf = cw / cw[:, -1].unsqueeze(1)
        u = Tensor.rand(num_samples, cdf.shape[0], 1, device=self.device)
        idx = (u.expand(-1, -1, cdf.shape[1]) >= cdf).sum(2).permute(1, 0)
        idx = idx.minimum(cdf.shape[1] - 1)
        return (idx.squeeze(0) if self.ndim == 1 else idx).cast(dtypes.int32).detach()

    def scaled_dot_product_attention(
        self,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
    ) -> Tensor:
        """softmax(q @ k^T / sqrt(d) + mask) @ v; a bool mask keeps True positions; is_causal masks the future."""
        if is_causal:
            if attn_mask is not None:
                raise InvalidArgument("pass either attn_mask or is_causal, not both")
            attn_mask = _tri_mask((self.shape[-2], key.shape[-2]), 0, lower=True, device=self.device)
        qk = self.matmul(key.transpose(-2, -1)) * (1 / math.sqrt(self.shape[-1]))
        if attn_mask is not None:
            qk = attn_mask.where(qk, -math.inf) if attn_mask.dtype == dtypes.bool else qk + attn_mask
        return qk.softmax(-1).dropout(dropout_p) @ value

    # ***** losses *****

    def sparse_categorical_crossentropy(
        self, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0
    ) -> Tensor:
        """Mean cross entropy of logits `self` (..., C) against integer class labels `Y` (...)."""
        if tuple(self.shape[:-1]) != tuple(Y.shape):
            raise InvalidArgument(f"labels of shape {Y.shape} do not match logits of shape {self.shape}")
        n_cls = self.shape[-1]
        keep = (Y != ignore_index).detach()
        target = indexing.onehot(Y, n_cls).cast(self._float().dtype) * keep.unsqueeze(-1)
        logp = self.log_softmax(-1)
        nll = -(logp * target).sum() / keep.sum()
        if label_smoothing == 0:
            return nll
        smooth = -(logp.mean(-1) * keep).sum() / keep.sum()
        return (1 - label_smoothing) * nll + label_smoothing * smooth

    def cross_entropy(self, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0) -> Tensor:
        """PyTorch's F.cross_entropy for integer targets over the last axis."""
        return self.sparse_categorical_crossentropy(Y, ignore_index, label_smoothing)

    def binary_crossentropy(self, Y: Tensor) -> Tensor:
        """Mean BCE of probabilities `self` against targets `Y` in [0, 1]."""
        return (-Y * self.log() - (1 - Y) * (1 - self).log()).mean()

    def binary_crossentropy_logits(self, Y: Tensor) -> Tensor:
        """Mean BCE of logits `self` against targets `Y`, computed without overflow."""
        return (self.relu() - self * Y + (1 + (-self.abs()).exp()).log()).mean()

    def mse(self, Y: Tensor) -> Tensor:
        """Mean squared error."""
        return (self - Y).square().mean()


# ***** helpers for the Tensor methods above *****


def _to_numpy(data: Any, dtype: DType | None) -> np.ndarray:
    if isinstance(data, np.ndarray):
        if data.dtype.kind not in "biuf":
            raise TypeError(f"cannot make a Tensor from a numpy array of dtype {data.dtype}")
        return data.astype(dtype.np) if dtype is not None else data
    try:
        arr = np.array(data, dtype=(dtype or dtypes.from_py(data)).np)
    except (ValueError, TypeError) as e:
        raise InvalidArgument(
            f"cannot make a Tensor from this nested list (is it ragged or non-numeric?): {e}"
        ) from None
    return arr


def _is_size(s: Any) -> bool:
    """An int (not a bool), a numpy integer, or a symbolic size."""
    return (isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_))) or hasattr(s, "vars")


def _shape_arg(shape: Sequence[Any]) -> tuple[sint, ...]:
    shape = tuple(shape)
    if not all(_is_size(s) for s in shape):
        raise TypeError(f"bad shape {shape}: dimensions must be integers")
    if any(isinstance(s, (int, np.integer)) and s < 0 for s in shape):
        raise InvalidArgument(f"bad shape {shape}: dimensions must be non-negative integers")
    return tuple(int(s) if isinstance(s, (int, np.integer)) else s for s in shape)


def _device_name(device: Any) -> str:
    """A device name from the device table ('clang', 'GPU:0'): ValueError naming the known ones for any other."""
    if not isinstance(device, str):
        raise TypeError(f"a device is a name such as 'CLANG', got {device!r} of type {type(device).__name__}")
    try:
        return Device.canonicalize(device)
    except DeviceUnavailable as e:  # NOTE: canonicalize only looks the name up; a missing driver is raised on use
        raise InvalidArgument(str(e)) from None


def _pad_pairs(arg: Sequence[Any], shape: tuple[sint, ...]) -> tuple[tuple[int, int], ...]:
    """Tensor.pad's (before, after) per axis as ints, None as (0, 0); a negative amount may crop the axis away."""
    if not isinstance(arg, (tuple, list)) or len(arg) != len(shape):
        raise InvalidArgument(f"pad needs one (before, after) or None per dimension of shape {shape}, got {arg}")
    ret = []
    for d, (a, s) in enumerate(zip(arg, shape)):
        if a is not None and (not isinstance(a, (tuple, list)) or len(a) != 2 or not all(_is_size(v) for v in a)):
            raise TypeError(f"pad amounts must be (before, after) pairs of ints or None, got {a!r} for dim {d}")
        b, e = (0, 0) if a is None else (int(a[0]), int(a[1]))
        if isinstance(s, int) and -min(b, 0) - min(e, 0) > s:
            raise InvalidArgument(
                f"pad {(b, e)} crops {-min(b, 0) - min(e, 0)} from dim {d} of size {s} (shape {shape})"
            )
        ret.append((b, e))
    return tuple(ret)


def broadcast_shape(*shapes: tuple[sint, ...]) -> tuple[sint, ...]:
    """The NumPy broadcast of several shapes; an error naming them when they do not broadcast."""
    n = max(len(s) for s in shapes)
    padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
    ret = []
    for dims in zip(*padded):
        big = {d for d in dims if d != 1}
        if len(big) > 1:
            raise InvalidArgument(f"cannot broadcast shapes {' and '.join(str(tuple(s)) for s in shapes)}")
        ret.append(big.pop() if big else 1)
    return tuple(ret)


def _same_size(a: sint, b: sint) -> bool:
    """Equal element counts; a symbolic size counts as its bound value."""
    try:
        return sym_infer(a, {}) == sym_infer(b, {})
    except KeyError:  # NOTE: unbound Variables: equal only if the expressions are
        return a == b


def _scalar_dtype(y: Scalar, tensor_dtype: DType) -> DType:
    """The dtype a Python scalar takes next to a tensor: the tensor's, unless that would lose its kind."""
    kind = dtypes.from_py(y) if not isinstance(y, np.floating) else dtypes.default_float
    if kind == dtypes.bool or (kind == dtypes.default_int and tensor_dtype != dtypes.bool):
        return tensor_dtype
    if kind == dtypes.default_int:
        return dtypes.default_int
    return tensor_dtype if dtypes.is_float(tensor_dtype) else dtypes.default_float


def _sum_all(xs: list[Tensor]) -> Tensor:
    ret = xs[0]
    for x in xs[1:]:
        ret = ret + x
    return ret


def _no_grad_through(x: Tensor, value: Tensor) -> Tensor:
    """`value` (computed without grad) as a function of `x` whose gradient is zero (floor, round, sign)."""
    return Tensor._apply(mlops.ZeroGrad, x, value.detach())


def _check_matrix(x: Tensor, op: str) -> None:
    if x.ndim < 2:
        raise InvalidArgument(f"{op} needs a tensor of at least 2 dimensions, got shape {x.shape}")


def _tri_mask(shape: tuple[int, int], diagonal: int, lower: bool, device: str) -> Tensor:
    rows, cols = shape
    keep = np.tri(rows, cols, diagonal, dtype=bool) if lower else ~np.tri(rows, cols, diagonal - 1, dtype=bool)
    return Tensor(keep, device=device)


def _nan_at(cond: Tensor, *xs: Tensor) -> Tensor:
    """nan, with a gradient of nan for each of xs where cond holds and 0 elsewhere (torch's gradient of an undefined
    result): a nan constant would have no gradient, and nan * x alone would make it nan everywhere."""
    return _prod_all([cond.where(x, 1.0) for x in xs]) * math.nan


def _xor_ints(a: Tensor, b: Tensor) -> Tensor:
    """Bitwise a ^ b from the bits of each (there is no xor device op): bit k of x is (x mod 2^(k+1)) >= 2^k with a
    non-negative mod, so two's complement comes out right; the top bit of a signed int is its sign."""
    bits, signed = a.dtype.itemsize * 8, not dtypes.is_unsigned(a.dtype)

    def bit(x: Tensor, k: int) -> Tensor:
        if signed and k == bits - 1:
            return x < 0
        m = Tensor._wrap(x.lazydata.e(BinaryOps.MOD, x._broadcasted(2 ** (k + 1))[1].lazydata)) if k < bits - 1 else x
        m = (m < 0).where(m + 2 ** (k + 1), m) if signed else m
        return (m < 2**k).logical_not()

    ret = a.zeros_like()
    for k in range(bits):
        weight = -(2**k) if signed and k == bits - 1 else 2**k
        ret = ret + (bit(a, k) != bit(b, k)).where(ret.full_like(weight), 0)  # NOTE: a.dtype: 2^40 is no int32
    return ret


def _einsum(formula: str, operands: Sequence[Tensor]) -> Tensor:
    formula = formula.replace(" ", "")
    lhs, arrow, rhs = formula.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise InvalidArgument(f"einsum '{formula}' names {len(inputs)} operands but got {len(operands)}")
    for letters, t in zip(inputs, operands):
        if len(letters) != t.ndim or any(c not in string.ascii_letters for c in letters):
            raise InvalidArgument(f"einsum operand '{letters}' does not match a tensor of shape {t.shape}")
        if len(set(letters)) != len(letters):
            raise InvalidArgument(f"einsum operand '{letters}' repeats a letter (diagonals are not supported)")
    counts = {c: sum(s.count(c) for s in inputs) for c in dict.fromkeys("".join(inputs))}
    out = rhs if arrow else "".join(sorted(c for c, n in counts.items() if n == 1))
    letters = sorted(counts)
    aligned = []
    for spec, t in zip(inputs, operands):
        order = sorted(range(len(spec)), key=lambda i: spec[i])
        shape = [t.shape[spec.index(c)] if c in spec else 1 for c in letters]
        aligned.append(t.permute(order).reshape(shape))
    prodt = _prod_all(aligned)
    summed = [i for i, c in enumerate(letters) if c not in out]
    ret = prodt.sum(summed) if summed else prodt
    remaining = [c for c in letters if c in out]
    return ret.permute([remaining.index(c) for c in out]) if out else ret


def _prod_all(xs: list[Tensor]) -> Tensor:
    ret = xs[0]
    for x in xs[1:]:
        ret = ret * x
    return ret


class no_grad(contextlib.ContextDecorator):
    """`with no_grad():` builds no autograd graph inside the block (like torch.no_grad)."""

    def __enter__(self) -> None:
        self.prev, Tensor.no_grad = Tensor.no_grad, True

    def __exit__(self, *exc: object) -> None:
        Tensor.no_grad = self.prev


# NOTE: imported last: they build on Tensor, and Tensor delegates to them
from specgrad import convolution, indexing  # noqa: E402
