"""`specgrad sweep SPEC --grid key=v1,v2 ...` and `specgrad sweep --resume SWEEP_DIR`: train one spec with each set
of overrides the plan lists (specgrad.train.sweep), every trial an ordinary run folder in one sweep folder, then a
summary best first (summary.csv, summary.json, the compare table in summary.txt, and compare.png).

Each trial is its own process (`python -m specgrad.cli.sweep SWEEP_DIR TRIAL`, which runs `train` into the trial's
folder, or resumes it), so one that crashes stops nothing else. Locally, K trials run at once (--parallel, default
one per core up to the number of trials) with THREADS = cores // K each, so the CPU is never oversubscribed; with
--backend ray the same processes run as Ray tasks of that many CPUs each, on a local Ray instance or the cluster at
--address. Thread counts do not change results (the THREADS flag), so either backend gives the same bits.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from specgrad.cli.compare import print_table
from specgrad.cli.errors import handled
from specgrad.cli.train import train

from specgrad.flags import MAX_FILE_MB, SPEC_ALLOW_OUTSIDE, SPEC_ROOT
from specgrad.helpers import atomic_write
from specgrad.modelspec.errors import Problem, SpecError, printable
from specgrad.modelspec.validate import ValidSpec, validate_file
from specgrad.runtime.ops_clang import cores
from specgrad.train.compare import curves_png, differences
from specgrad.train.run_folder import RESOLVED, locked, new_run_folder, spec_file
from specgrad.train.sweep import (
    INTERRUPTED,
    Plan,
    Trial,
    parse_grid,
    plan_trials,
    read_results,
    record_result,
    state,
    summary,
    summary_csv,
)

LOGS = "logs"  # NOTE: each trial's output, beside its run folder (the folder is made by the trial's own process)
PARENT = "SPECGRAD_TRIAL_PARENT"  # NOTE: the pid that started a trial's process, which it must not outlive


def sweep(spec_path: Path | None, grid: list[str], random: int | None, seed: int, overrides: list[str],
          epochs: int | None, steps: int | None, device: str | None, out: Path | None, backend: str,
          address: str | None, parallel: int | None, resume: Path | None) -> None:  # fmt: skip
    if address is not None and backend != "ray":
        raise SpecError.at(None, "--address names a Ray cluster", "add --backend ray")
    if resume is not None:
        if spec_path is not None or grid or overrides or random is not None or epochs or steps or out is not None:
            raise SpecError.at(None, "--resume continues a sweep exactly as it was planned (its sweep.json)",
                               "leave out the spec, --grid, --set, --random, --epochs, --steps and --out")  # fmt: skip
        folder, plan = resume, Plan.read(resume)
        _validate(Path(plan.spec), plan.overrides, plan.trials)  # NOTE: the plan is a file anyone could have edited
    else:
        if spec_path is None:
            raise SpecError.at(None, "name a spec to sweep, or a sweep folder to continue with --resume SWEEP_DIR")
        folder, plan = _start(spec_path, grid, random, seed, overrides, epochs, steps, device, out)
    with locked(folder):
        _run(folder, plan, backend, address, parallel)


def _start(spec_path: Path, grid_texts: list[str], random: int | None, seed: int, overrides: list[str],
           epochs: int | None, steps: int | None, device: str | None, out: Path | None
           ) -> tuple[Path, Plan]:  # fmt: skip
    """Every trial's spec validated (a mistake in any of them stops the sweep before it starts), then the sweep
    folder and its plan."""
    if not grid_texts:
        raise SpecError.at(None, "a sweep needs at least one --grid key=value1,value2")
    grid = parse_grid(grid_texts)
    trials = plan_trials(grid, random, seed)
    path = spec_file(spec_path)
    spec = _validate(path, overrides, trials)
    folder = new_run_folder(out or Path("runs"), f"{spec.values['name']}-sweep")
    plan = Plan(str(path.resolve()), overrides, epochs, steps, device, grid, random, seed, trials)
    plan.write(folder)
    return folder, plan


def _validate(path: Path, overrides: list[str], trials: list[Trial]) -> ValidSpec:
    """The spec with the shared overrides (its data files read), and every trial's spec: all their problems at once,
    each named by its trial."""
    spec = validate_file(path, overrides)
    problems: list[Problem] = []
    for trial in trials:
        try:
            validate_file(path, [*overrides, *trial.overrides], data_files=False)
        except SpecError as e:
            problems += [Problem(f"{trial.name} ({', '.join(trial.overrides)}): {p.message}", p.loc, p.hint)
                         for p in e.problems]  # fmt: skip
    if problems:
        raise SpecError(problems[:20])
    return spec


def _run(folder: Path, plan: Plan, backend: str, address: str | None, parallel: int | None) -> None:
    results = read_results(folder)
    todo = [t for t in plan.trials if state(folder, t, results) == "to do"]
    at_once = max(1, min(parallel or cores(), len(todo) or 1))
    threads = max(1, cores() // at_once)
    done = len(plan.trials) - len(todo)
    typer.echo(f"sweep {folder}: {len(plan.trials)} trials ({done} done before), {at_once} at once with "
               f"{threads} thread{'s' * (threads > 1)} each, on {backend}")  # fmt: skip
    (folder / LOGS).mkdir(exist_ok=True)

    def ended(trial: Trial, code: int) -> None:
        """How a trial's process ended, recorded and said (called from this thread only: one results.json writer)."""
        error = _error(folder, trial) if code > 0 and code != INTERRUPTED else ""
        record_result(folder, results, trial, code, error)
        typer.echo(f"{trial.name} ({', '.join(trial.overrides)}): {_outcome(code, error)}")

    runner = _ray if backend == "ray" else _local
    interrupted = runner(folder, todo, at_once, threads, address, ended)
    _write_summary(folder, plan)
    if interrupted:
        typer.echo(f"interrupted; continue with\n  specgrad sweep --resume {folder}", err=True)
        raise typer.Exit(INTERRUPTED)


