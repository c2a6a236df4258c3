"""Decoding speed of mt, measured the way ../shared/bench/peers measures the other toolkits.

1. synthetic (the peers' settings, from their common.py): an untrained d_model 256 / 4 heads / d_ff 1024 / 3+3
   model with a shared 8,000 vocabulary; 200 sentences sorted by length in batches of 32; every output forced
   to exactly 43 tokens; greedy and beam 4; mt's own search and its CTranslate2 export, computing in float32 and
   in int8 (weights quantised as the model loads; `--compute-type auto` picks it where it is faster); on a CPU with
   bf16 products in hardware, mt's search with `--compute-type bfloat16` too.
   Results go into the harness's results file too (BENCH_RESULTS), so its report_table.py lists mt beside the
   peers.
2. real (with --checkpoint): a trained model on the first 500 sentences of newstest2021 (or of --src), greedy and
   beam 4, mt against its CTranslate2 export in float32 and int8 (outputs end at EOS, as in normal use). Give
   --checkpoint more than once to set models side by side: each later one's speed is also printed as a ratio of
   the first's (a distilled student against its teacher's shape, say); --real-only leaves the synthetic out.
   --shortlist FILE (`mt shortlist`) also times the last --checkpoint with that shortlist, as a model of its own
   ("NAME+shortlist"): mt's search narrowed to it, and CTranslate2's with it as its vocabulary map.

Each (engine, workload) runs in its own process, so that peak memory is its own. With --peers, each repeat
also runs the harness's own decoding benchmark of those toolkits, in turn with mt's, so that this machine's
drift spreads over every row; the script then prints mt's speed as ratios of theirs. The peers' virtual
environments and models must exist: run the harness once before (`bash ../shared/bench/peers/run_all.sh`,
with onmt in PEERS for OpenNMT-py and its CTranslate2 conversion). On an otherwise idle machine:

    python scripts/bench_decode.py --peers torchref hf onmt ct2 --repeats 5
    python scripts/bench_decode.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt --repeats 3
    python scripts/bench_decode.py --real-only --src ../shared/data/zh-en/tatoeba/test.zh \
        --checkpoint runs/build-on/seed1/checkpoints/best.pt --checkpoint runs/build-on/student-tiny/checkpoints/best.pt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from records import record  # scripts/records.py: the results file

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT.parent / "shared" / "bench" / "peers"
NEWS = ROOT.parent / "shared" / "data" / "zh-en" / "wmt21" / "newstest2021.zh-en.zh"
ENGINES = ("mt", "ctranslate2 float32", "ctranslate2 int8")  # an engine, and its compute type
PEER_VENVS = Path("/tmp/peers")  # where the harness's install_peers.sh puts them
PEER_DECODERS = {  # harness name → (its venv, its decoding benchmark); CTranslate2 with OpenNMT-py's model, float32
    "torchref": ("torchref", ["bench_torchref.py", "decode"]),
    "hf": ("hf", ["bench_hf.py", "decode"]),
    "onmt": ("onmt", ["bench_onmt.py", "decode"]),
    "ct2": ("ct2", ["bench_ct2.py", "decode", "onmt", "float32"]),
}


def peers_common():
    sys.path.insert(0, str(PEERS))
    import common  # the harness's settings and synthetic data

    common.set_threads()
    return common


def synthetic(engine: str, limit: int | None = None, parallel: int = 0) -> list[dict]:
    """Decode the peers' 200 synthetic sentences (or the first `limit`), mt's engine `parallel` batches at once
    (decode.parallel_batches); returns one result per mode."""
    import torch

    from mt.model.config import ModelConfig
    from mt.model.transformer import Transformer
    from mt.data.tokenizer import EOS, PAD

    c = peers_common()
    torch.manual_seed(c.SEED)
    config = ModelConfig(d_model=c.D_MODEL, num_heads=c.HEADS, d_ff=c.D_FF, num_encoder_layers=c.ENC_LAYERS,
                         num_decoder_layers=c.DEC_LAYERS, dropout=c.DROPOUT)
    model = Transformer(config, c.VOCAB, c.VOCAB, PAD).eval()
    sources = [[w + 4 for w in s] + [EOS] for s in c.decode_sources()][:limit]  # ids 4… are words, as in the peers
    length = c.out_len()
    if engine.startswith("mt"):
        inputs, decode = sources, _mt_decoder(model, c.DECODE_BATCH, length, parallel, compute_type(engine))
    else:
        vocabulary = ["<pad>", "<unk>", "<s>", "</s>"] + [c.word(i) for i in range(c.N_WORDS)]
        inputs = [[vocabulary[t] for t in s] for s in sources]
        decode = _ct2_decoder(model, vocabulary, c.DECODE_BATCH, c.THREADS, length, compute_type(engine))
    results = []
    decode(1, inputs[:4])  # warm-up
    for mode, beam in (("greedy", 1), ("beam4", c.BEAM)):
        start = time.perf_counter()
        tokens = decode(beam, inputs)
        seconds = time.perf_counter() - start
        results.append({"mode": mode, "sent_per_s": len(sources) / seconds, "tok_per_s": tokens / seconds,
                        "out_tokens_per_sent": tokens / len(sources),
                        "peak_rss_mb": c.peak_rss_mb()})  # the peak so far, as the harness records it
    for r in results:
        if os.environ.get("BENCH_RESULTS"):
            c.record(peer=f"mt ({engine})", kind="decode", mode=r["mode"], sent_per_s=round(r["sent_per_s"], 2),
                     out_tokens_per_sent=r["out_tokens_per_sent"], peak_rss_mb=round(r["peak_rss_mb"], 1),
                     method=f"scripts/bench_decode.py, batch {c.DECODE_BATCH}, forced {length} tokens")
    return results


def real(engine: str, checkpoint: Path, source: Path, sentences: int, shortlist: Path | None,
         parallel: int = 0) -> list[dict]:
    """Translate the first `sentences` lines of `source` with a trained model (and `shortlist`, if given), mt's
    engine `parallel` batches at once (decode.parallel_batches)."""
    import resource

    import torch

    torch.set_num_threads(2)
    from mt.decode.translator import load_translator

    lines = source.read_text(encoding="utf-8").splitlines()[:sentences]
    if not engine.startswith("mt"):
        from mt.exchange.ctranslate2 import export_ctranslate2

        directory = Path(tempfile.mkdtemp()) / "ct2"
        export_ctranslate2(checkpoint, directory)
        translator = load_translator(directory, "cpu", engine="ctranslate2", compute_type=compute_type(engine))
    else:
        translator = load_translator(checkpoint, "cpu", compute_type=compute_type(engine))
    if shortlist:  # read (and, by CTranslate2, loaded with the model) before the clock starts
        translator.engine.shortlist(str(shortlist))
    results = []
    for mode, beam in (("greedy", 1), ("beam4", 4)):
        decode = translator.decode.replace(beam_size=beam, nbest=1, shortlist=str(shortlist or ""),
                                           parallel_batches=parallel)
        start = time.perf_counter()
        outputs = translator.translate_lines(lines, decode)
        seconds = time.perf_counter() - start
        tokens = sum(len(translator.tokenizer.tgt.encode(text)) + 1 for text in outputs)  # + EOS
        results.append({"mode": mode, "sent_per_s": len(lines) / seconds, "tok_per_s": tokens / seconds,
                        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    return results


def timed_engines() -> tuple[str, ...]:
    """ENGINES, and mt's in bfloat16 where this CPU multiplies bf16 in hardware."""
    import torch

    from mt.core.device import has_native_bf16

    return ("mt", "mt bfloat16", *ENGINES[1:]) if has_native_bf16(torch.device("cpu")) else ENGINES


