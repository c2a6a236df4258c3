"""A write that fails half-way leaves the previous file as it was, and no temporary file behind; a write never puts
something of another kind in the place of what is there."""

import errno
import os
from pathlib import Path

import pytest

from mt.core.atomic import CHECKPOINT, PNG, TEXT, Kind, atomic_directory, atomic_open, atomic_write_bytes
from mt.core.errors import MtError


def test_a_full_disk_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "last.pt"
    atomic_write_bytes(target, b"good checkpoint")

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)  # the data cannot reach the disk
    with pytest.raises(MtError, match=r"last\.pt: cannot write \(No space left on device\); the previous file"):
        atomic_write_bytes(target, b"new checkpoint")
    assert target.read_bytes() == b"good checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_a_stream_appears_only_when_complete(tmp_path):
    target = tmp_path / "out.en"
    with atomic_open(target) as f:
        f.write(b"I love you.\n")
        assert not target.exists()
    assert target.read_bytes() == b"I love you.\n"
    with pytest.raises(KeyboardInterrupt):
        with atomic_open(target) as f:
            f.write(b"half of a new")
            raise KeyboardInterrupt
    assert target.read_bytes() == b"I love you.\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.en"]
    with pytest.raises(MtError, match="does not exist"):
        atomic_write_bytes(tmp_path / "no" / "out.en", b"x")


def test_nothing_of_another_kind_takes_the_place_of_what_is_there(tmp_path):
    notes, folder, plot = tmp_path / "notes.txt", tmp_path / "folder", tmp_path / "curves.png"
    notes.write_text("mine\n", encoding="utf-8")
    folder.mkdir()
    (folder / "a").write_text("mine too", encoding="utf-8")
    plot.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 8)
    refused = [(notes, PNG, "is a file, not a PNG image"), (notes, CHECKPOINT, "is a file, not a checkpoint"),
               (plot, TEXT, "is a file, not a text file"), (folder, TEXT, "is a directory, not a text file"),
               (notes, Kind("an export", lambda d: True, directory=True), "is a file, not an export"),
               (folder, Kind("an export", lambda d: False, directory=True), "is a directory, not an export")]
    for path, kind, words in refused:
        with pytest.raises(MtError, match=words):
            atomic_write_bytes(path, b"new", kind)
    assert notes.read_text(encoding="utf-8") == "mine\n" and (folder / "a").exists() and plot.stat().st_size == 16
    atomic_write_bytes(notes, "a new translation\n".encode(), TEXT)  # the same kind: replaced
    atomic_write_bytes(plot, b"\x89PNG\r\n\x1a\nnew", PNG)
    assert notes.read_text(encoding="utf-8") == "a new translation\n" and plot.read_bytes().endswith(b"new")
    (tmp_path / "empty").mkdir()  # an empty directory may become an export
    with atomic_directory(tmp_path / "empty", Kind("an export", lambda d: False, directory=True)) as staging:
        (staging / "model.bin").write_bytes(b"x")
    assert [p.name for p in (tmp_path / "empty").iterdir()] == ["model.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curves.png", "empty", "folder", "notes.txt"]


def test_a_device_or_pipe_is_written_into_not_replaced(tmp_path):
    atomic_write_bytes(Path(os.devnull), b"translations\n", TEXT)
    assert Path(os.devnull).is_char_device()
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    with atomic_open(pipe, TEXT) as f:
        f.write(b"through the pipe\n")
    assert os.read(reader, 100) == b"through the pipe\n" and pipe.is_fifo()
    os.close(reader)
