"""`mt serve`: a trained model behind HTTP, for the clients people already have and a page to try it in.

- LibreTranslate's API, as its clients expect it: POST /translate, GET /languages, GET /frontend/settings,
  GET /health; JSON or form bodies; errors as {"error": …} with its status codes.
- mt's own: POST /api/translate (n-best with scores, mt translate's decoding options, cross-attention maps) and
  GET /api/info (the model's facts).
- The page at / (mt/serve/web/index.html, one self-contained file: it works offline).

Every request's lines go through one BatchingWorker (mt/serve/batcher.py), which decodes concurrent requests together.
Starlette on uvicorn: a small, well-kept ASGI stack; LibreTranslate's API fixes our request and answer shapes,
so FastAPI's schema generation and validation would add a layer without doing a job here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
import logging
import signal
import socket
from contextlib import asynccontextmanager
from importlib import resources
from urllib.parse import parse_qsl

import uvicorn
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from mt.serve.batcher import BatchingWorker, Busy
from mt.config import DecodeConfig, ServeConfig, flag_of
from mt.core.errors import MtError
from mt.decode.translator import Attention, Translator

log = logging.getLogger(__name__)

LANGUAGE_NAMES = {"ar": "Arabic", "de": "German", "en": "English", "es": "Spanish", "fr": "French", "it": "Italian",
                  "ja": "Japanese", "ko": "Korean", "pt": "Portuguese", "ru": "Russian", "zh": "Chinese"}
ALIASES = {"zh": ("zh-Hans", "zh-Hant", "zh-CN", "zh-TW")}  # mt's tokenizer converts either Chinese script
# The decode keys a request may set, by the names of their command-line options: beam, alpha, nbest, …
API_OPTIONS = {f.name: flag_of(f)[2:].replace("-", "_") for f in dataclasses.fields(DecodeConfig)
               if f.metadata["per_request"]}
NUMBER_KINDS = {f.name: type(f.default) for f in dataclasses.fields(DecodeConfig)}  # int or float


class ApiError(Exception):
    """A request the server refuses: answered {"error": message} with this HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Api:
    """The handlers, sharing one translator (behind its worker) and the server's limits."""

    def __init__(self, translator: Translator, engine: str, limits: ServeConfig, api_keys: frozenset[str]):
        self.translator, self.engine, self.limits, self.api_keys = translator, engine, limits, api_keys
        # --req-limit with the package LibreTranslate's limiter (Flask-Limiter) is built on: its fixed windows count
        # as LibreTranslate's do, and each client's count expires with its window.
        self.rate = RateLimitItemPerMinute(limits.req_limit) if limits.req_limit else None
        self.limiter = FixedWindowRateLimiter(MemoryStorage()) if self.rate else None
        data = translator.config.data
        self.source, self.target = data.src_lang, data.tgt_lang
        self.page = (resources.files("mt.serve") / "web" / "index.html").read_text(encoding="utf-8")
        self.worker: BatchingWorker | None = None

    @asynccontextmanager
    async def lifespan(self, app):
        self.worker = BatchingWorker(self.translator, self.limits.batch_wait_ms, self.limits.batch_tokens,
                                     self.limits.queue_size)
        try:
            yield
        finally:  # uvicorn has answered the requests in flight by now
            await asyncio.to_thread(self.worker.stop)

    # ------------------------------------------------------------ LibreTranslate's API

    async def libre_translate(self, request):
        params = await self.params(request)
        self.admit(request, params)
        q = params.get("q")
        for name in ("q", "source", "target"):
            if not params.get(name):
                raise ApiError(400, f"Invalid request: missing {name} parameter")
        texts = self.texts(q)
        self.language(params["source"], self.source, allow_auto=True)
        self.language(params["target"], self.target)
        if params.get("format") not in (None, "", "text"):
            raise ApiError(400, f"{params['format']} format is not supported (mt translates plain text)")
        alternatives = self.number(params.get("alternatives", 0), "alternatives", 0, self.limits.max_beam - 1)
        decode = self.translator.decode.replace(nbest=alternatives + 1,
                                                beam_size=max(self.translator.decode.beam_size, alternatives + 1))
        lines = [text.split("\n") for text in texts]  # one translation per line, as `mt translate` gives
        found, _ = await self.translate_lines(request, [line for text in lines for line in text], decode)
        results = []
        for text_lines in lines:
            mine, found = found[:len(text_lines)], found[len(text_lines):]
            results.append(_join(mine, alternatives))
        answer = {"translatedText": [r[0] for r in results] if isinstance(q, list) else results[0][0]}
        if params["source"] == "auto":  # the model has one source language: that is the one "detected"
            detected = {"confidence": 100.0, "language": self.source}
            answer["detectedLanguage"] = [detected] * len(texts) if isinstance(q, list) else detected
        if alternatives > 0:
            answer["alternatives"] = [r[1] for r in results] if isinstance(q, list) else results[0][1]
        return _json(answer)

    async def languages(self, request):
        return _json([{"code": self.source, "name": LANGUAGE_NAMES.get(self.source, self.source),
                       "targets": [self.target]}])

    async def frontend_settings(self, request):
        def language(code):
            return {"code": code, "name": LANGUAGE_NAMES.get(code, code)}

        return _json({"charLimit": self.limits.char_limit, "frontendTimeout": 500, "apiKeys": bool(self.api_keys),
                      "keyRequired": bool(self.api_keys), "suggestions": False, "filesTranslation": False,
                      "supportedFilesFormat": [],
                      "language": {"source": language(self.source), "target": language(self.target)}})

    async def health(self, request):
        return _json({"status": "ok"})

    # ------------------------------------------------------------ mt's own API and page

    async def translate(self, request):
        """{"q": text, "attention", and the decode options of `mt translate` by their names there: "beam", "alpha",
        "nbest", "no_repeat_ngram", …} → each line's n-best with
        scores, and with "attention": true each translation's cross-attention (per layer, heads averaged)."""
        params = await self.params(request)
        self.admit(request, params)
        if not isinstance(params.get("q"), str) or not params["q"]:
            raise ApiError(400, "Invalid request: q must be a text")
        [text] = self.texts(params["q"])
        given = {key: self.number(params[name], name, 0, None, NUMBER_KINDS[key])
                 for key, name in API_OPTIONS.items() if params.get(name) is not None}
        try:
            decode = self.translator.decode.replace(API_OPTIONS, **given)
        except MtError as e:
            raise ApiError(400, str(e))
        if decode.beam_size > self.limits.max_beam:
            raise ApiError(400, f"beam {decode.beam_size}: this server allows at most {self.limits.max_beam}")
        attention = params.get("attention") is True
        if attention and self.engine != "mt":
            raise ApiError(400, "attention maps need mt's own engine; this server runs a CTranslate2 export")
        lines = text.split("\n")
        found, maps = await self.translate_lines(request, lines, decode, attention)
        return _json({"decode": dataclasses.asdict(decode), "lines": [
            {"source": line, "translations": [
                {"text": t.text, "score": round(t.score, 4),
                 **({"attention": _attention_json(maps[i][j])} if attention and maps[i][j] else {})}
                for j, t in enumerate(nbest)]}
            for i, (line, nbest) in enumerate(zip(lines, found))]})

    async def info(self, request):
        config = self.translator.config
        return _json({"engine": self.engine, "source": self.source, "target": self.target,
                      **self.translator.facts, "model": dataclasses.asdict(config.model),
                      "vocabulary": {"source": self.translator.tokenizer.src_vocab_size,
                                     "target": self.translator.tokenizer.tgt_vocab_size,
                                     "joint": self.translator.tokenizer.joint},
                      "decode": dataclasses.asdict(config.decode), "limits": dataclasses.asdict(self.limits)})

    async def index(self, request):
        return HTMLResponse(self.page, headers={"Content-Security-Policy": "default-src 'self'; script-src "
                                                "'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"})

    # ------------------------------------------------------------ one request's steps

    async def params(self, request) -> dict:
        """The request's parameters: its query string, then its JSON or form body."""
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

    async def translate_lines(self, request, lines: list[str], decode: DecodeConfig, attention: bool = False):
        """The n-best translations (and attention maps) of the lines, from the worker. A client that leaves
        while its request waits cancels the request's job, which the worker then skips."""
        try:
            job = self.worker.submit(lines, decode, attention)
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
        except Exception as e:  # the worker has logged it: an ApiError, unlike other faults, is not logged again
            raise ApiError(500, f"Cannot translate text: {e}") from e


