"""Validate a spec in stages, reporting every problem of a stage with file:line:col: YAML (with extends, --set and
vars), keys, types and ranges of every section and layer, then shapes through the whole model (nothing is
allocated or run), then the memory budget.

Imports errors, files, loader, resolve, schema, layers and graph (all in modelspec).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specgrad.flags import SPEC_MEMORY_GB
from specgrad.helpers import prod
from specgrad.modelspec.auto import Auto, DataWidths, find_autos, misplaced, placeheld, unresolved, with_widths
from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.files import RELATIVE_HINT, check_regular, named_file
from specgrad.modelspec.graph import (
    Step,
    block_problems,
    graph_nodes,
    infer,
    name_problem,
    sequential_nodes,
    use_problems,
)
from specgrad.modelspec.layers import Shape
from specgrad.modelspec.loader import YNode
from specgrad.modelspec.resolve import resolve
from specgrad.modelspec.schema import REQUIRED, Field, Section, check_section, describe, did_you_mean, with_defaults
from specgrad.modelspec.weights import INIT, check_weights

FORMAT_VERSION = 1
MAX_NAME = 100  # NOTE: characters of a spec's name; it is a folder name, and file systems allow 255 bytes
NAME_MAX = 255  # NOTE: bytes in one name on the file systems specgrad writes to (ext4, XFS, APFS, NTFS in UTF-16 less)
# NOTE: the most specgrad appends to a name: a sweep folder <name>-sweep-<n> (a run folder's -<n> is shorter), with
# room for a 9-digit n; multibyte letters can make 100 characters 400 bytes, so the name's UTF-8 bytes count too
LONGEST_SUFFIX = "-sweep-999999999"
MAX_NAME_BYTES = NAME_MAX - len(LONGEST_SUFFIX)
DTYPES = ("float32", "float16", "int32", "int64", "uint8", "bool")


def is_float(dtype: str) -> bool:
    """An input dtype with fractions (float32, float16); the others hold whole numbers (bool: 0 and 1), such as token
    ids and index codes, which are never standardized."""
    return dtype in ("float32", "float16")


INPUT = Section("input", "the shape of one example", {
    "shape": Field("list", "axis lengths of one example, without the batch axis; or auto (input: only): from csv or "
                           "npz data", REQUIRED,
                   item=Field("int", "an axis length", REQUIRED, min=1, max=1 << 20)),
    "dtype": Field("str", "element type", "float32", choices=DTYPES)})  # fmt: skip

SOURCES = ("digits", "text", "csv", "npz", "images", "spirals", "sine")
TASKS = ("classify", "regress")
ENCODINGS = ("one_hot", "index")  # NOTE: how a categorical csv column is given to the model (data.categorical)
DELIMITERS = (",", ";", "\t", "|")  # NOTE: what data.delimiter may be, and what is sniffed when it is not given
MISSING_VALUES = ("", "NA", "N/A", "NaN", "?", "null")  # NOTE: a csv's missing cells, compared case-insensitively
STRATEGIES = ("drop_row", "mean", "median", "mode")  # NOTE: what fills a missing csv cell, besides {fill: VALUE}
FLOAT32_MAX = 3.4028234663852886e38  # NOTE: the largest float32 (numpy is not imported here)
AUGMENT = Section("augment", "random changes to each training example, drawn anew every step from the seed (never to "
                  "validation examples)", {
    "crop": Field("int", "pad each image by this many pixels on every side and cut a random window of its own size "
                         "back out (images of shape [channels, height, width]; 0: off)", 0, min=0, max=1 << 10),
    "flip": Field("bool", "mirror each image left to right with probability 1/2 (images of shape [channels, height, "
                          "width])", False),
    "noise": Field("float", "add Gaussian noise of this standard deviation to every input value (in the units of the "
                            "normalized input; float inputs)", 0.0, min=0.0, max=100.0)})  # fmt: skip
DATA = Section("data", "where examples come from and how they are batched", {
    "source": Field("str", "digits (bundled 8x8 images), text (characters of a text file), csv, npz (a .npz with "
                           "arrays x and y, or a .npy of inputs; for a model with several inputs or outputs, an array "
                           "per input and per output, named after them), images (a folder with one sub-folder of PNG "
                           "or JPEG files per class), spirals or sine (generated)", REQUIRED, choices=SOURCES),
    "path": Field("str", "the file for text, csv and npz sources, the folder for images (relative to the spec's "
                         "folder)", None),
    "corpus": Field("str", "a bundled text instead of a path, for the text source", None, choices=("sonnets",)),
    "context": Field("int", "characters per example, for the text source", None, min=1, max=1 << 16),
    "features": Field("list", "csv columns fed to the model", None, item=Field("str", "a column name", REQUIRED)),
    "categorical": Field("map", "csv columns holding categories, column: encoding; one_hot gives one value per "
                                "category (1 for the row's, 0 for the others), index one whole-number code for an "
                                "embedding; the categories are the training split's distinct values, sorted, and are "
                                "saved with the weights", None),
    "target": Field("str", "the csv column, npz array or .npy file the model learns to predict; input to rebuild "
                           "the input (an autoencoder)", None),
    "task": Field("str", "what a csv or npz target is: classify (class labels: text, or whole numbers 0, 1, 2, ...) "
                         "or regress (numbers to predict); left out: classify for a csv column holding text or an "
                         "npz array of integers, regress otherwise", None, choices=TASKS),
    "resize": Field("bool", "scale every image to the input's height and width (images source; without it an image "
                            "of another size is an error)", False),
    "augment": Field("map", "random changes to training examples: crop, flip, noise (none: no changes)", None,
                     section=AUGMENT),
    "samples": Field("int", "how many examples a generated source makes", 1000, min=1, max=10_000_000),
    "noise": Field("float", "noise added by a generated source", 0.0, min=0.0, max=100.0),
    "valid_split": Field("float", "fraction of examples held out for validation", 0.2, min=0.0, max=0.9),
    "test_split": Field("float", "fraction of examples held out for testing: never trained on or validated with, "
                                "read only by specgrad evaluate --split test", 0.0, min=0.0, max=0.9),
    "test_path": Field("str", "a file of test examples in data.path's format (a folder for images), read with the "
                              "training split's statistics, vocabularies and classes; only by specgrad evaluate "
                              "--split test", None),
    "batch_size": Field("int", "examples per training step", 32, min=1, max=1 << 16),
    "shuffle": Field("bool", "shuffle the training examples every epoch", True),
    "normalize": Field("bool", "scale inputs by statistics of the training split", True),
    "normalize_target": Field("bool", "standardize regression targets by statistics of the training split (losses, "
                                      "metrics and predictions are still reported in the target's own units)", True),
    "delimiter": Field("str", "what separates a csv's cells: ',', ';', '\\t' (a tab, written in double quotes) or "
                              "'|' (none: sniffed from the header and the first rows; validate prints it)", None,
                       choices=DELIMITERS),
    "decimal": Field("str", "the decimal mark of a csv's numbers: '.' or ',' (3,5; the cells then separated by ';' "
                            "or tabs); thousands separators (1,234.5) are refused", ".", choices=(".", ",")),
    "missing_values": Field("list", "the csv cells that are missing, compared case-insensitively once spaces are "
                                    "stripped ('' is an empty cell)", list(MISSING_VALUES),
                            item=Field("str", "a cell's text", REQUIRED)),
    "missing": Field("any", "what fills a missing cell of a csv feature: drop_row (the row is left out), mean or "
                            "median (numeric columns; a categorical column takes its mode), mode (the most frequent "
                            "value), or {fill: VALUE}; computed on the training rows and saved with the weights "
                            "(none: a missing cell is an error; a missing target always drops its row)", None),
    "missing_columns": Field("map", "column: strategy, as data.missing, for single csv columns (over data.missing; "
                                    "mean and median for numeric columns only)", None),
    "split_seed": Field("int", "seed of the validation and test split alone (none: the spec's seed); with it given, "
                               "runs of different seeds train and validate on the same examples", None, min=0,
                        max=2**32 - 1),
    "stratify": Field("bool", "keep each class's share of the examples in the validation and test splits (to within "
                              "one example per class), for class labels of a single-output model; false: a plain "
                              "random split", True),
    "class_names": Field("list", "names of whole-number class labels, in label order (label k is name k): shown by "
                                 "run, evaluate and the exports instead of the numbers", None,
                         item=Field("str", "a class name", REQUIRED)),
})  # fmt: skip
# NOTE: which data keys each source needs (cross-field check)
SOURCE_NEEDS = {"text": (("path", "corpus"), "context"), "csv": ("path", "target"), "npz": ("path",),
                "images": ("path",)}  # fmt: skip

OPTIMIZER_NAMES = ("sgd", "adam", "adamw")
EXPORTS = ("safetensors", "onnx", "c")
# NOTE: the validation metrics, and whether higher is better: losses and errors fall, the rest rise. topK (K in
# TOP_K_RANGE) is the top-k accuracy; precision, recall and f1 are macro averages over the classes
METRICS = {"loss": False, "accuracy": True, "mae": False, "rmse": False, "r2": True, "precision": True,
           "recall": True, "f1": True, "auc": True}  # fmt: skip
TOP_K_RANGE = (2, 100)
METRIC_WORDS = f"{', '.join(METRICS)} or topK (top-k accuracy, such as top5; K from {TOP_K_RANGE[0]} to " \
               f"{TOP_K_RANGE[1]})"  # fmt: skip


def top_k(name: str) -> int | None:
    """k of a top-k accuracy's name ('top5' -> 5), else None."""
    m = re.fullmatch(r"top([1-9][0-9]*)", name)
    return int(m.group(1)) if m and TOP_K_RANGE[0] <= int(m.group(1)) <= TOP_K_RANGE[1] else None


