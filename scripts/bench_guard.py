"""The failure guard (mt/decode/guard.py) and the confidence as a detector of failed translations: a report, not a
test.

For a checkpoint: the estimator and the normal lengths and scripts are fitted on the dev set as `mt confidence` fits
them (into a temporary folder: the checkpoint's own are left alone). Then each test set is translated twice, with
the guard off and on (the checkpoint's decode settings, or --beam), and four failures are injected into each
sentence's translation (guard off):

- copy: the source itself;
- truncated: the first half of the translation's words (translations of 4 words or more);
- loop: the translation, then its last two words 4 times more;
- other: another sentence's translation (a random one, --seed).

Each translation, the model's and the injected, gets a failure score: 1 − its confidence (read in a forced pass),
plus 1 where the guard's checks fail it. The AUROC of that score, injected against the model's own translations,
says how well a failure is told from a translation (1: always; 0.5: a coin).

Figures (one record, benchmarks/results/bench_guard.jsonl, scripts/records.py), a row per test set: sentences;
the model's translations the guard fails (guard off), and by how (the reasons, most frequent first); those that
still fail after their retry; the translations that pass, and how many of them come out the same with the guard on
(every one should); BLEU and chrF with the guard off and on; seconds of each; AUROC per injected failure and over all
four; errors (sentence chrF below --error-chrf) among the --abstain share of least confident translations (guard
on), as a share of all errors.

    python scripts/bench_guard.py --checkpoint runs/tatoeba-cpu/checkpoints/best.pt
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

from bench_confidence import fitted, lines, parsed  # scripts/bench_confidence.py: the options, the fitting
from records import record  # scripts/records.py: the results file

KINDS = ("copy", "truncated", "loop", "other")


def injected(sources: list[str], translations: list[str], rng: random.Random) -> dict[str, list[tuple[int, str]]]:
    """Each kind's failed translations, as (the sentence's index, the text)."""
    others = list(range(len(sources)))
    rng.shuffle(others)
    found = {kind: [] for kind in KINDS}
    for i, (source, text) in enumerate(zip(sources, translations)):
        words = text.split()
        found["copy"].append((i, source))
        if len(words) >= 4:
            found["truncated"].append((i, " ".join(words[:len(words) // 2])))
        if len(words) >= 2:
            found["loop"].append((i, " ".join(words + words[-2:] * 4)))
        if others[i] != i and translations[others[i]] != text:
            found["other"].append((i, translations[others[i]]))
    return found


def failure_scores(translator, decode, sources: list[str], texts: list[str]) -> list[float]:
    """1 − each text's confidence as a translation of its source, + 1 where the guard fails it."""
    from mt.decode.translator import Translation

    src_ids = translator.encode(sources)
    scores = []
    for ids, text, confidence in zip(src_ids, texts, translator.confidences(sources, texts)):
        tokens = translator.tokenizer.encode_tgt([text])[0][1:-1]
        failed = translator.failure_of(ids, Translation(text, 0.0, tokens=tokens), decode, None) is not None
        scores.append(1 - confidence.score + failed)
    return scores


def auroc(positive: list[float], negative: list[float]) -> float:
    """The chance that a positive scores above a negative (ties count half): Mann–Whitney's U / (n₊ · n₋)."""
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(positive, negative).statistic) / (len(positive) * len(negative))


def bench_test(translator, name: str, sources: list[str], references: list[str], decode, args) -> dict:
    import sacrebleu
    import torch

    from mt.decode.confidence_fit import sentence_chrf

    timed = {}
    for guard in (False, True):
        start = time.perf_counter()
        timed[guard] = [nbest[0] for nbest in translator.translate(sources, decode.replace(guard=guard))]
        timed[guard, "s"] = time.perf_counter() - start
    off, on = timed[False], timed[True]
    src_ids = translator.encode(sources)
    reasons = Counter(f for ids, t in zip(src_ids, off) if (f := translator.failure_of(ids, t, decode, None)))
    passing = [i for i, (ids, t) in enumerate(zip(src_ids, off)) if translator.failure_of(ids, t, decode, None) is None]
    same = sum(on[i].text == off[i].text for i in passing)
    texts = [t.text for t in off]
    own = failure_scores(translator, decode, sources, texts)
    row = {"test set": name, "sentences": len(sources), "failed (guard off)": sum(reasons.values()),
           "how": ", ".join(f"{reason} {n}" for reason, n in reasons.most_common()),
           "still failed (guard on)": sum(t.failure is not None for t in on), "passing": len(passing),
           "passing unchanged": same}
    for guard, found in ((False, off), (True, on)):
        hypotheses = [t.text for t in found]
        row[f"BLEU guard {'on' if guard else 'off'}"] = round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)
        row[f"chrF guard {'on' if guard else 'off'}"] = round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2)
        row[f"seconds guard {'on' if guard else 'off'}"] = round(timed[guard, "s"], 2)
    everything = []
    for kind, failed in injected(sources, texts, random.Random(args.seed)).items():  # a kind may have none
        scores = failure_scores(translator, decode, [sources[i] for i, _ in failed], [text for _, text in failed])
        everything += scores
        row[f"AUROC {kind}"] = round(auroc(scores, own), 3) if scores else None
    row["AUROC all"] = round(auroc(everything, own), 3)
    labels = sentence_chrf([t.text for t in on], [references])
    errors = labels < args.error_chrf / 100
    doubted = torch.zeros_like(errors)
    doubted[torch.tensor([t.confidence.score for t in on]).argsort()[:round(args.abstain * len(sources))]] = True
    row[f"errors (chrF < {args.error_chrf:g})"] = int(errors.sum().item())
    row[f"errors among the {100 * args.abstain:.0f}% least confident %"] = \
        round(100 * (errors & doubted).sum().item() / max(errors.sum().item(), 1), 1)
    print(f"{name}: " + "; ".join(f"{key} {value}" for key, value in row.items() if key != "test set"))
    return row


def main() -> None:
    args = parsed(__doc__, ("--seed", {"type": int, "default": 1,
                                       "help": "which other sentence's translation is injected"}))
    translator, decode = fitted(args)
    print(f"# failure guard: {args.checkpoint}, beam {decode.beam_size}, normal {translator.normal}, torch "
          f"{args.threads} thread(s)")
    rows = [bench_test(translator, name, lines(Path(src), args.limit), lines(Path(ref), args.limit), decode, args)
            for name, src, ref in args.tests]
    record("bench_guard.py", f"failure guard, {args.checkpoint}: fitted on {args.dev[0]} "
           f"({len(lines(args.dev[0], None)):,} sentences), beam {decode.beam_size}, seed {args.seed}, "
           f"{args.threads} thread(s)", rows)


if __name__ == "__main__":
    main()
