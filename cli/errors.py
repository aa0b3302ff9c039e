"""One error path for every command: an exception becomes a message on stderr and an exit code (docs/cli.md):

    0 done; 1 the spec, its data or a path given cannot be used (a located message); 2 the command line is wrong
    (typer's own code); 3 the environment cannot do it (a device, an optional package, a disk that is full, read-only
    or not writable), with how to fix it; 4 training stopped on a non-finite loss; 70 an internal error (a bug in
    specgrad: please report it); 130 interrupted; 141 the reader of the output went away (`| head`).

A traceback is printed only with the global --debug (or SPECGRAD_DEBUG=1). Imports typer and specgrad.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import typer

from specgrad.flags import FlagError, check_environment
from specgrad.helpers import BadOutputPath, DeviceUnavailable, NonFiniteLoss, WriteError, check_output
from specgrad.modelspec.errors import SpecError, printable

# NOTE: 70 is sysexits.h's EX_SOFTWARE, apart from the codes DESIGN.md gives
INVALID, USAGE, ENVIRONMENT, NON_FINITE, INTERNAL, INTERRUPTED = 1, 2, 3, 4, 70, 130
PIPE_CLOSED = 141  # NOTE: 128 + SIGPIPE, what a shell reports for a tool whose reader went away

_FULL = "free some space there (or choose a folder on another disk), then run again; an older file is kept intact"
ENVIRONMENT_ERRNOS = {
    errno.ENOSPC: f"the disk is full: {_FULL}",
    errno.EDQUOT: f"your disk quota is used up: {_FULL}",
    errno.EFBIG: f"the file is larger than this file system allows: {_FULL}",
    errno.EACCES: "you may not write there: choose a folder you can write to, or change its permissions",
    errno.EPERM: "the system does not allow this: choose a folder you can write to, or change its permissions",
    errno.EROFS: "the file system is read-only: choose a folder on a writable one",
    errno.EIO: "the disk reported an input/output error: check the disk, or choose a folder on another one",
    errno.EMFILE: "too many files are open: raise the limit (ulimit -n), or close other programs",
    errno.ENFILE: "the system has too many files open: close other programs, then run again",
    errno.ENOMEM: "the machine is out of memory: close other programs, or use a smaller batch, model or file",
}
# NOTE: a path that cannot be one (too long, a file where a folder belongs or the reverse, a loop of links): exit 1
PATH_ERRNOS = {
    errno.ENAMETOOLONG: "a name in it is longer than the file system allows (255 bytes): choose a shorter name or path",
    errno.EISDIR: "a folder is where a file belongs: remove or rename it, or choose another path",
    errno.ENOTDIR: "a part of the path that must be a folder is not one: remove or rename it, or choose another path",
    errno.ELOOP: "a symbolic link is where specgrad follows none (or links loop): remove it, or choose another path",
}
EXTRAS = {"onnx": "onnx", "onnxruntime": "onnx", "matplotlib": "plot", "pyopencl": "gpu"}  # NOTE: pyproject's extras
# NOTE: typer's own ways out (its Exit, Abort and usage errors; typer >= 0.20 has its own click inside)
TYPER_EXITS = (typer.Exit, typer.Abort, getattr(typer, "TyperException", typer.BadParameter))

TRACEBACKS = contextvars.ContextVar("TRACEBACKS", default=False)  # NOTE: set by the app's callback from --debug


def is_debug() -> bool:
    """Whether the global --debug (or SPECGRAD_DEBUG=1) was given to this command line."""
    return TRACEBACKS.get()


def _summary(e: BaseException) -> str:
    first = next((line for line in str(e).splitlines() if line.strip()), "")
    return f"{type(e).__name__}: {first[:300]}" if first else type(e).__name__


def describe(e: Exception) -> tuple[int, str]:
    """(exit code, message) for an exception a command did not handle itself."""
    if isinstance(e, SpecError):
        return INVALID, str(e)
    if isinstance(e, FlagError):  # NOTE: a setting of the command, as an option is: one line per bad flag
        return USAGE, "\n".join(f"error: {line}" for line in str(e).splitlines())
    if isinstance(e, BadOutputPath):
        return INVALID, f"error: {e}\n  hint: name a regular file (or a new name) in a folder that exists"
    if isinstance(e, NonFiniteLoss):
        return NON_FINITE, f"error: {e}"
    if isinstance(e, DeviceUnavailable):
        return ENVIRONMENT, f"error: {e}"
    if isinstance(e, ImportError) and e.name and not e.name.startswith("specgrad"):
        extra = EXTRAS.get(e.name.split(".")[0])
        hint = f"install it: pip install 'specgrad[{extra}]'" if extra else f"install or repair the {e.name} package"
        return ENVIRONMENT, f"error: {e}" + ("" if "pip install" in str(e) else f"\n  hint: {hint}")
    if isinstance(e, MemoryError):  # NOTE: the machine (or a limit on the process) cannot hold what was asked for
        said = f" ({e})" if str(e) else ""
        return ENVIRONMENT, f"error: out of memory{said}\n  hint: {ENVIRONMENT_ERRNOS[errno.ENOMEM]}"
    if isinstance(e, OSError) and e.errno in ENVIRONMENT_ERRNOS:
        return ENVIRONMENT, f"error: {_os_error(e)}\n  hint: {ENVIRONMENT_ERRNOS[e.errno]}"
    if isinstance(e, OSError) and e.errno in PATH_ERRNOS:
        return INVALID, f"error: {_os_error(e)}\n  hint: {PATH_ERRNOS[e.errno]}"
    how = "the traceback is above" if is_debug() else "run again with --debug (or SPECGRAD_DEBUG=1) for the traceback"
    return INTERNAL, (f"error: internal error (a bug in specgrad, please report it): {_summary(e)}\n"
                      f"  hint: {how}, and include it in the report")  # fmt: skip


def _os_error(e: OSError) -> str:
    """The file and the cause: a WriteError says both itself; another OSError names the file it was about."""
    return str(e) if isinstance(e, WriteError) else f"{e.filename}: {e.strerror}" if e.filename else str(e.strerror)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Run a command's body: typer's own exits pass through; any other exception ends the process with the message and
    exit code that `describe` gives it (Ctrl-C: 130), the traceback first under --debug. A flag with a bad value in
    the environment stops every command here, before any work (exit 2), whichever code would read it."""
    try:
        check_environment()
        yield
    except TYPER_EXITS:
        raise
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(INTERRUPTED) from None
    except BrokenPipeError:  # NOTE: the reader of the output stopped (`| head`): stop quietly, as a unix tool does
        _discard_stdout()
        raise typer.Exit(PIPE_CLOSED) from None
    except Exception as e:
        code, message = describe(e)
        if is_debug():
            typer.echo("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip(), err=True)
        typer.echo(printable(message), err=True)  # NOTE: a path or name from a file cannot drive the terminal
        raise typer.Exit(code) from None


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so what is still buffered is not written (and refused) again at exit."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # NOTE: not a real file (a test's captured output)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def check_paths(paths: dict[str, Path | None]) -> None:
    """Paths from the command line (option name -> path): one holding a null byte is a bad command line (exit 2).
    The only check of it: cli/main.py parses every path parameter as a plain Path, which typer does not look into."""
    for option, path in paths.items():
        if path is not None and "\0" in str(path):
            shown = str(path).replace("\0", "\\0")
            raise typer.BadParameter(f"{shown} holds a null byte, which no path can", param_hint=option)


def check_output_option(path: Path, option: str) -> None:
    """An output path from the command line, before any work: in a folder that exists, and a regular file or new."""
    try:
        check_output(path)
    except BadOutputPath as e:
        shown = str(path).replace("\0", "\\0")
        raise SpecError.at(None, f"{option} {shown}: {e.strerror}",
                           "name a regular file (or a new name) in a folder that exists") from None  # fmt: skip
