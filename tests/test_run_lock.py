"""One writer per run directory: a second training or preparation is refused with the holder's PID and host, a lock
left by a killed process is taken over, and reading a run is never blocked."""

import errno
import fcntl
import logging
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import tiny_yaml
from mt.core.errors import MtError
from mt.core.run_lock import lock_run_dir
from test_cli import assert_one_line_error, mt, mt_here

def hold(run: Path) -> subprocess.Popen:
    """A real training that holds `run`'s lock (it would train for hours) until it is killed."""
    holder = subprocess.Popen([sys.executable, "-m", "mt", "train", "-c", "tiny.yaml", "--resume", "--set",
                               "train.max_steps=1000000", "--set", "train.eval_every=1000000"], cwd=run.parent,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while f'"pid": {holder.pid},' not in (run / "lock").read_text():
        assert holder.poll() is None and time.monotonic() < deadline, "the training did not take the lock"
        time.sleep(0.05)
    return holder


@pytest.fixture
def run(trained_runs, corpus_dir, tmp_path) -> Path:
    """A copy of a finished tiny run, and tiny.yaml beside it to train it further."""
    shutil.copytree(trained_runs[0], tmp_path / "run")
    (tmp_path / "tiny.yaml").write_text(tiny_yaml(corpus_dir, Path("run"), max_steps=10, eval_every=5),
                                        encoding="utf-8")
    return tmp_path / "run"


def test_a_second_writer_is_refused_with_the_holders_pid_and_host_and_readers_are_not(run):
    holder = hold(run)
    try:
        holder_words = (f"is in use: mt train (PID {holder.pid} on {socket.gethostname()}", "wait for it to end")
        for command in (["train", "-c", "tiny.yaml", "--resume"], ["train", "-c", "tiny.yaml"],
                        ["prepare", "-c", "tiny.yaml"]):
            assert_one_line_error(mt_here(*command, cwd=run.parent), *holder_words, code=1)
        checkpoint = str(run / "checkpoints" / "last.pt")
        for command in (["info", checkpoint], ["translate", "--checkpoint", checkpoint, "我爱你"],
                        ["plot", str(run), "-o", str(run.parent / "curves.png")]):
            assert mt_here(*command, cwd=run.parent).returncode == 0, command
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_warning_and_released_at_the_end(run):
    holder = hold(run)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert f'"pid": {holder.pid}' in (run / "lock").read_text()  # the dead holder's name is still there
    resumed = mt("train", "-c", "tiny.yaml", "--resume", cwd=run.parent)
    assert resumed.returncode == 0, resumed.stderr
    warnings = [line for line in resumed.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"taking over the lock of mt train (PID {holder.pid}" in warnings[0]
    assert (run / "lock").read_text() == ""  # released
    again = mt("train", "-c", "tiny.yaml", "--resume", "--set", "train.max_steps=12", cwd=run.parent)
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr


def test_a_directory_of_other_files_or_a_file_is_not_made_a_run(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.yaml").write_text("my own\n", encoding="utf-8")
    (tmp_path / "file").write_text("mine\n", encoding="utf-8")
    for path, words in ((tmp_path / "mine", "exists and is not a run directory of mt"),
                        (tmp_path / "file", "is a file, not a run directory")):
        with pytest.raises(MtError, match=words), lock_run_dir(path, "mt train"):
            pass
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["config.yaml"]
    with lock_run_dir(tmp_path / "new" / "run", "mt train"):  # a new directory is made
        assert (tmp_path / "new" / "run" / "lock").read_text().startswith('{"command": "mt train"')


def test_a_file_system_without_locks_gets_a_warning_not_a_refusal(tmp_path, monkeypatch, caplog):
    def no_locks(file, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    logging.getLogger("mt").addHandler(caplog.handler)
    try:
        with lock_run_dir(tmp_path / "run", "mt prepare"):
            pass
    finally:
        logging.getLogger("mt").removeHandler(caplog.handler)
    assert "this file system cannot lock files" in caplog.text
