"""Symbolic integers: bounded expressions over Variables, simplified as they are built.

Imports only the standard library and specgrad.helpers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Union

from specgrad.helpers import ceildiv, dedup, partition

sint = Union[int, "Node"]
RenderOps = dict[type, Callable[..., str]]


class Node:
    """A symbolic integer with inclusive bounds `min` and `max`; never mutated after creation."""

    min: int
    max: int

    def render(self, ops: RenderOps | None = None, ctx: Any = None) -> str:
        """Render with `ops` ({NodeClass: fn(node, ops, ctx)}), falling back to the default table per class."""
        if ops is None and ctx == "DEBUG":
            return self.key
        fn = (ops or {}).get(type(self)) or RENDER_OPS[type(self)]
        return fn(self, ops, ctx)

    @functools.cached_property
    def key(self) -> str:
        """The debug rendering (Variables with bounds and values): the identity used by ==, hash and sorting."""
        return RENDER_OPS[type(self)](self, None, "DEBUG")

    def __repr__(self) -> str:
        return f"<{self.key}>"

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Node):
            return self.key == other.key
        if isinstance(other, int):
            return isinstance(self, NumNode) and self.b == other
        return NotImplemented

    def __bool__(self) -> bool:
        if self.min == self.max == 0:
            return False
        if self.min > 0 or self.max < 0:
            return True
        raise TypeError(f"truth value of {self.render()} depends on its variables; use lt/ge or compare bounds")

    def children(self) -> tuple[Node, ...]:
        return ()

    def vars(self) -> set[Variable]:
        return set().union(*(c.vars() for c in self.children()))

    def substitute(self, var_vals: dict[Variable, sint]) -> Node:
        """Replace Variables by nodes or ints (looked up bound or unbound) and re-simplify."""
        return self

    # arithmetic
    def __neg__(self) -> Node:
        return self * -1

    def __add__(self, b: sint) -> Node:
        return sym_sum([self, b])

    def __radd__(self, b: int) -> Node:
        return sym_sum([b, self])

    def __sub__(self, b: sint) -> Node:
        return sym_sum([self, -b])

    def __rsub__(self, b: int) -> Node:
        return sym_sum([b, -self])

    def __mul__(self, b: sint) -> Node:
        b = _unwrap(b)
        if isinstance(b, Node):
            return b * self.b if isinstance(self, NumNode) else _mul_nodes(self, b)
        if b == 0:
            return NumNode(0)
        return self if b == 1 else self._mul(b)

    def __rmul__(self, b: int) -> Node:
        return self * b

    def __floordiv__(self, b: sint) -> Node:
        b = _unwrap(b)
        if isinstance(b, Node):
            return self._div_node(b)
        _check_divisor(self, "//", b)
        return self if b == 1 else self._floordiv(b)

    def __rfloordiv__(self, b: int) -> Node:
        return NumNode(b) // self

    def __mod__(self, b: sint) -> Node:
        b = _unwrap(b)
        if isinstance(b, Node):
            return self._mod_node(b)
        _check_divisor(self, "%", b)
        if b == 1:
            return NumNode(0)
        if self.min // b == self.max // b:
            k = self.min // b
            return self if k == 0 else self - k * b
        return self._mod(b)

    def __rmod__(self, b: int) -> Node:
        return NumNode(b) % self

    # per-class hooks for int arguments (b is never 0 or 1 here; divisors are > 1)
    def _mul(self, b: int) -> Node:
        return create_node(MulNode(self, b))

    def _floordiv(self, b: int) -> Node:
        return create_node(DivNode(self, b))

    def _mod(self, b: int) -> Node:
        return create_node(ModNode(self, b))

    def _div_node(self, b: Node) -> Node:
        if self == b:
            return NumNode(1)
        if isinstance(self, MulNode) and (self.b == b or self.a == b):
            return self.a if self.b == b else _as_node(self.b)
        if self.min >= 0 and b.min > 0 and self.max < b.min:
            return NumNode(0)
        raise NotImplementedError(f"symbolic division {self.render()} // {b.render()} is not supported")

    def _mod_node(self, b: Node) -> Node:
        if self == b or (isinstance(self, MulNode) and (self.b == b or self.a == b)):
            return NumNode(0)
        if self.min >= 0 and b.min > 0 and self.max < b.min:
            return self
        raise NotImplementedError(f"symbolic modulo {self.render()} % {b.render()} is not supported")

    # comparisons: methods build nodes, operators return bool when the answer is known
    def lt(self, b: sint) -> Node:
        return sym_lt(self, b)

    def ge(self, b: sint) -> Node:
        return sym_lt(b - 1, self)

    def gt(self, b: sint) -> Node:
        return sym_lt(b, self)

    def le(self, b: sint) -> Node:
        return sym_lt(self, b + 1)

    def __lt__(self, b: sint) -> bool | Node:
        return _decided(self.lt(b))

    def __ge__(self, b: sint) -> bool | Node:
        return _decided(self.ge(b))

    def __gt__(self, b: sint) -> bool | Node:
        return _decided(self.gt(b))

    def __le__(self, b: sint) -> bool | Node:
        return _decided(self.le(b))


class _OpNode(Node):
    """A node whose bounds are computed once, by the subclass's _compute_bounds, from its operands."""

    @functools.cached_property
    def _bounds(self) -> tuple[int, int]:
        return self._compute_bounds()  # type: ignore[attr-defined]

    min = property(lambda self: self._bounds[0])
    max = property(lambda self: self._bounds[1])


