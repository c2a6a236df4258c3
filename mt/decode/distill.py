"""Sequence-level knowledge distillation's corpus (Kim & Rush, 2016): a teacher (one checkpoint, an ensemble, an
imported model or a CTranslate2 export) translates source lines with beam search, and each source line with the
teacher's translation becomes a training pair for a smaller student (configs/student-*.yaml).

The pairs go chunk by chunk into DIR/train.<src> and DIR/train.<tgt>. After each chunk, DIR/distill.json records
how many source lines are read and how many bytes each file holds, with the teachers, sources and decode settings:
a stopped distillation continues where it was (a chunk half written is cut off), and one with other teachers,
sources or settings is refused rather than mixed in.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mt.config import DecodeConfig
from mt.core.atomic import atomic_write_bytes, file_checksum
from mt.core.errors import MtError
from mt.core.lines import iter_file_lines
from mt.decode.translator import Translator

STATE_FILE = "distill.json"
CHUNK_LINES = 1000  # source lines per chunk: what a stop can lose
PARTS = {"teachers": "teachers", "engine": "engine", "compute_type": "compute type", "sources": "source files",
         "decode": "decode settings", "chunk_lines": "chunk size"}  # a recipe's parts, as an error names them


@dataclass
class Progress:
    """How far a distillation is: source lines read (empty ones too), pairs written, each file's size."""

    read: int = 0
    pairs: int = 0
    sizes: tuple[int, int] = (0, 0)
    complete: bool = False


def recipe(teachers: list[Path], sources: list[Path], decode: DecodeConfig, engine: str, compute_type: str,
           chunk_lines: int = CHUNK_LINES) -> dict:
    """What makes a distillation's pairs what they are: its teachers (each file's, or an export's mt.json's,
    checksum), their engine and its resolved compute type, its source files (checksums), its decode settings and
    chunks (a sampling seed counts per chunk)."""
    def checksum(path: Path) -> str:
        return file_checksum(path / "mt.json" if path.is_dir() else path)

    return {"teachers": [{"path": str(t.resolve()), "sha256": checksum(t)} for t in teachers], "engine": engine,
            "compute_type": compute_type,
            "sources": [{"path": str(s.resolve()), "sha256": checksum(s)} for s in sources],
            "decode": dataclasses.asdict(decode), "chunk_lines": chunk_lines}


def corpus_files(output: Path, translator: Translator) -> tuple[Path, Path]:
    data = translator.config.data
    return output / f"train.{data.src_lang}", output / f"train.{data.tgt_lang}"


def distill(translator: Translator, made_by: dict, sources: list[Path], output: Path, decode: DecodeConfig,
            progress: Callable[[int], None] = lambda lines: None) -> Progress:
    """Translate every non-empty line of `sources` with `translator` into the pairs of `output`, continuing a
    previous, stopped distillation of the same `made_by` (recipe) there. `progress` hears of each chunk's lines."""
    done = _resume(output, made_by)
    if done.complete:
        return done
    src_path, tgt_path = corpus_files(output, translator)
    with open(src_path, "ab") as src_file, open(tgt_path, "ab") as tgt_file:
        for file, size in zip((src_file, tgt_file), done.sizes):
            file.truncate(size)  # what a stop left after the last recorded chunk
        progress(done.read)
        for chunk in _chunks(_lines(sources), done.read, made_by["chunk_lines"]):
            lines = [line.strip() for line in chunk if line.strip()]
            translations = translator.translate_lines(lines, decode)
            for file, texts in ((src_file, lines), (tgt_file, translations)):
                file.write("".join(f"{text}\n" for text in texts).encode("utf-8"))
                file.flush()
                os.fsync(file.fileno())
            done = Progress(done.read + len(chunk), done.pairs + len(lines), (src_file.tell(), tgt_file.tell()))
            _save(output, made_by, done)
            progress(len(chunk))
    done.complete = True
    _save(output, made_by, done)
    return done


def _lines(sources: list[Path]) -> Iterator[str]:
    return itertools.chain.from_iterable(iter_file_lines(path) for path in sources)


def _chunks(lines: Iterator[str], skip: int, size: int) -> Iterator[list[str]]:
    lines = itertools.islice(lines, skip, None)
    while chunk := list(itertools.islice(lines, size)):
        yield chunk


def _resume(output: Path, made_by: dict) -> Progress:
    """Where a previous distillation into `output` stopped (nothing: a new one), after checking that it was made
    the same way. A directory that holds something else is left alone."""
    state = output / STATE_FILE
    if not state.exists():
        if not output.parent.is_dir():
            raise MtError(f"{output}: directory {output.parent} does not exist")
        if output.exists() and (not output.is_dir() or any(output.iterdir())):
            raise MtError(f"{output}: exists and is not a distillation of mt (no {STATE_FILE}); give a new directory")
        output.mkdir(exist_ok=True)
        return Progress()
    try:
        saved = json.loads(state.read_text(encoding="utf-8"))
        theirs, done = saved["recipe"], Progress(**{**saved["progress"], "sizes": tuple(saved["progress"]["sizes"])})
        # decode keys that mt gained after this distillation started were at their defaults then
        theirs["decode"] = {**dataclasses.asdict(DecodeConfig()), **theirs["decode"]}
        theirs.setdefault("compute_type", made_by["compute_type"])  # unrecorded by the mt that started it
    except (ValueError, KeyError, TypeError):
        raise MtError(f"{state}: damaged (not mt's distillation state); give a new directory")
    for part, words in PARTS.items():
        if theirs.get(part) != made_by[part]:
            raise MtError(f"{output}: a distillation with other {words} is there; continue it with the same "
                          f"{words}, or give a new directory")
    return done


def _save(output: Path, made_by: dict, done: Progress) -> None:
    state = {"recipe": made_by, "progress": dataclasses.asdict(done)}
    atomic_write_bytes(output / STATE_FILE, json.dumps(state, indent=2, ensure_ascii=False).encode("utf-8"))
