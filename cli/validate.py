"""`specgrad validate SPEC`: check a spec and its data without training; a summary table, or every problem found."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import typer
from rich.table import Table
from rich.text import Text
from specgrad.cli.console import Console

from specgrad.modelspec.errors import Problem, SpecError, label, printable
from specgrad.modelspec.files import check_regular
from specgrad.modelspec.validate import ValidSpec, is_float, run_steps, validate_file
from specgrad.modelspec.weights import check_init_layout, given_init, init_plan, matched, weight_names, weights_file
from specgrad.nn.state import SafetensorsError, safe_load
from specgrad.train.data import Dataset, column_uses, data_widths, inspect_data
from specgrad.train.metrics import check_metrics
from specgrad.train.run_folder import data_layout, resolved_spec_text, spec_file, spec_hash

MAX_SHOWN = 50  # NOTE: a long list of problems usually has one cause near its top


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
    # NOTE: a Text, never markup ('[' in a path is text), escaped (a path cannot drive the terminal)
    table = Table(title=Text(printable(f"{spec.values['name']} ({spec.path})")), title_justify="left")
    for col in ("#", "node", "layer", "output shape", "params", "FLOPs", "activations"):
        # NOTE: fold, never an ellipsis: a narrow terminal wraps a cell, it does not cut it
        table.add_column(col, justify="right" if col in ("#", "params", "FLOPs", "activations") else "left",
                         overflow="fold")  # fmt: skip
    for name, (shape, dtype) in spec.inputs.items():
        table.add_row("", name, f"input ({dtype})", str(list(shape)), "", "", "")
    for i, s in enumerate(spec.steps):
        act = 4 * spec.batch_size * s.saved
        node = "" if s.name.isdigit() else s.name
        table.add_row(str(i), node, s.what, str(list(s.out_shape)), f"{s.params:,}", _size(s.flops), _bytes(act))
    table.add_section()
    table.add_row("", "total", f"batch {spec.batch_size}", "", f"{spec.params:,}", _size(spec.flops_per_example),
                  _bytes(spec.activation_bytes))  # fmt: skip
    return table


def _print_table(table: Table) -> None:
    """On a terminal, as wide as the terminal allows; piped or in a CI log (no terminal, where rich assumes 80 columns),
    as wide as the table needs, so no column is ever cut."""
    console = Console()
    if not console.is_terminal:
        wide = console.measure(table, options=console.options.update_width(100_000)).maximum
        console = Console(width=max(wide, console.width))
    console.print(table)


def summary_json(spec: ValidSpec) -> dict:
    steps = [{"node": s.name, "layer": s.what, "kind": s.kind, "file": s.loc.file, "line": s.loc.line,
              "input_shapes": [list(x) for x in s.in_shapes], "output_shape": list(s.out_shape), "params": s.params,
              "flops": s.flops} for s in spec.steps]  # fmt: skip
    inputs = {k: {"shape": list(shape), "dtype": dtype} for k, (shape, dtype) in spec.inputs.items()}
    return {"valid": True, "name": spec.values["name"], "inputs": inputs, "steps": steps,
            "outputs": list(spec.outputs), "params": spec.params, "trainable_params": spec.trainable_params,
            "flops_per_example": spec.flops_per_example, "step_flops": spec.step_flops,
            "activation_bytes": spec.activation_bytes, "batch_size": spec.batch_size}  # fmt: skip


def data_json(data: Dataset | None) -> dict | None:
    if data is None:
        return None
    ret = {"task": data.task, "train_examples": len(data.x_train), "valid_examples": len(data.x_valid),
           "test_examples": data.test_examples,
           **_learns_json(data.num_classes, data.class_names, data.target_stats)}  # fmt: skip
    if data.heads:
        ret["outputs"] = {o: {"task": h.task, "loss": h.loss, "weight": h.weight,
                              **_learns_json(h.num_classes, h.class_names, h.target_stats)}
                          for o, h in data.heads.items()}  # fmt: skip
    if data.table is not None:
        notes, missing = data.table, data.columns.missing if data.columns is not None else {}
        ret["csv"] = {"delimiter": notes.dialect.delimiter, "sniffed": notes.dialect.sniffed,
                      "decimal": notes.dialect.decimal, "rows_without_target": notes.no_target,
                      "rows_dropped": notes.dropped,
                      "missing": {c: {"cells": notes.missing.get(c, 0), "strategy": how, "fill": fill}
                                  for c, (how, fill) in missing.items()}}  # fmt: skip
    return ret


def csv_line(data: Dataset) -> str | None:
    """For a csv: its dialect, and per column with missing cells how many there are and what fills them (the
    training rows' value), and the rows left out; None for another source."""
    notes = data.table
    if notes is None:
        return None
    missing = data.columns.missing if data.columns is not None else {}
    parts = []
    for c, n in notes.missing.items():
        how, fill = missing.get(c, ("", None))
        what = "" if not how else ", their rows left out (drop_row)" if how == "drop_row" else \
            f", filled with {label(str(fill), None)}" if how == "fill" else \
            f", filled with the training rows' {how}, {label(str(fill), None)}"  # fmt: skip
        parts.append(f"{label(c, None)} {n}{what}")
    line = f"csv: {notes.dialect.describe()}; missing cells: {'; '.join(parts) if parts else 'none'}"
    if notes.no_target:
        said = ", ".join(f"'{label(t, None)}' {n}" if t else f"empty {n}" for t, n in notes.target_tokens.items())
        line += f"; {notes.no_target} row{'s' * (notes.no_target != 1)} left out: their target is missing ({said})"
        if words := [t for t in notes.target_tokens if t]:  # NOTE: NA, ? or null may be a class (North America)
            line += (f"; if {label(words[0], None)} is a class, not a missing value, set data.missing_values (e.g. "
                     "[\"\"] for empty cells only)")  # fmt: skip
    if notes.dropped:
        line += f"; {notes.dropped} row{'s' * (notes.dropped != 1)} left out by drop_row"
    return line


def column_lines(data: Dataset, spec: ValidSpec) -> list[str]:
    """A csv's columns, a line each: its kind and how it becomes inputs (data.column_uses); none for another source.
    Column names are labels: escaped."""
    if data.table is None or not data.table.kinds or data.columns is None:
        return []
    uses = column_uses(data.table.kinds, data.columns, _normalized(spec))
    return ["columns:", *(f"  {label(c, None)}: {kind}; {how}" for c, kind, how in uses)]


def _normalized(spec: ValidSpec) -> bool:
    """Whether the inputs' numbers are standardized (data.normalize, a float input)."""
    return bool((spec.values.get("data") or {}).get("normalize")) and is_float(next(iter(spec.inputs.values()))[1])


def _learns_json(num_classes: int | None, class_names: list[str] | None, target_stats: dict) -> dict:
    stats = {k: np.asarray(v).tolist() for k, v in target_stats.items()}
    return {"num_classes": num_classes, "class_names": class_names, "target_stats": stats}


def data_line(data: Dataset) -> str:
    """What the data is, in one line: examples per split, the input columns when some are categorical, and what the
    model learns from them (each output's, with its loss and weight, for a model with several). Names from the data
    (columns, classes) are labels: escaped, so a CSV cannot drive the terminal or break the line."""
    parts = [f"{len(data.x_train):,} training", f"{len(data.x_valid):,} validation"]
    parts += [f"{data.test_examples:,} test (held out for evaluate --split test)"] if data.test_examples else []
    head = f"data: {', '.join(parts[:-1])} and {parts[-1]} examples; "
    if data.columns is not None and data.columns.categorical:
        head += f"inputs: {label(data.columns.explain(), None)}; "
    if data.heads:
        parts = [(o, h, _learns(h.task, h.num_classes, h.class_names, data.y_train.dtype[o].shape, h.target_stats))
                 for o, h in data.heads.items()]  # fmt: skip
        return head + "; ".join(f"{o}: {what} ({h.loss}, weight {h.weight:g})" for o, h, what in parts)
    return head + _learns(data.task, data.num_classes, data.class_names, data.y_train.shape[1:], data.target_stats)


def _learns(task: str, num_classes: int | None, class_names: list[str] | None, shape: tuple[int, ...],
            target_stats: dict) -> str:  # fmt: skip
    if task == "classify":
        names = class_names or []
        shown = ", ".join(label(str(n)) for n in names[:10]) + (", ..." if len(names) > 10 else "")
        return f"{num_classes} classes ({shown})"
    if task == "language":
        return f"the next character at each position, {num_classes} character codes"
    if not target_stats:
        return f"targets of shape {list(shape)}"
    mean, std = target_stats["mean"].reshape(-1), target_stats["std"].reshape(-1)
    stats = f"mean {mean[0]:.4g}, std {std[0]:.4g}" if len(mean) == 1 else f"{len(mean)} means and stds"
    return f"targets of shape {list(shape)}, standardized for training ({stats} in the training split)"


def _fail(problems: list[Problem], as_json: bool) -> None:
    """Print every problem (JSON, or one per line up to MAX_SHOWN) and exit 1."""
    if as_json:
        found = [{"file": p.loc.file if p.loc else None, "line": p.loc.line if p.loc else None,
                  "col": p.loc.col if p.loc else None, "message": p.message, "hint": p.hint}
                 for p in problems]  # fmt: skip
        typer.echo(json.dumps({"valid": False, "errors": found}, indent=2))
    else:
        shown = problems[:MAX_SHOWN]
        more = len(problems) - len(shown)
        typer.echo("\n".join(map(str, shown)) + (f"\n... and {more} more problems" if more else ""), err=True)
    raise typer.Exit(1)


def weights_listing(spec: ValidSpec, file: Path) -> dict[str, list]:
    """validate --weights FILE: each weight of the spec (name, shape, the tensor of FILE that holds it or None, its
    shape there), and FILE's tensors no weight of the spec takes. A run folder or specgrad's own weights file is read
    by weight name, as init.from reads it."""
    names = weight_names(spec.steps)
    path = weights_file(str(file), str(file), None, "--weights")
    check_regular(path, None, "--weights", str(file), None)
    try:
        plan = matched(path, safe_load(path, device="disk"), names, str(file), None, run_steps)
    except (SafetensorsError, OSError) as e:
        raise SpecError.at(None, f"--weights: cannot read {file} as safetensors: {e}") from None
    have = [(n, list(shape), f := plan.pairs.get(n), list(plan.header[f].shape) if f in plan.header else None)
            for n, (_, _, shape) in names.items()]  # fmt: skip
    unused = list(plan.unused) if plan.named else [k for k in plan.header if k not in names]
    return {"weights": have, "unused": unused}


def _print_weights(listing: dict[str, list], file: Path) -> None:
    for name, shape, tensor, theirs in listing["weights"]:
        where = "not in the file (starts from the seed)" if tensor is None else f"'{tensor}' {theirs}"
        where += "  <- shapes differ" if tensor is not None and theirs != shape else ""
        typer.echo(printable(f"  {name} {shape}: {where}"))
    if listing["unused"]:
        typer.echo(printable(f"  in {file} but no weight of the spec: {', '.join(listing['unused'])}"))


def init_line(spec: ValidSpec, data_read: bool = True) -> str | None:
    """What init: loads, in one line: how many weights from which file; from a run folder (matched by weight name) also
    which start from the seed and which of the run's weights are left out, and, where the data is not read here, that
    its columns and classes are compared with the run's when training reads it."""
    if (init := given_init(spec.node("init"))) is None:
        return None
    plan = init_plan(init, spec.path, weight_names(spec.steps), run_steps)
    line = f"init: {len(plan.pairs)} weights from {init.get('from').value}"
    if plan.named:
        line += f" ({', '.join(plan.pairs) or 'none'}); from the seed: {', '.join(plan.fresh) or 'none'}"
        line += f"; left out: {', '.join(plan.unused)}" if plan.unused else ""
        line += "" if data_read else "; the run's columns and classes are checked against the data at train"
    return printable(line)


def validate(spec: Path, overrides: list[str], as_json: bool, batch: int | None = None, resolved: bool = False,
             weights: Path | None = None) -> None:  # fmt: skip
    try:
        result = validate_file(spec_file(spec), overrides, batch=batch, widths=data_widths)
        listing = weights_listing(result, weights) if weights is not None else None
    except SpecError as e:
        _fail(e.problems, as_json)
    data, problems = inspect_data(result)  # NOTE: the data contract: the data as the model, loss and labels need it
    if data is not None and not problems:
        try:
            check_metrics(result, data)  # NOTE: metrics and class weights that the data's classes rule out
        except SpecError as e:
            problems = e.problems
        if not data.heads:  # NOTE: a warm start from a run that read other columns or classes
            problems += check_init_layout(result, *data_layout(data), run_steps)
    if problems:
        _fail(problems, as_json)
    if resolved:
        # NOTE: files named relative to the current folder, so `--print > resolved.yaml` validates as it is
        head = (f"# {printable(str(spec))} as it will be trained (spec_hash {spec_hash(result.values)}): extends, "
                "vars and --set applied, defaults left out; printed by specgrad validate --print\n")  # fmt: skip
        typer.echo(head + resolved_spec_text(result, Path.cwd()), nl=False)
        return
    if as_json:
        extra = {"weights": [dict(zip(("name", "shape", "tensor", "tensor_shape"), w)) for w in listing["weights"]],
                 "unused": listing["unused"]} if listing is not None else {}  # fmt: skip
        uses = column_uses(data.table.kinds, data.columns, _normalized(result)) if data is not None and \
            data.table is not None and data.columns is not None else []  # fmt: skip
        extra |= {"auto": list(result.resolved)} if result.resolved else {}
        extra |= {"columns": [dict(zip(("name", "kind", "use"), u)) for u in uses]} if uses else {}
        typer.echo(json.dumps({**summary_json(result), "data": data_json(data), **extra}, indent=2))
        return
    _print_table(summary_table(result))
    if data is not None:
        typer.echo(data_line(data))
    if data is not None and (line := csv_line(data)) is not None:
        typer.echo(line)
    if data is not None:
        for line in column_lines(data, result):
            typer.echo(line)
    for line in result.resolved:  # NOTE: what input.shape: auto and out: auto took from the data
        typer.echo(printable(line))
    if (line := init_line(result, data is not None)) is not None:
        typer.echo(line)
    if listing is not None:
        typer.echo(printable(f"weights of {result.values['name']} (name, shape) and the tensors of {weights}:"))
        _print_weights(listing, weights)
    frozen = f" ({result.trainable_params:,} trainable)" if result.trainable_params != result.params else ""
    typer.echo(f"{printable(str(spec))}: valid; {result.params:,} parameters{frozen}, "
               f"{_size(result.step_flops, ' FLOP')} per training step, {_bytes(result.activation_bytes)} of "
               "activations per batch")  # fmt: skip
