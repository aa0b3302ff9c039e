"""The layer registry: every layer kind a spec can name, each one LayerDef (layers/base.py) in the module of its
family. Validation, the JSON Schema, docs/spec.md's reference, the cost report, the builder and both exporters read
LAYERS; adding a kind is one definition (with its examples) in one of these modules."""

from __future__ import annotations

from specgrad.modelspec.layers import conv, dense, elementwise, movement, norm, pool, recurrent, sequence
from specgrad.modelspec.layers.base import Example, Layer, LayerDef, Shape, ShapeMismatch
from specgrad.modelspec.layers.elementwise import ACTIVATIONS

FAMILIES = (dense, conv, pool, movement, norm, sequence, recurrent, elementwise)  # NOTE: docs/spec.md's reference order

LAYERS: dict[str, LayerDef] = {d.name: d for family in FAMILIES for d in family.DEFS}

__all__ = ["ACTIVATIONS", "LAYERS", "Example", "Layer", "LayerDef", "Shape", "ShapeMismatch"]
