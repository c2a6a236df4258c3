"""Glossaries in the server: a request's own (in both APIs, as lines of text or a JSON object) over the server's
(mt serve --glossary), what became of each term in the answer, the cache kept apart per glossary, requests with
other glossaries (or none) decoded together without one's terms reaching another's answer, and bad glossaries
refused in one line."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("starlette")

from conftest import running  # noqa: E402
from test_serve import (Recording, answered, checkpoint, mt_serve, offline, post,  # noqa: E402,F401 (fixtures)
                        translator)
from mt.data.glossary import parse_glossary  # noqa: E402
from mt.data.terms import TermFinder  # noqa: E402
from mt.serve.app import create_app  # noqa: E402
from mt.serve.batcher import BatchingWorker  # noqa: E402
from mt.serve.limits import ServeConfig  # noqa: E402
from mt.text.glossary_modes import GlossaryUse  # noqa: E402

CITY = "我们明天去北京。"
FRIEND = "他是我的朋友。"
GLOSSARIES = {"beijing": "北京\tBeijing", "capital": "北京\tthe capital", "mate": "朋友\tmate"}


def alone(translator, sentence: str, glossary: str | None, soft: bool = False) -> str:
    """What `mt translate --glossary` gives the sentence: the server's answer must be the same."""
    if not glossary:
        return translator.translate([sentence])[0][0].text
    use = GlossaryUse(TermFinder(parse_glossary(glossary, "g"), translator.tokenizer), soft)
    return use.translate(translator, [sentence])[0][0].text


@pytest.fixture(scope="module")
def url(translator):
    with running(create_app(translator, "mt", ServeConfig(batch_wait_ms=20))) as address:
        yield address


@pytest.fixture(scope="module")
def default_url(translator):
    """A server whose own glossary has 北京 → Beijing."""
    served = create_app(translator, "mt", ServeConfig(), glossary=parse_glossary(GLOSSARIES["beijing"], "server.tsv"))
    with running(served) as address:
        yield address


def libre(url: str, q, glossary=None, **fields) -> dict:
    answer = post(url, "/translate", json={"q": q, "source": "zh", "target": "en", "glossary": glossary, **fields})
    assert answer.status_code == 200, answer.text
    return answered(answer)


def test_a_requests_glossary_holds_in_both_apis_and_the_answer_says_what_became_of_each_term(url, translator):
    expected = alone(translator, CITY, GLOSSARIES["beijing"])
    assert "Beijing" in expected
    used = [{"source": "北京", "target": "Beijing", "used": True}]
    assert libre(url, CITY, GLOSSARIES["beijing"]) == {"translatedText": expected, "terms": used}
    assert libre(url, [CITY, "谢谢你。"], {"北京": ["Beijing"]}) == {
        "translatedText": [expected, alone(translator, "谢谢你。", None)], "terms": [used, []]}
    own = post(url, "/api/translate", json={"q": CITY, "glossary": {"北京": "Beijing"}, "nbest": 2}).json()["lines"][0]
    assert own["translation"] == expected and own["terms"] == used
    assert all(t["terms"] == used and "Beijing" in t["text"] for t in own["sentences"][0]["translations"])


def test_without_a_glossary_the_answer_is_as_before(url, offline):
    assert libre(url, CITY) == {"translatedText": offline[CITY]}
    assert libre(url, CITY, "") == {"translatedText": offline[CITY]}  # an empty value is a missing one
    assert "terms" not in post(url, "/api/translate", json={"q": CITY}).json()["lines"][0]


def test_the_cache_keeps_translations_apart_per_glossary(url, translator, offline):
    for _ in range(2):  # the second round from the cache
        assert libre(url, CITY, GLOSSARIES["beijing"])["translatedText"] == alone(translator, CITY,
                                                                                GLOSSARIES["beijing"])
        assert libre(url, CITY, GLOSSARIES["capital"])["translatedText"] == alone(translator, CITY,
                                                                               GLOSSARIES["capital"])
        assert libre(url, CITY)["translatedText"] == offline[CITY]


def test_a_requests_glossary_is_added_to_the_servers_and_wins_where_both_have_a_term(default_url, translator):
    assert libre(default_url, CITY)["terms"] == [{"source": "北京", "target": "Beijing", "used": True}]
    assert libre(default_url, CITY, GLOSSARIES["capital"])["translatedText"] == alone(translator, CITY,
                                                                                   GLOSSARIES["capital"])
    both = libre(default_url, [CITY, FRIEND], GLOSSARIES["mate"])
    assert [[t["target"] for t in terms] for terms in both["terms"]] == [["Beijing"], ["mate"]]
    assert both["translatedText"][1] == alone(translator, FRIEND, GLOSSARIES["mate"])


