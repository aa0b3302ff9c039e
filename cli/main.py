"""The `specgrad` command: a Typer app with one file per command. Only cli/ exits the process.

Exit codes (docs/cli.md; cli/errors.py maps exceptions to them): 0 success, 1 invalid spec, data or path, 2 bad
command line (typer), 3 the environment cannot do it, 4 non-finite loss, 70 internal error, 130 interrupted, 141 the
reader of the output went away.
"""

# NOTE: no `from __future__ import annotations` here: typer reads these signatures at every start, and string
# annotations make that 27 ms instead of 6 ms per start
import errno
from contextlib import AbstractContextManager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from specgrad.cli.errors import PIPE_CLOSED, TRACEBACKS, _discard_stdout, check_paths, handled

from specgrad import __version__
from specgrad.flags import COUNT, Context

# NOTE: a spec's own bounds (train.epochs, train.steps, seed: modelspec/validate.py; a test checks they agree), so an
# option cannot ask for what the spec it overrides may not; imported from there, every command would pay for it
MAX_EPOCHS, MAX_STEPS, MAX_SEED = 1_000_000, 1 << 40, (1 << 32) - 1
MAX_BENCH_SECONDS = 600.0


class App(typer.Typer):
    """typer.Typer whose help, usage and --version end as every command does when their reader goes away (`| head`):
    exit 141, nothing on stderr. They are printed by typer's rich formatting and click before any command's handled()
    runs, and both end a broken pipe with exit 1 themselves (rich's Console.on_broken_pipe, click's main)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except SystemExit as e:
            if e.code == 1 and is_broken_pipe(e.__context__):
                _discard_stdout()  # NOTE: rich and click point it away already; what is buffered is not written again
                raise SystemExit(PIPE_CLOSED) from None
            raise


def is_broken_pipe(e: BaseException | None) -> bool:
    """Whether an exit 1 was raised while handling a write to a reader that went away (and is no other failure)."""
    return isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and e.errno == errno.EPIPE)


# NOTE: each command imports its own module when it runs, so a command (or --help) pays only for what it uses

app = App(
    name="specgrad",
    help="Validate, train, run and export models written as YAML specs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"specgrad {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", envvar="SPECGRAD_DEBUG", help="print the traceback of an error")
    ] = False,
) -> None:
    """specgrad: a declarative model-spec toolchain."""
    TRACEBACKS.set(debug)


# *** the reading policy: which files a spec may name, and how large (the spec loader enforces it) ***

Root = Annotated[
    Path | None,
    typer.Option("--root", parser=Path, help="folder a spec's files (extends, data.path) may come from besides the "
                 "spec's own folder (default: the current folder)"),
]  # fmt: skip
AllowOutside = Annotated[
    bool, typer.Option("--allow-outside", help="let a spec name files outside its folder and --root")
]
MaxFileMb = Annotated[
    int | None, typer.Option("--max-file-mb", min=1, help="largest data, weights or checkpoint file to read, in MiB")
]
RankBy = Annotated[
    str | None,
    typer.Option("--rank-by", metavar="METRIC", help="order the runs best first by their best validation value of "
                 "this metric (loss, accuracy, mae, rmse, r2, f1, auc, top5, ...; <output>.<metric> of one output; "
                 "default: each spec's train.early_stopping.metric, else loss)"),
]  # fmt: skip
DeviceName = Annotated[str | None, typer.Option("--device", help="CLANG, GPU or CPU (default: the best available)")]


def reading_policy(root: Path | None, allow_outside: bool, max_file_mb: int | None) -> AbstractContextManager:
    """The flags SPEC_ROOT, SPEC_ALLOW_OUTSIDE and MAX_FILE_MB for the command's duration, where an option gives them
    (otherwise they keep their values from the environment)."""
    check_paths({"--root": root})
    given = {"SPEC_ROOT": None if root is None else str(root), "SPEC_ALLOW_OUTSIDE": 1 if allow_outside else None,
             "MAX_FILE_MB": max_file_mb}  # fmt: skip
    return Context(**{k: v for k, v in given.items() if v is not None})


@app.command("demo")
def demo_command(
    steps: Annotated[int, typer.Option(min=1, max=100_000, help="training steps")] = 300,
    seed: Annotated[int, typer.Option(min=0, max=MAX_SEED, help="seed for the data and the initial weights")] = 0,
    device: DeviceName = None,
) -> None:
    """Train a small MLP on two generated spirals and report the loss and accuracy."""
    with handled():
        from specgrad.cli.demo import demo

        demo(steps=steps, seed=seed, device=device)


@app.command("validate")
def validate_command(
    spec: Annotated[
        Path,
        typer.Argument(
            parser=Path, metavar="SPEC", help="the spec file (YAML), or a run folder (its spec.resolved.yaml)"
        ),
    ],
    overrides: Annotated[list[str] | None, typer.Option("--set", help="override a key: --set train.lr=0.01")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary or the errors as JSON")] = False,
    batch: Annotated[
        int | None,
        typer.Option(
            min=1, max=1 << 16, help="batch size for the cost report and the memory check (default: the spec's)"
        ),
    ] = None,
    print_resolved: Annotated[
        bool,
        typer.Option(
            "--print", help="print the spec as it will train (extends, vars and --set applied) instead of a summary"
        ),
    ] = False,
    weights: Annotated[
        Path | None,
        typer.Option(
            parser=Path,
            help="list the spec's weights (name, shape) and which tensor of this file (or run folder) holds each",
        ),
    ] = None,
    root: Root = None,
    allow_outside: AllowOutside = False,
    max_file_mb: MaxFileMb = None,
) -> None:
    """Check a spec without running anything: every problem with file:line:col, or a summary of the model."""
    with handled(), reading_policy(root, allow_outside, max_file_mb):
        from specgrad.cli.validate import validate

        if as_json and print_resolved:
            raise typer.BadParameter("--print and --json are two different outputs: give one", param_hint="--print")
        check_paths({"SPEC": spec, "--weights": weights})
        validate(spec, overrides or [], as_json, batch, resolved=print_resolved, weights=weights)


def _one_length(epochs: int | None, steps: int | None) -> None:
    if epochs is not None and steps is not None:
        typer.echo("error: give --epochs or --steps, not both", err=True)
        raise typer.Exit(2)


@app.command("train")
def train_command(
    spec: Annotated[
        Path | None,
        typer.Argument(
            parser=Path, metavar="SPEC", help="the spec file (YAML), or a run folder to train its spec again"
        ),
    ] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="override a key: --set train.lr=0.01")] = None,
    device: DeviceName = None,
    out: Annotated[Path | None, typer.Option(parser=Path, help="folder for run folders (default: runs)")] = None,
    epochs: Annotated[
        int | None,
        typer.Option(min=1, max=MAX_EPOCHS, help="train for this many epochs instead (--resume: the run's new length)"),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_STEPS,
            help="train for exactly this many steps (the last epoch may be partial; --resume: the run's new length)",
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            parser=Path, help="continue the run in this folder, as it was started, from its newest checkpoint"
        ),
    ] = None,
    root: Root = None,
    allow_outside: AllowOutside = False,
    max_file_mb: MaxFileMb = None,
) -> None:
    """Train the model a spec describes; writes a run folder with metrics, checkpoints and the final weights."""
    _one_length(epochs, steps)
    with handled(), reading_policy(root, allow_outside, max_file_mb):
        from specgrad.cli.train import train

        check_paths({"SPEC": spec, "--out": out, "--resume": resume})
        train(spec, overrides or [], device, out, epochs, steps, resume)


@app.command("run")
def run_command(
    spec: Annotated[
        Path,
        typer.Argument(
            parser=Path, metavar="SPEC", help="the spec file (YAML), or a run folder (its spec and final weights)"
        ),
    ],
    input_path: Annotated[
        Path,
        typer.Option(
            "--input",
            parser=Path,
            help="examples: .npy, .csv (header row) or .json (nested lists); or one .png/.jpg "
            "image for a model trained on an images source; for a model with several inputs, a .npz (an array per "
            "input) or a .json object (input name -> examples)",
        ),
    ],
    weights: Annotated[
        Path | None,
        typer.Option(
            parser=Path, help="trained weights: a model.safetensors or any checkpoint (default: the run folder's final)"
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            parser=Path,
            help="write the predictions to this .csv or .json table (an ID or index column, the columns --keep "
            "names, the predicted class or value, each class's probability p_<class>) or .npy array (several "
            "outputs: .npz or .json)",
        ),
    ] = None,
    id_column: Annotated[
        str | None, typer.Option("--id", metavar="COLUMN", help="the .csv input's ID column, first in --output")
    ] = None,
    keep: Annotated[
        str | None, typer.Option(metavar="COL,...", help="columns of the .csv input copied into --output")
    ] = None,
    keep_inputs: Annotated[
        bool, typer.Option("--keep-inputs", help="copy every column of the .csv input into --output")
    ] = False,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="override a key: --set vars.hidden=256")] = None,
    device: DeviceName = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the predictions as JSON")] = False,
    allow_nonfinite: Annotated[
        bool, typer.Option("--allow-nonfinite", help="run examples holding NaN or infinity (with a warning)")
    ] = False,
    root: Root = None,
    allow_outside: AllowOutside = False,
    max_file_mb: MaxFileMb = None,
) -> None:
    """Run trained weights on examples from a file: a class and its probability, values, or the next character."""
    with handled(), reading_policy(root, allow_outside, max_file_mb):
        from specgrad.cli.run import Carry, run

        check_paths({"SPEC": spec, "--input": input_path, "--weights": weights, "--output": output})
        kept = tuple(k.strip() for k in keep.split(",") if k.strip()) if keep else ()
        run(spec, weights, input_path, output, overrides or [], device, as_json, allow_nonfinite,
            Carry(id_column, kept, keep_inputs))  # fmt: skip


@app.command("evaluate")
def evaluate_command(
    spec: Annotated[
        Path,
        typer.Argument(
            parser=Path, metavar="SPEC", help="a run folder (its spec and final weights), or a spec with --weights"
        ),
    ],
    weights: Annotated[
        Path | None,
        typer.Option(
            parser=Path, help="trained weights: a model.safetensors or any checkpoint (default: the run folder's final)"
        ),
    ] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="override a key: --set vars.width=64")] = None,
    device: DeviceName = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the figures as JSON")] = False,
    split: Annotated[
        str,
        typer.Option(
            help="the examples: validation, test (data.test_split or data.test_path), or a FILE of examples in the "
            "data's format (a folder for images), read with the run's statistics and classes"
        ),
    ] = "validation",
    root: Root = None,
    allow_outside: AllowOutside = False,
    max_file_mb: MaxFileMb = None,
) -> None:
    """How good the weights are on held-out examples: accuracy, per-class figures and the confusion matrix, errors in
    the target's units, or loss and perplexity; written into the run folder as JSON."""
    with handled(), reading_policy(root, allow_outside, max_file_mb):
        from specgrad.cli.evaluate import SPLITS, evaluate

        check_paths({"SPEC": spec, "--weights": weights, "--split": None if split in SPLITS else Path(split)})
        evaluate(spec, weights, overrides or [], device, as_json, split)


