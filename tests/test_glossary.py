"""The glossary file and its terms: reading, one-line errors, where a term stands in a sentence, the target ids the
search writes for it, and the report of which terms an output holds."""

import opencc
import pytest

from mt.core.errors import MtError
from mt.data.glossary import Entry, parse_glossary, read_glossary
from mt.data.terms import MAX_SENTENCE_TERMS, TermFinder, TermUse
from mt.data.tokenizer import Tokenizer


def finder(tokenizer, text: str) -> TermFinder:
    return TermFinder(parse_glossary(text, "g.tsv"), tokenizer)


def found(terms: TermFinder, sentence: str) -> list[str]:
    """The matched stretches of a sentence, in order."""
    return [sentence[m.start:m.end] for m in terms.find(sentence)]


def test_a_glossary_reads_terms_alternatives_comments_and_blank_lines(tmp_path):
    path = tmp_path / "g.tsv"
    path.write_bytes("\ufeff# product names\r\n Acme \t ACME Corp \r\n\n  # indented comment\n汤姆\tTom\tThomas\t\n"
                     "Acme\tACME Corp\n".encode("utf-8"))
    glossary = read_glossary(path)
    assert glossary.name == str(path)
    assert glossary.entries == (Entry("Acme", ("ACME Corp",), 2), Entry("汤姆", ("Tom", "Thomas"), 5))
    assert parse_glossary("Acme\tACME Corp", "request").entries == (Entry("Acme", ("ACME Corp",), 1),)


BAD = [  # (file bytes, the error after the file's name)
    (b"Acme\tACME\n\xff\n", ":2: invalid UTF-8 (byte 1)"),
    ("Acme\tACME\n".encode("utf-16"), ": UTF-16 text; save the glossary as UTF-8"),
    (b"# names\nAcme ACME\n", ":2: no tab between the source term and its translation (a line is "
                              "SOURCE<TAB>TARGET[<TAB>TARGET…])"),
    (b" \tACME\n", ":1: the source term is empty"),
    (b"Acme\t \t\n", ':1: "Acme" has an empty translation'),
    (("Acme\t" + "x" * 312).encode(), ':1: "' + "x" * 40 + '…" has 312 characters; a term has at most 200'),
    (b"Acme\tACME\n.\tdot\n", ':2: the source term "." has no letter or digit'),
    (b"Acme\tACME\nx\ty\nAcme\tAcme Inc.\n", ':3: "Acme" is on line 1 with another translation; give its '
                                            'translations on one line, tab-separated'),
    ("".join(f"t{i}\tx\n" for i in range(10_001)).encode(), ": 10,001 terms; a glossary has at most 10,000"),
    (b"# only a comment\n\n", ": no terms (a line is SOURCE<TAB>TARGET; # starts a comment)"),
]


@pytest.mark.parametrize("data, error", BAD, ids=[e.split(" ", 1)[1][:30] for _, e in BAD])
def test_each_bad_glossary_gets_one_line_naming_the_file_and_line(tmp_path, data, error):
    path = tmp_path / "g.tsv"
    path.write_bytes(data)
    with pytest.raises(MtError) as raised:
        read_glossary(path)
    assert str(raised.value) == f"{path}{error}" and "\n" not in str(raised.value)
    assert raised.value.exit_code == 2


def test_a_missing_glossary_is_named(tmp_path):
    with pytest.raises(MtError, match=r"nothere\.tsv: no such file$"):
        read_glossary(tmp_path / "nothere.tsv")


def test_english_terms_match_as_words(tokenizer):
    terms = finder(tokenizer, "acme\tACME\ncat\tchat\nAcme Corp\tACME\n")
    assert found(terms, "Acme's price (acme) is acme-based.") == ["Acme", "acme", "acme"]
    assert found(terms, "Acmes concatenate cats; an ACME cat.") == ["cat"]
    assert found(finder(tokenizer, "Acme\tACME\n"), "acme and Acme") == ["Acme"]  # a capital stays one


