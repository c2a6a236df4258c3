"""`mt serve` under load, abuse and stops: is every answer right, is no request lost, is no suggestion lost? A report,
not a test.

Starts `mt serve` over loopback (as scripts/bench_serve.py does) with a suggestions database in a temporary folder,
then `--clients` threads send `--requests` requests in all, drawn with a seeded RNG:

- translations (most): a Tatoeba test sentence, or a paragraph of 2-4 of them, to LibreTranslate's POST /translate;
  each answer must be the translation of `mt translate --input`'s path in this process (translate_texts);
- suggestions (`--suggest` of them): a Tatoeba dev sentence and its reference to POST /suggest; each one answered
  `"success": true` must be in the database at the end;
- abuse (`--abuse` of them): a body that is not JSON, a text over the character limit, an unknown language, a
  client that leaves in the middle of its body; each must get its 4xx (or, leaving, nothing), never a 5xx.

Each time another `--stop-every` requests have been sent, the server is stopped while others are under way, by
SIGTERM and by SIGKILL in turn, and started again on the same database. A request that finds no server (connection
refused) is sent again once one is up. One cut off while a SIGKILL stops the server is counted and sent again, as a
client would; one cut off while a SIGTERM stops it is lost (SIGTERM finishes the requests the server has begun),
and so is one cut off with no stop under way.
Options it does not know go to `mt serve` (e.g. --batching continuous, --cache-size 0).

Figures (one record, benchmarks/results/chaos_serve.jsonl, scripts/records.py): requests of each kind; wrong
answers; 5xx answers; abuse answered otherwise than expected; cut off by SIGTERM and with no stop (lost), by SIGKILL
(sent again); stops of each kind and SIGTERM stops that did not exit 0; suggestions answered `"success": true`,
answered otherwise, and answered ones missing from the database.

    python scripts/chaos_serve.py --requests 10000 --batching continuous --cache-size 0
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/ is not a package
from bench_serve import ROOT, Server  # noqa: E402
from records import record  # noqa: E402  (scripts/records.py: the results file)

DATA = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba"
# bad bodies for POST /translate, each answered 400; and a client that leaves mid-body
BAD_BODIES = {"not json": dict(content=b'{"q": "\xe6\x88', headers={"Content-Type": "application/json"}),
              "over the limit": dict(json={"q": "我爱你。" * 2000, "source": "zh", "target": "en"}),
              "unknown language": dict(json={"q": "我爱你", "source": "zh", "target": "xx"})}
ABUSE = (*BAD_BODIES, "leaves mid-body")


@dataclass
class Supervisor:
    """The server's life: started, stopped by SIGTERM or SIGKILL in turn each time another `every` requests have been
    sent (`sent`), started again."""

    checkpoint: Path
    options: list[str]
    every: int
    sent: Callable[[], int]
    url: str | None = None
    stopping: str | None = None  # the signal of the stop under way
    stops: Counter = field(default_factory=Counter)
    bad_exits: int = 0
    up: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        stop, next_stop = signal.SIGTERM, self.every
        while True:
            server = Server(self.checkpoint, "mt", *self.options)
            threading.Thread(target=server.process.stderr.read, daemon=True).start()  # never a full pipe
            self.url, self.stopping = server.url, None
            self.up.set()
            while not self.done.is_set() and self.sent() < next_stop:
                time.sleep(0.01)
            finished, next_stop = self.done.is_set(), self.sent() + self.every
            self.up.clear()
            self.stopping = "SIGTERM" if finished else stop.name
            server.sampling = False
            server.process.send_signal(signal.SIGTERM if finished else stop)
            code = server.process.wait(timeout=120)
            if finished:
                return
            self.stops[stop.name] += 1
            self.bad_exits += stop == signal.SIGTERM and code != 0
            stop = signal.SIGKILL if stop == signal.SIGTERM else signal.SIGTERM


@dataclass
class Tally:
    counts: Counter = field(default_factory=Counter)
    acknowledged: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, key: str) -> None:
        with self.lock:
            self.counts[key] += 1


def send(supervisor: Supervisor, tally: Tally, ask) -> httpx.Response | None:
    """`ask(url)` until a server answers it: None where it is cut off for good (counted as lost)."""
    while True:
        supervisor.up.wait()
        url, stopping = supervisor.url, supervisor.stopping
        try:
            return ask(url)
        except httpx.ConnectError:
            time.sleep(0.05)  # no server yet, or one that no longer accepts: sent again once one is up
        except httpx.TransportError:
            stop = supervisor.stopping or stopping
            if stop == "SIGKILL":
                tally.add("cut off by SIGKILL, sent again")
                continue
            tally.add("lost: cut off by SIGTERM" if stop == "SIGTERM" else "lost: cut off, no stop under way")
            return None


def leave_mid_body(url: str) -> None:
    """A client that sends half its body and closes the connection."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"q": "我爱你", "source": "zh", "target": "en"}).encode()
    try:
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            conn.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body[:10]))
    except OSError as e:
        raise httpx.ConnectError(str(e)) from None


