"""`specgrad export SPEC --weights W --format safetensors|onnx|c --out PATH` (or `specgrad export RUN_DIR --format F`):
trained weights in a form other tools (or plain C) can run, computing what `specgrad run` computes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import typer
from specgrad.cli.errors import check_output_option
from specgrad.cli.run import load_model, read_contract, served_meta, spec_and_weights

from specgrad import Device
from specgrad.modelspec.contract import RunContract
from specgrad.modelspec.errors import SpecError
from specgrad.modelspec.validate import ValidSpec
from specgrad.nn.state import get_state_dict, safe_save
from specgrad.train.run_folder import spec_hash

FORMATS = ("safetensors", "onnx", "c")


EXTENSIONS = {"safetensors": ".safetensors", "onnx": ".onnx", "c": ".c"}


def export(spec_path: Path, weights: Path | None, fmt: str, out: Path | None, overrides: list[str]) -> None:
    if fmt not in FORMATS:
        typer.echo(f"error: unknown format '{fmt}'; choose one of {', '.join(FORMATS)}", err=True)
        raise typer.Exit(2)
    spec, weights = spec_and_weights(spec_path, weights, overrides)  # NOTE: errors end in cli/errors.py
    if out is None:
        if not spec_path.is_dir():
            hint = f"pass --out model{EXTENSIONS[fmt]}, or give a run folder to export into"
            raise SpecError.at(None, "where to? --out is needed when exporting from a spec file", hint)
        out = spec_path / f"model{EXTENSIONS[fmt]}"
    typer.echo(write_export(spec, weights, fmt, out))


def check_export_path(out: Path, fmt: str) -> None:
    """Where an export goes: a file (new, or a regular file to replace) in a folder that exists; for C, the header
    written beside it too."""
    if out.is_dir():
        example = out / f"model{EXTENSIONS[fmt]}"
        raise SpecError.at(None, f"--out {out} is a folder", f"name the file to write, e.g. {example}")
    if not out.parent.is_dir():
        raise SpecError.at(None, f"--out {out}: the folder {out.parent} does not exist", "create it first, or name "
                           "a file in a folder that exists")  # fmt: skip
    if fmt == "c" and out.suffix == ".h":
        raise SpecError.at(None, f"--out {out}: the C export writes its header to <name>.h beside the C file",
                           f"name the C file, e.g. {out.with_suffix('.c')}")  # fmt: skip
    if fmt == "c" and out.suffix != ".c":  # NOTE: the runner is built as <name>: without .c it would be the source
        raise SpecError.at(None, f"--out {out}: the C export writes C source, named <name>.c (its header <name>.h and "
                           "the runner built from it <name>)",
                           f"name the C file, e.g. {out.with_suffix('.c')}")  # fmt: skip
    check_output_option(out, "--out")
    if fmt == "c":
        check_output_option(out.with_suffix(".h"), "the header of --out")


def require(module: str, extra: str, what: str) -> None:
    """An optional package: missing, it is an environment problem (exit 3) that says what to install."""
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"{what} needs the {module} package: pip install 'specgrad[{extra}]'", name=module)


def write_export(spec: ValidSpec, weights: Path, fmt: str, out: Path) -> str:
    """Write one export of the weights; returns what to tell the user."""
    check_export_path(out, fmt)
    if fmt == "onnx":
        require("onnx", "onnx", "ONNX export")
    if fmt == "c":
        Device.DEFAULT = "CLANG"  # NOTE: the C export is made of CLANG kernels: the weights must live there
    model, meta = load_model(spec, weights)
    # NOTE: the exports compute what run computes; for weights that do not name their task, run guesses it
    served = served_meta(spec, meta)
    if fmt == "safetensors":
        safe_save(get_state_dict(model), out, metadata={**meta, "spec_hash": spec_hash(spec.values)})
        return f"wrote {out}"
    # NOTE: metadata that does not fit the spec is a user's error, said here
    contract = read_contract(spec, served, weights)
    if fmt == "onnx":
        from specgrad.export.onnx import export_onnx

        export_onnx(spec, model, out, meta=served)
        return f"wrote {out} (ONNX, outputs {', '.join(contract.outputs)}; checked with onnx.checker)"
    from specgrad.export.c import export_c

    header = export_c(spec, model, out, served)
    several = len(spec.inputs) > 1 or len(spec.outputs) > 1
    reads = f"each example's {', then '.join(spec.inputs)}" if several else "examples"
    printed = printed_outputs(spec, contract)
    return (f"wrote {out} and {header}; build a command-line runner with\n"
            f"  cc -O2 -DSPECGRAD_MAIN {out} -o {out.with_suffix('')} -lm\n"
            f"(it reads {reads} as numbers on stdin and prints {printed}, a line per example)")  # fmt: skip


def printed_outputs(spec: ValidSpec, contract: RunContract) -> str:
    """What the C runner prints per example, in words: 'their probabilities', or each output's part in order."""
    if contract.task != "multi" and len(spec.outputs) == 1:
        return f"their {(contract.outputs or ('output',))[-1]}"
    heads = [(o, contract.heads.get(o, RunContract()).outputs) for o in spec.outputs]
    return ", then ".join(f"{o}'s {kinds[-1] if kinds else 'values'}" for o, kinds in heads)
