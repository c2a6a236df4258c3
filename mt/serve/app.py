"""`mt serve`: a trained model behind HTTP, for the clients people already have and a page to try it in.

- LibreTranslate's API, as its clients expect it: POST /translate (text or HTML), POST /translate_file and
  GET /download_file/…, POST /detect, GET /languages, GET /frontend/settings, GET /health; JSON or form bodies;
  errors as {"error": …} with its status codes.
- mt's own: POST /api/translate (each sentence's n-best with scores, mt translate's decoding options,
  cross-attention maps) and GET /api/info (the model's facts, the cache's counts).
- The page at / (mt/serve/web/index.html, one self-contained file: it works offline).

Real text goes through mt/text: each text is split into sentences (mt/text/texts.py's split_for), the sentences of
all the request's texts are decoded as one job of the BatchingWorker (mt/serve/batcher.py), which decodes concurrent
requests together, and each text is put back in its shape (finish), with its marks (HTML's inline elements, a
document's runs) placed by the cross-attention. Sentences already translated come from the translation cache
instead (mt/serve/translation_cache.py); translated files wait for their download in mt/serve/downloads.py.
Starlette (run on uvicorn by mt/serve/server.py): a small, well-kept ASGI stack; LibreTranslate's API fixes our
request and answer shapes, so FastAPI's schema generation and validation would add a layer without doing a job here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import mimetypes
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import PurePosixPath
from urllib.parse import parse_qsl, quote

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from mt.config import DecodeConfig, ServeConfig, flag_of
from mt.core.errors import MtError
from mt.decode.translator import Translator
from mt.serve.answers import Done, alternative_texts, lines_json
from mt.serve.batcher import BatchingWorker, Busy
from mt.serve.downloads import Downloads
from mt.serve.errors import ApiError
from mt.serve.languages import ALIASES, LANGUAGE_NAMES, confidence
from mt.serve.translation_cache import Cache
from mt.text.documents import FORMATS, read_document
from mt.text.markup import read_html
from mt.text.marks import Marked
from mt.text.texts import finish, split_for


# The decode keys a request may set, by the names of their command-line options: beam, alpha, nbest, split, …
API_OPTIONS = {f.name: flag_of(f)[2:].replace("-", "_") for f in dataclasses.fields(DecodeConfig)
               if f.metadata["per_request"]}
OPTION_KINDS = {f.name: type(f.default) for f in dataclasses.fields(DecodeConfig)}  # int, float or bool
SHORT_TEXT = 2_000  # characters a request's texts may hold to be split and put back on the event loop's thread


@dataclass
class Upload:
    """A file sent in a multipart form: the name its client gave it (never used as a path) and its bytes."""

    name: str
    data: bytes


class Api:
    """The handlers, sharing one translator (behind its worker), its cache and the server's limits."""

    def __init__(self, translator: Translator, engine: str, limits: ServeConfig, api_keys: frozenset[str]):
        self.translator, self.engine, self.limits, self.api_keys = translator, engine, limits, api_keys
        # --req-limit with the package LibreTranslate's limiter (Flask-Limiter) is built on: its fixed windows count
        # as LibreTranslate's do, and each client's count expires with its window.
        self.rate = RateLimitItemPerMinute(limits.req_limit) if limits.req_limit else None
        self.limiter = FixedWindowRateLimiter(MemoryStorage()) if self.rate else None
        data = translator.config.data
        self.source, self.target = data.src_lang, data.tgt_lang
        self.page = (resources.files("mt.serve") / "web" / "index.html").read_text(encoding="utf-8")
        self.cache = Cache(limits.cache_size)
        self.worker: BatchingWorker | None = None
        self.downloads: Downloads | None = None

    @asynccontextmanager
    async def lifespan(self, app):
        self.worker = BatchingWorker(self.translator, self.limits.batch_wait_ms, self.limits.batch_tokens,
                                     self.limits.queue_size)
        self.downloads = Downloads(self.limits.download_timeout, self.limits.download_limit)
        try:
            yield
        finally:  # uvicorn has answered the requests in flight by now
            await asyncio.to_thread(self.worker.stop)
            self.downloads.close()

    # ------------------------------------------------------------ LibreTranslate's API

    async def libre_translate(self, request):
        """q (a text or a list) as text or HTML: each text's sentences' translations, rejoined in its shape."""
        params = await self.params(request)
        self.admit(request, params)
        q = params.get("q")
        for name in ("q", "source", "target"):
            if not params.get(name):
                raise ApiError(400, f"Invalid request: missing {name} parameter")
        texts = self.texts(q)
        self.language(params["source"], self.source, allow_auto=True)
        self.language(params["target"], self.target)
        html = self.is_html(params.get("format"))
        alternatives = self.number(params.get("alternatives", 0), "alternatives", 0, self.limits.max_beam - 1)
        decode = self.translator.decode.replace(nbest=alternatives + 1,
                                                beam_size=max(self.translator.decode.beam_size, alternatives + 1))
        if html:  # as LibreTranslate: no alternatives for HTML
            translated, others = await self.translate_html(request, texts, decode), [[] for _ in texts]
        else:
            done = await self.run(request, [Marked(text) for text in texts], decode)
            translated = [t.text for t in done.texts]
            others = alternative_texts(done, translated, alternatives)
        answer = {"translatedText": translated if isinstance(q, list) else translated[0]}
        if params["source"] == "auto":  # the model has one source language: that is the one "detected"
            detected = [{"confidence": confidence(text, self.source), "language": self.source} for text in texts]
            answer["detectedLanguage"] = detected if isinstance(q, list) else detected[0]
        if alternatives > 0:
            answer["alternatives"] = others if isinstance(q, list) else others[0]
        return _json(answer)

    async def translate_file(self, request):
        """A file (multipart field `file`) translated whole in its format; answered with the URL it can be
        downloaded from (once, for a while), as LibreTranslate answers."""
        params = await self.params(request)
        self.admit(request, params)
        upload = params.get("file")
        for name, given in (("file", isinstance(upload, Upload)), ("source", params.get("source")),
                            ("target", params.get("target"))):
            if not given:
                raise ApiError(400, f"Invalid request: missing {name} parameter")
        name = PurePosixPath(upload.name.replace("\\", "/")).name  # a path's last part only
        if not name:
            raise ApiError(400, "Invalid request: empty file")
        self.language(params["source"], self.source, allow_auto=True)
        self.language(params["target"], self.target)
        try:  # in a thread: reading a large document takes a while, and the server answers others meanwhile
            document = await asyncio.to_thread(read_document, name, upload.data, self.limits.body_limit)
        except MtError as e:
            raise ApiError(400, f"Invalid request: {e}")
        done = await self.run(request, document.texts, self.translator.decode)
        output = await asyncio.to_thread(document.render, done.texts)
        path = PurePosixPath(name)
        stored = self.downloads.put(f"{path.stem}_{params['target']}{path.suffix}", output)
        return _json({"translatedFileUrl": str(request.url_for("download_file", name=quote(stored, safe="")))})

    async def download_file(self, request):
        name, data = self.downloads.take(request.path_params["name"])
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(data, media_type=kind, headers={"Content-Disposition": _attachment(name)})

    async def detect(self, request):
        """The model's source language, and its target language where the text looks like it (a translation),
        each with the share of the text's letters written in its script as the confidence: a model that translates
        one language pair has no other language to tell apart."""
        params = await self.params(request)
        self.admit(request, params)
        if not params.get("q"):
            raise ApiError(400, "Invalid request: missing q parameter")
        text = " ".join(self.texts(params["q"]))
        found = [{"confidence": confidence(text, self.source), "language": self.source}]
        if self.target != self.source and confidence(text, self.target) > 0:
            found.append({"confidence": confidence(text, self.target), "language": self.target})
        return _json(sorted(found, key=lambda language: -language["confidence"]))

    async def languages(self, request):
        """Both languages, as clients check a request's source and target against this list: the target has no
        targets of its own here."""
        return _json([{"code": self.source, "name": LANGUAGE_NAMES.get(self.source, self.source),
                       "targets": [self.target]},
                      {"code": self.target, "name": LANGUAGE_NAMES.get(self.target, self.target), "targets": []}])

    async def frontend_settings(self, request):
        def language(code):
            return {"code": code, "name": LANGUAGE_NAMES.get(code, code)}

        return _json({"charLimit": self.limits.char_limit, "frontendTimeout": 500, "apiKeys": bool(self.api_keys),
                      "keyRequired": bool(self.api_keys), "suggestions": False, "filesTranslation": True,
                      "supportedFilesFormat": list(FORMATS),
                      "language": {"source": language(self.source), "target": language(self.target)}})

    async def health(self, request):
        return _json({"status": "ok"})

    # ------------------------------------------------------------ mt's own API and page

    async def translate(self, request):
        """{"q": text, "attention", and the decode options of `mt translate` by their names there: "beam", "alpha",
        "nbest", "split", …} → each line's translation, its n-best (its sentences' rejoined) with scores, and its
        sentences, each with its own n-best and, with "attention": true, each translation's cross-attention (per
        layer, heads averaged; a CTranslate2 export's last layer only)."""
        params = await self.params(request)
        self.admit(request, params)
        if not isinstance(params.get("q"), str) or not params["q"]:
            raise ApiError(400, "Invalid request: q must be a text")
        [text] = self.texts(params["q"])
        given = {key: self.flag(params[name], name) if OPTION_KINDS[key] is bool
                 else self.number(params[name], name, 0, None, OPTION_KINDS[key])
                 for key, name in API_OPTIONS.items() if params.get(name) is not None}
        try:
            decode = self.translator.decode.replace(API_OPTIONS, **given)
        except MtError as e:
            raise ApiError(400, str(e))
        if decode.beam_size > self.limits.max_beam:
            raise ApiError(400, f"beam {decode.beam_size}: this server allows at most {self.limits.max_beam}")
        attention = self.flag(params.get("attention", False), "attention")
        lines = text.split("\n")
        done = await self.run(request, [Marked(line) for line in lines], decode, attention)
        return _json({"decode": dataclasses.asdict(decode), "lines": lines_json(lines, done)})

    async def info(self, request):
        config = self.translator.config
        return _json({"engine": self.engine, "compute_type": self.translator.engine.compute_type,
                      "source": self.source, "target": self.target, **self.translator.facts,
                      "model": dataclasses.asdict(config.model),
                      "vocabulary": {"source": self.translator.tokenizer.src_vocab_size,
                                     "target": self.translator.tokenizer.tgt_vocab_size,
                                     "joint": self.translator.tokenizer.joint},
                      "decode": dataclasses.asdict(config.decode), "limits": dataclasses.asdict(self.limits),
                      "cache": self.cache.counts()})

    async def index(self, request):
        return HTMLResponse(self.page, headers={"Content-Security-Policy": "default-src 'self'; script-src "
                                                "'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"})

    # ------------------------------------------------------------ one request's steps

    async def params(self, request) -> dict:
        """The request's parameters: its query string, then its JSON or form body (a multipart form's files as
        Uploads)."""
        params = dict(request.query_params)
        body = await self.body(request)
        if not body:
            return params
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        try:
            if kind == "application/json":
                data = json.loads(body)
                if not isinstance(data, dict):
                    raise ApiError(400, "Invalid JSON format")
                return params | data
            if kind == "application/x-www-form-urlencoded":
                form = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="strict"))
            elif kind == "multipart/form-data":
                form = await _multipart(request, body)
            else:
                raise ApiError(400, f"Invalid request: send JSON or a form, not {kind or 'a body without a type'}")
        except UnicodeDecodeError:
            raise ApiError(400, "Invalid request: the body is not valid UTF-8")
        except ValueError:  # json.JSONDecodeError, and multipart's parse errors
            raise ApiError(400, "Invalid JSON format" if kind == "application/json" else "Invalid request: bad form")
        if isinstance(form.get("q"), str):  # as LibreTranslate does: a form's line ends become \n
            form["q"] = "\n".join(form["q"].splitlines())
        return params | form

    async def body(self, request) -> bytes:
        """The body, refused when longer than the limit (413) or slower than the timeout (408)."""
        limit = self.limits.body_limit
        if int(request.headers.get("content-length") or 0) > limit:
            raise ApiError(413, f"Request body over the limit of {limit:,} bytes")

        async def read() -> bytes:
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise ApiError(413, f"Request body over the limit of {limit:,} bytes")
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            return await asyncio.wait_for(read(), self.limits.body_timeout)
        except asyncio.TimeoutError:
            raise ApiError(408, f"Request body not received within {self.limits.body_timeout:g} s")

    def admit(self, request, params: dict) -> None:
        """The API key (when the server has keys) and the client's request rate."""
        key = params.get("api_key")
        if self.api_keys and not key:
            raise ApiError(403, "Invalid request: this server needs an API key (api_key)")
        if self.api_keys and key not in self.api_keys:
            raise ApiError(403, "Invalid API key")
        # A client is its API key where the server has keys, else its address: a made-up key is no new client.
        client = key if self.api_keys else request.client.host if request.client else ""
        if self.rate and not self.limiter.hit(self.rate, client):
            raise ApiError(429, f"Slowdown: {self.rate}")  # "Slowdown: 3 per 1 minute", as LibreTranslate says

    def texts(self, q) -> list[str]:
        """`q` as a list of texts, within the limits."""
        texts = q if isinstance(q, list) else [q]
        if not all(isinstance(text, str) for text in texts):
            raise ApiError(400, "Invalid request: q must be a text or a list of texts")
        if isinstance(q, list) and len(q) > self.limits.batch_limit:
            raise ApiError(400, f"Invalid request: request ({len(q)}) exceeds text limit ({self.limits.batch_limit})")
        for text in texts:
            if len(text) > self.limits.char_limit:
                raise ApiError(400, f"Invalid request: request ({len(text)}) exceeds text limit "
                                    f"({self.limits.char_limit})")
        return texts

    def language(self, code, expected: str, allow_auto: bool = False) -> None:
        if not (code == expected or code in ALIASES.get(expected, ()) or (allow_auto and code == "auto")):
            raise ApiError(400, f"{code} is not supported (this model translates {self.source} to {self.target})")

    @staticmethod
    def is_html(value) -> bool:
        """Whether `format` is HTML (else text, the default)."""
        if value not in (None, "", "text", "html"):
            raise ApiError(400, f"{value} format is not supported (supported: text, html)")
        return value == "html"

    @staticmethod
    def number(value, name: str, least: int, most: int | None, kind=int):
        """A number parameter (JSON number, or a form's text)."""
        try:
            number = kind(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is None or number < least or (most is not None and number > most):
            allowed = f"from {least}" + (f" to {most}" if most is not None else "")
            raise ApiError(400, f"Invalid request: {name} parameter must be a number {allowed}")
        return number

    @staticmethod
    def flag(value, name: str) -> bool:
        """A yes-or-no parameter: JSON's true or false, or a form's text "true" or "false"."""
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise ApiError(400, f"Invalid request: {name} parameter must be true or false")
        return value

    async def translate_html(self, request, pages: list[str], decode: DecodeConfig) -> list[str]:
        """Each HTML text translated: its blocks' texts, with their inline elements placed on the translation."""
        try:  # in a thread, as a long text takes a while
            read = await asyncio.to_thread(lambda: [read_html(page) for page in pages])
        except MtError as e:
            raise ApiError(400, f"Invalid request: {e}")
        done = await self.run(request, [text for page in read for text in page.texts], decode)
        rendered, start = [], 0
        for page in read:
            rendered.append(page.render(done.texts[start:start + len(page.texts)]))
            start += len(page.texts)
        return rendered

    async def run(self, request, texts: list[Marked], decode: DecodeConfig, attention: bool = False) -> Done:
        """The texts through the model: split into sentences (unless decode.split_sentences is off), the sentences
        translated, the texts put back. Placing marks reads the model again (mt/text/align.py): then the texts are
        put back on the worker's thread. A long text is split and put back in a thread, as that takes a while and
        the server answers others meanwhile; a short one right here, which spares a cache hit two thread hops."""
        short = sum(len(text.text) for text in texts) <= SHORT_TEXT

        async def step(function, *args):
            return function(*args) if short else await asyncio.to_thread(function, *args)

        split = await step(split_for, self.translator, texts, decode.split_sentences)
        found, maps = await self.translate_sentences(request, [s.text for s in split.sentences], decode, attention)
        if any(sentence.spans for sentence in split.sentences):
            put_back = await self.on_worker(request, self.worker.call, lambda: finish(self.translator, split, found))
        else:
            put_back = await step(finish, self.translator, split, found)
        return Done(split, found, maps, put_back)

    async def translate_sentences(self, request, sentences: list[str], decode: DecodeConfig, attention: bool):
        """Each sentence's n-best, and with `attention` each translation's attention map. From the cache where it
        has them and no map is asked for; the others (each once) from the worker, as one job."""
        settings = dataclasses.astuple(decode)
        found = [None if attention else self.cache.get((sentence, settings)) for sentence in sentences]
        todo = list(dict.fromkeys(sentence for sentence, hit in zip(sentences, found) if hit is None))
        done, maps = {}, {}
        if todo:
            nbests, attentions = await self.on_worker(request, self.worker.submit, todo, decode, attention)
            for sentence, nbest in zip(todo, nbests):
                self.cache.put((sentence, settings), nbest)
            done, maps = dict(zip(todo, nbests)), dict(zip(todo, attentions or []))
        found = [hit or done[sentence] for sentence, hit in zip(sentences, found)]
        return found, [maps.get(sentence, [None] * len(nbest)) for sentence, nbest in zip(sentences, found)]

    async def on_worker(self, request, submit, *args):
        """What the worker gives for work queued with `submit` (its submit or call). A client that leaves while
        its request waits cancels the work, which the worker then skips."""
        try:
            job = submit(*args)
        except Busy:
            raise ApiError(503, "The server is busy; try again in a moment")
        result = asyncio.wrap_future(job)
        client_left = asyncio.ensure_future(_disconnected(request))
        try:
            done, _ = await asyncio.wait({result, client_left}, timeout=self.limits.request_timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            client_left.cancel()
        if result not in done:
            job.cancel()
            raise ApiError(503, "Translation timed out in the queue" if not done else "Client disconnected")
        try:
            return result.result()
        except MtError as e:  # a refusal: e.g. marks to place with an engine that gives no attention
            raise ApiError(400, f"Invalid request: {e}") from e
        except Exception as e:  # the worker has logged it: an ApiError, unlike other faults, is not logged again
            raise ApiError(500, f"Cannot translate text: {e}") from e


def _attachment(name: str) -> str:
    """A Content-Disposition that names the download: RFC 6266's filename*, where the name is not plain ASCII."""
    quoted = quote(name)
    return f'attachment; filename="{name}"' if quoted == name else f"attachment; filename*=utf-8''{quoted}"


async def _disconnected(request) -> None:
    """Returns when the client has closed its connection."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _multipart(request, body: bytes) -> dict:
    async def replay():
        return {"type": "http.request", "body": body, "more_body": False}

    form = await Request(request.scope, replay).form()
    try:
        return {key: value if isinstance(value, str) else Upload(value.filename or "", await value.read())
                for key, value in form.items()}
    finally:
        await form.close()


def _json(data, status: int = 200):
    return JSONResponse(data, status_code=status)


def create_app(translator: Translator, engine: str, limits: ServeConfig, api_keys: frozenset[str] = frozenset()):
    """The ASGI application (Starlette)."""
    # A malformed multipart form is answered 400; its parser's own warning for each would let any client fill the log.
    logging.getLogger("python_multipart").setLevel(logging.ERROR)
    api = Api(translator, engine, limits, api_keys)

    async def refused(request, error: ApiError):
        return _json({"error": str(error)}, error.status)

    async def http_error(request, error: HTTPException):  # no such page (404), or a wrong method (405)
        return _json({"error": error.detail}, error.status_code)

    async def failed(request, error: Exception):  # a fault of ours outside the worker: uvicorn logs it
        return _json({"error": f"Cannot translate text: {error}"}, 500)

    routes = [Route("/", api.index), Route("/translate", api.libre_translate, methods=["POST"]),
              Route("/translate_file", api.translate_file, methods=["POST"]),
              Route("/download_file/{name}", api.download_file, name="download_file"),
              Route("/detect", api.detect, methods=["POST"]),
              Route("/languages", api.languages, methods=["GET", "POST"]),
              Route("/frontend/settings", api.frontend_settings), Route("/health", api.health),
              Route("/api/translate", api.translate, methods=["POST"]), Route("/api/info", api.info)]
    return Starlette(routes=routes, lifespan=api.lifespan,
                     exception_handlers={ApiError: refused, HTTPException: http_error, Exception: failed})
