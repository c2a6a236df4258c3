"""`mt serve`: LibreTranslate's API as its own client speaks it, real text (paragraphs, HTML, files) in and the
same shape out, mt's API, batching across requests, the cache, limits and abuse, the page in a real browser, and a
graceful stop. Servers listen on 127.0.0.1 only."""

import copy
import html
import io
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import zipfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

pytest.importorskip("starlette")
import httpx  # noqa: E402

from mt.serve.batcher import BatchingWorker, Busy  # noqa: E402
from mt.exchange.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from mt.serve.limits import ServeConfig  # noqa: E402
from mt.core.errors import MtError  # noqa: E402
from mt.serve.app import create_app  # noqa: E402
from mt.serve.errors import ApiError  # noqa: E402
from mt.serve.requests import Bounds, LibreTranslateRequest, TranslateRequest, parse, request_fields  # noqa: E402
from mt.decode.translator import load_translator  # noqa: E402
from mt.text.documents import FORMATS  # noqa: E402
from mt.text.marks import Marked  # noqa: E402
from mt.text.texts import split_for  # noqa: E402
from conftest import running  # noqa: E402

SENTENCES = ["我爱你", "你好。", "我们明天去北京。", "他是我的朋友。", "这本书很有意思。", "谢谢你。"]


@pytest.fixture(scope="module")
def checkpoint(trained_runs, tmp_path_factory) -> Path:
    """The trained tiny run's checkpoint, set to output at least 3 tokens: its 8 updates taught it to end at once,
    and empty translations would make equal answers prove little."""
    checkpoint = load_checkpoint(trained_runs[0] / "checkpoints" / "last.pt")
    checkpoint.config["decode"]["min_len"] = 3
    path = tmp_path_factory.mktemp("serve") / "talkative.pt"
    save_checkpoint(checkpoint, path)
    return path


@pytest.fixture(scope="module")
def translator(checkpoint):
    return load_translator(checkpoint, "cpu")


@pytest.fixture(scope="module")
def offline(translator) -> dict[str, str]:
    """Each test sentence's translation by the same model, without a server (the checkpoint's beam 4)."""
    translations = dict(zip(SENTENCES, translator.translate_lines(SENTENCES)))
    assert all(translations.values())
    return translations


@pytest.fixture(scope="module")
def url(translator):
    with running(create_app(translator, "mt", ServeConfig(char_limit=200, batch_limit=8, body_limit=20_000,
                                                          body_timeout=1.0))) as address:
        yield address


def post(url: str, path: str, **kwargs) -> httpx.Response:
    return httpx.post(url + path, timeout=30, **kwargs)


def answered(response: httpx.Response) -> dict:
    """A /translate answer without mt's own fields "confidence" and "failure", after checking that it gives a
    confidence in [0, 1] per translated text, and a failure (a reason or null) per text where one failed."""
    answer = response.json()
    confidence, failure, texts = answer.pop("confidence"), answer.pop("failure", None), answer["translatedText"]
    many = isinstance(texts, list)
    confidences, failures = (confidence, failure or [None] * len(texts)) if many else ([confidence], [failure])
    assert len(confidences) == len(failures) == (len(texts) if many else 1)
    assert all(0 <= c <= 1 for c in confidences), confidence
    assert all(f in (None, "copy", "loop", "cut", "short", "long", "script") for f in failures), failure
    return answer


def raw_request(text: str) -> tuple[bytes, bytes]:
    """A LibreTranslate request to translate `text`, as bytes on the wire: (its head, its JSON body)."""
    body = json.dumps({"q": text, "source": "zh", "target": "en"}).encode()
    return (b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % len(body)), body


def answer_until_closed(connection: socket.socket) -> str:
    """What the server sends on a raw connection until it closes it."""
    connection.settimeout(30)
    answer = b""
    while chunk := connection.recv(10_000):
        answer += chunk
    return answer.decode()


def serve_config(**values) -> ServeConfig:
    return ServeConfig(**values)


# ---------------------------------------------------------------- LibreTranslate's API


def test_translate_answers_as_libretranslate_does(url, offline):
    one = post(url, "/translate", json={"q": "我爱你", "source": "zh", "target": "en"})
    assert one.status_code == 200 and answered(one) == {"translatedText": offline["我爱你"]}
    many = post(url, "/translate", json={"q": SENTENCES[:3], "source": "auto", "target": "en", "alternatives": 2})
    answer = answered(many)
    assert answer["translatedText"] == [offline[s] for s in SENTENCES[:3]]
    assert answer["detectedLanguage"] == [{"confidence": 100.0, "language": "zh"}] * 3
    assert len(answer["alternatives"]) == 3 and all(isinstance(a, list) and len(a) <= 2 for a in answer["alternatives"])
    assert all(offline[s] not in alternatives for s, alternatives in zip(SENTENCES, answer["alternatives"]))
    form = post(url, "/translate", data={"q": "我爱你\r\n你好。", "source": "zh-Hant", "target": "en"})
    assert answered(form) == {"translatedText": f"{offline['我爱你']}\n{offline['你好。']}"}  # a line each
    multipart = post(url, "/translate", files={"q": (None, "你好。"), "source": (None, "zh"), "target": (None, "en")})
    assert answered(multipart) == {"translatedText": offline["你好。"]}


def test_languages_settings_and_health(url):
    assert httpx.get(url + "/languages").json() == [{"code": "zh", "name": "Chinese", "targets": ["en"]},
                                                    {"code": "en", "name": "English", "targets": []}]
    settings = httpx.get(url + "/frontend/settings").json()
    assert settings["charLimit"] == 200 and settings["keyRequired"] is False
    assert settings["filesTranslation"] is True and settings["supportedFilesFormat"] == list(FORMATS)
    assert settings["supportedFilesFormat"][:3] == [".txt", ".html", ".htm"]  # as LibreTranslate lists them
    assert settings["language"] == {"source": {"code": "zh", "name": "Chinese"},
                                    "target": {"code": "en", "name": "English"}}
    assert httpx.get(url + "/health").json() == {"status": "ok"}


@pytest.mark.parametrize("body, status, message", [
    ({"source": "zh", "target": "en"}, 400, "missing q parameter"),
    ({"q": "", "source": "zh", "target": "en"}, 400, "missing q parameter"),
    ({"q": "你好", "target": "en"}, 400, "missing source parameter"),
    ({"q": "你好", "source": "zh"}, 400, "missing target parameter"),
    ({"q": "你好", "source": "fr", "target": "en"}, 400, "fr is not supported"),
    ({"q": "你好", "source": "zh", "target": "de"}, 400, "de is not supported"),
    ({"q": "你好", "source": "zh", "target": "en", "format": "xml"}, 400, "xml format is not supported (supported: "
                                                                         "text, html)"),
    ({"q": 7, "source": "zh", "target": "en"}, 400, "q parameter must be a text or a list of texts"),
    ({"q": ["你好", 3], "source": "zh", "target": "en"}, 400, "q parameter must be a text or a list of texts"),
    ({"q": "你" * 201, "source": "zh", "target": "en"}, 400, "request (201) exceeds text limit (200)"),
    ({"q": ["你好"] * 9, "source": "zh", "target": "en"}, 400, "request (9) exceeds text limit (8)"),
    ({"q": "你" * 100_000, "source": "zh", "target": "en"}, 413, "over the limit of 20,000 bytes"),
    ({"q": "你好", "source": "zh", "target": "en", "alternatives": "many"}, 400, "alternatives parameter"),
])
def test_bad_requests_get_libretranslates_errors(url, body, status, message):
    answer = post(url, "/translate", json=body)
    assert answer.status_code == status and message in answer.json()["error"]


