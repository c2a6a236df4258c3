"""mt's own API and its page: POST /api/translate (each sentence's n-best with scores, mt translate's decoding
options, cross-attention maps), GET /api/info (the model's facts, the cache's counts), an operator's routes
(suggestions, POST /api/model), and the page at / (mt/serve/web/index.html, one self-contained file: it works
offline)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from mt.core.errors import MtError
from mt.decode.translator import Translator
from mt.serve.admission import Admission
from mt.serve.answers import lines_json
from mt.serve.errors import ApiError
from mt.serve.pipeline import Pipeline
from mt.serve.requests import DECODE_OPTIONS, DecisionRequest, ModelRequest, SuggestionsRequest, TranslateRequest
from mt.serve.suggestions import Suggestions
from mt.text.marks import Marked

log = logging.getLogger(__name__)


class MtApi:
    """mt's own handlers and the page."""

    def __init__(self, pipeline: Pipeline, admission: Admission, engine: str,
                 load: Callable[[Path], Translator] | None = None):
        """load: a checkpoint loaded as the served one was (device, compute type, the server's decode settings),
        for POST /api/model; None: the served model cannot change (the CTranslate2 engine's export)."""
        self.pipeline, self.admission, self.engine, self.load = pipeline, admission, engine, load
        self.limits = admission.bounds.limits
        self.page = (resources.files("mt.serve") / "web" / "index.html").read_text(encoding="utf-8")

    @property
    def translator(self) -> Translator:
        return self.pipeline.translator

    async def translate(self, request: Request) -> Response:
        """{"q": text, "attention", "glossary", and the decode options of `mt translate` by their names there:
        "beam", "alpha", "nbest", "split", …} → each line's translation, its n-best (its sentences' rejoined) with
        scores, and its sentences, each with its own n-best and, with "attention": true, each translation's
        cross-attention (per layer, heads averaged; a CTranslate2 export's last layer only); with a glossary (the
        request's or the server's), what became of each term, per line and per sentence translation."""
        ask = await self.admission.admit(request, TranslateRequest)
        try:
            decode = self.translator.decode.replace(DECODE_OPTIONS, **ask.decode_values())
        except MtError as e:
            raise ApiError(400, str(e))
        try:
            self.limits.check_beam(decode.beam_size)
        except MtError:
            raise ApiError(400, f"beam {decode.beam_size}: this server allows at most {self.limits.max_beam}")
        lines, glossary = ask.q.split("\n"), self.pipeline.terms(ask.glossary)
        done = await self.pipeline.translate(request, [Marked(line) for line in lines], decode, ask.attention,
                                             glossary)
        answer = lines_json(lines, done, terms=glossary is not None)
        return JSONResponse({"decode": dataclasses.asdict(decode), "lines": answer})

    async def suggestions(self, request: Request) -> Response:
        """An operator's list of the suggestions, newest first (one of the server's API keys needed)."""
        store = self._operated()
        ask = await self.admission.admit(request, SuggestionsRequest)
        return JSONResponse({"suggestions": await asyncio.to_thread(store.listed, ask.status, ask.limit)})

    async def decide(self, request: Request) -> Response:
        """An operator's decision on a suggestion: accepted (it answers its source) or refused (it does not)."""
        store = self._operated()
        ask = await self.admission.admit(request, DecisionRequest)
        number = request.path_params["number"]
        row = await asyncio.to_thread(store.decide, number, ask.status, ask.reason or f"{ask.status} by an operator")
        if row is None:
            raise ApiError(404, f"no suggestion {number}")
        return JSONResponse(row)

    async def model(self, request: Request) -> Response:
        """An operator's change of the served model (one of the server's API keys needed): the checkpoint loads
        while the served model answers, then serves from the next batch on; no request is dropped."""
        if self.load is None:
            raise ApiError(403, "The CTranslate2 engine serves the export it started with")
        if not self.admission.api_keys:
            raise ApiError(403, "Changing the model needs one of the server's API keys: start it with --api-keys")
        ask = await self.admission.admit(request, ModelRequest)
        try:
            translator = await asyncio.to_thread(self.load, Path(ask.checkpoint))
        except MtError as e:
            raise ApiError(400, f"Cannot load {ask.checkpoint}: {e}")
        await self.pipeline.change_model(request, translator)
        log.info(f"serving {ask.checkpoint} (step {translator.facts.get('step')})")
        return JSONResponse({"checkpoint": ask.checkpoint, **translator.facts})

    def _operated(self) -> Suggestions:
        """The suggestions, where the server keeps them and has API keys, which an operator's requests need."""
        if self.pipeline.suggestions is None:
            raise ApiError(403, "Suggestions are disabled on this server.")
        if not self.admission.api_keys:
            raise ApiError(403, "Deciding on suggestions needs one of the server's API keys: start it with --api-keys")
        return self.pipeline.suggestions

    async def info(self, request: Request) -> Response:
        config, tokenizer = self.translator.config, self.translator.tokenizer
        return JSONResponse({"engine": self.engine, "compute_type": self.translator.engine.compute_type,
                             "source": config.data.src_lang, "target": config.data.tgt_lang, **self.translator.facts,
                             "model": dataclasses.asdict(config.model),
                             "vocabulary": {"source": tokenizer.src_vocab_size, "target": tokenizer.tgt_vocab_size,
                                            "joint": tokenizer.joint},
                             "decode": dataclasses.asdict(config.decode), "limits": dataclasses.asdict(self.limits),
                             "cache": self.pipeline.cache.counts()})

    async def index(self, request: Request) -> Response:
        return HTMLResponse(self.page, headers={"Content-Security-Policy": "default-src 'self'; script-src "
                                                "'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"})
