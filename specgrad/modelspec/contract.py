"""What `specgrad run` applies around a trained model, read from the weights' metadata that `specgrad train` writes:
the task, the training split's input statistics ((x - mean) / std before the model), the regression targets'
statistics (y * std + mean after it) and the class names. `run` and both exporters read it here, so they compute the
same thing.

Imports numpy and modelspec.validate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specgrad.modelspec.validate import ValidSpec

TASKS = ("classify", "regress", "language")
OUTPUTS = {"classify": ("logits", "probabilities"), "language": ("logits", "probabilities"), "regress": ("prediction",)}


class ContractError(ValueError):
    """The weights' metadata does not fit the spec's model (or is not what specgrad writes): bad input, never a bug."""


@dataclass(frozen=True)
class RunContract:
    """What `specgrad run` applies around the model, read from the weights' metadata: (x - mean) / std on a float
    input before it, and after it the softmax probabilities (classify, language) or y * std + mean (regress)."""

    task: str | None = None  # None: the model's own outputs, nothing around them
    norm: dict[str, np.ndarray] = field(default_factory=dict)  # "mean", "std" as the input's shape; empty: none
    target: dict[str, np.ndarray] = field(default_factory=dict)  # "mean", "std" as the output's shape; empty: none
    class_names: tuple[str, ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        return OUTPUTS[self.task] if self.task else ()


def contract_from_meta(spec: ValidSpec, meta: dict[str, str] | None) -> RunContract:
    """The contract in the metadata `specgrad train` writes (task, normalization, target_normalization, class_names);
    a ContractError names a key that does not fit the spec's model."""
    if not meta or not meta.get("task"):
        return RunContract()
    task = meta["task"]
    if task not in TASKS:
        raise ContractError(f"the weights' metadata names the task '{task[:40]}'; the exports know {', '.join(TASKS)}")
    if len(spec.inputs) != 1 or len(spec.outputs) != 1:
        raise ContractError(f"a {task} export needs one input and one output, but {spec.path} has inputs "
                            f"{', '.join(spec.inputs)} and outputs {', '.join(spec.outputs)}")  # fmt: skip
    ((in_shape, dtype),) = spec.inputs.values()
    out_shape = spec.output_shape(spec.outputs[0])
    norm = _stats(meta, "normalization", in_shape) if dtype.startswith("float") else {}  # NOTE: token ids stay ids
    target = _stats(meta, "target_normalization", out_shape) if task == "regress" else {}
    names: tuple[str, ...] = ()
    if task == "classify":
        given = _json(meta, "class_names", None) or None
        names = tuple(str(k) for k in range(out_shape[-1])) if given is None else \
            tuple(given) if isinstance(given, list) else ()  # fmt: skip
        if len(names) != out_shape[-1] or not all(isinstance(n, str) for n in names):
            raise ContractError(f"the weights' class_names must be {out_shape[-1]} strings, one per output, got "
                                f"{meta['class_names'][:80]}")  # fmt: skip
    return RunContract(task, norm, target, names)


def _json(meta: dict[str, str], key: str, default: Any) -> Any:
    try:
        return json.loads(meta[key]) if meta.get(key) else default
    except json.JSONDecodeError as e:
        raise ContractError(f"the weights' metadata '{key}' is not valid JSON ({e})") from None
    except RecursionError:
        raise ContractError(f"the weights' metadata '{key}' is nested too deeply to be what specgrad writes") from None


def _stats(meta: dict[str, str], key: str, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """{"mean", "std"} from the metadata, each as float32 of `shape`; {} when the metadata has none."""
    stats = _json(meta, key, {})
    if not stats:
        return {}
    try:
        ret = {
            k: np.ascontiguousarray(np.broadcast_to(np.asarray(stats[k], np.float32), shape)) for k in ("mean", "std")
        }
    except (KeyError, ValueError, TypeError) as e:
        raise ContractError(f"the weights' {key} ({meta[key][:80]}) does not fit the shape {list(shape)}: "
                            f"{type(e).__name__} {e}") from None  # fmt: skip
    if not (np.isfinite(ret["mean"]).all() and np.isfinite(ret["std"]).all() and (ret["std"] > 0).all()):
        # NOTE: training writes finite means and positive stds; anything else would make every output NaN or infinite
        raise ContractError(f"the weights' {key} ({meta[key][:80]}) has a mean or std that is not a finite number, "
                            "or a std that is not positive")  # fmt: skip
    return ret
