"""Atomic file writes: a crash at any moment leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mt.errors import MtError


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, flush it to disk, then rename it over `path`."""
    path = Path(path)
    if not path.parent.is_dir():
        raise MtError(f"{path}: directory {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_lines(path: Path, lines: list[str]) -> None:
    atomic_write_bytes(path, "".join(line + "\n" for line in lines).encode("utf-8"))
