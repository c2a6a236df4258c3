"""UTF-8 text, line by line: an invalid byte is an error that names the file (or stdin) and the line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from mt.errors import MtError


def read_lines(path: Path) -> list[str]:
    """A UTF-8 text file as lines (without line ends). Errors name the file and the line."""
    return list(iter_file_lines(path))


def iter_file_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 text file, read lazily; a missing file is reported at once."""
    try:
        stream = open(path, "rb")
    except FileNotFoundError:
        raise MtError(f"{path}: no such file")
    except OSError as e:
        raise MtError(f"{path}: cannot read ({e.strerror})")

    def lines() -> Iterator[str]:
        with stream:
            yield from iter_lines(stream, str(path))

    return lines()


def iter_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """Decode a byte stream line by line (split at \\n only); bad UTF-8 is an error naming `name` and the line."""
    for number, line in enumerate(stream, start=1):
        try:
            yield line.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as e:
            raise MtError(f"{name}:{number}: invalid UTF-8 (byte {e.start + 1})")
