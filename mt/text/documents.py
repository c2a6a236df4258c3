"""Files that are translated whole: each format's `Marked` texts, and the same file again from their translations.

- .txt: one text, the whole file: its lines and blank lines stay where they are.
- .html/.htm: mt/text/markup.py's texts and rendering.
- .srt (subtitles): one text per cue, its lines joined by \\n; cue numbers and times are kept. Inline tags (<i>,
  <b>, <u>, <s>, <font …> and their closing tags, an {\\an8}) are marks, not text: left in the text, the sentence
  splitter made "</i>" a sentence of its own for the model to translate. They are put back as they were written.
- .docx (Word document): one text per paragraph that has text (body, tables, text boxes, headers and footers),
  with a mark on each run and hyperlink; each run keeps its formatting and gets the translation of its words, in
  the order the translation puts them. Pictures, fields and page breaks stay in their runs. Text outside runs and
  hyperlinks (tracked changes, content controls, footnotes) stays as it is, untranslated.

A text file (.txt, .html, .srt) is UTF-8; its byte-order mark and line end are kept. Inside the texts every line
ends with \\n, so that no \\r reaches a sentence.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, replace
from itertools import accumulate
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Protocol

import srt

from mt.core.errors import MtError
from mt.core.lines import BOM, Encoding
from mt.text.marks import Marked, Span

if TYPE_CHECKING:
    from docx.document import Document as DocxDocument

    from mt.text.markup import HtmlDocument

FORMATS = {".txt": "text", ".html": "HTML", ".htm": "HTML", ".srt": "subtitles", ".docx": "Word document"}
DOCUMENTS = {suffix for suffix, kind in FORMATS.items() if kind != "text"}  # translated whole, in their format

# A .docx is a zip: refuse one that would unpack to more than this, or whose member unpacks to more than MAX_RATIO
# times its packed size (a zip bomb: zeros pack a thousand to one; XML packs some ten to one). Small members are
# not held to the ratio: they cannot do harm, and a short, repetitive XML part may pack well.
MAX_UNPACKED = 50_000_000
MAX_RATIO = 200
RATIO_FROM = 1_000_000  # bytes unpacked

SRT_TAG = re.compile(r"</?(i|b|u|s|font)\b[^>]*>|\{\\[^}]*\}", re.IGNORECASE)  # <i>, </i>, <font …>, {\an8}
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"  # WordprocessingML's namespace, for tags
# How python-docx fails on a damaged .docx: a part missing (KeyError), bad XML (lxml's XMLSyntaxError is a
# SyntaxError), not a Word content type (ValueError), a bad CRC (BadZipFile), bad or unknown compression
DAMAGED = (KeyError, ValueError, SyntaxError, zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError)
RUN_TEXT = "./w:t | ./w:tab | ./w:br | ./w:cr | ./w:noBreakHyphen | ./w:ptab"  # what python-docx reads as text


class Document(Protocol):
    """A file read for translation: its texts, and the file again from their translations (same count and
    order, each with the same marks)."""

    texts: list[Marked]

    def render(self, translated: list[Marked]) -> bytes: ...


def read_document(name: str, data: bytes, max_bytes: int | None = None) -> Document:
    """The file `data`, read by the suffix of `name`. Errors (an unsupported suffix, data over `max_bytes`, bad
    UTF-8, a damaged file) name the file."""
    if max_bytes is not None and len(data) > max_bytes:
        raise MtError(f"{name}: {len(data):,} bytes, over the limit of {max_bytes:,}")
    suffix = PurePath(name).suffix.lower()
    if suffix not in FORMATS:
        supported = ", ".join(f"{s} ({what})" for s, what in FORMATS.items())
        kind = f"{suffix} files" if suffix else "files without a suffix"
        raise MtError(f"{name}: cannot translate {kind}; supported: {supported}")
    if suffix == ".docx":
        return read_docx(name, data)
    text, encoding = decode(name, data)
    if suffix == ".srt":
        cues, tags = parse_srt(name, text), []
        return Subtitles([read_cue(cue.content, tags) for cue in cues], cues, tags, encoding)
    if suffix in (".html", ".htm"):
        from mt.text.markup import read_html

        page = read_html(text)
        return Html(page.texts, page, encoding)
    return PlainText([Marked(text)], encoding)


def check_output_format(input: PurePath | None, output: PurePath | None, format: str | None) -> None:
    """Refuse, before any work, an --output whose suffix names another document format than the translation's (a
    subtitle file's translation named .docx); any text (plain, HTML, subtitles) may go to a .txt file or one whose
    suffix names no format. `format` "html": the input is HTML whatever its name."""
    if output is None:
        return
    made = "HTML" if format == "html" else FORMATS.get(input.suffix.lower(), "text") if input else "text"
    named = FORMATS.get(output.suffix.lower())
    word = made == "Word document"
    if named != made and (named not in (None, "text") or word):
        endings = ", ".join(suffix for suffix, kind in FORMATS.items() if kind == made or (kind == "text" and not word))
        said = f"its suffix names {_a(named)}, but " if named else ""
        raise MtError(f"--output {output}: {said}the translation is {_a(made)}; choose a name ending in {endings}"
                      + ("" if word else ", or a suffix that names no format"))


def _a(kind: str) -> str:
    """A format's name as a phrase: "a Word document", "HTML", "text"."""
    return "a Word document" if kind == "Word document" else kind


