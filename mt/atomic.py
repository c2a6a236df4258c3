"""Atomic writes: a crash at any moment leaves either the old file (or directory) or the new one, never half of one.

Everything is first written under a hidden temporary name beside its destination (`.NAME.<random>.tmp`), then
renamed over it. The temporary names follow one rule, kept here, so that `remove_partial_writes` can clear what
a crash left behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from mt.errors import MtError

SUFFIX = ".tmp"


def _temporary(path: Path) -> dict:
    """mkstemp/mkdtemp arguments for a temporary name beside `path`: hidden, and ending in SUFFIX."""
    return {"dir": path.parent, "prefix": f".{path.name}.", "suffix": SUFFIX}


def _check_parent(path: Path) -> None:
    if not path.parent.is_dir():
        raise MtError(f"{path}: directory {path.parent} does not exist")


@contextmanager
def atomic_open(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write into: a temporary file beside `path`, flushed to disk and renamed over `path`
    when the block ends normally, removed when it raises (the previous `path` stays as it was)."""
    path = Path(path)
    _check_parent(path)
    try:
        fd, tmp = tempfile.mkstemp(**_temporary(path))
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


def link_atomic(target: Path, link: Path) -> None:
    """Point `link` at the same file as `target` (a hard link, so no copy), replacing it atomically."""
    fd, tmp = tempfile.mkstemp(**_temporary(link))
    os.close(fd)
    os.unlink(tmp)  # os.link needs the name free; mkstemp only chose it
    try:
        os.link(target, tmp)
    except OSError:  # a filesystem without hard links
        shutil.copyfile(target, tmp)
    os.replace(tmp, link)


@contextmanager
def atomic_directory(path: Path, replaceable: Callable[[Path], bool], what: str) -> Iterator[Path]:
    """A new, empty directory to fill, which becomes `path` when the block ends normally and is removed when it
    raises. An existing `path` is replaced only when `replaceable(path)` says it is an earlier `what` (a crash
    during the swap leaves the old one or none); anything else at `path` is an error, never deleted."""
    path = Path(path)
    _check_parent(path)
    if path.exists() and not (path.is_dir() and replaceable(path)):
        raise MtError(f"{path}: exists and is not {what}; choose another path or remove it yourself")
    staging = Path(tempfile.mkdtemp(**_temporary(path)))
    try:
        yield staging
        if path.exists():
            old = Path(tempfile.mkdtemp(**_temporary(path)))
            path.rename(old / path.name)
            staging.rename(path)
            shutil.rmtree(old)
        else:
            staging.rename(path)
    except OSError as e:
        raise MtError(f"{path}: cannot write ({e.strerror})", exit_code=1) from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_partial_writes(directory: Path) -> None:
    """Delete the temporary files and directories that a crash in the middle of a write left in `directory`."""
    for partial in Path(directory).glob(f".*{SUFFIX}"):
        if partial.is_dir():
            shutil.rmtree(partial)
        else:
            partial.unlink()
