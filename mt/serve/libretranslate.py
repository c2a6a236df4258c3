"""LibreTranslate's API, as its clients expect it: POST /translate (text or HTML), POST /translate_file and
GET /download_file/…, POST /detect, GET /languages, GET /frontend/settings, GET /health; errors as {"error": …} with
its status codes. Translated files wait for their download in mt/serve/downloads.py."""

from __future__ import annotations

import asyncio
import mimetypes
from pathlib import PurePosixPath
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mt.config import DecodeConfig
from mt.core.errors import MtError
from mt.serve.admission import Admission
from mt.serve.answers import Done, alternative_texts, page_confidences, page_failures, page_terms
from mt.serve.downloads import Downloads
from mt.serve.errors import ApiError
from mt.serve.languages import LANGUAGE_NAMES, confidence
from mt.serve.pipeline import Pipeline
from mt.serve.requests import DetectRequest, FileRequest, LibreTranslateRequest, SuggestRequest
from mt.serve.suggestions import Judgement
from mt.text.documents import FORMATS, read_document
from mt.text.glossary_modes import GlossaryUse
from mt.text.markup import read_html
from mt.text.marks import Marked
from mt.text.texts import split_for


class LibreTranslate:
    """LibreTranslate's handlers. Translated files wait in `downloads` between start and stop (the application's
    lifespan)."""

    def __init__(self, pipeline: Pipeline, admission: Admission):
        self.pipeline, self.admission = pipeline, admission
        self.limits = admission.bounds.limits
        self.source, self.target = admission.bounds.source, admission.bounds.target
        self.downloads: Downloads | None = None

    def start(self) -> None:
        self.downloads = Downloads(self.limits.download_timeout, self.limits.download_limit)

    def stop(self) -> None:
        self.downloads.close()

    async def translate(self, request: Request) -> Response:
        """q (a text or a list) as text or HTML: each text's sentences' translations, rejoined in its shape."""
        ask = await self.admission.admit(request, LibreTranslateRequest)
        texts, many = ask.texts(), isinstance(ask.q, list)
        default = self.pipeline.translator.decode
        decode = default.replace(nbest=ask.alternatives + 1, beam_size=max(default.beam_size, ask.alternatives + 1))
        glossary = self.pipeline.terms(ask.glossary)
        if ask.format == "html":  # as LibreTranslate: no alternatives for HTML
            done, translated, blocks = await self._translate_html(request, texts, decode, glossary)
            others = [[] for _ in texts]
        else:
            done = await self.pipeline.translate(request, [Marked(text) for text in texts], decode, glossary=glossary)
            translated, blocks = [t.text for t in done.texts], [1] * len(texts)
            others = alternative_texts(done, translated, ask.alternatives)
        confidences = [round(c.score, 4) for c in page_confidences(done, blocks)]  # mt's own fields, per text
        answer = {"translatedText": translated if many else translated[0],
                  "confidence": confidences if many else confidences[0]}
        if any(failures := page_failures(done, blocks)):
            answer["failure"] = failures if many else failures[0]
        if glossary is not None:  # mt's own field: what became of each term, per text
            terms = page_terms(done, blocks)
            answer["terms"] = terms if many else terms[0]
        if ask.source == "auto":  # the model has one source language: that is the one "detected"
            detected = [{"confidence": confidence(text, self.source), "language": self.source} for text in texts]
            answer["detectedLanguage"] = detected if many else detected[0]
        if ask.alternatives > 0:
            answer["alternatives"] = others if many else others[0]
        return JSONResponse(answer)

    async def _translate_html(self, request: Request, pages: list[str], decode: DecodeConfig,
                              glossary: GlossaryUse | None) -> tuple[Done, list[str], list[int]]:
        """Each HTML text translated: its blocks' texts, with their inline elements placed on the translation.
        Returns them through the model, the pages rendered, and each page's count of blocks."""
        try:  # in a thread, as a long text takes a while
            read = await asyncio.to_thread(lambda: [read_html(page) for page in pages])
        except MtError as e:
            raise ApiError(400, f"Invalid request: {e}")
        done = await self.pipeline.translate(request, [text for page in read for text in page.texts], decode,
                                             glossary=glossary)
        rendered, start = [], 0
        for page in read:
            rendered.append(page.render(done.texts[start:start + len(page.texts)]))
            start += len(page.texts)
        return done, rendered, [len(page.texts) for page in read]

    async def translate_file(self, request: Request) -> Response:
        """A file (multipart field `file`) translated whole in its format; answered with the URL it can be
        downloaded from (once, for a while), as LibreTranslate answers."""
        ask = await self.admission.admit(request, FileRequest)
        name = PurePosixPath(ask.file.name.replace("\\", "/")).name  # a path's last part only
        if not name:
            raise ApiError(400, "Invalid request: empty file")
        try:  # in a thread: reading a large document takes a while, and the server answers others meanwhile
            document = await asyncio.to_thread(read_document, name, ask.file.data, self.limits.body_limit)
        except MtError as e:
            raise ApiError(400, f"Invalid request: {e}")
        done = await self.pipeline.translate(request, document.texts, self.pipeline.translator.decode,
                                             glossary=self.pipeline.terms(ask.glossary))
        output = await asyncio.to_thread(document.render, done.texts)
        path = PurePosixPath(name)
        stored = self.downloads.put(f"{path.stem}_{ask.target}{path.suffix}", output)
        return JSONResponse({"translatedFileUrl": str(request.url_for("download_file",
                                                                      name=quote(stored, safe="")))})

    async def download_file(self, request: Request) -> Response:
        name, data = self.downloads.take(request.path_params["name"])
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(data, media_type=kind, headers={"Content-Disposition": _attachment(name)})

    async def detect(self, request: Request) -> Response:
        """The model's source language, and its target language where the text looks like it (a translation),
        each with the share of the text's letters written in its script as the confidence: a model that translates
        one language pair has no other language to tell apart."""
        text = " ".join((await self.admission.admit(request, DetectRequest)).texts())
        found = [{"confidence": confidence(text, self.source), "language": self.source}]
        if self.target != self.source and confidence(text, self.target) > 0:
            found.append({"confidence": confidence(text, self.target), "language": self.target})
        return JSONResponse(sorted(found, key=lambda language: -language["confidence"]))

    async def languages(self, request: Request) -> Response:
        """Both languages, as clients check a request's source and target against this list: the target has no
        targets of its own here."""
        return JSONResponse([{"code": self.source, "name": LANGUAGE_NAMES.get(self.source, self.source),
                              "targets": [self.target]},
                             {"code": self.target, "name": LANGUAGE_NAMES.get(self.target, self.target),
                              "targets": []}])

    async def frontend_settings(self, request: Request) -> Response:
        def language(code):
            return {"code": code, "name": LANGUAGE_NAMES.get(code, code)}

        keys = bool(self.admission.api_keys)
        return JSONResponse({"charLimit": self.limits.char_limit, "frontendTimeout": 500, "apiKeys": keys,
                             "keyRequired": keys, "suggestions": self.pipeline.suggestions is not None,
                             "filesTranslation": True,
                             "supportedFilesFormat": list(FORMATS),
                             "language": {"source": language(self.source), "target": language(self.target)}})

    async def suggest(self, request: Request) -> Response:
        """A better translation of a sentence: judged by the model, kept (on disk before the answer), and answering
        its source where accepted. LibreTranslate's answer, {"success": true}, with mt's own
        "accepted" and "reason"."""
        suggestions = self.pipeline.suggestions
        if suggestions is None:
            raise ApiError(403, "Suggestions are disabled on this server.")
        ask = await self.admission.admit(request, SuggestRequest)
        source, suggestion = ask.q.strip(), ask.s.strip()
        if not source or not suggestion:
            raise ApiError(400, f"Invalid request: missing {'q' if not source else 's'} parameter")
        split = await asyncio.to_thread(split_for, self.pipeline.translator, [Marked(source)])
        if len(split.sentences) != 1:
            judgement = Judgement(False, "its source is not one sentence: suggest each sentence on its own")
        else:
            judgement = await self.pipeline.judge(request, source, suggestion)
        await asyncio.to_thread(suggestions.add, source, suggestion, (ask.source, ask.target), judgement)
        return JSONResponse({"success": True, "accepted": judgement.accepted, "reason": judgement.reason})

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})


def _attachment(name: str) -> str:
    """A Content-Disposition that names the download: RFC 6266's filename*, where the name is not plain ASCII."""
    quoted = quote(name)
    return f'attachment; filename="{name}"' if quoted == name else f"attachment; filename*=utf-8''{quoted}"
