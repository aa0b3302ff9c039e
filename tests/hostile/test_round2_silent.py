"""Issue 30, silent wrong results: inputs that overflow once standardized, weights holding NaN or infinity (with or
without checksums), normalization statistics specgrad never writes, a task that is not the spec's, and the C export
(a name starting with a digit, a NUL byte inside a number, a comma-separated line, NaN reaching the runner's output).
Each case runs through harness.check as the corpus's do; none may end with exit 0 and NaN printed, and none may let a
Python warning (with a source path) through."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load, load_file, save

from specgrad.nn.state import CHECKSUM_KEY, tensor_sha256
from tests.hostile import makers as mk
from tests.hostile.harness import TINY, Asset, Assets, Case, Fifo, Folder, Folders, Made, needs_met
from tests.hostile.harness import check as check_case

RUN = ("run", "tiny.yaml", "--weights", "w.safetensors", "--input", "x.npy", "--device", "CPU")
NOT_FINITE = "holds NaN or infinity"
EVALUATE = ("evaluate", "tiny.yaml", "--weights", "w.safetensors", "--device", "CPU")
LM = """\
specgrad: 1
name: lm
input: {shape: [8], dtype: int32}
model:
  - {embedding: {vocab: 128, dim: 8}}
  - {linear: 128}
data: {source: text, corpus: sonnets, context: 8, batch_size: 4}
"""
LM_SHAPES = {"steps.0.1.weight": (128, 8), "steps.1.1.weight": (128, 8), "steps.1.1.bias": (128,)}
GENERATE = ("generate", "lm.yaml", "--weights", "lm.safetensors", "--prompt", "Shall", "--tokens", "5", "--device",
            "CPU")  # fmt: skip


def _with_checksums(tensors: dict[str, np.ndarray], meta: dict[str, str]) -> dict[str, str]:
    """The metadata with checksums of `tensors` as specgrad writes them: what someone who edits a file can redo."""
    sums = {k: tensor_sha256(a.dtype.name, a.shape, a) for k, a in tensors.items()}
    return {**meta, CHECKSUM_KEY: json.dumps(sums, sort_keys=True)}


def edited_weights(changes: dict[str, float], checksums: bool, everywhere: bool = False) -> Made:
    """The run's weights with one value (or, `everywhere`, every value) of each named tensor set; their checksums
    dropped (as another tool writes a file) or written again for the new values."""

    def make(path: Path, assets: Assets) -> None:
        src = assets.path("w")
        tensors = load_file(str(src))
        with safe_open(str(src), "np") as f:
            meta = {k: v for k, v in f.metadata().items() if k != CHECKSUM_KEY}
        for name, value in changes.items():
            a = tensors[name].copy()
            a.reshape(-1)[slice(None) if everywhere else 0] = value
            tensors[name] = a
        path.write_bytes(save(tensors, metadata=_with_checksums(tensors, meta) if checksums else meta))

    return Made(make)


def lm_weights(value: float, at: int | None = 0) -> bytes:
    """Weights for LM without metadata (as another tool writes them): small numbers, with `value` at position `at` of
    the embedding (None: every weight of the last layer is `value`, and every embedding 1, so every score is 8 times
    `value`)."""
    rng = np.random.default_rng(0)
    tensors = {k: (rng.standard_normal(s) * 0.1).astype(np.float32) for k, s in LM_SHAPES.items()}
    if at is None:
        tensors["steps.0.1.weight"][:], tensors["steps.1.1.weight"][:] = 1.0, value
    else:
        tensors["steps.0.1.weight"].reshape(-1)[at] = value
    return save(tensors)


def lm_meta(**meta: str) -> bytes:
    """lm_weights(0.1) (finite, small) with `meta` as their metadata, as specgrad's own weights carry it."""
    tensors = load(lm_weights(0.1))
    return save(tensors, metadata={"name": "lm", **meta})