@app.command("compare")
def compare_command(
    runs: Annotated[
        list[Path], typer.Argument(parser=Path, metavar="RUNS", help="run folders that `specgrad train` wrote")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
    plot: Annotated[
        Path | None, typer.Option(parser=Path, help="write one PNG of the runs' curves to this file (needs matplotlib)")
    ] = None,
    rank_by: RankBy = None,
) -> None:
    """Runs side by side: final and best metrics, test figures, and the spec keys that differ between them."""
    with handled():
        from specgrad.cli.compare import compare

        check_paths({**{f"RUN_DIR {i + 1}": r for i, r in enumerate(runs)}, "--plot": plot})
        compare(runs, as_json, plot, rank_by)


@app.command("generate")
def generate_command(
    spec: Annotated[
        Path,
        typer.Argument(
            parser=Path, metavar="SPEC", help="a run folder of a character language model (or its spec and --weights)"
        ),
    ],
    prompt: Annotated[str, typer.Option(help="the text to go on from")],
    tokens: Annotated[int, typer.Option(help="how many characters to write")] = 200,
    temperature: Annotated[
        float, typer.Option(help="1 samples the model as it is; lower is more predictable; 0 always the likeliest")
    ] = 1.0,
    top_k: Annotated[int | None, typer.Option(help="draw from the k likeliest characters only")] = None,
    seed: Annotated[int, typer.Option(help="the same seed writes the same text")] = 0,
    weights: Annotated[
        Path | None,
        typer.Option(parser=Path, help="trained weights (default: the run folder's final model.safetensors)"),
    ] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="override a key: --set vars.width=64")] = None,
    device: DeviceName = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the prompt and the text as JSON")] = False,
    root: Root = None,
    allow_outside: AllowOutside = False,
    max_file_mb: MaxFileMb = None,
) -> None:
    """Write text with a character language model, one character at a time; reproducible with --seed."""
    with handled(), reading_policy(root, allow_outside, max_file_mb):
        from specgrad.cli.generate import generate

        check_paths({"SPEC": spec, "--weights": weights})
        generate(spec, weights, prompt, tokens, temperature, top_k, seed, overrides or [], device, as_json)