@pytest.mark.parametrize("content, kind, message", [
    (b'{"q": "hello', "application/json", "Invalid JSON format"),
    (b'{"q": "\xe4\xbd"}', "application/json", "not valid UTF-8"),
    (b'["q"]', "application/json", "Invalid JSON format"),
    (b"q=%ff%fe&source=zh&target=en", "application/x-www-form-urlencoded", "not valid UTF-8"),
    (b"q=hello", "text/plain", "send JSON or a form"),
])
def test_bodies_that_are_not_json_or_a_form_are_refused(url, content, kind, message):
    answer = post(url, "/translate", content=content, headers={"Content-Type": kind})
    assert answer.status_code == 400 and message in answer.json()["error"]


def test_no_path_outside_the_page_can_be_read(url):
    for path in ("/../mt/serve/app.py", "/web/index.html", "/%2e%2e/pyproject.toml", "/static/../../etc/passwd", "/mt"):
        answer = httpx.get(url + path)
        assert answer.status_code == 404 and "error" in answer.json(), path
    assert httpx.get(url + "/").text.startswith("<!doctype html>")
    assert httpx.get(url + "/translate").status_code == 405


# ---------------------------------------------------------------- real text: paragraphs, HTML, files


def test_a_paragraph_is_split_into_sentences_and_rejoined(url, offline, translator):
    paragraph = "我们明天去北京。他是我的朋友。"
    joined = f"{offline['我们明天去北京。']} {offline['他是我的朋友。']}"  # English joins sentences with a space
    answer = post(url, "/translate", json={"q": [paragraph, "谢谢你。"], "source": "zh", "target": "en",
                                           "alternatives": 1}).json()
    assert answer["translatedText"] == [joined, offline["谢谢你。"]]
    assert all(joined not in others and len(others) <= 1 for others in answer["alternatives"])
    lines = post(url, "/api/translate", json={"q": f"{paragraph}\n\n谢谢你。", "nbest": 2}).json()["lines"]
    assert [s["source"] for s in lines[0]["sentences"]] == ["我们明天去北京。", "他是我的朋友。"]
    assert lines[0]["translation"] == joined == lines[0]["translations"][0]["text"]
    assert [len(s["translations"]) for s in lines[0]["sentences"]] == [2, 2]
    assert lines[1] == {"source": "", "translation": "", "confidence": 1.0, "words": [], "failure": None,  # nothing
                        "translations": [{"text": "", "score": 0.0, "confidence": 1.0}], "sentences": []}
    # a line's confidence: its sentences' (Confidence.joined), each sentence translation's its own
    sentences = [s["translations"][0] for s in lines[0]["sentences"]]
    assert min(s["confidence"] for s in sentences) <= lines[0]["confidence"] <= max(s["confidence"] for s in sentences)
    assert [word for word, _ in lines[0]["words"]] == " ".join(s["text"] for s in sentences).split()
    assert lines[2]["translation"] == offline["谢谢你。"]
    whole = post(url, "/api/translate", json={"q": paragraph, "split": False}).json()["lines"][0]
    assert whole["translation"] == translator.translate_lines([paragraph])[0] and len(whole["sentences"]) == 1
    assert post(url, "/api/translate", json={"q": paragraph, "split": 1}).status_code == 400


def test_html_keeps_its_tags_and_places_inline_ones_on_the_translation(url, offline):
    def translate(q):
        answer = post(url, "/translate", json={"q": q, "source": "zh", "target": "en", "format": "html"})
        assert answer.status_code == 200, answer.text
        return answer.json()["translatedText"]

    def escaped(sentence):
        return html.escape(offline[sentence], quote=False)

    page = '<p class="lead">我爱你</p>\n<ul><li>谢谢你。</li></ul><!-- 你好 --><script>var 我 = 1;</script>'
    assert translate(page) == (f'<p class="lead">{escaped("我爱你")}</p>\n<ul><li>{escaped("谢谢你。")}</li></ul>'
                               "<!-- 你好 --><script>var 我 = 1;</script>")
    inline = translate("<p>我爱<b>你</b></p>")
    assert inline.startswith("<p>") and inline.endswith("</p>") and inline.count("<b>") == inline.count("</b>") == 1
    assert re.sub("<[^>]+>", "", inline) == escaped("我爱你")


class NoAttention:
    """A translator that gives no attention maps, as an ensemble's."""

    def __init__(self, translator):
        self.inner = translator

    def __getattr__(self, name):  # the rest is the real translator's
        return getattr(self.inner, name)

    def attention(self, *args):
        raise MtError("attention maps need one model: an ensemble has none of its own")


def test_marks_need_attention_and_plain_text_does_not(translator, offline):
    with running(create_app(NoAttention(translator), "mt", ServeConfig())) as url:
        base = {"source": "zh", "target": "en", "format": "html"}
        assert answered(post(url, "/translate", json={**base, "q": "<p>我爱你</p>"})) == {
            "translatedText": f"<p>{html.escape(offline['我爱你'], quote=False)}</p>"}
        refused = post(url, "/translate", json={**base, "q": "<p>我爱<b>你</b></p>"})
        assert refused.status_code == 400 and "need one model" in refused.json()["error"]


@contextmanager
def file_server(translator, tmp_path: Path, monkeypatch, **limits):
    """A server whose private directory for translated files is made inside tmp_path."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with running(create_app(translator, "mt", serve_config(**limits))) as url:
        [directory] = tmp_path.glob("mt-serve-*")
        assert directory.stat().st_mode & 0o777 == 0o700
        yield url
    assert not directory.exists()  # removed, with what it held, when the server stops


def upload(url: str, name: str, data: bytes) -> httpx.Response:
    return post(url, "/translate_file", files={"file": (name, data)}, data={"source": "zh", "target": "en"})


def srt_file(*texts: str) -> bytes:
    return "".join(f"{i}\n00:00:0{i},000 --> 00:00:0{i},500\n{text}\n\n"
                   for i, text in enumerate(texts, start=1)).encode()


def docx_file() -> bytes:
    """A Word document: a paragraph, and one whose sentence is in two runs, the first bold."""
    import docx

    document = docx.Document()
    document.add_paragraph("我爱你")
    paragraph = document.add_paragraph()
    paragraph.add_run("谢谢").bold = True
    paragraph.add_run("你。")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def docx_texts(data: bytes) -> list[tuple[str, bool]]:
    """Each paragraph's text, and whether a run of it is bold."""
    import docx

    return [(p.text, any(run.bold for run in p.runs)) for p in docx.Document(io.BytesIO(data)).paragraphs]


