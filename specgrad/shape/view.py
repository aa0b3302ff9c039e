"""View: one strided, optionally masked window onto a flat buffer, its movement ops and index expressions.

Imports only the standard library, specgrad.helpers and specgrad.shape.symbolic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specgrad.helpers import InvalidArgument, all_int, ceildiv, flatten, prod
from specgrad.shape.symbolic import AndNode, LtNode, MulNode, Node, NumNode, SumNode, Variable, sint, sym_and, sym_sum

Mask = tuple[tuple[sint, sint], ...]


def _canon(x: sint) -> sint:
    return x.b if isinstance(x, NumNode) else x


def _vmax(x: sint) -> int:
    return x.max if isinstance(x, Node) else x


def _is_true(x: object) -> bool:
    """True only when a comparison is known to hold (symbolic comparisons may return an undecided Node)."""
    return x is True


def _smax(a: sint, b: sint) -> sint:
    if _is_true(a >= b):
        return a
    if _is_true(b >= a):
        return b
    raise NotImplementedError(f"cannot decide max({a}, {b}) symbolically")


def _smin(a: sint, b: sint) -> sint:
    if _is_true(a <= b):
        return a
    if _is_true(b <= a):
        return b
    raise NotImplementedError(f"cannot decide min({a}, {b}) symbolically")


def strides_for_shape(shape: Sequence[sint]) -> tuple[sint, ...]:
    """C-contiguous strides, with 0 for size-1 dims."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(0 if d == 1 else acc)
        acc = acc * d
    return tuple(reversed(strides))


def filter_strides(shape: Sequence[sint], strides: Sequence[sint]) -> tuple[sint, ...]:
    return tuple(0 if s == 1 else st for s, st in zip(shape, strides, strict=True))


def index_vars(shape: Sequence[sint], prefix: str = "idx") -> list[Node]:
    """One index Variable per dim over [0, dim-1] (a NumNode(0) for size-1 dims)."""
    return [Variable(f"{prefix}{i}", 0, max(_vmax(s) - 1, 0)) for i, s in enumerate(shape)]


