"""Where each layer's weights come from and how they train: `tie:` (use another layer's weight: one tensor, trained
and counted once), `trainable: false`, `lr_scale:` (a learning-rate multiplier), and the spec's `init: {from:
weights.safetensors, map: {...}}` (start from existing weights, checked name by name and shape by shape). A model
weight is named by its layer's name and its key: `emb.weight`, `3.bias` (the fourth entry of a layer list),
`blocks.0.attn.in_proj_weight` (a layer inside a block copy).

Validation calls check_weights; the builder reads ties, frozen layers, lr scales and init from the validated spec.
Imports modelspec (errors, files, layers, loader, schema) and nn.state (safetensors headers only).
"""

from __future__ import annotations

from dataclasses import replace
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
from specgrad.nn.state import SafetensorsError, safe_load

if TYPE_CHECKING:
    from specgrad.modelspec.graph import Step

INIT = Section("init", "start from existing weights: a safetensors file and which of its tensors go where", {
    "from": Field("str", "a .safetensors file (relative to the spec's folder)", REQUIRED),
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


def check_weights(steps: tuple[Step, ...], init: YNode | None, spec: str, read_files: bool
                  ) -> tuple[tuple[Step, ...], list[Problem]]:  # fmt: skip
    """Ties checked (a layer above, with a weight of the same shape) and their weight taken out of the tying layer's
    parameter count; `init` checked (its map always, against the file's header when `read_files`). Every problem at
    once; a tie written in a block is reported once, not once per copy."""
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
        return tuple(out), _init_problems(init, weight_names(out), spec, read_files)
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


def _init_problems(init: YNode, names: dict[str, tuple[Step, str, Shape]], spec: str, read_files: bool
                   ) -> list[Problem]:  # fmt: skip
    """init.map's names (each a weight of the model, its own and not tied, from a tensor named by text), then, with
    `read_files`, the file: a regular file inside the allowed folders, whose tensors have the weights' shapes, hold
    floating-point numbers, and fit MAX_FILE_MB."""
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
        path = init_file(init, spec)
        check_regular(path, src.loc, "init.from", str(src.value))
        header = safe_load(path, device="disk")
    except SpecError as e:
        return e.problems
    except (SafetensorsError, OSError) as e:
        return [Problem(f"init.from: cannot read {src.value} as safetensors: {excerpt(str(e), 300)}", src.loc)]
    if given is None:
        pairs = [(k, k, src.loc, src.loc) for k in header]
        problems = [p for pair in pairs if (p := _map_problem(pair, names, given, src)) is not None]
    for model_key, file_key, _, value_loc in pairs if not problems else []:
        if file_key not in header:
            problems.append(Problem(f"init.map: {src.value} has no tensor '{excerpt(file_key)}'", value_loc,
                                    did_you_mean(file_key, list(header))))  # fmt: skip
            continue
        want, got, dtype = names[model_key][2], tuple(header[file_key].shape), header[file_key].dtype
        if want != got:
            problems.append(Problem(f"init: the model's {model_key} is {list(want)}, but '{excerpt(file_key)}' in "
                                    f"{src.value} is {list(got)}", value_loc))  # fmt: skip
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


def init_tensors(init: YNode, spec: str, names: dict[str, tuple[Step, str, Shape]]) -> dict[str, Any]:
    """model weight -> the file's tensor (read, checked, and holding finite numbers only), for the builder."""
    src, given = init.get("from"), init.get("map")
    path = init_file(init, spec)
    mapped = given is not None and bool(given.value)
    pairs = {k: str(v.value) for k, v in given.value.items()} if mapped else None
    try:
        # NOTE: finite=False: NaN is refused below, with the map's place and after the cast to float32
        loaded = safe_load(path, keys=list(pairs.values()) if pairs is not None else None, finite=False)
    except SafetensorsError as e:
        raise SpecError.at(src.loc, f"init.from: cannot read {src.value}: {e}") from None
    pairs = pairs if pairs is not None else {k: k for k in loaded}
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