def is_metric(name: str) -> bool:
    """A validation metric's name, of the whole model or (<output>.<metric>) of one output."""
    base = name.rpartition(".")[2]
    return base in METRICS or top_k(base) is not None


def higher_is_better(name: str) -> bool:
    base = name.rpartition(".")[2]
    return METRICS.get(base, top_k(base) is not None)


EARLY_STOPPING = Section("early_stopping", "stop when a validation metric stops improving", {
    "metric": Field("str", f"the metric watched (it also picks the best epoch): {METRIC_WORDS}; lower is better for "
                           "loss, mae and rmse, higher for the others", "loss"),
    "patience": Field("int", "epochs without improvement before stopping", 5, min=1, max=10_000),
    "min_delta": Field("float", "the smallest change that counts as improvement", 0.0, min=0.0)})  # fmt: skip
CHECKPOINT = Section("checkpoint", "when checkpoints are written and how many are kept", {
    "every_epochs": Field("int", "write a checkpoint every this many epochs", 1, min=1, max=1_000_000),
    "keep": Field("int", "how many recent checkpoints to keep", 3, min=1, max=1000),
    "keep_best": Field("bool", "also keep the checkpoint with the best validation metric", True)})  # fmt: skip
SCHEDULES = ("constant", "step", "exponential", "cosine")
LOSSES = ("cross_entropy", "mse", "mae", "huber", "binary_cross_entropy")
REGRESSION_LOSSES = ("mse", "mae", "huber")  # NOTE: the others learn class labels
LOSS_WORDS = ("cross_entropy (class labels), binary_cross_entropy (two classes, one output logit), mse, mae or huber "
              "(numbers)")  # fmt: skip