def test_chinese_terms_match_whole_pieces_in_either_script(tokenizer):
    sentence = "我喜欢你。"  # a Tatoeba sentence; the tokenizer writes its start as one piece
    assert "我喜欢" in [p.surface for p in tokenizer.src.encode(sentence, return_type="proto").pieces]
    assert found(finder(tokenizer, "我喜欢\tI like\n"), sentence) == ["我喜欢"]
    assert found(finder(tokenizer, "喜欢\tlike\n"), sentence) == []  # inside the piece
    assert found(finder(tokenizer, "我喜歡\tI like\n"), sentence) == ["我喜欢"]  # a Traditional entry
    with pytest.raises(MtError, match=r'^g\.tsv:2: "我喜欢" and "我喜歡" on line 1 are one term \(Chinese is '):
        finder(tokenizer, "我喜歡\tI like\n我喜欢\tI love\n")

    traditional = opencc.OpenCC("s2t").convert(sentence)
    assert traditional != sentence
    converting = Tokenizer(tokenizer.src_proto, None, ("simplified", "keep"))  # a model that reads Simplified
    assert found(finder(converting, "我喜欢\tI like\n"), traditional) == [traditional[:3]]


def test_the_longest_term_wins_and_matches_do_not_overlap(tokenizer):
    terms = finder(tokenizer, "New York\tNY\nNew York Times\tNYT\nTimes\tT\nYork\tY\n")
    assert found(terms, "The New York Times of New York, and Times.") == ["New York Times", "New York", "Times"]


def test_a_target_the_vocabulary_cannot_write_is_refused(tokenizer):
    with pytest.raises(MtError, match=r'^g\.tsv:2: the model\'s vocabulary cannot write "Жук" of "Жук"$'):
        finder(tokenizer, "Acme\tACME\nbeetle\tЖук\n")
    with pytest.raises(MtError, match=r'^g\.tsv:1: "qz qz.*" is \d+ pieces for this model; a term has at most 32$'):
        finder(tokenizer, "Acme\t" + " ".join(["qz"] * 20) + "\n")


def test_target_forms_are_words_or_written_on_without_a_space(tokenizer):
    terms = finder(tokenizer, "Tom\t汤姆\nAcme\tACME\tAcme Corp\n")
    [tom], acme = terms.forms(terms.find("Tom and Acme"))
    assert tokenizer.decode_tgt([tom]) == ["汤姆"] and not tokenizer.tgt.id_to_piece(tom[0]).startswith("▁")
    assert tokenizer.encode_tgt(["汤姆"])[0][1:-1] != tom  # alone, the model writes "▁汤姆"
    assert acme == [tokenizer.encode_tgt([t])[0][1:-1] for t in ("ACME", "Acme Corp")]


def test_the_report_gives_a_target_as_the_output_writes_it(tokenizer):
    terms = finder(tokenizer, "猫\tcat\n狗\tquiz\n")
    assert terms.report(terms.find("猫和狗"), "Cat and quiz.") == [TermUse("猫", "Cat", True),
                                                                   TermUse("狗", "quiz", True)]


def test_the_report_reads_each_occurrence_from_the_output(tokenizer):
    terms = finder(tokenizer, "Tom\t汤姆\nAcme\tACME\tAcme Corp\n")
    matches = terms.find("Tom, Acme and Tom")
    assert terms.report(matches, "我喜欢汤姆和Acme Corp") == [
        TermUse("Tom", "汤姆", True), TermUse("Acme", "Acme Corp", True), TermUse("Tom", "汤姆", False)]
    assert terms.report(terms.find("Acme"), "ACMEs") == [TermUse("Acme", "ACME", False)]


def test_only_the_first_terms_of_a_sentence_constrain_it(tokenizer):
    terms = finder(tokenizer, "Tom\t汤姆\n")
    matches = terms.find(" ".join(["Tom"] * (MAX_SENTENCE_TERMS + 2)))
    assert len(matches) == MAX_SENTENCE_TERMS + 2 and len(terms.forms(matches)) == MAX_SENTENCE_TERMS
