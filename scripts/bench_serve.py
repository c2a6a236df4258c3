"""`mt serve` under load, over loopback: requests/s and latency at 1, 8, 32 and 128 concurrent clients, with
batching across requests on and off (one request decoded at a time), against offline `mt translate`; then
10,000 requests checked one by one against the offline translation of their sentence; and the server's memory.

Each client is an httpx AsyncClient task sending one Tatoeba test sentence per request to LibreTranslate's
/translate, with the model's own decode settings (the quick-start's: beam 4). Client and server share this
machine's cores, as they would on one host.

    python scripts/bench_serve.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt
    python scripts/bench_serve.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt --engine ctranslate2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TEST = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba" / "test.zh"


def offline(checkpoint: Path, engine: str, sentences: list[str]) -> tuple[list[str], float]:
    """The translations of `mt translate --input`'s own path (Translator.translate_lines) and its sent/s."""
    import torch

    from mt.decode.translator import load_translator

    torch.set_num_threads(2)
    translator = load_translator(checkpoint, "cpu", engine)
    translator.translate_lines(sentences[:50])  # warm-up
    start = time.perf_counter()
    outputs = translator.translate_lines(sentences)
    return outputs, len(sentences) / (time.perf_counter() - start)


class Server:
    """`mt serve` in its own process, and its resident memory sampled every 0.2 s."""

    def __init__(self, checkpoint: Path, engine: str, *options: str):
        # The server runs in the project root: a checkpoint path relative to where this script started goes whole.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mt", "serve", "--checkpoint", str(Path(checkpoint).resolve()), "--engine", engine,
             "--port", "0", "--queue-size", "1024", *options], stderr=subprocess.PIPE, text=True, cwd=ROOT)
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
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--seconds", type=float, default=15.0, help="about how long each level runs")
    parser.add_argument("--correctness", type=int, default=10_000, help="requests checked against offline output")
    parser.add_argument("--sentences", type=int, metavar="N", help="the first N test sentences (default: all)")
    args = parser.parse_args()
    sentences = [s for s in TEST.read_text(encoding="utf-8").splitlines() if s.strip()][:args.sentences]
    model = args.checkpoint
    if args.engine == "ctranslate2":
        from mt.exchange.ctranslate2 import export_ctranslate2

        model = Path(tempfile.mkdtemp()) / "ct2"
        export_ctranslate2(args.checkpoint, model)
    outputs, offline_rate = offline(model, args.engine, sentences)
    expected = dict(zip(sentences, outputs))
    print(f"engine {args.engine}; offline (`mt translate --input`'s path, {len(sentences)} Tatoeba test sentences, "
          f"the model's decode settings): {offline_rate:.1f} sent/s; {os.cpu_count()} cores")
    print("\n| batching | clients | requests | req/s | p50 ms | p99 ms | errors | wrong |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rates = {}
    for batching, options in (("on", []), ("off", ["--batch-tokens", "1"])):
        server = Server(model, args.engine, *options)
        for clients in args.clients:
            probe = asyncio.run(load(server.url, sentences, expected, clients, clients * 4))  # also a warm-up
            requests = max(clients * 4, int(probe["rps"] * args.seconds))
            r = asyncio.run(load(server.url, sentences, expected, clients, requests))
            rates[batching, clients] = r["rps"]
            print(f"| {batching} | {clients} | {r['requests']:,} | {r['rps']:.1f} | {1000 * r['p50']:.0f} | "
                  f"{1000 * r['p99']:.0f} | {r['errors']} | {r['wrong']} |", flush=True)
        server.stop()
    for clients in args.clients:
        print(f"{clients} clients: batching {rates['on', clients] / rates['off', clients]:.2f}× one at a time, "
              f"{rates['on', clients] / offline_rate:.2f}× offline")
    server = Server(model, args.engine)
    r = asyncio.run(load(server.url, sentences, expected, 32, args.correctness))
    server.stop()
    rss = [mb for _, mb in server.rss]
    third = max(len(rss) // 3, 1)
    print(f"\ncorrectness: {r['requests']:,} requests at 32 clients, {args.correctness - r['requests']} lost, "
          f"{r['errors']} errors, {r['wrong']} differ from the offline translation ({r['rps']:.1f} req/s)")
    print(f"server memory: peak {max(rss):,.0f} MB; mean {statistics.mean(rss[:third]):,.0f} MB in the first third "
          f"of the run, {statistics.mean(rss[-third:]):,.0f} MB in the last")


if __name__ == "__main__":
    main()
