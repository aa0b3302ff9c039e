"""The data source registry (specgrad/train/sources/): one SourceDef per source the spec language names, the tables the
data section's checks read derived from them, load_data reading through them, and train.data still the one place
callers import data names from."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import specgrad.train.data as data
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import DATA, validate_file
from specgrad.modelspec.validate import SOURCES as NAMES
from specgrad.train.sources import APPLIES, AUTO_SOURCES, MODULES, SOURCES, base, csv, images, npz, split
from specgrad.train.sources.base import Dataset

SINE = "specgrad: 1\nname: s\ninput: {shape: [1]}\nmodel: [{linear: 1}]\ntrain: {loss: mse}\ndata: {source: sine%s}\n"


def _spec(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(SINE % extra)
    return path


def test_every_source_the_language_names_has_one_definition():
    defined = [d.name for module in MODULES for d in module.DEFS]
    assert sorted(defined) == sorted(set(defined)), "a source defined twice"
    assert set(defined) == set(NAMES), "modelspec.validate.SOURCES and the registry's modules must name the same"
    assert list(SOURCES) == list(NAMES)  # NOTE: messages list sources in the spec language's order
    assert all(name == d.name for name, d in SOURCES.items())


def test_the_tables_are_read_from_the_definitions():
    for d in SOURCES.values():
        assert set(d.keys) <= set(DATA.fields), f"{d.name} lists a key the data section does not have"
        assert d.targets is None or None in d.targets, f"{d.name} must take a spec without data.target"
    for key, names in APPLIES.items():
        assert names == tuple(n for n, d in SOURCES.items() if key in d.keys)
    assert {k for d in SOURCES.values() for k in d.keys} == set(APPLIES)
    assert AUTO_SOURCES == ("csv", "npz")
    assert [n for n, d in SOURCES.items() if d.floats] == ["digits", "images", "spirals", "sine"]
    assert list(APPLIES)[:2] == ["path", "test_path"]  # NOTE: the order _check_unused has always reported keys in


def test_load_data_reads_with_the_registered_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = validate_file(str(_spec(tmp_path)))
    read = []

    def reader(src: base._Source) -> Dataset:
        read.append(src.data["source"])
        x = np.arange(8, dtype=np.float32).reshape(8, 1)
        return Dataset(x[:6], x[:6] * 2, x[6:], x[6:] * 2, "regress")

    monkeypatch.setitem(SOURCES, "sine", replace(SOURCES["sine"], read=reader, normalizes=False))
    ds = data.load_data(spec)
    assert read == ["sine"]
    assert ds.x_train[:, 0].tolist() == [0, 1, 2, 3, 4, 5]  # NOTE: normalizes=False: x as the reader gave it
    assert ds.target_stats  # NOTE: what applies to every regression still does: its targets are standardized


def test_a_key_the_definition_does_not_list_is_refused_with_the_sources_that_take_it(tmp_path: Path):
    spec = validate_file(str(_spec(tmp_path, ", delimiter: ';', context: 4")))
    with pytest.raises(SpecError) as e:
        data.load_data(spec)
    assert [p.message for p in e.value.problems] == [
        "data.context is for the text source, not sine",
        "data.delimiter is for the csv source, not sine",
    ]


def test_a_source_without_widths_refuses_auto_naming_those_with_them(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(SINE.replace("{shape: [1]}", "{shape: auto}") % "")
    with pytest.raises(SpecError, match="input.shape is auto, which is taken from csv and npz data; source sine"):
        validate_file(str(path), widths=data.data_widths)


def test_train_data_still_gives_every_name_its_callers_import():
    moved = {"csv_table": csv, "Dialect": csv, "read_image": images, "WrongSize": images, "stratified_split": split,
             "standardize": base, "Dataset": base, "FLOAT32_MAX": base}  # fmt: skip
    for name, module in moved.items():
        assert getattr(data, name) is getattr(module, name)
    assert all(hasattr(data, name) for name in data.__all__)
    assert data.load_data.__module__ == "specgrad.train.data"
    assert npz._load_named is data._load_named