LOSS = Section("loss", "one output's loss and its share of the total", {
    "loss": Field("str", f"what training minimises for this output: {LOSS_WORDS}", REQUIRED, choices=LOSSES),
    "weight": Field("float", "the output's weight in the total loss, the weighted sum of every output's loss", 1.0,
                    min=0.0, max=1e6)})  # fmt: skip
TRAIN = Section("train", "how the model is trained", {
    "epochs": Field("int", "passes over the training data", 10, min=1, max=1_000_000),
    "steps": Field("int", "training steps in all (instead of epochs)", None, min=1, max=1 << 40),
    "loss": Field("str", f"what training minimises (a model with one output): {LOSS_WORDS}", "cross_entropy",
                  choices=LOSSES),
    "huber_delta": Field("float", "where the huber loss turns from squared to linear, in the target's units", 1.0,
                         min=1e-6, max=1e6),
    "class_weights": Field("any", "each class's weight in cross_entropy or binary_cross_entropy (a model with one "
                                  "output): balanced (n / (classes * count of the class) in the training split), or "
                                  "class: weight (classes not named weigh 1; none: all 1)", None),
    "losses": Field("map", "a loss per output, for a model with several: output name -> {loss, weight}; training "
                           "minimises the weighted sum (none: train.loss for the one output)", None),
    "optimizer": Field("str", "the update rule", "adam", choices=OPTIMIZER_NAMES),
    "lr": Field("float", "learning rate", 1e-3, min=0.0, max=10.0),
    "momentum": Field("float", "momentum (sgd)", 0.0, min=0.0, max=1.0),
    "nesterov": Field("bool", "Nesterov momentum (sgd)", False),
    "weight_decay": Field("float", "weight decay", 0.0, min=0.0, max=1.0),
    "schedule": Field("str", "how the learning rate changes over training", "constant", choices=SCHEDULES),
    "warmup_steps": Field("int", "steps of linear warm-up before the schedule", 0, min=0, max=1 << 30),
    "step_size": Field("int", "epochs between decays (step schedule)", 10, min=1, max=1_000_000),
    "gamma": Field("float", "decay factor (step and exponential schedules)", 0.1, min=0.0, max=1.0),
    "min_lr": Field("float", "the learning rate cosine decays to", 0.0, min=0.0, max=10.0),
    "clip_grad_norm": Field("float", "largest allowed global gradient norm (none: no clipping)", None, min=0.0),
    "log_every": Field("int", "write the training loss to metrics.jsonl every this many steps", 10, min=1,
                       max=1_000_000),
    "metrics": Field("list", "validation metrics reported each epoch besides the loss (and a classifier's accuracy, "
                             f"a mse regression's rmse): {METRIC_WORDS}; those that do not fit an output's task are "
                             "left out", ["accuracy"], item=Field("str", "a metric", REQUIRED)),
    "early_stopping": Field("map", "stop when a validation metric stops improving (none: never)", None,
                            section=EARLY_STOPPING),
    "checkpoint": Field("map", "checkpoint cadence", None, section=CHECKPOINT),
    "final_weights": Field("str", "which weights model.safetensors keeps: best (the epoch with the best validation "
                           "metric, early_stopping.metric or loss) or last", "best", choices=("best", "last")),
})  # fmt: skip

TOP = Section("spec", "a model, its data and its training recipe", {
    "specgrad": Field("int", f"format version of the spec; this specgrad reads {FORMAT_VERSION}", REQUIRED,
                      choices=(FORMAT_VERSION,)),
    "name": Field("str", "a name for the model, also its run folders' name (runs/<name>-<n>): letters, digits, '-', "
                         f"'_' and '.', starting with a letter, digit or '_', at most {MAX_NAME} characters "
                         f"({MAX_NAME_BYTES} bytes in UTF-8)", REQUIRED),
    "seed": Field("int", "seed for initial weights, data order and dropout", 0, min=0, max=2**32 - 1),
    "description": Field("str", "free text", None),
    "extends": Field("str", "a spec file to start from (relative to this file's folder); keys here are merged over it",
                     None),
    "vars": Field("map", "named values, used elsewhere as $name or in arithmetic such as 4 * $d", {}),
    "input": Field("map", "the shape of one example (a model with one input)", None, section=INPUT),
    "inputs": Field("map", "named inputs of a graph model: name -> {shape, dtype}", None),
    "blocks": Field("map", "reusable pieces of graph: name -> {params, graph}", {}),
    "model": Field("any", "a list of layers applied in order, or {graph: [nodes], outputs: [names]}", REQUIRED),
    "data": Field("map", "the data", None, section=DATA),
    "train": Field("map", "the training recipe", None, section=TRAIN),
    "init": Field("map", INIT.description, None, section=INIT),
    "export": Field("list", "formats written after training", [],
                    item=Field("str", "an export format", REQUIRED, choices=EXPORTS))})  # fmt: skip


GRAPH_MODEL = Section("model", "a graph model", {
    "graph": Field("list", "the nodes, each taking inputs or nodes above it", REQUIRED),
    "outputs": Field("list", "the nodes whose values the model returns", REQUIRED,
                     item=Field("str", "a node name", REQUIRED))})  # fmt: skip


