"""The differentiable Functions: forward and backward on LazyBuffers only (tensor.py wraps them in Tensors).

Imports dtype, helpers, ops and lazy.
"""

from __future__ import annotations

import math
from typing import Any

from specgrad.dtype import DType
from specgrad.helpers import argsort
from specgrad.lazy import LazyBuffer
from specgrad.ops import BinaryOps, ReduceOps, TernaryOps, UnaryOps
from specgrad.shape.symbolic import sint


class Function:
    """One differentiable step. `needs_input_grad[i]` says whether input i wants a gradient."""

    def __init__(self, device: str, needs_input_grad: tuple[bool | None, ...]):
        self.device, self.needs_input_grad = device, needs_input_grad
        self.requires_grad = True if any(needs_input_grad) else None if None in needs_input_grad else False
        self.parents: tuple[Any, ...] = ()  # set by tensor.py: the input Tensors, kept for backward

    def forward(self, *args: Any, **kwargs: Any) -> LazyBuffer:
        raise NotImplementedError(f"forward not implemented for {type(self).__name__}")

    def backward(self, grad: LazyBuffer) -> LazyBuffer | tuple[LazyBuffer | None, ...]:
        raise RuntimeError(f"{type(self).__name__} has no gradient")


def _lt_as(a: LazyBuffer, b: LazyBuffer, dtype: DType) -> LazyBuffer:
    return a.e(BinaryOps.CMPLT, b).cast(dtype)


# *** unary ***


class ZeroGrad(Function):
    """Pass `value` through as a function of `x` with zero gradient (floor, round, sign)."""

    def forward(self, x: LazyBuffer, value: LazyBuffer) -> LazyBuffer:
        return value

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        return grad.const(0), None


