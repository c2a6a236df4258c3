"""A write that fails half-way leaves the previous file as it was, and no temporary file behind."""

import os

import pytest

from mt.atomic import atomic_write_bytes, atomic_write_lines
from mt.errors import MtError


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "last.pt"
    atomic_write_bytes(target, b"good checkpoint")

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new checkpoint")
    assert target.read_bytes() == b"good checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_lines_and_a_missing_directory(tmp_path):
    atomic_write_lines(tmp_path / "out.en", ["I love you.", ""])
    assert (tmp_path / "out.en").read_text(encoding="utf-8") == "I love you.\n\n"
    with pytest.raises(MtError, match="does not exist"):
        atomic_write_lines(tmp_path / "no" / "out.en", ["x"])
