"""`specgrad bench`: time kernels and training steps against numpy (and PyTorch where installed) in one run."""

from __future__ import annotations

from pathlib import Path

import typer

from specgrad.bench import report


def bench(device: str | None, as_json: bool, only: list[str], quick: bool, seconds: float | None, repeat: int,
          threads: int | None = None, compare: Path | None = None) -> None:  # fmt: skip
    code = report(device, only or None, quick, seconds, repeat, as_json, typer.echo, threads, compare)
    if code:
        raise typer.Exit(code)
