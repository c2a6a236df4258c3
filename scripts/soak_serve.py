"""`mt serve` under sustained load: does its resident memory level off after warm-up, or keep growing?

Starts `mt serve` in its own process over loopback (as scripts/bench_serve.py does), then `--clients` concurrent
clients send `--requests` requests to LibreTranslate's POST /translate. Each request is a Tatoeba test or dev
sentence, or (half of them) a paragraph of 2-6 such sentences joined, which the server splits again: mixed
lengths, drawn with a seeded RNG so that few texts repeat. The server's VmRSS is sampled every `--interval`
seconds; throughput and p50/p99 latency are given per tenth of the requests (the first tenth is the warm-up).

It prints the RSS at start, after warm-up and at the end, the largest, the growth after warm-up, and the sentence
cache's hit rate; writes a CSV of (seconds, requests done, RSS MB) and a PNG of RSS and requests done over time.
Options it does not know go to `mt serve` (e.g. --batch-tokens 2000); environment variables reach the server.
The figures it prints go, as one record, into benchmarks/results/soak_serve.jsonl (scripts/records.py).

    python scripts/soak_serve.py --plot /tmp/soak-rss.png
    python scripts/soak_serve.py --requests 5000 --no-cache --beam 4 --plot /tmp/soak-rss.png
    MALLOC_ARENA_MAX=2 python scripts/soak_serve.py --requests 5000 --no-cache --plot /tmp/soak-arena2.png
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/ is not a package
from bench_serve import ROOT, Server  # noqa: E402
from records import record  # noqa: E402  (scripts/records.py: the results file)

DATA = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba"
WARM_UP = 0.1  # the share of requests counted as warm-up


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def texts(count: int, seed: int) -> list[str]:
    """Half single sentences, half paragraphs of 2-6: with ~2,400 sentences to draw from, few texts repeat,
    though their sentences do (the server's cache is by sentence)."""
    sentences = [s.strip() for name in ("test.zh", "dev.zh")
                 for s in (DATA / name).read_text(encoding="utf-8").splitlines() if s.strip()]
    rng = random.Random(seed)
    return ["".join(rng.choices(sentences, k=1 if rng.random() < 0.5 else rng.randint(2, 6)))
            for _ in range(count)]


class Sampler:
    """The server's RSS and the requests done so far, every `interval` seconds, on a thread of its own."""

    def __init__(self, pid: int, interval: float):
        self.pid, self.interval, self.done = pid, interval, 0
        self.rows: list[tuple[float, int, float]] = []  # (seconds, requests done, RSS MB)
        self.start = time.monotonic()
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def sample(self) -> float:
        mb = rss_mb(self.pid)
        self.rows.append((time.monotonic() - self.start, self.done, mb))
        return mb

    def _run(self) -> None:
        while self.running:
            self.sample()
            time.sleep(self.interval)

    def stop(self) -> float:
        self.running = False
        self.thread.join()
        return self.sample()


async def soak(url: str, requests: list[str], clients: int, sampler: Sampler) -> dict:
    """`clients` tasks sending the requests in order; each one's (completion time, latency), the errors, and the
    RSS the moment the warm-up's last request came back."""
    done: list[tuple[float, float]] = []
    errors, next_index, warm = 0, 0, {}
    warm_count = max(1, int(WARM_UP * len(requests)))

    async def one_client(client: httpx.AsyncClient):
        nonlocal errors, next_index
        while next_index < len(requests):
            text = requests[next_index]
            next_index += 1
            start = time.perf_counter()
            try:
                answer = await client.post("/translate", json={"q": text, "source": "zh", "target": "en"})
                errors += answer.status_code != 200
            except httpx.HTTPError:
                errors += 1
            done.append((time.perf_counter(), time.perf_counter() - start))
            sampler.done = len(done)
            if len(done) == warm_count:
                warm.update(rss=sampler.sample(), seconds=time.monotonic() - sampler.start, count=warm_count)

    # One client per user, each with a connection of its own, as in bench_serve.py (a shared pool costs httpx more
    # CPU per request than the server spends on it).
    async with contextlib.AsyncExitStack() as stack:
        users = [await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=300))
                 for _ in range(clients)]
        await asyncio.gather(*(one_client(user) for user in users))
        info = (await users[0].get("/api/info")).json()
    return {"done": done, "errors": errors, "warm": warm, "cache": info.get("cache", {}),
            "beam": info.get("decode", {}).get("beam_size")}