def _join(found: list[list], alternatives: int) -> tuple[str, list[str]]:
    """A text's lines' n-best → its translation and up to `alternatives` different ones, line by line."""
    best = "\n".join(nbest[0].text for nbest in found)
    others = ["\n".join(nbest[min(i, len(nbest) - 1)].text for nbest in found) for i in range(1, alternatives + 1)]
    return best, list(dict.fromkeys(text for text in others if text != best))


def _attention_json(attention: Attention) -> dict:
    """Pieces and per-layer weights [layers][T][S] (heads averaged), rounded for the page."""
    layers = attention.weights.mean(dim=1)
    return {"source": attention.source, "target": attention.target,
            "layers": [[[round(w, 4) for w in row] for row in layer] for layer in layers.tolist()]}


async def _disconnected(request) -> None:
    """Returns when the client has closed its connection."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _multipart(request, body: bytes) -> dict:
    async def replay():
        return {"type": "http.request", "body": body, "more_body": False}

    form = await Request(request.scope, replay).form()
    return {key: value for key, value in form.items() if isinstance(value, str)}


def _json(data, status: int = 200):
    return JSONResponse(data, status_code=status)


def create_app(translator: Translator, engine: str, limits: ServeConfig, api_keys: frozenset[str] = frozenset()):
    """The ASGI application (Starlette)."""
    api = Api(translator, engine, limits, api_keys)

    async def refused(request, error: ApiError):
        return _json({"error": str(error)}, error.status)

    async def http_error(request, error: HTTPException):  # no such page (404), or a wrong method (405)
        return _json({"error": error.detail}, error.status_code)

    async def failed(request, error: Exception):  # a fault of ours outside the worker: uvicorn logs it
        return _json({"error": f"Cannot translate text: {error}"}, 500)

    routes = [Route("/", api.index), Route("/translate", api.libre_translate, methods=["POST"]),
              Route("/languages", api.languages, methods=["GET", "POST"]),
              Route("/frontend/settings", api.frontend_settings), Route("/health", api.health),
              Route("/api/translate", api.translate, methods=["POST"]), Route("/api/info", api.info)]
    return Starlette(routes=routes, lifespan=api.lifespan,
                     exception_handlers={ApiError: refused, HTTPException: http_error, Exception: failed})


def serve(translator: Translator, engine: str, limits: ServeConfig, host: str, port: int,
          api_keys: frozenset[str] = frozenset()) -> None:
    """Serve until SIGTERM or Ctrl-C, which stop accepting, finish the requests in flight, and return."""
    sock = _listen(host, port)
    address = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}"
    if not ipaddress.ip_address(sock.getsockname()[0]).is_loopback and not api_keys:
        log.warning(f"listening on {host}, which other machines can reach, with no API keys (--api-keys FILE)")
    config = uvicorn.Config(create_app(translator, engine, limits, api_keys), log_level="warning", access_log=False,
                            timeout_graceful_shutdown=int(limits.request_timeout) + 5)
    server = uvicorn.Server(config)
    log.info(f"serving {engine} on {address} (the page at /, LibreTranslate's API at /translate; Ctrl-C stops)")
    # uvicorn catches SIGTERM and SIGINT for its graceful shutdown, then raises them again for the handlers it
    # found; handlers that do nothing make that a normal return (exit status 0).
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("stopped")


def _listen(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        raise MtError(f"--host {host}: expected an IP address, e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (all)")
    # IPPROTO_TCP named: asyncio then sets TCP_NODELAY on each connection, so that an answer's header and body do
    # not wait for the client's delayed ACK on a kept-alive connection (docs/serving.md)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)  # connections wait in the backlog until uvicorn has started
    except OSError as e:
        sock.close()
        raise MtError(f"--host {host} --port {port}: cannot listen there ({e.strerror})")
    return sock


def read_api_keys(path) -> frozenset[str]:
    """One key per line; blank lines and lines starting with # are skipped."""
    from mt.core.lines import read_lines

    keys = frozenset(line.strip() for line in read_lines(path) if line.strip() and not line.startswith("#"))
    if not keys:
        raise MtError(f"{path}: no API keys in it (one per line)")
    return keys