def decode(name: str, data: bytes) -> tuple[str, Encoding]:
    """UTF-8 bytes → the text (without a byte-order mark, every line end \\n) and how it was written. Bad UTF-8 is
    an error naming the line and the byte in it, as mt/core/lines.py's."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, line_start = data.count(b"\n", 0, e.start) + 1, data.rfind(b"\n", 0, e.start) + 1
        raise MtError(f"{name}:{line}: invalid UTF-8 (byte {e.start - line_start + 1})")
    newline = re.search(r"\r\n?|\n", text)
    encoding = Encoding(text.startswith(BOM), newline.group() if newline else "\n")
    return re.sub(r"\r\n?", "\n", text.removeprefix(BOM)), encoding


@dataclass
class PlainText:
    """A text file: one text, the whole file."""

    texts: list[Marked]
    encoding: Encoding

    def render(self, translated: list[Marked]) -> bytes:
        (text,) = translated
        return self.encoding.encode(text.text)


@dataclass
class Html:
    """An HTML page: mt/text/markup.py's."""

    texts: list[Marked]
    page: HtmlDocument
    encoding: Encoding

    def render(self, translated: list[Marked]) -> bytes:
        return self.encoding.encode(self.page.render(translated))


@dataclass
class Subtitles:
    """An .srt file: one text per cue. A mark is an index into `tags`: a tag's (opening, closing) as written."""

    texts: list[Marked]
    cues: list[srt.Subtitle]
    tags: list[list[str]]
    encoding: Encoding

    def render(self, translated: list[Marked]) -> bytes:
        cues = [srt.Subtitle(cue.index, cue.start, cue.end, write_cue(text, self.tags), cue.proprietary)
                for cue, text in zip(self.cues, translated, strict=True)]
        # as read: the cues' own numbers, and a blank line inside a cue (which srt's parser accepts) kept
        return self.encoding.encode(srt.compose(cues, reindex=False, strict=False))


def parse_srt(name: str, text: str) -> list[srt.Subtitle]:
    """The cues of an .srt file; text that is not a cue is an error naming its line and the cue it stands for."""
    cues: list[srt.Subtitle] = []
    try:
        cues.extend(srt.parse(text))  # yields cue by cue: `cues` holds those before an error
    except srt.SRTParseError as e:
        bad = e.unmatched_content
        line = text.count("\n", 0, e.expected_start + len(bad) - len(bad.lstrip())) + 1
        raise MtError(f"{name}:{line}: cue {len(cues) + 1} is not a number, a line "
                      f"\"00:00:01,000 --> 00:00:02,500\" and text: {bad.strip().splitlines()[0]!r}")
    except OverflowError:
        raise MtError(f"{name}: cue {len(cues) + 1}: a time out of range")
    return cues


