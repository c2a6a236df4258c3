"""Translated files (POST /translate_file) kept until their one download (GET /download_file/…) or a timeout."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import tempfile
from pathlib import Path

from mt.serve.errors import ApiError


class Downloads:
    """Translated files waiting for their download, in a directory of the server's own (mode 0700, removed when it
    stops), each under a random token: a name a client gave is never a path. A file is removed once downloaded, or
    after `keep` seconds; all of them hold at most `limit` bytes, so that uploads nobody fetches cannot fill the
    disk."""

    def __init__(self, keep: float, limit: int):
        self.keep, self.limit, self.bytes = keep, limit, 0
        self.directory = Path(tempfile.mkdtemp(prefix="mt-serve-"))  # mode 0700
        self.files: dict[str, tuple[str, int, asyncio.TimerHandle]] = {}  # token → (download name, bytes, removal)

    def put(self, name: str, data: bytes) -> str:
        """Stores the file; its name for /download_file/: the token, a dot, then `name`."""
        if self.bytes + len(data) > self.limit:
            raise ApiError(503, "Too many translated files wait for their download; try again in a moment")
        token = secrets.token_hex(16)
        (self.directory / token).write_bytes(data)
        self.files[token] = (name, len(data), asyncio.get_running_loop().call_later(self.keep, self.remove, token))
        self.bytes += len(data)
        return f"{token}.{name}"

    def take(self, file: str) -> tuple[str, bytes]:
        """The download name and bytes of a file stored under `file` (as `put` named it), removed now."""
        if "/" in file or "\\" in file:
            raise ApiError(400, "Invalid filename")
        token, _, name = file.partition(".")
        if token not in self.files or self.files[token][0] != name:
            raise ApiError(404, "File not found (a translated file can be downloaded once, for a while)")
        data = (self.directory / token).read_bytes()
        self.remove(token)
        return name, data

    def remove(self, token: str) -> None:
        _, size, removal = self.files.pop(token)
        removal.cancel()
        self.bytes -= size
        (self.directory / token).unlink()

    def close(self) -> None:
        for _, _, removal in self.files.values():
            removal.cancel()
        shutil.rmtree(self.directory, ignore_errors=True)
