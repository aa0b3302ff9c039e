"""What `specgrad run` applies around a trained model, read from the weights' metadata that `specgrad train` writes:
the task, the csv columns a model reads and the vocabulary of each categorical one, the training split's input
statistics ((x - mean) / std before the model), the regression targets' statistics (y * std + mean after it) and the
class names. `run` and both exporters read it here, so they compute the same thing (the exporters take inputs already
encoded: one value per category of a one_hot column, one code per index column).

Imports numpy and modelspec.validate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specgrad.helpers import prod
from specgrad.modelspec.errors import excerpt
from specgrad.modelspec.validate import ENCODINGS, REGRESSION_LOSSES, STRATEGIES, ValidSpec, is_float

TASKS = ("classify", "regress", "language", "multi")  # NOTE: multi: several inputs or outputs, a contract per output
OUTPUTS = {"classify": ("logits", "probabilities"), "language": ("logits", "probabilities"), "regress": ("prediction",)}
TRAINS = {"classify": "a classifier", "regress": "a regression", "language": "a language model"}
NAMED_CLASSES = ("csv", "images")  # NOTE: sources whose classes have names in the data (a label column, folder names)
TINY = float(np.finfo(np.float32).tiny)  # NOTE: the smallest normal float32; training never writes a smaller std


class ContractError(ValueError):
    """The weights' metadata does not fit the spec's model (or is not what specgrad writes): bad input, never a bug."""


@dataclass(frozen=True)
class Columns:
    """The csv columns a model reads, in order, and how each categorical one is encoded with its vocabulary (the
    training split's distinct values, sorted): a one_hot column becomes one value per category (1 for the row's, 0 for
    the others), an index column one code, its category's position plus the number of categories of the index columns
    before it (so that one embedding of `width` codes reads every index column)."""

    features: tuple[str, ...]
    categorical: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # name -> (encoding, values)
    # NOTE: name -> (strategy, the cell's value that fills it: a number's repr or a category; None for drop_row), the
    # training rows' (data.missing, data.missing_columns), so that run, evaluate and the exports fill the same
    missing: dict[str, tuple[str, str | None]] = field(default_factory=dict)

    def fill(self, name: str) -> str | None:
        """What fills a missing cell of the column, or None (no strategy, or drop_row: nothing to fill it with)."""
        return self.missing[name][1] if name in self.missing else None

    @property
    def is_index(self) -> bool:
        """Every feature is an index column: the examples are integer codes."""
        return bool(self.features) and all(self.encoding(f) == "index" for f in self.features)

    def encoding(self, name: str) -> str | None:
        return self.categorical[name][0] if name in self.categorical else None

    def slots(self) -> list[tuple[int, str | None, dict[str, int]]]:
        """Per feature: (its first value's position in an example, its encoding or None for a number, its category ->
        code: the one_hot position after the first, or the index code)."""
        ret, at, codes = [], 0, 0
        for name in self.features:
            enc, values = self.categorical.get(name, (None, ()))
            first = codes if enc == "index" else 0
            ret.append((at, enc, {v: first + k for k, v in enumerate(values)}))
            at += len(values) if enc == "one_hot" else 1
            codes += len(values) if enc == "index" else 0
        return ret

    @property
    def width(self) -> int:
        """Values per example once encoded."""
        return sum(len(self.categorical[f][1]) if self.encoding(f) == "one_hot" else 1 for f in self.features)

    @property
    def codes(self) -> int:
        """How many index codes there are (the embedding's vocab must be at least this)."""
        return sum(len(self.categorical[f][1]) for f in self.features if self.encoding(f) == "index")

    def one_hot_mask(self) -> np.ndarray:
        """(width,) True at the values of one_hot columns (left as 0 and 1 by normalization)."""
        mask = np.zeros(self.width, bool)
        for at, enc, codes in self.slots():
            if enc == "one_hot":
                mask[at : at + len(codes)] = True
        return mask

    def explain(self) -> str:
        """How the width comes about, e.g. '3 numeric columns (a, b, c) + color (4 values) = 7 values per example'."""
        numbers = [f for f in self.features if f not in self.categorical]
        shown = ", ".join(numbers[:5]) + (", ..." if len(numbers) > 5 else "")
        parts = [f"{len(numbers)} numeric column{'s' * (len(numbers) != 1)} ({shown})"] if numbers else []
        for f in (f for f in self.features if f in self.categorical):
            n = len(self.categorical[f][1])
            parts.append(f"{f} ({n} value{'s' * (n != 1)}{', one code' if self.encoding(f) == 'index' else ''})")
        return f"{' + '.join(parts)} = {self.width} value{'s' * (self.width != 1)} per example"

    def to_meta(self) -> str:
        # NOTE: "missing" is left out when there is none, so weights without missing values keep their metadata
        missing = {k: {"strategy": m, "fill": v} for k, (m, v) in self.missing.items()}
        return json.dumps({"features": list(self.features),
                           "categorical": {k: {"encoding": e, "values": list(v)} for k, (e, v) in
                                           self.categorical.items()},
                           **({"missing": missing} if missing else {})})  # fmt: skip

    @staticmethod
    def from_meta(text: str) -> Columns:
        """The columns `to_meta` wrote; a ContractError when the metadata is not that."""
        value = _json({"columns": text}, "columns", None)
        try:
            features, cats = value["features"], value["categorical"]
            categorical = {k: (c["encoding"], tuple(c["values"])) for k, c in cats.items()}
            missing = {k: (m["strategy"], m["fill"]) for k, m in value.get("missing", {}).items()}
            ok = all(isinstance(f, str) for f in features) and all(
                e in ENCODINGS and k in features and all(isinstance(v, str) for v in vs)
                for k, (e, vs) in categorical.items()) and all(
                k in features and how in (*STRATEGIES, "fill") and (fill is None) == (how == "drop_row")
                and (fill is None or _fills(fill, categorical.get(k)))
                for k, (how, fill) in missing.items())  # fmt: skip
        except (KeyError, TypeError, AttributeError):
            ok = False
        if not ok:
            raise ContractError(f"the weights' columns ({text[:80]}) are not what specgrad writes")
        return Columns(tuple(features), categorical, missing)


def _fills(fill: Any, categorical: tuple[str, tuple[str, ...]] | None) -> bool:
    """A fill training writes: one of a categorical column's categories, else a finite number's text."""
    if categorical is not None or not isinstance(fill, str):
        return categorical is not None and fill in categorical[1]
    try:
        return math.isfinite(float(fill))
    except ValueError:
        return False


@dataclass(frozen=True)
class RunContract:
    """What `specgrad run` applies around the model, read from the weights' metadata: (x - mean) / std on a float
    input before it, and after it the softmax probabilities (classify, language) or y * std + mean (regress)."""

    task: str | None = None  # None: the model's own outputs, nothing around them
    norm: dict[str, np.ndarray] = field(default_factory=dict)  # "mean", "std" as the input's shape; empty: none
    target: dict[str, np.ndarray] = field(default_factory=dict)  # "mean", "std" as the output's shape; empty: none
    class_names: tuple[str, ...] = ()
    columns: Columns | None = None  # csv: the columns the model reads and the categorical vocabularies; None: unknown
    inputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # multi: input name -> its norm
    heads: dict[str, RunContract] = field(default_factory=dict)  # multi: output name -> its contract (task, target)

    @property
    def outputs(self) -> tuple[str, ...]:
        """The named outputs of an export: logits and probabilities, or prediction; <output>.<name> for each output
        of a model with several."""
        if self.task == "multi":
            return tuple(f"{o}.{n}" for o, c in self.heads.items() for n in c.outputs)
        return OUTPUTS[self.task] if self.task else ()


def contract_from_meta(spec: ValidSpec, meta: dict[str, str] | None) -> RunContract:
    """The contract in the metadata `specgrad train` writes (task, normalization, target_normalization, class_names);
    a ContractError names a key that does not fit the spec's model."""
    if not meta or not meta.get("task"):
        return RunContract()
    task = meta["task"]
    if task not in TASKS:
        raise ContractError(f"the weights' metadata names the task '{task[:40]}'; the exports know {', '.join(TASKS)}")
    several = len(spec.inputs) > 1 or len(spec.outputs) > 1
    if task == "multi" and not several:
        raise ContractError(f"the weights' task is multi (a model with several inputs or outputs), but {spec.path} "
                            "has one input and one output")  # fmt: skip
    if task == "multi":
        if meta.get("columns"):
            _check_columns(spec, None)
        return _named_contract(spec, meta)
    if several:
        raise ContractError(f"a {task} export needs one input and one output, but {spec.path} has inputs "
                            f"{', '.join(spec.inputs)} and outputs {', '.join(spec.outputs)}")  # fmt: skip
    ((in_shape, dtype),) = spec.inputs.values()
    norm = _stats(meta, "normalization", in_shape) if is_float(dtype) else {}  # NOTE: token ids stay ids
    columns = Columns.from_meta(meta["columns"]) if meta.get("columns") else None
    if columns is not None and (columns.width != prod(in_shape) or columns.is_index == is_float(dtype)):
        raise ContractError(f"the weights' columns give {columns.explain()}, but the model's input is {list(in_shape)} "
                            f"of {dtype}")  # fmt: skip
    if columns is not None:
        _check_columns(spec, columns)
    head = _head(task, spec.output_shape(spec.outputs[0]), meta, "")
    _check_task(spec, task)
    _check_unnamed(task, meta, "")
    return RunContract(task, norm, head.target, head.class_names, columns)


def _check_columns(spec: ValidSpec, columns: Columns | None) -> None:
    """The csv columns are those training reads for the spec: data.features in the spec's order (another order would
    feed each value to the weights of another column, a wrong number with exit 0), never the target, each once; the
    data.categorical columns with their encodings; vocabularies of distinct values, as the training rows give them
    (stripped, none empty). Training writes columns for a csv source only (`columns` None: a model with several
    inputs, whose data is an npz); a spec without data is taken at the weights' word."""
    data = spec.values.get("data") or {}
    if not data.get("source"):
        return
    if columns is None or data["source"] != "csv":
        raise ContractError(f"the weights' columns name csv columns, but {spec.path} reads source "
                            f"{excerpt(str(data['source']), 40)}: training writes columns for a csv source "
                            "only")  # fmt: skip
    features, target, categorical = data.get("features"), data.get("target"), data.get("categorical") or {}
    got = list(columns.features)
    if features and got != list(features):
        raise ContractError(f"the weights' columns read the features {_names(got)}, but data.features of {spec.path} "
                            f"is {_names(features)}: training reads them in the spec's order")  # fmt: skip
    if target in got or len(set(got)) != len(got):
        twice = target if target in got else first_repeat(got)
        raise ContractError(f"the weights' columns read the column '{excerpt(twice, 40)}' "
                            f"{'as a feature, but it is the target' if twice == target else 'twice'}: training "
                            "reads each feature once, never the target")  # fmt: skip
    want = {f: e for f, e in categorical.items() if f in got or not features}
    have = {f: e for f, (e, _) in columns.categorical.items()}
    if have != want:
        raise ContractError(f"the weights' columns encode {_encodings(have)}, but data.categorical of {spec.path} "
                            f"says {_encodings(want)}")  # fmt: skip
    for f, (_, values) in columns.categorical.items():
        bad = next((v for v in values if v != v.strip() or not v), None)
        bad = first_repeat(values) if bad is None else bad
        if bad is not None or not values:
            raise ContractError(f"the weights' columns give the column '{excerpt(f, 40)}' the categories "
                                f"{_names(list(values))}: training writes each distinct value of the training rows "
                                "once, stripped, none empty")  # fmt: skip


def _names(names: list[str]) -> str:
    return "[" + ", ".join(excerpt(str(n), 40) for n in names[:20]) + (", ..." if len(names) > 20 else "") + "]"


def _encodings(encodings: dict[str, str]) -> str:
    return ", ".join(f"{excerpt(f, 40)} as {e}" for f, e in encodings.items()) or "no categorical column"


def unwritten(spec: ValidSpec, meta: dict[str, str]) -> list[str]:
    """The metadata `specgrad train` writes for this spec that `meta` lacks (a key missing, or empty where statistics
    belong), each as "key (what it holds)". Without the statistics the model would read raw inputs, or report targets
    in standardized units: a wrong number with exit 0, so they are asked of any weights, another tool's too (no
    spec_hash: specgrad's metadata is not there at all). Weights specgrad wrote also keep the class names their data
    gives (csv labels, image folders); another tool's are numbered."""
    data = spec.values.get("data") or {}
    if not data.get("source"):
        return []  # NOTE: a spec without data trains nothing: its weights are taken as they are
    if len(spec.inputs) > 1 or len(spec.outputs) > 1:
        return _unwritten_named(spec, meta)
    ((_, dtype),) = spec.inputs.values()
    ret, task = [], spec_task(spec)
    if data["normalize"] and data["source"] != "text" and is_float(dtype) and not _json(meta, "normalization", {}):
        ret.append("normalization (the training split's input mean and std: data.normalize is true)")
    if task == "regress" and _standardizes_target(data) and not _json(meta, "target_normalization", {}):
        ret.append("target_normalization (the training targets' mean and std: data.normalize_target is true)")
    if task == "classify" and data["source"] in NAMED_CLASSES and meta.get("spec_hash") and not meta.get("class_names"):
        ret.append(f"class_names (the names of the classes in the {data['source']} data)")
    return ret


def _standardizes_target(data: dict[str, Any]) -> bool:
    """Whether training standardizes a regression's targets: a digits autoencoder's target is the image itself."""
    return bool(data["normalize_target"]) and data.get("target") != "input"


def _unwritten_named(spec: ValidSpec, meta: dict[str, str]) -> list[str]:
    """`unwritten` for a model with several inputs or outputs: statistics per float input, and per regression output
    (by its loss) its targets' statistics."""
    data, ret = spec.values["data"], []
    norms, outs = _json(meta, "normalization", {}), _json(meta, "outputs", {})
    norms, outs = norms if isinstance(norms, dict) else {}, outs if isinstance(outs, dict) else {}
    for name, (_, dtype) in spec.inputs.items():
        if data["normalize"] and is_float(dtype) and not norms.get(name):
            ret.append(f"normalization of the input {name} (its training mean and std: data.normalize is true)")
    for name, (loss, _) in spec.losses.items():
        head = outs.get(name) if isinstance(outs.get(name), dict) else {}
        if loss in REGRESSION_LOSSES and data["normalize_target"] and not head.get("target_normalization"):
            ret.append(f"target_normalization of the output {name} (its training targets' mean and std: "
                       "data.normalize_target is true)")  # fmt: skip
    return ret


def first_repeat(xs: Sequence[Any]) -> Any:
    """The first value that appeared before it in `xs`, or None (in one pass: vocabularies run to 10^5 values)."""
    seen: set = set()
    for x in xs:
        if x in seen:
            return x
        seen.add(x)
    return None


def spec_task(spec: ValidSpec, output: str | None = None) -> str | None:
    """The task training gives the output (the model's one output by default), from what the spec says: its loss
    (mse: regress; cross_entropy: language on a text source, else classify), as training insists; None for a spec
    without data, which trains nothing."""
    if not (spec.values.get("data") or {}).get("source"):
        return None
    loss = spec.losses[output or spec.outputs[0]][0]
    if loss in REGRESSION_LOSSES:
        return "regress"
    return "language" if spec.values["data"].get("source") == "text" and output is None else "classify"


def _check_task(spec: ValidSpec, task: str, output: str | None = None) -> None:
    """The weights' task is the one training the spec gives (metadata that says language on a classifier would turn
    its outputs into characters); a spec without data is taken at the weights' word."""
    want = spec_task(spec, output)
    if want is None or task == want:
        return
    loss = spec.losses[output or spec.outputs[0]][0]
    source = spec.values["data"].get("source")
    of = f" for the output {output}" if output else ""
    how = f"train.losses.{output}.loss {loss}" if output and spec.values["train"]["losses"] else f"train.loss {loss}"
    raise ContractError(f"the weights' task{of} is {task}, but {spec.path} trains {TRAINS[want]} ({how} on "
                        f"{excerpt(str(source), 40)})")  # fmt: skip


def _head(task: str, out_shape: tuple[int, ...], meta: dict[str, str], where: str) -> RunContract:
    """One output's contract: its task, its targets' statistics (regress) and class names (classify); `where` names
    the output in messages ("" for a model's one output)."""
    target = _stats(meta, "target_normalization", out_shape, where) if task == "regress" else {}
    names: tuple[str, ...] = ()
    if task == "classify":
        given = _json(meta, "class_names", None) or None
        classes = 2 if out_shape[-1] == 1 else out_shape[-1]  # NOTE: one logit (binary_cross_entropy): two classes
        names = tuple(str(k) for k in range(classes)) if given is None else \
            tuple(given) if isinstance(given, list) else ()  # fmt: skip
        if len(names) != classes or not all(isinstance(n, str) for n in names):
            raise ContractError(f"the weights' class_names{where} must be {classes} strings, one per class, "
                                f"got {meta['class_names'][:80]}")  # fmt: skip
        if twice := first_repeat(names):
            raise ContractError(f"the weights' class_names{where} name '{excerpt(twice, 40)}' twice: training writes "
                                "each class once")  # fmt: skip
    return RunContract(task, target=target, class_names=names)


def _check_unnamed(task: str, meta: dict[str, str], where: str) -> None:
    """Class names belong to a classifier: on another task (whose own task was checked first) they are not what
    training writes."""
    if task != "classify" and _json(meta, "class_names", None):
        raise ContractError(f"the weights' class_names{where} name classes, but the task{where} is {task}: training "
                            "writes class names for a classifier only")  # fmt: skip


def _named_contract(spec: ValidSpec, meta: dict[str, str]) -> RunContract:
    """Several inputs or outputs: statistics per float input (normalization: {input: {mean, std}}) and a contract per
    output (outputs: {output: {task, target_normalization, class_names}}), every output of the spec named once."""
    norms, outs = _json(meta, "normalization", {}), _json(meta, "outputs", None)
    if not isinstance(norms, dict) or not set(norms) <= {k for k, (_, d) in spec.inputs.items() if is_float(d)}:
        raise ContractError(f"the weights' normalization ({meta.get('normalization', '')[:80]}) does not name float "
                            f"inputs of the model ({', '.join(spec.inputs)})")  # fmt: skip
    if (
        not isinstance(outs, dict)
        or sorted(outs) != sorted(spec.outputs)
        or not all(isinstance(v, dict) and v.get("task") in ("classify", "regress") for v in outs.values())
    ):
        raise ContractError(f"the weights' outputs ({meta.get('outputs', '')[:80]}) do not give a task, classify or "
                            f"regress, for each output of the model ({', '.join(spec.outputs)})")  # fmt: skip
    inputs = {k: _stats({k: json.dumps(v)}, k, spec.inputs[k][0], f" of the input {k}") for k, v in norms.items()}
    heads = {o: _head(outs[o]["task"], spec.output_shape(o), {k: json.dumps(v) for k, v in outs[o].items()},
                      f" of the output {o}") for o in spec.outputs}  # fmt: skip
    for o in spec.outputs:
        _check_task(spec, outs[o]["task"], o)
        _check_unnamed(outs[o]["task"], {k: json.dumps(v) for k, v in outs[o].items()}, f" of the output {o}")
    return RunContract("multi", inputs=inputs, heads=heads)


def _json(meta: dict[str, str], key: str, default: Any) -> Any:
    try:
        return json.loads(meta[key]) if meta.get(key) else default
    except json.JSONDecodeError as e:
        raise ContractError(f"the weights' metadata '{key}' is not valid JSON ({e})") from None
    except RecursionError:
        raise ContractError(f"the weights' metadata '{key}' is nested too deeply to be what specgrad writes") from None


def _stats(meta: dict[str, str], key: str, shape: tuple[int, ...], where: str = "") -> dict[str, np.ndarray]:
    """{"mean", "std"} from the metadata, each as float32 of `shape`; {} when the metadata has none."""
    stats = _json(meta, key, {})
    if not stats:
        return {}
    if not isinstance(stats, dict) or set(stats) - {"mean", "std"}:  # NOTE: one missing: said below, with the shape
        keys = ", ".join(excerpt(str(k), 40) for k in stats) if isinstance(stats, dict) else type(stats).__name__
        raise ContractError(f"the weights' {key}{where} holds {keys}: training writes a mean and a std, nothing "
                            "else")  # fmt: skip
    try:
        with np.errstate(over="ignore"):  # NOTE: a value past float32 is infinity, refused in words by _check_stats
            ret = {k: np.ascontiguousarray(np.broadcast_to(np.asarray(stats[k], np.float32), shape))
                   for k in ("mean", "std")}  # fmt: skip
    except (KeyError, ValueError, TypeError) as e:
        raise ContractError(f"the weights' {key}{where} ({meta[key][:80]}) does not fit the shape {list(shape)}: "
                            f"{type(e).__name__} {e}") from None  # fmt: skip
    _check_stats(ret, f"the weights' {key}{where}", standardizes=key != "target_normalization")
    return ret


def _check_stats(stats: dict[str, np.ndarray], what: str, standardizes: bool) -> None:
    """What training writes: a finite mean, a std that is a normal positive float32 (the training split's, 1 where it
    is 0), and for an input (`standardizes`) a mean and std that keep a value near 0 finite once standardized. Anything
    else (NaN, 0, a subnormal 1e-40) would make outputs NaN or infinite; the first bad element is named."""
    mean, std = stats["mean"], stats["std"]

    def at(mask: np.ndarray) -> str:
        return str([int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape)])

    if (bad := ~np.isfinite(mean)).any():
        raise ContractError(f"{what}: mean {at(bad)} is {mean[bad][0]:.4g}, not a finite number")
    if (bad := ~(std >= TINY) | ~np.isfinite(std)).any():
        raise ContractError(f"{what}: std {at(bad)} is {std[bad][0]:.4g}, not a normal positive float32 (training "
                            f"writes the training split's std, from {TINY:.4g} up, or 1 where it is 0)")  # fmt: skip
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(-mean / std)
    if standardizes and bad.any():
        raise ContractError(f"{what}: mean {at(bad)} is {mean[bad][0]:.4g} with std {std[bad][0]:.4g}: a value "
                            "near 0 is infinite once standardized, which training never writes")  # fmt: skip
