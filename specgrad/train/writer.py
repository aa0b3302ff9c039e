"""The files a training writes at the end of an epoch (checkpoints, pruning, metrics.csv), written by one background
thread in the order they were asked for.

Writing a checkpoint and metrics.csv atomically (each file fsynced, renamed, its folder fsynced) costs a few
milliseconds an epoch: on a small table, as much as the epoch's steps. The loop serializes what a file must hold (the
checkpoint's bytes, the csv's text) and goes on; the thread writes it with the same atomic writer, mostly waiting on
the disk with the GIL released. (Serializing there too was slower: its Python work took the GIL from the steps.)
What a crash or kill -9 can leave is what it could before: each file whole, old or new; a job not yet written is a
checkpoint not yet on disk, so a resume starts from the one before (resumes are exact from any).

The first error stops the writer (no later job runs: nothing is written after a failed write, as when the loop
wrote itself) and is raised in the loop at its next submit or wait, so a full disk still ends the run with the
same clear error. Imports nothing of specgrad.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

PENDING = 2  # NOTE: jobs waiting at most: the loop never runs more than an epoch or two ahead of the disk


class EpochWriter:
    """Jobs run one at a time, in order, on one thread started at the first submit."""

    def __init__(self, pending: int = PENDING):
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=pending)
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[[], None]) -> None:
        """Queue a write (blocking while PENDING wait); raises an earlier job's error instead of queueing (the error
        stays: every later submit or wait raises it again)."""
        self._raise()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="specgrad-epoch-writer", daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def wait(self) -> None:
        """Return once every job queued so far is written; raises the first error among them."""
        if self._thread is not None:
            self._jobs.join()
        self._raise()

    def close(self, raise_error: bool = True) -> None:
        """Write what is queued and stop the thread; `raise_error=False` when another error is already on its way."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None
        if raise_error:
            self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                if self._error is None:
                    job()
            except BaseException as e:  # NOTE: handed to the loop, which raises it
                self._error = e
            finally:
                self._jobs.task_done()
        self._jobs.task_done()