@pytest.mark.parametrize("name, data, translated", [
    ("notes.txt", "我爱你\n\n谢谢你。\n".encode(), lambda t: f"{t['我爱你']}\n\n{t['谢谢你。']}\n".encode()),
    ("film.srt", srt_file("我爱你", "谢谢你。"), lambda t: srt_file(t["我爱你"], t["谢谢你。"])),
    ("笔记.docx", docx_file(), lambda t: [(t["我爱你"], False), (t["谢谢你。"], True)]),
], ids=["txt", "srt", "docx"])
def test_a_file_is_translated_whole_and_downloaded_once(translator, offline, tmp_path, monkeypatch, name, data,
                                                        translated):
    with file_server(translator, tmp_path, monkeypatch) as url:
        answer = upload(url, name, data)
        assert answer.status_code == 200, answer.text
        link = answer.json()["translatedFileUrl"]
        stem, suffix = name.rsplit(".", 1)
        assert re.fullmatch(re.escape(f"{url}/download_file/") + r"[0-9a-f]{32}\." +
                            re.escape(urllib.parse.quote(f"{stem}_en.{suffix}")), link)
        [stored] = tmp_path.glob("mt-serve-*/*")
        assert re.fullmatch("[0-9a-f]{32}", stored.name)  # named by its token alone
        download = httpx.get(link)
        content = docx_texts(download.content) if suffix == "docx" else download.content
        assert download.status_code == 200 and content == translated(offline)
        assert download.headers["content-disposition"] == (
            f'attachment; filename="{stem}_en.{suffix}"' if stem.isascii()
            else f"attachment; filename*=utf-8''{urllib.parse.quote(f'{stem}_en.{suffix}')}")
        assert not stored.exists() and httpx.get(link).status_code == 404  # once


def test_bad_files_are_refused_and_the_server_carries_on(translator, offline, tmp_path, monkeypatch):
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\0" * 5_000_000)  # packs to some 5 KB
    with file_server(translator, tmp_path, monkeypatch, body_limit=100_000) as url:
        unsupported = upload(url, "slides.pdf", b"%PDF-1.4")
        assert unsupported.status_code == 400 and all(suffix in unsupported.json()["error"] for suffix in FORMATS)
        zipped = upload(url, "bomb.docx", bomb.getvalue())
        assert zipped.status_code == 400 and "zip bomb" in zipped.json()["error"]
        assert upload(url, "latin1.txt", "café".encode("latin-1")).status_code == 400
        assert post(url, "/translate_file", data={"source": "zh", "target": "en"}).json() == {
            "error": "Invalid request: missing file parameter"}
        started = time.monotonic()
        huge = upload(url, "huge.srt", srt_file("我爱你") * 3_000_000)  # over 100 MB
        assert huge.status_code == 413 and time.monotonic() - started < 5
        assert not any(tmp_path.glob("mt-serve-*/*"))
        assert upload(url, "notes.txt", "我爱你".encode()).status_code == 200  # still up


def test_a_file_name_is_never_a_path(translator, offline, tmp_path, monkeypatch):
    with file_server(translator, tmp_path, monkeypatch) as url:
        for name in ("../../evil.txt", "..\\..\\evil.txt", "/etc/evil.txt"):
            link = upload(url, name, "我爱你".encode()).json()["translatedFileUrl"]
            assert link.endswith(".evil_en.txt")
            assert httpx.get(link).headers["content-disposition"] == 'attachment; filename="evil_en.txt"'
        assert [p.name for p in tmp_path.iterdir()] == [next(tmp_path.glob("mt-serve-*")).name]
        token = upload(url, "notes.txt", "我爱你".encode()).json()["translatedFileUrl"].split("/")[-1].split(".")[0]
        for path, status in ((f"{token}.other.txt", 404), ("..%2F..%2Fetc%2Fpasswd", 404), (f"..%5C{token}", 400),
                             (token, 404), ("%2E%2E", 404)):
            answer = httpx.get(f"{url}/download_file/{path}")
            assert answer.status_code == status and "error" in answer.json(), path
        assert httpx.get(f"{url}/download_file/{token}.notes_en.txt").status_code == 200


def test_translated_files_wait_a_while_and_take_bounded_room(translator, offline, tmp_path, monkeypatch):
    size = len(offline["我爱你"].encode())
    with file_server(translator, tmp_path, monkeypatch, download_timeout=1.0, download_limit=size + 1) as url:
        assert upload(url, "a.txt", "我爱你".encode()).status_code == 200
        full = upload(url, "b.txt", "我爱你".encode())
        assert full.status_code == 503 and "Too many translated files" in full.json()["error"]
        deadline = time.monotonic() + 10
        while any(tmp_path.glob("mt-serve-*/*")):  # removed once its time is up
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert upload(url, "b.txt", "我爱你".encode()).status_code == 200  # room again


def test_detect_gives_the_source_language_and_the_target_where_the_text_looks_like_it(url):
    assert post(url, "/detect", json={"q": "我爱你。"}).json() == [{"confidence": 100.0, "language": "zh"}]
    assert post(url, "/detect", data={"q": "I love 你"}).json() == [{"confidence": 83.3, "language": "en"},
                                                                    {"confidence": 16.7, "language": "zh"}]
    assert post(url, "/detect", json={"q": "2024"}).json() == [{"confidence": 0.0, "language": "zh"}]
    assert post(url, "/detect", json={}).json() == {"error": "Invalid request: missing q parameter"}


def test_known_sentences_come_from_the_cache_without_the_model(translator, offline):
    recording = Recording(translator)
    with running(create_app(recording, "mt", ServeConfig())) as url:
        def translate(q):
            return post(url, "/translate", json={"q": q, "source": "zh", "target": "en"}).json()["translatedText"]

        translate("我们明天去北京。他是我的朋友。")
        assert recording.calls == [translator.encode(["我们明天去北京。", "他是我的朋友。"])]  # one batch
        assert translate("他是我的朋友。谢谢你。") == f"{offline['他是我的朋友。']} {offline['谢谢你。']}"
        assert recording.calls[1:] == [translator.encode(["谢谢你。"])]  # the known sentence is not decoded again
        cache = httpx.get(url + "/api/info").json()["cache"]
        assert (cache["hits"], cache["misses"], cache["entries"]) == (1, 3, 3)
    recording.calls.clear()
    with running(create_app(recording, "mt", serve_config(cache_size=0))) as url:
        for _ in range(2):
            post(url, "/translate", json={"q": "谢谢你。", "source": "zh", "target": "en"})
        assert len(recording.calls) == 2
        assert httpx.get(url + "/api/info").json()["cache"] == {"entries": 0, "bytes": 0, "hits": 0, "misses": 0,
                                                                "size": 0}


def test_api_keys_and_the_request_rate(translator):
    app = create_app(translator, "mt", ServeConfig(req_limit=3), api_keys=frozenset({"k1"}))
    with running(app) as url:
        base = {"q": "你好。", "source": "zh", "target": "en"}
        assert post(url, "/translate", json=base).status_code == 403
        assert post(url, "/translate", json={**base, "api_key": "nope"}).json() == {"error": "Invalid API key"}
        answers = [post(url, "/translate", json={**base, "api_key": "k1"}) for _ in range(4)]
        assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
        assert answers[-1].json() == {"error": "Slowdown: 3 per 1 minute"}
        assert httpx.get(url + "/frontend/settings").json()["keyRequired"] is True
    open_app = create_app(translator, "mt", ServeConfig(req_limit=2))  # no keys: a client is its address
    with running(open_app) as url:
        answers = [post(url, "/translate", json={**base, "api_key": f"made-up-{i}"}) for i in range(3)]
        assert [answer.status_code for answer in answers] == [200, 200, 429]


