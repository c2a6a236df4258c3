"""Translate lines and documents from arguments, files and stdin, and write them (`mt translate`).

The input is read first (`read_source`), so that a missing or bad file is reported before the model loads. Plain
text is translated in chunks of lines, each chunk's lines written as soon as they are done; an HTML text or a
document file (mt/text/documents.py) is translated whole and written in its own format.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from mt.config import DecodeConfig
from mt.core.atomic import DOCX, TEXT, Kind, atomic_open, atomic_write_bytes
from mt.core.errors import MtError
from mt.data.glossary import Glossary, read_glossary
from mt.data.terms import TermFinder, TermUse
from mt.core.lines import BOM, Encoding, file_encoding, iter_file_lines, iter_lines, read_bytes
from mt.decode.constraints import NO_CONSTRAINTS
from mt.decode.translator import Translation, Translator, translate_stream, with_confidence
from mt.text.documents import DOCUMENTS, Document, read_document
from mt.text.glossary_modes import GlossaryUse
from mt.text.texts import translate_marked_terms, translate_plain

log = logging.getLogger(__name__)

CHUNK_LINES = 2000  # lines read, sorted by length and translated together when streaming


def output_kind(output: Path | None) -> Kind:
    """What a translation written to `output` is: a Word document, or text."""
    return DOCX if output is not None and output.suffix.lower() == ".docx" else TEXT


def read_source(text: list[str] | None, input: Path | None, format: str | None,
                output: Path | None) -> Lines | DocumentSource:
    """What to translate: the `text` arguments, the file `input`, or stdin; a document when `format` is "html" or
    the file's suffix names a document format."""
    if format == "html" or (input is not None and format is None and input.suffix.lower() in DOCUMENTS):
        return DocumentSource.read(text, input, format, output)
    return Lines.read(text, input, output)


def read_terms(glossary: Path | None, engine: str, mode: str | None = None) -> Glossary | None:
    """A command's --glossary, read before the model loads (None without one); hard mode refused with CTranslate2.
    `mode`: the command's --glossary-mode (None: a command without one, which holds terms hard)."""
    if glossary is None:
        return None
    if engine != "mt" and mode != "soft":
        raise MtError(NO_CONSTRAINTS + ("; --glossary-mode soft works with either engine" if mode else ""))
    return read_glossary(glossary)


def translate_terms(glossary: Path | None, report: Path | None, source: Lines | DocumentSource, engine: str,
                    mode: str) -> Glossary | None:
    """`mt translate`'s glossary (read_terms), with the options it cannot go with refused."""
    if glossary is None and report is not None:
        raise MtError("--glossary-report goes with --glossary")
    if report is not None and isinstance(source, DocumentSource):
        raise MtError("--glossary-report lists each line's terms: plain text only (HTML and documents are "
                      "translated with the glossary; one line on stderr sums it up)")
    return read_terms(glossary, engine, mode)


def glossary_use(glossary: Glossary | None, translator: Translator, mode: str) -> GlossaryUse | None:
    """The glossary made ready for the translator's model, in --glossary-mode `mode`."""
    return GlossaryUse(TermFinder(glossary, translator.tokenizer), mode == "soft") if glossary is not None else None


def log_terms(used: int, total: int, report: Path | None) -> None:
    """The line on stderr that sums up what became of a glossary's terms."""
    log.info(f"glossary: {used:,} of {total:,} terms used"
             + (f" (listed in {report})" if report is not None else " (--glossary-report FILE lists them)"))


@dataclass
class DocumentSource:
    """An HTML text, or a document file, translated whole and written in its own format to `output` or stdout."""

    document: Document
    output: Path | None

    @classmethod
    def read(cls, text: list[str] | None, input: Path | None, format: str | None,
             output: Path | None) -> DocumentSource:
        if input is not None:
            data, name = read_bytes(input), input.name if format is None else f"{input.stem}.html"
        else:
            data, name = ("\n".join(text) if text else sys.stdin.read()).encode("utf-8"), "stdin.html"
        if output is None and name.lower().endswith(".docx"):
            raise MtError(f"{input}: a Word document's translation needs --output FILE.docx")
        return cls(read_document(name, data), output)

    def translate(self, translator: Translator, decode: DecodeConfig, split: bool,
                  glossary: GlossaryUse | None = None) -> None:
        translated, uses = translate_marked_terms(translator, self.document.texts, decode, split, glossary)
        if glossary is not None:
            log_terms(sum(use.used for use in uses), len(uses), None)
        result = self.document.render(translated)
        if self.output is not None:
            atomic_write_bytes(self.output, result, output_kind(self.output))
        else:
            sys.stdout.write(result.decode("utf-8"))
            sys.stdout.flush()


