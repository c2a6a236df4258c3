"""Suggestions (POST /suggest): refused with a reason where they are junk, kept on disk before the answer (a killed
server loses none), an accepted one answering its source at once, and an operator's decisions."""

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("starlette")
import httpx  # noqa: E402

from conftest import running  # noqa: E402
from mt.decode.score import PairScore  # noqa: E402
from mt.serve.app import create_app  # noqa: E402
from mt.serve.limits import ServeConfig  # noqa: E402
from mt.decode.guard import Normal  # noqa: E402
from mt.serve.suggestions import UNRELATED, Judgement, Suggestions, judge, other_language  # noqa: E402
from test_serve import answered, checkpoint, mt_serve, offline, post, translator  # noqa: E402,F401 (fixtures)


@pytest.mark.parametrize("suggestion, reason", [
    ("aaaa aaaa aaaa aaaa", "it repeats itself"),
    ("我爱你们。", "it is not written in the target language's script"),
    ("Je ne sais pas ce que tu veux dire.", "it is in another language (fr)"),
    ("", "it is far shorter than translations of the source are"),
])
def test_junk_is_refused_with_its_reason(translator, suggestion, reason):
    english = dataclasses.replace(translator, normal=Normal(scripts=("LATIN",)))  # as `mt confidence` fits it
    assert judge(english, "我不知道你是什么意思。", suggestion) == Judgement(False, reason)


def test_a_short_suggestion_is_not_put_to_the_language_identifier(translator):
    assert other_language("OK.", "en") == "sr"  # py3langid's guess on two letters
    english = dataclasses.replace(translator, normal=Normal(scripts=("LATIN",)))
    assert judge(Scoring(english, -1.0, -3.0), "好的。", "OK.").accepted


class Scoring:
    """The translator, with the model's scores of a suggestion given its source and given nothing set by hand."""

    def __init__(self, translator, given: float, alone: float):
        self.inner, self.means = translator, (given, alone)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def score(self, sources, targets):
        return [PairScore(mean, 1) for mean in self.means]


@pytest.mark.parametrize("gain, accepted", [(UNRELATED + 0.5, True), (UNRELATED, False), (-1.0, False)])
def test_a_suggestion_the_source_makes_no_likelier_is_unrelated(translator, gain, accepted):
    found = judge(Scoring(translator, -2.0 + gain, -2.0), "我不知道你是什么意思。", "I don't know what you mean.")
    assert found.accepted is accepted
    assert found.reason.startswith(f"{gain:.2f} nats a token likelier" if accepted else "the model finds it unrelated")


def test_the_store_keeps_each_suggestion_and_the_latest_accepted_one_per_source(tmp_path):
    store = Suggestions(tmp_path / "s.sqlite")
    first = store.add("我爱你。", "I love you.", ("zh", "en"), Judgement(True, "ok"))
    store.add("我爱你。", "aaaa", ("zh", "en"), Judgement(False, "it repeats itself"))
    assert store.memory == {"我爱你。": "I love you."}
    assert [row["status"] for row in store.listed()] == ["refused", "accepted"]  # newest first
    assert store.decide(first, "refused", "wrong")["status"] == "refused" and store.memory == {}
    assert store.decide(first + 1, "accepted", "fine")["reason"] == "fine" and store.memory == {"我爱你。": "aaaa"}
    assert store.decide(99, "accepted", "") is None
    store.close()
    assert Suggestions(tmp_path / "s.sqlite").memory == {"我爱你。": "aaaa"}  # read again at start
    (tmp_path / "bad.sqlite").write_text("not a database", encoding="utf-8")
    with pytest.raises(Exception, match="bad.sqlite: not a suggestions database"):
        Suggestions(tmp_path / "bad.sqlite")


