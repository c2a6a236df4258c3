"""The corpus filters against the damage crawled corpora carry, measured. A report, not a test: every figure is
measured here, labelled with this machine's CPU.

Kinds of damage, each made from a clean Tatoeba training pair (its source and target as given):

    markup      the target (and half the time the source) in HTML: wrapped in <div class="…">, <p> or <span>,
                entities for quotes, apostrophes and spaces (&#39; &quot; &nbsp;), a <br> inside; a tenth of them
                a side that is only code (<script>…</script>) or an image tag
    mojibake    UTF-8 read as Windows-1252 (the English side, its apostrophes curled first: Iâ€™m; or the Chinese
                side: æ—¥æœ¬) or as GBK (the Chinese side: 鎴戠埍浣)
    near        another copy of a pair, differing only in case, spaces, final punctuation, width or Chinese script
    truncated   the target's second half missing (cut after 40–60% of its words)
    glued       the next pair's sentence added on one side only (half the source, half the target)

A damaged pair is handled when cleaning removed it, or kept it repaired into the clean pair it came from (spaces
aside); a near copy is handled when one pair of it and its original is left.

Parts (--parts, a comma list; default all):

  damage   Each kind injected alone into the clean pairs at each share of --shares (of the clean pairs' count),
           cleaned in this process with the default filters (and the guard, which finds no dev or test sentence
           here): per kind and share, the damaged pairs handled and the clean pairs lost. Then the clean pairs alone,
           under the defaults and under the nine filters of the list below (`--nine`), pairs kept by each.
  bleu     The quick-start recipe (configs/tatoeba-cpu.yaml) trained three times: on the clean pairs with filters
           off, on them with the default filters, and on the clean pairs with every kind at --bleu-share each,
           default filters; each best.pt scored with beam 4 on the Tatoeba test set and on AI Challenger 2017's
           validation set (8,000 spoken and subtitle pairs, written in English first).

  tvsub    `mt clean` on TVsub's 2M pairs (configs/dialogue-cpu.yaml, its other corpora left out), with the default
           filters and with the nine filters, one after the other, each from an empty cache: wall time, peak memory,
           pairs kept, and what each step removed and repaired.

The nine filters: length, copy, script, numbers, urls, questions, ratio, duplicates (near: false) and lexical
(min_misaligned: 0), the defaults without the repairs, truncated, glued and near duplicates.

    python scripts/bench_filters.py --parts damage
    python scripts/bench_filters.py --parts bleu --threads 2      # about 3 × the quick-start's time

Each part's figures go, as a record of their own, into benchmarks/results/bench_filters.jsonl (scripts/records.py).
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import shlex
import shutil
import sys
import time
from pathlib import Path

import datasets
import numpy as np
import yaml
from pydantic import TypeAdapter

from bench_clean import (Failed, Run, child_env, cpu_header, ensure_tvsub_dev, evaluate, pairs_kept, peak_memory_mb,
                         rel, run_mt, train)
from records import record  # scripts/records.py: the results file
from mt.clean.cleaning import KEPT, bind, clean_corpus
from mt.clean.contamination import guard_keys, make_guard
from mt.data.corpora import aligned_paths
from mt.core.lines import read_text_column
from mt.data.config import DataConfig
from mt.data.filters import DEFAULT_FILTERS, CorpusFilter

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "zh-en"
TATOEBA = DATA / "tatoeba"
AI_CHALLENGER = DATA / "aichallenger2017"
DIALOGUE = "configs/dialogue-cpu.yaml"
TVSUB = DATA / "tvsub" / "train"  # DIALOGUE's data.train
KINDS = ("markup", "mojibake", "near", "truncated", "glued")
PARTS = ("damage", "bleu", "tvsub")
TITLES = {"damage": "each kind of damage injected into Tatoeba, handled by the default filters",
          "bleu": "the quick-start recipe on clean and damaged Tatoeba (beam 4)",
          "tvsub": "mt clean on TVsub's 2M pairs, the defaults and the nine filters"}
NINE_FILTERS = ("[{filter: length}, {filter: copy}, {filter: script}, {filter: numbers}, {filter: urls}, "
                "{filter: questions}, {filter: ratio}, {filter: duplicates, near: false}, "
                "{filter: lexical, min_misaligned: 0.0}]")
NINE = TypeAdapter(list[CorpusFilter]).validate_python(yaml.safe_load(NINE_FILTERS))
WRAPS = ['<div class="sentence">{}&nbsp;</div>', "<p>{}</p>", '<span lang="en">{}</span>', "{}<br/>",
         "<td>{}</td>"]
CODE = ['<script type="text/javascript">var t = "{}";</script>', '<img src="/i/{}.png" alt="">']

Pair = tuple[str, str]


# ---------------------------------------------------------------- damage

def markup(pair: Pair, rng: random.Random) -> Pair:
    zh, en = pair
    if rng.random() < 0.1:
        code = rng.choice(CODE).format(rng.randrange(1000))
        return (zh, code) if rng.random() < 0.5 else (code, en)
    en = en.replace("'", "&#39;").replace('"', "&quot;").replace(" ", "&nbsp;", 1 if rng.random() < 0.3 else 0)
    en = rng.choice(WRAPS).format(en)
    return (rng.choice(WRAPS).format(zh) if rng.random() < 0.5 else zh), en


def mojibake(pair: Pair, rng: random.Random) -> Pair:
    """UTF-8 bytes read in another encoding; bytes that Windows-1252 lacks read as Latin-1 (as browsers do)."""
    zh, en = pair
    way = rng.randrange(3)
    if way == 0 and "'" in en:
        return zh, _misread(en.replace("'", "’"), "cp1252")
    if way < 2:
        return _misread(zh, "cp1252"), en
    return zh.encode().decode("gbk", errors="replace"), en


def _misread(text: str, encoding: str) -> str:
    return "".join(_byte(b, encoding) for b in text.encode())


def _byte(b: int, encoding: str) -> str:
    try:
        return bytes([b]).decode(encoding)
    except UnicodeDecodeError:
        return bytes([b]).decode("latin-1")


def near(pair: Pair, rng: random.Random) -> Pair:
    import opencc

    zh, en = pair
    changes = [lambda z, e: (z, e.lower()), lambda z, e: (z, e.upper()), lambda z, e: (z, "  ".join(e.split())),
               lambda z, e: (z.rstrip("。！？"), e.rstrip(".!?")), lambda z, e: (z, e.rstrip(".!?") + "!"),
               lambda z, e: (opencc.OpenCC("s2t").convert(z), e),
               lambda z, e: (z, e.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)}))]
    changed = rng.choice(changes)(zh, en)
    return changed if changed != pair else (zh, en.lower() + " ")


def truncated(pair: Pair, rng: random.Random) -> Pair:
    words = pair[1].split()
    return pair[0], " ".join(words[:max(1, round(len(words) * rng.uniform(0.4, 0.6)))]).rstrip(",;:")


def glued(pair: Pair, following: Pair, rng: random.Random) -> Pair:
    if rng.random() < 0.5:
        return pair[0] + following[0], pair[1]
    return pair[0], f"{pair[1]} {following[1]}"


def damaged_corpus(clean: list[Pair], shares: dict[str, float], seed: int) -> tuple[list[Pair], list[str], list[int]]:
    """The clean pairs, some damaged in their place (a near copy is added beside its pair), shuffled: each pair's
    kind ("clean" or a kind of damage) and the row of the clean pair it came from."""
    rng = random.Random(seed)
    rows = [(pair, "clean", i) for i, pair in enumerate(clean)]
    free = [i for i in range(len(clean) - 1)]  # each pair damaged once at most; the last has no following pair
    rng.shuffle(free)
    for kind, share in shares.items():
        chosen = [i for i in free if kind != "truncated" or len(clean[i][1].split()) >= 4][:round(share * len(clean))]
        free = [i for i in free if i not in set(chosen)]
        for i in chosen:
            pair = glued(clean[i], clean[i + 1], rng) if kind == "glued" else globals()[kind](clean[i], rng)
            if kind == "near":
                rows.append((pair, kind, i))
            else:
                rows[i] = (pair, kind, i)
    rng.shuffle(rows)
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


# ---------------------------------------------------------------- cleaning in this process

def cleaned_rows(pairs: list[Pair], filters: list) -> tuple[np.ndarray, list[Pair | None]]:
    """Which pairs the filters keep [P], and each pair as kept (repaired) or None."""
    data = DataConfig(filters=filters, contamination="keep")
    corpus = datasets.Dataset.from_dict({"src": [p[0] for p in pairs], "tgt": [p[1] for p in pairs]})
    cleaned = clean_corpus("train", corpus, bind(filters, data, "data.filters"), data, make_guard(data), None)
    keep = cleaned.reasons == KEPT
    as_kept: list[Pair | None] = [None] * len(pairs)
    for row, src, tgt in zip(np.flatnonzero(keep), cleaned.pairs["src"], cleaned.pairs["tgt"]):
        as_kept[row] = (src, tgt)
    return keep, as_kept


def spaced(pair: Pair) -> Pair:
    """A pair compared with spaces and apostrophes aside (the mojibake kind curls them before damaging)."""
    return " ".join(pair[0].split()), " ".join(pair[1].replace("’", "'").split())


def handled(pairs: list[Pair], kinds: list[str], origins: list[int], clean: list[Pair], kind: str) -> dict:
    """Shares of one kind's damaged pairs removed, repaired and left, and of the clean pairs lost."""
    keep, as_kept = cleaned_rows(pairs, DEFAULT_FILTERS)
    damaged = [i for i, k in enumerate(kinds) if k == kind]
    survivors: dict[int, int] = {}  # a clean row → how many of it and its near copies are left
    for i, (k, origin) in enumerate(zip(kinds, origins)):
        if k in ("clean", "near") and keep[i]:
            survivors[origin] = survivors.get(origin, 0) + 1
    if kind == "near":
        removed = sum(survivors.get(origins[i], 0) == 1 for i in damaged)
        repaired = 0
    else:
        removed = sum(not keep[i] for i in damaged)
        repaired = sum(keep[i] and spaced(as_kept[i]) == spaced(clean[origins[i]]) for i in damaged)
    lost = sum(k == "clean" and not keep[i] and survivors.get(origins[i], 0) == 0 for i, k in enumerate(kinds))
    n_clean = kinds.count("clean")
    return {"damaged pairs": len(damaged), "removed %": round(100 * removed / len(damaged), 2),
            "repaired %": round(100 * int(repaired) / len(damaged), 2),
            "handled %": round(100 * int(removed + repaired) / len(damaged), 2),
            "clean pairs lost %": round(100 * lost / n_clean, 2)}


