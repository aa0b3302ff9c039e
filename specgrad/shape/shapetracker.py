"""ShapeTracker: a stack of Views mapping a logical shape onto a flat buffer, with checked movement ops.

Imports only the standard library, specgrad.helpers and specgrad.shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specgrad.helpers import InvalidArgument, all_int, merge_dicts, prod
from specgrad.shape.symbolic import MulNode, Node, NumNode, SumNode, Variable, sint, sym_infer
from specgrad.shape.view import View, index_vars, merge_views


def _possible(cond: object) -> bool:
    """False only when a comparison is known to fail; undecided symbolic comparisons pass."""
    return cond is not False


def _check(ok: bool, op: str, arg: object, shape: tuple) -> None:
    if not ok:
        raise InvalidArgument(f"invalid {op} {arg} for shape {shape}")


def _same_size(a: sint, b: sint) -> bool:
    """Equal sizes; a symbolic size counts as its bound value (reshape (3, 4) to (3, i) with i bound to 4)."""
    if a == b:
        return True
    try:
        return sym_infer(a, {}) == sym_infer(b, {})
    except KeyError:  # NOTE: an unbound Variable: the sizes are not known to be equal
        return False


def _vmax(x: sint) -> int:
    return x.max if isinstance(x, Node) else x


@dataclass(frozen=True)
class ShapeTracker:
    """views[-1] is the outermost view (it gives the shape); each earlier view reads the flat index of the next."""

    views: tuple[View, ...]

    @staticmethod
    def from_shape(shape: Sequence[sint]) -> ShapeTracker:
        return ShapeTracker((View.create(tuple(shape)),))

    @property
    def shape(self) -> tuple[sint, ...]:
        return self.views[-1].shape

    @property
    def contiguous(self) -> bool:
        return len(self.views) == 1 and self.views[0].contiguous

    def size(self) -> sint:
        return prod(self.shape)

    def real_size(self) -> int:
        """1 + the largest buffer index a valid element can reach (exact for one view, an upper bound otherwise)."""
        v = self.views[0]
        if 0 in self.shape or 0 in v.shape or v.is_all_invalid:
            return 0
        ret = _vmax(v.offset)
        for st, (lo, hi) in zip(v.strides, v.full_mask(), strict=True):
            ret += max(_vmax(st * lo), _vmax(st * (hi - 1)))
        return ret + 1

    def vars(self) -> set[Variable]:
        return set().union(*(v.vars() for v in self.views))

    @property
    def var_vals(self) -> dict[Variable, int]:
        """Unbound Variable -> value for every bound Variable in the views."""
        return dict(v.unbind() for v in self.vars() if v.val is not None)

    def unbind(self) -> tuple[ShapeTracker, dict[Variable, int]]:
        views, var_vals = zip(*(v.unbind() for v in self.views), strict=True)
        return ShapeTracker(tuple(views)), merge_dicts(var_vals)

    def __add__(self, st: ShapeTracker) -> ShapeTracker:
        """st applied on top of self: st's first view indexes a contiguous buffer of self.shape."""
        if all_int(self.shape) and st.real_size() > prod(self.shape):
            raise InvalidArgument(f"cannot stack {st} on shape {self.shape}: it reads {st.real_size()} elements")
        ret = self
        for v in st.views:
            ret = ShapeTracker(ret.views + (v,)).simplify()
        return ret

    def simplify(self) -> ShapeTracker:
        """Merge the last two views into one while that is exact."""
        views = self.views
        while len(views) >= 2 and (merged := merge_views(views[-2], views[-1])) is not None:
            views = views[:-2] + (merged,)
        return ShapeTracker(views)

    # index expressions

    def expr_idxs(self, idxs: Sequence[sint] | None = None) -> tuple[Node, Node]:
        """(buffer index, validity) for one index per dim; default Variables idx0, idx1, ... over each dim."""
        idxs = index_vars(self.shape) if idxs is None else list(idxs)
        return self._through_views(*self.views[-1].expr_idxs(idxs))

    def expr_node(self, idx: Node | None = None) -> tuple[Node, Node]:
        """(buffer index, validity) for one flat row-major index; default Variable idx over the size."""
        idx = Variable("idx", 0, max(_vmax(self.size()) - 1, 0)) if idx is None else idx
        return self._through_views(*self.views[-1].expr_node(idx))

    def _through_views(self, idx: Node, valid: Node) -> tuple[Node, Node]:
        for v in reversed(self.views[:-1]):
            if valid == 0:
                break
            idx, valid = v.expr_node(idx, valid)
        return (NumNode(0), valid) if valid == 0 else (idx, valid)

    def real_strides(self, ignore_valid: bool = False) -> tuple[sint | None, ...]:
        """Per-axis buffer stride, None where moving along the axis is not one fixed step (or changes validity)."""
        if len(self.views) == 1 and (self.views[0].mask is None or ignore_valid):
            return self.views[0].strides
        idxs = index_vars(self.shape)
        idx, valid = self.expr_idxs(idxs)
        terms = idx.nodes if isinstance(idx, SumNode) else (idx,)
        return tuple(_axis_stride(v, terms, valid, ignore_valid) for v in idxs)

    def unit_stride_axes(self, ignore_valid: bool = False) -> list[int]:
        return [i for i, st in enumerate(self.real_strides(ignore_valid)) if st == 1]

    # movement ops

    def reshape(self, new_shape: Sequence[sint]) -> ShapeTracker:
        new_shape = tuple(new_shape)
        ok = all(isinstance(s, (int, Node)) and _possible(s >= 0) for s in new_shape)
        _check(ok and _same_size(prod(new_shape), prod(self.shape)), "reshape", new_shape, self.shape)
        new_view = self.views[-1].reshape(new_shape)
        if new_view is None:
            return ShapeTracker(self.views + (View.create(new_shape),))
        return ShapeTracker(self.views[:-1] + (new_view,))

    def permute(self, order: Sequence[int]) -> ShapeTracker:
        order = tuple(order)
        _check(sorted(order) == list(range(len(self.shape))), "permute", order, self.shape)
        return self._replace_last(self.views[-1].permute(order))

    def expand(self, new_shape: Sequence[sint]) -> ShapeTracker:
        new_shape = tuple(new_shape)
        ok = len(new_shape) == len(self.shape) and all(
            (s == ns or s == 1) and _possible(ns >= 0) for s, ns in zip(self.shape, new_shape, strict=True)
        )
        _check(ok, "expand", new_shape, self.shape)
        return self._replace_last(self.views[-1].expand(new_shape))

    def pad(self, arg: Sequence[tuple[sint, sint]]) -> ShapeTracker:
        arg = tuple(tuple(p) for p in arg)
        ok = len(arg) == len(self.shape) and all(
            len(p) == 2 and _possible(p[0] >= 0) and _possible(p[1] >= 0) for p in arg
        )
        _check(ok, "pad", arg, self.shape)
        return self._replace_last(self.views[-1].pad(arg))

    def shrink(self, arg: Sequence[tuple[sint, sint]]) -> ShapeTracker:
        arg = tuple(tuple(p) for p in arg)
        ok = len(arg) == len(self.shape) and all(
            len(p) == 2 and _possible(p[0] >= 0) and _possible(p[0] <= p[1]) and _possible(p[1] <= s)
            for p, s in zip(arg, self.shape, strict=True)
        )
        _check(ok, "shrink", arg, self.shape)
        return self._replace_last(self.views[-1].shrink(arg))

    def stride(self, mul: Sequence[int]) -> ShapeTracker:
        mul = tuple(mul)
        ok = len(mul) == len(self.shape) and all(isinstance(m, int) and m != 0 for m in mul)
        _check(ok, "stride", mul, self.shape)
        return self._replace_last(self.views[-1].stride(mul))

    def _replace_last(self, view: View) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (view,))


def _axis_stride(v: Node, terms: Sequence[Node], valid: Node, ignore_valid: bool) -> sint | None:
    """The stride of index variable v in a sum of terms, 0 if absent, None if not a single linear term."""
    if not isinstance(v, Variable):
        return 0
    if not ignore_valid and v in valid.vars():
        return None
    using = [t for t in terms if v in t.vars()]
    if not using:
        return 0
    if len(using) > 1:
        return None
    t = using[0]
    if t == v:
        return 1
    if isinstance(t, MulNode) and t.a == v and v not in _vars_of(t.b):
        return t.b
    if isinstance(t, MulNode) and t.b == v and v not in t.a.vars():
        return t.a
    return None


def _vars_of(x: sint) -> set[Variable]:
    return x.vars() if isinstance(x, Node) else set()
