"""`specgrad validate SPEC`: check a spec without running anything; a summary table, or every problem found."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from specgrad.helpers import prod
from specgrad.spec.errors import SpecError
from specgrad.spec.validate import ValidSpec, validate_file


def _size(n: float, unit: str = "") -> str:
    for suffix in ("", "K", "M", "G", "T"):
        if abs(n) < 1000:
            return f"{n:.0f}{unit}" if suffix == "" else f"{n:.1f}{suffix}{unit.strip() and ' ' + unit.strip()}"
        n /= 1000
    return f"{n:.1f}P{unit}"


def _bytes(n: int) -> str:
    for suffix in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {suffix}" if suffix == "B" else f"{n:.1f} {suffix}"
        n /= 1024  # type: ignore[assignment]
    return f"{n:.1f} TiB"


def summary_table(spec: ValidSpec) -> Table:
    table = Table(title=f"{spec.values['name']} ({spec.path})", title_justify="left")
    for col in ("#", "layer", "output shape", "params", "FLOPs", "activations"):
        table.add_column(col, justify="right" if col not in ("layer", "output shape") else "left")
    for r in spec.rows:
        act = 4 * spec.batch_size * prod(r.out_shape)
        table.add_row(str(r.index), r.name, str(list(r.out_shape)), f"{r.params:,}", _size(r.flops), _bytes(act))
    table.add_section()
    table.add_row("", "total", f"batch {spec.batch_size}", f"{spec.params:,}", _size(spec.flops_per_example),
                  _bytes(spec.activation_bytes))  # fmt: skip
    return table


def summary_json(spec: ValidSpec) -> dict:
    layers = [{"index": r.index, "layer": r.name, "line": r.loc.line, "input_shape": list(r.in_shape),
               "output_shape": list(r.out_shape), "params": r.params, "flops": r.flops} for r in spec.rows]  # fmt: skip
    return {"valid": True, "name": spec.values["name"], "layers": layers, "params": spec.params,
            "flops_per_example": spec.flops_per_example, "step_flops": spec.step_flops,
            "activation_bytes": spec.activation_bytes, "batch_size": spec.batch_size}  # fmt: skip


def validate(spec: Path, as_json: bool) -> None:
    try:
        result = validate_file(spec)
    except SpecError as e:
        if as_json:
            problems = [{"file": p.loc.file if p.loc else None, "line": p.loc.line if p.loc else None,
                         "col": p.loc.col if p.loc else None, "message": p.message, "hint": p.hint}
                        for p in e.problems]  # fmt: skip
            typer.echo(json.dumps({"valid": False, "errors": problems}, indent=2))
        else:
            typer.echo(str(e), err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(summary_json(result), indent=2))
        return
    Console().print(summary_table(result))
    typer.echo(f"{spec}: valid; {result.params:,} parameters, {_size(result.step_flops, ' FLOP')} per training step, "
               f"{_bytes(result.activation_bytes)} of activations per batch")  # fmt: skip
