"""One writer per run directory: `mt train` and `mt prepare` lock the run they write into.

The lock is flock(2) on RUN/lock, which the kernel releases when its holder ends, however it ends (SIGKILL,
a crash; a reboot clears every lock), so a dead holder never blocks a run. The file also names its holder (PID,
host, command, start time): a second writer is refused with that name, and a run that finds the name of a holder
that ended without releasing it takes the lock over with a warning. Commands that only read a run (translate,
evaluate, average, plot, info) take no lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mt.core.errors import MtError
from mt.core.run_dir import RunDir

log = logging.getLogger(__name__)



def _holder(text: str) -> str:
    """The lock file's record as words: 'mt train (PID 123 on host-a, since 2026-12-01 10:00:00)'."""
    try:
        who = json.loads(text)
        return f"{who['command']} (PID {who['pid']} on {who['host']}, since {who['since']})"
    except (ValueError, KeyError, TypeError):
        return "another process"


def _check_is_run_dir(run_dir: Path) -> None:
    if run_dir.exists() and not run_dir.is_dir():
        raise MtError(f"{run_dir}: is a file, not a run directory; choose another --run-dir")
    if run_dir.is_dir() and any(run_dir.iterdir()) and not RunDir(run_dir).is_run():
        raise MtError(f"{run_dir}: exists and is not a run directory of mt; choose another --run-dir (a new or "
                      f"empty directory, or a run's), so that its files are not mixed with a run's")


@contextmanager
def lock_run_dir(run_dir: Path, command: str) -> Iterator[None]:
    """Hold `run_dir`'s lock for the block (creating the directory); refuse when another process holds it."""
    run_dir = Path(run_dir)
    _check_is_run_dir(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = RunDir(run_dir).lock
    with open(path, "a+", encoding="utf-8", errors="replace") as f:  # a damaged record is still taken over
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise MtError(f"{run_dir} is in use: {_holder(f.read())} is writing into it; wait for it to end, "
                          f"or stop it first", exit_code=1) from None
        except OSError as e:  # a file system without locks (some network and FUSE mounts)
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            log.warning(f"{path}: this file system cannot lock files; make sure no other training writes "
                        f"into {run_dir}")
        f.seek(0)
        previous = f.read().strip()
        if previous:  # its holder ended without clearing it, or the kernel would not have given us the lock
            log.warning(f"{run_dir}: taking over the lock of {_holder(previous)}, which ended without releasing it")
        _write(f, json.dumps({"command": command, "pid": os.getpid(), "host": socket.gethostname(),
                              "since": time.strftime("%Y-%m-%d %H:%M:%S")}))
        try:
            yield
        finally:
            _write(f, "")  # released: closing the file drops the flock


def _write(f, text: str) -> None:
    f.seek(0)
    f.truncate()
    f.write(text)
    f.flush()
