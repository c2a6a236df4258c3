"""Files translated whole (.txt, .srt, .docx, .html): the texts read, the file rendered from a fake translation
(upper case, marks where they were), and clear errors for files that cannot be read."""

import io
import zipfile
from datetime import timedelta

import docx
import pytest
import srt
from docx.enum.text import WD_BREAK
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.oxml import OxmlElement
from docx.oxml.ns import qn

from mt.core.errors import MtError
from mt.text.documents import FORMATS, MAX_UNPACKED, read_document
from mt.text.marks import Marked, Span, split_marked

BOM = "\ufeff"


def translate(texts: list[Marked]) -> list[Marked]:
    """What the translator does, with a model that upper-cases: sentences split, translated with their marks
    (upper-casing keeps lengths, so the marks stay on the same characters), joined back."""
    split = split_marked(texts, "en", "de")
    return split.join([Marked(s.text.upper(), s.spans) for s in split.sentences])


def test_text_keeps_bom_crlf_and_blank_lines():
    source = BOM + "First line. Second sentence.\r\n\r\n  Third.\r\nLast"
    document = read_document("notes.TXT", source.encode())
    assert [t.text for t in document.texts] == ["First line. Second sentence.\n\n  Third.\nLast"]
    assert document.render(translate(document.texts)).decode() == source.upper()


def test_text_without_bom_keeps_lf():
    document = read_document("a.txt", b"One.\n\nTwo.\n")
    assert document.render(translate(document.texts)) == b"ONE.\n\nTWO.\n"


SRT = """5
00:00:01,000 --> 00:00:02,500
Hello there.
How are you?

6
00:01:03,250 --> 00:01:04,000
{\\an8}<i>Fine, <b>thanks</b>.</i>

"""


def test_subtitles_keep_cues_numbers_and_times():
    document = read_document("film.srt", SRT.replace("\n", "\r\n").encode())
    assert document.texts == [Marked("Hello there.\nHow are you?"),
                              Marked("Fine, thanks.", [Span(0, 0, 0), Span(0, 13, 1), Span(6, 12, 2, 1)])]
    out = document.render(translate(document.texts)).decode()
    assert "\r\n" in out and "\n" not in out.replace("\r\n", "")
    cues = list(srt.parse(out))
    assert [c.index for c in cues] == [5, 6]
    assert [(c.start, c.end) for c in cues] == [(timedelta(seconds=1), timedelta(seconds=2.5)),
                                                 (timedelta(seconds=63.25), timedelta(seconds=64))]
    assert [c.content for c in cues] == ["HELLO THERE.\nHOW ARE YOU?", "{\\an8}<i>FINE, <b>THANKS</b>.</i>"]


@pytest.mark.parametrize("content", [
    "<I>Unclosed <font color=\"#ff0000\">red", "<i>a <b>b</i> c</b> d", "a </u>b <i></i>c", "x < y <3",
    "<font color=red><b><i></b></font>{\\an8}"])
def test_subtitle_tags_are_written_back_as_they_were(content):
    document = read_document("a.srt", f"1\n00:00:01,000 --> 00:00:02,000\n{content}\n".encode())
    assert "<" not in document.texts[0].text.replace("x < y <3", "")
    assert list(srt.parse(document.render(document.texts).decode()))[0].content == content


def make_docx() -> bytes:
    """Runs with formatting, a page break, an empty paragraph, a table cell, a hyperlink and a header."""
    document = docx.Document()
    p = document.add_paragraph("Plain start, ")
    p.add_run("bold words").bold = True
    p.add_run(" and ")
    p.add_run("italic").italic = True
    p.add_run(". Second sentence.")
    p.add_run().add_break(WD_BREAK.PAGE)
    document.add_paragraph("")
    document.add_table(rows=1, cols=2).cell(0, 1).text = "In a cell."
    p = document.add_paragraph("See ")
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), document.part.relate_to("https://example.com", RT.HYPERLINK, is_external=True))
    run = p.add_run("the site")
    run.bold = True
    link.append(run._r)
    p._p.append(link)
    p.add_run(" now.")
    document.sections[0].header.paragraphs[0].text = "Header line."
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def runs(document: docx.document.Document) -> list[tuple[str, bool | None, bool | None]]:
    return [(r.text, r.bold, r.italic) for p in document.paragraphs for item in p.iter_inner_content()
            for r in (item.runs if hasattr(item, "runs") else [item])]


