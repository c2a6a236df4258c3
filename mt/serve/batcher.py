"""Batching across requests, in rounds: a bounded queue of translation jobs and one worker thread that decodes them
together (`mt serve --batching rounds`, the default; continuous batching: mt/serve/continuous.py).

A server's requests arrive one sentence or a few at a time; decoding each alone leaves most of the machine idle. The
worker takes the oldest job and the others waiting, and, while fewer have come than it expects (the last round's
jobs, whose clients are likely to send again, and those that were waiting when it ended), those that arrive: until
none has come for `wait_ms`, `max_tokens` source tokens are gathered, or the first job has waited 10 × `wait_ms`. It
translates all the gathered lines with one `Translator.translate_ids` call, which sorts them by length into
token-budget batches; each line was encoded once, and its glossary's terms found, when its job was submitted. Each
line carries its own terms into the search, so jobs with other glossaries, or none, share a call without one's terms
reaching another's lines. Each translation comes with its confidence: mt's search gives it; the others'
(CTranslate2's, a glossary's written-in terms) are read for the whole round in one forced pass. Jobs with other
decode settings are translated in their own call. A job that was cancelled before the worker reached it (its client
left, or it waited too long) is skipped, never decoded. Other work that reads the model (placing a text's marks
reads each translation again) is queued as a Call and run on the worker's thread in its turn, so that one thread,
and one request's work at a time, uses the model.

Batching never changes a float32 output: each sentence keeps its own length limit, and padding is masked. With bf16
products (--compute-type bfloat16) an output may change with the batch it is decoded in (docs/translating.md).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mt.config import DecodeConfig
from mt.core.errors import MtError
from mt.data.terms import Match
from mt.decode.constraints import Terms
from mt.decode.translator import Attention, Translation, Translator, with_confidence
from mt.text.glossary_modes import GlossaryUse

log = logging.getLogger(__name__)


class Busy(Exception):
    """The queue is full: the server has more work than it can take now."""


@dataclass
class Job:
    lines: list[str]
    src_ids: list[list[int]]    # the lines encoded (Translator.encode), for the batch budget and the search
    decode: DecodeConfig
    attention: bool = False     # also the cross-attention of each line's translations (mt's own engine)
    glossary: GlossaryUse | None = None
    matches: list[list[Match]] = field(default_factory=list)  # with a glossary: each line's terms
    terms: list[Terms | None] | None = None                  # … and what its search must hold for them (hard)
    result: Future = field(default_factory=Future)  # → (n-best per line, attention per line's n-best or None)

    @property
    def tokens(self) -> int:
        return sum(len(ids) for ids in self.src_ids)


@dataclass
class Call:
    """Other work that reads the model, run on the worker's thread in its turn."""

    function: Callable[[], Any]
    result: Future = field(default_factory=Future)  # → what the function returns