def compute_type(engine: str) -> str:
    """The compute type of an engine of ENGINES ("mt bfloat16" → "bfloat16"; auto where none is named)."""
    return engine.split()[1] if " " in engine else "auto"


def _mt_decoder(model, batch_size: int, fixed_length: int, parallel: int, products: str):
    """decode(beam, id lists) → output tokens produced, in batches as the peers form them (not mt's own
    length-sorted token batches), each batch searched by mt's Searcher (its weights packed as in `mt translate`),
    `parallel` at once (decode.parallel_batches: 0 as `mt translate` by default)."""
    import torch

    from mt.config import DecodeConfig
    from mt.core.openmp import map_in_threads
    from mt.decode.searcher import Searcher
    from mt.decode.translator import products_dtype

    searcher = Searcher(model, torch.device("cpu"), dtype=products_dtype(products, torch.device("cpu")))

    def decode(beam: int, sources: list[list[int]]) -> int:
        settings = DecodeConfig(beam_size=beam, alpha=0.0, min_len=fixed_length, parallel_batches=parallel)
        batches = [sources[start:start + batch_size] for start in range(0, len(sources), batch_size)]
        found = map_in_threads(lambda batch: searcher.search_batch(batch, [fixed_length] * len(batch), settings),
                               batches, min(searcher.workers(settings), len(batches)))
        return sum(len(hyps[0].tokens) for batch in found for hyps in batch)

    return decode