def one_request(kind: str, item, supervisor: Supervisor, tally: Tally, expected: dict[str, str],
                client: httpx.Client) -> None:
    if kind == "translation":
        answer = send(supervisor, tally, lambda url: client.post(
            url + "/translate", json={"q": item, "source": "zh", "target": "en"}))
        if answer is not None:
            tally.add("translations answered")
            if answer.status_code >= 500:
                tally.add("5xx answers")
            elif answer.status_code != 200 or answer.json()["translatedText"] != expected[item]:
                tally.add("wrong answers")
    elif kind == "suggestion":
        source, better = item
        answer = send(supervisor, tally, lambda url: client.post(
            url + "/suggest", json={"q": source, "s": better, "source": "zh", "target": "en"}))
        if answer is not None and answer.status_code >= 500:
            tally.add("5xx answers")
        elif answer is not None and answer.status_code == 200 and answer.json().get("success"):
            with tally.lock:
                tally.acknowledged.append((source, better))
        elif answer is not None:
            tally.add("suggestions answered otherwise")
    elif item == "leaves mid-body":
        send(supervisor, tally, leave_mid_body)
    else:
        answer = send(supervisor, tally, lambda url: client.post(url + "/translate", **BAD_BODIES[item]))
        if answer is not None and answer.status_code >= 500:
            tally.add("5xx answers")
        elif answer is not None and answer.status_code != 400:
            tally.add("abuse answered otherwise")


def workload(args, rng: random.Random) -> list[tuple[str, object]]:
    """The requests, in order: (kind, item)."""
    test = [s for s in (DATA / "test.zh").read_text(encoding="utf-8").splitlines() if s.strip()]
    dev = zip(*(((DATA / f"dev.{lang}").read_text(encoding="utf-8").splitlines()) for lang in ("zh", "en")))
    tested = set(test)
    suggestions = [(zh, en) for zh, en in dev if zh.strip() and en.strip() and zh not in tested]
    texts = test + ["".join(rng.sample(test, rng.randint(2, 4))) for _ in range(len(test) // 2)]
    kinds = (["suggestion"] * args.suggest + ["abuse"] * args.abuse
             + ["translation"] * (args.requests - args.suggest - args.abuse))
    rng.shuffle(kinds)
    items = {"translation": lambda: rng.choice(texts), "suggestion": lambda: rng.choice(suggestions),
             "abuse": lambda: rng.choice(ABUSE)}
    return [(kind, items[kind]()) for kind in kinds]


def missing_suggestions(database: Path, acknowledged: list[tuple[str, str]]) -> int:
    """The acknowledged suggestions that the database does not hold."""
    with sqlite3.connect(database) as db:
        held = Counter(db.execute("SELECT source, suggestion FROM suggestions").fetchall())
    wanted = Counter((source.strip(), better.strip()) for source, better in acknowledged)
    return sum((wanted - held).values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "runs/tatoeba-cpu/checkpoints/best.pt")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--suggest", type=int, default=None, help="suggestions among them (default: a tenth)")
    parser.add_argument("--abuse", type=int, default=None, help="abuse among them (default: a tenth)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--stop-every", type=int, default=1000, help="requests sent between stops of the server")
    parser.add_argument("--seed", type=int, default=0)
    args, server_options = parser.parse_known_args()
    args.suggest = args.requests // 10 if args.suggest is None else args.suggest
    args.abuse = args.requests // 10 if args.abuse is None else args.abuse
    import torch

    from mt.decode.translator import load_translator
    from mt.text.texts import translate_texts

    requests = workload(args, random.Random(args.seed))
    texts = sorted({item for kind, item in requests if kind == "translation"})
    torch.set_num_threads(2)
    expected = dict(zip(texts, translate_texts(load_translator(args.checkpoint, "cpu"), texts)))
    database = Path(tempfile.mkdtemp()) / "suggestions.sqlite"
    tally, queue = Tally(), iter(requests)
    supervisor = Supervisor(args.checkpoint, ["--suggestions", str(database), *server_options], args.stop_every,
                            lambda: tally.counts["sent"])
    life = threading.Thread(target=supervisor.run, daemon=True)
    life.start()

    def client() -> None:
        with httpx.Client(timeout=120, limits=httpx.Limits(max_keepalive_connections=0)) as http:
            while True:
                with tally.lock:
                    kind, item = next(queue, (None, None))
                    tally.counts["sent"] += kind is not None
                if kind is None:
                    return
                one_request(kind, item, supervisor, tally, expected, http)

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    supervisor.done.set()
    life.join()
    counts = tally.counts
    row = {"requests": args.requests, "clients": args.clients, "server options": " ".join(server_options),
           "seconds": round(seconds, 1), "translations": args.requests - args.suggest - args.abuse,
           "translations answered": counts["translations answered"], "wrong answers": counts["wrong answers"],
           "5xx answers": counts["5xx answers"], "abuse": args.abuse,
           "abuse answered otherwise": counts["abuse answered otherwise"],
           "lost: cut off by SIGTERM": counts["lost: cut off by SIGTERM"],
           "lost: cut off, no stop under way": counts["lost: cut off, no stop under way"],
           "cut off by SIGKILL, sent again": counts["cut off by SIGKILL, sent again"],
           "SIGTERM stops": supervisor.stops["SIGTERM"], "SIGKILL stops": supervisor.stops["SIGKILL"],
           "SIGTERM stops not exiting 0": supervisor.bad_exits, "suggestions": args.suggest,
           "suggestions answered": len(tally.acknowledged),
           "suggestions answered otherwise": counts["suggestions answered otherwise"],
           "answered suggestions missing": missing_suggestions(database, tally.acknowledged)}
    for key, value in row.items():
        print(f"{key}: {value}")
    record("chaos_serve.py", f"mt serve under load, abuse and stops: {args.requests:,} requests, {args.clients} "
           f"clients, a stop every {args.stop_every:,} requests", row)


if __name__ == "__main__":
    main()
