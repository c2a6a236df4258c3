"""`mt confidence`: fit a model's confidence estimator (mt/decode/confidence.py) on a dev set, and how well a
confidence ranks translations: Spearman's ρ with each sentence's chrF against its references (`mt evaluate
--scores` on a test set).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import sacrebleu
import torch
from torch import Tensor

from mt.config import DecodeConfig
from mt.core.atomic import TEXT, atomic_write_bytes
from mt.core.errors import MtError
from mt.decode.confidence import Estimator, NormalFile, confidences_of, untrained
from mt.decode.guard import Normal
from mt.decode.translator import Translator, estimator_facts
from mt.exchange.checkpoint import estimator_path


FEWEST = 50  # the fewest dev sentences an estimator is fitted on


def sentence_chrf(hypotheses: list[str], references: list[list[str]]) -> Tensor:
    """Each hypothesis's chrF against its references (one list per set of references), / 100: [N] in [0, 1]."""
    return torch.tensor([sacrebleu.sentence_chrf(hyp, [refs[i] for refs in references]).score / 100
                         for i, hyp in enumerate(hypotheses)])


def rank_correlation(scores: Tensor, labels: Tensor) -> float:
    """Spearman's ρ between two [N] (0 where either is constant: no ranking)."""
    if len(scores) < 2 or scores.min() == scores.max() or labels.min() == labels.max():
        return 0.0
    from scipy.stats import spearmanr  # here: scipy.stats takes most of a second to import, and only fitting ranks

    return float(spearmanr(scores.numpy(), labels.numpy()).statistic)


@dataclass
class Ranking:
    """How well a confidence ranks translations by their sentence chrF, beside the untrained score's ranking."""

    sentences: int
    rho: float
    untrained_rho: float
    trained: bool

    def __str__(self) -> str:
        if not self.trained:
            return (f"confidence (untrained): Spearman's ρ with sentence chrF {self.rho:.3f} on {self.sentences:,} "
                    "sentences")
        return (f"confidence: Spearman's ρ with sentence chrF {self.rho:.3f} on {self.sentences:,} sentences "
                f"(the untrained score's: {self.untrained_rho:.3f})")


def ranking(features: Tensor, labels: Tensor, estimator: Estimator | None) -> Ranking:
    scores = (estimator or untrained)(features)
    return Ranking(len(labels), rank_correlation(scores, labels), rank_correlation(untrained(features), labels),
                   estimator is not None)


def fit_confidence(translator: Translator, model: Path, sources: list[str], references: list[list[str]],
                   decode: DecodeConfig) -> str:
    """Translate the dev set, fit the estimator to the translations' sentence chrF, and write it beside `model`
    (estimator_path). Returns what it did, in one line."""
    if len(sources) < FEWEST:
        raise MtError(f"the dev set has {len(sources):,} sentences: a confidence estimator needs at least {FEWEST}")
    hypotheses = translator.translate_lines(sources, decode)
    features, _ = translator.signals(sources, hypotheses)
    labels = sentence_chrf(hypotheses, references)
    estimator = Estimator.fit(features, labels)
    fitted = ranking(features, labels, estimator)
    path = estimator_path(model)
    estimator.save(path, normal(translator, sources, references[0]),
                   estimator_facts(translator.facts, translator.tokenizer.vocab_hash),
                   {"sentences": len(sources), "rho": round(fitted.rho, 4),
                    "untrained_rho": round(fitted.untrained_rho, 4)})
    return (f"confidence estimator → {path}: fitted on {len(sources):,} dev sentences, Spearman's ρ with their "
            f"chrF {fitted.rho:.3f} there (the untrained score's: {fitted.untrained_rho:.3f}); `mt evaluate "
            "--scores FILE` measures it on the test set")


def normal(translator: Translator, sources: list[str], references: list[str]) -> NormalFile:
    """What the model's translations should look like, from the dev set's references (guard.Normal)."""
    src_lengths = [len(ids) - 1 for ids in translator.tokenizer.encode_src(sources)]            # EOS aside
    ref_lengths = [len(ids) - 2 for ids in translator.tokenizer.encode_tgt(references)]         # BOS, EOS aside
    found = Normal.of_references(src_lengths, ref_lengths, references)
    return NormalFile(length_ratio=found.length_ratio, scripts=list(found.scripts))


def write_scores(path: Path, sources: list[str], hypotheses: list[str], references: list[list[str]],
                 translator: Translator) -> Ranking:
    """Each test sentence's confidence and word scores into `path` (JSON Lines: {"line", "confidence",
    "chrf", "words"}), and how well the confidence ranks the translations."""
    features, words = translator.signals(sources, hypotheses)
    labels = sentence_chrf(hypotheses, references)
    found = confidences_of(features, words, translator.estimator)
    lines = [json.dumps({"line": i + 1, **c.json(), "chrf": round(100 * label, 2)}, ensure_ascii=False) + "\n"
             for i, (c, label) in enumerate(zip(found, labels.tolist()))]
    atomic_write_bytes(path, "".join(lines).encode("utf-8"), TEXT)
    return ranking(features, labels, translator.estimator)
