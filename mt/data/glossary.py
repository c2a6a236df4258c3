"""The glossary file: a user's terms, one a line as SOURCE<TAB>TARGET[<TAB>TARGET…], several targets being
alternatives. UTF-8 (a byte-order mark is allowed); spaces around a field are dropped; a line whose first
non-space character is # is a comment; blank lines and empty target fields are skipped.

Each mistake is one line (MtError) that names the file and, where it has one, the line.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mt.core.errors import MtError
from mt.core.lines import BOM, iter_lines, read_bytes

MAX_TERMS = 10_000
MAX_TERM_CHARS = 200  # a source or target term
UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")  # Excel's "Unicode text" starts with one of these
QUOTED_CHARS = 40  # of a term too long to quote whole in an error


@dataclass(frozen=True)
class Entry:
    """One glossary line: its source term, its target terms (alternatives, in the line's order), its number."""

    source: str
    targets: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Glossary:
    """The entries of a glossary (one per source term, in file order) and the name its errors give (its path)."""

    name: str
    entries: tuple[Entry, ...]


def read_glossary(path: Path) -> Glossary:
    """The glossary in a file; a missing file, bad UTF-8 or a bad line is an MtError naming it."""
    data = read_bytes(path)
    if data.startswith(UTF16_MARKS):
        raise MtError(f"{path}: UTF-16 text; save the glossary as UTF-8")
    return _parse(iter_lines(io.BytesIO(data), str(path)), str(path))


def parse_glossary(text: str, name: str) -> Glossary:
    """The glossary in a text; errors name it `name`."""
    return _parse(text.split("\n"), name)


def glossary_of(terms: dict[str, str | list[str]], name: str) -> Glossary:
    """The glossary of a mapping of source terms to a target or a list of alternatives (a JSON object: a request's
    glossary); its entries are numbered from 1 in its order."""
    for source, targets in terms.items():
        for term in [source, *([targets] if isinstance(targets, str) else targets)]:
            if "\t" in term or "\n" in term:
                raise MtError(f"{name}: {_quoted(term)} holds a tab or a line end")
    lines = ["\t".join([source, *([targets] if isinstance(targets, str) else targets)])
             for source, targets in terms.items()]
    return _parse(lines, name)


def merged(first: Glossary, then: Glossary) -> Glossary:
    """`first`'s entries, then those of `then` whose source term `first` lacks: a request's glossary (first) over
    the server's."""
    sources = {entry.source for entry in first.entries}
    return Glossary(first.name, first.entries + tuple(e for e in then.entries if e.source not in sources))


def _parse(lines: Iterable[str], name: str) -> Glossary:
    entries: dict[str, Entry] = {}
    for number, line in enumerate(lines, start=1):
        if number == 1:
            line = line.removeprefix(BOM)
        line = line.rstrip("\r")
        if line.strip() and not line.lstrip().startswith("#"):
            entry = _entry(line, f"{name}:{number}", number)
            _add(entries, entry, f"{name}:{number}")
    if not entries:
        raise MtError(f"{name}: no terms (a line is SOURCE<TAB>TARGET; # starts a comment)")
    if len(entries) > MAX_TERMS:
        raise MtError(f"{name}: {len(entries):,} terms; a glossary has at most {MAX_TERMS:,}")
    return Glossary(name, tuple(entries.values()))


def _entry(line: str, where: str, number: int) -> Entry:
    """One line's entry: SOURCE<TAB>TARGET[<TAB>TARGET…]."""
    if "\t" not in line:
        raise MtError(f"{where}: no tab between the source term and its translation (a line is "
                      f"SOURCE<TAB>TARGET[<TAB>TARGET…])")
    source, *fields = (field.strip() for field in line.split("\t"))
    if not source:
        raise MtError(f"{where}: the source term is empty")
    targets = tuple(dict.fromkeys(field for field in fields if field))  # an empty field: a tab too many
    if not targets:
        raise MtError(f"{where}: {_quoted(source)} has an empty translation")
    for term in (source, *targets):
        if len(term) > MAX_TERM_CHARS:
            raise MtError(f"{where}: {_quoted(term)} has {len(term):,} characters; a term has at most "
                          f"{MAX_TERM_CHARS}")
    if not any(c.isalnum() for c in source):
        raise MtError(f"{where}: the source term {_quoted(source)} has no letter or digit")
    return Entry(source, targets, number)


def _add(entries: dict[str, Entry], entry: Entry, where: str) -> None:
    """Keep an entry; a source given again must have the same targets (then the first line stands)."""
    first = entries.setdefault(entry.source, entry)
    if set(first.targets) != set(entry.targets):
        raise MtError(f"{where}: {_quoted(entry.source)} is on line {first.line} with another translation; give "
                      f"its translations on one line, tab-separated")


def _quoted(term: str) -> str:
    """A term in double quotes for an error, its start only when it is long."""
    return f'"{term if len(term) <= QUOTED_CHARS else term[:QUOTED_CHARS] + "…"}"'