class Broken:
    """A translator whose method `broken` fails."""

    def __init__(self, translator, broken: str):
        self.inner, self.broken = translator, broken

    def __getattr__(self, name):  # the rest is the real translator's
        if name == self.broken:
            raise RuntimeError("it broke")
        return getattr(self.inner, name)


@pytest.mark.parametrize("batching, broken", [  # in the worker (in rounds; continuous); in the request's handler
    ("rounds", "translate_ids"), ("continuous", "translated"), ("continuous", "encode")])
def test_a_fault_is_answered_500_and_logged_once(translator, caplog, batching, broken):
    with running(create_app(Broken(translator, broken), "mt", serve_config(batching=batching))) as url:
        answer = post(url, "/translate", json={"q": "你好。", "source": "zh", "target": "en"})
    assert answer.status_code == 500 and answer.json() == {"error": "Cannot translate text: it broke"}
    assert len([record for record in caplog.records if record.exc_info]) == 1  # the server stopped: all logged


# ---------------------------------------------------------------- mt's API


def test_mt_api_gives_nbest_with_scores_options_and_attention(url, offline, translator):
    answer = post(url, "/api/translate", json={"q": "我爱你\n你好。", "nbest": 3, "beam": 4, "attention": True})
    lines = answer.json()["lines"]
    assert [line["source"] for line in lines] == ["我爱你", "你好。"]
    best = lines[0]["translations"]
    assert best[0]["text"] == offline["我爱你"] and len(best) == 3
    assert [t["score"] for t in best] == sorted((t["score"] for t in best), reverse=True)
    attention = best[0]["attention"]
    layers, rows = attention["layers"], len(attention["target"])
    assert attention["layer_numbers"] == list(range(1, translator.config.model.num_decoder_layers + 1))
    assert len(layers) == translator.config.model.num_decoder_layers and attention["source"][-1] == "</s>"
    assert all(len(layer) == rows and all(abs(sum(row) - 1) < 1e-2 for row in layer) for layer in layers)
    greedy = post(url, "/api/translate", json={"q": "我爱你", "beam": 1}).json()
    assert greedy["decode"]["beam_size"] == 1 and "attention" not in greedy["lines"][0]["translations"][0]
    refused = post(url, "/api/translate", json={"q": "我爱你", "beam": 64})
    assert refused.status_code == 400 and "at most 16" in refused.json()["error"]
    assert post(url, "/api/translate", json={"q": "我爱你", "nbest": 5, "beam": 2}).status_code == 400


def test_request_fields_take_their_types_from_json_or_a_form_and_name_the_field_they_refuse():
    bounds = Bounds(ServeConfig(max_beam=8), "zh", "en")
    form = parse(TranslateRequest, {"q": "你好", "beam": "2", "alpha": "0.5", "split": "False", "attention": "TRUE"},
                 bounds)
    assert form.attention is True and form.decode_values() == {
        "beam_size": 2, "alpha": 0.5, "nbest": None, "max_len_a": None, "max_len_b": None, "min_len": None,
        "no_repeat_ngram_size": None, "guard": None, "on_failure": None, "split_sentences": False}
    libre = parse(LibreTranslateRequest, {"q": ["你好"], "source": "zh-Hans", "target": "en", "alternatives": 2.0,
                                          "format": "", "secret": "a field of LibreTranslate's"}, bounds)
    assert (libre.alternatives, libre.format, libre.texts()) == (2, "text", ["你好"])
    for schema, params, message in [
        (TranslateRequest, {"q": "你好", "beam": True}, "Invalid request: beam parameter must be a whole number from 1"),
        (TranslateRequest, {"q": "你好", "beam": 2.5}, "Invalid request: beam parameter must be a whole number from 1"),
        (TranslateRequest, {"q": "你好", "beam": "0"}, "Invalid request: beam parameter must be a whole number from 1"),
        (TranslateRequest, {"q": "你好", "alpha": -1}, "Invalid request: alpha parameter must be a number from 0"),
        (TranslateRequest, {"q": "你好", "split": 1}, "Invalid request: split parameter must be true or false"),
        (TranslateRequest, {"q": ["你好"]}, "Invalid request: q parameter must be a text"),
        (TranslateRequest, {"beam": "x"}, "Invalid request: missing q parameter"),
        (LibreTranslateRequest, {"q": "你好", "source": "zh", "target": "en", "alternatives": 8},
         "Invalid request: alternatives parameter must be a whole number from 0 to 7"),
        (LibreTranslateRequest, {"q": "你好", "source": "{x}", "target": "en"},
         "{x} is not supported (this model translates zh to en)"),
    ]:
        with pytest.raises(ApiError) as refused:
            parse(schema, params, bounds)
        assert refused.value.status == 400 and str(refused.value) == message


def test_request_fields_are_listed_for_the_docs_from_the_declarations_requests_are_parsed_with():
    fields = request_fields()
    assert list(fields) == ["POST /translate", "POST /translate_file", "POST /detect", "POST /api/translate",
                            "POST /suggest", "GET /api/suggestions", "POST /api/suggestions/{id}", "POST /api/model"]
    assert {"name": "alternatives", "type": "a whole number", "range": "from 0 to --max-beam − 1", "default": "0",
            "help": "Other translations per text besides the best (none for HTML)."} in fields["POST /translate"]
    options = {field["name"]: field for field in fields["POST /api/translate"]}
    assert set(options) == {"q", "attention", "glossary", "api_key", "beam", "alpha", "nbest", "max_len_a",
                            "max_len_b", "min_len", "no_repeat_ngram", "guard", "on_failure",
                            "split"}  # the decode options docs/serving.md lists
    assert options["beam"] == {"name": "beam", "type": "a whole number", "range": "from 1",
                               "default": "the server's decode.beam_size", "help": "Beam size; 1 is greedy search."}
    assert all(field["help"] for route in fields.values() for field in route)


def test_info_tells_the_models_facts(url, translator):
    info = httpx.get(url + "/api/info").json()
    assert info["engine"] == "mt" and info["compute_type"] == "float32"
    assert info["source"] == "zh" and info["step"] == 8
    assert info["model"]["d_model"] == translator.config.model.d_model and "dev_bleu" in info["dev"]


# ---------------------------------------------------------------- batching


class Recording:
    """A translator that records the sources (ids) of each search it gets (in rounds), or that join its running
    search together (continuous), each taking `delay` more."""

    def __init__(self, translator, delay: float = 0.0):
        self.inner, self.calls, self.delay = translator, [], delay
        self.engine = RecordingEngine(translator.engine, self)

    def __getattr__(self, name):  # the rest is the real translator's
        return getattr(self.inner, name)

    def translate_ids(self, src_ids, decode=None, terms=None):
        self.record(src_ids)
        return self.inner.translate_ids(src_ids, decode, terms)

    def record(self, src_ids):
        self.calls.append(list(src_ids))
        time.sleep(self.delay)


