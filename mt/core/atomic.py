"""Atomic writes: a crash at any moment leaves either the old file (or directory) or the new one, never half of one.

Everything is first written under a hidden temporary name beside its destination (`.NAME.<random>.tmp`), then
renamed over it. The temporary names follow one rule, kept here, so that `remove_partial_writes` can clear what
a crash left behind.

Nothing of another kind is put in the place of what is there: a write names the kind of file (or directory) it
makes, and an existing path is replaced only when it is of that kind (a translation over a previous translation,
an export over a previous export), never a directory by a file, a file by a directory, or a user's file by a plot.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mt.core.errors import MtError

SUFFIX = ".tmp"


def _temporary(path: Path) -> dict:
    """mkstemp/mkdtemp arguments for a temporary name beside `path`: hidden, and ending in SUFFIX."""
    return {"dir": path.parent, "prefix": f".{path.name}.", "suffix": SUFFIX}


@dataclass(frozen=True)
class Kind:
    """What a write makes, and how to recognise a previous one that it may replace."""

    name: str  # "a text file"
    is_one: Callable[[Path], bool]  # given an existing file (or a directory, for a directory kind)
    directory: bool = False


def _is_text(path: Path) -> bool:
    """UTF-8 text without NUL bytes, judged by its first 64 KiB (a character cut at the end is fine)."""
    with open(path, "rb") as f:
        head = f.read(65536)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:
            return False
    return b"\0" not in head


def _starts_with(magic: bytes) -> Callable[[Path], bool]:
    def check(path: Path) -> bool:
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    return check


TEXT = Kind("a text file", _is_text)
PNG = Kind("a PNG image", _starts_with(b"\x89PNG\r\n\x1a\n"))
CHECKPOINT = Kind("a checkpoint", zipfile.is_zipfile)  # torch.save writes a zip archive
DOCX = Kind("a Word document", zipfile.is_zipfile)
FILE = Kind("a file", lambda path: True)  # mt's own files in a run directory


def check_replaceable(path: Path, kind: Kind) -> None:
    """Refuse to write `kind` where something of another kind is: called by every write, and by a command before
    it starts long work whose result would then be refused."""
    path = Path(path)
    if not path.parent.is_dir():
        raise MtError(f"{path}: directory {path.parent} does not exist")
    if path.is_dir():  # an empty one may become any kind of directory
        replaceable = kind.directory and (kind.is_one(path) or not any(path.iterdir()))
    elif path.is_file():
        replaceable = not kind.directory and kind.is_one(path)
    else:  # nothing there, or /dev/null or a named pipe, which a file is written into
        replaceable = not (path.exists() and kind.directory)
    if not replaceable:
        what = "a directory" if path.is_dir() else "a file" if path.is_file() else "not a regular file"
        raise MtError(f"{path}: exists and is {what}, not {kind.name}; choose another path or remove it yourself")


def check_outputs(*outputs: tuple[Path | None, Kind], inputs: tuple = ()) -> None:
    """Refuse, before any work, output paths given as (path or None, kind) where something of another kind is, or
    that are one of the command's `inputs` (paths or None): its result would replace what it reads."""
    for path, kind in outputs:
        if path is None:
            continue
        check_replaceable(path, kind)
        for read in inputs:
            if read is not None and path.is_file() and Path(read).is_file() and os.path.samefile(path, read):
                raise MtError(f"{path}: it is also this command's input, which its output would replace; "
                              f"choose another path")


@contextmanager
def atomic_open(path: Path, kind: Kind = FILE) -> Iterator[BinaryIO]:
    """A binary file to write into: a temporary file beside `path`, flushed to disk and renamed over `path`
    when the block ends normally, removed when it raises (the previous `path` stays as it was). An existing
    `path` must be of the same kind."""
    path = Path(path)
    check_replaceable(path, kind)
    if path.exists() and not path.is_file():  # /dev/null, a named pipe: written into, never replaced
        with open(path, "wb") as f:
            yield f
        return
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


def atomic_write_bytes(path: Path, data: bytes, kind: Kind = FILE) -> None:
    with atomic_open(path, kind) as f:
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
def atomic_directory(path: Path, kind: Kind) -> Iterator[Path]:
    """A new, empty directory to fill, which becomes `path` when the block ends normally and is removed when it
    raises. An existing `path` is replaced only when it is a previous one of `kind` (a crash during the swap
    leaves the old one or none); anything else at `path` is an error, never deleted."""
    path = Path(path)
    check_replaceable(path, kind)
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


def file_checksum(path: Path) -> str:
    """A file's SHA-256, read a MiB at a time: how mt finds a damaged file it wrote before a library reads it."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