def _outcome(code: int, error: str) -> str:
    if code == 0:
        return "finished"
    if code == INTERRUPTED or code < 0:
        return "interrupted (sweep --resume continues it)"
    return f"failed (exit code {code}): {error}"


def _error(folder: Path, trial: Trial) -> str:
    """What a failed trial said: its errors and hints (else its last lines)."""
    try:
        lines = (folder / LOGS / f"{trial.name}.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    starts = [i for i, line in enumerate(lines) if line.startswith("error:") or ": error: " in line]
    return " ".join(line.strip() for line in lines[starts[0] if starts else -3 :])[:500]


def _command(folder: Path, trial: Trial, threads: int) -> tuple[list[str], dict[str, str]]:
    """The trial's process: this Python, this module, with THREADS (and compile jobs) set and the sweep's reading
    policy."""
    root = os.path.realpath(str(SPEC_ROOT.value) or os.getcwd())  # NOTE: this command's reading policy, as a trial's
    env = {**os.environ, "THREADS": str(threads), "COMPILE_JOBS": str(threads), "SPEC_ROOT": root,
           "SPEC_ALLOW_OUTSIDE": str(SPEC_ALLOW_OUTSIDE.value), "MAX_FILE_MB": str(MAX_FILE_MB.value)}  # fmt: skip
    return [sys.executable, "-m", "specgrad.cli.sweep", str(folder.resolve()), trial.name], env


def run_trial_process(command: list[str], env: dict[str, str], log: str, cwd: str,
                      started: Callable[[subprocess.Popen], None] | None = None) -> int:  # fmt: skip
    """Run one trial's process with its output appended to `log`; its exit code (negative: killed by a signal)."""
    with open(log, "ab") as out:
        process = subprocess.Popen(command, env={**env, PARENT: str(os.getpid())}, cwd=cwd, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        if started is not None:
            started(process)
        return process.wait()


def _die_with_parent() -> None:
    """A trial whose sweep process (or Ray worker) is killed stops too, on Linux: resuming the sweep continues it from
    a checkpoint. Set in the trial's own process (a fork of a threaded process must run no Python before exec); one
    whose parent is gone already stops at once."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # NOTE: PR_SET_PDEATHSIG
    if os.environ.get(PARENT) not in (None, str(os.getppid())):
        sys.exit(INTERRUPTED)


def _local(folder: Path, todo: list[Trial], at_once: int, threads: int, address: str | None,
           ended: Callable[[Trial, int], None]) -> bool:  # fmt: skip
    """Trials as processes of this machine, `at_once` at a time; Ctrl-C stops them (each saves its state)."""
    live: set[subprocess.Popen] = set()
    lock = threading.Lock()

    def run(trial: Trial) -> int:
        command, env = _command(folder, trial, threads)

        def started(p: subprocess.Popen) -> None:
            with lock:
                live.add(p)

        return run_trial_process(command, env, str(folder / LOGS / f"{trial.name}.log"), os.getcwd(), started)

    pool = ThreadPoolExecutor(at_once)
    futures: dict[Future, Trial] = {pool.submit(run, t): t for t in todo}
    pending = set(futures)
    try:
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                ended(futures[f], f.result())
    except KeyboardInterrupt:
        for f in pending:
            f.cancel()
        with lock:
            for p in live:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGINT)  # NOTE: a trial saves its state on SIGINT, as on Ctrl-C
        for f in pending:  # NOTE: the trials not yet said; those that never started stay to do
            if not f.cancelled():
                ended(futures[f], f.result())
        return True
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return False


def _ray(folder: Path, todo: list[Trial], at_once: int, threads: int, address: str | None,
         ended: Callable[[Trial, int], None]) -> bool:  # fmt: skip
    """Trials as Ray tasks of `threads` CPUs each, at most `at_once` at a time: on a local Ray instance, or on the
    cluster at `address` (the sweep folder, the spec and its data must be at the same paths on every node)."""
    try:
        import ray
    except ImportError:
        raise SpecError.at(None, "--backend ray needs ray, which is not installed",
                           "pip install 'specgrad[ray]', or use --backend local") from None  # fmt: skip
    started_here = not ray.is_initialized()
    if started_here:
        kw: dict[str, Any] = {"address": address} if address else {"num_cpus": cores()}
        ray.init(**kw, include_dashboard=False, log_to_driver=False, configure_logging=False)
    task = ray.remote(num_cpus=threads, max_retries=0)(run_trial_process)
    pending: dict[Any, Trial] = {}
    queue = list(todo)
    try:
        while queue or pending:
            while queue and len(pending) < at_once:
                trial = queue.pop(0)
                command, env = _command(folder, trial, threads)
                log = str((folder / LOGS / f"{trial.name}.log").resolve())
                pending[task.remote(command, env, log, os.getcwd())] = trial
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            ended(pending.pop(ready), ray.get(ready))
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)  # NOTE: the trial stops where it is; --resume continues from its checkpoint
        for trial in pending.values():
            ended(trial, INTERRUPTED)
        return True
    finally:
        if started_here:
            ray.shutdown()
    return False


def _write_summary(folder: Path, plan: Plan) -> None:
    """summary.json and summary.csv (every trial, best first), summary.txt (the compare table of the finished
    trials), compare.png (their curves, with matplotlib); the table printed."""
    rows, runs = summary(folder, plan)
    atomic_write(folder / "summary.json", (json.dumps({"trials": rows}, indent=2) + "\n").encode())
    atomic_write(folder / "summary.csv", summary_csv(rows, list(plan.grid)).encode())
    if runs:
        text = io.StringIO()
        print_table(Console(file=text, width=160), runs, differences([r.spec for r in runs]))
        atomic_write(folder / "summary.txt", text.getvalue().encode())
        typer.echo(text.getvalue(), nl=False)
        values = {r["trial"]: ", ".join(f"{k}={v}" for k, v in r["overrides"].items()) for r in rows}
        png = curves_png(runs, [f"{r.folder.name} {values[r.folder.name]}" for r in runs])
        if png is not None:
            atomic_write(folder / "compare.png", png)
    counts = {s: sum(r["state"] == s for r in rows) for s in ("finished", "failed", "to do")}
    typer.echo(f"{counts['finished']} finished, {counts['failed']} failed, {counts['to do']} not finished; best first "
               f"in {printable(str(folder / 'summary.csv'))}")  # fmt: skip


# *** one trial, in its own process ***


@contextlib.contextmanager
def _exit_code() -> Iterator[None]:
    try:
        with handled():
            yield
    except typer.Exit as e:
        sys.exit(e.exit_code)


def trial_main(folder: Path, name: str) -> None:
    """Train the trial `name` of the sweep in `folder` into folder/name, or continue it from its newest checkpoint."""
    _die_with_parent()
    with _exit_code():
        plan = Plan.read(folder)
        trial = next((t for t in plan.trials if t.name == name), None)
        if trial is None:
            raise SpecError.at(None, f"{folder} has no trial {name}")
        run = folder / name
        if os.path.lexists(run) and (run.is_symlink() or not run.is_dir()):
            raise SpecError.at(None, f"{run} is not a folder: a trial's run folder is in its place",
                               f"remove {run}, then resume the sweep")  # fmt: skip
        if (run / RESOLVED).exists():
            train(None, [], plan.device, None, None, None, resume=run)
        else:
            if run.exists():  # NOTE: made, then stopped before its spec was written: only a lock or temp files
                for leftover in run.iterdir():
                    if leftover.name.startswith(".") and leftover.is_file() and not leftover.is_symlink():
                        leftover.unlink()
                run.rmdir()
            train(Path(plan.spec), [*plan.overrides, *trial.overrides], plan.device, None, plan.epochs, plan.steps,
                  folder=run)  # fmt: skip


if __name__ == "__main__":
    trial_main(Path(sys.argv[1]), sys.argv[2])