def part_damage(args, clean: list[Pair]) -> list[dict]:
    rows = []
    for kind in KINDS:
        for share in args.shares:
            pairs, kinds, origins = damaged_corpus(clean, {kind: share}, args.seed)
            start = time.perf_counter()
            row = {"kind": kind, "share %": round(100 * share, 1), **handled(pairs, kinds, origins, clean, kind),
                   "seconds": round(time.perf_counter() - start, 1)}
            print(row, flush=True)
            rows.append(row)
    for name, filters in (("defaults", DEFAULT_FILTERS), ("nine filters", NINE)):
        keep, _ = cleaned_rows(clean, filters)
        row = {"kind": f"none: the clean pairs alone, {name}", "clean pairs kept": int(keep.sum()),
               "clean pairs lost %": round(100 * (1 - float(keep.mean())), 2)}
        print(row, flush=True)
        rows.append(row)
    return rows


# ---------------------------------------------------------------- BLEU

def write_corpus(folder: Path, pairs: list[Pair]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for side, lang in ((0, "zh"), (1, "en")):
        (folder / f"train.{lang}").write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    return folder / "train"


def part_bleu(args, clean: list[Pair]) -> list[dict]:
    env = child_env(args.threads)
    pairs, _, _ = damaged_corpus(clean, {kind: args.bleu_share for kind in KINDS}, args.seed)
    if any("\n" in side or "\r" in side for pair in pairs for side in pair):
        raise Failed("a damaged pair holds a line break: it cannot be written as aligned lines")
    damaged = write_corpus(args.runs_dir / "damaged-tatoeba", pairs)
    runs = [("clean Tatoeba, filters off", "clean", ["--set", "data.filters=[]", "--set", "data.contamination=keep"]),
            ("clean Tatoeba, default filters", "clean-defaults", []),
            (f"damaged Tatoeba ({100 * args.bleu_share:g}% of each kind), default filters", "damaged",
             ["--set", f"data.train.path={rel(damaged)}"])]
    tests = {"Tatoeba test": (args.data / "test.zh", args.data / "test.en"),
             args.second_name: (Path(f"{args.second}.zh"), Path(f"{args.second}.en"))}
    rows = []
    for title, name, overrides in runs:
        size = len(pairs) if name == "damaged" else len(clean)  # before cleaning
        if args.train_seed != 1:
            title, name = f"{title}, seed {args.train_seed}", f"{name}-seed{args.train_seed}"
            overrides = [*overrides, "--set", f"train.seed={args.train_seed}"]
        run = Run(name, args.runs_dir / name, args.runs_dir / f"{name}.log")
        configs = ["-c", "configs/tatoeba-cpu.yaml", *(o for c in args.config for o in ("-c", c))]
        train(run, configs, overrides, env)
        counts = pairs_kept(run.log.read_text(encoding="utf-8")) if run.log.exists() else None
        row = {"run": title, "training pairs": size, "pairs kept": counts[1] if counts else None}
        for test, (src, ref) in tests.items():
            bleu, chrf = evaluate(run.run_dir / "checkpoints" / "best.pt", src, ref,
                                  args.runs_dir / f"{name}-{test.split()[0].lower().replace('/', '-')}.hyp", env)
            row |= {f"{test} BLEU": bleu, f"{test} chrF": chrf}
        rows.append(row)
    for row in rows[1:]:
        for test in tests:
            off = rows[0][f"{test} BLEU"]
            row[f"{test} BLEU / filters off"] = round(row[f"{test} BLEU"] / off, 3) if off else None  # 0: no ratio
    for row in rows:
        print(row, flush=True)
    return rows


# ---------------------------------------------------------------- TVsub

def part_tvsub(args, clean: list[Pair]) -> list[dict]:
    env = child_env(args.threads)
    ensure_tvsub_dev(args.tvsub_dev)
    rows = []
    for name, overrides in (("defaults", []), ("nine filters", ["--set", f"data.filters={NINE_FILTERS}"])):
        run_dir = args.runs_dir / f"tvsub-{name.replace(' ', '-')}"
        shutil.rmtree(run_dir, ignore_errors=True)  # an empty cache: cleaned from scratch
        done = run_mt(["clean", "-c", DIALOGUE, *(o for c in args.config for o in ("-c", c)), "--set",
                       "data.extra_train=[]", "--set", f"data.dev.path={rel(args.tvsub_dev / 'dev')}", "--set",
                       f"train.run_dir={rel(run_dir)}", *overrides], env, args.runs_dir / f"{name}.clean.log",
                      timed=True)
        summary = re.search(r"^train: cleaning kept ([\d,]+) of ([\d,]+) pairs(?: \(removed: ([^)]*)\))?"
                            r"(?: \(repaired: ([^)]*)\))?", done.output, re.M)
        if not summary:
            raise Failed(f"mt clean printed no cleaning line:\n{done.output[-500:]}")
        rows.append({"filters": name, "seconds": round(done.seconds, 1),
                     "peak memory MB": round(peak_memory_mb(done)[0]),
                     "pairs": int(summary[2].replace(",", "")), "pairs kept": int(summary[1].replace(",", "")),
                     "removed": summary[3] or "", "repaired": summary[4] or ""})
        print(rows[-1], flush=True)
    for column in ("seconds", "peak memory MB", "pairs kept"):
        rows[0][f"{column} / nine filters"] = round(rows[0][column] / rows[1][column], 3)
    covered = near_copies_kept(*(kept_rows(args.runs_dir / f"tvsub-{name}" / "clean" / "removed.tsv", rows[0]["pairs"])
                                 for name in ("defaults", "nine-filters")))
    rows[0]["nine filters' pairs kept or near-copied %"] = covered
    print(f"the defaults keep {covered}% of the pairs the nine filters keep, or a near copy of each", flush=True)
    return rows


def kept_rows(removed: Path, pairs: int) -> np.ndarray:
    """Which of the training corpus's rows `mt clean` kept [P]: those its removed.tsv does not list."""
    keep = np.ones(pairs, dtype=bool)
    csv.field_size_limit(sys.maxsize)
    with removed.open(encoding="utf-8", newline="") as f:
        listed = csv.reader(f, delimiter="\t")
        next(listed)
        for corpus, row, *_ in listed:
            if corpus == "train":
                keep[int(row) - 1] = False
    return keep


def near_copies_kept(defaults: np.ndarray, nine: np.ndarray) -> float:
    """Of the TVsub pairs that the nine filters keep, the share that the defaults keep, or keep a near copy of (the
    same pair to the near duplicates' key: case, width, punctuation, spaces and Chinese script aside)."""
    src, tgt = (read_text_column(path).to_pylist() for path in aligned_paths(TVSUB, "zh", "en"))
    rows = np.flatnonzero(defaults | nine)
    keys = dict(zip(rows, guard_keys([src[i] for i in rows], [tgt[i] for i in rows], (True, False))["pair_norm"]))
    kept_keys = {keys[i] for i in np.flatnonzero(defaults)} - {0}  # 0: a side empty once normalised, no key
    covered = sum(defaults[i] or keys[i] in kept_keys for i in np.flatnonzero(nine))
    return round(100 * covered / int(nine.sum()), 2)


def read_pairs(folder: Path) -> list[Pair]:
    zh, en = ((folder / f"train.{lang}").read_text(encoding="utf-8").split("\n")[:-1] for lang in ("zh", "en"))
    if len(zh) != len(en):
        raise Failed(f"{folder}/train.zh and train.en differ in lines ({len(zh)}, {len(en)})")
    return list(zip(zh, en))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)} (default all)")
    parser.add_argument("--shares", default="0.02,0.05,0.1", help="damage: the shares of each kind, a comma list")
    parser.add_argument("--bleu-share", type=float, default=0.05, help="bleu: the share of each kind of damage")
    parser.add_argument("--train-seed", type=int, default=1, help="bleu: train.seed of the three runs (the recipe's: 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=TATOEBA, help="the Tatoeba folder (train and test)")
    parser.add_argument("--second", type=Path, default=AI_CHALLENGER / "valid2017.en-zh",
                        help="bleu: the second test set, PREFIX.zh and PREFIX.en (default AI Challenger's validation)")
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "bench-filters")
    parser.add_argument("--threads", type=int, default=None, help="bleu, tvsub: OMP_NUM_THREADS for every mt command")
    parser.add_argument("--tvsub-dev", type=Path, default=ROOT / "data" / "tvsub",
                        help="tvsub: where TVsub's dev set goes, detokenised (the guard reads it)")
    parser.add_argument("--config", action="append", default=[], metavar="CONFIG",
                        help="bleu, tvsub: a config layered over the recipe (repeatable), e.g. a small model")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if unknown := [p for p in parts if p not in PARTS]:
        parser.error(f"--parts: unknown {', '.join(unknown)} (choose from {', '.join(PARTS)})")
    args.shares = [float(s) for s in args.shares.split(",")]
    args.second_name = "AI Challenger valid" if args.second == AI_CHALLENGER / "valid2017.en-zh" else args.second.name
    args.data, args.runs_dir, args.second = args.data.resolve(), args.runs_dir.resolve(), args.second.resolve()
    args.tvsub_dev = args.tvsub_dev.resolve()
    args.config = [rel(Path(c)) for c in args.config]
    print("$ python " + shlex.join(["scripts/bench_filters.py", *sys.argv[1:]]))
    print(f"# mt corpus filters bench. {cpu_header()}")
    try:
        clean = read_pairs(args.data)
        for part in parts:
            rows = {"damage": part_damage, "bleu": part_bleu, "tvsub": part_tvsub}[part](args, clean)
            record("bench_filters.py", f"corpus filters, {TITLES[part]}", rows)
    except Failed as e:
        sys.exit(f"bench_filters: {e}")


if __name__ == "__main__":
    main()