@dataclass(frozen=True)
class ValidSpec:
    """A spec that passed every stage: its values with defaults filled in, its inputs, the expanded steps, and the
    resolved tree (after extends, vars and --set) with every value's location, so that what comes after (data,
    training, run, export) points at the spec's own lines without reading it again."""

    path: str
    values: dict[str, Any]
    inputs: dict[str, tuple[Shape, str]]  # name -> (shape of one example, dtype)
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]
    batch_size: int
    root: YNode = field(repr=False, compare=False)
    resolved: tuple[str, ...] = field(default=(), compare=False)  # what each `auto` became, in words (validate)

    def node(self, *keys: str) -> YNode | None:
        """The value at `keys` as written (located), or None where the spec does not write it."""
        node: YNode | None = self.root
        for k in keys:
            node = node.get(k) if node is not None and node.kind == "map" else None
        return node

    @property
    def params(self) -> int:
        return sum(s.params for s in self.steps)

    @property
    def trainable_params(self) -> int:
        """Parameters training changes: those of layers without trainable: false (a tied weight counts with the layer
        it belongs to)."""
        return sum(s.params for s in self.steps if s.args.get("trainable", True))

    @property
    def flops_per_example(self) -> int:
        return sum(s.flops for s in self.steps)

    @property
    def activation_bytes(self) -> int:
        """Values kept for backward in one training batch (float32): each layer's output, and the inner values of
        attention, mlp and recurrent layers."""
        return 4 * self.batch_size * sum(s.saved for s in self.steps)

    @property
    def step_flops(self) -> int:
        """Forward and backward of one batch (backward is about twice the forward)."""
        return 3 * self.batch_size * self.flops_per_example

    @property
    def losses(self) -> dict[str, tuple[str, float]]:
        """Each output's loss and weight: train.losses, or train.loss with weight 1 for a model with one output."""
        given = self.values["train"]["losses"]
        if not given:
            return {self.outputs[0]: (self.values["train"]["loss"], 1.0)}
        return {o: (given[o]["loss"], float(given[o].get("weight", LOSS.fields["weight"].default))) for o in
                self.outputs}  # fmt: skip

    def output_shape(self, name: str) -> Shape:
        return next(s.out_shape for s in self.steps if s.name == name)

    def vocabulary(self, name: str) -> int | None:
        """How many token ids input `name` may hold (0..n-1): the smallest vocab of the embeddings that read it, or
        None when none does."""
        vocabs = [int(s.args["vocab"]) for s in self.steps if s.what == "embedding" and name in s.srcs]
        return min(vocabs) if vocabs else None


def _init_shorthand(root: YNode) -> YNode:
    """`init: PATH` (a run folder or a weights file) is `init: {from: PATH}`: one spelling for everything after."""
    init = root.get("init")
    if init is None or init.kind != "scalar" or not isinstance(init.value, str):
        return root
    whole = YNode({"from": init}, init.loc, "map", key_locs={"from": init.loc})
    return YNode({**root.value, "init": whole}, root.loc, "map", root.text, root.quoted, root.key_locs)


def validate_file(
    path: str | Path,
    overrides: Sequence[str] = (),
    data_files: bool = True,
    batch: int | None = None,
    init_file: bool | None = None,
    widths: Callable[[ValidSpec, list[Auto]], DataWidths] | None = None,
) -> ValidSpec:
    """Every problem of the first stage that has any, as one SpecError; otherwise the validated spec. With data_files
    False a missing data file is no problem (running or exporting trained weights does not read it); init_file (by
    default as data_files) says whether the init: file is read and checked (a resumed run loads its checkpoint
    instead). `batch` replaces the spec's data.batch_size for the cost figures and the memory check (validate --batch;
    a spec without a data section has no batch of its own). `widths` reads the data for the widths a spec leaves to
    it (input.shape: auto, out: auto: train.data.data_widths; it reads the data even with data_files False); without
    it each auto is a problem that says the data is not read."""
    root = resolve(path, overrides)
    if root.kind != "map":
        raise SpecError([Problem(f"a spec is a mapping of keys like specgrad:, name:, model:, got {describe(root)}",
                                 root.loc)])  # fmt: skip
    root = _init_shorthand(root)
    autos, problems = find_autos(root)
    root = placeheld(root, autos) if autos else root
    problems += check_section(root, TOP, "")
    inputs, found = _inputs(root)
    blocks, block_problems = _blocks(root.get("blocks"))
    problems += found + block_problems
    problems += _check_data(root.get("data"), data_files, str(path)) + _check_name(root.get("name"))
    problems += _check_needs_validation(root) + _check_splits(root) + _loss_entries(root.get("train"))
    problems += _metric_entries(root.get("train")) + _class_weight_entries(root.get("train"))
    model = root.value.get("model")
    nodes, outputs = [], ()
    if model is not None:
        nodes, outputs, found = _model(model, blocks, root)
        problems += found
    _raise(problems + misplaced(autos, nodes, outputs, len(inputs)))
    resolved: tuple[str, ...] = ()
    if autos:  # NOTE: the data's widths in place of the placeholders, then every check again on the numbers
        root, resolved = _with_data_widths(root, autos, inputs, nodes, outputs, str(path), widths)
        inputs, _ = _inputs(root)
        nodes, outputs, _ = _model(root.value["model"], blocks, root) if model is not None else ([], (), [])
    variables = root.get("vars").value if root.get("vars") is not None and root.get("vars").kind == "map" else {}
    steps, shapes = infer(nodes, {k: (s, loc) for k, (s, _, loc) in inputs.items()}, blocks, variables)
    steps, problems = check_weights(tuple(steps), root.get("init"), str(path),
                                    data_files if init_file is None else init_file, run_steps)  # fmt: skip
    outputs = outputs or ((steps[-1].name,) if steps else ())
    _raise(problems + _check_losses(root, outputs))  # NOTE: the weights and the losses, checked together
    values = {k: with_defaults(root.value.get(k), f.section) if f.section else _plain(root, k, f)
              for k, f in TOP.fields.items()}  # fmt: skip
    spec = ValidSpec(str(path), values, {k: (s, d) for k, (s, d, _) in inputs.items()}, tuple(steps), outputs,
                     batch or (values["data"]["batch_size"] if "data" in root.value else 1), root,
                     resolved)  # fmt: skip
    _raise(_digits_problems(spec, root) + _budget_problems(spec, model.loc))
    return spec