def test_a_suggestion_is_on_disk_when_add_returns_though_the_process_is_killed(tmp_path):
    child = f"""
import os, signal
from mt.serve.suggestions import Judgement, Suggestions
store = Suggestions({str(tmp_path / 's.sqlite')!r})
for n in range(50):
    store.add(f"句子{{n}}。", f"Sentence {{n}}.", ("zh", "en"), Judgement(n % 2 == 0, "judged"))
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    rows = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT source, status FROM suggestions").fetchall()
    assert len(rows) == 50 and rows[1] == ("句子1。", "refused")


def test_suggest_is_refused_as_libretranslate_refuses_it_where_the_server_takes_none(translator):
    with running(create_app(translator, "mt", ServeConfig())) as url:
        refused = post(url, "/suggest", json={"q": "我爱你", "s": "I love you", "source": "zh", "target": "en"})
        assert refused.status_code == 403 and refused.json() == {"error": "Suggestions are disabled on this server."}
        assert httpx.get(url + "/frontend/settings").json()["suggestions"] is False


def test_an_accepted_suggestion_answers_its_source_at_once_and_an_operator_decides(translator, tmp_path):
    app = create_app(translator, "mt", ServeConfig(), frozenset({"op"}), suggestions=tmp_path / "s.sqlite")
    with running(app) as url:
        assert httpx.get(url + "/frontend/settings").json()["suggestions"] is True
        base = {"source": "zh", "target": "en", "api_key": "op"}
        junk = post(url, "/suggest", data={**base, "q": "我爱你。", "s": "aaaa aaaa aaaa aaaa"}).json()
        assert junk == {"success": True, "accepted": False, "reason": "it repeats itself"}
        two = post(url, "/suggest", json={**base, "q": "我爱你。他走了。", "s": "I love you. He left."}).json()
        assert two["accepted"] is False and "not one sentence" in two["reason"]
        listed = httpx.get(url + "/api/suggestions", params={"api_key": "op"}).json()["suggestions"]
        assert [row["suggestion"] for row in listed] == ["I love you. He left.", "aaaa aaaa aaaa aaaa"]
        assert httpx.get(url + "/api/suggestions").status_code == 403  # an operator's key is needed
        number = listed[1]["id"]
        decided = post(url, f"/api/suggestions/{number}", json={"status": "accepted", "api_key": "op"}).json()
        assert decided["status"] == "accepted" and decided["reason"] == "accepted by an operator"
        # the accepted suggestion answers its source at once: the whole text, a paragraph's sentence, every API
        translated = answered(post(url, "/translate", json={**base, "q": ["我爱你。", "我爱你。我爱你。"]}))
        assert translated["translatedText"] == ["aaaa aaaa aaaa aaaa", "aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa"]
        line = post(url, "/api/translate", json={"q": "我爱你。", "api_key": "op"}).json()["lines"][0]
        assert line["translation"] == "aaaa aaaa aaaa aaaa" and line["confidence"] == 1.0
        post(url, f"/api/suggestions/{number}", json={"status": "refused", "api_key": "op"})
        again = answered(post(url, "/translate", json={**base, "q": "我爱你。"}))["translatedText"]
        assert again == translator.translate_lines(["我爱你。"])[0]
        assert post(url, "/api/suggestions/999", json={"status": "refused", "api_key": "op"}).status_code == 404


def test_a_killed_server_keeps_every_suggestion_it_answered(checkpoint, tmp_path):
    with mt_serve("--checkpoint", str(checkpoint), "--suggestions", "s.sqlite", cwd=tmp_path) as (process, url):
        answers = [post(url, "/suggest", json={"q": f"我有{n}本书。", "s": f"I have {n} books.", "source": "zh",
                                                 "target": "en"}) for n in range(10)]
        assert all(answer.status_code == 200 and answer.json()["success"] for answer in answers)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    rows = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT suggestion, reason FROM suggestions").fetchall()
    assert [suggestion for suggestion, _ in rows] == [f"I have {n} books." for n in range(10)]
    assert all(reason for _, reason in rows)


def test_suggestions_interleaved_with_translations_lose_nothing_and_mix_nothing(checkpoint, offline, tmp_path):
    """4 clients at once, each sending 6 translations and 6 suggestions in turn to a real `mt serve`, killed at the
    end: every translation is its own sentence's, and every suggestion answered is on disk."""
    sentences = list(offline)

    def client(n: int) -> list[tuple[str, str]]:
        done = []
        for k in range(6):
            sentence = sentences[(n + k) % len(sentences)]
            answer = post(url, "/translate", json={"q": sentence, "source": "zh", "target": "en"})
            done.append((offline[sentence], answered(answer)["translatedText"]))
            source = f"我有{10 * n + k}本书。"  # no sentence that is translated: no suggestion answers one
            suggested = post(url, "/suggest", json={"q": source, "s": f"I have {10 * n + k} books.", "source": "zh",
                                                    "target": "en"})
            done.append((source, source if suggested.json()["success"] else ""))
        return done

    with mt_serve("--checkpoint", str(checkpoint), "--suggestions", "s.sqlite", cwd=tmp_path) as (process, url):
        with ThreadPoolExecutor(4) as pool:
            results = [pair for found in pool.map(client, range(4)) for pair in found]
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert all(expected == got for expected, got in results)
    stored = {row[0] for row in sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT source FROM suggestions")}
    assert stored == {f"我有{10 * n + k}本书。" for n in range(4) for k in range(6)}


def test_the_suggestion_fields_are_listed_for_the_docs():
    from mt.serve.requests import request_fields

    fields = request_fields()
    assert [f["name"] for f in fields["POST /suggest"]] == ["q", "s", "source", "target", "api_key"]
    assert [f["name"] for f in fields["POST /api/suggestions/{id}"]] == ["status", "reason", "api_key"]


def test_the_page_takes_a_suggestion_and_says_what_became_of_it(translator, tmp_path):
    from test_serve import browsing

    with running(create_app(translator, "mt", ServeConfig(), suggestions=tmp_path / "s.sqlite")) as url, \
            browsing(url) as page:
        page.wait_for_selector("#formats:not(:empty)")  # /frontend/settings read: the server takes suggestions
        page.fill("#text", "我爱你。")
        page.click("#go")
        page.wait_for_selector(".line .suggest input")
        assert page.input_value(".line .suggest input") == translator.translate_lines(["我爱你。"])[0]
        page.fill(".line .suggest input", "aaaa aaaa aaaa aaaa")
        page.click(".line .suggest button")
        page.wait_for_selector(".line .suggest .verdict.refused")
        assert page.inner_text(".line .suggest .verdict") == "refused: it repeats itself"
    rows = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT source, suggestion, status FROM suggestions")
    assert rows.fetchall() == [("我爱你。", "aaaa aaaa aaaa aaaa", "refused")]

