"""Validate a spec in stages, reporting every problem of a stage with file:line:col: YAML, keys and types, ranges,
the model's layers, then shapes through the whole model (nothing is allocated or run), then the budget.

Imports spec.errors, spec.loader, spec.schema and spec.layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specgrad.helpers import prod
from specgrad.spec.errors import Location, Problem, SpecError
from specgrad.spec.layers import LAYERS, LayerDef, Shape, ShapeMismatch
from specgrad.spec.loader import YNode, load_yaml
from specgrad.spec.schema import REQUIRED, Field, Section, check_section, describe, did_you_mean, with_defaults

FORMAT_VERSION = 1
DTYPES = ("float32", "float16", "int32", "int64", "uint8", "bool")
MEMORY_BUDGET_BYTES = 4 << 30  # NOTE: activations and parameters of one training step must fit this machine's RAM

INPUT = Section("input", "the shape of one example", {
    "shape": Field("list", "axis lengths of one example, without the batch axis", REQUIRED,
                   item=Field("int", "an axis length", REQUIRED, min=1, max=1 << 20)),
    "dtype": Field("str", "element type", "float32", choices=DTYPES)})  # fmt: skip

DATA = Section("data", "where examples come from and how they are batched", {
    "source": Field("str", "a bundled dataset", REQUIRED, choices=("digits",)),
    "valid_split": Field("float", "fraction of examples held out for validation", 0.2, min=0.0, max=0.9),
    "batch_size": Field("int", "examples per training step", 32, min=1, max=1 << 16),
    "shuffle": Field("bool", "shuffle the training examples every epoch", True),
    "normalize": Field("bool", "scale inputs by statistics of the training split", True)})  # fmt: skip

OPTIMIZER_NAMES = ("sgd", "adam", "adamw")
EXPORTS = ("safetensors", "onnx", "c")
TRAIN = Section("train", "how the model is trained", {
    "epochs": Field("int", "passes over the training data", 10, min=1, max=1_000_000),
    "loss": Field("str", "what training minimises", "cross_entropy", choices=("cross_entropy", "mse")),
    "optimizer": Field("str", "the update rule", "adam", choices=OPTIMIZER_NAMES),
    "lr": Field("float", "learning rate", 1e-3, min=0.0, max=10.0),
    "weight_decay": Field("float", "weight decay", 0.0, min=0.0, max=1.0),
    "clip_grad_norm": Field("float", "largest allowed global gradient norm (none: no clipping)", None, min=0.0),
    "metrics": Field("list", "what is reported each epoch", ["accuracy"],
                     item=Field("str", "a metric", REQUIRED, choices=("accuracy", "loss")))})  # fmt: skip

TOP = Section("spec", "a model, its data and its training recipe", {
    "specgrad": Field("int", f"format version of the spec; this specgrad reads {FORMAT_VERSION}", REQUIRED,
                      choices=(FORMAT_VERSION,)),
    "name": Field("str", "a name for the model (used for run folders)", REQUIRED),
    "seed": Field("int", "seed for initial weights, data order and dropout", 0, min=0, max=2**32 - 1),
    "description": Field("str", "free text", None),
    "input": Field("map", "the shape of one example", REQUIRED, section=INPUT),
    "model": Field("list", "the layers, applied in order", REQUIRED),
    "data": Field("map", "the data", None, section=DATA),
    "train": Field("map", "the training recipe", None, section=TRAIN),
    "export": Field("list", "formats written after training", [],
                    item=Field("str", "an export format", REQUIRED, choices=EXPORTS))})  # fmt: skip


@dataclass(frozen=True)
class LayerRow:
    """One line of the summary: a layer with its arguments and what it does to the shape."""

    index: int
    name: str
    args: dict[str, Any]
    loc: Location
    in_shape: Shape
    out_shape: Shape
    params: int
    flops: int


@dataclass(frozen=True)
class ValidSpec:
    """A spec that passed every stage: its values with defaults filled in, and the per-layer summary."""

    path: str
    values: dict[str, Any]
    rows: tuple[LayerRow, ...]
    batch_size: int

    @property
    def params(self) -> int:
        return sum(r.params for r in self.rows)

    @property
    def flops_per_example(self) -> int:
        return sum(r.flops for r in self.rows)

    @property
    def activation_bytes(self) -> int:
        """Activations kept for backward in one training batch (float32)."""
        return 4 * self.batch_size * sum(prod(r.out_shape) for r in self.rows)

    @property
    def step_flops(self) -> int:
        """Forward and backward of one batch (backward is about twice the forward)."""
        return 3 * self.batch_size * self.flops_per_example


def validate_file(path: str | Path) -> ValidSpec:
    """Every problem of the first stage that has any, as one SpecError; otherwise the validated spec."""
    root = load_yaml(path)
    problems = check_section(root, TOP, "")
    model = root.value.get("model") if root.kind == "map" else None
    layers, layer_problems = _parse_layers(model) if model is not None and model.kind == "seq" else ([], [])
    _raise(problems + layer_problems)
    shape = tuple(root.value["input"].value["shape"].to_plain())
    rows = _infer_shapes(layers, shape, root.value["input"].loc)
    values = {k: with_defaults(root.value.get(k), f.section) if f.section else _plain(root, k, f)
              for k, f in TOP.fields.items()}  # fmt: skip
    batch = values["data"]["batch_size"]
    spec = ValidSpec(str(path), values, tuple(rows), batch)
    _check_budget(spec, root.value["model"].loc)
    return spec


def _plain(root: YNode, key: str, f: Field) -> Any:
    node = root.value.get(key)
    return node.to_plain() if node is not None else (None if f.required else f.default)


def _raise(problems: list[Problem]) -> None:
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.loc.line, p.loc.col) if p.loc else (0, 0)))


@dataclass(frozen=True)
class _Layer:
    name: str
    layer: LayerDef
    args: dict[str, Any]
    loc: Location


def _parse_layers(model: YNode) -> tuple[list[_Layer], list[Problem]]:
    """Each entry is a layer name (`relu`), or a one-key mapping of the name to its arguments or shorthand value."""
    problems: list[Problem] = []
    layers: list[_Layer] = []
    if not model.value:
        return [], [Problem("model needs at least one layer", model.loc)]
    for i, item in enumerate(model.value):
        where = f"model[{i}]"
        if item.kind == "scalar" and isinstance(item.value, str):
            name, args_node = item.value, None
        elif item.kind == "map" and len(item.value) == 1:
            name, args_node = next(iter(item.value.items()))
        else:
            problems.append(Problem(f"{where} must be a layer name or 'name: arguments', got {describe(item)}",
                                    item.loc, "write one layer per list item, e.g. '- linear: {out: 10}'"))  # fmt: skip
            continue
        if name not in LAYERS:
            problems.append(
                Problem(
                    f"unknown layer '{name}' in {where}",
                    item.loc,
                    did_you_mean(name, list(LAYERS)) or f"known layers: {', '.join(LAYERS)}",
                )
            )
            continue
        layer = LAYERS[name]
        args, arg_problems = _layer_args(layer, args_node, f"{where}.{name}", item.loc)
        problems += arg_problems
        layers.append(_Layer(name, layer, args, item.loc))
    return layers, problems


def _layer_args(layer: LayerDef, node: YNode | None, where: str, loc: Location) -> tuple[dict, list[Problem]]:
    section: Section = layer.entry.args
    if node is not None and node.kind == "scalar" and node.value is not None:
        if layer.entry.shorthand is None:
            return {}, [
                Problem(
                    f"{where} takes named arguments, got {describe(node)}",
                    node.loc,
                    f"write e.g. '{layer.entry.name}: {{...}}' with keys {', '.join(section.fields)}",
                )
            ]
        node = YNode({layer.entry.shorthand: node}, node.loc, "map", key_locs={layer.entry.shorthand: node.loc})
    if node is None or (node.kind == "scalar" and node.value is None):
        node = YNode({}, loc, "map", key_locs={})
    problems = check_section(node, section, where)
    return (with_defaults(node, section) if not problems else {}), problems


def _infer_shapes(layers: list[_Layer], shape: Shape, input_loc: Location) -> list[LayerRow]:
    rows, where_from = [], f"the input (line {input_loc.line})"
    for i, layer in enumerate(layers):
        try:
            out = layer.layer.infer(shape, layer.args)
        except ShapeMismatch as e:
            raise SpecError([Problem(f"layer {i} ({layer.name}) cannot take shape {list(shape)} from {where_from}: "
                                     f"it {e}", layer.loc)]) from None  # fmt: skip
        rows.append(LayerRow(i, layer.name, layer.args, layer.loc, shape, out, layer.layer.params(shape, layer.args),
                             layer.layer.flops(shape, out, layer.args)))  # fmt: skip
        shape, where_from = out, f"layer {i} ({layer.name}, line {layer.loc.line})"
    return rows


def _check_budget(spec: ValidSpec, loc: Location) -> None:
    need = spec.activation_bytes + 16 * spec.params  # NOTE: weights, gradients and two Adam moments, float32
    if need > MEMORY_BUDGET_BYTES:
        raise SpecError([Problem(f"one training step needs about {need / 2**30:.1f} GiB (activations of a batch of "
                                 f"{spec.batch_size} plus {spec.params:,} parameters), over the "
                                 f"{MEMORY_BUDGET_BYTES / 2**30:.0f} GiB budget", loc,
                                 "use a smaller batch_size or fewer or narrower layers")])  # fmt: skip