def test_a_soft_server_writes_each_missed_term_in_as_mt_translate_does(translator):
    with running(create_app(translator, "mt", ServeConfig(), soft=True)) as soft_url:
        answer = libre(soft_url, [CITY, FRIEND], {"北京": "zumu", "朋友": "mate"})
    assert answer["translatedText"] == [alone(translator, CITY, "北京\tzumu", soft=True),
                                        alone(translator, FRIEND, "朋友\tmate", soft=True)]
    assert answer["terms"] == [[{"source": "北京", "target": "zumu", "used": True}],
                               [{"source": "朋友", "target": "mate", "used": True}]]


BAD = [
    ("北京 Beijing", "Invalid request: glossary:1: no tab between the source term and its translation (a line is "
                     "SOURCE<TAB>TARGET[<TAB>TARGET…])"),
    ({"北京": ""}, 'Invalid request: glossary:1: "北京" has an empty translation'),
    ({"北京": "Bei\tjing"}, 'Invalid request: glossary: "Bei\tjing" holds a tab or a line end'),
    ("北京\tЖук", 'Invalid request: glossary:1: the model\'s vocabulary cannot write "Жук" of "Жук"'),
    ({"北京": 3}, "Invalid request: glossary parameter must be a text or an object"),
]


@pytest.mark.parametrize("glossary, error", BAD, ids=[error[26:60] for _, error in BAD])
def test_a_bad_glossary_gets_one_line_in_either_api(url, glossary, error):
    for path, fields in (("/translate", {"source": "zh", "target": "en"}), ("/api/translate", {})):
        answer = post(url, path, json={"q": CITY, "glossary": glossary, **fields})
        assert (answer.status_code, answer.json()) == (400, {"error": error})


def test_requests_with_other_glossaries_are_decoded_together_and_each_gets_its_own_terms(translator):
    recording = Recording(translator, delay=0.3)
    worker = BatchingWorker(recording, wait_ms=5, max_tokens=4000)
    first = worker.submit(["谢谢你。"], translator.decode)
    time.sleep(0.1)  # the worker is busy with the first request while the others come
    asks = [(CITY, name) for name in GLOSSARIES] + [(CITY, None), (FRIEND, "mate"), (FRIEND, None)]

    def submit(ask):
        sentence, name = ask
        terms = TermFinder(parse_glossary(GLOSSARIES[name], name), translator.tokenizer) if name else None
        return worker.submit([sentence], translator.decode, glossary=GlossaryUse(terms) if terms else None)

    with ThreadPoolExecutor(len(asks)) as pool:
        answers = [f.result(timeout=60)[0][0][0] for f in list(pool.map(submit, asks))]
    first.result(timeout=30)
    worker.stop()
    assert len(recording.calls) == 2 and len(recording.calls[1]) == len(asks)  # one search for all of them
    for (sentence, name), answer in zip(asks, answers):
        assert answer.text == alone(translator, sentence, GLOSSARIES.get(name))
        source, target = GLOSSARIES[name].split("\t") if name else ("", "")
        assert [t.target for t in answer.terms] == ([target] if name and source in sentence else [])


def test_under_load_no_answer_is_lost_or_takes_another_requests_terms(url, translator):
    """48 requests from 8 clients at once over loopback, with three glossaries and none."""
    names = [*GLOSSARIES, None]
    expected = {(s, n): alone(translator, s, GLOSSARIES.get(n)) for s in (CITY, FRIEND) for n in names}

    def send(i: int):
        sentence, name = (CITY, FRIEND)[i % 2], names[i % len(names)]
        answer = libre(url, sentence, GLOSSARIES.get(name))
        return answer["translatedText"] == expected[sentence, name]

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(send, range(48)))


def test_libretranslatepy_gets_the_servers_glossary_from_mt_serve(checkpoint, tmp_path, translator):
    from libretranslatepy import LibreTranslateAPI

    (tmp_path / "terms.tsv").write_text("# the city\n" + GLOSSARIES["capital"] + "\n", encoding="utf-8")
    with mt_serve("--checkpoint", str(checkpoint), "--glossary", "terms.tsv", cwd=tmp_path) as (_, url):
        assert LibreTranslateAPI(url).translate(CITY, "zh", "en") == alone(translator, CITY, GLOSSARIES["capital"])
