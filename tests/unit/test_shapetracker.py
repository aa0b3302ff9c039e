"""ShapeTracker and View: notebook reprs, and every movement op checked element by element against numpy."""

import random

import numpy as np
import pytest

from specgrad.shape.shapetracker import ShapeTracker
from specgrad.shape.symbolic import AndNode, DivNode, LtNode, ModNode, MulNode, NumNode, SumNode, Variable
from specgrad.shape.view import View, merge_views, strides_for_shape

# a vectorised evaluator written independently of the library's own sym_infer
NP_EVAL = {
    NumNode: lambda n, env: n.b,
    Variable: lambda n, env: env[n.expr],
    MulNode: lambda n, env: np_eval(n.a, env) * np_eval(n.b, env),
    DivNode: lambda n, env: np.floor_divide(np_eval(n.a, env), n.b),
    ModNode: lambda n, env: np.mod(np_eval(n.a, env), n.b),
    SumNode: lambda n, env: sum(np_eval(m, env) for m in n.nodes),
    LtNode: lambda n, env: (np_eval(n.a, env) < np_eval(n.b, env)).astype(np.int64),
    AndNode: lambda n, env: np.prod([np_eval(m, env) != 0 for m in n.nodes], axis=0).astype(np.int64),
}


def np_eval(node, env):
    return node if isinstance(node, int) else NP_EVAL[type(node)](node, env)


def realize(st: ShapeTracker, base_size: int) -> np.ndarray:
    """The tracker read out of np.arange(base_size), -1 where invalid, via expr_idxs and via expr_node."""
    shape = st.shape
    grids = np.indices(shape, dtype=np.int64) if shape else np.zeros((0,), dtype=np.int64)
    env = {f"idx{i}": grids[i] for i in range(len(shape))}
    out = _read(st.expr_idxs(), env, shape, base_size)
    flat_env = {"idx": np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)}
    np.testing.assert_array_equal(_read(st.expr_node(), flat_env, shape, base_size), out)
    return out


def _read(exprs, env, shape, base_size):
    idx, valid = (np.broadcast_to(np_eval(e, env), shape) for e in exprs)
    valid = valid != 0
    assert np.all((idx[valid] >= 0) & (idx[valid] < base_size)), "valid element indexes outside the buffer"
    return np.where(valid, np.arange(base_size)[np.clip(idx, 0, max(base_size - 1, 0))], -1)


def check(st: ShapeTracker, ref: np.ndarray, base_size: int):
    assert st.shape == ref.shape
    np.testing.assert_array_equal(realize(st, base_size), ref)


# notebook


def test_notebook_walkthrough():
    a = ShapeTracker.from_shape((10, 10))
    assert (
        repr(a) == "ShapeTracker(views=(View(shape=(10, 10), strides=(10, 1), offset=0, mask=None, contiguous=True),))"
    )
    a = a.permute((1, 0))
    assert repr(a.views[-1]) == "View(shape=(10, 10), strides=(1, 10), offset=0, mask=None, contiguous=False)"
    a = a.reshape((5, 2, 5, 2))
    assert (
        repr(a.views[-1]) == "View(shape=(5, 2, 5, 2), strides=(2, 1, 20, 10), offset=0, mask=None, contiguous=False)"
    )
    assert len(a.views) == 1
    a = a.reshape((100,))
    assert a.views == (
        View((5, 2, 5, 2), (2, 1, 20, 10), 0, None, False),
        View((100,), (1,), 0, None, True),
    )
    idx, valid = a.expr_idxs()
    assert idx.render() == "(((idx0%10)*10)+(idx0//10))" and valid == 1
    assert a.simplify() == a
    with pytest.raises(ValueError, match=r"invalid permute \(1, 0\) for shape \(100,\)"):
        a.permute((1, 0))
    assert not a.contiguous


# View canonical form


def test_view_create_canonicalises():
    assert strides_for_shape((3, 1, 4)) == (4, 0, 1)
    assert View.create((1,)) == View((1,), (0,), 0, None, True)
    v = View.create((3, 1, 4), (4, 7, 1))
    assert v.strides == (4, 0, 1) and v.contiguous
    assert View.create((3, 4), mask=((0, 3), (0, 4))).mask is None
    empty = View.create((3, 4), (4, 1), 5, ((1, 1), (0, 4)))
    assert empty == View((3, 4), (0, 0), 0, ((0, 0), (0, 0)), False)
    assert not View.create((3, 4), offset=1).contiguous
    assert not View.create((3, 4), mask=((0, 2), (0, 4))).contiguous


