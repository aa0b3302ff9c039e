"""Where each layer's weights come from and how they train: `tie:` (use another layer's weight: one tensor, trained
and counted once), `trainable: false`, `lr_scale:` (a learning-rate multiplier), and the spec's `init: {from:
weights.safetensors, map: {...}}` (start from existing weights, checked name by name and shape by shape). A model
weight is named by its layer's name and its key: `emb.weight`, `3.bias` (the fourth entry of a layer list),
`blocks.0.attn.in_proj_weight` (a layer inside a block copy). `init.from` may name specgrad's own weights (a run folder,
its model.safetensors or a checkpoint): their internal names (`steps.0.1.weight`: the model's step 0) are translated
into these names by the run folder's spec.resolved.yaml, and the weights both specs have are loaded.

Validation calls check_weights; the builder reads ties, frozen layers, lr scales and init from the validated spec.
Imports modelspec (errors, files, layers, loader, schema) and nn.state (safetensors headers only).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from specgrad.dtype import dtypes
from specgrad.flags import MAX_FILE_MB
from specgrad.helpers import prod
from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.files import MIB, SIZE_HINT, check_regular, named_file
from specgrad.modelspec.layers import LAYERS, Shape
from specgrad.modelspec.layers.base import words
from specgrad.modelspec.loader import YNode
from specgrad.modelspec.schema import REQUIRED, Field, Section, describe, did_you_mean
from specgrad.nn.state import SafetensorsError, safe_load, safe_load_metadata

if TYPE_CHECKING:
    from specgrad.modelspec.graph import Step
    from specgrad.modelspec.validate import ValidSpec

INIT = Section("init", "start from existing weights: a safetensors file and which of its tensors go where (init: "
               "PATH is short for init: {from: PATH})", {
    "from": Field("str", "a .safetensors file, or a run folder (its model.safetensors, read by weight name), "
                  "relative to the spec's folder", REQUIRED),
    "map": Field("map", "model weight -> tensor name in the file (left out: the file's names are the model's)",
                 None)})  # fmt: skip


def weight_names(steps: tuple[Step, ...] | list[Step]) -> dict[str, tuple[Step, str, Shape]]:
    """Every trainable weight of the model: '<layer name>.<key>' -> (its step, its key in the layer, its shape)."""
    return {f"{s.name}.{k}": (s, k, shape) for s in steps if s.kind == "layer"
            for k, shape in LAYERS[s.what].weights(s.in_shapes[0], s.args).items()}  # fmt: skip


def tie_target(step: Step, names: set[str]) -> str | None:
    """The step whose weight `step` uses: its `tie:` name, looked up first among the layers of its own block copy."""
    tie = step.args.get("tie")
    if tie is None:
        return None
    scope = step.name.rpartition(".")[0]
    local = f"{scope}.{tie}" if scope else tie
    return local if local in names else tie


def check_weights(steps: tuple[Step, ...], init: YNode | None, spec: str, read_files: bool, steps_of: StepsOf
                  ) -> tuple[tuple[Step, ...], list[Problem]]:  # fmt: skip
    """Ties checked (a layer above, with a weight of the same shape) and their weight taken out of the tying layer's
    parameter count; `init` checked (its map always, against the file's header when `read_files`; `steps_of` names a
    run folder's weights). Every problem at once; a tie written in a block is reported once, not once per copy."""
    problems: dict[Location | None, Problem] = {}
    order = {s.name: i for i, s in enumerate(steps)}
    out = list(steps)
    for i, s in enumerate(steps):
        target = tie_target(s, set(order)) if s.kind == "layer" else None
        if target is None:
            continue
        problem = _tie_problem(s, target, steps, order, i)
        if problem is not None:
            problems.setdefault(problem.loc, problem)
            continue
        out[i] = replace(s, params=s.params - prod(LAYERS[s.what].weights(s.in_shapes[0], s.args)["weight"]))
    if (init := given_init(init)) is not None and not problems:
        return tuple(out), _init_problems(init, weight_names(out), spec, read_files, steps_of)
    return tuple(out), list(problems.values())


def given_init(init: YNode | None) -> YNode | None:
    """The spec's init: section, or None where it has none (`init: null`, or `--set init=null`, says none)."""
    return init if init is not None and init.value is not None else None


def _tie_problem(s: Step, target: str, steps: tuple[Step, ...], order: dict[str, int], i: int) -> Problem | None:
    why = _tie_mismatch(s, target, steps, order, i)
    if why is None:
        return None
    layers = [n for n in order if steps[order[n]].kind == "layer"]
    hint = did_you_mean(target, layers) if target not in order else None
    if target not in order and (layer := target.rpartition(".")[0]) in layers:
        hint = f"tie names a layer, not one of its weights: tie: {excerpt(layer)}"
    return Problem(why, s.loc, hint)


def _tie_mismatch(s: Step, target: str, steps: tuple[Step, ...], order: dict[str, int], i: int) -> str | None:
    at = words(s.name)
    mine = LAYERS[s.what].weights(s.in_shapes[0], s.args)  # NOTE: a kind takes tie: only when it has a weight
    if target not in order:
        return f"{at} ties its weight to '{excerpt(target)}', which is not a layer of the model"
    if target == s.name:
        return f"{at} ties its weight to itself: tie names another layer above, whose weight this one uses"
    if order[target] >= i:
        return f"{at} ties its weight to '{target}', which comes after it: tie to a layer above"
    t = steps[order[target]]
    theirs = LAYERS[t.what].weights(t.in_shapes[0], t.args) if t.kind == "layer" else {}
    if "weight" not in theirs:
        return f"{at} ties its weight to '{target}' ({t.what}), which has no weight"
    if t.args.get("tie") is not None:
        return f"{at} ties its weight to '{target}', which itself ties its weight to '{t.args['tie']}': tie to that one"
    if theirs["weight"] != mine["weight"]:
        return (f"{at} ties its weight {list(mine['weight'])} to the weight of '{target}' ({t.what}), which is "
                f"{list(theirs['weight'])}: a tied weight needs the same shape")  # fmt: skip
    return None


def init_file(init: YNode, spec: str) -> str:
    """The real path of init.from, relative to the spec file that writes it (refused outside the allowed folders)."""
    node = init.get("from")
    named_in = spec if node.loc.file.startswith("--set") else node.loc.file
    return named_file(node.value, named_in, spec, node.loc, "init.from")


# NOTE: train.run_folder's names (train imports modelspec, never the other way)
RUN_SPEC, RUN_WEIGHTS, RUN_CHECKPOINTS = "spec.resolved.yaml", "model.safetensors", "checkpoints"
INTERNAL = re.compile(r"(?:model\.)?steps\.(\d+)\.1\.(.+)")  # NOTE: a model's state-dict name (a checkpoint's: model.*)
StepsOf = Callable[[str], "tuple[Step, ...]"]  # NOTE: a spec file's validated steps (validate_file, from the caller)


@dataclass(frozen=True)
class InitPlan:
    """What init: loads from `path`: model weight -> the file's tensor; for specgrad's own weights (`named`, matched by
    weight name), also the model's weights the file lacks (they start from the seed) and the file's weights the model
    lacks (left out)."""

    path: str
    header: dict[str, Any] = field(repr=False)
    pairs: dict[str, str]
    named: bool = False
    fresh: tuple[str, ...] = ()
    unused: tuple[str, ...] = ()


def init_plan(init: YNode, spec: str, names: dict[str, tuple[Step, str, Shape]], steps_of: StepsOf) -> InitPlan:
    """The file init.from names (a run folder: its model.safetensors), its header, and which tensor each model weight
    starts from: init.map's, else the file's names, translated by its run folder's spec when specgrad wrote it."""
    src, given = init.get("from"), init.get("map")
    path = weights_file(init_file(init, spec), str(src.value), src.loc)
    check_regular(path, src.loc, "init.from", str(src.value))
    header = safe_load(path, device="disk")
    if given is not None and given.value:
        return InitPlan(path, header, {k: str(v.value) for k, v in given.value.items()})
    return matched(path, header, names, str(src.value), src.loc, steps_of)


def matched(path: str, header: dict[str, Any], names: dict[str, tuple[Step, str, Shape]], shown: str,
            loc: Location | None, steps_of: StepsOf) -> InitPlan:  # fmt: skip
    """The plan of a weights file without a map: specgrad's own matched by weight name, any other by its own names."""
    found = run_names(path, header, shown, loc, steps_of)
    if found is None:
        return InitPlan(path, header, {k: k for k in header})
    layers = {n.rpartition(".")[0] for n in names}
    tied = {k for k, (s, key, _) in names.items() if key == "weight" and tie_target(s, layers) is not None}
    pairs = {k: found[k] for k in names if k in found and k not in tied}  # NOTE: in the model's order
    fresh = tuple(k for k in names if k not in found and k not in tied)
    return InitPlan(path, header, pairs, True, fresh, tuple(k for k in found if k not in names))


def weights_file(path: str, shown: str, loc: Location | None, key: str = "init.from") -> str:
    """A weights file named by `key` (`shown` as written): itself, or a run folder's model.safetensors."""
    if not os.path.isdir(path):
        return path
    if not os.path.isfile(os.path.join(path, RUN_SPEC)):
        raise SpecError.at(loc, f"{key}: {shown} is a folder, but not a run folder (it has no {RUN_SPEC})",
                           "name a .safetensors file, or a run folder `specgrad train` wrote")  # fmt: skip
    weights = os.path.join(path, RUN_WEIGHTS)
    if not os.path.lexists(weights):
        raise SpecError.at(loc, f"{key}: the run folder {shown} has no {RUN_WEIGHTS} (its run has not finished)",
                           f"name one of its checkpoints: {shown}/{RUN_CHECKPOINTS}/epoch-NNNNN.safetensors"
                           )  # fmt: skip
    return weights


def run_spec(path: str) -> str | None:
    """The spec.resolved.yaml of the run folder a weights file lies in: beside it, or above checkpoints/."""
    folder = os.path.dirname(path)
    folder = os.path.dirname(folder) if os.path.basename(folder) == RUN_CHECKPOINTS else folder
    spec = os.path.join(folder, RUN_SPEC)
    return spec if os.path.isfile(spec) else None


def run_names(path: str, header: dict[str, Any], shown: str, loc: Location | None, steps_of: StepsOf
              ) -> dict[str, str] | None:  # fmt: skip
    """Weight name -> tensor of the file at `path` (its `header`) when specgrad wrote it (every tensor named by its
    step, as `steps.0.1.weight`; a checkpoint's as `model.steps.0.1.weight`, beside `optimizer.*`), named by the spec
    of the run folder it lies in, whose shapes it must have; None for any other file (its names are the model's own)."""
    internal = {k: m for k in header if (m := INTERNAL.fullmatch(k))}
    if not internal or any(k not in internal and not k.startswith("optimizer.") for k in header):
        return None
    if (resolved := run_spec(path)) is None:
        raise SpecError.at(loc, f"{shown} holds specgrad's step-numbered tensors "
                           f"('{excerpt(next(iter(internal)))}'), but no {RUN_SPEC} of a run folder beside it says "
                           "which weights they are", "name the run folder it came from (init: {from: "
                           "runs/<name>-<n>}), or map each weight to a tensor with init.map")  # fmt: skip
    steps = steps_of(resolved)
    index, theirs = {s.name: i for i, s in enumerate(steps)}, weight_names(steps)
    by_step = {(index[s.name], key): name for name, (s, key, _) in theirs.items()}
    ret = {}
    for k, m in internal.items():
        name, got = by_step.get((int(m[1]), m[2])), tuple(header[k].shape)
        if name is None or theirs[name][2] != got:
            what = "no weight" if name is None else f"{list(got)}, but its {name} is {list(theirs[name][2])}"
            raise SpecError.at(loc, f"'{excerpt(k)}' in {shown} is {what} in the spec of its run folder ({resolved}): "
                               "the file is not that run's", "name the weights of a run as `specgrad train` left "
                               "them, or map each weight to a tensor with init.map")  # fmt: skip
        ret[name] = k
    return {name: ret[name] for name in by_step.values() if name in ret}  # NOTE: in the run's order, not the file's


def _init_problems(init: YNode, names: dict[str, tuple[Step, str, Shape]], spec: str, read_files: bool,
                   steps_of: StepsOf) -> list[Problem]:  # fmt: skip
    """init.map's names (each a weight of the model, its own and not tied, from a tensor named by text), then, with
    `read_files`, the file: a regular file inside the allowed folders, whose tensors have the weights' shapes, hold
    floating-point numbers, and fit MAX_FILE_MB. A run folder's weights are matched by name: a weight of the model
    the run lacks starts from the seed, a weight of the run the model lacks is left out."""
    src, given = init.get("from"), init.get("map")
    if given is not None and given.value is None:
        given = None  # NOTE: map: null is no map, as null is for every key whose default is none
    if given is not None and given.kind != "map":
        return [Problem("init.map must be a mapping of model weight: file tensor", given.loc)]
    pairs = _init_pairs(given)
    problems = [p for pair in pairs if (p := _map_problem(pair, names, given, src)) is not None]
    if not read_files or problems:
        return problems
    try:
        plan = init_plan(init, spec, names, steps_of)
    except SpecError as e:
        return e.problems
    except (SafetensorsError, OSError) as e:
        return [Problem(f"init.from: cannot read {src.value} as safetensors: {excerpt(str(e), 300)}", src.loc)]
    header, shown = plan.header, {f: k for k, f in plan.pairs.items()} if plan.named else {}
    if given is None:
        pairs = [(k, f, src.loc, src.loc) for k, f in plan.pairs.items()]
        problems = [p for pair in pairs if not plan.named and (p := _map_problem(pair, names, given, src)) is not None]
    for model_key, file_key, _, value_loc in pairs if not problems else []:
        if file_key not in header:
            problems.append(Problem(f"init.map: {src.value} has no tensor '{excerpt(file_key)}'", value_loc,
                                    did_you_mean(file_key, list(header))))  # fmt: skip
            continue
        want, got, dtype = names[model_key][2], tuple(header[file_key].shape), header[file_key].dtype
        if want != got:
            problems.append(Problem(f"init: the model's {model_key} is {list(want)}, but "
                                    f"'{excerpt(shown.get(file_key, file_key))}' in {src.value} is {list(got)}",
                                    value_loc))  # fmt: skip
        elif not dtypes.is_float(dtype):
            problems.append(Problem(f"init: '{excerpt(file_key)}' in {src.value} holds {dtype.name} values, but the "
                                    f"model's {model_key} is a weight of floating-point numbers", value_loc,
                                    "map a float32, float16 or float64 tensor to it"))  # fmt: skip
    size = sum(prod(header[f].shape) * header[f].dtype.itemsize for _, f, _, _ in pairs) if not problems else 0
    limit = int(MAX_FILE_MB.value)
    if size > limit * MIB:  # NOTE: the bound safe_load holds training to, found before a run starts
        problems.append(Problem(f"init: the tensors it loads from {src.value} are {size / MIB:,.1f} MiB, over "
                                f"the limit of {limit:,} MiB for a weights file", src.loc, SIZE_HINT))  # fmt: skip
    return problems


def _init_pairs(given: YNode | None) -> list[tuple[str, str, Location, Location]]:
    """(model weight, file tensor, the key's place, the value's place) of each init.map entry."""
    if given is None:
        return []
    return [(k, v.value if isinstance(v.value, str) else "", given.key_locs[k] if given.key_locs else given.loc,
             v.loc) for k, v in given.value.items()]  # fmt: skip


def _map_problem(pair: tuple[str, str, Location, Location], names: dict[str, tuple[Step, str, Shape]],
                 given: YNode | None, src: YNode) -> Problem | None:  # fmt: skip
    """What is wrong with one (model weight, file tensor) pair of init: a value that is not a tensor's name, a name
    that is not a weight of the model, or a tied weight (which is the weight of another layer)."""
    model_key, _, key_loc, value_loc = pair
    value = given.value[model_key] if given is not None else None
    if value is not None and (value.kind != "scalar" or not isinstance(value.value, str) or not value.value):
        return Problem(f"init.map: the value of {excerpt(model_key)} must name a tensor of {src.value}, got "
                       f"{describe(value)}", value_loc, "write the tensor's name as text, in quotes if it looks like a "
                       "number: '0.weight': 'layers.0.weight'")  # fmt: skip
    if model_key not in names:
        hint = did_you_mean(model_key, list(names)) or "the model's weights: " + _listed(list(names))
        where = "init.map names" if given is not None else f"{src.value} holds"
        return Problem(f"{where} '{excerpt(model_key)}', which is not a weight of the model", key_loc, hint)
    step, key, _ = names[model_key]
    target = tie_target(step, {n.rpartition(".")[0] for n in names}) if key == "weight" else None
    if target is not None:
        return Problem(f"init: {model_key} is the weight of '{target}' (tie: {excerpt(step.args['tie'])}), so it "
                       f"starts as {target}.weight does", key_loc, f"load {target}.weight instead")  # fmt: skip
    return None


def _listed(names: list[str], most: int = 8) -> str:
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def layout_steps(steps: tuple[Step, ...] | list[Step], start: tuple[str, ...], forward: bool) -> set[str]:
    """The layers with weights that read `start` (forward: the model's inputs) or give it (backward: its outputs)
    through steps without weights (ops, activations, dropout): the first layers, or the last."""
    by_name = {s.name: s for s in steps}

    def near(n: str) -> list[str]:
        return [s.name for s in steps if n in s.srcs] if forward else list(by_name[n].srcs) if n in by_name else []

    todo, seen, found = [m for n in start for m in near(n)] if forward else list(start), set(), set()
    while todo:
        if (n := todo.pop()) in seen or n not in by_name:
            continue
        seen.add(n)
        s = by_name[n]
        if s.kind == "layer" and LAYERS[s.what].weights(s.in_shapes[0], s.args):
            found.add(n)
        else:
            todo += near(n)
    return found


def layout_problems(init: YNode, plan: InitPlan, names: dict[str, tuple[Step, str, Shape]],
                    ends: tuple[set[str], set[str]], columns: str | None, classes: list[str] | None
                    ) -> list[Problem]:  # fmt: skip
    """Weights of a run loaded by name into the first layers (`ends[0]`) or the last (`ends[1]`) when the run read
    other columns, in another order or with other categories (`columns`: this spec's data, as Columns.to_meta
    writes it), or had other classes or another class order (`classes`): the names and shapes agree, but each value
    would meet the weights of another column or score another class. A file without specgrad's metadata, or init.map
    (which says itself which tensor goes where), is not compared."""
    if not plan.named:
        return []
    try:
        meta = safe_load_metadata(plan.path)
    except (SafetensorsError, OSError):
        return []
    src = init.get("from")
    first = [k for k in plan.pairs if names[k][0].name in ends[0]]
    last = [k for k in plan.pairs if names[k][0].name in ends[1]]
    whys = _column_changes(meta.get("columns"), columns) if first else []
    loads = ", ".join(first)
    if last and not whys:
        whys, loads = _class_changes(meta.get("class_names"), classes), ", ".join(last)
    return [Problem(f"init: {src.value} was trained with {why}, so its {loads} would {harm}", src.loc,
                    "lay the data out as the run's (data.features in its order, the same categories and classes), "
                    "or leave init: out to start from the seed")
            for why, harm in whys]  # fmt: skip


def check_init_layout(spec: ValidSpec, columns: str | None, classes: list[str] | None, steps_of: StepsOf
                      ) -> list[Problem]:  # fmt: skip
    """layout_problems of the spec's init: against its data's layout (`columns` as Columns.to_meta writes them, the
    class names in order; None where the data has none), known once the data is read (train, validate)."""
    if (init := given_init(spec.node("init"))) is None:
        return []
    names = weight_names(spec.steps)
    plan = init_plan(init, spec.path, names, steps_of)
    ends = (layout_steps(spec.steps, tuple(spec.inputs), True), layout_steps(spec.steps, tuple(spec.outputs), False))
    return layout_problems(init, plan, names, ends, columns, classes)


def _json_value(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _column_changes(run: str | None, ours: str | None) -> list[tuple[str, str]]:
    """(what differs, what it does) between the run's columns and this data's, both as Columns.to_meta writes them."""
    theirs, mine = _json_value(run), _json_value(ours)
    if not isinstance(theirs, dict) or not isinstance(mine, dict):
        return []
    a, b = list(theirs.get("features", [])), list(mine.get("features", []))
    harm = "give each value the weights of another column"
    if a != b:
        what = "its columns in another order" if sorted(a) == sorted(b) else "other columns"
        return [(f"{what} (the run read {_quoted(a)}; this spec's data reads {_quoted(b)})", harm)]
    ret = []
    cats_a, cats_b = theirs.get("categorical", {}), mine.get("categorical", {})
    for f in a:
        (enc_a, va), (enc_b, vb) = (((c or {}).get("encoding"), list((c or {}).get("values", [])))
                                    for c in (cats_a.get(f), cats_b.get(f)))  # fmt: skip
        if enc_a != enc_b:
            was, now = (f"{e} categorical" if e else "numeric" for e in (enc_a, enc_b))
            ret.append((f"column {_quoted([f])} encoded otherwise (the run's: {was}; this spec's data: {now})", harm))
        elif va != vb:
            added, removed = [v for v in vb if v not in va], [v for v in va if v not in vb]
            parts = [f"added: {_quoted(added)}"] * bool(added) + [f"removed: {_quoted(removed)}"] * bool(removed)
            what = "; ".join(parts) or "in another order"
            ret.append((f"other categories of column {_quoted([f])} ({what}; the run's: {_quoted(va)})",
                        "read each category with the weights of another"))  # fmt: skip
    return ret


def _class_changes(run: str | None, ours: list[str] | None) -> list[tuple[str, str]]:
    """(what differs, what it does) between the run's class names, in order, and this data's. Numbered classes (0, 1,
    ...) on either side are the other side's in order: data.class_names only names whole-number labels."""
    theirs = _json_value(run)
    if not isinstance(theirs, list) or ours is None or theirs == list(ours):
        return []
    numbered = [str(k) for k in range(len(ours))]
    if len(theirs) == len(ours) and numbered in (theirs, list(ours)):
        return []
    what = "its classes in another order" if sorted(map(str, theirs)) == sorted(ours) else "other classes"
    return [(f"{what} (the run's: {_quoted(theirs)}; this spec's data's: {_quoted(list(ours))})",
             "score each example for another class")]  # fmt: skip


def _quoted(values: list[Any], most: int = 12) -> str:
    """Names in quotes, escaped: a category may hold a comma or a quote."""
    shown = ", ".join(json.dumps(excerpt(str(v), 40)) for v in values[:most])
    return shown + (f", ... ({len(values):,} in all)" if len(values) > most else "")


def init_tensors(init: YNode, spec: str, names: dict[str, tuple[Step, str, Shape]], steps_of: StepsOf
                 ) -> dict[str, Any]:  # fmt: skip
    """model weight -> the file's tensor (read, checked, and holding finite numbers only), for the builder."""
    src, given = init.get("from"), init.get("map")
    mapped = given is not None and bool(given.value)
    try:
        plan = init_plan(init, spec, names, steps_of)
        # NOTE: finite=False: NaN is refused below, with the map's place and after the cast to float32
        loaded = safe_load(plan.path, keys=list(dict.fromkeys(plan.pairs.values())), finite=False)
    except SafetensorsError as e:
        raise SpecError.at(src.loc, f"init.from: cannot read {src.value}: {e}") from None
    pairs = plan.pairs
    for model_key, file_key in pairs.items():
        with np.errstate(over="ignore"):  # NOTE: as the model holds it: a float64 can overflow to infinity
            values = loaded[file_key].numpy().astype(np.float32)
        if not np.isfinite(values).all():
            bad = int(np.count_nonzero(~np.isfinite(values)))
            loc = given.value[model_key].loc if mapped else src.loc
            raise SpecError.at(loc, f"init: '{excerpt(file_key)}' in {src.value} holds NaN or infinity as float32 "
                               f"({bad:,} of its {values.size:,} values), so {model_key} cannot start from it",
                               "map a tensor of finite numbers to it, or leave it out to start from the seed"
                               )  # fmt: skip
    return {k: loaded[v] for k, v in pairs.items()}
