"""Stopping a training run on request, without losing its updates.

Ctrl-C sends SIGINT; cluster schedulers (SLURM, Kubernetes, `timeout`, systemd) send SIGTERM and wait a grace
period before SIGKILL; SLURM can send SIGUSR1 ahead of a time limit (`--signal=USR1@120`). Each of them asks
training to stop. The handler only records the request while an update is being applied, and the training
loop stops after it, so a checkpoint never holds half an update; anywhere else (reading data, validating) it
stops at once, where the model is whole too. A second Ctrl-C stops at once even inside an update, unsaved.

The exit status is 128 + the signal's number, as a shell reports a process ended by it: 130 for Ctrl-C, 143 for
SIGTERM, 138 for SIGUSR1, so that a job script can tell a stopped run from a finished (0) or failed (1) one.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


class Stopped(BaseException):
    """A stop signal arrived. A BaseException, like KeyboardInterrupt, so that no `except Exception` hides it.

    `whole`: the model and the training position are consistent (no update was cut in half), so saving is safe.
    """

    def __init__(self, signum: int, whole: bool = True):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.whole = signum, whole

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


class StopSignals:
    """While active (a `with` block in the main thread), SIGINT, SIGTERM and SIGUSR1 stop training.

    `received`: the first stop signal's number, or None.
    """

    def __init__(self):
        self.received: int | None = None
        self._deferring = False
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # Python runs handlers in the main thread only
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame) -> None:
        again = self.received is not None
        self.received = self.received or signum
        if not self._deferring:
            raise Stopped(self.received)
        if again and signum == signal.SIGINT:  # a person pressing Ctrl-C twice wants out now
            raise Stopped(signum, whole=False)
        if not again:
            hint = " (Ctrl-C again: stop at once, unsaved)" if signum == signal.SIGINT else ""
            log.warning(f"{signal.Signals(signum).name}: stopping after the update in progress, "
                        f"with a checkpoint{hint}")

    @contextlib.contextmanager
    def deferred(self):
        """A block that a stop signal does not cut short (one update); the stop comes after it."""
        outer, self._deferring = self._deferring, True
        try:
            yield
        finally:
            self._deferring = outer
