"""Continuous batching across requests (`mt serve --batching continuous`, with mt's own engine; the default is
rounds, mt/serve/batcher.py): the worker keeps one running search (mt/decode/running.py), which each job's
sentences join at the next decoder step, and which each sentence leaves as soon as its search is done; a job is
answered when its last sentence is.

A request never waits for a batch that began before it came, nor for its neighbours' longer sentences. Jobs are
admitted in the order they came, while the running sources hold fewer than `max_tokens` source tokens (a job comes
in whole; alone, any job does), so that the search's memory stays bounded and no job is passed over. A job the
running search cannot take waits, and the jobs after it too, until the running search has emptied: one with other
decode settings or another model than the running search's (each running search has one of each), or one that
needs the search of rounds (sampling, a shortlist, a glossary's hard constraints), which it then gets alone, as
BatchingWorker decodes it. Calls (other work that reads the model) run between two steps, in their turn. A job
cancelled before it is admitted is skipped. The CTranslate2 engine has no running search: it decodes in rounds.

Each sentence's outputs are those it gets offline in float32 (mt/decode/running.py), as with rounds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from mt.decode.engine import Hypothesis, output_limit
from mt.decode.running import RunningSearch
from mt.decode.translator import Translator, to_search
from mt.serve.batcher import BatchingWorker, Call, Job


@dataclass(eq=False)
class Open:
    """A job admitted into the running search."""

    job: Job
    todo: list[int]                                    # its lines that are searched (to_search)
    found: dict[int, list[Hypothesis]] = field(default_factory=dict)  # each line's n-best, once done


class ContinuousWorker(BatchingWorker):
    """A BatchingWorker that keeps one running search: jobs join it at every step, and leave it when done."""

    def __init__(self, translator: Translator, wait_ms: float = 5.0, max_tokens: int = 4000, queue_size: int = 256):
        self.running: RunningSearch | None = None
        self.setting: tuple | None = None  # the running search's (translator, decode settings)
        super().__init__(translator, wait_ms, max_tokens, queue_size)  # starts the thread: set all before

    def _run(self) -> None:
        waiting: deque[Job | Call | None] = deque()
        while True:
            if not waiting and not self.running:  # idle: wait for work
                waiting.append(self.jobs.get())
            while not self.jobs.empty():
                waiting.append(self.jobs.get_nowait())
            admitted = []
            while waiting and self._start(waiting[0], admitted):
                if waiting.popleft() is None:
                    return
            self._admit(admitted)
            if self.running:
                self._step()

    def _start(self, item: Job | Call | None, admitted: list[Job]) -> bool:
        """Start the first waiting item, if it can start now: a job joins `admitted` (to be admitted together) or is
        decoded in rounds, a call runs, None (stop) waits for the running search to end. False: it waits."""
        if item is None:
            return not self.running and not admitted
        if isinstance(item, Call):
            self._call(item)
            return True
        if not self._fits(item, admitted):
            return False
        if not item.result.set_running_or_notify_cancel():
            return True  # cancelled before it started: skipped
        if self._runs(item):
            admitted.append(item)
        else:  # in rounds, alone
            self._translate([item])
        return True

    def _runs(self, job: Job) -> bool:
        """Whether a job can join a running search."""
        return (hasattr(self.translator.engine, "running_search") and not job.decode.sample and not job.decode.shortlist
                and not any(job.terms or []))

    def _fits(self, job: Job, admitted: list[Job]) -> bool:
        """Whether a job can start now: into a running search of its settings with room for its tokens, or in rounds
        once the running search has ended."""
        if not self._runs(job):
            return not self.running and not admitted
        if not (self.running or admitted):
            self.setting = (self.translator, job.decode)
            return True
        tokens = (self.running.tokens if self.running else 0) + sum(j.tokens for j in admitted) + job.tokens
        translator, decode = self.setting
        return translator is self.translator and decode == job.decode and tokens <= self.max_tokens

    def _admit(self, jobs: list[Job]) -> None:
        """The jobs' sentences join the running search (one started for their settings if none runs)."""
        if not jobs:
            return
        translator, decode = self.setting
        if not self.running:
            self.running = translator.engine.running_search(decode)
        keys, src_ids, limits = [], [], []
        for job in jobs:
            opened = Open(job, to_search(job.src_ids))
            if not opened.todo:
                self._finish([opened])
            for i in opened.todo:
                keys.append((opened, i))
                src_ids.append(job.src_ids[i])
                limits.append(output_limit(decode, len(job.src_ids[i]), translator.engine.max_positions))
        try:
            if keys:
                self.running.admit(keys, src_ids, limits)
        except Exception as e:  # noqa: BLE001 - the jobs get the error; the worker carries on
            self._stopped(e, {opened for opened, _ in keys})

    def _step(self) -> None:
        """One step of the running search; each job whose last sentence is done is answered."""
        try:
            done = self.running.step()
        except Exception as e:  # noqa: BLE001 - the running jobs get the error; the worker carries on
            self._stopped(e)
            return
        complete = []
        for (opened, line), hypotheses in done:
            opened.found[line] = hypotheses
            if len(opened.found) == len(opened.todo):
                complete.append(opened)
        if complete:
            self._finish(complete)
        if not self.running:
            self.running = None

    def _finish(self, complete: list[Open]) -> None:
        """Answer the jobs whose sentences are all searched (all of the running search's, so of its translator and
        decode setting), together, as BatchingWorker answers a round's."""
        group, (translator, decode) = [opened.job for opened in complete], self.setting
        src_ids, todo, found = [], [], []
        for opened in complete:
            todo += [len(src_ids) + i for i in opened.todo]
            found += [opened.found[i] for i in opened.todo]
            src_ids += opened.job.src_ids
        try:
            self._answer(group, translator, translator.translated(src_ids, todo, found, decode))
        except Exception as e:  # noqa: BLE001 - their requests get the error; the worker carries on
            self._failed(group, e)

    def _stopped(self, error: Exception, admitted: set[Open] = frozenset()) -> None:
        """The running search failed (or failed to admit the `admitted` jobs): every job in it gets the error, and
        the search ends."""
        self._failed([opened.job for opened in admitted | {source.key[0] for source in self.running.sources}], error)
        self.running.close()
        self.running = None
