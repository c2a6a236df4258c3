"""`mt evaluate`: translate a test set and score the translations with sacreBLEU (mt/core/scoring.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mt.core.atomic import TEXT, atomic_write_bytes
from mt.config import DecodeConfig
from mt.data.config import DataConfig
from mt.core.lines import read_lines
from mt.core.scoring import Scores, score
from mt.decode.translator import Translator


def read_held_out(data: DataConfig, split: str = "test") -> tuple[list[str], list[list[str]]]:
    """A config's test (or dev) set, all of it: its source lines and its one set of references."""
    from mt.data.corpora import read_corpus  # here: it imports `datasets` (most of a second), for a config's set alone

    held_out = read_corpus(data.test if split == "test" else data.dev, data, split)
    return held_out["src"], [held_out["tgt"]]


def read_test_files(src: Path, refs: list[Path]) -> tuple[list[str], list[list[str]]]:
    """A source file and one or more reference files."""
    return read_lines(src), [read_lines(ref) for ref in refs]


def evaluate(translator: Translator, sources: list[str], references: list[list[str]], decode: DecodeConfig,
             output: Path | None = None, translate: Callable[[list[str]], list[str]] | None = None) -> Scores:
    """Translate `sources` (translate_test) and score the translations against `references` with the BLEU
    tokenizer of the model's target language."""
    return score(translate_test(translator, sources, decode, output, translate), references,
                 translator.config.data.tgt_lang)


def translate_test(translator: Translator, sources: list[str], decode: DecodeConfig, output: Path | None = None,
                   translate: Callable[[list[str]], list[str]] | None = None) -> list[str]:
    """Translate `sources` (line by line, or with `translate` where the caller has another way, e.g. sentence
    splitting), and keep the translations in `output` (written atomically) if given."""
    hypotheses = translate(sources) if translate else translator.translate_lines(sources, decode)
    if output is not None:
        atomic_write_bytes(output, "".join(line + "\n" for line in hypotheses).encode("utf-8"), TEXT)
    return hypotheses

