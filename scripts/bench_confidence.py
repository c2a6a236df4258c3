"""How well `mt`'s confidence (mt/decode/confidence.py) ranks translations, and what it costs: a report, not a test.

For a checkpoint: its dev set is translated (the checkpoint's decode settings, or --beam) and the estimator is fitted
to each translation's sentence chrF, as `mt confidence` fits it (into a temporary folder: the checkpoint's own
estimator is left alone). Then each test set (unseen by the estimator) is translated and read, and each of its
translations gets the estimator's confidence, the untrained score (exp of the mean log-probability of its tokens) and
every signal alone.

Figures (one record, benchmarks/results/bench_confidence.jsonl, scripts/records.py), a row per test set: sentences;
BLEU and chrF; Spearman's ρ with sentence chrF of the confidence, of the untrained score, and of the best single
signal (named); the confidence's ρ − the untrained score's; errors (sentence chrF below --error-chrf) among the
--abstain share of least confident sentences, as a share of all errors; seconds of mt's search, of the confidence
it adds (the signals from the search's log-probabilities, and the estimator), and of a forced pass (what a
translation the search gave no log-probabilities for costs: CTranslate2's, a glossary's written-in terms), each with
its share of the search's.

    python scripts/bench_confidence.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt
    python scripts/bench_confidence.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt --limit 300 \\
        --test wmt22 ../shared/data/zh-en/wmt22/generaltest2022.zh-en.zh \\
                     ../shared/data/zh-en/wmt22/generaltest2022.zh-en.refA.en
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from records import record  # scripts/records.py: the results file

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba"


def lines(path: Path, limit: int | None) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[:limit]


def bench_test(translator, name: str, sources: list[str], references: list[str], decode, estimator,
               args) -> dict:
    import sacrebleu
    import torch

    from mt.decode.confidence import SIGNALS, untrained
    from mt.decode.confidence_fit import rank_correlation, sentence_chrf
    from mt.decode.engine import search_sources

    src_ids = translator.encode(sources)
    start = time.perf_counter()
    found = [hyps[0] for hyps in search_sources(translator.engine, src_ids, decode)]
    searching = time.perf_counter() - start
    start = time.perf_counter()  # what a translation's confidence adds to mt's search: its signals, the estimator
    features, _ = translator.read_signals(src_ids, [h.tokens for h in found], [h.log_probs for h in found])
    confidence = estimator(features)
    reading = time.perf_counter() - start
    hypotheses = translator.tokenizer.decode_tgt([h.tokens for h in found])
    start = time.perf_counter()  # what it costs where the search gives no log-probabilities: a forced pass
    translator.signals(sources, hypotheses)
    forced = time.perf_counter() - start
    labels = sentence_chrf(hypotheses, [references])
    rho, plain = rank_correlation(confidence, labels), rank_correlation(untrained(features), labels)
    alone = {signal: rank_correlation(features[:, i], labels) for i, signal in enumerate(SIGNALS)}
    best = max(alone, key=lambda signal: abs(alone[signal]))
    errors = labels < args.error_chrf / 100
    doubted = torch.zeros_like(errors)
    doubted[confidence.argsort()[:round(args.abstain * len(sources))]] = True
    caught = (errors & doubted).sum().item() / max(errors.sum().item(), 1)
    print(f"{name}: {len(sources):,} sentences; ρ confidence {rho:.3f}, untrained {plain:.3f} ({rho - plain:+.3f}); "
          f"best signal {best} {alone[best]:.3f}; {errors.sum().item():,} errors (chrF < {args.error_chrf}), "
          f"{100 * caught:.1f}% of them among the {100 * args.abstain:.0f}% least confident; search {searching:.2f} s, "
          f"confidence {reading:.3f} s ({100 * reading / searching:.1f}%), a forced pass {forced:.2f} s "
          f"({100 * forced / searching:.1f}%)")
    return {"test set": name, "sentences": len(sources),
            "BLEU": round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2),
            "chrF": round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2),
            "ρ confidence": round(rho, 3), "ρ untrained": round(plain, 3), "ρ gain": round(rho - plain, 3),
            "best signal": best, "ρ best signal": round(alone[best], 3),
            f"errors (chrF < {args.error_chrf:g})": int(errors.sum().item()),
            f"errors among the {100 * args.abstain:.0f}% least confident %": round(100 * caught, 1),
            "search s": round(searching, 2), "confidence s": round(reading, 3),
            "confidence % of search": round(100 * reading / searching, 1), "forced pass s": round(forced, 2),
            "forced pass % of search": round(100 * forced / searching, 1)}


def parsed(description: str, *more: tuple[str, dict]) -> argparse.Namespace:
    """The options of this benchmark and of bench_guard.py, and `more` of the caller's own (flag, settings)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--dev", nargs=2, type=Path, metavar=("SRC", "REF"),
                        default=(TATOEBA / "dev.zh", TATOEBA / "dev.en"), help="default: Tatoeba's dev set")
    parser.add_argument("--test", nargs=3, action="append", dest="tests", metavar=("NAME", "SRC", "REF"),
                        help="a test set (repeatable; default: Tatoeba's test set)")
    parser.add_argument("--limit", type=int, default=None, help="the first N lines of each test set")
    parser.add_argument("--beam", type=int, default=None, help="default: the checkpoint's decode settings")
    parser.add_argument("--error-chrf", type=float, default=30.0, help="an error: sentence chrF below this")
    parser.add_argument("--abstain", type=float, default=0.1, help="the share of least confident sentences")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_THREADS", 2)),
                        help="torch threads (default: $BENCH_THREADS, else 2)")
    for flag, settings in more:
        parser.add_argument(flag, **settings)
    args = parser.parse_args()
    args.tests = args.tests or [("tatoeba", TATOEBA / "test.zh", TATOEBA / "test.en")]
    return args


def fitted(args: argparse.Namespace):
    """The checkpoint's translator, its estimator and normal lengths and scripts fitted on --dev as `mt confidence`
    fits them (in a temporary folder: the checkpoint's own are left alone), and its decode settings (--beam)."""
    import torch

    from mt.decode.confidence_fit import fit_confidence
    from mt.decode.translator import load_fitted, load_translator

    torch.set_num_threads(args.threads)
    translator = load_translator(args.checkpoint, "cpu")
    decode = translator.decode.replace(beam_size=args.beam) if args.beam else translator.decode
    with tempfile.TemporaryDirectory() as folder:
        print(fit_confidence(translator, Path(folder) / "model.pt", lines(args.dev[0], None),
                             [lines(args.dev[1], None)], decode))
        translator.estimator, translator.normal = load_fitted(Path(folder) / "model.pt", translator.facts,
                                                              translator.tokenizer.vocab_hash)
    return translator, decode


def main() -> None:
    args = parsed(__doc__)
    translator, decode = fitted(args)
    print(f"# confidence: {args.checkpoint}, beam {decode.beam_size}, torch {args.threads} thread(s)")
    rows = [bench_test(translator, name, lines(Path(src), args.limit), lines(Path(ref), args.limit), decode,
                       translator.estimator, args) for name, src, ref in args.tests]
    record("bench_confidence.py", f"confidence, {args.checkpoint}: fitted on {args.dev[0]} "
           f"({len(lines(args.dev[0], None)):,} sentences), beam {decode.beam_size}, {args.threads} thread(s)",
           rows)


if __name__ == "__main__":
    main()