def test_view_minify_and_vars():
    v = View.create((2, 3, 4)).permute((0, 2, 1))
    assert v.minify() == v
    assert View.create((2, 3, 4), (12, 4, 1)).minify().shape == (24,)
    n = Variable("n", 1, 8).bind(3)
    vb = View.create((n, 4))
    assert vb.vars() == {n}
    unbound, var_vals = vb.unbind()
    assert unbound.shape[0] == Variable("n", 1, 8) and var_vals == {Variable("n", 1, 8): 3}


# each movement op against numpy


def st_and_ref(shape):
    n = int(np.prod(shape))
    return ShapeTracker.from_shape(shape), np.arange(n).reshape(shape), n


def test_permute():
    st, ref, n = st_and_ref((2, 3, 4))
    check(st.permute((2, 0, 1)), ref.transpose(2, 0, 1), n)


def test_reshape_merge_split_and_ones():
    st, ref, n = st_and_ref((2, 3, 4))
    for shape in [(6, 4), (2, 12), (24,), (1, 2, 1, 3, 4, 1), (4, 3, 2)]:
        check(st.reshape(shape), ref.reshape(shape), n)
    p = st.permute((1, 0, 2))
    for shape in [(3, 2, 2, 2), (3, 8), (1, 3, 1, 8), (6, 4), (24,)]:
        check(p.reshape(shape), ref.transpose(1, 0, 2).reshape(shape), n)
    assert len(p.reshape((3, 2, 2, 2)).views) == 1 and len(p.reshape((6, 4)).views) == 2


def test_expand():
    st, ref, n = st_and_ref((3, 1))
    e = st.expand((3, 4))
    check(e, np.broadcast_to(ref, (3, 4)), n)
    assert e.views[-1].strides == (1, 0)
    check(e.reshape((3, 2, 2)), np.broadcast_to(ref, (3, 4)).reshape(3, 2, 2), n)
    assert len(e.reshape((3, 2, 2)).views) == 1
    check(e.reshape((12,)), np.broadcast_to(ref, (3, 4)).reshape(12), n)


def test_pad_and_shrink():
    st, ref, n = st_and_ref((3, 4))
    padded = np.pad(ref, ((1, 2), (0, 1)), constant_values=-1)
    p = st.pad(((1, 2), (0, 1)))
    check(p, padded, n)
    idx, valid = p.expr_idxs()
    assert valid.render() == "((0<idx0)&&(idx0<4)&&(idx1<4))"
    check(p.shrink(((0, 4), (2, 5))), padded[0:4, 2:5], n)
    check(p.shrink(((4, 6), (0, 5))), padded[4:6], n)
    check(st.shrink(((1, 3), (1, 2))), ref[1:3, 1:2], n)
    check(p.reshape((6, 5, 1)), padded.reshape(6, 5, 1), n)
    check(p.reshape((30,)), padded.reshape(30), n)


def test_pad_then_reshape_keeps_one_view_when_possible():
    st, ref, n = st_and_ref((2, 4))
    p = st.pad(((1, 1), (0, 0))).reshape((16,))
    assert len(p.views) == 1
    check(p, np.pad(ref, ((1, 1), (0, 0)), constant_values=-1).reshape(16), n)
    e = ShapeTracker.from_shape((1, 4)).pad(((1, 1), (0, 0))).reshape((12,))
    assert len(e.views) == 1
    check(e, np.pad(np.arange(4).reshape(1, 4), ((1, 1), (0, 0)), constant_values=-1).reshape(12), 4)


@pytest.mark.parametrize("mul", [(2, 1), (1, 3), (-1, 1), (1, -1), (-2, -3), (3, 2)])
def test_stride(mul):
    st, ref, n = st_and_ref((5, 7))
    check(st.stride(mul), ref[:: mul[0], :: mul[1]], n)
    padded = np.pad(ref, ((2, 1), (1, 3)), constant_values=-1)
    check(st.pad(((2, 1), (1, 3))).stride(mul), padded[:: mul[0], :: mul[1]], n)


def test_fully_masked_views():
    st, ref, n = st_and_ref((3, 1))
    z = st.pad(((0, 0), (1, 1))).shrink(((0, 3), (0, 1)))
    assert z.views[-1].mask == ((0, 0), (0, 0))
    check(z, np.full((3, 1), -1), n)
    check(z.expand((3, 5)), np.full((3, 5), -1), n)
    check(z.reshape((1, 3)), np.full((1, 3), -1), n)
    assert z.real_size() == 0


# random sequences of movement ops