class Backend(str, Enum):
    local = "local"
    ray = "ray"


@app.command("sweep")
def sweep_command(
    spec: Annotated[
        Path | None,
        typer.Argument(parser=Path, metavar="SPEC", help="the spec file (YAML) to train with each set of values"),
    ] = None,
    grid: Annotated[
        list[str] | None,
        typer.Option(help="a key and its values: --grid train.lr=0.001,0.01 (or low..high with --random)"),
    ] = None,
    random: Annotated[
        int | None, typer.Option(min=1, help="run this many trials drawn from the grid instead of all of them")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, max=MAX_SEED, help="the seed --random draws with")] = 0,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="override a key in every trial")] = None,
    epochs: Annotated[
        int | None, typer.Option(min=1, max=MAX_EPOCHS, help="train each trial for this many epochs")
    ] = None,
    steps: Annotated[
        int | None, typer.Option(min=1, max=MAX_STEPS, help="train each trial for exactly this many steps")
    ] = None,
    device: DeviceName = None,
    out: Annotated[Path | None, typer.Option(parser=Path, help="folder for the sweep folder (default: runs)")] = None,
    backend: Annotated[Backend, typer.Option(help="local (processes on this machine) or ray")] = Backend.local,
    address: Annotated[
        str | None, typer.Option(help="the Ray cluster to run on (default with --backend ray: a local Ray instance)")
    ] = None,
    parallel: Annotated[
        int | None, typer.Option(min=1, help="trials at once (default: one per core, up to the number of trials)")
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(parser=Path, help="continue this sweep folder: its unfinished trials (a failed one is a result)"),
    ] = None,
    rank_by: RankBy = None,
    root: Root = None,
    allow_outside: AllowOutside = False,
    max_file_mb: MaxFileMb = None,
) -> None:
    """Train a spec once per combination of values, each trial a run folder in one sweep folder; best first."""
    _one_length(epochs, steps)
    with handled(), reading_policy(root, allow_outside, max_file_mb):
        from specgrad.cli.sweep import sweep

        check_paths({"SPEC": spec, "--out": out, "--resume": resume})
        sweep(spec, grid or [], random, seed, overrides or [], epochs, steps, device, out, backend.value, address,
              parallel, resume, rank_by)  # fmt: skip