@dataclass(frozen=True)
class View:
    """Element i of the view lives at offset + sum(i_d * strides[d]) when every i_d lies in mask[d]."""

    shape: tuple[sint, ...]
    strides: tuple[sint, ...]
    offset: sint
    mask: Mask | None
    contiguous: bool

    @staticmethod
    def create(shape: Sequence[sint], strides=None, offset: sint = 0, mask=None) -> View:
        """The canonical View: default strides, 0 strides on size-1 dims, no all-covering mask."""
        shape = tuple(map(_canon, shape))
        if (strides is not None and len(strides) != len(shape)) or (mask is not None and len(mask) != len(shape)):
            raise InvalidArgument(f"View of shape {shape} needs one stride and mask entry per dim: {strides}, {mask}")
        strides = strides_for_shape(shape) if strides is None else filter_strides(shape, tuple(map(_canon, strides)))
        offset = _canon(offset)
        if mask is not None:
            mask = tuple((_canon(lo), _canon(hi)) for lo, hi in mask)
            if any(_is_true(lo >= hi) for lo, hi in mask):
                return View(shape, (0,) * len(shape), 0, ((0, 0),) * len(shape), False)
            if all(lo == 0 and hi == s for (lo, hi), s in zip(mask, shape, strict=True)):
                mask = None
        contiguous = offset == 0 and mask is None and strides == strides_for_shape(shape)
        return View(shape, strides, offset, mask, contiguous)

    @property
    def is_all_invalid(self) -> bool:
        return self.mask is not None and any(_is_true(lo >= hi) for lo, hi in self.mask)

    def full_mask(self) -> Mask:
        return self.mask if self.mask is not None else tuple((0, s) for s in self.shape)

    def vars(self) -> set[Variable]:
        items = self.shape + self.strides + (self.offset,) + tuple(flatten(self.mask or ()))
        return set().union(*(x.vars() for x in items if isinstance(x, Node)))

    def substitute(self, var_vals: dict) -> View:
        def sub(x: sint) -> sint:
            return _canon(x.substitute(var_vals)) if isinstance(x, Node) else x

        mask = None if self.mask is None else tuple((sub(lo), sub(hi)) for lo, hi in self.mask)
        return View.create(tuple(map(sub, self.shape)), tuple(map(sub, self.strides)), sub(self.offset), mask)

    def unbind(self) -> tuple[View, dict[Variable, int]]:
        """This view with bound Variables replaced by unbound ones, and their values."""
        bound = [v for v in self.vars() if v.val is not None]
        return self.substitute({v: v.unbound for v in bound}), dict(v.unbind() for v in bound)

    # movement ops (arguments are validated by ShapeTracker)

    def permute(self, axis: Sequence[int]) -> View:
        mask = None if self.mask is None else tuple(self.mask[a] for a in axis)
        return View.create(tuple(self.shape[a] for a in axis), tuple(self.strides[a] for a in axis), self.offset, mask)

    def expand(self, new_shape: Sequence[sint]) -> View:
        strides = tuple(st if s == ns else 0 for s, ns, st in zip(self.shape, new_shape, self.strides, strict=True))
        mask = None
        if self.mask is not None:
            mask = tuple(
                m if s == ns or m == (0, 0) else (0, ns)
                for m, s, ns in zip(self.mask, self.shape, new_shape, strict=True)
            )
        return View.create(new_shape, strides, self.offset, mask)

    def pad(self, arg: Sequence[tuple[sint, sint]]) -> View:
        if all(b == 0 and a == 0 for b, a in arg):
            return self
        shape = tuple(s + b + a for s, (b, a) in zip(self.shape, arg, strict=True))
        offset = self.offset - sum(b * st for (b, _), st in zip(arg, self.strides, strict=True))
        mask = tuple((lo + b, hi + b) for (lo, hi), (b, _) in zip(self.full_mask(), arg, strict=True))
        return View.create(shape, self.strides, offset, mask)

    def shrink(self, arg: Sequence[tuple[sint, sint]]) -> View:
        offset = self.offset + sum(b * st for (b, _), st in zip(arg, self.strides, strict=True))
        mask = None
        if self.mask is not None:
            mask = tuple((_smax(lo, b) - b, _smin(hi, e) - b) for (lo, hi), (b, e) in zip(self.mask, arg, strict=True))
        return View.create(tuple(e - b for b, e in arg), self.strides, offset, mask)

    def flip(self, axes: Sequence[int]) -> View:
        if not axes:
            return self
        offset = self.offset + sum((self.shape[i] - 1) * self.strides[i] for i in axes)
        strides = tuple(-st if i in axes else st for i, st in enumerate(self.strides))
        mask = self.mask
        if mask is not None:
            mask = tuple(
                (s - hi, s - lo) if i in axes else (lo, hi)
                for i, ((lo, hi), s) in enumerate(zip(mask, self.shape, strict=True))
            )
        return View.create(self.shape, strides, offset, mask)

    def stride(self, mul: Sequence[int]) -> View:
        """Every mul[d]-th element along d; a negative mul walks the flipped axis."""
        v = self.flip(tuple(i for i, m in enumerate(mul) if m < 0))
        mul = tuple(abs(m) for m in mul)
        if all(m == 1 for m in mul):
            return v
        shape = tuple(ceildiv(s, m) for s, m in zip(v.shape, mul, strict=True))
        strides = tuple(st * m for st, m in zip(v.strides, mul, strict=True))
        mask = tuple((ceildiv(lo, m), ceildiv(hi, m)) for (lo, hi), m in zip(v.full_mask(), mul, strict=True))
        return View.create(shape, strides, v.offset, mask if v.mask is not None else None)

    def reshape(self, new_shape: Sequence[sint]) -> View | None:
        """The same elements in row-major order under new_shape, or None when one View cannot express it."""
        new_shape = tuple(map(_canon, new_shape))
        if self.shape == new_shape:
            return self
        if all_int(self.shape + new_shape) and prod(self.shape) != prod(new_shape):
            raise InvalidArgument(f"cannot reshape {self.shape} to {new_shape}: sizes differ")
        if 0 in self.shape or self.contiguous:
            return View.create(new_shape)
        if self.is_all_invalid:
            return View.create(new_shape, mask=((0, 0),) * len(new_shape)) if new_shape else None
        if not all_int(self.shape + new_shape):
            return self._reshape_ones(new_shape)
        return _reshape_int(self, new_shape)

    def _reshape_ones(self, new_shape: tuple[sint, ...]) -> View | None:
        """Reshape that only adds or removes size-1 dims (works for symbolic shapes)."""
        kept = [(s, st, m) for s, st, m in zip(self.shape, self.strides, self.full_mask(), strict=True) if s != 1]
        if [s for s, _, _ in kept] != [s for s in new_shape if s != 1]:
            return None
        return _with_ones(self, new_shape, [(st, m) for _, st, m in kept], self.offset)

    def minify(self) -> View:
        """Merge adjacent dims wherever the result is still one View."""
        v, i = self, 0
        while i < len(v.shape) - 1:
            merged = v.reshape(v.shape[:i] + (v.shape[i] * v.shape[i + 1],) + v.shape[i + 2 :])
            if merged is None:
                i += 1
            else:
                v = merged
        return v

    # index expressions

    def expr_idxs(self, idxs: Sequence[sint]) -> tuple[Node, Node]:
        """(buffer index, validity) for one index node per dim."""
        idx = sym_sum([self.offset] + [i * st for i, st in zip(idxs, self.strides, strict=True) if st != 0])
        if self.mask is None:
            return idx, NumNode(1)
        return idx, sym_and(_bounds_conds(idxs, self.mask))

    def expr_node(self, idx: Node, valid: sint = 1) -> tuple[Node, Node]:
        """(buffer index, validity) for a flat row-major index into this view's shape."""
        v = self.minify()
        if v.is_all_invalid:
            return NumNode(0), NumNode(0)
        ret, coords, acc = [v.offset], [], 1
        for i in reversed(range(len(v.shape))):
            d, st = v.shape[i], v.strides[i]
            if d != 1 and (st != 0 or v.mask is not None):
                c = idx // acc if i == 0 else (idx // acc) % d
                ret.append(c * st)
                coords.append((c, v.full_mask()[i]))
            acc = acc * d
        conds = _bounds_conds([c for c, _ in coords], [m for _, m in coords]) if v.mask is not None else []
        return sym_sum(ret), sym_and([valid] + conds)


