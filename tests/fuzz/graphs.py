"""Differential fuzzing of the public Tensor API: random op graphs as data, a float64 reference, and a shrinker.

A graph is a tuple of nodes; node i reads earlier nodes by index and the last node is the output. Each op kind is one
definition: its shape rule, its parameter generator and the code it renders to for specgrad, torch and numpy, so the
same record runs, shrinks and prints as a runnable snippet.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from specgrad import Tensor

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # NOTE: torch is a test-only extra; without it the reference is numpy, forward only
    torch = F = None

Shape = tuple[int, ...]
MAX_NUMEL = 1 << 15  # keeps a graph's tensors small enough that the numpy interpreter stays fast
MAX_FLOPS = 1 << 22  # per matmul or conv2d (forward)
# dims where tiles, vector lanes (4, 8), split reductions, threads and packing switch on or leave remainders
DIMS = (1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 127, 128)


@dataclass(frozen=True)
class Node:
    kind: str
    args: tuple[int, ...] = ()
    params: tuple = ()


@dataclass(frozen=True)
class OpKind:
    """One op: `shape(in_shapes, params)` is the output shape or None when the op does not apply; `gen(rng, shape)`
    draws params for an input of `shape` (None: no fit); sg/th/np render code from (arg names, in_shapes, params)."""

    name: str
    arity: int
    shape: Callable
    gen: Callable
    sg: Callable
    th: Callable
    np: Callable
    weight: float = 1.0


def _same(s, p):
    return s[0]


def _bcast(s, p):
    try:
        return s[0] if np.broadcast_shapes(s[0], s[1]) == s[0] else None
    except ValueError:
        return None


def _no_params(rng, shape):
    return ()


def _text(fmt: str) -> Callable:
    return lambda n, s, p: fmt.format(*n, *p)


def _unary(name: str, sg: str, th: str | None = None, npf: str | None = None) -> OpKind:
    return OpKind(name, 1, _same, _no_params, _text(sg), _text(th or sg), _text(npf or sg))


def _binary(name: str, sg: str, th: str | None = None, npf: str | None = None) -> OpKind:
    return OpKind(name, 2, _bcast, _no_params, _text(sg), _text(th or sg), _text(npf or sg))


def _reduced(s: Shape, axes: tuple[int, ...], keep: bool) -> Shape:
    return tuple(1 if i in axes else d for i, d in enumerate(s) if keep or i not in axes)


def _reduce_shape(s, p):
    axes, keep = p
    return _reduced(s[0], axes, keep) if all(a < len(s[0]) for a in axes) else None


def _gen_reduce(rng, shape):
    if not shape:
        return None
    k = 1 if len(shape) == 1 or rng.random() < 0.7 else 2
    return tuple(sorted(rng.choice(len(shape), k, replace=False).tolist())), bool(rng.integers(2))


def _axis_arg(p) -> str:
    return str(p[0][0]) if len(p[0]) == 1 else str(p[0])


def _reduce(name: str, sg: str, th: str) -> OpKind:
    return OpKind(
        name,
        1,
        _reduce_shape,
        _gen_reduce,
        lambda n, s, p: f"{n[0]}.{sg}({_axis_arg(p)}, keepdim={p[1]})",
        lambda n, s, p: f"{n[0]}.{th}({_axis_arg(p)}, keepdim={p[1]})",
        lambda n, s, p: f"{n[0]}.{sg}({_axis_arg(p)}, keepdims={p[1]})",
    )


def _gen_axis(rng, shape):
    return (int(rng.integers(len(shape))),) if shape else None


def _axis_shape(s, p):
    return s[0] if p[0] < len(s[0]) else None


def _softmax(name: str) -> OpKind:
    return OpKind(
        name,
        1,
        _axis_shape,
        _gen_axis,
        _text("{0}.NAME({1})".replace("NAME", name)),
        _text("{0}.NAME({1})".replace("NAME", name)),
        _text("np_NAME({0}, {1})".replace("NAME", name)),
    )


# activations as (specgrad, torch, numpy) code of {0}, for "pool": one of them, then a max or min over any axis
ACTIVATIONS = {
    "exp": ("({0} * 0.7).exp()", "({0} * 0.7).exp()", "np.exp({0} * 0.7)"),
    "log": ("({0}.abs() + 0.1).log()", "({0}.abs() + 0.1).log()", "np.log(np.abs({0}) + 0.1)"),
    "sin": ("({0} * 3).sin()", "({0} * 3).sin()", "np.sin({0} * 3)"),
    "tanh": ("{0}.tanh()", "{0}.tanh()", "np.tanh({0})"),
    "sigmoid": ("{0}.sigmoid()", "{0}.sigmoid()", "1 / (1 + np.exp(-{0}))"),
    "gelu": ("{0}.gelu()", "F.gelu({0}, approximate='tanh')",
             "0.5 * {0} * (1 + np.tanh(0.7978845608028654 * ({0} + 0.044715 * {0} ** 3)))"),
    "softmax": ("{0}.softmax(-1)", "{0}.softmax(-1)", "np_softmax({0}, -1)"),
}  # fmt: skip


def _gen_pool(rng, shape):
    """An activation, max or min, the axis and keepdim: backward rules compare what a kernel recomputes (issue 29)."""
    if not shape:
        return None
    return (
        str(rng.choice(list(ACTIVATIONS))),
        str(rng.choice(["max", "min"])),
        int(rng.integers(len(shape))),
        bool(rng.integers(2)),
    )


def _pool_shape(s, p):
    return _reduced(s[0], (p[2],), p[3]) if p[2] < len(s[0]) else None


def _pool(flavour: int) -> Callable:
    def render(n, s, p):
        act, red, axis, keep = p
        x = ACTIVATIONS[act][flavour].format(n[0])
        if flavour == 2:
            return f"({x}).{red}({axis}, keepdims={keep})"
        return f"({x}).{red if flavour == 0 else 'a' + red}({axis}, keepdim={keep})"

    return render


def _matmul_shape(s, p):
    a, b = s
    if len(a) < 1 or len(b) != 2 or a[-1] != b[0]:
        return None
    return (*a[:-1], b[1]) if math.prod(a) * b[1] <= MAX_FLOPS else None


def _conv_out(s, p):
    (n, c, h, w), (co, cg, kh, kw) = s
    stride, pad, dil, groups = p
    if c != cg * groups or co % groups:
        return None
    ho, wo = ((d + 2 * pad - dil * (k - 1) - 1) // stride + 1 for d, k in ((h, kh), (w, kw)))
    if ho < 1 or wo < 1 or n * co * ho * wo * cg * kh * kw > MAX_FLOPS:
        return None
    return (n, co, ho, wo)


def _conv_shape(s, p):
    return _conv_out(s, p) if len(s[0]) == 4 and len(s[1]) == 4 else None


def _conv_kw(p) -> str:
    return "stride={}, padding={}, dilation={}, groups={}".format(*p)


def _permute_shape(s, p):
    return tuple(s[0][i] for i in p[0]) if len(p[0]) == len(s[0]) else None


def _gen_permute(rng, shape):
    return (tuple(rng.permutation(len(shape)).tolist()),) if len(shape) >= 2 else None


def _pad_shape(s, p):
    return tuple(d + lo + hi for d, (lo, hi) in zip(s[0], p[0])) if len(p[0]) == len(s[0]) else None


def _gen_pad(rng, shape):
    return (tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in shape),) if shape else None


def _torch_pad(p) -> str:
    return str(tuple(x for lo_hi in reversed(p[0]) for x in lo_hi))


def _slice_shape(s, p):
    start, end, step = p
    if not s[0] or s[0][0] - start - end < 1:
        return None
    return (-(-(s[0][0] - start - end) // step), *s[0][1:])


def _slice_text(n, s, p) -> str:
    start, end, step = p
    return f"{n[0]}[{start or ''}:{-end if end else ''}{f':{step}' if step > 1 else ''}]"


def _gen_slice(rng, shape):
    if not shape or shape[0] < 2:
        return None
    start, end = int(rng.integers(0, min(3, shape[0]))), int(rng.integers(0, 3))
    return (start, end if shape[0] - start - end >= 1 else 0, int(rng.choice([1, 1, 2, 3])))


def _flatten_shape(s, p):
    lo, hi = p
    if hi >= len(s[0]):
        return None
    return (*s[0][:lo], math.prod(s[0][lo : hi + 1]), *s[0][hi + 1 :])


def _gen_flatten(rng, shape):
    if len(shape) < 2:
        return None
    lo = int(rng.integers(len(shape) - 1))
    return lo, lo + 1


def _unflatten_shape(s, p):
    dim, f = p
    if dim >= len(s[0]) or s[0][dim] % f or len(s[0]) >= 4:
        return None
    return (*s[0][:dim], f, s[0][dim] // f, *s[0][dim + 1 :])


def _gen_unflatten(rng, shape):
    fits = [(i, f) for i, d in enumerate(shape) for f in (2, 3, 4, 8) if d % f == 0 and d > f]
    return fits[rng.integers(len(fits))] if fits and len(shape) < 4 else None


def _expand_shape(s, p):
    dim, size = p
    if dim > len(s[0]) or len(s[0]) >= 4 or math.prod(s[0]) * size > MAX_NUMEL:
        return None
    return (*s[0][:dim], size, *s[0][dim:])


def _gen_expand(rng, shape):
    return int(rng.integers(len(shape) + 1)), int(rng.choice(DIMS[:12]))


def _expand_text(n, s, p) -> str:
    return f"{n[0]}.unsqueeze({p[0]}).expand({_expand_shape(s, p)})"


def _gen_matmul(rng, shape):
    return () if shape else None


def _gen_conv(rng, shape):
    if len(shape) != 4:
        return None
    groups = int(rng.choice([g for g in (1, 2, 3, 4) if shape[1] % g == 0]))
    return int(rng.choice([1, 1, 2])), int(rng.integers(0, 3)), int(rng.choice([1, 1, 2])), groups


OPS: dict[str, OpKind] = {
    k.name: k
    for k in (
        _unary("relu", "{0}.relu()", npf="np.maximum({0}, 0)"),
        _unary("tanh", "{0}.tanh()", npf="np.tanh({0})"),
        _unary("sigmoid", "{0}.sigmoid()", npf="1 / (1 + np.exp(-{0}))"),
        _unary("sin", "{0}.sin()", npf="np.sin({0})"),
        _unary("exp", "{0}.tanh().exp()", npf="np.exp(np.tanh({0}))"),
        _unary(
            "gelu",
            "{0}.gelu()",
            "F.gelu({0}, approximate='tanh')",
            "0.5 * {0} * (1 + np.tanh(0.7978845608028654 * ({0} + 0.044715 * {0} ** 3)))",
        ),  # fmt: skip
        _unary("log", "({0} * {0} + 1).log()", npf="np.log({0} * {0} + 1)"),
        _unary("sqrt", "({0} * {0} + 1).sqrt()", npf="np.sqrt({0} * {0} + 1)"),
        _unary("recip", "1 / ({0} * {0} + 1)"),
        _unary("neg", "-{0}"),
        _binary("add", "{0} + {1}"),
        _binary("sub", "{0} - {1}"),
        _binary("mul", "{0} * {1}"),
        _binary("div", "{0} / ({1} * {1} + 1)"),
        _binary("maximum", "{0}.maximum({1})", "torch.maximum({0}, {1})", "np.maximum({0}, {1})"),
        _binary(
            "where", "({0} < {1}).where({0}, {1})", "torch.where({0} < {1}, {0}, {1})", "np.where({0} < {1}, {0}, {1})"
        ),
        _reduce("sum", "sum", "sum"),
        _reduce("mean", "mean", "mean"),
        _reduce("max", "max", "amax"),
        _reduce("min", "min", "amin"),
        _softmax("softmax"),
        OpKind("pool", 1, _pool_shape, _gen_pool, _pool(0), _pool(1), _pool(2), 2),
        _softmax("log_softmax"),
        OpKind("matmul", 2, _matmul_shape, _gen_matmul, _text("{0} @ {1}"), _text("{0} @ {1}"), _text("{0} @ {1}"), 3),
        OpKind(
            "conv2d",
            2,
            _conv_shape,
            _gen_conv,
            lambda n, s, p: f"{n[0]}.conv2d({n[1]}, {_conv_kw(p)})",
            lambda n, s, p: f"F.conv2d({n[0]}, {n[1]}, {_conv_kw(p)})",
            lambda n, s, p: f"np_conv2d({n[0]}, {n[1]}, {', '.join(map(str, p))})",
            3,
        ),
        OpKind(
            "permute",
            1,
            _permute_shape,
            _gen_permute,
            _text("{0}.permute({1})"),
            _text("{0}.permute({1})"),
            _text("{0}.transpose({1})"),
        ),
        OpKind(
            "flip",
            1,
            _axis_shape,
            _gen_axis,
            _text("{0}.flip({1})"),
            _text("{0}.flip({1})"),
            _text("np.flip({0}, {1})"),
        ),
        OpKind(
            "pad",
            1,
            _pad_shape,
            _gen_pad,
            _text("{0}.pad({1})"),
            lambda n, s, p: f"F.pad({n[0]}, {_torch_pad(p)})",
            _text("np.pad({0}, {1})"),
        ),
        OpKind("slice", 1, _slice_shape, _gen_slice, _slice_text, _slice_text, _slice_text),
        OpKind(
            "flatten",
            1,
            _flatten_shape,
            _gen_flatten,
            _text("{0}.flatten({1}, {2})"),
            _text("{0}.flatten({1}, {2})"),
            lambda n, s, p: f"{n[0]}.reshape({_flatten_shape(s, p)})",
        ),
        OpKind(
            "unflatten",
            1,
            _unflatten_shape,
            _gen_unflatten,
            _text("{0}.unflatten({1}, ({2}, -1))"),
            _text("{0}.unflatten({1}, ({2}, -1))"),
            lambda n, s, p: f"{n[0]}.reshape({_unflatten_shape(s, p)})",
        ),
        OpKind(
            "expand",
            1,
            _expand_shape,
            _gen_expand,
            _expand_text,
            _expand_text,
            lambda n, s, p: f"np.broadcast_to(np.expand_dims({n[0]}, {p[0]}), {_expand_shape(s, p)})",
        ),
    )
}


# ***** graphs: shapes, generation, rendering *****


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    seed: int = 0  # the input data's seed

    def shapes(self) -> list[Shape] | None:
        """Every node's shape, or None when some op does not apply (a shrink step broke the graph)."""
        out: list[Shape] = []
        for nd in self.nodes:
            if nd.kind == "input":
                s = nd.params[0]
            else:
                s = OPS[nd.kind].shape([out[a] for a in nd.args], nd.params)
            if s is None or math.prod(s) > MAX_NUMEL or 0 in s:
                return None
            out.append(tuple(s))
        return out

    def inputs(self) -> list[np.ndarray]:
        """Seeded float32 input values; an input's scale (1/sqrt(fan-in) for weights) keeps activations O(1)."""
        rng = np.random.default_rng(self.seed)
        return [
            (rng.standard_normal(nd.params[0]) * nd.params[1]).astype(np.float32)
            for nd in self.nodes
            if nd.kind == "input"
        ]

    def names(self) -> list[str]:
        n_in = 0
        names = []
        for i, nd in enumerate(self.nodes):
            names.append(f"x{n_in}" if nd.kind == "input" else f"v{i}")
            n_in += nd.kind == "input"
        return names

    def lines(self, flavour: str) -> list[tuple[str, str]]:
        """(name, expression) for each op node, in specgrad ("sg"), torch ("th") or numpy ("np") code."""
        shapes, names = self.shapes(), self.names()
        assert shapes is not None, "an invalid graph has no code"
        out = []
        for i, nd in enumerate(self.nodes):
            if nd.kind != "input":
                render = getattr(OPS[nd.kind], flavour)
                out.append((names[i], render([names[a] for a in nd.args], [shapes[a] for a in nd.args], nd.params)))
        return out

    def to_code(self, device: str = "CLANG") -> str:
        """A runnable snippet: the graph in specgrad and in float64 torch, printing the worst difference."""
        shapes, names = self.shapes(), self.names()
        ins = [(names[i], nd.params) for i, nd in enumerate(self.nodes) if nd.kind == "input"]
        out = [
            "import numpy as np, torch, torch.nn.functional as F",
            "from specgrad import Tensor",
            f"rng = np.random.default_rng({self.seed})",
        ]
        out += [f"{n} = (rng.standard_normal({s}) * {scale!r}).astype(np.float32)" for n, (s, scale) in ins]
        out.append(f"w = np.random.default_rng({self.seed + 1}).standard_normal({shapes[-1]}).astype(np.float32)")
        for flavour, wrap in (
            ("sg", "Tensor({}, device=DEV, requires_grad=True)".replace("DEV", repr(device))),
            ("th", "torch.tensor({}, dtype=torch.float64, requires_grad=True)"),
        ):
            p = "s_" if flavour == "sg" else "t_"
            env = {n: p + n for n in names}
            out += [f"{p}{n} = {wrap.format(n)}" for n, _ in ins]
            out += [f"{p}{n} = {_rename(expr, env)}" for n, expr in self.lines(flavour)]
            w = f"Tensor(w, device={device!r})" if flavour == "sg" else "torch.tensor(w, dtype=torch.float64)"
            out.append(f"({p}{names[-1]} * {w}).sum().backward()")
        last = names[-1]
        out.append(f"print('forward', np.abs(s_{last}.numpy() - t_{last}.detach().numpy()).max())")
        out += [f"print('grad {n}', np.abs(s_{n}.grad.numpy() - t_{n}.grad.numpy()).max())" for n, _ in ins]
        return "\n".join(out)


