"""Export a built spec model as an ONNX graph that computes what `specgrad run` computes: a graph input per spec
input (batch axis "batch"), the model's tensors as float32 initializers named by their state-dict keys, and nodes for
each step. Given the weights' metadata (a task), the graph also standardizes a float input with the training statistics
and ends in named outputs: "logits" and "probabilities" (softmax over the last axis) for a classifier or a language
model, "prediction" (in the target's units) for a regression; the task, class names and statistics go into the
model's metadata_props. Without a task the outputs are the spec's, as the model computes them.

Imports numpy, nn.state and spec (errors, graph, layers, builder, validate); onnx inside export_onnx (optional).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.helpers import atomic_write
from specgrad.modelspec.builder import Model
from specgrad.modelspec.contract import RunContract, contract_from_meta
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.graph import Step
from specgrad.modelspec.layers import ACTIVATIONS
from specgrad.modelspec.validate import ValidSpec
from specgrad.nn.state import get_state_dict

MIN_OPSET = 17  # NOTE: LayerNormalization arrived in opset 17


def export_onnx(spec: ValidSpec, model: Model, path: Path, opset: int = 17, meta: dict[str, str] | None = None) -> None:
    """Write `model` (built from `spec`) to `path` as a checked ONNX model, atomically; inference behaviour only.
    `meta` (the weights' metadata, with the task) adds what `specgrad run` applies around the model."""
    onnx = _import_onnx()
    if not MIN_OPSET <= opset <= onnx.defs.onnx_opset_version():
        raise ValueError(f"ONNX export supports opsets {MIN_OPSET} to {onnx.defs.onnx_opset_version()}, got {opset}")
    if len(model.steps) != len(spec.steps):
        raise ValueError(f"the model has {len(model.steps)} steps but the spec {spec.path} has {len(spec.steps)}: "
                         f"was it built from this spec?")  # fmt: skip
    contract = contract_from_meta(spec, meta)
    g = _Graph(onnx, get_state_dict(model), opset)
    h = onnx.helper
    inputs = []
    for name, (shape, dtype) in spec.inputs.items():
        if name in contract.outputs:
            raise SpecError.at(None, f"the input '{name}' of {spec.path} has the name of an output of a "
                               f"{contract.task} export", "rename the input")  # fmt: skip
        g.types[name] = h.np_dtype_to_tensor_dtype(np.dtype(dtype))
        inputs.append(h.make_tensor_value_info(name, g.types[name], ["batch", *shape]))
        if contract.norm:
            g.scope = name
            g.values[name] = _standardize(g, name, contract.norm)
    g.values.update({s.name: f"{s.name}/value" for s in spec.steps if s.name in contract.outputs})
    for i, step in enumerate(spec.steps):
        g.scope = step.name
        _export_step(g, step, f"steps.{i}.1.")  # NOTE: Model.steps holds (name, layer) pairs: key steps.<i>.1.<attr>
    ends = _finish(g, spec, contract) if contract.task else [(o, spec.output_shape(o)) for o in spec.outputs]
    outputs = [h.make_tensor_value_info(o, g.types[o], ["batch", *shape]) for o, shape in ends]
    graph = h.make_graph(g.nodes, spec.values.get("name") or "specgrad", inputs, outputs, list(g.inits.values()))
    opsets = [h.make_opsetid("", opset)]
    proto = h.make_model(graph, opset_imports=opsets, producer_name="specgrad")
    proto.ir_version = h.find_min_ir_version_for(opsets)  # NOTE: the oldest IR that works, for older runtimes
    if contract.task:
        h.set_model_props(proto, _props(contract, meta or {}))
    onnx.checker.check_model(proto, full_check=True)
    atomic_write(Path(path), proto.SerializeToString())


def _standardize(g: _Graph, x: str, stats: dict[str, np.ndarray]) -> str:
    """(x - mean) / std in float32, as `specgrad run` prepares a float input; cast back when x is not float32."""
    y = g.node("Div", g.node("Sub", g.to_float(x), g.const(stats["mean"])), g.const(stats["std"]))
    return y if g.types[x] == g.float32 else g.node("Cast", y, to=g.types[x], dtype=g.types[x])


def _finish(g: _Graph, spec: ValidSpec, c: RunContract) -> list[tuple[str, tuple[int, ...]]]:
    """The task's named outputs after the model's one output: (value name, shape without the batch axis)."""
    g.scope, o = "output", spec.outputs[0]
    y, shape = g.to_float(g.values.get(o, o)), spec.output_shape(o)
    if c.task in ("classify", "language"):
        g.node("Softmax", g.node("Identity", y, out="logits"), out="probabilities", axis=-1)
    elif c.target:
        g.node("Add", g.node("Mul", y, g.const(c.target["std"])), g.const(c.target["mean"]), out="prediction")
    else:
        g.node("Identity", y, out="prediction")
    return [(name, shape) for name in c.outputs]


def _props(c: RunContract, meta: dict[str, str]) -> dict[str, str]:
    """metadata_props: the task, the statistics as the weights hold them, and the class names of a classifier."""
    props = {"task": str(c.task), "normalization": meta.get("normalization") or "{}"}
    if c.task == "regress":
        props["target_normalization"] = meta.get("target_normalization") or "{}"
    if c.task == "classify":
        props["class_names"] = json.dumps(list(c.class_names))
    return {**props, **{k: meta[k] for k in ("name", "spec_hash") if meta.get(k)}}


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise RuntimeError("ONNX export needs the onnx package: pip install 'specgrad[onnx]'") from None
    return onnx


class _Graph:
    """The nodes, initializers and element type of every value, collected step by step."""

    def __init__(self, onnx: Any, state: dict[str, Any], opset: int):
        self.onnx, self.state, self.opset = onnx, state, opset
        self.nodes: list[Any] = []
        self.inits: dict[str, Any] = {}
        self.types: dict[str, int] = {}
        self.consts: dict[tuple, str] = {}
        self.values: dict[str, str] = {}  # a spec value's graph name where it differs (a standardized input, ...)
        self.scope = ""

    @property
    def float32(self) -> int:
        return self.onnx.TensorProto.FLOAT

    def node(self, op: str, *ins: str, out: str | None = None, dtype: int | None = None, **attrs: Any) -> str:
        """Add one node; its single output is `out` or a fresh name in the current step's scope (float32 unless
        told)."""
        out = out or f"{self.scope}/{op}_{len(self.nodes)}"
        self.nodes.append(self.onnx.helper.make_node(op, list(ins), [out], name=out, **attrs))
        self.types[out] = self.float32 if dtype is None else dtype
        return out

    def param(self, key: str) -> str:
        """A model tensor by its state-dict key, as a float32 initializer of the same name."""
        if key not in self.inits:
            arr = self.state[key].numpy().astype(np.float32)
            self.inits[key] = self.onnx.numpy_helper.from_array(arr, key)
        return key

    def has(self, key: str) -> bool:
        return key in self.state

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        """A constant initializer, shared by every use of the same value."""
        arr = np.asarray(value, dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self.consts:
            self.consts[key] = name = f"const_{len(self.consts)}"
            self.inits[name] = self.onnx.numpy_helper.from_array(arr, name)
        return self.consts[key]

    def to_float(self, x: str) -> str:
        # NOTE: specgrad promotes a non-float32 input of a weighted layer to float32; the export computes every
        # non-movement layer in float32 (a float16 activation then runs at higher precision than in specgrad)
        return x if self.types[x] == self.float32 else self.node("Cast", x, to=self.float32)


def _words(s: Step) -> str:
    return f"layer {s.name} ({s.what})" if s.name.isdigit() else f"node '{s.name}' ({s.what})"


def _export_step(g: _Graph, s: Step, prefix: str) -> None:
    table: dict[str, Callable[..., None]] = LAYER_EXPORTERS if s.kind == "layer" else OP_EXPORTERS
    if s.what not in table:
        raise SpecError.at(s.loc, f"{_words(s)} cannot be exported to ONNX: there is no ONNX form for {s.kind} "
                                  f"'{s.what}'", f"exportable {s.kind}s: {', '.join(table)}")  # fmt: skip
    srcs, out = [g.values.get(x, x) for x in s.srcs], g.values.get(s.name, s.name)
    if s.kind == "layer":
        table[s.what](g, s, prefix, srcs[0], out)
    else:
        table[s.what](g, s, srcs, out)


# *** layers: (graph, step, state-key prefix, input value, output value) ***


def _linear(g: _Graph, x: str, ndim: int, weight: str, bias: str, out: str | None = None) -> str:
    """x @ weight.T + bias: Gemm on (batch, features), MatMul and Add on more axes."""
    b = [g.param(bias)] if g.has(bias) else []
    if ndim == 2:
        return g.node("Gemm", x, g.param(weight), *b, out=out, transB=1)
    y = g.node("MatMul", x, g.node("Transpose", g.param(weight), perm=[1, 0]), out=None if b else out)
    return g.node("Add", y, b[0], out=out) if b else y


def _export_linear(g: _Graph, s: Step, p: str, x: str, out: str) -> None:
    _linear(g, g.to_float(x), len(s.in_shapes[0]) + 1, p + "weight", p + "bias", out)


def _export_conv2d(g: _Graph, s: Step, p: str, x: str, out: str) -> None:
    a = s.args
    b = [g.param(p + "bias")] if a["bias"] else []
    attrs = {"kernel_shape": [a["kernel"]] * 2, "strides": [a["stride"]] * 2, "pads": [a["padding"]] * 4,
             "dilations": [a["dilation"]] * 2, "group": a["groups"]}  # fmt: skip
    g.node("Conv", g.to_float(x), g.param(p + "weight"), *b, out=out, **attrs)


def _pool(op: str) -> Callable[[_Graph, Step, str, str, str], None]:
    def export(g: _Graph, s: Step, p: str, x: str, out: str) -> None:
        k = s.args["kernel"]
        stride = s.args["stride"] if s.args["stride"] is not None else k
        g.node(op, g.to_float(x), out=out, kernel_shape=[k, k], strides=[stride, stride])

    return export


def _export_reshape(g: _Graph, s: Step, p: str, x: str, out: str) -> None:
    g.node("Reshape", x, g.const([-1, *s.args["shape"]], np.int64), out=out, dtype=g.types[x])


def _export_batchnorm(g: _Graph, s: Step, p: str, x: str, out: str) -> None:
    stats = [g.param(p + k) for k in ("weight", "bias", "running_mean", "running_var")]
    g.node("BatchNormalization", g.to_float(x), *stats, out=out, epsilon=s.args["eps"])  # NOTE: eval mode


def _export_layernorm(g: _Graph, s: Step, p: str, x: str, out: str) -> None:
    g.node("LayerNormalization", g.to_float(x), g.param(p + "weight"), g.param(p + "bias"), out=out, axis=-1,
           epsilon=s.args["eps"])  # fmt: skip


def _export_embedding(g: _Graph, s: Step, p: str, x: str, out: str) -> None:
    tp = g.onnx.TensorProto
    if g.types[x] in (tp.FLOAT, tp.FLOAT16):
        raise SpecError.at(s.loc, f"{_words(s)} needs integer token ids, got a {tp.DataType.Name(g.types[x])} input")
    idx = x if g.types[x] in (tp.INT32, tp.INT64) else g.node("Cast", x, to=tp.INT64, dtype=tp.INT64)
    # TODO: specgrad's one-hot lookup gives zeros for ids outside [0, vocab); Gather rejects them (or counts from
    # the end when negative)
    g.node("Gather", g.param(p + "weight"), idx, out=out, axis=0)


def _export_attention(g: _Graph, s: Step, p: str, x: str, out: str) -> None:
    """nn.MultiHeadAttention: in projection, per-head scaled dot products (masked when causal), out projection."""
    (t, c), h = s.in_shapes[0], s.args["heads"]
    qkv = _linear(g, g.to_float(x), 3, p + "in_proj_weight", p + "in_proj_bias")  # (B, T, 3C)
    qkv = g.node("Reshape", qkv, g.const([-1, t, 3, h, c // h], np.int64))
    qkv = g.node("Transpose", qkv, perm=[2, 0, 3, 1, 4])  # (3, B, H, T, C/H)
    q, k, v = (g.node("Gather", qkv, g.const(i, np.int64), axis=0) for i in range(3))
    scores = g.node("MatMul", q, g.node("Transpose", k, perm=[0, 1, 3, 2]))
    scores = g.node("Mul", scores, g.const(1 / math.sqrt(c // h)))  # (B, H, T, T)
    if s.args["causal"]:
        scores = g.node("Add", scores, g.const(np.triu(np.full((t, t), -np.inf), 1)))
    y = g.node("MatMul", g.node("Softmax", scores, axis=-1), v)  # (B, H, T, C/H)
    y = g.node("Reshape", g.node("Transpose", y, perm=[0, 2, 1, 3]), g.const([-1, t, c], np.int64))
    _linear(g, y, 3, p + "out_proj.weight", p + "out_proj.bias", out)


def _export_mlp(g: _Graph, s: Step, p: str, x: str, out: str) -> None:
    ndim = len(s.in_shapes[0]) + 1
    hidden = _ACTIVATIONS[s.args["activation"]](g, _linear(g, g.to_float(x), ndim, p + "fc1.weight", p + "fc1.bias"))
    _linear(g, hidden, ndim, p + "fc2.weight", p + "fc2.bias", out)


# *** activations: (graph, float32 input value, output value or None for a fresh one) -> the output value ***


def _gelu(g: _Graph, x: str, out: str | None = None) -> str:
    if g.opset >= 20:
        return g.node("Gelu", x, out=out, approximate="tanh")
    # NOTE: Tensor.gelu's default, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
    cube = g.node("Mul", g.const(0.044715), g.node("Mul", g.node("Mul", x, x), x))
    inner = g.node("Mul", g.const(math.sqrt(2 / math.pi)), g.node("Add", x, cube))
    return g.node("Mul", g.node("Mul", g.const(0.5), x), g.node("Add", g.const(1.0), g.node("Tanh", inner)), out=out)


def _mish(g: _Graph, x: str, out: str | None = None) -> str:
    if g.opset >= 18:
        return g.node("Mish", x, out=out)
    return g.node("Mul", x, g.node("Tanh", g.node("Softplus", x)), out=out)


def _unary(op: str, **attrs: Any) -> Callable[[_Graph, str, str | None], str]:
    return lambda g, x, out=None: g.node(op, x, out=out, **attrs)


_ACTIVATIONS: dict[str, Callable[..., str]] = {
    "relu": _unary("Relu"),
    "gelu": _gelu,
    "tanh": _unary("Tanh"),
    "sigmoid": _unary("Sigmoid"),
    "silu": lambda g, x, out=None: g.node("Mul", x, g.node("Sigmoid", x), out=out),
    "softplus": _unary("Softplus"),
    "elu": _unary("Elu", alpha=1.0),
    "mish": _mish,
    "hardswish": _unary("HardSwish"),
    "relu6": lambda g, x, out=None: g.node("Clip", x, g.const(0.0), g.const(6.0), out=out),
}


def _activation(name: str) -> Callable[[_Graph, Step, str, str, str], None]:
    return lambda g, s, p, x, out: _ACTIVATIONS[name](g, g.to_float(x), out)


LAYER_EXPORTERS: dict[str, Callable[[_Graph, Step, str, str, str], None]] = {
    "linear": _export_linear,
    "conv2d": _export_conv2d,
    "maxpool": _pool("MaxPool"),
    "avgpool": _pool("AveragePool"),
    "flatten": lambda g, s, p, x, out: g.node("Flatten", x, out=out, dtype=g.types[x], axis=1),
    "reshape": _export_reshape,
    "dropout": lambda g, s, p, x, out: g.node("Identity", x, out=out, dtype=g.types[x]),  # NOTE: inference only
    "batchnorm": _export_batchnorm,
    "layernorm": _export_layernorm,
    "embedding": _export_embedding,
    "self_attention": _export_attention,
    "mlp": _export_mlp,
    "positional": lambda g, s, p, x, out: g.node("Add", g.to_float(x), g.param(p + "weight"), out=out),
    **{name: _activation(name) for name in ACTIVATIONS},
}


# *** ops: (graph, step, input values, output value) ***


def _inputs_of_one_type(g: _Graph, xs: list[str]) -> list[str]:
    return xs if len({g.types[x] for x in xs}) == 1 else [g.to_float(x) for x in xs]


def _chain(op: str) -> Callable[[_Graph, Step, list[str], str], None]:
    """A left fold, in the order Model applies add and mul."""

    def export(g: _Graph, s: Step, xs: list[str], out: str) -> None:
        xs = _inputs_of_one_type(g, xs)
        ret = xs[0]
        for i, x in enumerate(xs[1:], start=2):
            ret = g.node(op, ret, x, out=out if i == len(xs) else None, dtype=g.types[xs[0]])

    return export


def _export_concat(g: _Graph, s: Step, xs: list[str], out: str) -> None:
    xs, axis = _inputs_of_one_type(g, xs), s.args["axis"]
    g.node("Concat", *xs, out=out, dtype=g.types[xs[0]], axis=axis + 1 if axis >= 0 else axis)  # NOTE: batch axis


OP_EXPORTERS: dict[str, Callable[[_Graph, Step, list[str], str], None]] = {
    "add": _chain("Add"),
    "mul": _chain("Mul"),
    "concat": _export_concat,
}