def _bounds_conds(idxs: Sequence[sint], mask: Sequence[tuple[sint, sint]]) -> list[Node]:
    nodes = [i if isinstance(i, Node) else NumNode(i) for i in idxs]
    return flatten([i.ge(lo), i.lt(hi)] for i, (lo, hi) in zip(nodes, mask, strict=True))


# reshape of a view with int shapes: match dims into blocks of equal size, merge each block, split it again


def _reshape_int(v: View, new_shape: tuple[int, ...]) -> View | None:
    old = [(s, st, m) for s, st, m in zip(v.shape, v.strides, v.full_mask(), strict=True) if s != 1]
    new = [s for s in new_shape if s != 1]
    offset, out = v.offset, []
    for (oi, oj), (ni, nj) in _match_blocks([s for s, _, _ in old], new):
        merged = _merge_block(old[oi:oj])
        if merged is None:
            return None
        st, rng, delta = merged
        split = _split_block(st, rng, new[ni:nj])
        if split is None:
            return None
        offset, out = offset + delta, out + split
    return _with_ones(v, new_shape, out, offset)


def _with_ones(v: View, new_shape: tuple[sint, ...], dims: list, offset: sint) -> View:
    """A View of new_shape from (stride, mask range) for its dims > 1; size-1 dims get stride 0."""
    it = iter(dims)
    full = [(0, (0, 1)) if s == 1 else next(it) for s in new_shape]
    mask = None if v.mask is None else tuple(m for _, m in full)
    return View.create(new_shape, tuple(st for st, _ in full), offset, mask)


