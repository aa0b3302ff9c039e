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

from specgrad.helpers import prod
from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.files import check_regular, named_file
from specgrad.modelspec.layers import LAYERS, Shape
from specgrad.modelspec.loader import YNode
from specgrad.modelspec.schema import REQUIRED, Field, Section, did_you_mean
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
    parameter count; `init` checked against the file's header when `read_files`. Every problem at once."""
    problems: list[Problem] = []
    order = {s.name: i for i, s in enumerate(steps)}
    out = list(steps)
    for i, s in enumerate(steps):
        target = tie_target(s, set(order)) if s.kind == "layer" else None
        if target is None:
            continue
        problem = _tie_problem(s, target, steps, order, i)
        if problem is not None:
            problems.append(problem)
            continue
        out[i] = replace(s, params=s.params - prod(LAYERS[s.what].weights(s.in_shapes[0], s.args)["weight"]))
    if init is not None and read_files and not problems:
        problems += _init_problems(init, weight_names(out), spec)
    return tuple(out), problems


def _tie_problem(s: Step, target: str, steps: tuple[Step, ...], order: dict[str, int], i: int) -> Problem | None:
    why = _tie_mismatch(s, target, steps, order, i)
    if why is None:
        return None
    hint = did_you_mean(target, [n for n in order if steps[order[n]].kind == "layer"]) if target not in order else None
    return Problem(why, s.loc, hint)


def _tie_mismatch(s: Step, target: str, steps: tuple[Step, ...], order: dict[str, int], i: int) -> str | None:
    at = f"layer {s.name}" if s.name.isdigit() else f"node '{s.name}'"
    mine = LAYERS[s.what].weights(s.in_shapes[0], s.args)  # NOTE: a kind takes tie: only when it has a weight
    if target not in order:
        return f"{at} ties its weight to '{excerpt(target)}', which is not a layer of the model"
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


def _init_problems(init: YNode, names: dict[str, tuple[Step, str, Shape]], spec: str) -> list[Problem]:
    src = init.get("from")
    try:
        path = init_file(init, spec)
        check_regular(path, src.loc, "init.from", str(src.value))
        header = safe_load(path, device="disk")
    except SpecError as e:
        return e.problems
    except (SafetensorsError, OSError) as e:
        return [Problem(f"init.from: cannot read {src.value} as safetensors: {excerpt(str(e), 300)}", src.loc)]
    given = init.get("map")
    if given is not None and given.kind != "map":
        return [Problem("init.map must be a mapping of model weight: file tensor", given.loc)]
    pairs: list[tuple[str, str, Location, Location]] = (
        [(k, str(v.value), given.key_locs[k] if given.key_locs else given.loc, v.loc) for k, v in given.value.items()]
        if given is not None
        else [(k, k, src.loc, src.loc) for k in header]
    )
    problems = []
    for model_key, file_key, key_loc, value_loc in pairs:
        if model_key not in names:
            hint = did_you_mean(model_key, list(names)) or f"the model's weights: {', '.join(list(names)[:8])}, ..."
            where = "init.map names" if given is not None else f"{src.value} holds"
            problems.append(Problem(f"{where} '{excerpt(model_key)}', which is not a weight of the model", key_loc,
                                    hint))  # fmt: skip
            continue
        if file_key not in header:
            problems.append(Problem(f"init.map: {src.value} has no tensor '{excerpt(file_key)}'", value_loc,
                                    did_you_mean(file_key, list(header))))  # fmt: skip
            continue
        want, got = names[model_key][2], tuple(header[file_key].shape)
        if want != got:
            problems.append(Problem(f"init: the model's {model_key} is {list(want)}, but '{file_key}' in {src.value} "
                                    f"is {list(got)}", value_loc))  # fmt: skip
    return problems


def init_tensors(init: YNode, spec: str, names: dict[str, tuple[Step, str, Shape]]) -> dict[str, Any]:
    """model weight -> the file's tensor (read and checked), for the builder."""
    given = init.get("map")
    path = init_file(init, spec)
    pairs = {k: str(v.value) for k, v in given.value.items()} if given is not None else None
    try:
        loaded = safe_load(path, keys=list(pairs.values()) if pairs is not None else None)
    except SafetensorsError as e:
        raise SpecError.at(init.get("from").loc, f"init.from: cannot read {init.get('from').value}: {e}") from None
    return {k: loaded[v] for k, v in pairs.items()} if pairs is not None else {k: loaded[k] for k in loaded}