def without_meta(*keys: str) -> Made:
    """The run's weights with the metadata `keys` removed (none: every key, as another tool writes a file); the
    tensors and their checksums are unchanged."""

    def make(path: Path, assets: Assets) -> None:
        src = assets.path("w")
        with safe_open(str(src), "np") as f:
            meta = {k: v for k, v in f.metadata().items() if keys and k not in keys}
        path.write_bytes(save(load_file(str(src)), metadata=meta or None))

    return Made(make)


def normalization(mean: list[float], std: list[float]) -> Made:
    return mk.remeta("w", normalization=json.dumps({"mean": mean, "std": std}))


def far_normalization() -> Made:
    """The run's weights with statistics that put every example near 3e38 once standardized (valid values: a value
    near 0 stays finite), and first-layer weights of 2 that take it past float32's largest: the model run serves
    overflows on every example, the model with the data's own statistics would not."""

    def make(path: Path, assets: Assets) -> None:
        src = assets.path("w")
        tensors = load_file(str(src))
        with safe_open(str(src), "np") as f:
            meta = {k: v for k, v in f.metadata().items() if k != CHECKSUM_KEY}
        tensors["steps.0.1.weight"] = np.full_like(tensors["steps.0.1.weight"], 2.0)
        meta["normalization"] = json.dumps({"mean": [-3e38, -3e38], "std": [1.0, 1.0]})
        path.write_bytes(save(tensors, metadata=_with_checksums(tensors, meta)))

    return Made(make)


def exported(spec: str, binary: str = "m") -> Folders:
    """A check: the C export in the project compiles with cc, and the program runs one example."""

    def check(ctx: Folders) -> None:
        cc = shutil.which("cc") or shutil.which("clang") or shutil.which("gcc")
        built = subprocess.run([cc, "-O1", "-DSPECGRAD_MAIN", "m.c", "-o", binary, "-lm"], cwd=ctx.project,
                               capture_output=True, text=True, timeout=120)  # fmt: skip
        assert built.returncode == 0, f"the export of {spec} does not compile:\n{built.stderr}"
        ran = subprocess.run([str(ctx.project / binary)], input="0.5 -0.25\n", capture_output=True, text=True,
                             timeout=60)  # fmt: skip
        assert ran.returncode == 0 and len(ran.stdout.split()) == 2, ran

    return check  # type: ignore[return-value]