@app.command("export")
def export_command(
    spec: Annotated[
        Path,
        typer.Argument(
            parser=Path, metavar="SPEC", help="the spec file (YAML), or a run folder (its spec and final weights)"
        ),
    ],
    fmt: Annotated[str, typer.Option("--format", help="safetensors, onnx or c")],
    weights: Annotated[
        Path | None,
        typer.Option(
            parser=Path, help="trained weights: a model.safetensors or any checkpoint (default: the run folder's final)"
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(parser=Path, help="the file to write (default for a run folder: model.onnx, model.c there)"),
    ] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="override a key: --set vars.hidden=256")] = None,
    root: Root = None,
    allow_outside: AllowOutside = False,
    max_file_mb: MaxFileMb = None,
) -> None:
    """Export trained weights: safetensors, ONNX (needs the onnx extra), or self-contained C source."""
    with handled(), reading_policy(root, allow_outside, max_file_mb):
        from specgrad.cli.export import export

        check_paths({"SPEC": spec, "--weights": weights, "--out": out})
        export(spec, weights, fmt, out, overrides or [])


@app.command("bench")
def bench_command(
    device: DeviceName = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document instead of a table")] = False,
    only: Annotated[
        list[str] | None, typer.Option(help="run only the workloads whose name contains this (repeatable)")
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="small sizes, for a run of seconds instead of minutes")
    ] = False,
    seconds: Annotated[
        float | None,
        typer.Option(
            min=0.0, max=MAX_BENCH_SECONDS, help="seconds of timed runs per side of a workload (default 1; 0.1 quick)"
        ),
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, help="at most this many timed runs per side")] = 100,
    threads: Annotated[
        int | None,
        typer.Option(min=1, max=COUNT, help="threads of specgrad, numpy's BLAS and PyTorch alike (default: all cores)"),
    ] = None,
    compare: Annotated[
        Path | None,
        typer.Option(parser=Path, help="a --json document of an earlier run: also print each workload's change"),
    ] = None,
) -> None:
    """Time matmul, elementwise, reductions, conv2d, training steps, whole train commands and start-up against numpy
    and PyTorch, every side on the same number of threads."""
    if seconds is not None and seconds != seconds:  # NOTE: NaN passes typer's range
        raise typer.BadParameter("NaN is not a number of seconds", param_hint="--seconds")
    with handled():
        from specgrad.cli.bench import bench

        check_paths({"--compare": compare})
        bench(device, as_json, only or [], quick, seconds, repeat, threads, compare)


@app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a spec (for editors: completion and hover help)."""
    import json

    from specgrad.modelspec.jsonschema import spec_json_schema

    with handled():
        typer.echo(json.dumps(spec_json_schema(), indent=2))


if __name__ == "__main__":
    app()