def read_cue(content: str, tags: list[list[str]]) -> Marked:
    """A cue's text without its tags: an opening tag and the closing tag that closes it make a span; an unclosed
    tag spans to the end; a closing tag that closes nothing and an {\\an8} are points. A mark is the index of the
    tag's [opening, closing] in `tags`, which grows."""
    pieces, length, spans, at = [], 0, [], 0
    open_, names = [], Counter()  # the spans not closed yet: (index in spans, tag name), and how many of each name
    for m in SRT_TAG.finditer(content):
        pieces.append(content[at:m.start()])
        length, at = length + m.start() - at, m.end()
        name = (m.group(1) or "").lower()
        if m.group().startswith("</") and names[name]:
            while True:  # the innermost span of that name, and those opened inside it
                i, n = open_.pop()
                names[n] -= 1
                spans[i] = replace(spans[i], end=length)
                if n == name:
                    tags[spans[i].mark][1] = m.group()
                    break
            continue
        parent = spans[open_[-1][0]].mark if open_ else None
        if name and not m.group().startswith("</"):
            open_.append((len(spans), name))
            names[name] += 1
        spans.append(Span(length, length, len(tags), parent))
        tags.append([m.group(), ""])
    text = "".join(pieces) + content[at:]
    for i, _ in open_:
        spans[i] = replace(spans[i], end=len(text))
    return Marked(text, spans)


def write_cue(text: Marked, tags: list[list[str]]) -> str:
    """A cue's text with its tags written around (or at) their placed spans, each inside its parent's; siblings
    in the order of their places (a point before a span that starts where it is), else in document order."""
    children: dict[int | None, list[Span]] = {}
    for s in text.spans:
        children.setdefault(s.parent, []).append(s)

    def in_order(parent: int | None) -> list[tuple[int, Span]]:  # reversed, for popping: (0 opening / 1 closing, span)
        return [(0, s) for s in sorted(children.get(parent, []), key=lambda s: (s.start, s.end))][::-1]

    out, at, todo = [], 0, in_order(None)  # a stack, not recursion: tags may nest deep
    while todo:
        closing, s = todo.pop()
        place = s.end if closing else s.start
        out += [text.text[at:place], tags[s.mark][closing]]
        at = max(at, place)
        if not closing:
            todo += [(1, s)] + in_order(s.mark)
    return "".join(out) + text.text[at:]


@dataclass
class Paragraph:
    """A paragraph of a Word document: its runs and hyperlinks in document order, each as its mark with the marks
    of the runs it holds (a run holds itself)."""

    element: Any  # docx.oxml.text.paragraph.CT_P
    items: list[tuple[int, list[int]]]


@dataclass
class WordDocument:
    """A .docx file: one text per paragraph with text. A mark is an index into `elements` (runs, hyperlinks)."""

    texts: list[Marked]
    paragraphs: list[Paragraph]
    elements: list[Any]
    document: DocxDocument

    def render(self, translated: list[Marked]) -> bytes:
        for paragraph, text in zip(self.paragraphs, translated, strict=True):
            render_paragraph(paragraph, text, self.elements)
        out = io.BytesIO()
        self.document.save(out)
        return out.getvalue()


def read_docx(name: str, data: bytes) -> WordDocument:
    """A Word document's paragraphs with text, after checking that it is a .docx and no zip bomb."""
    check_zip(name, data)
    # here, not above: python-docx takes a while to load, and most files are text. Its XML parser (docx.oxml.parser,
    # docx.opc.oxml) is lxml's with resolve_entities=False, and lxml loads no DTD and reaches no network by default:
    # neither an external entity (XXE) nor an entity expansion (billion laughs) is read.
    import docx
    from docx.parts.hdrftr import FooterPart, HeaderPart

    try:
        document = docx.Document(io.BytesIO(data))
    except DAMAGED as e:
        raise MtError(f"{name}: damaged Word document ({e})")
    parts = [document.part] + [part for part in document.part.package.iter_parts()
                               if isinstance(part, (HeaderPart, FooterPart))]
    texts, paragraphs, elements = [], [], []
    for part in parts:
        for p in part.element.xpath(".//w:p"):  # in tables and text boxes too
            text, paragraph = read_paragraph(p, elements)
            if text.text.strip():
                texts.append(text)
                paragraphs.append(paragraph)
    return WordDocument(texts, paragraphs, elements, document)