@dataclass
class Lines:
    """Plain text, line by line: `chunk` lines translated at a time; each line's translation (or its n-best list,
    `LINE ||| TEXT ||| SCORE` per hypothesis) written to `output` or stdout with the input's line end."""

    lines: Iterable[str]
    chunk: int
    encoding: Encoding
    output: Path | None
    bar: bool  # a progress bar, for a person watching the terminal while the translations go to a file or a pipe

    @classmethod
    def read(cls, text: list[str] | None, input: Path | None, output: Path | None) -> Lines:
        """The arguments all at once; a file or piped stdin in chunks; a person typing at a terminal line by
        line. A file is opened now, so that a missing one is reported first."""
        if text:
            lines, chunk = text, len(text)
        elif input is not None:
            lines, chunk = iter_file_lines(input), CHUNK_LINES
        elif sys.stdin.isatty():
            log.info("reading sentences from stdin (Ctrl-D to end)")
            lines, chunk = iter_lines(sys.stdin.buffer, "stdin"), 1
        else:
            lines, chunk = iter_lines(sys.stdin.buffer, "stdin"), CHUNK_LINES
        encoding = file_encoding(input) if input is not None else Encoding()  # kept in the translation
        if encoding.bom:  # the mark is the file's, not its first line's
            lines = (line.removeprefix(BOM) if n == 0 else line for n, line in enumerate(lines))
        bar = sys.stderr.isatty() and (output is not None or not sys.stdout.isatty()) and not text
        return cls(lines, chunk, encoding, output, bar)

    def translate(self, translator: Translator, decode: DecodeConfig, split: bool, glossary: GlossaryUse | None = None,
                  report: Path | None = None, scores: Path | None = None) -> str:
        """Translate and write every line; the last line's best translation. With a `glossary`, each line's
        terms go into `report` (JSON Lines: {"line": N, "terms": [{"source", "target", "used"}, …]}) and, with
        n-best lists, a fifth field of each hypothesis. With `scores`, each line's confidence goes there (JSON
        Lines: {"line": N, "confidence": C, "words": [[WORD, P], …], "failure": F or null}). An n-best list gives
        each hypothesis's confidence as its fourth field."""
        def translate_chunk(lines: list[str], first: int) -> list[list[Translation]]:
            if decode.nbest == 1:
                return [[t] for t in translate_plain(translator, lines, decode, split, glossary, scores is not None)]
            # n-best lists are of whole lines, cut to fit the model
            found = glossary.translate(translator, lines, decode, first) if glossary is not None \
                else translator.translate(lines, decode, first)
            return with_confidence(translator, lines, found)

        last, used, total = "", 0, 0
        results = translate_stream(translate_chunk, self.lines, self.chunk)
        with line_writer(self.output, self.encoding) as write, \
                optional_writer(report) as write_report, optional_writer(scores) as write_scores:
            for i, hyps in enumerate(tqdm(results, unit=" lines", disable=not self.bar, file=sys.stderr)):
                if decode.nbest == 1:
                    write(hyps[0].text)
                else:
                    for t in hyps:
                        terms = f" ||| {_json(t.terms)}" if glossary is not None else ""
                        write(f"{i} ||| {t.text} ||| {t.score:.4f} ||| {t.confidence.score:.4f}{terms}")
                if write_report is not None:
                    write_report(f'{{"line": {i + 1}, "terms": {_json(hyps[0].terms)}}}')
                if write_scores is not None:
                    write_scores(json.dumps({"line": i + 1, **hyps[0].confidence.json(), "failure": hyps[0].failure},
                                            ensure_ascii=False))
                last = hyps[0].text
                used, total = used + sum(use.used for use in hyps[0].terms), total + len(hyps[0].terms)
        if glossary is not None:
            log_terms(used, total, report)
        return last


def _json(terms: list[TermUse]) -> str:
    return json.dumps([dataclasses.asdict(use) for use in terms], ensure_ascii=False)


def optional_writer(output: Path | None):
    """line_writer into `output`, or None (as a context) without one."""
    return line_writer(output) if output is not None else nullcontext(None)


@contextmanager
def line_writer(output: Path | None, encoding: Encoding = Encoding()) -> Iterator[Callable[[str], None]]:
    """A function that writes one line: to stdout at once, or into `output`, which appears (atomically)
    only when every line is written; with `encoding`'s line end, after its byte-order mark if it has one."""
    if output is None:
        sys.stdout.write(encoding.mark)

        def write(line: str) -> None:
            sys.stdout.write(line + encoding.newline)
            sys.stdout.flush()

        yield write
    else:
        with atomic_open(output, TEXT) as f:
            f.write(encoding.mark.encode("utf-8"))
            yield lambda line: f.write((line + encoding.newline).encode("utf-8"))
