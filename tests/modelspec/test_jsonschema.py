"""The JSON Schema against the validator, differentially: example specs (resolved, so their vars are filled in) are
mutated structurally (keys dropped, renamed, added; values retyped; lists and mappings swapped; nodes of the wrong
kind; unknown layer, op and block names) in sequential and graph models, and the schema must accept a mutant exactly
when the validator's structure stage does.

"Structure" is every stage of validate_file before shape inference (graph.infer): YAML, keys, types, ranges and
choices of every section, layer, node, input and block, and the cross-field checks JSON Schema can state (one of
input or inputs, a list model takes one input, the keys each data source needs, features listed once, a block's
'out' node, validation examples for early stopping). Out of scope, as jsonschema.py says: names that refer to other
names (from:, outputs, block:, with: against params, a node name used twice), the values a block's use fills in at
its $names, and data files (validated with data_files=False). Shapes, the digits' 64 values and the memory budget
come after inference and are out of scope too.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specgrad.modelspec.errors import Problem, SpecError
from specgrad.modelspec.resolve import resolve
from specgrad.modelspec.validate import validate_file

jsonschema = pytest.importorskip("jsonschema")
from specgrad.modelspec.jsonschema import spec_json_schema  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# NOTE: the valid ones of these start the mutants (docs/examples holds failing examples too)
SOURCES = [*sorted((ROOT / "specs").glob("*.yaml")), ROOT / "tests/modelspec/good/resolve_base.yaml",
           *sorted((ROOT / "docs/examples").glob("*.yaml"))]  # fmt: skip
OUT_OF_SCOPE = re.compile(
    r"is not a node of the graph|unknown block '|has no parameter '|needs with: |a second node named|"
    r"\(in block '.*', with the values node|unknown variable"
)
VALUES = [0, -1, 3.5, 2, 1000, 10**9, "text", "relu", "out", True, None, [], {}, [1, 2], ["in"], {"out": 4}]
KEYS = ["name", "from", "layer", "op", "block", "repeat", "with", "graph", "outputs", "params", "out", "axis", "shape",
        "input", "inputs", "extra", "hidden", "heads", "source", "valid_split", "early_stopping"]  # fmt: skip
NAMES = ["linear", "linaer", "relu", "add", "concat", "plus", "mlp", "decoder", "nope", "layernorm", "conv2d"]


class _Reached(Exception):
    """validate_file got to shape inference: the structure stage found nothing."""


def _good(path: Path) -> bool:
    try:
        validate_file(path, data_files=False)
    except SpecError:
        return False
    return True


GOOD = {p.name: resolve(p).to_plain() for p in SOURCES if _good(p)}
SCHEMA = jsonschema.Draft202012Validator(spec_json_schema())


def structure_problems(path: Path) -> list[Problem]:
    with mock.patch("specgrad.modelspec.validate.infer", side_effect=_Reached):
        try:
            validate_file(path, data_files=False)
        except _Reached:
            return []
        except SpecError as e:
            return e.problems
    raise AssertionError("validate_file returned without inferring shapes")


def _places(tree: Any, path: tuple = ()) -> list[tuple]:
    """Every (path) to a value inside the tree (dict keys and list indexes)."""
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else []
    return [p for k, v in items for p in [(*path, k), *_places(v, (*path, k))]]


def _parent(tree: Any, path: tuple) -> Any:
    for k in path[:-1]:
        tree = tree[k]
    return tree


def mutate(tree: Any, data: st.DataObject) -> None:
    """One structural change somewhere in the tree, drawn by hypothesis (so a disagreement shrinks to a small one)."""
    path = data.draw(st.sampled_from(_places(tree)), label="where")
    parent, key = _parent(tree, path), path[-1]
    op = data.draw(st.sampled_from(["drop", "rename", "retype", "extra", "wrap", "unwrap", "name", "kind"]), label="op")
    if op == "drop":
        del parent[key]
    elif op == "rename" and isinstance(parent, dict):
        new = data.draw(st.sampled_from([*KEYS, key + "x"]), label="new key")
        parent[new] = parent.pop(key)
    elif op == "retype":
        parent[key] = copy.deepcopy(data.draw(st.sampled_from(VALUES), label="value"))
    elif op == "extra" and isinstance(parent[key], dict):
        value = copy.deepcopy(data.draw(st.sampled_from(VALUES), label="value"))
        parent[key][data.draw(st.sampled_from(KEYS), label="key")] = value
    elif op == "wrap":
        parent[key] = [parent[key]]
    elif op == "unwrap" and isinstance(parent[key], list) and parent[key]:
        parent[key] = parent[key][0] if data.draw(st.booleans()) else {str(i): x for i, x in enumerate(parent[key])}
    elif op == "name" and isinstance(parent[key], str):
        parent[key] = data.draw(st.sampled_from(NAMES), label="name")
    elif op == "kind" and isinstance(parent[key], dict) and {"layer", "op", "block"} & set(parent[key]):
        node = parent[key]
        old = next(k for k in ("layer", "op", "block") if k in node)
        node[data.draw(st.sampled_from(["layer", "op", "block"]), label="kind")] = node.pop(old)


def check(tree: Any, tmp: Path) -> None:
    path = tmp / "mutant.yaml"
    path.write_text(json.dumps(tree))  # NOTE: JSON is YAML 1.2
    problems = structure_problems(path)
    in_scope = [p for p in problems if not OUT_OF_SCOPE.search(p.message)]
    errors = list(SCHEMA.iter_errors(tree))
    if bool(errors) == bool(in_scope) or (problems and not in_scope and errors):
        return  # NOTE: an out-of-scope problem may stand for an in-scope one the validator could not see past
    raise AssertionError(
        f"the schema {'rejects' if errors else 'accepts'} what the validator "
        f"{'accepts' if not in_scope else 'rejects'}:\n{json.dumps(tree, indent=1)}\nvalidator: "
        f"{[str(p) for p in problems]}\nschema: {[e.message[:300] for e in errors]}"
    )


def test_the_sources_are_valid_and_accepted() -> None:
    assert {p.name for p in SOURCES if p.parent.name == "specs"} <= set(GOOD)
    assert any("graph" in t["model"] for t in GOOD.values()) and any("blocks" in t for t in GOOD.values())
    for name, tree in GOOD.items():
        assert not list(SCHEMA.iter_errors(tree)), name


def _differential(data: st.DataObject, tmp_path_factory: pytest.TempPathFactory) -> None:
    tree = copy.deepcopy(GOOD[data.draw(st.sampled_from(sorted(GOOD)), label="spec")])
    for _ in range(data.draw(st.integers(1, 2), label="mutations")):
        if _places(tree):
            mutate(tree, data)
    check(tree, tmp_path_factory.mktemp("mutant"))


@settings(max_examples=150, database=None, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_schema_agrees_with_the_validator(data: st.DataObject, tmp_path_factory: pytest.TempPathFactory) -> None:
    _differential(data, tmp_path_factory)


@pytest.mark.slow
@settings(max_examples=3000, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_schema_agrees_with_the_validator_at_length(data: st.DataObject, tmp_path_factory) -> None:
    _differential(data, tmp_path_factory)


def test_graph_nodes_blocks_and_inputs_are_described() -> None:
    """What an editor completes and flags in a graph model (before: the schema said only `model: object`)."""
    tree = copy.deepcopy(GOOD["char_gpt.yaml"])
    assert not list(SCHEMA.iter_errors(tree))
    node = tree["model"]["graph"][4]
    for change in ({"out": "wide"}, {"outt": 3}, {"repeat": 2}, {"layer": "linaer"}, {"from": []}, {"name": "a.b"}):
        mutant = copy.deepcopy(tree)
        mutant["model"]["graph"][4] = {**node, **change}
        assert list(SCHEMA.iter_errors(mutant)), change
    mutant = copy.deepcopy(tree)
    mutant["blocks"]["decoder"]["graph"][-1]["name"] = "last"  # NOTE: a block's output is its node named out
    mutant["inputs"]["bad name"] = {"shape": [4]}
    assert len(list(SCHEMA.iter_errors(mutant))) == 2