class RecordingEngine:
    """An engine whose running searches tell `recording` the sources that join them."""

    def __init__(self, engine, recording: Recording):
        self.inner, self.recording = engine, recording

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def running_search(self, decode):
        search = self.inner.running_search(decode)
        admit = search.admit

        def recorded(keys, src_ids, limits):
            self.recording.record(src_ids)
            admit(keys, src_ids, limits)

        search.admit = recorded
        return search


def test_requests_that_wait_together_are_decoded_together_and_each_gets_its_own_answer(translator, offline):
    recording = Recording(translator, delay=0.3)
    worker = BatchingWorker(recording, wait_ms=5, max_tokens=4000)
    first = worker.submit(["谢谢你。"], translator.decode)
    time.sleep(0.1)  # the worker is busy with the first request while the others come
    with ThreadPoolExecutor(len(SENTENCES)) as pool:
        futures = list(pool.map(lambda s: worker.submit([s], translator.decode), SENTENCES))
        answers = [f.result(timeout=30)[0][0][0].text for f in futures]
    first.result(timeout=30)
    worker.stop()
    assert answers == [offline[s] for s in SENTENCES]
    assert recording.calls[0] == translator.encode(["谢谢你。"])
    assert sorted(recording.calls[1]) == sorted(translator.encode(SENTENCES))


def test_a_lone_client_does_not_wait_for_company(translator):
    recording = Recording(translator)
    worker = BatchingWorker(recording, wait_ms=2000, max_tokens=4000)
    started = time.monotonic()
    worker.submit(["谢谢你。"], translator.decode).result(timeout=30)
    worker.stop()
    assert time.monotonic() - started < 1.0


def test_a_client_just_answered_joins_the_one_that_waited_instead_of_alternating_rounds(translator):
    recording = Recording(translator, delay=0.3)
    worker = BatchingWorker(recording, wait_ms=200, max_tokens=4000)

    def client(sentences):  # sends again as soon as it is answered
        for sentence in sentences:
            worker.submit([sentence], translator.decode).result(timeout=30)

    first = threading.Thread(target=client, args=(["谢谢你。", "你好。"],))
    first.start()
    time.sleep(0.1)  # the first client's request is being decoded
    waited = worker.submit(["我爱你"], translator.decode)
    first.join()
    waited.result(timeout=30)
    worker.stop()
    assert sorted(recording.calls[1]) == sorted(translator.encode(["我爱你", "你好。"]))


def test_one_at_a_time_when_the_token_budget_is_one(translator):
    recording = Recording(translator)
    worker = BatchingWorker(recording, wait_ms=200, max_tokens=1)
    futures = [worker.submit([s], translator.decode) for s in SENTENCES[:3]]
    [f.result(timeout=30) for f in futures]
    worker.stop()
    assert recording.calls == [translator.encode([s]) for s in SENTENCES[:3]]


def test_a_cancelled_job_is_never_decoded_and_a_full_queue_is_busy(translator):
    recording = Recording(translator, delay=0.5)
    worker = BatchingWorker(recording, wait_ms=0, max_tokens=1, queue_size=3)
    first = worker.submit(["我爱你"], translator.decode)
    time.sleep(0.1)  # the worker is busy with the first job
    left = worker.submit(["你好。"], translator.decode)
    assert left.cancel()  # its client went away
    kept = worker.submit(["谢谢你。"], translator.decode)
    worker.submit(["他是我的朋友。"], translator.decode)
    with pytest.raises(Busy):
        worker.submit(["这本书很有意思。"], translator.decode)
    first.result(timeout=30)
    kept.result(timeout=30)
    worker.stop()
    assert translator.encode(["你好。"]) not in recording.calls
    assert translator.encode(["谢谢你。"]) in recording.calls


def test_a_call_runs_on_the_worker_thread_in_its_turn(translator):
    recording = Recording(translator, delay=0.3)
    worker = BatchingWorker(recording, wait_ms=5)
    worker.submit(["我爱你"], translator.decode)
    time.sleep(0.1)  # the worker is busy with that job
    queued = worker.submit(["谢谢你。"], translator.decode)
    called = worker.call(lambda: (threading.current_thread().name, len(recording.calls), queued.done()))
    assert called.result(timeout=30) == ("mt-batching-worker", 2, True)  # after the jobs queued before it

    def refuse():
        raise MtError("no")

    with pytest.raises(MtError):
        worker.call(refuse).result(timeout=30)
    assert worker.submit(["你好。"], translator.decode).result(timeout=30)  # the worker carries on
    worker.stop()


@pytest.mark.parametrize("batching", ["rounds", "continuous"])
def test_a_client_that_disconnects_leaves_no_work_behind(translator, batching):
    recording = Recording(translator, delay=1.0)
    with running(create_app(recording, "mt", serve_config(batching=batching))) as url:
        with ThreadPoolExecutor(1) as pool:
            busy = pool.submit(post, url, "/translate", json={"q": "谢谢你。", "source": "zh", "target": "en"})
            time.sleep(0.3)  # the worker is busy with that one for a second
            host, port = url.removeprefix("http://").split(":")
            with socket.create_connection((host, int(port))) as leaving:
                leaving.sendall(b"".join(raw_request("他是我的朋友。")))
                time.sleep(0.3)  # its request waits in the queue
            assert busy.result().status_code == 200
        assert post(url, "/translate", json={"q": "你好。", "source": "zh", "target": "en"}).status_code == 200
    assert translator.encode(["他是我的朋友。"]) not in recording.calls
    assert translator.encode(["你好。"]) in recording.calls


class Counting:
    """A tokenizer that records the source lines it encodes."""

    def __init__(self, tokenizer):
        self.inner, self.lines = tokenizer, []

    def __getattr__(self, name):  # the rest is the real tokenizer's
        return getattr(self.inner, name)

    def encode_src(self, texts, sampling=None):
        self.lines += texts
        return self.inner.encode_src(texts, sampling)


def test_a_served_sentence_is_encoded_once_for_the_model_and_a_cached_one_not_at_all(translator, offline):
    counted = copy.copy(translator)
    counted.tokenizer = Counting(translator.tokenizer)
    split_for(counted, [Marked("我爱你")])
    splitting, counted.tokenizer.lines = counted.tokenizer.lines, []  # the split checks that a sentence fits
    with running(create_app(counted, "mt", ServeConfig())) as url:
        answers = [post(url, "/translate", json={"q": "我爱你", "source": "zh", "target": "en"}) for _ in range(2)]
    assert all(answered(answer) == {"translatedText": offline["我爱你"]} for answer in answers)
    assert counted.tokenizer.lines == splitting + ["我爱你"] + splitting


# ---------------------------------------------------------------- abuse


def test_a_slow_client_gets_408_and_delays_nobody(url, offline):
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as slow:
        slow.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"q\": ")
        started = time.monotonic()
        answer = post(url, "/translate", json={"q": "我爱你", "source": "zh", "target": "en"})
        assert answer.json()["translatedText"] == offline["我爱你"] and time.monotonic() - started < 1.0
        slow.settimeout(10)
        assert slow.recv(1000).startswith(b"HTTP/1.1 408")