def _ct2_decoder(model, vocabulary: list[str], batch_size: int, threads: int, fixed_length: int, products: str):
    """decode(beam, token lists) → output tokens produced, with the model exported to CTranslate2 (fp32) and
    computing in `products` (a CTranslate2 compute type)."""
    import ctranslate2

    from mt.exchange.ctranslate2 import model_spec

    directory = tempfile.mkdtemp()
    spec = model_spec(model, vocabulary, vocabulary)
    spec.validate()
    spec.optimize()
    spec.save(directory)
    translator = ctranslate2.Translator(directory, device="cpu", compute_type=products, intra_threads=threads,
                                        inter_threads=1)

    def decode(beam: int, sources: list[list[str]]) -> int:
        results = translator.translate_batch(sources, beam_size=beam, max_batch_size=batch_size,
                                             batch_type="examples", max_decoding_length=fixed_length,
                                             min_decoding_length=fixed_length, num_hypotheses=1)
        return sum(len(r.hypotheses[0]) for r in results)

    return decode


def run_peer(name: str, results: Path) -> None:
    """The harness's decoding benchmark of one peer, appending its rows to `results`."""
    venv, script = PEER_DECODERS[name]
    threads = os.environ.get("BENCH_THREADS", "2")
    env = {**os.environ, "BENCH_RESULTS": str(results), "BENCH_THREADS": threads, "OMP_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads, "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([str(PEER_VENVS / venv / "bin" / "python"), *script], cwd=PEERS, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"peer {name} failed (has the harness been run once?): {done.stderr.strip()[-300:]}")


def peer_rows(results: Path) -> dict[tuple[str, str, str], list[dict]]:
    """("synthetic", peer, mode) → the decoding rows the peers wrote to `results`."""
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    table: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        if row.get("kind") == "decode" and not row["peer"].startswith("mt "):
            row["tok_per_s"] = row["sent_per_s"] * row["out_tokens_per_sent"]
            table.setdefault(("synthetic", row["peer"], row["mode"]), []).append(row)
    return table


def summary(table: dict, peers: list[str], engines: tuple[str, ...]) -> list[dict]:
    """One row per (workload, engine, mode): median speed and its range, and each of mt's engines as a ratio of
    each peer's speed in the same run."""
    def median(key, field="sent_per_s"):
        return statistics.median(r[field] for r in table[key])

    rows = []
    for key, runs in table.items():
        speeds = [r["sent_per_s"] for r in runs]
        row = {"workload": key[0], "engine": key[1], "mode": key[2], "sentences/s": round(median(key), 1),
               "range": f"{min(speeds):.1f}–{max(speeds):.1f}", "output tokens/s": round(median(key, "tok_per_s")),
               "peak RSS MB": round(median(key, "peak_rss_mb"))}
        if key[1] in engines:
            row.update({f"× {peer}": round(median(key) / median((key[0], peer, key[2])), 2)
                        for peer in peers if (key[0], peer, key[2]) in table})
        rows.append(row)
    return rows


def print_table(rows: list[dict], repeats: int) -> None:
    columns = list(dict.fromkeys(column for row in rows for column in row))
    print(f"medians of {repeats} repeats\n| {' | '.join(columns)} |\n|{'---|' * len(columns)}")
    for row in rows:
        print(f"| {' | '.join(str(row.get(column, '–')) for column in columns)} |")


def real_name(checkpoint: Path) -> str:
    """The table's name of a trained model: its run's folder (runs/x/checkpoints/best.pt → "x"), else the file."""
    return checkpoint.parent.parent.name if checkpoint.parent.name == "checkpoints" else checkpoint.name


def print_ratios(table: dict, names: list[str], engines: tuple[str, ...]) -> None:
    """Each later model's sentences/s as a ratio of the first's, engine by engine (–: not timed)."""
    first, *others = names

    def ratio(name, engine, mode):
        rows = [table.get((f"real {n}", engine, mode)) for n in (name, first)]
        if not all(rows):
            return "–"
        other, base = (statistics.median(r["sent_per_s"] for r in these) for these in rows)
        return f"{other / base:.2f}×"
    print(f"\n| engine | mode | {' | '.join(f'{o} ÷ {first}' for o in others)} |")
    print(f"|---|---|{'---:|' * len(others)}")
    for engine in engines:
        for mode in ("greedy", "beam4"):
            print(f"| {engine} | {mode} | {' | '.join(ratio(o, engine, mode) for o in others)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, action="append", default=[],
                        help="also time a trained model on real sentences (more than once: several, side by side)")
    parser.add_argument("--src", type=Path, default=NEWS, help="real: the sentences (default: newstest2021's)")
    parser.add_argument("--sentences", type=int, default=500, help="real: the first N sentences of --src")
    parser.add_argument("--shortlist", type=Path, help="real: also time the last --checkpoint with this shortlist")
    parser.add_argument("--real-only", action="store_true", help="leave the synthetic workload out")
    parser.add_argument("--synthetic-sentences", type=int, metavar="N",
                        help="synthetic: the first N of the peers' 200 (a quick check, not to set beside the peers)")
    parser.add_argument("--parallel-batches", type=int, default=0, metavar="N",
                        help="mt's engine: batches decoded at once (decode.parallel_batches; 0: mt's default)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--engines", nargs="+", metavar="ENGINE",
                        help=f"time only these engines, of {', '.join(map(repr, ENGINES))} and, on a CPU with bf16 "
                             "products, 'mt bfloat16' (default: each of them)")
    parser.add_argument("--peers", nargs="*", default=[], choices=sorted(PEER_DECODERS),
                        help="also run these toolkits' decoding benchmarks from the harness, interleaved")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "ENGINE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from mt.core.memory import use_huge_pages
        from mt.core.openmp import load_ctranslate2_first

        workload, engine = args.child
        use_huge_pages()  # as the `mt` command does, and as it loads CTranslate2 for --engine ctranslate2
        if not engine.startswith("mt"):
            load_ctranslate2_first()
        rows = (synthetic(engine, args.synthetic_sentences, args.parallel_batches) if workload == "synthetic"
                else real(engine, args.checkpoint[0], args.src, args.sentences, args.shortlist,
                          args.parallel_batches))
        print(json.dumps(rows))
        return
    if (args.real_only or args.shortlist) and not args.checkpoint:
        parser.error("--real-only and --shortlist need a --checkpoint")
    engines = timed_engines()
    if args.engines:
        if unknown := [engine for engine in args.engines if engine not in engines]:
            parser.error(f"--engines: {', '.join(map(repr, unknown))} is not one of {', '.join(map(repr, engines))}")
        engines = tuple(dict.fromkeys(args.engines))
    # (the table's name, the child's workload, its options, its engines)
    workloads = ([] if args.real_only else [("synthetic", "synthetic", [], engines)]) + [
        (f"real {real_name(c)}", "real", ["--checkpoint", str(c), "--src", str(args.src)], engines)
        for c in args.checkpoint]
    if args.shortlist:
        workloads.append((f"real {real_name(args.checkpoint[-1])}+shortlist", "real",
                          ["--checkpoint", str(args.checkpoint[-1]), "--src", str(args.src),
                           "--shortlist", str(args.shortlist)], engines))
    if len({name for name, *_ in workloads}) < len(workloads):
        parser.error("two checkpoints have the same run name: give checkpoints of different runs")
    results = Path(os.environ.get("BENCH_RESULTS") or Path(tempfile.mkdtemp()) / "peers.jsonl")
    before = peer_rows(results)  # rows of previous runs in the same file are not this run's
    table = {}
    for _ in range(args.repeats):  # round-robin, so that machine noise spreads over every row
        for peer in args.peers:
            run_peer(peer, results)
        for name, workload, options, its_engines in workloads:
            for engine in its_engines:
                command = [sys.executable, __file__, "--child", workload, engine,
                           "--sentences", str(args.sentences), "--parallel-batches", str(args.parallel_batches),
                           *options]
                if args.synthetic_sentences:
                    command += ["--synthetic-sentences", str(args.synthetic_sentences)]
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                for row in json.loads(output.strip().splitlines()[-1]):
                    table.setdefault((name, engine, row["mode"]), []).append(row)
    peers = {key: rows[len(before.get(key, [])):] for key, rows in peer_rows(results).items()}
    peers = {key: rows for key, rows in peers.items() if rows}
    rows = summary({**peers, **table}, list(dict.fromkeys(peer for _, peer, _ in peers)), engines)
    print_table(rows, args.repeats)
    record("bench_decode.py", f"decoding speed, medians of {args.repeats} repeats", rows)
    names = [name.removeprefix("real ") for name, workload, *_ in workloads if workload == "real"]
    if len(names) > 1:
        print_ratios(table, names, engines)


if __name__ == "__main__":
    main()
