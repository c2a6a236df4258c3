"""Suggestions: better translations that people send (LibreTranslate's POST /suggest), judged by the model, kept in
SQLite, and each accepted one answering its source sentence at once (a translation memory, before the cache).

A suggestion is written to the database, and committed, before its answer goes out: a server killed after
answering has it. Judging reads the model (`judge`), on the batching worker's thread. An operator lists the
suggestions and accepts or refuses any of them (mt's own API, with one of the server's API keys).
"""

from __future__ import annotations

import datetime
import sqlite3
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mt.core.errors import MtError
from mt.decode.guard import failure
from mt.decode.translator import Translator

UNRELATED = 0.25  # nats per token: a suggestion the source makes no likelier than this is unrelated to it
TARGET_SHARE = 0.01  # py3langid's probability of the target language below which a suggestion is in another
LANGID_WORDS = 3  # the fewest words py3langid is asked about: it takes "OK." and "Sure." for Serbian
WHY = {"copy": "it copies the source", "loop": "it repeats itself", "cut": "it is too long",
       "short": "it is far shorter than translations of the source are", "long": "it is far longer than translations "
       "of the source are", "script": "it is not written in the target language's script"}
STATUSES = ("accepted", "refused")


@dataclass(frozen=True)
class Judgement:
    accepted: bool
    reason: str  # why it was refused, or what accepted it


def judge(translator: Translator, source: str, suggestion: str) -> Judgement:
    """Whether a suggestion may stand as the translation of `source` (one sentence): refused where the failure guard
    fails it (mt/decode/guard.py: a copy, a loop, a length far from normal, another script), where it is in another
    language (py3langid, where installed, for LANGID_WORDS words or more: TARGET_SHARE), or where the model finds it
    no likelier given the source than given nothing (UNRELATED: an unrelated sentence, another sentence's
    translation)."""
    src_ids = translator.encode([source])[0]
    tgt_ids = translator.tokenizer.encode_tgt([suggestion])[0][1:-1]
    pieces = ([translator.tokenizer.src.id_to_piece(i) for i in src_ids[:-1]],
              [translator.tokenizer.tgt.id_to_piece(i) for i in tgt_ids])
    if found := failure(*pieces, suggestion, False, translator.normal):
        return Judgement(False, WHY[found])
    target = translator.config.data.tgt_lang.split("-")[0]
    if len(suggestion.split()) >= LANGID_WORDS and (other := other_language(suggestion, target)) is not None:
        return Judgement(False, f"it is in another language ({other})")
    given, alone = translator.score([source, ""], [suggestion, suggestion])
    gain = given.mean - alone.mean
    if gain <= UNRELATED:
        return Judgement(False, f"the model finds it unrelated to the source ({gain:.2f} nats a token likelier given "
                                f"it, at most {UNRELATED})")
    return Judgement(True, f"{gain:.2f} nats a token likelier given the source")


def other_language(text: str, target: str) -> str | None:
    """The language py3langid finds `text` likeliest in, where it gives `target` less than TARGET_SHARE; None
    without py3langid (`pip install 'mt[langid]'`)."""
    try:
        ranked = _identifier().rank(text)
    except ImportError:
        return None
    return ranked[0][0] if dict(ranked).get(target, 0.0) < TARGET_SHARE else None


@cache
def _identifier():
    """py3langid's identifier, with probabilities: made once."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


class Suggestions:
    """The suggestions in an SQLite file, and the accepted ones by source (`memory`). SQLite in WAL mode with full
    syncs: each write is on disk when it returns. One connection, shared by the server's threads under a lock."""

    def __init__(self, path: Path):
        try:
            self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("CREATE TABLE IF NOT EXISTS suggestions (id INTEGER PRIMARY KEY, time TEXT NOT NULL, "
                            "source TEXT NOT NULL, suggestion TEXT NOT NULL, source_lang TEXT, target_lang TEXT, "
                            "status TEXT NOT NULL, reason TEXT NOT NULL)")
            rows = self.db.execute("SELECT source, suggestion FROM suggestions WHERE status = 'accepted' ORDER BY id")
            self.memory = dict(rows.fetchall())  # the latest accepted suggestion of each source
        except sqlite3.DatabaseError as e:
            raise MtError(f"{path}: not a suggestions database mt can use ({e})") from None
        self.lock = threading.Lock()

    def add(self, source: str, suggestion: str, languages: tuple[str, str], judgement: Judgement) -> int:
        """Keep a judged suggestion (on disk when this returns); its id."""
        with self.lock:
            cursor = self.db.execute(
                "INSERT INTO suggestions (time, source, suggestion, source_lang, target_lang, status, reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)", (_now(), source, suggestion, *languages,
                                                 STATUSES[not judgement.accepted], judgement.reason))
            if judgement.accepted:
                self.memory[source] = suggestion
            return cursor.lastrowid

    def decide(self, number: int, status: str, reason: str) -> dict | None:
        """An operator's decision on suggestion `number` (accepted or refused); the suggestion as it then is, or None
        where there is none."""
        with self.lock:
            self.db.execute("UPDATE suggestions SET status = ?, reason = ? WHERE id = ?", (status, reason, number))
            [row] = self._rows("WHERE id = ?", (number,)) or [None]
            if row is not None:
                accepted = self.db.execute("SELECT suggestion FROM suggestions WHERE source = ? AND status = "
                                           "'accepted' ORDER BY id DESC LIMIT 1", (row["source"],)).fetchone()
                if accepted:
                    self.memory[row["source"]] = accepted[0]
                else:
                    self.memory.pop(row["source"], None)
            return row

    def listed(self, status: str | None = None, limit: int = 100) -> list[dict]:
        """The newest suggestions first, of one status or all."""
        with self.lock:
            if status is None:
                return self._rows("ORDER BY id DESC LIMIT ?", (limit,))
            return self._rows("WHERE status = ? ORDER BY id DESC LIMIT ?", (status, limit))

    def _rows(self, where: str, values: tuple) -> list[dict]:
        cursor = self.db.execute(f"SELECT id, time, source, suggestion, source_lang, target_lang, status, reason "
                                 f"FROM suggestions {where}", values)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def close(self) -> None:
        self.db.close()


def accepted(path: Path) -> dict[str, str]:
    """The accepted suggestions of a suggestions file, by source (the newest accepted one of each): what `mt adapt`
    learns from."""
    if not path.is_file():
        raise MtError(f"{path}: no such suggestions database (mt serve --suggestions writes one)")
    store = Suggestions(path)
    try:
        found = dict(store.memory)
    finally:
        store.close()
    if not found:
        raise MtError(f"{path}: no accepted suggestions to adapt to")
    return found


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