def _rename(expr: str, env: dict[str, str]) -> str:
    return re.sub(r"\b([xv]\d+)\b", lambda m: env.get(m.group(1), m.group(1)), expr)


def _new_input(shape: Shape, fan_in: int = 1) -> Node:
    return Node("input", (), (tuple(shape), round(1 / math.sqrt(fan_in), 4)))


def _second_operand(rng: np.random.Generator, kind: str, a: int, nodes: list[Node], shapes: list[Shape]):
    """An operand for a binary op on node `a`: an existing node that fits, or a new input node (appended)."""
    shape = shapes[a]
    if kind == "matmul":
        want = (shape[-1], int(rng.choice(DIMS)))
        fan_in = shape[-1]
    elif kind == "conv2d":
        c = shape[1]
        k = int(rng.choice([1, 2, 3, 3, 5]))
        groups = [g for g in (1, 2, 3, 4) if c % g == 0]
        g = int(rng.choice(groups))
        cout = g * int(rng.choice([1, 2, 3, 4, 8, 16]))
        want, fan_in = (cout, c // g, k, k), c // g * k * k
    else:
        fits = [i for i, s in enumerate(shapes) if _bcast([shape, s], ()) is not None and s != () and i != a]
        if fits and rng.random() < 0.5:
            return fits[rng.integers(len(fits))], None
        want = tuple(1 if rng.random() < 0.3 else d for d in shape)[int(rng.integers(len(shape) + 1)) if shape else 0 :]
        fan_in = 1
    nodes.append(_new_input(want, fan_in))
    shapes.append(want)
    return len(nodes) - 1, (g if kind == "conv2d" else None)


def random_shape(rng: np.random.Generator) -> Shape:
    ndim = int(rng.choice([1, 2, 2, 3, 4, 4]))
    while True:
        s = tuple(int(rng.choice(DIMS)) for _ in range(ndim))
        if math.prod(s) <= MAX_NUMEL // 4:
            return s


def random_graph(seed: int, n_ops: int = 6) -> Graph:
    """A random graph of about `n_ops` ops whose last node is the output; seeded, so a test can name it by seed."""
    rng = np.random.default_rng(seed)
    nodes = [_new_input(random_shape(rng))]
    shapes = [nodes[0].params[0]]
    kinds = list(OPS)
    weights = np.array([OPS[k].weight for k in kinds])
    tries = 0
    while sum(nd.kind != "input" for nd in nodes) < n_ops and tries < 200:
        tries += 1
        kind = OPS[kinds[rng.choice(len(kinds), p=weights / weights.sum())]]
        # prefer recent nodes so graphs are deep rather than wide
        a = len(nodes) - 1 - min(int(rng.geometric(0.5)) - 1, len(nodes) - 1)
        params = kind.gen(rng, shapes[a])
        if params is None:
            continue
        trial_nodes, trial_shapes = list(nodes), list(shapes)
        args = (a,)
        if kind.arity == 2:
            b, groups = _second_operand(rng, kind.name, a, trial_nodes, trial_shapes)
            if groups is not None:
                params = (*params[:3], groups)
            args = (a, b)
        s = kind.shape([trial_shapes[i] for i in args], params)
        # NOTE: a new operand (a matmul's weight) is bounded like every node, or the graph is not valid
        if s is None or any(math.prod(x) > MAX_NUMEL or 0 in x for x in [*trial_shapes[len(shapes) :], s]):
            continue
        nodes, shapes = trial_nodes + [Node(kind.name, args, params)], trial_shapes + [tuple(s)]
    return prune(Graph(tuple(nodes), seed))


# ***** evaluation *****


def input_names(g: Graph) -> list[str]:
    return [n for n, nd in zip(g.names(), g.nodes) if nd.kind == "input"]


def run_specgrad(g: Graph, device: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """The output and the gradient of sum(out * w) for every input, computed by specgrad on `device`."""
    xs = g.inputs()
    env = {"Tensor": Tensor}
    ins = [Tensor(x, device=device, requires_grad=True) for x in xs]
    env.update(zip(input_names(g), ins))
    for name, expr in g.lines("sg"):
        env[name] = eval(expr, env)
    out = env[g.names()[-1]]
    w = loss_weight(g)
    (out * Tensor(w.astype(np.float32), device=device)).sum().backward()
    return out.numpy(), [t.grad.numpy() if t.grad is not None else np.zeros_like(x) for t, x in zip(ins, xs)]


def loss_weight(g: Graph) -> np.ndarray:
    return np.random.default_rng(g.seed + 1).standard_normal(g.shapes()[-1]).astype(np.float32).astype(np.float64)


def run_torch(g: Graph, dtype) -> tuple[np.ndarray, list[np.ndarray]]:
    xs = g.inputs()
    env = {"torch": torch, "F": F}
    ins = [torch.tensor(x, dtype=dtype, requires_grad=True) for x in xs]
    env.update(zip(input_names(g), ins))
    for name, expr in g.lines("th"):
        env[name] = eval(expr, env)
    out = env[g.names()[-1]]
    (out * torch.tensor(loss_weight(g), dtype=dtype)).sum().backward()
    grads = [t.grad.double().numpy() if t.grad is not None else np.zeros(x.shape) for t, x in zip(ins, xs)]
    return out.detach().double().numpy(), grads


def np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = x - x.max(axis, keepdims=True)
    return m - np.log(np.exp(m).sum(axis, keepdims=True))


def np_conv2d(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dil: int, groups: int) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    ho, wo = (h - dil * (kh - 1) - 1) // stride + 1, (wd - dil * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, co, ho, wo))
    xg, wgt = x.reshape(n, groups, cg, h, wd), w.reshape(groups, co // groups, cg, kh, kw)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dil, i * dil + stride * (ho - 1) + 1, stride)
            cols = slice(j * dil, j * dil + stride * (wo - 1) + 1, stride)
            patch = xg[:, :, :, rows, cols]
            out += np.einsum("ngchw,goc->ngohw", patch, wgt[:, :, :, i, j]).reshape(n, co, ho, wo)
    return out


def run_numpy(g: Graph, xs: list[np.ndarray] | None = None) -> np.ndarray:
    """The float64 forward in numpy (of the graph's own inputs, or of `xs`), the reference where torch is missing."""
    env = {"np": np, "np_softmax": np_softmax, "np_log_softmax": np_log_softmax, "np_conv2d": np_conv2d}
    env.update(zip(input_names(g), [x.astype(np.float64) for x in (g.inputs() if xs is None else xs)]))
    for name, expr in g.lines("np"):
        env[name] = eval(expr, env)
    return np.asarray(env[g.names()[-1]], dtype=np.float64)


# NOTE: tolerances are relative to each tensor's magnitude. float32 rounds each op by 6e-8; a K=128 dot product or
# sum piles up at most K*6e-8 = 8e-6 of the sum of |terms|, and the graph's chain of up to ~8 ops (softmax, exp,
# 1/(x*x+1)) can multiply that tenfold, so 2e-3 of (|ref| + max|ref|) keeps >20x headroom over rounding while a wrong
# index, tile remainder or dropped partial sum misses by O(1) of the tensor's scale. The absolute floor covers tensors
# that are exactly zero in float64 and rounding noise in float32 (gradients through softmax sum to zero).
RTOL, ATOL = 2e-3, 1e-5


def worst(got: np.ndarray, want: np.ndarray) -> float:
    """How far `got` is from `want` in units of the tolerance (> 1 is a mismatch; NaN and shape errors are inf)."""
    if got.shape != want.shape:
        return math.inf
    err = np.abs(got.astype(np.float64) - want)
    if not np.all(np.isfinite(err)):
        return math.inf
    tol = RTOL * (np.abs(want) + (np.abs(want).max() if want.size else 0)) + ATOL
    return float((err / tol).max()) if err.size else 0.0


def compare(g: Graph, got, want) -> str | None:
    """The first place `got` misses `want` (both (out, grads)), or None."""
    if (r := worst(got[0], want[0])) > 1:
        return f"forward off by {r:.3g}x the tolerance"
    for i, (a, b) in enumerate(zip(got[1], want[1] or [])):
        if (r := worst(a, b)) > 1:
            return f"gradient of x{i} off by {r:.3g}x the tolerance"
    return None


def reference(g: Graph):
    """float64 (out, grads) from torch autograd, or (out, None) from numpy without torch."""
    return run_torch(g, torch.float64) if torch is not None else (run_numpy(g), None)


def directional_miss(g: Graph, grads: list[np.ndarray]) -> str | None:
    """Without torch, the gradients against float64 finite differences of the numpy forward, one random direction v
    per input: <grad, v> against (L(x + hv) - L(x - hv)) / 2h for L = sum(out * w). Two forwards per input, so every
    gradient is checked on every graph; a NaN, a dropped or doubled term shows as O(1) of the sum's scale."""
    xs, w = [x.astype(np.float64) for x in g.inputs()], loss_weight(g)
    rng = np.random.default_rng(g.seed + 2)
    h = 1e-6
    for i, (x, grad) in enumerate(zip(xs, grads)):
        v = rng.standard_normal(x.shape)
        step = [*xs[:i], x + h * v, *xs[i + 1 :]], [*xs[:i], x - h * v, *xs[i + 1 :]]
        fd = float(((run_numpy(g, step[0]) - run_numpy(g, step[1])) * w).sum() / (2 * h))
        dot = float((grad.astype(np.float64) * v).sum())
        tol = RTOL * (float(np.abs(grad * v).sum()) + abs(fd)) + ATOL
        if not abs(dot - fd) <= tol:  # NOTE: written so that a NaN fails
            return f"gradient of x{i} off: <grad, v> = {dot:.6g}, finite differences {fd:.6g} (tolerance {tol:.3g})"
    return None


def mismatch(g: Graph, device: str) -> str | None:
    """Why specgrad on `device` disagrees with the float64 reference on `g`, or None. A miss counts only when float32
    torch meets the same tolerance, so an ill-conditioned graph (a relu or max flipped by rounding) is not a bug."""
    want = reference(g)
    try:
        got = run_specgrad(g, device)
    except Exception as e:  # noqa: BLE001 - an engine crash on a valid graph is a finding too
        return f"specgrad raised {type(e).__name__}: {e}"
    why = compare(g, got, want)
    if torch is None:
        return why or directional_miss(g, got[1])
    if why is None:
        return why
    return None if compare(g, run_torch(g, torch.float32), want) is not None else why


# ***** shrinking *****


def prune(g: Graph) -> Graph:
    """Drop the nodes the output does not read, renumbering the rest."""
    live = {len(g.nodes) - 1}
    for i in range(len(g.nodes) - 1, -1, -1):
        if i in live:
            live.update(g.nodes[i].args)
    keep = sorted(live)
    index = {old: new for new, old in enumerate(keep)}
    return replace(g, nodes=tuple(replace(g.nodes[i], args=tuple(index[a] for a in g.nodes[i].args)) for i in keep))


def _candidates(g: Graph):
    """Smaller graphs, biggest cuts first: an earlier output, an op replaced by an input or bypassed, smaller dims."""
    shapes = g.shapes()
    n = len(g.nodes)
    for k in range(n - 1):
        if g.nodes[k].kind != "input":
            yield prune(replace(g, nodes=g.nodes[: k + 1]))
    for i, nd in enumerate(g.nodes):
        if nd.kind == "input":
            continue
        yield prune(replace(g, nodes=(*g.nodes[:i], _new_input(shapes[i]), *g.nodes[i + 1 :])))
        for a in nd.args:
            if shapes[a] == shapes[i]:
                nodes = [replace(m, args=tuple(a if x == i else x for x in m.args)) for m in g.nodes]
                yield prune(replace(g, nodes=tuple(nodes[:i] + [_new_input((1,))] + nodes[i + 1 :])))
    dims = sorted({d for nd in g.nodes if nd.kind == "input" for d in nd.params[0] if d > 1}, reverse=True)
    for d in dims:
        for smaller in sorted({1, 2, d // 2, d - 1} - {d}):
            yield _resize(g, lambda s, d=d, smaller=smaller: tuple(smaller if x == d else x for x in s))
    for i, nd in enumerate(g.nodes):
        if nd.kind == "input":
            for ax, d in enumerate(nd.params[0]):
                for smaller in sorted({1, d // 2, d - 1} - {d, 0}):
                    s = (*nd.params[0][:ax], smaller, *nd.params[0][ax + 1 :])
                    yield replace(g, nodes=(*g.nodes[:i], replace(nd, params=(s, nd.params[1])), *g.nodes[i + 1 :]))
    for i, nd in enumerate(g.nodes):
        if nd.kind in ("conv2d",) and nd.params != (1, 0, 1, nd.params[3]):
            for simpler in ((1, *nd.params[1:]), (nd.params[0], 0, *nd.params[2:]), (*nd.params[:2], 1, nd.params[3])):
                yield replace(g, nodes=(*g.nodes[:i], replace(nd, params=simpler), *g.nodes[i + 1 :]))
    if g.seed != 0:
        yield replace(g, seed=0)


def _resize(g: Graph, f: Callable) -> Graph:
    """`g` with every input shape mapped through `f`."""
    nodes = [replace(nd, params=(f(nd.params[0]), nd.params[1])) if nd.kind == "input" else nd for nd in g.nodes]
    return replace(g, nodes=tuple(nodes))


def shrink(g: Graph, fails: Callable[[Graph], bool], budget: int = 300) -> Graph:
    """Greedily take the first smaller valid graph that still fails, until none does (or `budget` tries are spent)."""
    tried: set[Graph] = set()
    progress = True
    while progress and budget > 0:
        progress = False
        for c in _candidates(g):
            if c in tried or c.shapes() is None or c == g:
                continue
            tried.add(c)
            budget -= 1
            if fails(c):
                g, progress = c, True
                break
            if budget <= 0:
                break
    return g


def size(g: Graph) -> tuple[int, int]:
    shapes = g.shapes() or []
    return sum(nd.kind != "input" for nd in g.nodes), sum(math.prod(s) for s in shapes)
