"""Atomic file writes: a crash at any moment leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from mt.errors import MtError


@contextmanager
def atomic_open(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write into: a temporary file beside `path`, flushed to disk and renamed over `path`
    when the block ends normally, removed when it raises (the previous `path` stays as it was)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise MtError(f"{path}: directory {path.parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise MtError(f"{path}: cannot write ({e.strerror})", exit_code=1) from e
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):  # e.g. a full disk
            raise MtError(f"{path}: cannot write ({e.strerror}); the previous file is untouched", exit_code=1) from e
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_open(path) as f:
        f.write(data)