class Contiguous(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        return x.contiguous()

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad


class ContiguousBackward(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        return x

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.contiguous()


class Cast(Function):
    def forward(self, x: LazyBuffer, dtype: DType) -> LazyBuffer:
        self.input_dtype = x.dtype
        return x.cast(dtype)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.cast(self.input_dtype)


class Neg(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        return x.e(UnaryOps.NEG)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.e(UnaryOps.NEG)


class Reciprocal(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.ret = x.e(UnaryOps.RECIP)
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.e(UnaryOps.NEG).e(BinaryOps.MUL, self.ret).e(BinaryOps.MUL, self.ret)


class Sin(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.x = x
        return x.e(UnaryOps.SIN)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        cos = self.x.const(math.pi / 2).e(BinaryOps.SUB, self.x).e(UnaryOps.SIN)
        return cos.e(BinaryOps.MUL, grad)


class Relu(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.ret = x.e(BinaryOps.MAX, x.const(0))
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return _lt_as(self.ret.const(0), self.ret, grad.dtype).e(BinaryOps.MUL, grad)


class Log(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.x = x
        return x.e(UnaryOps.LOG2).e(BinaryOps.MUL, x.const(math.log(2)))

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.e(BinaryOps.DIV, self.x)


class Exp(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.ret = x.e(BinaryOps.MUL, x.const(1 / math.log(2))).e(UnaryOps.EXP2)
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return self.ret.e(BinaryOps.MUL, grad)


class Sqrt(Function):
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        self.ret = x.e(UnaryOps.SQRT)
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.e(BinaryOps.DIV, self.ret.e(BinaryOps.MUL, self.ret.const(2)))


class Sigmoid(Function):
    # NOTE: 1 / (1 + 2^(-x/ln2)) stays finite for large |x|: 2^big is inf and 1/inf is 0
    def forward(self, x: LazyBuffer) -> LazyBuffer:
        exp = x.e(BinaryOps.MUL, x.const(-1 / math.log(2))).e(UnaryOps.EXP2)
        self.ret = x.const(1).e(BinaryOps.DIV, x.const(1).e(BinaryOps.ADD, exp))
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        one_minus = self.ret.const(1).e(BinaryOps.SUB, self.ret)
        return self.ret.e(BinaryOps.MUL, one_minus).e(BinaryOps.MUL, grad)


# *** binary and ternary (inputs already broadcast to one shape and dtype) ***


class Less(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.CMPLT, y)


class Add(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.ADD, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        return grad if self.needs_input_grad[0] else None, grad if self.needs_input_grad[1] else None


class Sub(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        return x.e(BinaryOps.SUB, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        return (grad if self.needs_input_grad[0] else None, grad.e(UnaryOps.NEG) if self.needs_input_grad[1] else None)


class Mul(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.x, self.y = x, y
        return x.e(BinaryOps.MUL, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        return (
            self.y.e(BinaryOps.MUL, grad) if self.needs_input_grad[0] else None,
            self.x.e(BinaryOps.MUL, grad) if self.needs_input_grad[1] else None,
        )


class Div(Function):
    def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.x, self.y = x, y
        return x.e(BinaryOps.DIV, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        dx = grad.e(BinaryOps.DIV, self.y) if self.needs_input_grad[0] else None
        dy = None
        if self.needs_input_grad[1]:
            y2 = self.y.e(BinaryOps.MUL, self.y)
            dy = grad.e(UnaryOps.NEG).e(BinaryOps.MUL, self.x).e(BinaryOps.DIV, y2)
        return dx, dy


class Where(Function):
    def forward(self, cond: LazyBuffer, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
        self.cond = cond
        return cond.e(TernaryOps.WHERE, x, y)

    def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, ...]:
        zero = grad.const(0)
        return (
            None,
            self.cond.e(TernaryOps.WHERE, grad, zero) if self.needs_input_grad[1] else None,
            self.cond.e(TernaryOps.WHERE, zero, grad) if self.needs_input_grad[2] else None,
        )


# *** reduce ***


class Sum(Function):
    def forward(self, x: LazyBuffer, new_shape: tuple[sint, ...]) -> LazyBuffer:
        self.input_shape = x.shape
        return x.r(ReduceOps.SUM, new_shape)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.expand(self.input_shape)


class Max(Function):
    def forward(self, x: LazyBuffer, new_shape: tuple[sint, ...]) -> LazyBuffer:
        self.x, self.ret = x, x.r(ReduceOps.MAX, new_shape)
        return self.ret

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        # NOTE: ties share the gradient equally, as in PyTorch's amax
        is_max = self.x.const(1, dtype=grad.dtype).e(
            BinaryOps.SUB, _lt_as(self.x, self.ret.expand(self.x.shape), grad.dtype)
        )
        count = is_max.r(ReduceOps.SUM, grad.shape).expand(self.x.shape)
        return is_max.e(BinaryOps.DIV, count).e(BinaryOps.MUL, grad.expand(self.x.shape))


# *** movement ***


class Expand(Function):
    def forward(self, x: LazyBuffer, shape: tuple[sint, ...]) -> LazyBuffer:
        self.input_shape = x.shape
        return x.expand(shape)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.r(ReduceOps.SUM, self.input_shape)


class Reshape(Function):
    def forward(self, x: LazyBuffer, shape: tuple[sint, ...]) -> LazyBuffer:
        self.input_shape = x.shape
        return x.reshape(shape)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.reshape(self.input_shape)


class Permute(Function):
    def forward(self, x: LazyBuffer, order: tuple[int, ...]) -> LazyBuffer:
        self.order = order
        return x.permute(order)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.permute(tuple(argsort(self.order)))


class Pad(Function):
    def forward(self, x: LazyBuffer, arg: tuple[tuple[int, int], ...]) -> LazyBuffer:
        self.narg = tuple((p[0], s + p[0]) for s, p in zip(x.shape, arg))
        return x.pad(arg)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.shrink(self.narg)


class Shrink(Function):
    def forward(self, x: LazyBuffer, arg: tuple[tuple[sint, sint], ...]) -> LazyBuffer:
        self.narg = tuple((b, s - e) for s, (b, e) in zip(x.shape, arg))
        return x.shrink(arg)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.pad(self.narg)


class Flip(Function):
    def forward(self, x: LazyBuffer, axis: tuple[int, ...]) -> LazyBuffer:
        self.arg = tuple(-1 if i in axis else 1 for i in range(len(x.shape)))
        return x.stride(self.arg)

    def backward(self, grad: LazyBuffer) -> LazyBuffer:
        return grad.stride(self.arg)
