"""Export a built spec model as an ONNX graph that computes what `specgrad run` computes: a graph input per spec
input (batch axis "batch"), the model's tensors as float32 initializers named by their state-dict keys, and nodes for
each step (each layer kind's lowering is its `onnx` in the registry, modelspec.layers). Given the weights' metadata (a
task), the graph also standardizes a float input with the training statistics and ends in named outputs: "logits" and
"probabilities" (softmax over the last axis) for a classifier or a language model, "prediction" (in the target's
units) for a regression; the task, class names and statistics go into the model's metadata_props. Without a task the
outputs are the spec's, as the model computes them. The model takes a csv's columns encoded, as `run` encodes them;
where training filled missing cells (data.missing, the fills in the metadata's `columns`), a NaN at a numeric column's
value becomes its fill before standardizing (IsNaN, And a constant mask of the filled positions, Where), as `run` fills
a missing cell; a NaN elsewhere stays NaN for the caller's checks, and a missing category is passed as its fill's
one-hot. A model without a numeric fill gets no such nodes.

Imports numpy, nn.state and modelspec (errors, graph, layers, builder, validate); onnx inside export_onnx (optional).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from specgrad.helpers import atomic_write
from specgrad.modelspec.builder import Model
from specgrad.modelspec.contract import Columns, RunContract, contract_from_meta
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.graph import Step
from specgrad.modelspec.layers import LAYERS
from specgrad.modelspec.ops import OPS
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
    g = OnnxGraph(onnx, get_state_dict(model), opset)
    h = onnx.helper
    inputs = []
    for name, (shape, dtype) in spec.inputs.items():
        if name in contract.outputs:
            raise SpecError.at(None, f"the input '{name}' of {spec.path} has the name of an output of a "
                               f"{contract.task} export", "rename the input")  # fmt: skip
        g.types[name] = h.np_dtype_to_tensor_dtype(np.dtype(dtype))
        inputs.append(h.make_tensor_value_info(name, g.types[name], ["batch", *shape]))
        g.scope, x = name, name
        if (fills := _fills(contract.columns, shape, dtype)) is not None:
            x = g.values[name] = _fill_missing(g, name, *fills)
        norm = contract.inputs.get(name) if contract.task == "multi" else contract.norm
        if norm:
            g.values[name] = _standardize(g, x, norm)
    g.values.update({s.name: f"{s.name}/value" for s in spec.steps if s.name in contract.outputs})
    for i, step in enumerate(spec.steps):
        g.scope = step.name
        _export_step(g, step, f"steps.{i}.1.")  # NOTE: Model.steps holds (name, layer) pairs: key steps.<i>.1.<attr>
    if contract.task == "multi":
        ends = [end for o, head in contract.heads.items() for end in _finish(g, spec, head, o, f"{o}.")]
    elif contract.task:
        ends = _finish(g, spec, contract, spec.outputs[0])
    else:
        ends = [(o, spec.output_shape(o)) for o in spec.outputs]
    outputs = [h.make_tensor_value_info(o, g.types[o], ["batch", *shape]) for o, shape in ends]
    graph = h.make_graph(g.nodes, spec.values.get("name") or "specgrad", inputs, outputs, list(g.inits.values()))
    opsets = [h.make_opsetid("", opset)]
    proto = h.make_model(graph, opset_imports=opsets, producer_name="specgrad")
    proto.ir_version = h.find_min_ir_version_for(opsets)  # NOTE: the oldest IR that works, for older runtimes
    if contract.task:
        h.set_model_props(proto, _props(contract, meta or {}))
    onnx.checker.check_model(proto, full_check=True)
    atomic_write(Path(path), proto.SerializeToString())


def _fills(columns: Columns | None, shape: tuple[int, ...], dtype: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(the positions of an encoded example that training filled, each one's fill) as the input's shape and dtype, for
    the numeric csv columns with a fill (data.missing); None when there is none, so such a model's graph is as
    before. A categorical column's fill is a category: it comes encoded, as `run` encodes a missing cell of it."""
    if columns is None or columns.is_index:
        return None
    mask, fills = np.zeros(columns.width, bool), np.zeros(columns.width, np.float64)
    for f, (at, enc, _) in zip(columns.features, columns.slots()):
        if enc is None and columns.fill(f) is not None:
            mask[at], fills[at] = True, float(columns.fill(f))
    # NOTE: through float32, as `run` reads a csv's cells, then the input's dtype (a float16 input holds float16)
    return (mask.reshape(shape), fills.astype(np.float32).astype(dtype).reshape(shape)) if mask.any() else None