class BatchingWorker:
    """Owns the translator: every decoding goes through its one thread, in the order jobs arrive."""

    def __init__(self, translator: Translator, wait_ms: float = 5.0, max_tokens: int = 4000, queue_size: int = 256):
        self.translator, self.wait, self.max_tokens = translator, wait_ms / 1000, max_tokens
        self.jobs: queue.Queue[Job | Call | None] = queue.Queue(maxsize=queue_size)
        self.expected = 1  # jobs the next round waits for: the last round's and those waiting when it ended
        self.thread = threading.Thread(target=self._run, name="mt-batching-worker", daemon=True)
        self.thread.start()

    def submit(self, lines: list[str], decode: DecodeConfig, attention: bool = False,
               glossary: GlossaryUse | None = None) -> Future:
        """Queue the lines; the future gives their n-best translations (with a glossary, each holding the terms of
        its line and saying what became of them). Raises Busy when the queue is full."""
        job = Job(lines, self.translator.encode(lines), decode, attention, glossary)
        if glossary is not None:
            job.matches, job.terms = glossary.prepared(self.translator, lines)
        return self._queue(job)

    def call(self, function: Callable[[], Any]) -> Future:
        """Queue a function that reads the model; the future gives what it returns. Raises Busy when the queue is
        full."""
        return self._queue(Call(function))

    def _queue(self, job: Job | Call) -> Future:
        try:
            self.jobs.put_nowait(job)
        except queue.Full:
            raise Busy from None
        return job.result

    def stop(self) -> None:
        """Finish the queued jobs, then end the thread."""
        self.jobs.put(None)
        self.thread.join()

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            jobs = self._gather(job) if isinstance(job, Job) else [job]
            self._translate([j for j in jobs if isinstance(j, Job) and j.result.set_running_or_notify_cancel()])
            self.expected = sum(isinstance(j, Job) for j in jobs) + self.jobs.qsize()
            if isinstance(jobs[-1], Call):
                self._call(jobs[-1])
            elif jobs[-1] is None:
                return

    def _gather(self, first: Job) -> list[Job | Call | None]:
        """The first job and those that come with it, up to the token budget or a Call (run after them; None: stop
        after them).

        The jobs already waiting are all taken. Then it waits for more only while fewer have come than expected:
        the last round's clients, just answered, are likely to send again, and waiting for them (until none has
        come for `wait`) brings them into one round with those who sent while it ran, instead of two rounds that
        alternate, each with half the rows a step could take. A lone client never waits for company that is not
        coming."""
        jobs, tokens, deadline = [first], first.tokens, time.monotonic() + 10 * self.wait
        while tokens < self.max_tokens:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                if len(jobs) >= self.expected or not self.wait:
                    break
                try:
                    job = self.jobs.get(timeout=min(self.wait, deadline - time.monotonic()))
                except (queue.Empty, ValueError):  # ValueError: the deadline has passed (a negative timeout)
                    break
            jobs.append(job)
            if not isinstance(job, Job):
                break
            tokens += job.tokens
        return jobs

    def _translate(self, jobs: list[Job]) -> None:
        """One Translator call per decode setting, its lines split back into their jobs."""
        groups: dict[tuple, list[Job]] = {}
        for job in jobs:
            groups.setdefault(dataclasses.astuple(job.decode), []).append(job)
        for group in groups.values():
            src_ids = [ids for job in group for ids in job.src_ids]
            terms = [t for job in group for t in job.terms or [None] * len(job.lines)]
            start = time.perf_counter()
            try:
                found = self.translator.translate_ids(src_ids, group[0].decode, terms if any(terms) else None)
                log.debug(f"translated {len(src_ids)} lines of {len(group)} requests in "
                          f"{1000 * (time.perf_counter() - start):.0f} ms; {self.jobs.qsize()} requests waiting")
                self._answer(group, self.translator, found)
            except Exception as e:  # noqa: BLE001 - the requests get the error; the worker carries on
                self._failed(group, e)

    def _answer(self, group: list[Job], translator: Translator, found: list[list[Translation]]) -> None:
        """Answer each job of a group with its lines' translations (`found`, the group's lines in order): with a
        glossary, what became of its terms; every translation with its confidence, read for the whole group at
        once where its search gave none."""
        finished = []
        for job in group:
            mine, found = found[:len(job.lines)], found[len(job.lines):]
            if job.glossary is not None:
                mine = job.glossary.finished(translator, job.lines, job.matches, mine)
            finished += mine
        scored = iter(with_confidence(translator, [line for job in group for line in job.lines], finished,
                                      [ids for job in group for ids in job.src_ids]))
        for job in group:
            mine = [next(scored) for _ in job.lines]
            job.result.set_result((mine, self._attention(job, mine) if job.attention else None))

    @staticmethod
    def _failed(group: list[Job], error: Exception) -> None:
        """Every job of a group not answered yet gets the error (logged once)."""
        log.exception("translation failed")
        for job in group:
            if not job.result.done():
                job.result.set_exception(error)

    @staticmethod
    def _call(call: Call) -> None:
        if not call.result.set_running_or_notify_cancel():
            return
        try:
            call.result.set_result(call.function())
        except Exception as e:  # noqa: BLE001 - its request gets the error; the worker carries on
            if not isinstance(e, MtError):  # a refusal, which its request answers, is no fault
                log.exception("a call on the worker failed")
            call.result.set_exception(e)

    def _attention(self, job: Job, found: list[list[Translation]]) -> list[list[Attention | None]]:
        """The cross-attention of each translation of each line (None for an empty line)."""
        return [[self.translator.attention(line, t.text) if line.strip() else None for t in nbest]
                for line, nbest in zip(job.lines, found)]
