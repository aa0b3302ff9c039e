"""Model state: finding a model's tensors by attribute path, loading a state into them, safetensors files.

A model is a plain Python object; its state is every Tensor reachable through attributes, lists, tuples and dicts,
named by the path to it ("layers.0.weight"). Imports tensor; files go through the safetensors library.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import load, save

from specgrad.helpers import atomic_write
from specgrad.tensor import Tensor


def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor reachable from `obj`, keyed by its attribute path, in definition order."""
    if isinstance(obj, Tensor):
        return {prefix.rstrip("."): obj}
    if isinstance(obj, (list, tuple)):
        return {k: v for i, x in enumerate(obj) for k, v in get_state_dict(x, f"{prefix}{i}.").items()}
    if isinstance(obj, dict):
        return {k: v for name, x in obj.items() for k, v in get_state_dict(x, f"{prefix}{name}.").items()}
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return get_state_dict(vars(obj), prefix)
    return {}


def get_parameters(obj: Any) -> list[Tensor]:
    """The distinct Tensors of a model (a tensor reachable by two paths is listed once)."""
    return list({id(t): t for t in get_state_dict(obj).values()}.values())


def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True) -> None:
    """Copy `state_dict` into the model's tensors in place (cast to each tensor's dtype and device). Strict: every
    key must match; any missing, unexpected or wrongly shaped key is reported, all of them in one error."""
    own = get_state_dict(model)
    problems = [f"wrong shape for {k}: the model has {own[k].shape}, the state has {v.shape}"
                for k, v in state_dict.items() if k in own and tuple(own[k].shape) != tuple(v.shape)]  # fmt: skip
    if strict:
        problems += [f"missing key {k} (shape {t.shape})" for k, t in own.items() if k not in state_dict]
        problems += [f"unexpected key {k} (shape {v.shape})" for k, v in state_dict.items() if k not in own]
    if problems:
        raise ValueError("state dict does not fit the model:\n  " + "\n  ".join(problems))
    updated = [own[k].assign(v.to(own[k].device).cast(own[k].dtype)) for k, v in state_dict.items() if k in own]
    Tensor.corealize(updated)


def safe_save(tensors: dict[str, Tensor], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write tensors as a safetensors file, atomically: a crash leaves the old file or the new one, never half."""
    arrays = {k: np.array(t.numpy(), order="C") for k, t in tensors.items()}  # NOTE: keeps 0-d arrays 0-d
    data = save(arrays, metadata=metadata)
    atomic_write(path, data)


def safe_load_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The text metadata stored in a safetensors file's header."""
    try:
        with safe_open(str(path), framework="numpy") as f:
            return dict(f.metadata() or {})
    except (SafetensorError, OSError) as e:
        raise ValueError(f"{path} is not a valid safetensors file: {e}") from None


def safe_load(path: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
    """Read a safetensors file (written by specgrad, the safetensors library or PyTorch) into Tensors."""
    try:
        arrays = load(Path(path).read_bytes())
    except SafetensorError as e:
        raise ValueError(f"{path} is not a valid safetensors file: {e}") from None
    return {k: Tensor(v, device=device) for k, v in arrays.items()}
