"""The server's translation cache: sentences already translated, answered again without the model."""

from __future__ import annotations

from collections import OrderedDict

from mt.decode.translator import Translation

CACHE_ENTRY_BYTES = 1024  # the cache holds at most --cache-size entries of this size on average


class Cache:
    """Sentences already translated, by (sentence, decode settings) → their n-best: least recently used first out,
    at most `entries` of them and CACHE_ENTRY_BYTES × `entries` bytes of text. By sentence, not by text: a text
    that repeats a known sentence (a paragraph edited, a subtitle line said again) gets it from here."""

    def __init__(self, entries: int):
        self.entries, self.limit = entries, entries * CACHE_ENTRY_BYTES
        self.found: OrderedDict[tuple, tuple[list[Translation], int]] = OrderedDict()  # → (n-best, bytes)
        self.bytes = self.hits = self.misses = 0

    def get(self, key: tuple) -> list[Translation] | None:
        if not self.entries:
            return None
        entry = self.found.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self.found.move_to_end(key)
        return entry[0]

    def put(self, key: tuple, nbest: list[Translation]) -> None:
        size = len(key[0].encode()) + sum(len(t.text.encode()) + 8 for t in nbest)
        if not self.entries or size > self.limit:
            return
        if key in self.found:
            self.bytes -= self.found.pop(key)[1]
        self.found[key] = (nbest, size)
        self.bytes += size
        while len(self.found) > self.entries or self.bytes > self.limit:
            self.bytes -= self.found.popitem(last=False)[1][1]

    def counts(self) -> dict:
        return {"entries": len(self.found), "bytes": self.bytes, "hits": self.hits, "misses": self.misses,
                "size": self.entries}
