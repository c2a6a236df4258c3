"""`mt serve` under load, over loopback: requests/s and latency at 1, 8, 32 and 128 concurrent clients, with each
kind of batching across requests (continuous, rounds) and without (one request decoded at a time), one after the
other in one run, against offline `mt translate`; then 10,000 requests checked one by one against the offline
translation of their sentence; and the server's memory. Then real text at 1 client, with each kind of batching: a
paragraph of 5 sentences (which the server splits and decodes together) against a single sentence, and a sentence
sent while another client's long paragraphs (20 sentences) are being translated; and the answer to a sentence the
translation cache holds. The CTranslate2 engine decodes in rounds only.

Each client is an httpx AsyncClient task sending one Tatoeba test sentence per request to LibreTranslate's
/translate, with the model's own decode settings (the quick-start's: beam 4). The load levels run with the
translation cache off (--cache-size 0): they send more requests than the test set has sentences, and repeats would
be answered from the cache. Client and server share this machine's cores, as they would on one host.
Every figure printed goes, as one record, into benchmarks/results/bench_serve.jsonl (scripts/records.py).

    python scripts/bench_serve.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt
    python scripts/bench_serve.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt --engine ctranslate2
    python scripts/bench_serve.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt --compute-type bfloat16
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from records import record  # scripts/records.py: the results file

ROOT = Path(__file__).resolve().parents[1]
# `mt serve`'s batching, each measured in the same run: rounds (its default), continuous, and one request at a time
# (a token budget of 1)
MODES = {"rounds": [], "continuous": ["--batching", "continuous"], "off": ["--batch-tokens", "1"]}


def modes(engine: str) -> dict[str, list[str]]:
    """The kinds of batching the engine has, each with its `mt serve` options: the default first."""
    return MODES if engine == "mt" else {"rounds": MODES["rounds"], "off": MODES["off"]}


LOAD = ["batching", "clients", "requests", "req/s", "p50 ms", "p99 ms", "errors", "wrong"]
TEST = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba" / "test.zh"


def table(rows: list[dict], columns: list[str]) -> list[str]:
    """The rows' columns as a markdown table: its head, then a line a row, numbers with thousands separated."""
    def cell(value) -> str:
        return format(value, ",") if isinstance(value, (int, float)) else str(value)
    return [f"| {' | '.join(columns)} |", f"|{'---|' * len(columns)}",
            *(f"| {' | '.join(cell(row[column]) for column in columns)} |" for row in rows)]


def offline(checkpoint: Path, engine: str, compute_type: str, sentences: list[str]) -> tuple[list[str], float]:
    """The translations of `mt translate --input`'s own path (translate_texts: each line split into sentences, as
    the server splits each request's text) and its sent/s."""
    import torch

    from mt.decode.translator import load_translator
    from mt.text.texts import translate_texts

    torch.set_num_threads(2)
    translator = load_translator(checkpoint, "cpu", engine, compute_type=compute_type)
    translate_texts(translator, sentences[:50])  # warm-up
    start = time.perf_counter()
    outputs = translate_texts(translator, sentences)
    return outputs, len(sentences) / (time.perf_counter() - start)


class Server:
    """`mt serve` in its own process, and its resident memory sampled every 0.2 s."""

    def __init__(self, checkpoint: Path, engine: str, *options: str, compute_type: str = "auto"):
        # The server runs in the project root: a checkpoint path relative to where this script started goes whole.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mt", "serve", "--checkpoint", str(Path(checkpoint).resolve()), "--engine", engine,
             "--compute-type", compute_type, "--port", "0", "--queue-size", "1024", *options],
            stderr=subprocess.PIPE, text=True, cwd=ROOT)
        said = []  # what it said before "serving": the reason when it stops instead
        while "serving" not in (line := self.process.stderr.readline()):
            if not line:
                raise SystemExit("mt serve did not start: " + "".join(said))
            said.append(line)
        self.url = line.split(" on ")[1].split()[0]
        self.rss: list[tuple[float, float]] = []  # (seconds since start, MB)
        self.sampling = True
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        start = time.monotonic()
        while self.sampling:
            with open(f"/proc/{self.process.pid}/status") as f:
                kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
            self.rss.append((time.monotonic() - start, kb / 1024))
            time.sleep(0.2)

    def stop(self) -> None:
        self.sampling = False
        self.process.terminate()
        self.process.wait(timeout=60)