@dataclass(frozen=True, eq=False, repr=False)
class NumNode(Node):
    b: int

    def __post_init__(self):
        if not isinstance(self.b, int):
            raise TypeError(f"NumNode needs an int, got {self.b!r}")

    min = property(lambda self: self.b)
    max = property(lambda self: self.b)

    def __hash__(self) -> int:
        return hash(self.b)

    def _mul(self, b: int) -> Node:
        return NumNode(self.b * b)

    def _floordiv(self, b: int) -> Node:
        return NumNode(self.b // b)

    def _mod(self, b: int) -> Node:
        return NumNode(self.b % b)


@dataclass(frozen=True, eq=False, repr=False)
class Variable(Node):
    """A named integer in [min, max]; `bind(val)` attaches a runtime value, `unbind()` takes it off again."""

    expr: str
    min: int
    max: int
    val: int | None = None

    def __new__(cls, expr: str | None = None, min: int | None = None, max: int | None = None, val=None):
        if min is not None and min == max and isinstance(min, int):
            return NumNode(min)
        return super().__new__(cls)

    def __post_init__(self):
        if not (isinstance(self.expr, str) and isinstance(self.min, int) and isinstance(self.max, int)):
            raise TypeError(f"Variable needs a name and int bounds, got {self.expr!r}, {self.min!r}, {self.max!r}")
        if self.min > self.max:
            raise ValueError(f"Variable {self.expr} has empty range [{self.min}, {self.max}]")
        if self.val is not None and not self.min <= self.val <= self.max:
            raise ValueError(f"value {self.val} out of range [{self.min}, {self.max}] for {self.expr}")

    def bind(self, val: int) -> Variable:
        if self.val is not None:
            raise ValueError(f"Variable {self.expr} is already bound to {self.val}")
        return replace(self, val=val)

    def unbind(self) -> tuple[Variable, int]:
        if self.val is None:
            raise ValueError(f"Variable {self.expr} is not bound")
        return replace(self, val=None), self.val

    @property
    def unbound(self) -> Variable:
        return self if self.val is None else replace(self, val=None)

    def vars(self) -> set[Variable]:
        return {self}

    def substitute(self, var_vals: dict[Variable, sint]) -> Node:
        for k in (self, self.unbound):
            if k in var_vals:
                return _as_node(var_vals[k])
        return self


@dataclass(frozen=True, eq=False, repr=False)
class MulNode(_OpNode):
    a: Node
    b: sint

    def _compute_bounds(self) -> tuple[int, int]:
        if isinstance(self.b, int):
            lo, hi = self.a.min * self.b, self.a.max * self.b
            return (lo, hi) if self.b >= 0 else (hi, lo)
        corners = [x * y for x in (self.a.min, self.a.max) for y in (self.b.min, self.b.max)]
        return min(corners), max(corners)

    def children(self) -> tuple[Node, ...]:
        return (self.a, self.b) if isinstance(self.b, Node) else (self.a,)

    def substitute(self, var_vals: dict[Variable, sint]) -> Node:
        return self.a.substitute(var_vals) * _substitute(self.b, var_vals)

    def _mul(self, b: int) -> Node:
        return self.a * (self.b * b) if isinstance(self.b, int) else super()._mul(b)

    def _floordiv(self, b: int) -> Node:
        if isinstance(self.b, int) and self.b % b == 0:
            return self.a * (self.b // b)
        if isinstance(self.b, int) and self.b > 0 and b % self.b == 0:
            return self.a // (b // self.b)
        return super()._floordiv(b)

    def _mod(self, b: int) -> Node:
        if isinstance(self.b, int):
            if self.b % b == 0:
                return NumNode(0)
            if not -b < self.b < b:
                return (self.a * (self.b % b)) % b
            if self.b > 0 and b % self.b == 0:
                return (self.a % (b // self.b)) * self.b
        return super()._mod(b)


@dataclass(frozen=True, eq=False, repr=False)
class DivNode(_OpNode):
    """Floor division by a positive int, like Python's //."""

    a: Node
    b: int

    def _compute_bounds(self) -> tuple[int, int]:
        return self.a.min // self.b, self.a.max // self.b

    def children(self) -> tuple[Node, ...]:
        return (self.a,)

    def substitute(self, var_vals: dict[Variable, sint]) -> Node:
        return self.a.substitute(var_vals) // self.b

    def _floordiv(self, b: int) -> Node:
        return self.a // (self.b * b)


@dataclass(frozen=True, eq=False, repr=False)
class ModNode(_OpNode):
    """Modulo by a positive int, like Python's % (result in [0, b-1])."""

    a: Node
    b: int

    def _compute_bounds(self) -> tuple[int, int]:
        if self.a.min // self.b == self.a.max // self.b:
            return self.a.min % self.b, self.a.max % self.b
        return 0, self.b - 1

    def children(self) -> tuple[Node, ...]:
        return (self.a,)

    def substitute(self, var_vals: dict[Variable, sint]) -> Node:
        return self.a.substitute(var_vals) % self.b

    def _mod(self, b: int) -> Node:
        return self.a % b if self.b % b == 0 else super()._mod(b)


@dataclass(frozen=True, eq=False, repr=False)
class SumNode(_OpNode):
    """A sum of terms, built by sym_sum: flat, like terms combined, sorted by key, constant last."""

    nodes: tuple[Node, ...]

    def _compute_bounds(self) -> tuple[int, int]:
        return sum(n.min for n in self.nodes), sum(n.max for n in self.nodes)

    def children(self) -> tuple[Node, ...]:
        return self.nodes

    def substitute(self, var_vals: dict[Variable, sint]) -> Node:
        return sym_sum([n.substitute(var_vals) for n in self.nodes])

    def _mul(self, b: int) -> Node:
        return sym_sum([n * b for n in self.nodes])

    def _floordiv(self, b: int) -> Node:
        # NOTE: floor((k*b + r) / b) == k + floor(r / b) for any int k, so whole multiples come out exactly
        const, terms = _split_const(self.nodes)
        whole, rest = partition(terms, lambda t: _coef(t) % b == 0)
        if whole or not 0 <= const < b:
            return sym_sum([t // b for t in whole] + [const // b]) + sym_sum(rest + [NumNode(const % b)]) // b
        if (split := _gcd_split(self.nodes, b)) is not None:
            g, big, _ = split
            return sym_sum([t // g for t in big]) // (b // g)
        return create_node(DivNode(self, b))

    def _mod(self, b: int) -> Node:
        reduced = [_reduce_mod(t, b) for t in self.nodes]
        if any(r is not t for r, t in zip(reduced, self.nodes, strict=True)):
            return sym_sum(reduced) % b
        if (split := _gcd_split(self.nodes, b)) is not None:
            g, big, small = split
            return (sym_sum([t // g for t in big]) % (b // g)) * g + sym_sum(small)
        return create_node(ModNode(self, b))


@dataclass(frozen=True, eq=False, repr=False)
class LtNode(_OpNode):
    """1 when a < b else 0; built by sym_lt."""

    a: Node
    b: sint

    def _compute_bounds(self) -> tuple[int, int]:
        b = _as_node(self.b)
        if self.a.max < b.min:
            return 1, 1
        return (0, 0) if self.a.min >= b.max else (0, 1)

    def children(self) -> tuple[Node, ...]:
        return (self.a, self.b) if isinstance(self.b, Node) else (self.a,)

    def substitute(self, var_vals: dict[Variable, sint]) -> Node:
        return sym_lt(self.a.substitute(var_vals), _substitute(self.b, var_vals))


@dataclass(frozen=True, eq=False, repr=False)
class AndNode(_OpNode):
    """1 when every node is nonzero else 0; built by sym_and."""

    nodes: tuple[Node, ...]

    def _compute_bounds(self) -> tuple[int, int]:
        return min(n.min for n in self.nodes), min(n.max for n in self.nodes)

    def children(self) -> tuple[Node, ...]:
        return self.nodes

    def substitute(self, var_vals: dict[Variable, sint]) -> Node:
        return sym_and([n.substitute(var_vals) for n in self.nodes])


# construction helpers


def create_node(n: Node) -> Node:
    """Collapse a node whose bounds pin it to one value."""
    return NumNode(n.min) if n.min == n.max else n


def _as_node(x: sint) -> Node:
    return x if isinstance(x, Node) else NumNode(int(x))


def _unwrap(x: sint) -> sint:
    return x.b if isinstance(x, NumNode) else x


def _substitute(x: sint, var_vals: dict[Variable, sint]) -> sint:
    return x.substitute(var_vals) if isinstance(x, Node) else x


def _decided(n: Node) -> bool | Node:
    return bool(n.b) if isinstance(n, NumNode) else n


def _check_divisor(x: Node, op: str, b: Any) -> None:
    if not isinstance(b, int) or b <= 0:
        raise ValueError(f"symbolic {x.render()} {op} {b!r}: the divisor must be a positive int or a Node")


def _coef(t: Node) -> int:
    """The int coefficient of a sum term: a constant's value, a product's int factor, else 1."""
    if isinstance(t, NumNode):
        return t.b
    return t.b if isinstance(t, MulNode) and isinstance(t.b, int) else 1


def _factor(t: Node) -> tuple[Node, int]:
    """Split a non-constant term into (base, int coefficient)."""
    return (t.a, t.b) if isinstance(t, MulNode) and isinstance(t.b, int) else (t, 1)


def _split_const(nodes: Iterable[Node]) -> tuple[int, list[Node]]:
    consts, terms = partition(nodes, lambda t: isinstance(t, NumNode))
    return sum(c.b for c in consts), terms


def _reduce_mod(t: Node, b: int) -> Node:
    """A term congruent to t modulo b with its coefficient in (-b, b); t itself when already so."""
    f = _coef(t)
    if -b < f < b:
        return t
    return NumNode(t.b % b) if isinstance(t, NumNode) else _factor(t)[0] * (f % b)


def _gcd_split(nodes: tuple[Node, ...], b: int) -> tuple[int, list[Node], list[Node]] | None:
    """Find (g, big, small) with g > 1 dividing b and every big coefficient, and 0 <= sum(small) < g."""
    for g in sorted({math.gcd(_coef(t), b) for t in nodes}, reverse=True):
        big, small = partition(nodes, lambda t, g=g: _coef(t) % g == 0)
        s = sym_sum(small)
        if g > 1 and big and 0 <= s.min and s.max < g:
            return g, big, small
    return None


def _flat_terms(nodes: Iterable[sint]) -> Iterator[Node]:
    for n in map(_as_node, nodes):
        yield from (n.nodes if isinstance(n, SumNode) else (n,))


def _fold_divmod(coeffs: dict[Node, int]) -> bool:
    """Rewrite (x//m)*(c*m) + (x%m)*c into x*c in place; True when something changed."""
    for t, c in coeffs.items():
        d = DivNode(t.a, t.b) if isinstance(t, ModNode) else None
        if d is not None and c != 0 and coeffs.get(d, 0) == c * t.b:
            del coeffs[t], coeffs[d]
            coeffs[t.a] = coeffs.get(t.a, 0) + c
            return True
    return False


def sym_sum(nodes: Iterable[sint]) -> Node:
    """Sum of nodes and ints: flattened, like terms combined, sorted by key, constant last."""
    const, coeffs = 0, {}
    for t in _flat_terms(nodes):
        if isinstance(t, NumNode):
            const += t.b
        else:
            base, f = _factor(t)
            coeffs[base] = coeffs.get(base, 0) + f
    if _fold_divmod(coeffs):
        return sym_sum([base * f for base, f in coeffs.items()] + [const])
    terms = sorted((base * f for base, f in coeffs.items() if f != 0), key=lambda t: t.key)
    if const != 0 or not terms:
        terms.append(NumNode(const))
    return terms[0] if len(terms) == 1 else create_node(SumNode(tuple(terms)))


def _mul_nodes(a: Node, b: Node) -> Node:
    """Product of two non-constant nodes: sums distribute, int factors move outside."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, SumNode):
            return sym_sum([t * y for t in x.nodes])
        if isinstance(x, MulNode) and isinstance(x.b, int):
            return (x.a * y) * x.b
    a, b = sorted((a, b), key=lambda n: n.key)
    return create_node(MulNode(a, b))


def sym_lt(a: sint, b: sint) -> Node:
    """The node for a < b, simplified (bounds, constants moved across, common factors divided out)."""
    a, b = _as_node(a), _as_node(b)
    if a.max < b.min:
        return NumNode(1)
    if a.min >= b.max:
        return NumNode(0)
    if isinstance(b, NumNode):
        return _lt_const(a, b.b)
    if isinstance(a, NumNode):
        return _gt_const(b, a.b)
    return LtNode(a, b)


def _lt_const(a: Node, c: int) -> Node:
    """a < c for a non-constant a."""
    if isinstance(a, MulNode) and isinstance(a.b, int):
        return sym_lt(a.a, ceildiv(c, a.b)) if a.b > 0 else sym_lt(-c, a.a * -a.b)
    if isinstance(a, SumNode):
        const, terms = _split_const(a.nodes)
        if const != 0:
            return sym_lt(sym_sum(terms), c - const)
        g = math.gcd(*(_coef(t) for t in terms))
        if g > 1:
            return sym_lt(sym_sum([t // g for t in terms]), ceildiv(c, g))
    return LtNode(a, c)


def _gt_const(b: Node, c: int) -> Node:
    """c < b for a non-constant b."""
    if isinstance(b, MulNode) and isinstance(b.b, int):
        return sym_lt(c // b.b, b.a) if b.b > 0 else sym_lt(b.a * -b.b, -c)
    if isinstance(b, SumNode):
        const, terms = _split_const(b.nodes)
        if const != 0:
            return sym_lt(c - const, sym_sum(terms))
        g = math.gcd(*(_coef(t) for t in terms))
        if g > 1:
            return sym_lt(c // g, sym_sum([t // g for t in terms]))
    return LtNode(NumNode(c), b)


def sym_and(nodes: Iterable[sint]) -> Node:
    """Logical and of 0/1 nodes: flattened, known-true parts dropped, known-false collapses to 0."""
    flat = [m for n in map(_as_node, nodes) for m in (n.nodes if isinstance(n, AndNode) else (n,))]
    if any(n.min == n.max == 0 for n in flat):
        return NumNode(0)
    keep = dedup(n for n in flat if not (n.min > 0 or n.max < 0))
    if not keep:
        return NumNode(1)
    return keep[0] if len(keep) == 1 else AndNode(tuple(keep))


# rendering and evaluation: one entry per node class


def sym_render(x: sint, ops: RenderOps | None = None, ctx: Any = None) -> str:
    return x.render(ops, ctx) if isinstance(x, Node) else str(x)


def _render_var(n: Variable, ops: RenderOps | None, ctx: Any) -> str:
    if ctx != "DEBUG":
        return n.expr
    return f"{n.expr}[{n.min}-{n.max}{'' if n.val is None else f'={n.val}'}]"


def _render_binary(op: str) -> Callable[..., str]:
    return lambda n, ops, ctx: f"({n.a.render(ops, ctx)}{op}{sym_render(n.b, ops, ctx)})"


def _render_join(op: str) -> Callable[..., str]:
    return lambda n, ops, ctx: "(" + op.join(x.render(ops, ctx) for x in n.nodes) + ")"


RENDER_OPS: RenderOps = {
    NumNode: lambda n, ops, ctx: str(n.b),
    Variable: _render_var,
    MulNode: _render_binary("*"),
    DivNode: _render_binary("//"),
    ModNode: _render_binary("%"),
    LtNode: _render_binary("<"),
    SumNode: _render_join("+"),
    AndNode: _render_join("&&"),
}


def sym_infer(x: sint, var_vals: dict[Variable, int]) -> int:
    """Evaluate x with plain int arithmetic (independent of the simplifier); bound Variables use their value."""
    return x if isinstance(x, int) else _EVAL[type(x)](x, var_vals)


def _infer_var(v: Variable, var_vals: dict[Variable, int]) -> int:
    for k in (v, v.unbound):
        if k in var_vals:
            return sym_infer(var_vals[k], var_vals)
    if v.val is None:
        raise KeyError(f"no value for Variable {v.expr}")
    return v.val


_EVAL: dict[type, Callable[[Any, dict], int]] = {
    NumNode: lambda n, vv: n.b,
    Variable: _infer_var,
    MulNode: lambda n, vv: sym_infer(n.a, vv) * sym_infer(n.b, vv),
    DivNode: lambda n, vv: sym_infer(n.a, vv) // n.b,
    ModNode: lambda n, vv: sym_infer(n.a, vv) % n.b,
    LtNode: lambda n, vv: int(sym_infer(n.a, vv) < sym_infer(n.b, vv)),
    SumNode: lambda n, vv: sum(sym_infer(x, vv) for x in n.nodes),
    AndNode: lambda n, vv: int(all(sym_infer(x, vv) != 0 for x in n.nodes)),
}