def _with_data_widths(root: YNode, autos: list[Auto], inputs: dict, nodes: list, outputs: tuple[str, ...],
                      path: str, widths: Callable[[ValidSpec, list[Auto]], DataWidths] | None
                      ) -> tuple[YNode, tuple[str, ...]]:  # fmt: skip
    """The spec with its autos the data's numbers, read by `widths` from a provisional spec (its values checked, the
    model not yet inferred), and what each became, in words."""
    if widths is None:
        _raise(unresolved(autos))
    values = {k: with_defaults(root.value.get(k), f.section) if f.section else _plain(root, k, f)
              for k, f in TOP.fields.items()}  # fmt: skip
    shape_dtype = {k: (s, d) for k, (s, d, _) in inputs.items()}
    spec = ValidSpec(path, values, shape_dtype, (), outputs or tuple(n.name for n in nodes[-1:]), 1, root)
    got = widths(spec, autos)
    said = {"shape": f"input.shape: auto -> {list(got.shape)}", "out": f"out: auto -> {got.out}"}
    resolved = tuple(f"{said[a.what]} ({got.why[a.what]})" if a.what in got.why else said[a.what] for a in autos)
    return with_widths(root, autos, got), resolved


def run_steps(resolved: str) -> tuple[Step, ...]:
    """The steps of a run folder's spec.resolved.yaml, which name its weights (init.from a run folder)."""
    return validate_file(resolved, data_files=False, init_file=False).steps


def _plain(root: YNode, key: str, f: Field) -> Any:
    node = root.value.get(key)
    return node.to_plain() if node is not None else (None if f.required else f.default)


def _raise(problems: list[Problem]) -> None:
    if problems:
        raise SpecError(sorted(problems, key=lambda p: (p.loc.file, p.loc.line, p.loc.col) if p.loc else ("", 0, 0)))


def _inputs(root: YNode) -> tuple[dict[str, tuple[Shape, str, Location]], list[Problem]]:
    """name -> (shape, dtype, location): `input` (one, named 'input') or `inputs` (named), exactly one of them."""
    one, named = root.get("input"), root.get("inputs")
    if (one is None) == (named is None):
        return {}, [Problem("the spec needs exactly one of input: (one input) or inputs: (named inputs of a graph)",
                            root.loc)]  # fmt: skip
    if one is not None:
        return ({"input": _input(one)} if one.kind == "map" and not check_section(one, INPUT, "input") else {}), []
    if named.kind != "map":
        return {}, []
    problems = [p for k in named.value if (p := name_problem(k, (named.key_locs or {})[k], "the input")) is not None]
    problems += [p for k, v in named.value.items() for p in check_section(v, INPUT, f"inputs.{k}")]
    return ({k: _input(v) for k, v in named.value.items()} if not problems else {}), problems


def _input(node: YNode) -> tuple[Shape, str, Location]:
    values = with_defaults(node, INPUT)
    return tuple(values["shape"]), values["dtype"], node.loc


def _blocks(node: YNode | None) -> tuple[dict[str, YNode], list[Problem]]:
    if node is None or node.kind != "map":
        return {}, []
    return dict(node.value), block_problems(node.value)


def _model(model: YNode, blocks: dict[str, YNode], root: YNode) -> tuple[list, tuple[str, ...], list[Problem]]:
    """The model's nodes and outputs, and every problem of its structure: each node, each block node's use of its
    block (the problems of the blocks themselves are _blocks'), and each output."""
    if model.kind == "seq":
        if not model.value:
            return [], (), [Problem("model needs at least one layer", model.loc)]
        if "inputs" in root.value:
            return [], (), [Problem("a list of layers takes one input: use input:, or write the model as a graph",
                                    model.loc)]  # fmt: skip
        nodes, problems = sequential_nodes(model)
        return nodes, (), problems
    if model.kind != "map":
        return [], (), [Problem(f"model must be a list of layers or a graph, got {describe(model)}", model.loc)]
    problems = check_section(model, GRAPH_MODEL, "model")
    graph, outputs = model.get("graph"), model.get("outputs")
    if graph is None or graph.kind != "seq":
        return [], (), problems
    nodes, found = graph_nodes(graph, "model.graph", blocks)
    variables = root.get("vars").value if root.get("vars") is not None and root.get("vars").kind == "map" else {}
    problems += found + use_problems(nodes, blocks, variables)
    # NOTE: a node with its own problem is still a node: no second error for an output naming it
    names = {str(x.get("name").value) for x in graph.value
             if x.kind == "map" and x.get("name") is not None and x.get("name").kind == "scalar"}  # fmt: skip
    listed = outputs.value if outputs is not None and outputs.kind == "seq" else []
    outs = [x for x in listed if x.kind == "scalar" and isinstance(x.value, str)]
    problems += [Problem(f"output '{excerpt(x.value)}' is not a node of the graph", x.loc,
                         did_you_mean(x.value, list(names))) for x in outs if x.value not in names]  # fmt: skip
    return nodes, tuple(x.value for x in outs), problems


def _check_data(node: YNode | None, data_files: bool, spec: str) -> list[Problem]:
    """Cross-field: the keys the chosen source needs (one of a tuple of alternatives), each feature once, the
    categorical columns, and the file (or for images the folder) data.path names, in the folders `spec` may read."""
    if node is None or node.kind != "map" or not isinstance((source := node.get("source")), YNode):
        return []
    problems = []
    for need in SOURCE_NEEDS.get(str(source.value), ()):
        options = need if isinstance(need, tuple) else (need,)
        if not any(node.get(o) is not None and node.get(o).value is not None for o in options):  # NOTE: null: not given
            problems.append(Problem(f"data with source: {source.value} needs {' or '.join(options)}", source.loc))
    features = node.get("features")
    seen: dict[Any, int] = {}
    items = features.value if features is not None and features.kind == "seq" else []
    for item in (x for x in items if x.kind == "scalar"):
        if item.value in seen:
            problems.append(Problem(f"data.features lists '{item.value}' twice (first on line {seen[item.value]})",
                                    item.loc, "list each column once"))  # fmt: skip
        seen.setdefault(item.value, item.loc.line)
    problems += _check_categorical(node, [x.value for x in items if x.kind == "scalar"] if items else None)
    problems += _check_missing(node, [x.value for x in items if x.kind == "scalar"] if items else None)
    for key in ("path", "test_path"):
        path = node.get(key)
        if not data_files or path is None or not isinstance(path.value, str):
            continue
        named_in = spec if path.loc.file.startswith("--set") else path.loc.file  # NOTE: --set is relative to the spec
        full = str(Path(named_in).parent / path.value)
        try:  # NOTE: where the file is first: nothing outside the allowed folders is looked at
            real = named_file(path.value, named_in, spec, path.loc, f"data.{key}")
            if source.value == "images":
                check_folder(real, path.loc, full, f"data.{key}")
            else:
                check_regular(real, path.loc, f"data.{key}", full)
        except SpecError as e:
            problems += e.problems
    return problems


