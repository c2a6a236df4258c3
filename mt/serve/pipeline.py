"""Texts through the model, for both APIs: each text split into sentences (mt/text/texts.py's split_for), the
sentences the translation cache knows taken from it (mt/serve/translation_cache.py), the others decoded as one job
of the BatchingWorker (mt/serve/batcher.py), which decodes concurrent requests together, and each text put back in
its shape (finish), with its marks (HTML's inline elements, a document's runs) placed by the cross-attention."""

from __future__ import annotations

import asyncio
import dataclasses
import functools

from starlette.requests import Request

from mt.config import DecodeConfig
from mt.core.errors import MtError
from mt.data.glossary import Glossary, merged
from mt.data.terms import TermFinder
from mt.decode.confidence import Confidence
from mt.decode.translator import Translation, Translator
from mt.text.glossary_modes import GlossaryUse
from mt.serve.answers import Done
from mt.serve.batcher import BatchingWorker, Busy
from mt.serve.continuous import ContinuousWorker
from mt.serve.errors import ApiError
from mt.serve.limits import ServeConfig
from mt.serve.suggestions import Judgement, Suggestions, judge
from mt.serve.translation_cache import Cache
from mt.text.marks import Marked
from mt.text.texts import finish, split_for

GLOSSARIES_KEPT = 32  # glossaries made ready for the model, kept: a client sends the same one again and again
SHORT_TEXT = 2_000  # characters a request's texts may hold to be split and put back on the event loop's thread


class Pipeline:
    """split → cache → worker → rejoin, with one translator behind its worker, and the server's glossary (mt serve
    --glossary) for requests that bring none. The worker runs between start and stop (the application's
    lifespan)."""

    def __init__(self, translator: Translator, limits: ServeConfig, glossary: Glossary | None = None,
                 soft: bool = False, suggestions: Suggestions | None = None):
        self.translator, self.limits, self.glossary, self.soft = translator, limits, glossary, soft
        self.suggestions = suggestions  # their accepted ones answer their sources (mt serve --suggestions)
        # each request's glossary is merged with the server's, which may be long: made ready once, kept a while
        self._use = functools.lru_cache(maxsize=GLOSSARIES_KEPT)(self._ready)
        self.default_terms = self._use(glossary) if glossary is not None else None
        self.cache = Cache(limits.cache_size)
        self.worker: BatchingWorker | None = None

    def terms(self, request_glossary: Glossary | None) -> GlossaryUse | None:
        """The terms a request's texts hold: its glossary's over the server's (glossary.merged), or the server's."""
        if request_glossary is None:
            return self.default_terms
        full = request_glossary if self.glossary is None else merged(request_glossary, self.glossary)
        try:
            return self._use(full)
        except MtError as e:
            raise ApiError(400, f"Invalid request: {e}")

    def _ready(self, glossary: Glossary) -> GlossaryUse:
        return GlossaryUse(TermFinder(glossary, self.translator.tokenizer), self.soft)

    def start(self) -> None:
        # an engine with a running search: mt's own (Searcher)
        continuous = self.limits.batching == "continuous" and hasattr(self.translator.engine, "running_search")
        worker = ContinuousWorker if continuous else BatchingWorker
        self.worker = worker(self.translator, self.limits.batch_wait_ms, self.limits.batch_tokens,
                             self.limits.queue_size)

    def stop(self) -> None:
        self.worker.stop()

    async def translate(self, request: Request, texts: list[Marked], decode: DecodeConfig,
                        attention: bool = False, glossary: GlossaryUse | None = None) -> Done:
        """The texts through the model: split into sentences (unless decode.split_sentences is off), the sentences
        translated (each holding its `glossary` terms, and saying what became of them), the texts put back.
        Placing marks reads the model again (mt/text/align.py): then the texts are put back on the worker's
        thread. A long text is split and put back in a thread, as that takes a while and the server answers
        others meanwhile; a short one right here, which spares a cache hit two thread hops."""
        short = sum(len(text.text) for text in texts) <= SHORT_TEXT

        async def step(function, *args):
            return function(*args) if short else await asyncio.to_thread(function, *args)

        split = await step(split_for, self.translator, texts, decode.split_sentences)
        found, maps = await self._sentences(request, [s.text for s in split.sentences], decode, attention, glossary)
        if any(sentence.spans for sentence in split.sentences):
            put_back = await self._on_worker(request, self.worker.call, lambda: finish(self.translator, split, found))
        else:
            put_back = await step(finish, self.translator, split, found)
        return Done(split, found, maps, put_back)

    async def _sentences(self, request: Request, sentences: list[str], decode: DecodeConfig, attention: bool,
                         glossary: GlossaryUse | None):
        """Each sentence's n-best, and with `attention` each translation's attention map. From the cache where it
        has them (for the same settings and glossary) and no map is asked for; the others (each once) from the
        worker, as one job."""
        settings = (dataclasses.astuple(decode), glossary.finder.key if glossary is not None else None)
        cache = self.cache  # the model's that translates them: another model's comes with a cache of its own
        found = [None if attention else self.remembered(sentence) or cache.get((sentence, settings))
                 for sentence in sentences]
        todo = list(dict.fromkeys(sentence for sentence, hit in zip(sentences, found) if hit is None))
        done, maps = {}, {}
        if todo:
            nbests, attentions = await self._on_worker(request, self.worker.submit, todo, decode, attention, glossary)
            for sentence, nbest in zip(todo, nbests):
                cache.put((sentence, settings), nbest)
            done, maps = dict(zip(todo, nbests)), dict(zip(todo, attentions or []))
        found = [hit or done[sentence] for sentence, hit in zip(sentences, found)]
        return found, [maps.get(sentence, [None] * len(nbest)) for sentence, nbest in zip(sentences, found)]

    async def change_model(self, request: Request, translator: Translator) -> None:
        """Serve `translator` from the next batch on, with an empty cache. The swap is queued on the worker, so
        that each batch is decoded by one model; its vocabulary must be the served one's, as the requests queued
        before it were encoded with that."""
        served = self.translator
        if (translator.tokenizer.vocab_hash, translator.tokenizer.scripts, translator.config.data.src_lang,
                translator.config.data.tgt_lang) != (served.tokenizer.vocab_hash, served.tokenizer.scripts,
                                                     served.config.data.src_lang, served.config.data.tgt_lang):
            raise ApiError(400, "Its vocabulary or languages differ from the served model's: serve it with mt serve "
                                "--checkpoint")

        def swap() -> None:
            self.translator = self.worker.translator = translator
            self.cache = Cache(self.limits.cache_size)

        await self._on_worker(request, self.worker.call, swap)

    def remembered(self, sentence: str) -> list[Translation] | None:
        """An accepted suggestion's translation of the sentence, a person's: sure, each word too."""
        if self.suggestions is None or (text := self.suggestions.memory.get(sentence.strip())) is None:
            return None
        return [Translation(text, 0.0, confidence=Confidence(1.0, [(word, 1.0) for word in text.split()]))]

    async def judge(self, request: Request, source: str, suggestion: str) -> Judgement:
        """The model's judgement of a suggestion (suggestions.judge), on the worker's thread."""
        return await self._on_worker(request, self.worker.call, lambda: judge(self.translator, source, suggestion))

    async def _on_worker(self, request: Request, submit, *args):
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


async def _disconnected(request: Request) -> None:
    """Returns when the client has closed its connection."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
