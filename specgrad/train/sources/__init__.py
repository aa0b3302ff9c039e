"""The data source registry: every data.source a spec can name, each one SourceDef (sources/base.py) in the module of
its source (generated.py holds the bundled digits and the generated spirals and sine). load_data, the data section's
checks, `validate` and `evaluate` read SOURCES and the tables derived from it here; adding a source is one module and
one entry in MODULES (and its name in modelspec.validate.SOURCES, the spec language's choices: modelspec comes before
train and cannot read this registry). Imports modelspec.validate and the source modules."""

from __future__ import annotations

from specgrad.modelspec.validate import DATA
from specgrad.modelspec.validate import SOURCES as NAMES
from specgrad.train.sources import csv, generated, images, npz, text
from specgrad.train.sources.base import SourceDef

MODULES = (generated, text, csv, npz, images)
_DEFS = {d.name: d for module in MODULES for d in module.DEFS}
# NOTE: in the spec language's order, which messages list sources in; tests/train/test_sources.py checks that every
# source the language names has a module here and every module's source is named there
SOURCES: dict[str, SourceDef] = {name: _DEFS[name] for name in NAMES if name in _DEFS}

# NOTE: the order problems name keys in: the data section's, test_path beside path
_KEY_ORDER = ("path", "test_path", *(k for k in DATA.fields if k not in ("path", "test_path")))
# data keys that do something for some sources only: any other source with the key given is an error
APPLIES: dict[str, tuple[str, ...]] = {
    key: names for key in _KEY_ORDER if (names := tuple(n for n, d in SOURCES.items() if key in d.keys))
}
AUTO_SOURCES = tuple(n for n, d in SOURCES.items() if d.widths is not None)  # sources whose examples say their widths

__all__ = ["APPLIES", "AUTO_SOURCES", "MODULES", "SOURCES", "SourceDef"]
