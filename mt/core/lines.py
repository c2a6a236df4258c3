"""UTF-8 text, line by line: an invalid byte is an error that names the file (or stdin) and the line.

Files ending in .gz are read through gzip.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from mt.core.errors import MtError

if TYPE_CHECKING:
    import pyarrow as pa

BOM = "\ufeff"


@dataclass(frozen=True)
class Encoding:
    """How a text file was written, kept in its translation: a byte-order mark or not, and its line end (the
    first one in the file)."""

    bom: bool = False
    newline: str = "\n"

    @property
    def mark(self) -> str:
        """What the file starts with: its byte-order mark, or nothing."""
        return BOM if self.bom else ""

    def encode(self, text: str) -> bytes:
        return (self.mark + text.replace("\n", self.newline)).encode("utf-8")


def file_encoding(path: Path) -> Encoding:
    """How a text file (read as iter_file_lines reads it) was written, by its first 64 KiB."""
    with _open(path) as f:
        head = f.read(65536)
    end = head.find(b"\n")
    return Encoding(head.startswith(BOM.encode("utf-8")), "\r\n" if head[end - 1:end] == b"\r" else "\n")


def read_lines(path: Path) -> list[str]:
    """A UTF-8 text file as lines (without line ends). Errors name the file and the line."""
    return list(iter_file_lines(path))


def iter_file_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 text file, read lazily; a missing file is reported at once."""
    try:
        stream = _open(path)
    except FileNotFoundError:
        raise MtError(f"{path}: no such file")
    except OSError as e:
        raise MtError(f"{path}: cannot read ({e.strerror})")

    def lines() -> Iterator[str]:
        with stream:
            yield from iter_lines(stream, str(path))

    return lines()


def _open(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if Path(path).suffix == ".gz" else open(path, "rb")


def read_bytes(path: Path) -> bytes:
    """A file's bytes; a missing or unreadable file is an error that names it."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise MtError(f"{path}: no such file")
    except OSError as e:
        raise MtError(f"{path}: cannot read ({e.strerror})")


def iter_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """Decode a byte stream line by line (split at \\n only); bad UTF-8 is an error naming `name` and the line."""
    for number, line in enumerate(stream, start=1):
        try:
            yield line.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as e:
            raise MtError(f"{name}:{number}: invalid UTF-8 (byte {e.start + 1})")


def read_text_column(path: Path) -> pa.Array:
    """A whole text file as an Arrow string array, one element per line, with no Python object per line
    (2M lines take a second). Lines are split and validated as iter_file_lines does, with the same errors."""
    import pyarrow as pa  # here, not above: translating reads lines too, and needs no Arrow
    import pyarrow.compute as pc

    try:
        with pa.input_stream(str(path), compression="detect") as stream:
            data = stream.read()
    except FileNotFoundError:
        raise MtError(f"{path}: no such file")
    except (OSError, pa.ArrowException) as e:
        raise MtError(f"{path}: cannot read ({e})")
    if not data:
        return pa.array([], pa.large_string())
    if data.endswith(b"\n"):
        data = data[:-1]
    lines = pc.split_pattern(pa.array([data], pa.large_binary()), "\n").flatten()  # [lines] binary
    try:
        text = lines.cast(pa.large_string())  # checks UTF-8
    except pa.ArrowInvalid:
        for _ in iter_file_lines(path):  # find the bad line and name it
            pass
        raise
    return pc.utf8_rtrim(text, characters="\r")
