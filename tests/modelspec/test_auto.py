"""`auto` widths in the spec: where they may be written, what is said where the data is not read, and a spec
without them validated as before."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from specgrad.modelspec.auto import DataWidths, find_autos
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.resolve import resolve
from specgrad.modelspec.validate import validate_file


def write(folder: Path, text: str) -> Path:
    path = folder / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def fixed(spec, autos) -> DataWidths:  # noqa: ANN001
    """Widths without data: the placeholders' spec is what the resolver sees."""
    assert spec.steps == () and all(a.what in ("shape", "out") for a in autos)
    return DataWidths((5,), 3, {}, {"shape": "five", "out": "three"})


def errors(path: Path, **kw) -> list[str]:  # noqa: ANN003
    with pytest.raises(SpecError) as e:
        validate_file(path, **kw)
    return [str(p).removeprefix(f"{path}:").split("\n")[0] for p in e.value.problems]


SEQ = """\
    specgrad: 1
    name: a
    input: {shape: auto}
    model:
      - linear: 8
      - relu
      - linear: auto
      - relu
    data: {source: csv, path: d.csv, target: y}
    """


def test_autos_are_found_and_resolved(tmp_path: Path) -> None:
    path = write(tmp_path, SEQ)
    assert [(a.what, a.loc.line, a.loc.col) for a in find_autos(resolve(path))[0]] == [("shape", 3, 16),
                                                                                       ("out", 7, 13)]  # fmt: skip
    s = validate_file(path, data_files=False, widths=fixed)
    assert s.inputs["input"][0] == (5,) and s.steps[2].out_shape == (3,) and s.steps[0].in_shapes == ((5,),)
    assert s.values["model"][2] == {"linear": 3} and s.values["input"]["shape"] == [5]
    assert s.resolved == ("input.shape: auto -> [5] (five)", "out: auto -> 3 (three)")


def test_without_the_data_each_auto_says_so(tmp_path: Path) -> None:
    assert errors(write(tmp_path, SEQ), data_files=False) == [
        "3:16: error: input.shape is auto: the input's width comes from the data, which is not read here",
        "7:13: error: out is auto: the output's width (classes, or 1 value) comes from the data, which is not read "
        "here"]  # fmt: skip


def test_auto_on_a_hidden_layer_is_refused_at_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, SEQ.replace("linear: 8", "linear: {out: auto}").replace("linear: auto", "linear: 2"))
    assert errors(path, data_files=False, widths=fixed) == [
        "5:19: error: out: auto takes the width of the model's output from the data, but this layer (0) does not set "
        "it"]  # fmt: skip


def test_auto_in_a_graph_output_node(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        specgrad: 1
        name: g
        input: {shape: [4]}
        model:
          graph:
            - {name: h, from: input, layer: linear, out: 8}
            - {name: o, from: h, layer: linear, out: auto}
          outputs: [o]
        data: {source: csv, path: d.csv, target: y}
        """)  # fmt: skip
    s = validate_file(path, data_files=False, widths=fixed)
    assert s.output_shape("o") == (3,) and s.inputs["input"][0] == (4,)


def test_auto_for_named_inputs_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        specgrad: 1
        name: g
        inputs: {a: {shape: auto}}
        model:
          graph:
            - {name: o, from: a, layer: linear, out: 2}
          outputs: [o]
        """)  # fmt: skip
    assert errors(path, data_files=False, widths=fixed) == [
        "3:21: error: inputs.a.shape is auto, which is for a model with one input (input:)"
    ]


def test_another_word_is_still_a_type_error(tmp_path: Path) -> None:
    assert errors(write(tmp_path, SEQ.replace("shape: auto", "shape: autox")), data_files=False, widths=fixed)[0] \
        .startswith("3:16: error: input.shape must be a list")  # fmt: skip


def test_a_spec_without_auto_never_calls_the_resolver(tmp_path: Path) -> None:
    def refuse(spec, autos) -> DataWidths:  # noqa: ANN001
        raise AssertionError("called")

    path = write(tmp_path, SEQ.replace("shape: auto", "shape: [4]").replace("linear: auto", "linear: 2"))
    s = validate_file(path, data_files=False, widths=refuse)
    assert s.resolved == () and s.inputs["input"][0] == (4,)


def test_a_node_taking_its_own_name_ends_the_search_for_the_width_setter() -> None:
    """A cycle (input from input, an error reported elsewhere) ends the walk back from the output: no width setter."""
    from types import SimpleNamespace

    from specgrad.modelspec.auto import width_setter

    node = SimpleNamespace(name="input", args={}, srcs=[("input", None)])
    assert width_setter([node], ("input",)) is None