def test_bad_requests_interleaved_with_good_ones_leave_every_good_one_right(url, offline):
    bad = [{"json": {"q": 5, "source": "zh", "target": "en"}}, {"content": b"{oops", "headers": {"Content-Type":
           "application/json"}}, {"json": {"q": "你好", "source": "xx", "target": "en"}}, {"content": b"\xff" * 50}]
    with httpx.Client(base_url=url, timeout=30) as client, ThreadPoolExecutor(8) as pool:
        def send(i):
            if i % 10 == 0:
                sentence = SENTENCES[i // 10 % len(SENTENCES)]
                answer = client.post("/translate", json={"q": sentence, "source": "zh", "target": "en"})
                return answer.status_code == 200 and answer.json()["translatedText"] == offline[sentence]
            return client.post("/translate", **bad[i % len(bad)]).status_code == 400

        results = list(pool.map(send, range(1100)))  # 1,000 bad, 100 good
    assert all(results)


# ---------------------------------------------------------------- `mt serve` itself


@contextmanager
def mt_serve(*args: str, cwd: Path):
    """`mt serve` in its own process on a free port; yields (process, url)."""
    process = subprocess.Popen([sys.executable, "-m", "mt", "serve", "--port", "0", *args], cwd=cwd,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while "serving" not in (line := process.stderr.readline()):
            assert line, "mt serve ended: " + process.stderr.read()
        yield process, line.split(" on ")[1].split()[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_libretranslatepy_speaks_to_mt_serve_and_gets_what_mt_translate_gives(checkpoint, tmp_path):
    from libretranslatepy import LibreTranslateAPI

    (tmp_path / "keys.txt").write_text("# keys\nsecret-1\n", encoding="utf-8")
    expected = subprocess.run([sys.executable, "-m", "mt", "translate", "--checkpoint", str(checkpoint), "我爱你"],
                              capture_output=True, text=True, check=True).stdout.strip()
    with mt_serve("--checkpoint", str(checkpoint), "--api-keys", "keys.txt", cwd=tmp_path) as (_, url):
        client = LibreTranslateAPI(url, api_key="secret-1")
        assert client.translate("我爱你", "zh", "en") == expected
        assert client.languages() == [{"code": "zh", "name": "Chinese", "targets": ["en"]},
                                      {"code": "en", "name": "English", "targets": []}]
        assert client.detect("我爱你") == [{"confidence": 100.0, "language": "zh"}]
        with pytest.raises(urllib.error.HTTPError) as refused:
            client.translate("我爱你", "en", "zh")
        assert refused.value.code == 400 and "en is not supported" in json.loads(refused.value.read())["error"]
        with pytest.raises(urllib.error.HTTPError) as no_key:
            LibreTranslateAPI(url).translate("我爱你", "zh", "en")
        assert no_key.value.code == 403
        with pytest.raises(urllib.error.HTTPError) as wrong_key:
            LibreTranslateAPI(url, api_key="guess").translate("我爱你", "zh", "en")
        assert wrong_key.value.code == 403


@pytest.mark.parametrize("engine", ["mt", "ctranslate2"])
def test_a_server_with_a_shortlist_answers_as_mt_translate_with_it(engine, checkpoint, tmp_path):
    """`mt serve --shortlist`, with either engine, gives libretranslatepy what `mt translate` gives with the same
    shortlist for each sentence alone (a narrow one, which changes outputs)."""
    from libretranslatepy import LibreTranslateAPI

    from mt.text.texts import translate_texts

    model = checkpoint
    if engine == "ctranslate2":
        pytest.importorskip("ctranslate2")
        from mt.exchange.ctranslate2 import export_ctranslate2

        model = tmp_path / "ct2"
        export_ctranslate2(checkpoint, model)
    subprocess.run([sys.executable, "-m", "mt", "shortlist", "--checkpoint", str(checkpoint), "-o", "list.pt",
                    "--translations", "1", "--frequent", "0"], cwd=tmp_path, check=True, capture_output=True)
    translator = load_translator(model, "cpu", engine, compute_type="float32" if engine == "ctranslate2" else "auto")
    narrowed = translator.decode.replace(shortlist=str(tmp_path / "list.pt"))
    expected = [translate_texts(translator, [sentence], narrowed)[0] for sentence in SENTENCES]
    assert expected != translate_texts(translator, SENTENCES)
    options = ["--compute-type", "float32"] if engine == "ctranslate2" else []
    with mt_serve("--checkpoint", str(model), "--engine", engine, *options, "--shortlist", "list.pt",
                  cwd=tmp_path) as (_, url):
        client = LibreTranslateAPI(url)
        assert [client.translate(sentence, "zh", "en") for sentence in SENTENCES] == expected


NPM_CLIENT = Path(sys.prefix) / "node" / "node_modules" / "libretranslate"  # scripts/setup.sh installs it


def test_the_npm_libretranslate_client_speaks_to_mt_serve(url, offline, tmp_path):
    if shutil.which("node") is None or not NPM_CLIENT.is_dir():
        pytest.skip(f"needs node and the npm package libretranslate in {NPM_CLIENT.parent}")
    script = tmp_path / "client.js"
    script.write_text(f"const {{ translate }} = require({json.dumps(str(NPM_CLIENT))});\n"
                      f"translate({{ query: process.argv[2], source: 'zh', target: process.argv[3], "
                      f"apiurl: {json.dumps(url)} }}).then(console.log, (e) => {{ console.log(e.message); }});\n",
                      encoding="utf-8")

    def client(q, target):  # it checks the source and target against /languages first
        return subprocess.run(["node", str(script), q, target], capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()

    assert client("他是我的朋友。谢谢你。", "en") == f"{offline['他是我的朋友。']} {offline['谢谢你。']}"
    assert client("我爱你", "fr") == "This language was not found/does not exist."


def test_a_malformed_form_is_answered_400_and_leaves_no_line_in_the_server_s_log(checkpoint, tmp_path):
    with mt_serve("--checkpoint", str(checkpoint), cwd=tmp_path) as (process, url):
        answer = httpx.post(url + "/translate", content=b"--not-the-boundary\r\n",
                            headers={"Content-Type": "multipart/form-data; boundary=b0undary"})
        assert answer.status_code == 400
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert "boundary" not in process.stderr.read()


def test_sigterm_finishes_the_request_in_flight_then_exits_0(checkpoint, tmp_path, offline):
    with mt_serve("--checkpoint", str(checkpoint), cwd=tmp_path) as (process, url):
        host, port = url.removeprefix("http://").split(":")
        head, body = raw_request("我爱你")
        with socket.create_connection((host, int(port))) as in_flight:
            in_flight.sendall(head + body[:10])
            time.sleep(0.5)  # the request has begun
            process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            with pytest.raises(httpx.ConnectError):  # no new connection is accepted
                httpx.get(url + "/health")
            in_flight.sendall(body[10:])  # the rest of its body
            answer = answer_until_closed(in_flight)  # as it stops
        assert answer.startswith("HTTP/1.1 200") and json.dumps(offline["我爱你"], ensure_ascii=False) in answer
        assert process.wait(timeout=30) == 0


def test_sigterm_answers_a_connection_made_before_it_whose_request_comes_after(checkpoint, tmp_path, offline):
    """A client connects, then sends: a stop between the two does not drop the request (the connection is not idle,
    as uvicorn alone takes it to be). A connection that sends nothing is closed after the grace, one that its client
    closes is let go; the exit is 0, with no traceback in the log."""
    with mt_serve("--checkpoint", str(checkpoint), cwd=tmp_path) as (process, url):
        host, port = url.removeprefix("http://").split(":")
        early, idle, gone = (socket.create_connection((host, int(port))) for _ in range(3))
        with early, idle:
            time.sleep(0.5)  # all three accepted
            process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            with pytest.raises(httpx.ConnectError):  # the stop has begun: no new connection is accepted
                httpx.get(url + "/health")
            gone.close()
            early.sendall(b"".join(raw_request("我爱你")))
            answer = answer_until_closed(early)
            assert answer_until_closed(idle) == ""  # closed, unanswered: it asked nothing
        assert answer.startswith("HTTP/1.1 200") and json.dumps(offline["我爱你"], ensure_ascii=False) in answer
        assert process.wait(timeout=30) == 0
        assert "Traceback" not in process.stderr.read()


def test_a_stop_as_soon_as_the_server_serves_answers_what_waits_then_exits_0(checkpoint, tmp_path, offline):
    """SIGTERM right after the "serving" line, with requests sent while the server could not read them (stopped by
    SIGSTOP: they wait in its listener's backlog): each is answered, and the stop is a clean one."""
    with mt_serve("--checkpoint", str(checkpoint), cwd=tmp_path) as (process, url):
        host, port = url.removeprefix("http://").split(":")
        process.send_signal(signal.SIGSTOP)
        clients = [socket.create_connection((host, int(port))) for _ in range(4)]
        for client in clients:
            client.sendall(b"".join(raw_request("我爱你")))
        process.send_signal(signal.SIGTERM)
        process.send_signal(signal.SIGCONT)
        for client in clients:
            with client:
                answer = answer_until_closed(client)
            assert answer.startswith("HTTP/1.1 200") and json.dumps(offline["我爱你"], ensure_ascii=False) in answer
        assert process.wait(timeout=30) == 0


# ---------------------------------------------------------------- the page, in a real browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def page(url):
    with browsing(url) as page:
        yield page


@contextmanager
def browsing(url: str):
    """The server's page at `url` in Debian's Chromium (Playwright)."""
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (apt-get install -y chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(url + "/")
        yield page
        browser.close()


def test_the_page_translates_on_the_button_and_on_ctrl_enter(page, offline):
    page.wait_for_selector("#facts:has-text('mt engine, float32 · step 8')")  # selectors, not script: the page's CSP forbids eval
    page.fill("#text", "我爱你")
    page.click("#go")
    page.wait_for_selector("ol.nbest li")
    assert page.inner_text("ol.nbest li .text") == offline["我爱你"]
    assert len(page.query_selector_all("ol.nbest li .score")) == 3
    page.fill("#nbest", "2")  # translated again, with 2 translations this time
    page.press("#text", "Control+Enter")
    page.wait_for_selector("ol.nbest:not(:has(li:nth-child(3))) li:nth-child(2)")
    assert page.inner_text("ol.nbest li .text") == offline["我爱你"]
    page.fill("#nbest", "3")


def test_the_page_draws_the_attention_map_of_the_chosen_translation(page, translator):
    def labels(cells: str) -> list[str]:
        return page.eval_on_selector_all(f"#attention {cells}", "cells => cells.map(c => c.textContent)")

    page.fill("#text", "我爱你")
    page.click("#go")
    page.wait_for_selector("#attention td")
    sources, targets, cells = labels("thead th"), labels("tbody th"), labels("tbody td")
    assert sources[-1] == "</s>" and "爱" in "".join(sources) and len(cells) == len(targets) * (len(sources) - 1)
    first, second = (page.inner_text(f"ol.nbest li:nth-child({i}) .text") for i in (1, 2))
    pieces = {text: translator.attention("我爱你", text).target for text in (first, second)}  # each map's rows
    assert pieces[first] != pieces[second]  # else the test could not tell the two maps apart
    assert targets == pieces[first]
    layers = translator.config.model.num_decoder_layers
    assert layer_options(page) == (["all, averaged"] if layers > 1 else []) + [str(n) for n in range(1, layers + 1)]
    page.click("ol.nbest li:nth-child(2)")  # another translation: its own map
    assert page.get_attribute("ol.nbest li:nth-child(2)", "class") == "chosen"
    assert labels("tbody th") == pieces[second]


def test_the_page_shows_each_sentence_of_a_paragraph_with_its_own_nbest(page, offline):
    page.fill("#text", "我们明天去北京。他是我的朋友。")
    page.click("#go")
    sentences = page.locator(".line .sentence")
    sentences.nth(1).locator("ol.nbest li").first.wait_for()
    assert page.inner_text(".line .translation") == f"{offline['我们明天去北京。']} {offline['他是我的朋友。']}"
    assert sentences.locator(".source").all_inner_texts() == ["我们明天去北京。", "他是我的朋友。"]
    assert [sentences.nth(i).locator("ol.nbest li .text").first.inner_text() for i in (0, 1)] == [
        offline["我们明天去北京。"], offline["他是我的朋友。"]]
    sentences.nth(1).locator("ol.nbest li").nth(1).click()  # its map: the second sentence's pieces
    assert "他" in "".join(page.locator("#attention thead th").all_inner_texts())


def test_the_page_takes_a_glossary_and_shows_which_terms_each_line_holds(page, translator):
    from mt.data.glossary import parse_glossary
    from mt.data.terms import TermFinder
    from mt.text.glossary_modes import GlossaryUse

    page.click("#glossary-box summary")
    page.fill("#glossary", "北京 = Beijing\n")
    page.fill("#text", "我们明天去北京。")
    page.click("#go")
    page.wait_for_selector(".line .terms .used")
    terms = GlossaryUse(TermFinder(parse_glossary("北京\tBeijing", "g"), translator.tokenizer))
    expected = terms.translate(translator, ["我们明天去北京。"])[0][0].text
    assert page.inner_text(".line .terms") == "北京 → Beijing (used)"
    assert page.inner_text("ol.nbest li .text") == expected and "Beijing" in expected
    page.fill("#glossary", "")  # the other tests translate without one
    page.click("#glossary-box summary")


def test_the_page_shows_each_line_s_confidence_and_its_failure(page, translator):
    page.fill("#text", "我爱你\n他是我的朋友。")
    page.click("#go")
    page.wait_for_selector(".line .confidence")
    found = [nbest[0] for nbest in translator.translate(["我爱你", "他是我的朋友。"])]
    for n, t in enumerate(found, 1):
        shown = page.inner_text(f".line:nth-child({n}) .confidence")
        assert re.fullmatch(r"confidence \d\.\d\d" + (f" · failed: {t.failure}" if t.failure else ""), shown)
        assert float(shown.split()[1]) == pytest.approx(t.confidence.score, abs=0.006)  # to 2 places


def test_the_page_translates_a_file_into_a_download_link(page, offline):
    page.wait_for_selector("#facts:has-text('step 8')")
    page.set_input_files("#file", files=[{"name": "notes.txt", "mimeType": "text/plain",
                                          "buffer": "我爱你\n".encode()}])
    page.click("#upload")
    page.wait_for_selector("a#download")
    assert page.inner_text("a#download") == "notes_en.txt"
    assert httpx.get(page.get_attribute("a#download", "href")).content == f"{offline['我爱你']}\n".encode()


def test_a_ctranslate2_server_maps_its_last_layer_in_the_api_and_the_page(checkpoint, translator, page, url, tmp_path):
    """A CTranslate2 export keeps the attention of its last decoder layer only (heads averaged): the API gives that
    layer, numbered, with a row for each piece of the translation, its EOS too; the page offers that layer alone."""
    pytest.importorskip("ctranslate2")
    from mt.exchange.ctranslate2 import export_ctranslate2

    export_ctranslate2(checkpoint, tmp_path / "ct2")
    ct2 = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="float32")
    last = translator.config.model.num_decoder_layers
    with running(create_app(ct2, "ctranslate2", ServeConfig())) as ct2_url:
        best = post(ct2_url, "/api/translate", json={"q": "我爱你", "attention": True}).json()["lines"][0]
        best = best["translations"][0]
        ours = translator.attention("我爱你", best["text"])  # (the model ends its output here: an EOS row)
        assert best["attention"]["layer_numbers"] == [last] and best["attention"]["target"] == ours.target
        # equal as far as the API rounds (4 decimals)
        torch.testing.assert_close(torch.tensor(best["attention"]["layers"][0]), ours.weights[-1].mean(dim=0),
                                   atol=1e-3, rtol=0)
        try:
            page.goto(ct2_url + "/")
            page.wait_for_selector("#facts:has-text('the last layer')")
            page.fill("#text", "我爱你")
            page.click("#go")
            page.wait_for_selector("#attention td")
            assert layer_options(page) == [str(last)]
        finally:
            page.goto(url + "/")


def layer_options(page) -> list[str]:
    """The layers the page's map offers, as listed."""
    return page.eval_on_selector_all("#layer option", "options => options.map(o => o.textContent)")


@pytest.mark.parametrize("alone", [True, False])
def test_the_server_loads_its_model_without_starting_threads_beside_the_workers(trained_runs, alone):
    """mt serve loads the model on the main thread and decodes on its worker: the main thread must start no OpenMP
    team of its own, or libgomp (counting both teams' threads, more than the cores) stops spinning its workers."""
    checkpoint = trained_runs[0] / "checkpoints" / "best.pt"
    code = f"""
import contextlib, os, torch
from mt.core.openmp import without_a_thread_team
from mt.decode.translator import load_translator
torch.set_num_threads(2)
threads = len(os.listdir("/proc/self/task"))
with without_a_thread_team() if {alone} else contextlib.nullcontext():
    translator = load_translator({str(checkpoint)!r}, "cpu")
    torch.randn(512, 512) @ torch.randn(512, 512)
print(len(os.listdir("/proc/self/task")) - threads, torch.get_num_threads())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    started, threads = map(int, done.stdout.split())
    assert threads == 2 and (started == 0) == alone


@pytest.mark.parametrize("batching", ["rounds", "continuous"])
def test_an_operator_changes_the_model_without_dropping_a_request(trained_runs, translator, offline, tmp_path,
                                                                  batching):
    """Clients translate while POST /api/model swaps in another checkpoint of the same vocabulary: every request is
    answered by one of the two models, and each sent after the swap by the new one (the cache starts anew)."""
    other = load_checkpoint(trained_runs[0] / "checkpoints" / "step-00000004.pt")
    torch.manual_seed(0)
    for weights in other.model.values():  # the tiny run's step 4 and 8 say the same: weights of its own
        weights.add_(torch.randn_like(weights))
    other_path = tmp_path / "other.pt"
    save_checkpoint(other, other_path)

    def load(path: Path):
        other = load_translator(path, "cpu")
        other.config.decode = translator.config.decode
        return other

    new = dict(zip(SENTENCES, load(other_path).translate_lines(SENTENCES)))
    assert all(new[s] != offline[s] for s in SENTENCES[:3])  # the two models tell apart
    app = create_app(translator, "mt", serve_config(batching=batching), frozenset({"op"}), load=load)
    answers, stop, swapped = [], threading.Event(), threading.Event()

    def client(sentence: str) -> None:
        while not stop.is_set():
            after = swapped.is_set()
            response = post(url, "/translate", json={"q": sentence, "source": "zh", "target": "en", "api_key": "op"})
            answers.append((sentence, after, response.status_code, response.json().get("translatedText")))

    with running(app) as url:
        with ThreadPoolExecutor(3) as pool:
            clients = [pool.submit(client, sentence) for sentence in SENTENCES[:3]]
            time.sleep(0.5)
            changed = post(url, "/api/model", json={"checkpoint": str(other_path), "api_key": "op"})
            swapped.set()
            time.sleep(0.5)
            stop.set()
            for done in clients:
                done.result()
        assert changed.status_code == 200 and changed.json()["step"] == 4
        assert httpx.get(url + "/api/info").json()["step"] == 4
        missing = post(url, "/api/model", json={"checkpoint": "no-such.pt", "api_key": "op"})
        assert missing.status_code == 400 and "no-such.pt" in missing.json()["error"]
        assert post(url, "/api/model", json={"checkpoint": str(other_path)}).status_code == 403  # no key
    assert all(code == 200 for _, _, code, _ in answers)
    assert all(text in (offline[s], new[s]) for s, _, _, text in answers)
    late = [(s, text) for s, after, _, text in answers if after]
    assert late and all(text == new[s] for s, text in late)
    assert any(not after for _, after, _, _ in answers)


def test_a_server_without_keys_keeps_its_model(translator, trained_runs):
    with running(create_app(translator, "mt", ServeConfig(), load=lambda path: translator)) as url:
        refused = post(url, "/api/model", json={"checkpoint": str(trained_runs[0] / "checkpoints" / "best.pt")})
        assert refused.status_code == 403 and "--api-keys" in refused.json()["error"]


def test_mt_serve_changes_its_model_with_its_own_settings(checkpoint, trained_runs, tmp_path):
    """`mt serve`'s own loader: the new model keeps the server's decode settings (--beam 2 here)."""
    (tmp_path / "keys").write_text("op\n", encoding="utf-8")
    other = trained_runs[0] / "checkpoints" / "step-00000004.pt"
    with mt_serve("--checkpoint", str(checkpoint), "--api-keys", "keys", "--beam", "2", cwd=tmp_path) as (_, url):
        changed = post(url, "/api/model", json={"checkpoint": str(other), "api_key": "op"})
        assert changed.status_code == 200 and changed.json()["step"] == 4
        info = httpx.get(url + "/api/info", params={"api_key": "op"}).json()
        assert info["step"] == 4 and info["decode"]["beam_size"] == 2

