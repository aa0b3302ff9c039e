"""Blocks are checked in one pass: every problem of every block's definition once, at the block (used never, once or
many times), every problem of each use (its `with:`, and the values it fills in), and the model's own problems, all in
one SpecError sorted by place."""

from __future__ import annotations

from pathlib import Path

import pytest

from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import validate_file

SPEC = """\
specgrad: 1
name: blocks
inputs:
  x: {shape: [8]}
blocks:
  res:
    graph:
      - {name: h, layer: linear, out: 8, from: in}
      - {name: out, op: add, from: [in, h]}
  two:
    params: [w]
    graph:
      - {name: h, layer: linear, out: $w, from: in}
      - {name: out, op: add, from: [in, h]}
model:
  graph:
    - {name: a, block: res, from: x}
    - {name: b, block: two, with: {w: 8}, from: a}
    - {name: c, block: two, with: {w: 8}, from: b}
  outputs: [c]
"""


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as e:
        validate_file(path)
    return [str(p).replace(str(path), "spec.yaml").split("\n")[0] for p in e.value.problems]


def test_the_spec_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    assert [s.name for s in validate_file(path).steps] == ["a.h", "a", "b.h", "b", "c.h", "c"]


def test_a_block_written_as_a_list_and_the_model_s_problems_at_once(tmp_path: Path) -> None:
    text = SPEC.replace("  res:\n    graph:\n", "  res:\n").replace("{name: c, block: two", "{name: c, layer: tow")
    assert problems(tmp_path, text) == [
        "spec.yaml:7:7: error: blocks.res must be a mapping (key: value lines), got a list",
        "spec.yaml:18:24: error: unknown layer 'tow' in node 'c'",
        "spec.yaml:18:29: error: node 'c': 'with' goes with block nodes only",
    ]


def test_a_bad_node_in_a_block_used_twice_is_reported_once_at_the_block(tmp_path: Path) -> None:
    text = SPEC.replace("{name: h, layer: linear, out: $w, from: in}", "{name: h, layer: linaer, out: $w, from: in}")
    assert problems(tmp_path, text) == ["spec.yaml:13:26: error: unknown layer 'linaer' in node 'h'"]


def test_problems_in_two_blocks_and_the_model_in_one_pass(tmp_path: Path) -> None:
    text = (
        SPEC.replace("out: 8, from: in}", "out: 8, bais: true, from: in}")
        .replace("- {name: out, op: add, from: [in, h]}\nmodel", "- {name: outt, op: add, from: [in, h]}\nmodel")
        .replace("outputs: [c]", "outputs: [d]")
    )
    assert problems(tmp_path, text) == [
        "spec.yaml:8:42: error: unknown key 'bais' in node 'h'.linear",
        "spec.yaml:12:5: error: block 'two' has no node named 'out' (its output)",
        "spec.yaml:20:13: error: output 'd' is not a node of the graph",
    ]


def test_each_use_s_parameters_and_unknown_blocks(tmp_path: Path) -> None:
    text = (
        SPEC.replace("with: {w: 8}, from: a", "with: {w: 8, v: 1}, from: a")
        .replace("with: {w: 8}, from: b", "from: b")
        .replace("block: res", "block: rez")
    )
    assert problems(tmp_path, text) == [
        "spec.yaml:17:24: error: unknown block 'rez' in node 'a'",
        "spec.yaml:18:45: error: block 'two' has no parameter 'v'",
        "spec.yaml:19:7: error: block node 'c' needs with: {w: ...} for block 'two'",
    ]


def test_values_a_use_fills_in_are_checked_per_use(tmp_path: Path) -> None:
    text = SPEC.replace("with: {w: 8}, from: a", "with: {w: wide}, from: a").replace(
        "with: {w: 8}, from: b", "with: {w: 0}, from: b"
    )
    assert problems(tmp_path, text) == [
        "spec.yaml:13:39: error: node 'h'.linear.out must be a whole number, got 'wide' (in block 'two', with the "
        "values node 'b' on line 18 passes)",
        "spec.yaml:13:39: error: node 'h'.linear.out must be between 1 and 1048576, got '0' (in block 'two', with the "
        "values node 'c' on line 19 passes)",
    ]


def test_an_unused_block_is_checked_too(tmp_path: Path) -> None:
    text = SPEC.replace("blocks:\n", "blocks:\n  spare:\n    params: w\n    graph: [{name: o, op: plus, from: in}]\n")
    assert problems(tmp_path, text) == [
        "spec.yaml:7:13: error: blocks.spare.params must be a list, got 'w'",
        "spec.yaml:8:5: error: block 'spare' has no node named 'out' (its output)",
        "spec.yaml:8:27: error: unknown op 'plus' in node 'o'",
    ]


def test_a_graph_model_without_outputs_still_checks_its_nodes(tmp_path: Path) -> None:
    text = SPEC.replace("  outputs: [c]\n", "").replace(
        "block: two, with: {w: 8}, from: b", "layer: relu, from: bb, x: 1"
    )
    assert problems(tmp_path, text) == [
        "spec.yaml:16:3: error: model needs the key 'outputs' (the nodes whose values the model returns)",
        "spec.yaml:19:40: error: unknown key 'x' in node 'c'.relu",
    ]


def test_repeat_and_with_on_a_layer_node_are_errors(tmp_path: Path) -> None:
    """Found by the schema's differential test: a layer node's `repeat: 0` was silently ignored."""
    text = SPEC.replace(
        "{name: h, layer: linear, out: 8, from: in}", "{name: h, layer: linear, out: 8, repeat: 0, from: in}"
    )
    assert problems(tmp_path, text) == ["spec.yaml:8:42: error: node 'h': 'repeat' goes with block nodes only"]