def _fill_missing(g: OnnxGraph, x: str, mask: np.ndarray, fills: np.ndarray) -> str:
    """A NaN at a position that has a fill becomes the fill, as `run` fills a missing cell; a NaN anywhere else stays
    NaN (a column training did not fill, a drop_row one, a one-hot value), for the caller's checks to see."""
    where = g.node("And", g.node("IsNaN", x, dtype=g.boolean), g.const(mask, bool), dtype=g.boolean)
    return g.node("Where", where, g.const(fills, fills.dtype), x, dtype=g.types[x])


def _standardize(g: OnnxGraph, x: str, stats: dict[str, np.ndarray]) -> str:
    """(x - mean) / std in float32, as `specgrad run` prepares a float input; cast back when x is not float32."""
    y = g.node("Div", g.node("Sub", g.to_float(x), g.const(stats["mean"])), g.const(stats["std"]))
    return y if g.types[x] == g.float32 else g.node("Cast", y, to=g.types[x], dtype=g.types[x])


def _finish(g: OnnxGraph, spec: ValidSpec, c: RunContract, o: str, prefix: str = ""
            ) -> list[tuple[str, tuple[int, ...]]]:  # fmt: skip
    """The task's named outputs (each `prefix`ed) after the model's output `o`: (value name, shape without the batch
    axis)."""
    g.scope = f"{prefix}output"
    y, shape = g.to_float(g.values.get(o, o)), spec.output_shape(o)
    if c.task in ("classify", "language"):
        logits = g.node("Identity", y, out=f"{prefix}logits")
        if shape[-1] == 1:  # NOTE: one logit (binary_cross_entropy): the probability of the second class
            g.node("Sigmoid", logits, out=f"{prefix}probabilities")
        else:
            g.node("Softmax", logits, out=f"{prefix}probabilities", axis=-1)
    elif c.target:
        g.node("Add", g.node("Mul", y, g.const(c.target["std"])), g.const(c.target["mean"]), out=f"{prefix}prediction")
    else:
        g.node("Identity", y, out=f"{prefix}prediction")
    return [(prefix + name, shape) for name in c.outputs]


def _props(c: RunContract, meta: dict[str, str]) -> dict[str, str]:
    """metadata_props: the task, the statistics as the weights hold them, the class names of a classifier, and the csv
    columns the model reads with each categorical one's vocabulary (the model takes them encoded, as `run` does)."""
    props = {"task": str(c.task), "normalization": meta.get("normalization") or "{}"}
    if c.task == "multi":
        props["outputs"] = meta.get("outputs") or "{}"
    if c.task == "regress":
        props["target_normalization"] = meta.get("target_normalization") or "{}"
    if c.task == "classify":
        props["class_names"] = json.dumps(list(c.class_names))
    return {**props, **{k: meta[k] for k in ("name", "spec_hash", "columns") if meta.get(k)}}


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise RuntimeError("ONNX export needs the onnx package: pip install 'specgrad[onnx]'") from None
    return onnx


class OnnxGraph:
    """The nodes, initializers and element type of every value, collected step by step; each layer kind's ONNX
    lowering (in the registry, modelspec.layers) adds its nodes through node(), param(), const() and to_float()."""

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

    @property
    def boolean(self) -> int:
        return self.onnx.TensorProto.BOOL

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


def _export_step(g: OnnxGraph, s: Step, prefix: str) -> None:
    srcs, out = [g.values.get(x, x) for x in s.srcs], g.values.get(s.name, s.name)
    if s.kind == "layer":
        LAYERS[s.what].onnx(g, s, prefix, srcs[0], out)
    else:
        OPS[s.what].onnx(g, s, srcs, out)