def _check_categorical(node: YNode, features: list[Any] | None) -> list[Problem]:
    """data.categorical: column -> one_hot or index; never the target; only features (when they are listed); index
    columns only with other index columns (their codes feed one embedding)."""
    cats, target = node.get("categorical"), node.get("target")
    if cats is None or cats.kind != "map":
        return []
    problems, index = [], []
    for name, value in cats.value.items():
        key_loc = (cats.key_locs or {}).get(name, value.loc)
        if value.kind != "scalar" or value.value not in ENCODINGS:
            hint = did_you_mean(str(value.value), ENCODINGS) if value.kind == "scalar" else None
            problems.append(Problem(f"data.categorical.{excerpt(str(name))} must be one of {', '.join(ENCODINGS)}; "
                                    f"got {describe(value)}", value.loc, hint))  # fmt: skip
        elif value.value == "index":
            index.append((name, value.loc))
        if target is not None and name == target.value:
            problems.append(Problem(f"data.categorical names the target column '{excerpt(str(name))}': a target "
                                    "holding text is read as class names already", key_loc,
                                    "remove it from categorical"))  # fmt: skip
        elif features is not None and name not in features:
            problems.append(Problem(f"data.categorical names the column '{excerpt(str(name))}', which data.features "
                                    "does not list: only the model's features are encoded", key_loc,
                                    "add it to data.features, or remove it from categorical"))  # fmt: skip
    others = [str(f) for f in features or [] if (cats.value.get(f) is None or cats.value[f].value != "index")]
    if index and others:
        problems.append(index_mix_problem(index[0][0], others, index[0][1]))
    return problems


def _check_missing(node: YNode, features: list[Any] | None) -> list[Problem]:
    """data.missing and data.missing_columns: a strategy or {fill: VALUE} each; columns that are features, never the
    target (a missing target drops its row); mean and median for numeric columns only; decimal ',' not with a ','
    delimiter."""
    default = node.get("missing")  # NOTE: null is the default: a missing cell is an error
    problems = strategy_problems(default, "data.missing") if default is not None and default.value is not None else []
    cols, target, cats = node.get("missing_columns"), node.get("target"), node.get("categorical")
    categorical = cats.value if cats is not None and cats.kind == "map" else {}
    for name, value in cols.value.items() if cols is not None and cols.kind == "map" else ():
        key_loc, where = (cols.key_locs or {}).get(name, value.loc), f"data.missing_columns.{excerpt(str(name))}"
        problems += strategy_problems(value, where)
        if target is not None and name == target.value:
            problems.append(Problem(f"data.missing_columns names the target column '{excerpt(str(name))}': a row "
                                    "whose target is missing is left out, never filled", key_loc,
                                    "remove it from missing_columns"))  # fmt: skip
        elif features is not None and name not in features:
            near = did_you_mean(str(name), [str(f) for f in features])
            problems.append(Problem(f"data.missing_columns names the column '{excerpt(str(name))}', which "
                                    "data.features does not list: only the model's features are filled", key_loc,
                                    near or "add it to data.features, or remove it from missing_columns"))  # fmt: skip
        elif name in categorical and value.kind == "scalar" and value.value in ("mean", "median"):
            problems.append(Problem(f"{where} is {value.value}, but the column is categorical: categories have no "
                                    f"{value.value}", value.loc, "use mode (the most frequent category), drop_row, "
                                    "or {fill: VALUE}"))  # fmt: skip
    decimal, delimiter = node.get("decimal"), node.get("delimiter")
    if decimal is not None and decimal.value == "," and delimiter is not None and delimiter.value == ",":
        problems.append(Problem("data.decimal is ',' and so is data.delimiter: a cell 3,5 would be two cells",
                                decimal.loc, "set data.delimiter: ';' (or a tab), as the file separates its "
                                "cells"))  # fmt: skip
    return problems


def strategy_problems(node: YNode, where: str) -> list[Problem]:
    """One of STRATEGIES, or {fill: VALUE} with a text or number VALUE."""
    if node.kind == "scalar" and node.value in STRATEGIES:
        return []
    fill = node.value.get("fill") if node.kind == "map" else None
    if node.kind == "map" and set(node.value) == {"fill"} and fill.kind == "scalar" and \
            isinstance(fill.value, (str, int, float)) and not isinstance(fill.value, bool):  # fmt: skip
        if not isinstance(fill.value, str) and not math.isfinite(fill.value):
            return [Problem(f"{where}.fill must be a finite number or a category, got {describe(fill)}", fill.loc)]
        if not isinstance(fill.value, str) and abs(fill.value) > FLOAT32_MAX:  # NOTE: the model reads float32
            return [Problem(f"{where}.fill is {fill.value:g}, beyond float32's range (about 3.4e38): the model would "
                            "read infinity", fill.loc, "fill with a number the column could hold")]  # fmt: skip
        if isinstance(fill.value, str) and not fill.value.strip():
            return [Problem(f"{where}.fill is empty: it would fill a missing cell with another one", fill.loc,
                            "fill with a number, or a category such as unknown")]  # fmt: skip
        return []
    if node.kind == "map" and set(node.value) == {"fill"}:  # NOTE: the key is right: what is wrong is its value
        return [Problem(f"{where}.fill must be a number or a category (text), got {describe(fill)}", fill.loc,
                        "e.g. {fill: 0}, or {fill: unknown} for a category")]  # fmt: skip
    hint = did_you_mean(str(node.value), STRATEGIES) if node.kind == "scalar" else None
    if node.kind == "map" and set(node.value) != {"fill"}:
        hint = "the one key is fill, e.g. {fill: 0}"
    return [Problem(f"{where} must be one of {', '.join(STRATEGIES)} or {{fill: VALUE}}; got {describe(node)}",
                    node.loc, hint or "e.g. missing: median, or missing: {fill: 0}")]  # fmt: skip


