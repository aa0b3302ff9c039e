"""`specgrad sweep SPEC --grid key=v1,v2 ...` and `specgrad sweep --resume SWEEP_DIR`: train one spec with each set
of overrides the plan lists (specgrad.train.sweep), every trial an ordinary run folder in one sweep folder, then a
summary best first (summary.csv, summary.json, the compare table in summary.txt, and compare.png).

Each trial is its own process (`python -m specgrad.cli.sweep SWEEP_DIR TRIAL`, which runs `train` into the trial's
folder, or resumes it), so one that crashes stops nothing else. Locally, K trials run at once (--parallel, default
one per core up to the number of trials) with THREADS = cores // K each, so the CPU is never oversubscribed; with
--backend ray the same processes run as Ray tasks of that many CPUs each, on a local Ray instance or the cluster at
--address. Thread counts do not change results (the THREADS flag), so either backend gives the same bits.

The sweep folder may be someone else's: its logs, state and trial folders are reached through train.folder_io (never
through a link, never a FIFO), checked before any trial starts; a Ray address is tried before anything is made.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import io
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from specgrad.cli.compare import plot_notes, print_table
from specgrad.cli.errors import handled
from specgrad.cli.train import train, with_length

from specgrad.device import is_compute_device
from specgrad.flags import MAX_FILE_MB, SPEC_ALLOW_OUTSIDE, SPEC_ROOT
from specgrad.helpers import DeviceUnavailable
from specgrad.modelspec.errors import Problem, SpecError, excerpt, printable
from specgrad.modelspec.validate import NAME_MAX, ValidSpec, validate_file
from specgrad.modelspec.weights import given_init, init_file
from specgrad.runtime.ops_clang import cores
from specgrad.train.compare import MAX_METRICS, check_rank_by, curves_png, differences, read_run
from specgrad.train.data import data_file, data_widths
from specgrad.train.folder_io import REMOVE_HINT, entry_kind, folder_of, open_append_in, read_tail_in, write_in
from specgrad.train.run_folder import LOCK, PATH_KEYS, RESOLVED, RUN_FILES, locked, new_run_folder, spec_file
from specgrad.train.sweep import (
    BUSY,
    INTERRUPTED,
    LOGS,
    MAX_ERROR,
    Plan,
    Trial,
    check_as_planned,
    is_failure,
    parse_grid,
    plan_trials,
    read_results,
    record_result,
    spec_digest,
    state,
    summary,
    summary_csv,
)

PARENT = "SPECGRAD_TRIAL_PARENT"  # NOTE: the pid that started a trial's process, which it must not outlive
RAY_TIMEOUT_S = 10  # NOTE: a cluster that does not accept a connection in this long is not there
RAY_ADDRESS = re.compile(r"(?:ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")
LOG_TAIL = 64 << 10  # NOTE: bytes of a failed trial's log read for its error (its last words)


def sweep(spec_path: Path | None, grid: list[str], random: int | None, seed: int, overrides: list[str],
          epochs: int | None, steps: int | None, device: str | None, out: Path | None, backend: str,
          address: str | None, parallel: int | None, resume: Path | None, rank_by: str | None = None
          ) -> None:  # fmt: skip
    check_rank_by(rank_by)
    if address is not None and backend != "ray":
        raise SpecError.at(None, "--address names a Ray cluster", "add --backend ray")
    if resume is not None:
        if spec_path is not None or grid or overrides or random is not None or epochs or steps or out is not None:
            raise SpecError.at(None, "--resume continues a sweep exactly as it was planned (its sweep.json)",
                               "leave out the spec, --grid, --set, --random, --epochs, --steps and --out")  # fmt: skip
    elif spec_path is None:
        raise SpecError.at(None, "name a spec to sweep, or a sweep folder to continue with --resume SWEEP_DIR")
    with _backend(backend, address):  # NOTE: a cluster that is not there is said before a sweep folder is made
        if resume is not None:
            folder, plan = resume, Plan.read(resume)
            _validate(Path(plan.spec), plan.overrides, plan.trials)
        else:
            folder, plan = _start(spec_path, grid, random, seed, overrides, epochs, steps, device, out)
        _check_folder(folder, plan)
        with locked(folder):
            _run(folder, plan, backend, parallel, rank_by)


def _start(spec_path: Path, grid_texts: list[str], random: int | None, seed: int, overrides: list[str],
           epochs: int | None, steps: int | None, device: str | None, out: Path | None
           ) -> tuple[Path, Plan]:  # fmt: skip
    """Every trial's spec validated (a mistake in any of them stops the sweep before it starts), then the sweep
    folder and its plan."""
    if not grid_texts:
        raise SpecError.at(None, "a sweep needs at least one --grid key=value1,value2")
    _check_device(device)
    grid = parse_grid(grid_texts)
    trials = plan_trials(grid, random, seed)
    path = spec_file(spec_path)
    spec = _validate(path, overrides, trials)
    name = spec.values["name"]
    if len(f"{name}-sweep-999999".encode()) > NAME_MAX:
        raise SpecError.at(None, f"the spec's name is {len(name.encode()):,} bytes long: its sweep folder "
                           f"(<name>-sweep-<n>) would have a longer name than a file system allows ({NAME_MAX} bytes)",
                           "shorten the name, for example with --set name=short")  # fmt: skip
    digest = spec_digest(str(path), "SPEC")
    folder = new_run_folder(out or Path("runs"), name, "-sweep")
    plan = Plan(str(path.resolve()), digest, overrides, epochs, steps, device, grid, random, seed, trials)
    plan.write(folder)
    return folder, plan


def _check_device(device: str | None) -> None:
    """--device names a device to train on, before anything is made (sweep.json is checked for one when resumed; the
    command line bounds --seed, --epochs and --steps)."""
    if device is not None and not is_compute_device(device):
        raise DeviceUnavailable(f"--device {excerpt(device, 64)} is not a device to train on: use CPU, CLANG or GPU")


def _validate(path: Path, overrides: list[str], trials: list[Trial]) -> ValidSpec:
    """The spec with the shared overrides (its data files read), and every trial's spec: all their problems at once,
    each named by its trial."""
    spec = validate_file(path, overrides, widths=data_widths)
    problems: list[Problem] = []
    for trial in trials:
        try:
            validate_file(path, [*overrides, *trial.overrides], data_files=False, widths=data_widths)
        except SpecError as e:
            problems += [Problem(f"{trial.name} ({', '.join(trial.overrides)}): {p.message}", p.loc, p.hint)
                         for p in e.problems]  # fmt: skip
    if problems:
        raise SpecError(problems[:20])
    return spec


def _check_folder(folder: Path, plan: Plan) -> None:
    """The sweep folder's own entries are what a sweep makes there: .lock a file, logs/ a folder (made here, inside
    the sweep folder), each trial's log a file. A link, FIFO, folder or file in their place is refused before any
    trial starts: a log is appended to, and nothing outside the sweep folder may be written through it."""
    _expect(folder, LOCK, "file")
    _expect(folder, LOGS, "folder")
    with folder_of(folder, f"{LOGS}/-", create=True):
        pass  # NOTE: logs/ made, or found to be a folder of the sweep folder
    for trial in plan.trials:
        _expect(folder, f"{LOGS}/{trial.name}.log", "file")


def _expect(folder: Path, rel: str, wanted: str) -> None:
    """`folder/rel` is missing or `wanted` ("file" or "folder"), never followed; anything else is a SpecError."""
    kind = entry_kind(folder, rel)
    if kind in ("missing", wanted) or not kind.startswith(("a ", "file", "folder")):
        return  # NOTE: what cannot be looked at (no permission) is said by the step that needs it, with its errno
    shown = {"file": "a regular file", "folder": "a folder"}
    raise SpecError.at(None, f"{folder / rel} is {shown.get(kind, kind)}, not {shown[wanted]}", REMOVE_HINT)


# *** the backend ***


@contextlib.contextmanager
def _backend(backend: str, address: str | None) -> Iterator[None]:
    """Ray connected to (or started) for --backend ray, before anything is planned or made: a cluster that does not
    answer, or ray not installed, is an environment error with no sweep folder left behind."""
    if backend != "ray":
        yield
        return
    if address is not None:
        check_answers(address)
    if importlib.util.find_spec("ray") is None:
        raise ImportError("--backend ray needs ray, which is not installed: pip install 'specgrad[ray]', or use "
                          "--backend local", name="ray")  # fmt: skip
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        kw: dict[str, Any] = {"address": address} if address else {"num_cpus": cores()}
        try:
            ray.init(**kw, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except (ConnectionError, TimeoutError) as e:
            raise DeviceUnavailable(f"cannot connect to the Ray cluster at {address}: {excerpt(str(e), 200)}\n"
                                    f"  hint: {RAY_HINT}") from None  # fmt: skip
    try:
        yield
    finally:
        if started_here:
            ray.shutdown()


RAY_HINT = "start it (`ray start --head` on its first node), check --address, or use --backend local"


def check_answers(address: str) -> None:
    """A Ray address where something accepts a connection within RAY_TIMEOUT_S: HOST:PORT or ray://HOST:PORT (auto
    and local are Ray's own look-ups of a cluster on this machine). Ray itself waits a minute or more for a cluster
    that is not there."""
    if address in ("auto", "local"):
        return
    m = RAY_ADDRESS.fullmatch(address)
    if m is None or not 0 < int(m[2]) < 65536:
        raise typer.BadParameter(f"{excerpt(address, 80)} is not a Ray address: write HOST:PORT, ray://HOST:PORT or "
                                 "auto", param_hint="--address")  # fmt: skip
    try:
        socket.create_connection((m[1].strip("[]"), int(m[2])), timeout=RAY_TIMEOUT_S).close()
    except OSError as e:
        if isinstance(e, TimeoutError):
            why = f"no answer within {RAY_TIMEOUT_S} s"
        else:
            why = "its host name is not known" if isinstance(e, socket.gaierror) else (e.strerror or str(e)).lower()
        raise DeviceUnavailable(f"the Ray cluster at {address} does not answer ({why})\n  hint: {RAY_HINT}") from None


# *** running the trials ***


def _run(folder: Path, plan: Plan, backend: str, parallel: int | None, rank_by: str | None = None) -> None:
    results = read_results(folder, plan)
    todo = [t for t in plan.trials if state(folder, t, results) == "to do"]
    at_once = max(1, min(parallel or cores(), len(todo) or 1))
    threads = max(1, cores() // at_once)
    done = len(plan.trials) - len(todo)
    typer.echo(printable(f"sweep {folder}: {len(plan.trials)} trials ({done} done before), {at_once} at once with "
                         f"{threads} thread{'s' * (threads > 1)} each, on {backend}"))  # fmt: skip
    refused: list[str] = []

    def ended(trial: Trial, outcome: int | str) -> None:
        """How a trial's process ended, recorded and said (called from this thread only: one results.json writer);
        a text is why it could not start (its log could not be opened), and it stays to do."""
        said = printable(f"{trial.name} ({', '.join(trial.overrides)})")
        if isinstance(outcome, str):
            refused.append(trial.name)
            typer.echo(f"{said}: not started: {printable(outcome)}", err=True)
            return
        error = _error(folder, trial) if is_failure(outcome) else ""
        record_result(folder, results, trial, outcome, error)
        if outcome == BUSY:  # NOTE: recorded as not failed: a later --resume runs it
            refused.append(trial.name)
            typer.echo(f"{said}: not run: {printable(str(folder / trial.name))} is in use by another specgrad "
                       "process", err=True)  # fmt: skip
            return
        typer.echo(f"{said}: {printable(_outcome(outcome, error))}")

    runner = _ray if backend == "ray" else _local
    interrupted = runner(folder, todo, at_once, threads, ended)
    _write_summary(folder, plan, results, rank_by)
    if interrupted:
        typer.echo(printable(f"interrupted; continue with\n  specgrad sweep --resume {folder}"), err=True)
        raise typer.Exit(INTERRUPTED)
    if refused:
        names = ", ".join(refused[:5]) + ", ..." * (len(refused) > 5)
        raise SpecError.at(None, f"{len(refused)} trial{'s' * (len(refused) > 1)} did not start ({names}): said above",
                           f"fix what is said, then continue with specgrad sweep --resume {folder}")  # fmt: skip


def _outcome(code: int, error: str) -> str:
    if code == 0:
        return "finished"
    if not is_failure(code):
        return "interrupted (sweep --resume continues it)"
    return f"failed (exit code {code}): {error}"


def _error(folder: Path, trial: Trial) -> str:
    """What a failed trial said: its error and hint lines, the last words of its log (the trial's process prints
    nothing after them); no other line of the log is kept."""
    rel = f"{LOGS}/{trial.name}.log"
    try:
        lines = read_tail_in(folder, rel, LOG_TAIL).decode(errors="replace").splitlines()
    except SpecError as e:
        return f"its log could not be read: {e.problems[0].message}"[:MAX_ERROR]
    except OSError as e:
        return f"its log could not be read: {(e.strerror or str(e)).lower()}"[:MAX_ERROR]
    starts = [i for i, line in enumerate(lines) if _is_error(line)]
    if not starts:
        return f"it printed no error: see {rel}"
    said = [line.strip() for line in lines[starts[0] :] if _is_error(line) or line.lstrip().startswith("hint:")]
    return " ".join(said)[:MAX_ERROR]


def _is_error(line: str) -> bool:
    return line.startswith("error:") or ": error: " in line


def _command(folder: Path, trial: Trial, threads: int) -> tuple[list[str], dict[str, str]]:
    """The trial's process: this Python, this module, with THREADS (and compile jobs) set and the sweep's reading
    policy."""
    root = os.path.realpath(str(SPEC_ROOT.value) or os.getcwd())  # NOTE: this command's reading policy, as a trial's
    env = {**os.environ, "THREADS": str(threads), "COMPILE_JOBS": str(threads), "SPEC_ROOT": root,
           "SPEC_ALLOW_OUTSIDE": str(SPEC_ALLOW_OUTSIDE.value), "MAX_FILE_MB": str(MAX_FILE_MB.value)}  # fmt: skip
    return [sys.executable, "-m", "specgrad.cli.sweep", str(folder.resolve()), trial.name], env


def run_trial_process(command: list[str], env: dict[str, str], folder: str, log: str, cwd: str,
                      started: Callable[[subprocess.Popen], None] | None = None) -> int | str:  # fmt: skip
    """Run one trial's process with its output appended to `log` in the sweep folder (never through a link, never into
    a FIFO); its exit code (negative: killed by a signal), or, when the log cannot be opened so, why (the trial did
    not start; a text, which crosses to a Ray driver as well as an exit code does)."""
    try:
        fd = open_append_in(Path(folder), log)
    except (SpecError, OSError) as e:
        return str(e)
    with os.fdopen(fd, "ab") as out:
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


def _local(folder: Path, todo: list[Trial], at_once: int, threads: int,
           ended: Callable[[Trial, int | str], None]) -> bool:  # fmt: skip
    """Trials as processes of this machine, `at_once` at a time; Ctrl-C stops them (each saves its state)."""
    live: set[subprocess.Popen] = set()
    lock = threading.Lock()

    def run(trial: Trial) -> int | str:
        command, env = _command(folder, trial, threads)

        def started(p: subprocess.Popen) -> None:
            with lock:
                live.add(p)

        return run_trial_process(command, env, str(folder), f"{LOGS}/{trial.name}.log", os.getcwd(), started)

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


def _ray(folder: Path, todo: list[Trial], at_once: int, threads: int,
         ended: Callable[[Trial, int | str], None]) -> bool:  # fmt: skip
    """Trials as Ray tasks of `threads` CPUs each, at most `at_once` at a time, on the Ray instance _backend connected
    to (the sweep folder, the spec and its data must be at the same paths on every node)."""
    import ray

    task = ray.remote(num_cpus=threads, max_retries=0)(run_trial_process)
    pending: dict[Any, Trial] = {}
    queue = list(todo)
    try:
        while queue or pending:
            while queue and len(pending) < at_once:
                trial = queue.pop(0)
                command, env = _command(folder, trial, threads)
                log = f"{LOGS}/{trial.name}.log"
                pending[task.remote(command, env, str(folder.resolve()), log, os.getcwd())] = trial
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            ended(pending.pop(ready), ray.get(ready))
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)  # NOTE: the trial stops where it is; --resume continues from its checkpoint
        for trial in pending.values():
            ended(trial, INTERRUPTED)
        return True
    return False


def _write_summary(folder: Path, plan: Plan, results: dict[str, dict[str, Any]], rank_by: str | None = None) -> None:
    """summary.json and summary.csv (every trial, best first), summary.txt (the compare table of the finished
    trials), compare.png (their curves, with matplotlib); the table printed."""
    rows, runs = summary(folder, plan, results, lambda trial: planned_values(plan, trial), rank_by)
    write_in(folder, "summary.json", (json.dumps({"trials": rows}, indent=2) + "\n").encode())
    write_in(folder, "summary.csv", summary_csv(rows, list(plan.grid)).encode())
    if runs:
        text = io.StringIO()
        print_table(Console(file=text, width=160), runs, differences([r.spec for r in runs]))
        write_in(folder, "summary.txt", text.getvalue().encode())
        typer.echo(text.getvalue(), nl=False)
        for run in runs:
            if run.metrics_left_out:  # NOTE: compare keeps MAX_METRICS names a run: thousands would be gigabytes
                typer.echo(printable(f"note: {run.folder / 'metrics.jsonl'} names more than {MAX_METRICS} metrics: "
                                     f"the first {MAX_METRICS} are summed up"), err=True)  # fmt: skip
        plot_notes(runs)
        values = {r["trial"]: ", ".join(f"{k}={v}" for k, v in r["overrides"].items()) for r in rows}
        png = curves_png(runs, [f"{r.folder.name} {values[r.folder.name]}" for r in runs])
        if png is not None:
            write_in(folder, "compare.png", png)
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
        run, kind = folder / name, entry_kind(folder, name)
        if kind not in ("missing", "folder"):
            what = "a regular file" if kind == "file" else kind
            raise SpecError.at(None, f"{run} is not a folder but {what}: a trial's run folder belongs in its place",
                               f"remove {run}, then resume the sweep")  # fmt: skip
        if kind == "folder" and _in_use(run):
            typer.echo(printable(f"error: {run} is in use by another specgrad process\n  hint: the sweep runs this "
                                 f"trial when resumed (specgrad sweep --resume {folder})"), err=True)  # fmt: skip
            raise typer.Exit(BUSY)
        if kind == "folder" and entry_kind(folder, f"{name}/{RESOLVED}") != "missing":
            check_as_planned(run, trial, planned_values(plan, trial), read_run(run).spec)
            train(None, [], plan.device, None, None, None, resume=run)  # NOTE: the run folder's reading checks the rest
            return
        if kind == "folder":
            _clear_unstarted(folder, name)
        train(Path(plan.spec), [*plan.overrides, *trial.overrides], plan.device, None, plan.epochs, plan.steps,
              folder=run)  # fmt: skip


def planned_values(plan: Plan, trial: Trial) -> dict[str, Any]:
    """The spec the plan gives a trial (its spec, --set, the trial's overrides, --epochs or --steps) as the trial's
    run folder holds it once read back (compare's Run.spec: validated, the files it names by real path). A resumed
    trial trains its folder's spec.resolved.yaml, so it must be this, not a copy edited in the folder."""
    overrides = [*plan.overrides, *trial.overrides]
    spec = validate_file(plan.spec, overrides, data_files=False, init_file=False, widths=data_widths)
    spec = with_length(spec, plan.epochs, plan.steps)
    values = {k: v for k, v in spec.values.items() if k != "extends"}
    if isinstance(data := values.get("data"), dict):
        values["data"] = {**data, **{k: os.path.realpath(data_file(spec, k)) for k in PATH_KEYS if data.get(k)}}
    if (init := given_init(spec.node("init"))) is not None:
        values["init"] = {**values["init"], "from": os.path.realpath(init_file(init, spec.path))}
    return values


def _in_use(run: Path) -> bool:
    """Whether another process holds the trial's run folder (its lock): the trial is then not run, and not failed.
    Only looked at: the lock is not made, and one that is not a regular file is left to train's own refusal."""
    try:
        fd = os.open(run / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # NOTE: and the lock with it, for train to take


def _clear_unstarted(folder: Path, name: str) -> None:
    """A trial's folder made, then stopped before its spec was written, holds only its lock and temporary files: they
    and the folder are removed, so the trial starts afresh. Anything else there is not the sweep's to remove."""
    run, temps = folder / name, tuple(f".{f}." for f in RUN_FILES)
    with folder_of(folder, f"{name}/-") as fd:
        entries = os.listdir(fd)
        ours = [n for n in entries if (n == LOCK or n.startswith(temps)) and _is_file(fd, n)]
        if others := sorted(set(entries) - set(ours)):
            raise SpecError.at(None, f"{run} holds {len(others):,} entr{'ies' if len(others) > 1 else 'y'} (such as "
                               f"'{excerpt(others[0], 60)}') but no {RESOLVED}: it is not a run folder this sweep "
                               "started", f"move or remove {run}, then resume the sweep")  # fmt: skip
        for n in ours:
            os.unlink(n, dir_fd=fd)
    with folder_of(folder, name) as fd:
        os.rmdir(name, dir_fd=fd)


def _is_file(dir_fd: int, name: str) -> bool:
    return stat.S_ISREG(os.lstat(name, dir_fd=dir_fd).st_mode)


if __name__ == "__main__":
    trial_main(Path(sys.argv[1]), sys.argv[2])