def test_word_document_keeps_runs_formatting_tables_links_and_headers():
    data = make_docx()
    document = read_document("report.docx", data)
    assert [t.text for t in document.texts] == [
        "Plain start, bold words and italic. Second sentence.", "In a cell.", "See the site now.", "Header line."]
    assert len({s.mark for t in document.texts for s in t.spans}) == sum(len(t.spans) for t in document.texts)
    see, link, site, now = document.texts[2].spans  # the hyperlink's run inside the hyperlink
    assert [(s.start, s.end, s.parent) for s in (see, link, site, now)] == [
        (0, 4, None), (4, 12, None), (4, 12, link.mark), (12, 17, None)]
    source, out = docx.Document(io.BytesIO(data)), docx.Document(io.BytesIO(document.render(translate(document.texts))))
    assert len(out.paragraphs) == len(source.paragraphs)
    assert [p.text for p in out.paragraphs] == [p.text.upper() for p in source.paragraphs]
    assert runs(out) == [(text.upper(), bold, italic) for text, bold, italic in runs(source)]
    assert out.tables[0].cell(0, 1).text == "IN A CELL."
    [link] = out.paragraphs[-1].hyperlinks
    assert (link.text, link.url, link.runs[0].bold) == ("THE SITE", "https://example.com", True)
    assert out.sections[0].header.paragraphs[0].text == "HEADER LINE."
    assert len(out.element.xpath("//w:br[@w:type='page']")) == 1


def test_word_runs_follow_the_translation_order():
    """A run the translation moves moves with its formatting; uncovered characters join the run before them; a
    run placed as a point is emptied."""
    source = docx.Document()
    p = source.add_paragraph("I ")
    p.add_run("like").bold = True
    p.add_run(" apples")
    p.add_run("!").italic = True
    data = io.BytesIO()
    source.save(data)
    document = read_document("a.docx", data.getvalue())
    [text] = document.texts
    assert text == Marked("I like apples!", [Span(0, 2, 0), Span(2, 6, 1), Span(6, 13, 2), Span(13, 14, 3)])
    translated = Marked("I apples like.", [Span(0, 2, 0), Span(9, 13, 1), Span(2, 8, 2), Span(14, 14, 3)])
    out = docx.Document(io.BytesIO(document.render([translated])))
    assert out.paragraphs[0].text == "I apples like."
    assert runs(out) == [("I ", None, None), ("apples ", None, None), ("like.", True, None), ("", None, True)]


def test_html_goes_through_markup():
    pytest.importorskip("mt.text.markup")
    document = read_document("page.html", b"<p>Hello <b>world</b>.</p>")
    assert b"WORLD" in document.render(translate(document.texts))


def zip_of(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return out.getvalue()


def zeros_zip(size: int) -> bytes:
    """A zip whose word/document.xml is `size` zeros: some thousand times smaller packed."""
    out, chunk = io.BytesIO(), bytes(1 << 20)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("word/document.xml", "w") as member:
        for _ in range(size // len(chunk)):
            member.write(chunk)
    return out.getvalue()


@pytest.mark.parametrize("name, data, error", [
    ("report.pdf", b"%PDF", r"report\.pdf: cannot translate \.pdf files; supported: \.txt \(text\), \.html \(HTML\)"),
    ("README", b"hi", r"README: cannot translate files without a suffix; supported: .*\.docx \(Word document\)"),
    ("a.txt", b"ok\nfine\nbad \xff here\n", r"a\.txt:3: invalid UTF-8 \(byte 5\)"),
    ("b.srt", SRT.replace("How", "H\xe9w").encode("latin-1"), r"b\.srt:4: invalid UTF-8 \(byte 2\)"),
    ("c.srt", SRT.replace("00:01:03,250 -->", "00:01:03,250 ->").encode(), r"c\.srt:6: cue 2 is not a number"),
    ("d.docx", b"hello", r"d\.docx: not a Word document \(not a zip archive\)"),
    ("e.docx", zip_of({"hello.txt": b"hi"}), r"e\.docx: not a Word document \(no word/document\.xml in it\)"),
    ("f.docx", zip_of({"word/document.xml": b"<w:document"}), r"f\.docx: damaged Word document"),
])
def test_errors_name_the_file_and_the_problem(name, data, error):
    with pytest.raises(MtError, match=error):
        read_document(name, data)


def test_over_max_bytes_is_refused_before_reading():
    with pytest.raises(MtError, match=r"big\.srt: 1,001 bytes, over the limit of 1,000"):
        read_document("big.srt", b"\xff" * 1001, max_bytes=1000)


def test_zip_bombs_are_refused():
    bomb = zeros_zip(200 << 20)
    assert len(bomb) < 1 << 20
    with pytest.raises(MtError, match=rf"bomb\.docx: unpacks to 210 MB, over the limit of {MAX_UNPACKED // 10**6} MB"):
        read_document("bomb.docx", bomb)
    with pytest.raises(MtError, match=r"small\.docx: word/document\.xml unpacks to [\d,]+ times its size"):
        read_document("small.docx", zeros_zip(8 << 20))


def test_formats_are_the_documented_ones():
    assert set(FORMATS) == {".txt", ".html", ".htm", ".srt", ".docx"}