def index_mix_problem(column: str, others: list[str], loc: Location | None) -> Problem:
    """Index codes feed one embedding, so every feature must be an index column."""
    shown = ", ".join(excerpt(o, 40) for o in others[:5]) + (", ..." if len(others) > 5 else "")
    return Problem(f"data.categorical encodes '{excerpt(column, 40)}' as index, a whole-number code for an embedding, "
                   f"so every feature must be an index column, but the features also hold {shown}", loc,
                   f"encode '{excerpt(column, 40)}' as one_hot (which mixes with numbers), or list only index columns "
                   "in data.features")  # fmt: skip


def check_folder(real: str, loc: Location | None, shown: str, key: str, missing_hint: str = RELATIVE_HINT) -> None:
    """The images source reads a folder (its files are checked one by one as they are read)."""
    if not os.path.lexists(real):
        raise SpecError.at(loc, f"{key}: no such folder: {shown}", missing_hint)
    if not os.path.isdir(real):
        raise SpecError.at(loc, f"{key}: {shown} is not a folder, but source images reads a folder with one "
                           "sub-folder of images per class",
                           "name the folder that holds the class folders")  # fmt: skip


def _check_name(node: YNode | None) -> list[Problem]:
    """The name becomes a folder name (runs/<name>-<n>): one safe path component, never a way out of --out."""
    if node is None or not isinstance(name := node.value, str):
        return []
    why = None
    if not name:
        why = "is empty"
    elif len(name) > MAX_NAME:
        why = f"is {len(name)} characters long, over {MAX_NAME}"
    elif len(encoded := name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        why = (f"is {len(encoded)} bytes long in UTF-8 ({len(name)} characters, some of several bytes), over "
               f"{MAX_NAME_BYTES} (a file system takes {NAME_MAX} bytes in a name, and a sweep folder adds "
               f"'{LONGEST_SUFFIX[:-9]}<n>')")  # fmt: skip
    elif bad := [c for c in name if not (c.isalnum() or c in "-_.")]:
        why = f"holds {bad[0]!r}" + (", a path separator" if bad[0] in "/\\" else "")
    elif name[0] in ".-":
        why = f"starts with '{name[0]}'"
    if why is None:
        return []
    return [Problem(f"name {why}: it names the run folders (runs/<name>-<n>), so it must be one plain folder name",
                    node.loc, f"use letters, digits, '-', '_' and '.', starting with a letter, digit or '_', at most "
                    f"{MAX_NAME} characters; for example my-model_2")]  # fmt: skip


def _metric_entries(train: YNode | None) -> list[Problem]:
    """train.metrics and train.early_stopping.metric name metrics (never a loss: `mae` is a metric, not 'mse'); which
    fit the data's task is checked once the data is read."""
    if train is None or train.kind != "map":
        return []
    listed = train.get("metrics")
    nodes = [(f"train.metrics[{i}]", x) for i, x in enumerate(listed.value)] if listed is not None and \
        listed.kind == "seq" else []  # fmt: skip
    stop = train.get("early_stopping")
    if stop is not None and stop.kind == "map" and stop.get("metric") is not None:
        nodes.append(("train.early_stopping.metric", stop.get("metric")))
    return [Problem(f"{where} must be a metric: {METRIC_WORDS}; got {describe(x)}", x.loc,
                    did_you_mean(str(x.value), [*METRICS, "top5"]))
            for where, x in nodes if x.kind == "scalar" and isinstance(x.value, str) and not (
                is_metric(x.value) if where.endswith("early_stopping.metric") else x.value in METRICS or
                top_k(x.value) is not None)]  # fmt: skip


def _class_weight_entries(train: YNode | None) -> list[Problem]:
    """train.class_weights is balanced or class: weight (a number 0 or more); which classes exist, the data says."""
    node = train.get("class_weights") if train is not None and train.kind == "map" else None
    if node is None or node.value is None or (node.kind == "scalar" and node.value == "balanced"):
        return []
    hint = "write class_weights: balanced, or a weight per class, e.g. {yes: 3.0, no: 1.0}"
    if node.kind != "map":
        return [Problem(f"train.class_weights must be balanced or a mapping class: weight, got {describe(node)}",
                        node.loc, did_you_mean(str(node.value), ["balanced"]) or hint)]  # fmt: skip
    bad = [(k, v) for k, v in node.value.items() if v.kind != "scalar" or isinstance(v.value, bool) or
           not isinstance(v.value, (int, float)) or not 0 <= v.value <= 1e6]  # fmt: skip
    return [Problem(f"train.class_weights.{excerpt(str(k))} must be a number from 0 to 1000000, got {describe(v)}",
                    v.loc) for k, v in bad]  # fmt: skip


def _loss_entries(train: YNode | None) -> list[Problem]:
    """Each entry of train.losses is {loss, weight} (which outputs they name is checked once the outputs are known)."""
    losses = train.get("losses") if train is not None and train.kind == "map" else None
    if losses is None or losses.kind != "map":
        return []
    return [p for k, v in losses.value.items() for p in check_section(v, LOSS, f"train.losses.{excerpt(str(k))}")]


def _check_losses(root: YNode, outputs: tuple[str, ...]) -> list[Problem]:
    """train.losses names every output of the model once, and no other name; it replaces train.loss. A model with
    several outputs and data to train on needs it."""
    train, model = root.get("train"), root.get("model")
    losses = train.get("losses") if train is not None and train.kind == "map" else None
    if losses is None or losses.value is None:
        if len(outputs) > 1 and root.get("data") is not None:
            where = model.get("outputs") if model is not None and model.kind == "map" else None
            first = f"{outputs[0]}: {{loss: cross_entropy}}, {outputs[1]}: {{loss: mse, weight: 0.5}}"
            return [
                Problem(
                    f"the model has {len(outputs)} outputs ({', '.join(outputs)}), so training needs a loss "
                    "for each of them",
                    (where or root).loc,
                    f"add train.losses, e.g. losses: {{{first}}}",
                )
            ]
        return []
    names, problems = list(losses.value), []
    for name in names:
        if name not in outputs:
            loc = losses.key_locs[name] if losses.key_locs else losses.loc
            hint = did_you_mean(str(name), list(outputs)) or f"the outputs are {', '.join(outputs)}"
            problems.append(Problem(f"train.losses names '{excerpt(str(name))}', which is not an output of the model",
                                    loc, hint))  # fmt: skip
    missing = [o for o in outputs if o not in names]
    if missing:
        problems.append(Problem(f"train.losses gives no loss for the output{'s' * (len(missing) > 1)} "
                                f"{', '.join(missing)}: every output needs one", losses.loc,
                                f"add {missing[0]}: {{loss: mse}} (or cross_entropy for class labels)"))  # fmt: skip
    if train.get("loss") is not None:
        problems.append(Problem("train.loss and train.losses are both given: with losses, each output's loss is "
                                "written there", train.get("loss").loc, "remove train.loss"))  # fmt: skip
    weights = [v.get("weight") for v in losses.value.values()]
    if weights and all(w is not None and w.value == 0 for w in weights):
        problems.append(Problem("every output's weight in train.losses is 0, so there would be nothing to learn",
                                losses.loc, "give at least one output a weight above 0"))  # fmt: skip
    return problems


def _check_splits(root: YNode) -> list[Problem]:
    """The test examples come from one place, and the validation and test fractions together leave examples to train
    on."""
    data = root.get("data")
    if data is None or data.kind != "map" or (test := data.get("test_split")) is None:
        return []
    if data.get("test_path") is not None and test.value != 0:
        both = "data has both test_split and test_path: the test examples come from one of them"
        return [Problem(both, test.loc, "keep test_path (a file of test examples) and remove test_split, or the other "
                        "way round")]  # fmt: skip
    valid = data.get("valid_split")
    fractions = [n.value for n in (valid, test) if n is not None]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in fractions) or sum(fractions) < 0.95:
        return []
    return [Problem(f"data.valid_split and data.test_split hold out {sum(fractions):g} of the examples together, "
                    "which leaves too few to train on", test.loc,
                    "keep their sum below 0.95, for example valid_split: 0.2 and test_split: 0.1")]  # fmt: skip