async def load(url: str, sentences: list[str], expected: dict[str, str], clients: int, requests: int) -> dict:
    """`clients` tasks sending requests until `requests` are done; latency, throughput, errors, mismatches."""
    latencies, errors, wrong, next_index = [], 0, 0, 0

    async def one_client(client: httpx.AsyncClient):
        nonlocal errors, wrong, next_index
        while next_index < requests:
            sentence = sentences[next_index % len(sentences)]
            next_index += 1
            start = time.perf_counter()
            try:
                answer = await client.post("/translate", json={"q": sentence, "source": "zh", "target": "en"})
                ok = answer.status_code == 200
            except httpx.HTTPError:
                ok = False
            latencies.append(time.perf_counter() - start)
            if not ok:
                errors += 1
            elif answer.json()["translatedText"] != expected[sentence]:
                wrong += 1

    # One client per user, each with a connection of its own: one shared pool of many connections costs httpx
    # more CPU per request than the server spends on it.
    async with contextlib.AsyncExitStack() as stack:
        users = [await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=120))
                 for _ in range(clients)]
        start = time.perf_counter()
        await asyncio.gather(*(one_client(user) for user in users))
        seconds = time.perf_counter() - start
    latencies.sort()
    return {"requests": len(latencies), "rps": len(latencies) / seconds, "errors": errors, "wrong": wrong,
            "p50": statistics.median(latencies), "p99": latencies[int(0.99 * (len(latencies) - 1))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--engine", choices=["mt", "ctranslate2"], default="mt")
    parser.add_argument("--compute-type", default="auto", help="the engine's (`mt serve --compute-type`)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--seconds", type=float, default=15.0, help="about how long each level runs")
    parser.add_argument("--correctness", type=int, default=10_000, help="requests checked against offline output")
    parser.add_argument("--sentences", type=int, metavar="N", help="the first N test sentences (default: all)")
    parser.add_argument("--real-text", type=int, default=200, metavar="N",
                        help="requests of each kind in the real-text part (paragraphs, cache hits)")
    args = parser.parse_args()
    sentences = [s for s in TEST.read_text(encoding="utf-8").splitlines() if s.strip()][:args.sentences]
    model = args.checkpoint
    if args.engine == "ctranslate2":
        from mt.exchange.ctranslate2 import export_ctranslate2

        model = Path(tempfile.mkdtemp()) / "ct2"
        export_ctranslate2(args.checkpoint, model)
    outputs, offline_rate = offline(model, args.engine, args.compute_type, sentences)
    offline_rate = round(offline_rate, 1)
    expected = dict(zip(sentences, outputs))
    print(f"engine {args.engine} ({args.compute_type}); offline (`mt translate --input`'s path, "
          f"{len(sentences)} Tatoeba test sentences, the model's decode settings): {offline_rate} sent/s; "
          f"{os.cpu_count()} cores")
    rows = [{"run": "offline", "sentences/s": offline_rate}, *levels(model, args, sentences, expected, offline_rate)]
    rows += [correctness(model, args, sentences, expected),
             *real_text(model, args.engine, args.compute_type, sentences, args.real_text)]
    record("bench_serve.py", f"mt serve, {args.engine} ({args.compute_type}), {len(sentences)} Tatoeba test "
           "sentences", rows)


def correctness(model: Path, args, sentences: list[str], expected: dict[str, str]) -> dict:
    """`--correctness` requests at 32 clients, batching and cache on, each checked against its offline
    translation; and the server's memory over the run."""
    server = Server(model, args.engine, compute_type=args.compute_type)
    r = asyncio.run(load(server.url, sentences, expected, 32, args.correctness))
    server.stop()
    rss = [mb for _, mb in server.rss]
    third = max(len(rss) // 3, 1)
    row = {"run": "correctness", "batching": next(iter(modes(args.engine))), "clients": 32, "requests": r["requests"],
           "req/s": round(r["rps"], 1), "errors": r["errors"], "wrong": r["wrong"],
           "lost": args.correctness - r["requests"], "peak RSS MB": round(max(rss)),
           "RSS MB, first third": round(statistics.mean(rss[:third])),
           "RSS MB, last third": round(statistics.mean(rss[-third:]))}
    print(f"\ncorrectness: {row['requests']:,} requests at 32 clients, {row['lost']} lost, {row['errors']} errors, "
          f"{row['wrong']} differ from the offline translation ({row['req/s']} req/s)")
    print(f"server memory: peak {row['peak RSS MB']:,} MB; mean {row['RSS MB, first third']:,} MB in the first "
          f"third of the run, {row['RSS MB, last third']:,} MB in the last")
    return row


def levels(model: Path, args, sentences: list[str], expected: dict[str, str], offline_rate: float) -> list[dict]:
    """The load levels with each kind of batching and without, cache off: a row each, printed as it is measured;
    each batching row also gives its speed as a ratio of "off" and of offline."""
    print("\n" + "\n".join(table([], LOAD)))
    rows = {}
    for batching, options in modes(args.engine).items():
        server = Server(model, args.engine, "--cache-size", "0", *options, compute_type=args.compute_type)
        for clients in args.clients:
            probe = asyncio.run(load(server.url, sentences, expected, clients, clients * 4))  # also a warm-up
            requests = max(clients * 4, int(probe["rps"] * args.seconds))
            r = asyncio.run(load(server.url, sentences, expected, clients, requests))
            rows[batching, clients] = {"run": "load", "batching": batching, "clients": clients,
                                       "requests": r["requests"], "req/s": round(r["rps"], 1),
                                       "p50 ms": round(1000 * r["p50"]), "p99 ms": round(1000 * r["p99"]),
                                       "errors": r["errors"], "wrong": r["wrong"]}
            print(table([rows[batching, clients]], LOAD)[-1], flush=True)
        server.stop()
    for clients in args.clients:
        off = rows["off", clients]["req/s"]
        for batching in [mode for mode in modes(args.engine) if mode != "off"]:
            on = rows[batching, clients]
            on.update({"× batching off": round(on["req/s"] / off, 2),
                       "× offline": round(on["req/s"] / offline_rate, 2)})
            print(f"{clients} clients: {batching} {on['× batching off']:.2f}× one at a time, "
                  f"{on['× offline']:.2f}× offline")
    return list(rows.values())


def real_text(model: Path, engine: str, compute_type: str, sentences: list[str], count: int) -> list[dict]:
    """At 1 client, with each kind of batching, cache off: `count` paragraphs of 5 consecutive sentences against
    `count` single sentences, and the single sentences again while a second client sends paragraphs of the 20
    longest test sentences, one after another. Then, cache on, `count` sentences sent once to fill it, then three
    times more, answered from it. A row per kind of request."""
    count = min(count, len(sentences) // 5)
    singles = sentences[:count]
    paragraphs = ["".join(sentences[5 * i:5 * i + 5]) for i in range(count)]  # Chinese: no space between sentences
    long_paragraph = "".join(sorted(sentences, key=len)[-20:])
    rows = []
    for batching, options in modes(engine).items():
        if batching == "off":
            continue
        server = Server(model, engine, "--cache-size", "0", *options, compute_type=compute_type)
        one_by_one(server.url, singles[:10] + paragraphs[:10])  # warm-up
        single, paragraph = one_by_one(server.url, singles), one_by_one(server.url, paragraphs)
        beside = beside_paragraphs(server.url, singles, long_paragraph)
        server.stop()
        mine = [{"run": "real text, 1 client", "batching": batching, "request": name,
                 "mean ms": round(1000 * statistics.mean(latencies), 1),
                 "p50 ms": round(1000 * statistics.median(latencies), 1),
                 "p99 ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1)}
                for name, latencies in (("1 sentence", single), ("paragraph of 5 sentences", paragraph),
                                        ("1 sentence while another client's paragraphs of 20 run", beside))]
        for row, latencies in zip(mine[1:], (paragraph, beside)):
            row["× 1 sentence"] = round(statistics.mean(latencies) / statistics.mean(single), 2)  # mean latency
        rows += mine
    server = Server(model, engine, compute_type=compute_type)
    one_by_one(server.url, singles)  # each decoded once, now in the cache
    hit = one_by_one(server.url, singles * 3)
    cache = httpx.get(server.url + "/api/info").json()["cache"]
    server.stop()
    rows.append({"run": "real text, 1 client", "batching": next(iter(modes(engine))),
                 "request": "1 sentence from the cache", "mean ms": round(1000 * statistics.mean(hit), 1),
                 "p50 ms": round(1000 * statistics.median(hit), 1),
                 "p99 ms": round(1000 * hit[int(0.99 * (len(hit) - 1))], 1),
                 "cache hits": cache["hits"], "cache misses": cache["misses"]})
    print(f"\nreal text at 1 client ({count} requests each, 3 × {count} from the cache; cache off unless said; ms):")
    print("\n".join(table(rows, ["batching", "request", "mean ms", "p50 ms", "p99 ms"])))
    for row in rows:
        if "× 1 sentence" in row:
            print(f"{row['batching']}: {row['request']} ÷ 1 sentence: {row['× 1 sentence']:.2f}× (mean latency)")
    print(f"cache: {rows[-1]['cache hits']} hits, {rows[-1]['cache misses']} misses")
    return rows


def beside_paragraphs(url: str, singles: list[str], paragraph: str) -> list[float]:
    """The latencies of `singles` sent one by one (one_by_one) while a second client sends `paragraph` again and
    again, from its first answer on."""
    stop, answered = threading.Event(), threading.Event()

    def other_client() -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            while not stop.is_set():
                client.post("/translate", json={"q": paragraph, "source": "zh", "target": "en"}).raise_for_status()
                answered.set()

    other = threading.Thread(target=other_client, daemon=True)
    other.start()
    answered.wait(timeout=120)
    latencies = one_by_one(url, singles)
    stop.set()
    other.join(timeout=120)
    return latencies


def one_by_one(url: str, texts: list[str]) -> list[float]:
    """Each text sent to /translate once, one after another, on one connection: the latencies, sorted. This
    process's garbage collector waits meanwhile: it holds the offline model's objects, and a pass through them
    would be timed as the server's."""
    latencies = []
    gc.disable()
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            for text in texts:
                start = time.perf_counter()
                client.post("/translate", json={"q": text, "source": "zh", "target": "en"}).raise_for_status()
                latencies.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return sorted(latencies)


if __name__ == "__main__":
    main()
