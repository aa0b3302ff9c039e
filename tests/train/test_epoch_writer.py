"""The epoch writer: jobs in order on one thread, the first error raised in the loop and nothing written after it; and
a training whose checkpoint cannot be written stops with that error, the earlier epochs' files whole."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from specgrad.helpers import WriteError
from specgrad.modelspec.validate import validate_file
from specgrad.train.run_folder import MetricsLog, new_run_folder
from specgrad.train.trainer import Trainer
from specgrad.train.writer import EpochWriter

ROOT = Path(__file__).resolve().parents[2]


def test_jobs_run_in_order_off_the_calling_thread() -> None:
    done, threads = [], set()
    writer = EpochWriter()
    for k in range(20):
        writer.submit(lambda k=k: (done.append(k), threads.add(threading.get_ident())))
    writer.wait()
    assert done == list(range(20)) and threading.get_ident() not in threads and len(threads) == 1
    writer.close()
    writer.close()  # NOTE: twice is harmless


def test_the_first_error_is_raised_at_the_next_call_and_stops_every_later_job() -> None:
    done: list[int] = []
    gate = threading.Event()
    writer = EpochWriter()
    writer.submit(gate.wait)
    writer.submit(lambda: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    writer.submit(lambda: done.append(1))  # NOTE: queued before the error happens: it must not run
    gate.set()
    with pytest.raises(OSError, match="full"):
        writer.wait()
    with pytest.raises(OSError, match="full"):  # NOTE: it stays: nothing queued after it runs either
        writer.submit(lambda: done.append(2))
    writer.close(raise_error=False)
    assert done == []
    with pytest.raises(OSError, match="full"):
        writer.close()


def test_close_writes_what_is_queued() -> None:
    done: list[int] = []
    gate = threading.Event()
    writer = EpochWriter(pending=1)
    writer.submit(gate.wait)
    writer.submit(lambda: done.append(1))
    gate.set()
    writer.close()
    assert done == [1] and writer._thread is None


def test_a_checkpoint_the_disk_refuses_stops_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The third epoch's checkpoint fails on the writer's thread: fit raises the WriteError (one epoch later at most),
    the first two epochs' checkpoints are whole and nothing after the failure is written."""
    spec = validate_file(ROOT / "specs" / "digits_mlp.yaml", overrides=["train.epochs=6"])
    trainer = Trainer.create(spec)
    folder = new_run_folder(tmp_path, "run")
    real = os.fsync

    def fsync(fd: int) -> None:
        if "epoch-00003" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(WriteError, match="No space left"):
        trainer.fit(MetricsLog(folder), say=lambda line: None)
    names = sorted(p.name for p in (folder / "checkpoints").iterdir())
    assert names == ["best.safetensors", "epoch-00001.safetensors", "epoch-00002.safetensors"], names
    assert not (folder / "model.safetensors").exists()