def random_shape_of(size, rng):
    """A random shape with the given size, sometimes with extra 1s."""
    dims, rest = [], size
    for p in (2, 3, 5, 7):
        while rest % p == 0:
            dims.append(p)
            rest //= p
    dims += [rest] if rest > 1 else []
    rng.shuffle(dims)
    out = []
    for d in dims:
        if out and rng.random() < 0.5:
            out[-1] *= d
        else:
            out.append(d)
    for _ in range(rng.randint(0, 2)):
        out.insert(rng.randint(0, len(out)), 1)
    return tuple(out)


def random_op(st, ref, rng):
    """Apply one random movement op to both; returns the new (st, ref)."""
    shape, op = ref.shape, rng.choice(["reshape", "permute", "expand", "pad", "shrink", "stride"])
    if op == "reshape":
        new = random_shape_of(ref.size, rng)
        return st.reshape(new), ref.reshape(new)
    if op == "permute":
        order = tuple(rng.sample(range(len(shape)), len(shape)))
        return st.permute(order), ref.transpose(order)
    if op == "expand" and ref.size <= 100:
        new = tuple(rng.choice([1, 2, 3]) if s == 1 else s for s in shape)
        return st.expand(new), np.broadcast_to(ref, new)
    if op == "pad" and shape and ref.size <= 200:
        arg = tuple((rng.randint(0, 2), rng.randint(0, 2)) for _ in shape)
        return st.pad(arg), np.pad(ref, arg, constant_values=-1)
    if op == "shrink":
        arg = tuple(sorted((rng.randint(0, s), rng.randint(0, s))) for s in shape)
        arg = tuple((b, e) if e > b else (0, s) for (b, e), s in zip(arg, shape, strict=True))
        return st.shrink(arg), ref[tuple(slice(b, e) for b, e in arg)]
    if op == "stride":
        mul = tuple(rng.choice([1, 1, 2, 3, -1, -2]) for _ in shape)
        return st.stride(mul), ref[tuple(slice(None, None, m) for m in mul)]
    return st, ref


def random_tracker(rng, n_ops):
    base = random_shape_of(rng.choice([6, 8, 12, 24, 30, 36, 48, 60]), rng)
    st, ref, n = st_and_ref(base)
    for _ in range(n_ops):
        st, ref = random_op(st, ref, rng)
    return st, ref, n


@pytest.mark.parametrize("seed", range(10))
def test_random_movement_sequences(seed):
    rng = random.Random(seed)
    for _ in range(30):
        st, ref, n = random_tracker(rng, rng.randint(1, 6))
        check(st, ref, n)
        simple = st.simplify()
        assert len(simple.views) <= len(st.views)
        check(simple, ref, n)


@pytest.mark.parametrize("seed", range(4))
def test_random_composition(seed):
    rng = random.Random(1000 + seed)
    for _ in range(25):
        inner, ref, n = random_tracker(rng, rng.randint(1, 4))
        outer, ref2 = ShapeTracker.from_shape(ref.shape), ref
        for _ in range(rng.randint(1, 4)):
            outer, ref2 = random_op(outer, ref2, rng)
        check(inner + outer, ref2, n)


def assert_real_strides(st, idx, valid, ignore_valid):
    """Every non-None real stride is the index step between neighbours that are both valid along that axis."""
    for axis, stride in enumerate(st.real_strides(ignore_valid)):
        if stride is None or st.shape[axis] < 2:
            continue
        both = np.delete(valid, 0, axis=axis) & np.delete(valid, -1, axis=axis)
        assert np.all(np.diff(idx, axis=axis)[both] == stride)
        if not ignore_valid:
            assert np.all(np.diff(valid.astype(int), axis=axis) == 0), "a real stride must not cross a mask edge"


@pytest.mark.parametrize("seed", range(3))
def test_random_real_strides_and_size(seed):
    rng = random.Random(2000 + seed)
    for _ in range(30):
        st, ref, n = random_tracker(rng, rng.randint(1, 5))
        grids = np.indices(st.shape, dtype=np.int64)
        env = {f"idx{i}": grids[i] for i in range(len(st.shape))}
        idx, valid = (np.broadcast_to(np_eval(e, env), st.shape) for e in st.expr_idxs())
        valid = valid != 0
        touched = int(idx[valid].max()) + 1 if valid.any() else 0
        assert st.real_size() >= touched
        if len(st.views) == 1:
            assert st.real_size() == touched
        assert_real_strides(st, idx, valid, ignore_valid=False)
        assert_real_strides(st, idx, valid, ignore_valid=True)


# contiguity, strides, sizes, composition, errors