# fmt: off
CASES = [
    # *** inputs that are finite, but not once standardized; outputs that are not finite ***
    Case("run-input-near-float-max", "silent", {"x.npy": mk.npy_bytes(np.array([[0.5, 0.1], [3e38, 3e38]],
         np.float32))}, RUN, 1, "example 1, position [0] is 3e+38, which is infinite once standardized"),
    Case("run-json-input-beyond-float32", "silent", {"x.json": "[[0.5, 0.1], [0.25, 1e39]]"},
         (*RUN[:5], "x.json", *RUN[6:]), 1, "example 1, position [1] is 1e+39, which is infinite once standardized"),
    Case("run-csv-input-near-float-max", "silent", {"x.csv": "a,b\n0.5,0.1\n3e38,-3e38\n"},
         (*RUN[:5], "x.csv", *RUN[6:]), 1, "example 1, position [0] is 3e+38, which is infinite once standardized"),
    Case("run-input-near-float-max-allowed", "silent", {"x.npy": mk.npy_bytes(np.array([[3e38, 3e38]],
         np.float32))}, (*RUN, "--allow-nonfinite"), 0, "running them as given (--allow-nonfinite)"),
    Case("run-output-overflows", "silent", {"w.safetensors": edited_weights({"steps.0.1.weight": 3e38,
         "steps.2.1.weight": 3e38}, checksums=True, everywhere=True)}, RUN, 1,
         "the model's output for example 0 is not finite (NaN at position [0];"),
    Case("run-output-overflows-to-a-file", "silent", {"w.safetensors": edited_weights({"steps.0.1.weight": 3e38,
         "steps.2.1.weight": 3e38}, checksums=True, everywhere=True)}, (*RUN, "--output", "p.npy"), 1,
         "the model's output for example 0 is not finite"),
    # *** weights holding NaN or infinity, with checksums or without ***
    Case("run-nan-weights-no-checksums", "silent", {"w.safetensors": edited_weights({"steps.0.1.weight": np.nan},
         checksums=False)}, RUN, 1, "tensor 'steps.0.1.weight' holds NaN or infinity (1 of its 16 values)"),
    Case("run-inf-weights-checksums-redone", "silent", {"w.safetensors": edited_weights({"steps.2.1.bias": np.inf},
         checksums=True)}, RUN, 1, "tensor 'steps.2.1.bias' holds NaN or infinity (1 of its 2 values)"),
    Case("export-nan-weights", "silent", {"w.safetensors": edited_weights({"steps.0.1.weight": np.nan},
         checksums=False)}, ("export", "tiny.yaml", "--weights", "w.safetensors", "--format", "safetensors", "--out",
         "copy.safetensors"), 1, NOT_FINITE),
    Case("evaluate-nan-weights", "silent", {"w.safetensors": edited_weights({"steps.2.1.weight": np.nan},
         checksums=False)}, ("evaluate", "tiny.yaml", "--weights", "w.safetensors", "--device", "CPU"), 1,
         NOT_FINITE),
    Case("generate-nan-weights", "silent", {"lm.yaml": LM, "lm.safetensors": lm_weights(np.nan, at=ord("S") * 8)},
         GENERATE, 1, "tensor 'steps.0.1.weight' holds NaN or infinity"),
    Case("generate-scores-overflow", "silent", {"lm.yaml": LM, "lm.safetensors": lm_weights(3e38, at=None)},
         GENERATE, 1, "the model's scores for character 1 are not finite"),
    Case("init-from-nan-weights", "silent", {"i.yaml": TINY + "init: {from: n.safetensors, map: {0.weight: "
         "steps.0.1.weight}}\n", "n.safetensors": edited_weights({"steps.0.1.weight": np.nan}, checksums=False)},
         ("train", "i.yaml", "--out", "out", "--device", "CPU"), 1,
         "init: 'steps.0.1.weight' in n.safetensors holds NaN or infinity"),
    # *** normalization statistics specgrad never writes ***
    Case("run-subnormal-std", "silent", {"w.safetensors": normalization([0.0, 0.0], [1e-40, 1.0])}, RUN, 1,
         "the weights' normalization: std [0] is 1e-40, not a normal positive float32"),
    Case("run-zero-std", "silent", {"w.safetensors": normalization([0.0, 0.0], [0.0, 1.0])}, RUN, 1,
         "the weights' normalization: std [0] is 0, not a normal positive float32"),
    Case("run-mean-overflows-standardized", "silent", {"w.safetensors": normalization([3e38, 0.0], [0.01, 1.0])},
         RUN, 1, "the weights' normalization: mean [0] is 3e+38 with std 0.01: a value near 0 is infinite once "
         "standardized"),
    Case("export-subnormal-std", "silent", {"w.safetensors": normalization([0.0, 0.0], [1.0, 1e-40])},
         ("export", "tiny.yaml", "--weights", "w.safetensors", "--format", "onnx", "--out", "m.onnx"), 1,
         "w.safetensors does not fit the model of tiny.yaml: the weights' normalization: std [1] is 1e-40"),
    # *** a task that is not the spec's ***
    Case("run-task-language-on-a-classifier", "silent", {"w.safetensors": mk.remeta("w", task="language")}, RUN, 1,
         "the weights' task is language, but tiny.yaml trains a classifier (train.loss cross_entropy on spirals)"),
    Case("run-task-regress-on-a-classifier", "silent", {"w.safetensors": mk.remeta("w", task="regress")}, RUN, 1,
         "the weights' task is regress, but tiny.yaml trains a classifier"),
    Case("run-duplicate-class-names", "silent", {"w.safetensors": mk.remeta("w", class_names='["a", "a"]')}, RUN,
         1, "the weights' class_names name 'a' twice"),
    # *** metadata that training always writes for this spec, removed ***
    Case("run-normalization-removed", "silent", {"w.safetensors": without_meta("normalization")}, RUN, 1,
         "the metadata of w.safetensors lacks what `specgrad train` writes for tiny.yaml: normalization (the "
         "training split's input mean and std"),
    Case("run-normalization-emptied", "silent", {"w.safetensors": mk.remeta("w", normalization="{}")}, RUN, 1,
         "lacks what `specgrad train` writes for tiny.yaml: normalization"),
    Case("evaluate-normalization-removed", "silent", {"w.safetensors": without_meta("normalization")},
         ("evaluate", "tiny.yaml", "--weights", "w.safetensors", "--device", "CPU"), 1,
         "lacks what `specgrad train` writes for tiny.yaml: normalization"),
    Case("export-normalization-removed", "silent", {"w.safetensors": without_meta("normalization")},
         ("export", "tiny.yaml", "--weights", "w.safetensors", "--format", "onnx", "--out", "m.onnx"), 1,
         "lacks what `specgrad train` writes for tiny.yaml: normalization"),
    Case("run-all-metadata-removed", "silent", {"w.safetensors": without_meta()}, RUN, 1,
         "hint: the weights carry no specgrad metadata (another tool's?), and without the statistics the model's "
         "numbers would be wrong: if they were trained on raw values, say so with --set data.normalize=false"),
    Case("run-other-tools-weights-on-raw-inputs", "silent", {"w.safetensors": without_meta()},
         (*RUN, "--set", "data.normalize=false"), 0, "0: class "),
    # *** metadata training never writes for the spec: csv columns on generated data, other keys in statistics ***
    Case("run-columns-on-generated-data", "silent", {"w.safetensors": mk.remeta("w", columns=json.dumps(
         {"features": ["b", "a"], "categorical": {}}))}, RUN, 1, "the weights' columns name csv columns, but tiny.yaml "
         "reads source spirals: training writes columns for a csv source only"),
    Case("run-normalization-unknown-key", "silent", {"w.safetensors": mk.remeta("w", normalization=json.dumps(
         {"mean": [0, 0], "std": [1, 1], "scale": [9, 9]}))}, RUN, 1, "the weights' normalization holds mean, std, "
         "scale: training writes a mean and a std, nothing else"),
    # *** evaluate standardizes with the weights' statistics, and checks inputs and outputs as run does ***
    # NOTE: which examples overflow depends on the validation split, stratified since issue 32 (18 NaN before)
    Case("evaluate-output-overflows", "silent", {"w.safetensors": edited_weights({"steps.0.1.weight": 3e38,
         "steps.2.1.weight": 3e38}, checksums=True, everywhere=True)}, EVALUATE, 1, "error: the model's output for "
         "example 1 is not finite (NaN at position [0]; 12 values are NaN or infinite)"),
    Case("evaluate-with-the-weights-normalization", "silent", {"w.safetensors": far_normalization()}, EVALUATE, 1,
         "error: the model's output for example 0 is not finite"),
    # *** generate checks the weights' metadata as run does ***
    Case("generate-task-classify-with-escapes", "silent", {"lm.yaml": LM, "lm.safetensors": lm_meta(task="classify",
         class_names=json.dumps([f"\x1b[31mc{i}" for i in range(128)]))}, GENERATE, 1,
         "the weights' task is classify, but lm.yaml trains a language model (train.loss cross_entropy on text)"),
    Case("generate-task-regress", "silent", {"lm.yaml": LM, "lm.safetensors": lm_meta(task="regress")}, GENERATE, 1,
         "the weights' task is regress, but lm.yaml trains a language model"),
    # *** evaluate --split FILE on data that is made, not read from a file: the file would be ignored ***
    Case("evaluate-file-on-generated-data-outside", "silent", {"run": Asset("run")}, ("evaluate", "run", "--split",
         "<sentinel>/secret.csv", "--device", "CPU"), 1, "the data of run/spec.resolved.yaml is source spirals, "
         "which makes its examples and reads no file, so there is no file of examples to evaluate"),
    Case("evaluate-file-on-generated-data-fifo", "silent", {"run": Asset("run"), "f.csv": Fifo()}, ("evaluate",
         "run", "--split", "f.csv", "--device", "CPU"), 1, "--split f.csv: the data of run/spec.resolved.yaml is "
         "source spirals"),
    Case("evaluate-file-on-generated-data-device", "silent", {"run": Asset("run")}, ("evaluate", "run", "--split",
         "/dev/zero", "--device", "CPU"), 1, "hint: evaluate its validation split (--split validation) or its test "
         "split (--split test, with data.test_split)"),
    Case("evaluate-file-on-generated-data-missing", "silent", {"run": Asset("run")}, ("evaluate", "run", "--split",
         "missing.csv", "--device", "CPU"), 1, "a file of examples is for the text, csv, npz and images sources"),
    Case("evaluate-file-on-generated-data-folder", "silent", {"run": Asset("run"), "empty": Folder()}, ("evaluate",
         "run", "--split", "empty", "--device", "CPU"), 1, "there is no file of examples to evaluate"),
    # *** the exported C program ***
    Case("c-runner-near-float-max", "c-export", {"runner": Asset("runner")}, (), 1,
         "error: example 1, value 0 (counting from 0): 3e+38 is infinite once standardized", program="runner",
         stdin=b"0.5 0.1\n3e38 3e38\n", needs=("clang",)),
    Case("c-runner-nul-inside-a-number", "c-export", {"runner": Asset("runner")}, (), 1,
         "error: example 0, value 0 (counting from 0): '1\\x00junk' holds a NUL byte", program="runner",
         stdin=b"1\x00junk 2\n", needs=("clang",)),
    Case("c-runner-decimal-commas", "c-export", {"runner": Asset("runner")}, (), 1,
         "'5' is followed by spaces only, but the values before it on its line by commas (decimal commas? write 3.5, "
         "not 3,5): an example's values are numbers separated by commas, spaces or both", program="runner",
         stdin=b"1,5 2,5\n", needs=("clang",)),
    Case("c-runner-semicolons", "c-export", {"runner": Asset("runner")}, (), 1,
         "'1;2' is not a number: an example's values are numbers separated by commas, spaces or both",
         program="runner", stdin=b"1;2\n", needs=("clang",)),
    Case("c-runner-escape-sequence-echoed", "c-export", {"runner": Asset("runner")}, (), 1,
         "'\\x1b[31mred' is not a number", program="runner", stdin=b"\x1b[31mred 1\n", needs=("clang",)),
    Case("c-export-name-starting-with-a-digit", "c-export", {"2layer.yaml": TINY.replace("name: tiny",
         "name: 2layer")}, ("export", "2layer.yaml", "--weights", "w.safetensors", "--format", "c", "--out", "m.c"),
         0, "wrote m.c and m.h", writes=("m.c", "m.h", "m"), needs=("clang",), check=exported("2layer.yaml")),
]
# fmt: on


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_round2_silent(case: Case, folders: Folders) -> None:
    if why := needs_met(case.needs):
        pytest.skip(why)
    result = check_case(folders, case)
    assert "Warning" not in result.output and ".py:" not in result.output, result.output
    if case.code == 0 and "--allow-nonfinite" not in case.cmd:
        assert "nan" not in result.output.lower(), result.output


def test_the_case_ids_are_unique() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