def _match_blocks(old: list[int], new: list[int]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Smallest runs of old and new dims (all > 1) with equal products."""
    blocks, i, j = [], 0, 0
    while i < len(old):
        oi, ni, po, pn = i, j, old[i], new[j]
        i, j = i + 1, j + 1
        while po != pn:
            if po < pn:
                po, i = po * old[i], i + 1
            else:
                pn, j = pn * new[j], j + 1
        blocks.append(((oi, i), (ni, j)))
    return blocks


def _merge_block(dims: list[tuple[int, int, tuple[int, int]]]) -> tuple[int, tuple[int, int], int] | None:
    """Merge dims (outer first) into one: (stride, mask range, offset delta), or None."""
    _, st, (lo, hi) = dims[0]
    delta = 0
    for s, s_st, (lo2, hi2) in dims[1:]:
        single = hi - lo == 1
        if st != s_st * s:
            if not single:
                return None
            # NOTE: only index `lo` of the outer dim is valid, so its stride matters only through the offset
            delta += lo * (st - s_st * s)
        if (lo2, hi2) == (0, s):
            lo, hi = lo * s, hi * s
        elif single:
            lo, hi = lo * s + lo2, lo * s + hi2
        else:
            return None
        st = s_st
    return st, (lo, hi), delta


def _split_block(st: int, rng: tuple[int, int], dims: list[int]) -> list | None:
    """Split one dim with a valid range into dims: [(stride, mask range)], or None when the range does not split."""
    lo, hi = rng
    out = []
    for i in range(len(dims)):
        inner = prod(dims[i + 1 :])
        if lo // inner == (hi - 1) // inner:
            out.append((st * inner, (lo // inner, lo // inner + 1)))
            lo, hi = lo % inner, (hi - 1) % inner + 1
        elif lo % inner == 0 and hi % inner == 0:
            out.append((st * inner, (lo // inner, hi // inner)))
            lo, hi = 0, inner
        else:
            return None
    return out


# merging two stacked views into one


def merge_views(inner: View, outer: View) -> View | None:
    """One View equal to `outer` indexing the row-major elements of `inner`, or None when none is exact."""
    same_size = prod(inner.shape) == prod(outer.shape)
    if outer.contiguous and same_size and (v := inner.reshape(outer.shape)) is not None:
        return v
    if inner.contiguous:
        return outer
    if not all_int(outer.shape + inner.shape) or 0 in outer.shape:
        return None
    idxs = index_vars(outer.shape, "midx")
    idx, valid = inner.expr_node(*outer.expr_idxs(idxs))
    return view_from_exprs(outer.shape, idxs, idx, valid)


def view_from_exprs(shape: tuple[int, ...], idxs: list[Node], idx: Node, valid: Node) -> View | None:
    """The View whose expressions for idxs are exactly (idx, valid), or None when they are not of that form."""
    pos = {v: i for i, v in enumerate(idxs) if isinstance(v, Variable)}
    strides, offset = [0] * len(shape), []
    for t in idx.nodes if isinstance(idx, SumNode) else [idx]:
        if not t.vars() & pos.keys():
            offset.append(t)
        elif (linear := _linear_term(t, pos)) is not None:
            strides[pos[linear[0]]] += linear[1]
        else:
            return None
    mask = _mask_from_valid(shape, pos, valid)
    if mask is None:
        return None
    return View.create(shape, strides, sym_sum(offset), mask)


def _linear_term(t: Node, pos: dict[Node, int]) -> tuple[Node, sint] | None:
    """(index variable, stride) when t is idx or idx*stride with a stride free of index variables."""
    if t in pos:
        return t, 1
    if not isinstance(t, MulNode):
        return None
    for x, f in ((t.a, t.b), (t.b, t.a)):
        if x in pos and not (isinstance(f, Node) and f.vars() & pos.keys()):
            return x, f
    return None


def _mask_from_valid(shape: tuple[int, ...], pos: dict[Node, int], valid: Node) -> Mask | None:
    """Per-dim ranges from an and of `idx < c` / `c < idx` bounds, or None."""
    ranges = [[0, s] for s in shape]
    if valid == 0:
        return tuple((0, 0) for _ in shape) if shape else None
    for c in valid.nodes if isinstance(valid, AndNode) else [valid]:
        if c == 1:
            continue
        if isinstance(c, LtNode) and c.a in pos and isinstance(c.b, int):
            ranges[pos[c.a]][1] = min(ranges[pos[c.a]][1], c.b)
        elif isinstance(c, LtNode) and isinstance(c.a, NumNode) and c.b in pos:
            ranges[pos[c.b]][0] = max(ranges[pos[c.b]][0], c.a.b + 1)
        else:
            return None
    return tuple((lo, hi) for lo, hi in ranges)