def _check_needs_validation(root: YNode) -> list[Problem]:
    """valid_split 0 leaves no validation examples: early stopping, and best weights asked for by name, need some."""
    data, train = root.get("data"), root.get("train")
    split = data.get("valid_split") if data is not None and data.kind == "map" else None
    if split is None or split.value != 0 or isinstance(split.value, bool) or train is None or train.kind != "map":
        return []
    problems, stop, final = [], train.get("early_stopping"), train.get("final_weights")
    if stop is not None and stop.kind == "map":
        problems.append(Problem("train.early_stopping watches the validation examples, but data.valid_split is 0, so "
                                "training would never stop early", stop.loc,
                                "set data.valid_split (for example 0.2), or remove early_stopping"))  # fmt: skip
    if final is not None and final.value == "best":
        problems.append(Problem("train.final_weights: best keeps the epoch with the best validation metric, but "
                                "data.valid_split is 0, so there are no validation examples to pick it by", final.loc,
                                "set data.valid_split (for example 0.2), or write final_weights: last (without "
                                "final_weights, the last weights are kept)"))  # fmt: skip
    return problems


def _digits_problems(spec: ValidSpec, root: YNode) -> list[Problem]:
    """The bundled digits are 64 pixels per example: the input shape must hold exactly 64 values."""
    if spec.values["data"]["source"] == "digits" and "input" in spec.inputs:
        shape = spec.inputs["input"][0]
        if prod(shape) != 64:
            loc = root.value["input"].value["shape"].loc
            return [Problem(f"the digits are 8x8 = 64 values per example, but input.shape {list(shape)} holds "
                            f"{prod(shape)}", loc, "use [1, 8, 8], [8, 8] or [64]")]  # fmt: skip
    return []


def _budget_problems(spec: ValidSpec, loc: Location) -> list[Problem]:
    """Activations of one batch plus weights, gradients and two Adam moments (float32) must fit SPEC_MEMORY_GB."""
    frozen = spec.params - spec.trainable_params  # NOTE: a frozen weight has no gradient and no optimizer state
    need, budget = spec.activation_bytes + 16 * spec.trainable_params + 4 * frozen, int(SPEC_MEMORY_GB) << 30
    if need <= budget:
        return []
    return [Problem(f"one training step needs about {need / 2**30:.1f} GiB (activations of a batch of "
                    f"{spec.batch_size} plus {spec.params:,} parameters), over the {budget / 2**30:.0f} GiB budget",
                    loc, "use a smaller batch_size or fewer or narrower layers, or raise the budget with "
                    "SPEC_MEMORY_GB=<GiB>")]  # fmt: skip
