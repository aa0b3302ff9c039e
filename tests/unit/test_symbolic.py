"""Symbolic integers: notebook examples, each simplification, and brute-force checks against Python ints."""

import itertools
import random

import pytest

from specgrad.shape.symbolic import (
    AndNode,
    DivNode,
    LtNode,
    ModNode,
    MulNode,
    Node,
    NumNode,
    SumNode,
    Variable,
    sym_and,
    sym_infer,
    sym_render,
    sym_sum,
)

a = Variable("a", 0, 10)
b = Variable("b", 0, 10)
x = Variable("x", 0, 7)


def r(n) -> str:
    return sym_render(n)


# notebook examples


def test_notebook_bounds():
    assert ((a * 10).min, (a * 10).max) == (0, 100)
    assert ((a + b).min, (a + b).max) == (0, 20)


def test_notebook_mod_of_sum():
    assert ((a + b * 10) % 10).render() == "(a%10)"


def test_notebook_div_of_sum():
    expr = (a * 40 + b) // 20
    assert expr.render() == "(a*2)"
    assert (expr.min, expr.max) == (0, 20)


# simplifications


@pytest.mark.parametrize(
    "expr, want",
    [
        (lambda: a + a, "(a*2)"),
        (lambda: a + 3 + 4, "(a+7)"),
        (lambda: 3 + a + 4, "(a+7)"),
        (lambda: a - a, "0"),
        (lambda: a * 2 - a * 2 + b, "b"),
        (lambda: a * 0, "0"),
        (lambda: a * 1, "a"),
        (lambda: a // 1, "a"),
        (lambda: a % 1, "0"),
        (lambda: (a * 4) // 2, "(a*2)"),
        (lambda: (a * 4) % 2, "0"),
        (lambda: (a * 4) // 8, "(a//2)"),
        (lambda: (a * 4) % 8, "((a%2)*4)"),
        (lambda: (a * 12) % 8, "((a%2)*4)"),
        (lambda: x % 8, "x"),
        (lambda: x // 8, "0"),
        (lambda: (a // 2) // 3, "(a//6)"),
        (lambda: (a % 8) % 4, "(a%4)"),
        (lambda: (a * 2 + b * 4 + 8) % 2, "0"),
        (lambda: (a * 4 + 3) // 8, "(a//2)"),
        (lambda: (a * 4 + 3) % 8, "(((a%2)*4)+3)"),
        (lambda: (a + 25) // 10, "(((a+5)//10)+2)"),
        (lambda: (a // 4) * 4 + a % 4, "a"),
        (lambda: ((b + a) // 4) * 8 + ((a + b) % 4) * 2, "((a*2)+(b*2))"),
        (lambda: -a, "(a*-1)"),
        (lambda: a * -3 + 0, "(a*-3)"),
        (lambda: 10 - a, "((a*-1)+10)"),
        (lambda: NumNode(-3), "-3"),
        (lambda: (a + 2) * 3, "((a*3)+6)"),
    ],
)
def test_simplifications(expr, want):
    assert r(expr()) == want


def test_collapse_to_numnode():
    y = Variable("y", 4, 7)
    assert isinstance(y // 8, NumNode) and y // 8 == 0
    assert y // 4 == 1
    assert r(y % 4) == "(y+-4)"
    assert Variable("c", 3, 3) == 3
    assert isinstance(Variable("c", 3, 3), NumNode)


def test_comparisons_decided_by_bounds():
    assert a.lt(11) == 1 and isinstance(a.lt(11), NumNode)
    assert a.lt(0) == 0
    assert a.ge(0) == 1
    assert (a < 11) is True and (a >= 11) is False and (a > -1) is True and (a <= 10) is True
    assert isinstance(a < 5, LtNode)
    assert r(a < 5) == "(a<5)"
    assert r(a.ge(3)) == "(2<a)"
    assert r((a * 2).lt(5)) == "(a<3)"
    assert r((a + 2).lt(5)) == "(a<3)"
    assert r(a.lt(b)) == "(a<b)"
    assert 11 > a
    with pytest.raises(TypeError):
        bool(a < 5)


def test_and_nodes():
    assert r(sym_and([a.lt(3), b.ge(2)])) == "((a<3)&&(1<b))"
    assert sym_and([a.lt(11), NumNode(1)]) == 1
    assert sym_and([a.lt(3), NumNode(0)]) == 0
    assert r(sym_and([a.lt(3), sym_and([a.lt(3), b.lt(2)])])) == "((a<3)&&(b<2))"
    ops = {AndNode: lambda n, ops, ctx: "(" + " and ".join(m.render(ops, ctx) for m in n.nodes) + ")"}
    assert sym_and([a.lt(3), b.lt(2)]).render(ops) == "((a<3) and (b<2))"


def test_render_ops_override():
    ops = {Variable: lambda n, ops, ctx: n.expr.upper(), DivNode: lambda n, ops, ctx: f"div({n.a.render(ops, ctx)})"}
    assert ((a * 3 + b) // 2).render(ops) == "div(((A*3)+B))"


def test_render_determinism_and_equality():
    e1, e2 = a * 3 + b + 2, 2 + b + a * 3
    assert e1.render() == e2.render() == "((a*3)+b+2)"
    assert e1 == e2 and hash(e1) == hash(e2)
    assert len({e1, e2}) == 1
    assert e1.key == e2.key
    assert NumNode(3) == 3 and hash(NumNode(3)) == hash(3) and 3 == NumNode(3)
    assert a != Variable("a", 0, 11)
    assert isinstance(a == b, bool)


def test_node_classes_and_helpers():
    assert isinstance(a * 2, MulNode) and isinstance(a // 3, DivNode) and isinstance(a % 3, ModNode)
    assert isinstance(a + b, SumNode) and sym_sum([]) == 0 and sym_sum([a]) is a
    assert sym_render(5) == "5" and sym_infer(5, {}) == 5
    assert (a * b).min == 0 and (a * b).max == 100
    assert r((a * b) // a) == "b" and r((a * b) % b) == "0"
    assert {v.expr for v in (a * 2 + b // 3).vars()} == {"a", "b"}
    assert isinstance(a, Node)


def test_errors():
    with pytest.raises(ValueError):
        _ = a // 0
    with pytest.raises(ValueError):
        _ = a % -2
    with pytest.raises(NotImplementedError):
        _ = a // b
    with pytest.raises(ValueError):
        Variable("bad", 3, 1)
    with pytest.raises(ValueError):
        a.bind(11)


def test_bind_unbind_substitute():
    n = Variable("n", 1, 32)
    nb = n.bind(4)
    assert nb.val == 4 and nb.render() == "n" and nb != n
    assert nb.unbind() == (n, 4) and nb.unbound == n
    with pytest.raises(ValueError):
        n.unbind()
    with pytest.raises(ValueError):
        nb.bind(5)
    e = nb * 3 + a
    assert sym_infer(e, {a: 2}) == 14
    assert sym_infer(e, {n: 5, a: 2}) == 17
    assert e.substitute({n: NumNode(2)}).render() == "(a+6)"
    assert (a * 4 + b).substitute({a: b}).render() == "(b*5)"
    assert (a // 2).substitute({a: 7}) == 3
    with pytest.raises(KeyError):
        sym_infer(a + b, {a: 1})


def test_immutability():
    e = a * 2
    with pytest.raises(AttributeError):
        e.b = 3


# brute force against Python ints


VARS = [Variable("p", -4, 5), Variable("q", 0, 6), Variable("s", 2, 4)]


def rand_expr(rng: random.Random, depth: int):
    """(node, python function of an env dict) built from the same random choices."""
    if depth == 0 or rng.random() < 0.2:
        if rng.random() < 0.75:
            v = rng.choice(VARS)
            return v, lambda env, v=v: env[v]
        c = rng.randint(-5, 9)
        return NumNode(c), lambda env, c=c: c
    op = rng.choice(["add", "sub", "mul", "div", "mod", "muln", "neg"])
    n1, f1 = rand_expr(rng, depth - 1)
    if op in ("add", "sub", "muln"):
        n2, f2 = rand_expr(rng, depth - 1)
        if op == "add":
            return n1 + n2, lambda env: f1(env) + f2(env)
        if op == "sub":
            return n1 - n2, lambda env: f1(env) - f2(env)
        if isinstance(n1, NumNode) or isinstance(n2, NumNode) or rng.random() < 0.5:
            return n1 * n2, lambda env: f1(env) * f2(env)
        return n1 + n2, lambda env: f1(env) + f2(env)
    if op == "neg":
        return -n1, lambda env: -f1(env)
    k = rng.choice([-3, -2, 2, 3, 4, 5, 6, 8]) if op == "mul" else rng.choice([1, 2, 3, 4, 5, 6, 8, 10])
    if op == "mul":
        return n1 * k, lambda env: f1(env) * k
    if op == "div":
        return n1 // k, lambda env: f1(env) // k
    return n1 % k, lambda env: f1(env) % k


def all_envs(node):
    """Every assignment of the node's variables; variables simplified away get arbitrary (seeded) values."""
    vs = sorted(node.vars(), key=lambda v: v.expr)
    rng = random.Random(node.key)
    for vals in itertools.product(*(range(v.min, v.max + 1) for v in vs)):
        gone = {v: rng.randint(v.min, v.max) for v in VARS if v not in vs}
        yield {**dict(zip(vs, vals, strict=True)), **gone}


@pytest.mark.parametrize("seed", range(6))
def test_random_expressions_match_python(seed):
    rng = random.Random(seed)
    for _ in range(60):
        node, fn = rand_expr(rng, 4)
        for env in all_envs(node):
            got, want = sym_infer(node, env), fn(env)
            assert got == want, f"{node.render()} at {env}: {got} != {want}"
            assert node.min <= want <= node.max, f"bounds of {node.render()} miss {want} at {env}"


@pytest.mark.parametrize("seed", range(3))
def test_random_comparisons_match_python(seed):
    rng = random.Random(100 + seed)
    for _ in range(60):
        (n1, f1), c = rand_expr(rng, 3), rng.randint(-6, 12)
        lt, ge = n1.lt(c), n1.ge(c)
        both = sym_and([lt, n1.lt(c + 3)])
        for env in all_envs(n1):
            v = f1(env)
            assert sym_infer(lt, env) == int(v < c), f"{lt.render()} vs {n1.render()} < {c} at {env}"
            assert sym_infer(ge, env) == int(v >= c), f"{ge.render()} vs {n1.render()} >= {c} at {env}"
            assert sym_infer(both, env) == int(v < c and v < c + 3)
            assert lt.min <= int(v < c) <= lt.max


def test_floor_semantics_with_negative_values():
    p = Variable("p", -7, 7)
    for e, fn in [
        (p // 2, lambda v: v // 2),
        (p % 3, lambda v: v % 3),
        ((p * 4 + 3) // 8, lambda v: (v * 4 + 3) // 8),
        ((p - 3) // 2, lambda v: (v - 3) // 2),
        ((p * -3) % 8, lambda v: (v * -3) % 8),
        ((p // 2) // 3, lambda v: v // 6),
    ]:
        for v in range(-7, 8):
            assert sym_infer(e, {p: v}) == fn(v), e.render()
            assert e.min <= fn(v) <= e.max


def test_substitute_matches_infer():
    rng = random.Random(7)
    for _ in range(40):
        node, fn = rand_expr(rng, 3)
        for env in itertools.islice(all_envs(node), 20):
            assert node.substitute(env) == fn(env)