def check_zip(name: str, data: bytes) -> None:
    """A .docx must be a zip with word/document.xml that does not unpack to too much. The sizes are those the zip
    declares: zipfile stops reading a member at its declared size, and python-docx reads through zipfile."""
    try:
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except zipfile.BadZipFile:
        raise MtError(f"{name}: not a Word document (not a zip archive)")
    if "word/document.xml" not in {m.filename for m in members}:
        raise MtError(f"{name}: not a Word document (no word/document.xml in it)")
    unpacked = sum(m.file_size for m in members)
    if unpacked > MAX_UNPACKED:
        raise MtError(f"{name}: unpacks to {unpacked / 1e6:,.0f} MB, over the limit of {MAX_UNPACKED / 1e6:,.0f} MB")
    for m in members:
        if m.file_size > RATIO_FROM and m.file_size > MAX_RATIO * m.compress_size:
            raise MtError(f"{name}: {m.filename} unpacks to {m.file_size // max(m.compress_size, 1):,} times its "
                          f"size (over {MAX_RATIO}): refused as a zip bomb")


def read_paragraph(p: Any, elements: list[Any]) -> tuple[Marked, Paragraph]:
    """A paragraph's text, with a span for each hyperlink (around its runs, so that they stay together) and each
    run; a mark is the element's index in `elements`, which grows."""
    text, spans, items = "", [], []
    for child in p.xpath("./w:r | ./w:hyperlink"):
        link = child.tag == W + "hyperlink"
        runs = child.xpath("./w:r") if link else [child]
        mark = len(elements)  # the hyperlink's, or the run's
        if link:
            spans.append(Span(len(text), len(text) + sum(len(r.text) for r in runs), mark))
            elements.append(child)
        marks = []
        for run in runs:
            spans.append(Span(len(text), len(text) + len(run.text), len(elements), mark if link else None))
            marks.append(len(elements))
            elements.append(run)
            text += run.text
        items.append((mark, marks))
    return Marked(text, spans), Paragraph(p, items)


def render_paragraph(paragraph: Paragraph, translated: Marked, elements: list[Any]) -> None:
    """Each run gets the translation's characters that its span covers, and the runs and hyperlinks are put in
    the order of their spans in the translation, so that the paragraph reads as the translation does."""
    placed = {s.mark: (s.start, s.end) for s in translated.spans}
    items = sorted(paragraph.items, key=lambda item: placed[item[0]])
    reorder(paragraph.element.xpath("./w:r | ./w:hyperlink"), [elements[mark] for mark, _ in items])
    runs = []
    for mark, inner in items:
        inner = sorted(inner, key=placed.__getitem__)
        if elements[mark].tag == W + "hyperlink":
            reorder(elements[mark].xpath("./w:r"), [elements[run] for run in inner])
        runs += inner
    for run, part in zip(runs, cut(translated.text, [placed[run] for run in runs])):
        set_text(elements[run], part)


def cut(text: str, spans: list[tuple[int, int]]) -> list[str]:
    """Each run's part of `text`, for the runs' (start, end) in text order: its span and the characters after it
    that no span covers (before the first span: the first run's too). A point gets nothing, unless every span is a
    point: then the first run gets all."""
    full = [i for i, (start, end) in enumerate(spans) if end > start] or [0]
    bounds = list(accumulate([0] + [spans[i][0] for i in full[1:]] + [len(text)], max))  # an overlap drops no text
    parts = [""] * len(spans)
    for i, start, end in zip(full, bounds, bounds[1:]):
        parts[i] = text[start:end]
    return parts


def reorder(current: list[Any], wanted: list[Any]) -> None:
    """Siblings `current` (in document order) put in the order of `wanted` (the same elements), each into one of
    their places, so that what lies between them (a bookmark, a proofing mark) stays where it was."""
    if current == wanted:
        return
    slots = [element.makeelement("slot", {}) for element in current]
    for element, slot in zip(current, slots):
        element.getparent().replace(element, slot)
    for slot, element in zip(slots, wanted):
        slot.getparent().replace(slot, element)


def set_text(run: Any, text: str) -> None:
    """A run's text replaced; its formatting and what else it holds (a picture, a page break) stay."""
    from docx.oxml import OxmlElement

    old = [e for e in run.xpath(RUN_TEXT) if str(e)]  # a page or column break reads as "" and stays
    at = run.index(old[0]) if old else len(run)
    for e in old:
        run.remove(e)
    new = OxmlElement("w:r")
    new.text = text  # python-docx's mapping: \t → w:tab, \n → w:br
    run[at:at] = list(new)
