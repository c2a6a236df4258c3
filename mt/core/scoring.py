"""Scoring with sacreBLEU: corpus BLEU and chrF with their signatures, against one or more references.

The BLEU tokenizer follows the target language (13a for English, "zh" for Chinese), as sacreBLEU chooses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from mt.core.errors import MtError


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str

    def lines(self) -> list[str]:
        return [f"BLEU {self.bleu:.3f}  {self.bleu_signature}", f"chrF {self.chrf:.3f}  {self.chrf_signature}"]


def score(hypotheses: list[str], references: list[list[str]], tgt_lang: str) -> Scores:
    """hypotheses: one line per segment; references: one list of lines per reference set."""
    if not hypotheses:
        raise MtError("no lines to score")
    for number, ref in enumerate(references, start=1):
        if len(ref) != len(hypotheses):
            raise MtError(f"reference {number} has {len(ref)} lines but there are {len(hypotheses)} hypotheses")
    bleu, chrf = BLEU(trg_lang=tgt_lang), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, references)
    chrf_score = chrf.corpus_score(hypotheses, references)
    return Scores(bleu_score.score, chrf_score.score, str(bleu.get_signature()), str(chrf.get_signature()))
