"""`specgrad export SPEC --weights W --format safetensors|onnx|c --out PATH` (or `specgrad export RUN_DIR --format F`):
trained weights in a form other tools (or plain C) can run, computing what `specgrad run` computes."""

from __future__ import annotations

from pathlib import Path

import typer
from specgrad.cli.run import guess_task, load_model, spec_and_weights

from specgrad import Device
from specgrad.device import DeviceUnavailable
from specgrad.nn.state import get_state_dict, safe_save
from specgrad.spec.contract import OUTPUTS
from specgrad.spec.errors import SpecError
from specgrad.spec.run_folder import spec_hash
from specgrad.spec.validate import ValidSpec

FORMATS = ("safetensors", "onnx", "c")


EXTENSIONS = {"safetensors": ".safetensors", "onnx": ".onnx", "c": ".c"}


def export(spec_path: Path, weights: Path | None, fmt: str, out: Path | None, overrides: list[str]) -> None:
    if fmt not in FORMATS:
        typer.echo(f"error: unknown format '{fmt}'; choose one of {', '.join(FORMATS)}", err=True)
        raise typer.Exit(2)
    try:
        spec, weights = spec_and_weights(spec_path, weights, overrides)
        if out is None:
            if not spec_path.is_dir():
                hint = f"pass --out model{EXTENSIONS[fmt]}, or give a run folder to export into"
                raise SpecError.at(None, "where to? --out is needed when exporting from a spec file", hint)
            out = spec_path / f"model{EXTENSIONS[fmt]}"
        typer.echo(write_export(spec, weights, fmt, out))
    except SpecError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(1) from None
    except (DeviceUnavailable, ImportError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(3) from None
    except (ValueError, RuntimeError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1 if isinstance(e, ValueError) else 3) from None


def write_export(spec: ValidSpec, weights: Path, fmt: str, out: Path) -> str:
    """Write one export of the weights; returns what to tell the user."""
    if fmt == "c":
        Device.DEFAULT = "CLANG"  # NOTE: the C export is made of CLANG kernels: the weights must live there
    model, meta = load_model(spec, weights)
    # NOTE: the exports compute what run computes; for weights that do not name their task, run guesses it
    served = {**meta, "task": meta.get("task") or guess_task(spec)}
    if not out.parent.is_dir():
        raise SpecError.at(None, f"--out {out}: the folder {out.parent} does not exist")
    if out.is_dir():
        example = out / f"model{EXTENSIONS[fmt]}"
        raise SpecError.at(None, f"--out {out} is a folder", f"name the file to write, e.g. {example}")
    if fmt == "safetensors":
        safe_save(get_state_dict(model), out, metadata={**meta, "spec_hash": spec_hash(spec.values)})
        return f"wrote {out}"
    if fmt == "onnx":
        from specgrad.spec.export.onnx import export_onnx

        export_onnx(spec, model, out, meta=served)
        return f"wrote {out} (ONNX, outputs {', '.join(OUTPUTS[served['task']])}; checked with onnx.checker)"
    from specgrad.spec.export.c import export_c

    header = export_c(spec, model, out, served)
    printed = OUTPUTS[served["task"]][-1]
    return (f"wrote {out} and {header}; build a command-line runner with\n"
            f"  cc -O2 -DSPECGRAD_MAIN {out} -o {out.with_suffix('')} -lm\n"
            f"(it reads examples as numbers on stdin and prints their {printed}, a line each)")  # fmt: skip
