"""A write that fails half-way leaves the previous file as it was, and no temporary file behind."""

import errno
import os

import pytest

from mt.atomic import atomic_open, atomic_write_bytes
from mt.errors import MtError


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
