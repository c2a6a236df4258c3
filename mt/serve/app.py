"""`mt serve`: a trained model behind HTTP, for the clients people already have and a page to try it in. This file
wires the parts into one ASGI application:

- LibreTranslate's API (mt/serve/libretranslate.py) and mt's own API with its page (mt/serve/mt_api.py);
- the way in that both take (mt/serve/admission.py): the body read within its limits (mt/serve/bodies.py), the
  client's API key and request rate, and the parameters parsed into the route's schema (mt/serve/requests.py);
- the translation pipeline that both call (mt/serve/pipeline.py): split, cache, worker, rejoin.

Starlette (run on uvicorn by mt/serve/server.py): a small, well-kept ASGI stack. LibreTranslate's API fixes our
request and answer shapes, and pydantic models of our own declare the requests' fields, so FastAPI would add a layer
without doing a job here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.routing import Route

from mt.data.glossary import Glossary
from mt.decode.translator import Translator
from mt.serve.admission import Admission
from mt.serve.errors import ApiError
from mt.serve.libretranslate import LibreTranslate
from mt.serve.limits import ServeConfig
from mt.serve.mt_api import MtApi
from mt.serve.pipeline import Pipeline
from mt.serve.requests import Bounds
from mt.serve.suggestions import Suggestions


def create_app(translator: Translator, engine: str, limits: ServeConfig, api_keys: frozenset[str] = frozenset(),
               glossary: Glossary | None = None, soft: bool = False, suggestions: Path | None = None,
               load: Callable[[Path], Translator] | None = None):
    """The ASGI application (Starlette), with the server's glossary for requests that bring none; `soft`: the
    glossaries' mode (mt/text/glossary_modes.py); `suggestions`: the SQLite file that keeps them
    (mt/serve/suggestions.py; none: POST /suggest is refused, as LibreTranslate refuses it by default); `load`:
    how POST /api/model loads another checkpoint (none: it is refused)."""
    # A malformed multipart form is answered 400; its parser's own warning for each would let any client fill the log.
    logging.getLogger("python_multipart").setLevel(logging.ERROR)
    data = translator.config.data
    admission = Admission(Bounds(limits, data.src_lang, data.tgt_lang), api_keys)
    pipeline = Pipeline(translator, limits, glossary, soft, Suggestions(suggestions) if suggestions else None)
    libre, own = LibreTranslate(pipeline, admission), MtApi(pipeline, admission, engine, load)

    @asynccontextmanager
    async def lifespan(app):
        pipeline.start()
        libre.start()
        try:
            yield
        finally:  # uvicorn has answered the requests in flight by now
            await asyncio.to_thread(pipeline.stop)
            libre.stop()
            if pipeline.suggestions is not None:
                pipeline.suggestions.close()

    async def refused(request, error: ApiError):
        return JSONResponse({"error": str(error)}, error.status)

    async def http_error(request, error: HTTPException):  # no such page (404), or a wrong method (405)
        return JSONResponse({"error": error.detail}, error.status_code)

    async def failed(request, error: Exception):  # a fault of ours outside the worker: uvicorn logs it
        return JSONResponse({"error": f"Cannot translate text: {error}"}, 500)

    routes = [Route("/", own.index), Route("/translate", libre.translate, methods=["POST"]),
              Route("/translate_file", libre.translate_file, methods=["POST"]),
              Route("/download_file/{name}", libre.download_file, name="download_file"),
              Route("/detect", libre.detect, methods=["POST"]),
              Route("/languages", libre.languages, methods=["GET", "POST"]),
              Route("/frontend/settings", libre.frontend_settings), Route("/health", libre.health),
              Route("/suggest", libre.suggest, methods=["POST"]),
              Route("/api/translate", own.translate, methods=["POST"]), Route("/api/info", own.info),
              Route("/api/suggestions", own.suggestions, methods=["GET"]),
              Route("/api/suggestions/{number:int}", own.decide, methods=["POST"]),
              Route("/api/model", own.model, methods=["POST"])]
    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={ApiError: refused, HTTPException: http_error, Exception: failed})
