"""`mt adapt` (mt/train/adapt.py): what a model learns from the corrections its server accepted, and what it keeps.
A report, not a test.

A run's best checkpoint is copied into --out (its own run directory: the run itself is left alone). Sentences of
another domain (--domain, default 3AM's captions: their training pairs) are suggested to it with their reference
translations, --corrections of them, each judged as `mt serve --suggestions` judges it and kept in a suggestions
file (--unjudged: every one accepted). `mt adapt` then fine-tunes on the accepted ones (its own defaults, or --set's;
--max-drop for its gate), and the starting and the adapted models translate, with the checkpoint's search:
- the corrected sentences themselves (the model's own translations: the server's memory answers them anyway);
- near sentences: --near held-out sentences of the same domain (default: 3AM's test set), never suggested;
- the general test set the run was made for (default: Tatoeba's test set).

Figures (one record, benchmarks/results/bench_adapt.jsonl, scripts/records.py): per set, BLEU and chrF before and
after; the corrections suggested and accepted; the gate's dev BLEU before and after; `mt adapt`'s seconds.

    python scripts/bench_adapt.py --run runs/tatoeba-cpu
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from records import record  # scripts/records.py: the results file

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "zh-en"


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def suggested(run: Path, pairs: list[tuple[str, str]], store: Path, threads: int, judged: bool) -> int:
    """Each pair suggested to the run's model and kept in `store` with its judgement (unjudged: accepted); how many
    were accepted."""
    import torch

    from mt.decode.translator import load_translator
    from mt.serve.suggestions import Judgement, Suggestions, judge

    torch.set_num_threads(threads)
    translator = load_translator(run / "checkpoints" / "best.pt", "cpu")
    suggestions = Suggestions(store)
    accepted = 0
    for source, suggestion in pairs:
        judgement = judge(translator, source, suggestion) if judged else Judgement(True, "not judged")
        suggestions.add(source, suggestion, ("zh", "en"), judgement)
        accepted += judgement.accepted
    suggestions.close()
    return accepted


def scores(checkpoint: Path, sets: dict[str, tuple[list[str], list[str]]], threads: int) -> dict[str, tuple]:
    """BLEU and chrF of the checkpoint on each set, with its own search."""
    import torch

    from mt.decode.evaluate import evaluate
    from mt.decode.translator import load_translator

    torch.set_num_threads(threads)
    translator = load_translator(checkpoint, "cpu")
    found = {}
    for name, (sources, references) in sets.items():
        result = evaluate(translator, sources, [references], translator.decode)
        found[name] = (round(result.bleu, 2), round(result.chrf, 2))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a run directory (its checkpoints/best.pt)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-adapt",
                        help="the adapted copy's run directory (replaced)")
    parser.add_argument("--domain", nargs=2, type=Path, metavar=("SRC", "REF"),
                        default=(DATA / "3am" / "train.zh", DATA / "3am" / "train.en"),
                        help="the pairs suggested (default: 3AM's training pairs)")
    parser.add_argument("--near", nargs=2, type=Path, metavar=("SRC", "REF"),
                        default=(DATA / "3am" / "test.zh", DATA / "3am" / "test.en"),
                        help="held-out sentences of the same domain (default: 3AM's test set)")
    parser.add_argument("--general", nargs=2, type=Path, metavar=("SRC", "REF"),
                        default=(DATA / "tatoeba" / "test.zh", DATA / "tatoeba" / "test.en"),
                        help="the run's own test set (default: Tatoeba's)")
    parser.add_argument("--corrections", type=int, default=500, help="pairs suggested")
    parser.add_argument("--near-limit", type=int, default=500, help="the first N near sentences")
    parser.add_argument("--max-drop", type=float, default=0.3, help="mt adapt's gate")
    parser.add_argument("--seed", type=int, default=1, help="which pairs are suggested")
    parser.add_argument("--unjudged", action="store_true", help="every suggestion accepted, the judge skipped")
    parser.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE",
                        help="mt adapt's --set (repeatable), e.g. train.lr_scale=0.05")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_THREADS", 2)),
                        help="torch threads (default: $BENCH_THREADS, else 2)")
    args = parser.parse_args()

    domain = list(zip(lines(args.domain[0]), lines(args.domain[1])))
    chosen = random.Random(args.seed).sample(domain, args.corrections)
    if args.out.exists():
        shutil.rmtree(args.out)
    (args.out / "checkpoints").mkdir(parents=True)
    shutil.copy(args.run / "checkpoints" / "best.pt", args.out / "checkpoints" / "best.pt")
    store = args.out / "suggestions.sqlite"
    accepted = suggested(args.out, chosen, store, args.threads, not args.unjudged)
    print(f"{accepted} of {len(chosen)} corrections accepted", flush=True)

    start = time.perf_counter()
    command = [sys.executable, "-m", "mt", "adapt", str(args.out), "--suggestions", str(store), "--max-drop",
               str(args.max_drop), *(a for s in args.sets for a in ("--set", s))]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          env=os.environ | {"OMP_NUM_THREADS": str(args.threads)})
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"mt adapt failed:\n{done.stderr[-3000:]}")
    verdict = done.stdout.strip().splitlines()[-1]
    print(verdict, f"({seconds:.0f} s)", flush=True)

    sets = {"corrected": ([s for s, _ in chosen], [t for _, t in chosen]),
            "near": (lines(args.near[0])[:args.near_limit], lines(args.near[1])[:args.near_limit]),
            "general": (lines(args.general[0]), lines(args.general[1]))}
    adapted = args.out / "adapted" / "1" / "checkpoints" / "best.pt"
    before, after = (scores(c, sets, args.threads) for c in (args.out / "checkpoints" / "best.pt", adapted))
    rows = []
    for name, (sources, _) in sets.items():
        rows.append({"set": name, "sentences": len(sources), "BLEU before": before[name][0],
                     "BLEU after": after[name][0], "BLEU gain": round(after[name][0] - before[name][0], 2),
                     "chrF before": before[name][1], "chrF after": after[name][1]})
        print(rows[-1], flush=True)
    settings = f", --set {' '.join(args.sets)}" if args.sets else ""
    record("bench_adapt.py", f"mt adapt{settings}, {args.run}: {accepted} of {len(chosen)} corrections from "
           f"{args.domain[0].parent.name} accepted (seed {args.seed}); {verdict}; {seconds:.0f} s, "
           f"{args.threads} thread(s)", rows)


if __name__ == "__main__":
    main()
