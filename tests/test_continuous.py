"""Continuous batching in `mt serve`'s worker: every answer is its sentences' offline translation under concurrent
load, and a short request is answered while a long one still runs."""

import random
import threading

import pytest
import torch

from conftest import TATOEBA
from mt.decode.translator import load_translator
from mt.exchange.checkpoint import load_checkpoint, save_checkpoint
from mt.serve.batcher import BatchingWorker
from mt.serve.continuous import ContinuousWorker


@pytest.fixture(scope="module")
def translator(trained_runs, tmp_path_factory):
    """The tiny run's model with weights of its own (noise added), whose outputs differ from sentence to sentence
    and in length: its 8 updates taught it to end at once."""
    checkpoint = load_checkpoint(trained_runs[0] / "checkpoints" / "last.pt")
    torch.manual_seed(0)
    for weights in checkpoint.model.values():
        weights.add_(torch.randn_like(weights))
    path = tmp_path_factory.mktemp("varied") / "varied.pt"
    save_checkpoint(checkpoint, path)
    return load_translator(path, "cpu")


def test_under_concurrent_load_every_answer_is_the_offline_translation(translator):
    """The whole Tatoeba test set, sent by 6 clients as requests of 1 to 3 sentences, a tenth of them with other
    decode settings (which wait for the running search to empty; among them the failure guard's, whose retries
    this noisy model needs often), compared line by line with the same lines translated offline with the same
    settings."""
    lines = [line for line in (TATOEBA / "test.zh").read_text(encoding="utf-8").splitlines() if line.strip()]
    base = translator.decode.replace(guard=False)
    settings = [base, base.replace(beam_size=2, nbest=2), base.replace(beam_size=1, alpha=0.0), translator.decode]
    assert translator.decode.guard
    draw, requests, start = random.Random(0), [], 0
    while start < len(lines):
        count = draw.randint(1, 3)
        requests.append((lines[start:start + count], settings[0] if draw.random() < 0.9 else draw.choice(settings)))
        start += count
    worker, answers = ContinuousWorker(translator), {}

    def client(mine: list[int]) -> None:
        for n in mine:
            answers[n] = worker.submit(*requests[n]).result(timeout=120)[0]

    clients = [threading.Thread(target=client, args=(list(range(c, len(requests), 6)),)) for c in range(6)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    worker.stop()
    assert len(answers) == len(requests)
    differ = 0
    for setting in settings:
        numbers = [n for n, (_, decode) in enumerate(requests) if decode == setting]
        offline = translator.translate([line for n in numbers for line in requests[n][0]], setting)
        got = [answer for n in numbers for answer in answers[n]]
        differ += sum([t.text for t in a] != [t.text for t in b] for a, b in zip(got, offline))
        assert all(len(a) == len(b) for a, b in zip(got, offline))
    assert differ == 0


@pytest.mark.parametrize("worker, short_first", [(ContinuousWorker, True), (BatchingWorker, False)])
def test_a_short_request_is_answered_while_a_long_one_runs(translator, worker, short_first):
    """Every output runs to its length limit (min_len past it), so the long request's sentences take many more
    steps than the short one's. Continuous: the short request, sent just after the long one, is answered first.
    In rounds, it waits for the long one's round (or comes in it)."""
    lines = sorted((TATOEBA / "test.zh").read_text(encoding="utf-8").splitlines(), key=len)
    decode = translator.decode.replace(min_len=1000)
    running, order = worker(translator), []
    long = running.submit(lines[-20:], decode)
    short = running.submit(["你好。"], decode)
    long.add_done_callback(lambda _: order.append("long"))
    short.add_done_callback(lambda _: order.append("short"))
    long.result(timeout=120), short.result(timeout=120)
    running.stop()
    assert (order[0] == "short") == short_first


def test_stopping_finishes_the_running_and_queued_requests_first(translator):
    """SIGTERM's path: stop() with requests running and queued answers each of them, then ends the worker."""
    lines = (TATOEBA / "test.zh").read_text(encoding="utf-8").splitlines()[:40]
    worker = ContinuousWorker(translator)
    futures = [worker.submit(lines[i:i + 4], translator.decode) for i in range(0, 40, 4)]
    worker.stop()
    assert not worker.thread.is_alive()
    answers = [translation[0].text for future in futures for translation in future.result(timeout=0)[0]]
    assert answers == [nbest[0].text for nbest in translator.translate(lines)]