def windows(done: list[tuple[float, float]], start: float, count: int) -> list[dict]:
    """Throughput and latency per `count`th of the requests, in the order they completed (the first: warm-up)."""
    size, out, previous = max(1, len(done) // count), [], start
    for i in range(0, len(done) - size + 1, size):
        chunk = done[i:i + size]
        latencies = sorted(latency for _, latency in chunk)
        out.append({"rps": len(chunk) / (chunk[-1][0] - previous), "p50": statistics.median(latencies),
                    "p99": latencies[int(0.99 * (len(latencies) - 1))]})
        previous = chunk[-1][0]
    return out


def write_csv(path: Path, rows: list[tuple[float, int, float]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["seconds", "requests_done", "rss_mb"])
        writer.writerows((f"{s:.1f}", n, f"{mb:.1f}") for s, n, mb in rows)


def plot(path: Path, rows: list[tuple[float, int, float]], warm_seconds: float | None, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    seconds, done, mb = zip(*rows)
    fig, rss_axis = plt.subplots(figsize=(8, 4.5))
    rss_axis.plot(seconds, mb, color="tab:red", label="server RSS")
    rss_axis.set_xlabel("seconds")
    rss_axis.set_ylabel("RSS (MB)", color="tab:red")
    rss_axis.set_ylim(bottom=0)
    requests_axis = rss_axis.twinx()
    requests_axis.plot(seconds, done, color="tab:blue", label="requests done")
    requests_axis.set_ylabel("requests done", color="tab:blue")
    if warm_seconds is not None:
        rss_axis.axvline(warm_seconds, color="grey", linestyle="--", linewidth=1)
        rss_axis.text(warm_seconds, 0, " end of warm-up", color="grey", va="bottom")
    rss_axis.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(result: dict, sampler: Sampler, start_rss: float, end_rss: float, seconds: float, args) -> list[dict]:
    """Prints the run's figures; returns them as rows: the whole run's, then one per tenth of the requests."""
    done, warm, cache = result["done"], result["warm"], result["cache"]
    per = [{"tenth of the requests": k + 1, "req/s": round(w["rps"], 1), "p50 ms": round(1000 * w["p50"]),
            "p99 ms": round(1000 * w["p99"])} for k, w in enumerate(windows(done, done[0][0] - done[0][1], 10))]
    after_warm = max(mb for s, _, mb in sampler.rows if s >= warm.get("seconds", 0))
    # A single sample can land between batches, below the level: peak against peak tells growth from a plateau
    warm_peak = max(mb for s, _, mb in sampler.rows if s <= warm["seconds"])
    looked_up = cache.get("hits", 0) + cache.get("misses", 0)
    run = {"requests": len(done), "errors": result["errors"], "clients": args.clients, "beam": result["beam"],
           "seconds": round(seconds, 1), "req/s": round(len(done) / seconds, 1),
           "RSS MB at start": round(start_rss), "RSS MB after warm-up": round(warm["rss"]),
           "RSS MB at end": round(end_rss), "RSS MB max": round(max(mb for _, _, mb in sampler.rows)),
           "growth after warm-up, end %": round(100 * (end_rss / warm["rss"] - 1), 1),
           "growth after warm-up, max %": round(100 * (after_warm / warm["rss"] - 1), 1),
           "peak after warm-up MB": round(after_warm), "warm-up peak MB": round(warm_peak),
           "peak against warm-up peak %": round(100 * (after_warm / warm_peak - 1), 1),
           # after warm-up: the steadiest rate a short run gives
           "req/s after warm-up": round((len(done) - warm["count"]) / (done[-1][0] - done[warm["count"] - 1][0]), 1),
           "cache hits %": round(100 * cache["hits"] / looked_up, 1) if looked_up else None,
           "cache entries": cache.get("entries") if looked_up else None}
    print(f"{run['requests']:,} requests ({run['errors']} errors) from {run['clients']} clients in "
          f"{run['seconds']:.0f} s ({run['req/s']} req/s), beam {run['beam']}")
    print(f"RSS MB: start {run['RSS MB at start']:,}, after warm-up ({WARM_UP:.0%} of requests) "
          f"{run['RSS MB after warm-up']:,}, end {run['RSS MB at end']:,}, max {run['RSS MB max']:,}")
    print(f"growth after warm-up: end {run['growth after warm-up, end %']:+.1f}%, "
          f"max {run['growth after warm-up, max %']:+.1f}%")
    print(f"peak after warm-up {run['peak after warm-up MB']:,} MB against the warm-up's peak "
          f"{run['warm-up peak MB']:,} MB: {run['peak against warm-up peak %']:+.1f}%")
    print(f"after warm-up: {run['req/s after warm-up']} req/s")
    print(f"first window: {per[0]['req/s']} req/s, p50 {per[0]['p50 ms']} ms, p99 {per[0]['p99 ms']} ms; "
          f"last window: {per[-1]['req/s']} req/s, p50 {per[-1]['p50 ms']} ms, p99 {per[-1]['p99 ms']} ms")
    print("windows (req/s, p99 ms): " + ", ".join(f"{w['req/s']}/{w['p99 ms']}" for w in per))
    if looked_up:
        print(f"sentence cache: {run['cache hits %']:.1f}% hits ({cache['hits']:,} of {looked_up:,} sentences), "
              f"{run['cache entries']:,} entries")
    else:
        print("sentence cache: off")
    return [run, *per]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "runs/tatoeba-cpu/checkpoints/best.pt")
    parser.add_argument("--engine", choices=["mt", "ctranslate2"], default="mt")
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--beam", type=int, help="passed to `mt serve --beam` (default: the model's own)")
    parser.add_argument("--no-cache", action="store_true", help="`mt serve --cache-size 0`: decode every sentence")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between RSS samples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=Path(tempfile.gettempdir()) / "soak-rss.png")
    parser.add_argument("--csv", type=Path, help="default: --plot with .csv")
    args, server_options = parser.parse_known_args()
    server_options += ["--beam", str(args.beam)] if args.beam else []
    server_options += ["--cache-size", "0"] if args.no_cache else []
    model = args.checkpoint
    if args.engine == "ctranslate2" and model.suffix == ".pt":
        from mt.exchange.ctranslate2 import export_ctranslate2

        model = Path(tempfile.mkdtemp()) / "ct2"
        export_ctranslate2(args.checkpoint, model)
    requests = texts(args.requests, args.seed)
    server = Server(model, args.engine, *server_options)
    # Nobody reads the server's stderr after its start line: drain it, or a full pipe would stall the server.
    threading.Thread(target=server.process.stderr.read, daemon=True).start()
    start_rss = rss_mb(server.process.pid)
    sampler = Sampler(server.process.pid, args.interval)
    began = time.perf_counter()
    try:
        result = asyncio.run(soak(server.url, requests, args.clients, sampler))
        seconds = time.perf_counter() - began
        end_rss = sampler.stop()
    finally:
        server.stop()
    rows = report(result, sampler, start_rss, end_rss, seconds, args)
    csv_path = args.csv or args.plot.with_suffix(".csv")
    write_csv(csv_path, sampler.rows)
    options = " ".join(server_options) or "defaults"
    plot(args.plot, sampler.rows, result["warm"].get("seconds"),
         f"mt serve: {len(result['done']):,} requests, {args.clients} clients, {options}")
    print(f"wrote {csv_path} and {args.plot}")
    record("soak_serve.py", f"mt serve under sustained load, {args.engine}, {options}", rows)


if __name__ == "__main__":
    main()
