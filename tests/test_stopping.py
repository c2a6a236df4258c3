"""A stop signal never cuts an update in half: inside one it waits for the update's end; elsewhere it stops at once.
(The training loop's side, a checkpoint and a bit-for-bit resume, is tested in test_crash.py.)"""

import os
import signal

import pytest

from mt.core.stopping import StopSignals, Stopped


def send(signum: int) -> None:
    os.kill(os.getpid(), signum)  # Python runs the handler before the next line


def test_inside_an_update_a_signal_is_recorded_and_elsewhere_it_stops_at_once():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    with StopSignals() as stops:
        with stops.deferred():
            send(signal.SIGTERM)
            send(signal.SIGTERM)  # a launcher passing on the scheduler's signal: still not cut short
            assert stops.received == signal.SIGTERM
        with pytest.raises(Stopped) as stopped:
            send(signal.SIGUSR1)
    assert stopped.value.signum == signal.SIGTERM and stopped.value.whole and stopped.value.exit_status == 143
    assert {s: signal.getsignal(s) for s in before} == before  # the previous handlers are back


def test_a_second_ctrl_c_stops_at_once_even_inside_an_update():
    with StopSignals() as stops, stops.deferred():
        send(signal.SIGINT)
        with pytest.raises(Stopped) as stopped:
            send(signal.SIGINT)
    assert not stopped.value.whole and stopped.value.exit_status == 130


def test_the_exit_status_names_the_signal_as_a_shell_does():
    assert [Stopped(s).exit_status for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)] == [130, 143, 138]
