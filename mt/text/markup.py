"""HTML in, HTML out: the text of each block (a paragraph, a heading, a list item, a cell, …) is translated as one
text, with its inline elements (<b>, <a href>, <span>, …) as marks that go to the words they were on; everything
else is kept exactly as it was written: tags with their attributes, comments, entities between blocks, and the
contents of <script>, <style>, <pre>, <textarea>, of <code>-like inline elements, and of any element marked
translate="no" or class="notranslate".

Python's own HTML parser (html.parser, the standard library's tokenizer, as lenient as browsers) finds the tags;
each one is kept as its original characters, so the output is well-formed whenever the input was.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from html.parser import HTMLParser

from mt.core.errors import MtError
from mt.text.marks import Marked, Span

INLINE = {"a", "abbr", "b", "bdi", "bdo", "cite", "data", "del", "dfn", "em", "font", "i", "ins", "label", "mark",
          "q", "ruby", "rt", "rp", "s", "small", "span", "strong", "sub", "sup", "time", "u", "img", "wbr",
          "code", "kbd", "samp", "var", "tt"}
VERBATIM_INLINE = {"code", "kbd", "samp", "var", "tt"}  # translated around, their own text kept
VERBATIM = {"script", "style", "pre", "textarea", "template", "svg", "math", "noscript"}  # kept whole
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
MAX_DEPTH = 1000  # elements open at once; deeper input is refused rather than walked


@dataclass
class Event:
    kind: str            # "start", "end", "text", "other" (comments, declarations, processing instructions)
    raw: str             # its characters in the input
    tag: str = ""
    text: str = ""       # a text event's characters, entities replaced
    partner: int = -1    # a start's end event, an end's start event (-1: none)
    verbatim: bool = False


class _Tokenizer(HTMLParser):
    """The input as events, each with its exact characters (the span up to the next event)."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=False)
        self.source, self.found = source, []
        self.line_starts = [0] + [i + 1 for i, c in enumerate(source) if c == "\n"]

    def _add(self, kind: str, **fields) -> None:
        line, column = self.getpos()
        self.found.append((self.line_starts[line - 1] + column, kind, fields))

    def handle_starttag(self, tag, attrs):
        self._add("start", tag=tag, verbatim=_verbatim(tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self._add("other", tag=tag)

    def handle_endtag(self, tag):
        self._add("end", tag=tag)

    def handle_data(self, data):
        self._add("text", text=data)

    def handle_entityref(self, name):
        self._add("text", text=html.unescape(f"&{name};"))

    def handle_charref(self, name):
        self._add("text", text=html.unescape(f"&#{name};"))

    def handle_comment(self, data):
        self._add("other")

    handle_decl = handle_pi = unknown_decl = handle_comment


def _verbatim(tag: str, attrs) -> bool:
    attrs = dict(attrs)
    return (tag in VERBATIM or tag in VERBATIM_INLINE or attrs.get("translate") == "no"
            or "notranslate" in (attrs.get("class") or "").split())


def events(source: str) -> list[Event]:
    """The input's events, start and end tags paired (an end tag closes the innermost open element of its name)."""
    parser = _Tokenizer(source)
    parser.feed(source)
    parser.close()
    starts = [at for at, _, _ in parser.found] + [len(source)]
    found = [Event(kind, source[a:b], **fields) for (a, kind, fields), b in zip(parser.found, starts[1:])]
    open_: list[int] = []
    for i, e in enumerate(found):
        if e.kind == "start" and e.tag not in VOID:
            open_.append(i)
            if len(open_) > MAX_DEPTH:
                raise MtError(f"HTML nested more than {MAX_DEPTH} elements deep")
        elif e.kind == "start":
            e.kind = "other"
        elif e.kind == "end" and any(found[j].tag == e.tag for j in open_):
            while found[open_[-1]].tag != e.tag:  # elements left open inside it end here, without an end tag
                open_.pop()
            j = open_.pop()
            found[j].partner, e.partner = i, j
    return found


@dataclass
class Tag:
    """A mark's characters in the input: its start tag, its end tag ("" for none), and for a verbatim element its
    contents as written and the words the model read of them."""

    open: str
    close: str = ""
    contents: str | None = None
    words: str = ""


@dataclass
class HtmlDocument:
    """An HTML input as kept parts and blocks of text to translate: `texts`, in document order."""

    parts: list[str | int] = field(default_factory=list)  # kept characters, or the number of a text
    texts: list[Marked] = field(default_factory=list)
    tags: list[list[Tag]] = field(default_factory=list)  # per text, per mark

    def render(self, translated: list[Marked]) -> str:
        """The document with each text replaced by its translation (same count and order), marks placed."""
        return "".join(part if isinstance(part, str) else _render(translated[part], self.tags[part])
                       for part in self.parts)


def read_html(source: str) -> HtmlDocument:
    """The document's blocks of text with their inline elements as marks."""
    found = events(source)
    blocks_before = [0]  # how many block starts come before each event
    for e in found:
        blocks_before.append(blocks_before[-1] + (e.kind == "start" and e.tag not in INLINE))
    document = HtmlDocument()
    block: list[int] = []  # the events of the block being gathered
    i = 0
    while i < len(found):
        e = found[i]
        holds_block = e.kind == "start" and blocks_before[e.partner if e.partner > i else len(found)] > blocks_before[i + 1]
        if e.kind == "start" and (e.tag not in INLINE or holds_block):  # a block's start: the text so far is one
            end = e.partner if e.verbatim and e.partner > i else i  # a verbatim block: kept whole
            _flush(document, found, block)
            document.parts.append("".join(x.raw for x in found[i:end + 1]))
            i = end + 1
            continue
        if e.kind == "other" and e.tag and e.tag not in INLINE or e.kind == "end" and (
                e.partner < 0 or not block or e.partner < block[0]):  # <br>, <hr>, a block's end, a stray end tag
            _flush(document, found, block)
            document.parts.append(e.raw)
        else:
            block.append(i)
        i += 1
    _flush(document, found, block)
    return document


def _flush(document: HtmlDocument, found: list[Event], block: list[int]) -> None:
    """The gathered events as one text with marks, or kept as they are when they hold no words."""
    if not block:
        return
    if not any(found[i].kind == "text" and found[i].text.strip() for i in block):
        document.parts.append("".join(found[i].raw for i in block))
        block.clear()
        return
    text: list[str] = []
    spans: list[Span] = []  # one per mark, in document order (outer first)
    marks: list[Tag] = []
    open_: dict[int, tuple[int, int]] = {}  # start event → (mark, where its text starts), innermost last
    length, verbatim_until = 0, -1
    for i in block:
        e = found[i]
        if e.kind == "text":  # inside a verbatim inline element too: the model reads its words
            text.append(e.text)
            length += len(e.text)
        elif i < verbatim_until:  # a tag inside a verbatim inline element: kept in its contents
            continue
        elif e.kind == "start":
            verbatim = e.verbatim and e.partner > i
            parent = _innermost(open_)
            open_[i] = (len(marks), length)
            spans.append(Span(length, length, len(marks), parent))
            inside = found[i + 1:e.partner] if verbatim else []
            marks.append(Tag(e.raw, found[e.partner].raw if e.partner >= 0 else "",
                             "".join(x.raw for x in inside) if verbatim else None,
                             "".join(x.text for x in inside if x.kind == "text")))
            verbatim_until = e.partner if verbatim else verbatim_until
        elif e.kind == "end" and e.partner in open_:
            while open_:  # it ends with the elements left open inside it
                start_event, (mark, start) = open_.popitem()
                spans[mark] = Span(start, length, mark, spans[mark].parent)
                if start_event == e.partner:
                    break
        else:  # a comment, an image, a stray end tag: a point
            spans.append(Span(length, length, len(marks), _innermost(open_)))
            marks.append(Tag(e.raw))
    for mark, start in open_.values():  # open at the block's end (no end tag in it)
        spans[mark] = Span(start, length, mark, spans[mark].parent)
    document.parts.append(len(document.texts))
    document.texts.append(Marked("".join(text), spans))
    document.tags.append(marks)
    block.clear()


def _innermost(open_: dict[int, tuple[int, int]]) -> int | None:
    """The mark of the innermost element open."""
    return next(reversed(open_.values()))[0] if open_ else None


def _render(text: Marked, tags: list[Tag]) -> str:
    """A translated text with its marks' tags around the words they were placed on (spans nest; siblings do not
    overlap: mt/text/marks.py's nest), without recursion, so that deep nesting costs no stack. A verbatim element
    replaces the words placed in it when they are its own words copied; else it goes before them, and they stay."""
    children: dict[int | None, list[Span]] = {}
    for span in text.spans:
        children.setdefault(span.parent, []).append(span)
    for spans in children.values():
        spans.sort(key=lambda s: (s.start, s.end, s.mark))
    out, position = [], 0
    stack = [(None, iter(children.get(None, [])), len(text.text))]
    while stack:
        mark, siblings, end = stack[-1]
        child = next(siblings, None)
        if child is None:
            out.append(_escape(text.text[position:max(end, position)]))
            position = max(end, position)
            out.append(tags[mark].close if mark is not None else "")
            stack.pop()
            continue
        out.append(_escape(text.text[position:child.start]))
        position = max(position, child.start)
        tag = tags[child.mark]
        out.append(tag.open)
        if tag.contents is not None:
            out += [tag.contents, tag.close]
            if _same_words(text.text[child.start:child.end], tag.words):
                position = max(position, child.end)
            continue
        stack.append((child.mark, iter(children.get(child.mark, [])), child.end))
    return "".join(out)


def _same_words(a: str, b: str) -> bool:
    return "".join(a.split()).lower() == "".join(b.split()).lower()


def _escape(text: str) -> str:
    return html.escape(text, quote=False).replace("\xa0", "&nbsp;")