def test_contiguous_and_real_strides():
    st = ShapeTracker.from_shape((4, 5))
    assert st.contiguous and st.real_strides() == (5, 1) and st.unit_stride_axes() == [1]
    assert not st.permute((1, 0)).contiguous
    assert st.permute((1, 0)).permute((1, 0)).contiguous
    assert st.reshape((2, 10)).contiguous and st.reshape((20,)).contiguous
    p = st.permute((1, 0)).reshape((20,))
    assert p.real_strides() == (None,)
    padded = st.pad(((1, 0), (0, 0)))
    assert padded.real_strides() == (None, 1) and padded.real_strides(ignore_valid=True) == (5, 1)
    assert st.expand((4, 5)).real_strides() == (5, 1)
    assert ShapeTracker.from_shape((4, 1)).expand((4, 3)).real_strides() == (1, 0)


def test_real_size():
    assert ShapeTracker.from_shape((4, 5)).real_size() == 20
    assert ShapeTracker.from_shape((4, 5)).shrink(((0, 2), (1, 3))).real_size() == 8
    assert ShapeTracker.from_shape((4, 5)).pad(((1, 1), (1, 1))).real_size() == 20
    assert ShapeTracker.from_shape((0, 5)).real_size() == 0
    assert ShapeTracker.from_shape((3, 1)).expand((3, 4)).real_size() == 3


def test_add_composes_and_checks_sizes():
    a = ShapeTracker.from_shape((4, 6)).permute((1, 0))
    b = ShapeTracker.from_shape((6, 4)).reshape((24,))
    ref = np.arange(24).reshape(4, 6).T.reshape(24)
    check(a + b, ref, 24)
    assert ShapeTracker.from_shape((2, 3)) + ShapeTracker.from_shape((6,)).reshape((3, 2)) == ShapeTracker(
        (View.create((3, 2)),)
    )
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        ShapeTracker.from_shape((2, 3)) + ShapeTracker.from_shape((7,))


def test_simplify_merges_views():
    st = ShapeTracker.from_shape((4, 6)).permute((1, 0)).reshape((24,)).reshape((6, 4))
    assert len(st.views) == 2 and len(st.simplify().views) == 1
    check(st.simplify(), np.arange(24).reshape(4, 6).T, 24)
    v1 = View.create((4, 6)).permute((1, 0))
    assert merge_views(v1, View.create((6, 4))) == v1
    assert merge_views(View.create((24,)), View.create((6, 4)).permute((1, 0))) == View.create((6, 4)).permute((1, 0))


@pytest.mark.parametrize(
    "fn, arg",
    [
        (lambda st: st.permute((0, 0)), "(0, 0)"),
        (lambda st: st.permute((1, 0, 2)), "(1, 0, 2)"),
        (lambda st: st.reshape((5, 5)), "(5, 5)"),
        (lambda st: st.reshape((-4, -3)), "(-4, -3)"),
        (lambda st: st.expand((4, 6)), "(4, 6)"),
        (lambda st: st.expand((3,)), "(3,)"),
        (lambda st: st.pad(((0, -1), (0, 0))), "((0, -1), (0, 0))"),
        (lambda st: st.pad(((0, 1),)), "((0, 1),)"),
        (lambda st: st.shrink(((0, 5), (0, 4))), "((0, 5), (0, 4))"),
        (lambda st: st.shrink(((2, 1), (0, 4))), "((2, 1), (0, 4))"),
        (lambda st: st.stride((0, 1)), "(0, 1)"),
        (lambda st: st.stride((1,)), "(1,)"),
    ],
)
def test_bad_arguments_raise(fn, arg):
    st = ShapeTracker.from_shape((3, 4))
    with pytest.raises(ValueError) as e:
        fn(st)
    assert "for shape (3, 4)" in str(e.value) and arg in str(e.value)


def test_symbolic_shapes_and_vars():
    n = Variable("n", 1, 16)
    st = ShapeTracker.from_shape((n, 4))
    assert st.views[0].strides == (4, 1) and st.contiguous
    assert st.reshape((n, 2, 2)).views[-1].strides == (4, 2, 1)
    assert st.reshape((1, n, 4, 1)).contiguous
    assert st.permute((1, 0)).views[-1].strides == (1, 4)
    idx, valid = st.permute((1, 0)).expr_idxs()
    assert idx.render() == "((idx1*4)+idx0)" and valid == 1
    assert st.size() == n * 4 and st.vars() == {n}
    bound = ShapeTracker.from_shape((n.bind(3), 4))
    assert bound.var_vals == {n: 3}
    unbound, var_vals = bound.unbind()
    assert unbound == st and var_vals == {n: 3}
    assert bound.real_size() == 64
