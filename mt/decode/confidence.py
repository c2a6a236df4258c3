"""A confidence for every translation: a sentence score in [0, 1], and a score per word.

The signals are the model's own: the log-probability of each piece of the translation (mt's search gives them with
its outputs; other translations are read in one forced pass, mt/decode/score.py), the translation's length
against its source's, how much of it is copied from the source and how much it repeats itself. An Estimator, fitted
by `mt confidence` on a dev set to predict each sentence's chrF against its reference, turns them into the sentence
score. A model without one gives the untrained score: the geometric mean of its tokens' probabilities, exp(mean
log-probability). A word's score is the model's probability of the word: the product of its pieces'
probabilities.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, ValidationError
from torch import Tensor, nn

from mt.core.atomic import Kind, atomic_write_bytes
from mt.core.errors import MtError

WORD_START = "▁"  # SentencePiece's mark of a piece that starts a word
UNLIKELY = math.log(0.1)  # a token the model gave less than one chance in ten
SIGNALS = ("mean_log_prob", "min_log_prob", "log_prob_spread", "mean_word_log_prob", "min_word_log_prob",
           "unlikely_share", "length_ratio", "copy_rate", "repetition")


@dataclass
class Confidence:
    score: float                    # the translation's, in [0, 1]
    words: list[tuple[str, float]]  # each word of the translation and the model's probability of it

    @classmethod
    def joined(cls, sentences: list[Confidence]) -> Confidence:
        """A text's confidence from its sentences': their scores' mean weighted by their words (each at least one),
        and their words in order; 1 for a text without sentences (an empty line)."""
        weights = [max(len(c.words), 1) for c in sentences]
        score = sum(w * c.score for w, c in zip(weights, sentences)) / sum(weights) if sentences else 1.0
        return cls(score, [word for c in sentences for word in c.words])

    def json(self) -> dict:
        """{"confidence": C, "words": [[WORD, P], …]}, rounded to 4 places."""
        return {"confidence": round(self.score, 4), "words": [[word, round(p, 4)] for word, p in self.words]}


def words_of(pieces: list[str], log_probs: list[float]) -> list[tuple[str, float]]:
    """The words of a translation's pieces (each word starts at a piece marked "▁"), each with the sum of its
    pieces' log-probabilities (log_probs: one per piece; an EOS's after them is no word's)."""
    words: list[tuple[str, float]] = []
    for piece, log_prob in zip(pieces, log_probs):
        if piece.startswith(WORD_START) or not words:
            words.append((piece.removeprefix(WORD_START), log_prob))
        else:
            text, total = words[-1]
            words[-1] = (text + piece, total + log_prob)
    return [(text, total) for text, total in words if text]  # a lone "▁" before punctuation is no word


def signals(src_pieces: list[str], tgt_pieces: list[str], log_probs: list[float]) -> list[float]:
    """A translation's signals, in SIGNALS' order: src_pieces and tgt_pieces without EOS; log_probs, one per target
    piece, then EOS's where the translation ended (not an output cut at its length limit). The length ratio counts
    an EOS on either side."""
    words = words_of(tgt_pieces, log_probs)
    word_log_probs = [log_prob for _, log_prob in words] or log_probs[-1:]  # an empty translation: its EOS
    mean = sum(log_probs) / len(log_probs)
    spread = math.sqrt(sum((lp - mean) ** 2 for lp in log_probs) / len(log_probs))
    source = "".join(src_pieces).replace(WORD_START, " ")
    target_words = [word for word, _ in words if any(c.isalnum() for c in word)]
    return [mean, min(log_probs), spread, sum(word_log_probs) / len(word_log_probs), min(word_log_probs),
            sum(lp < UNLIKELY for lp in log_probs) / len(log_probs),
            math.log((len(tgt_pieces) + 1) / (len(src_pieces) + 1)), copied(source, target_words),
            repetition(tgt_pieces)]


def copied(source: str, target_words: list[str]) -> float:
    """The share of the target's words found in its source's text (untranslated copies; names and numbers too)."""
    return sum(word in source for word in target_words) / len(target_words) if target_words else 0.0


def repetition(pieces: list[str]) -> float:
    """The share of a translation's piece bigrams that it has already written (a looping output repeats them)."""
    bigrams = list(zip(pieces, pieces[1:]))
    return 1.0 - len(set(bigrams)) / len(bigrams) if bigrams else 0.0


def untrained(features: Tensor) -> Tensor:
    """[N, F] → [N]: exp(mean log-probability), the geometric mean of the tokens' probabilities."""
    return features[:, SIGNALS.index("mean_log_prob")].exp()


def confidences_of(features: Tensor, words: list[list[tuple[str, float]]],
                   estimator: Estimator | None) -> list[Confidence]:
    """Translations' confidences from their signals [N, F] and their words' log-probabilities: the estimator's
    scores (the untrained ones without it), and each word's probability."""
    scores = (estimator or untrained)(features).tolist() if words else []
    return [Confidence(score, [(word, math.exp(log_prob)) for word, log_prob in sentence])
            for score, sentence in zip(scores, words)]


class NormalFile(BaseModel):
    """What the model's translations look like, for the failure guard (mt/decode/guard.py's Normal)."""

    model_config = ConfigDict(extra="forbid")
    length_ratio: tuple[float, float]
    scripts: list[str]


class EstimatorFile(BaseModel):
    """The estimator's file (JSON, beside its checkpoint): what Estimator.save writes."""

    model_config = ConfigDict(extra="forbid")
    format: Literal[1]
    signals: list[str]
    mean: list[float]
    std: list[float]
    weights: list[float]
    bias: float
    normal: NormalFile
    model: dict  # of the checkpoint it was fitted for: step, vocab_hash
    fitted: dict  # on what: sentences, Spearman's ρ there


class Estimator(nn.Module):
    """Signals [N, F] → confidence [N] in [0, 1]: a logistic regression over the signals standardised, fitted to
    sentence chrF / 100 by binary cross-entropy (a soft label in [0, 1]). A linear score keeps its direction beyond
    the values the dev set had: text longer or stranger than any there still counts against a translation."""

    def __init__(self, mean: Tensor, std: Tensor):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.linear = nn.Linear(len(SIGNALS), 1)

    def logits(self, features: Tensor) -> Tensor:
        return self.linear((features - self.mean) / self.std).squeeze(-1)

    @torch.no_grad()
    def forward(self, features: Tensor) -> Tensor:
        return self.logits(features).sigmoid()

    @classmethod
    def fit(cls, features: Tensor, labels: Tensor, steps: int = 1000, weight_decay: float = 1e-3) -> Estimator:
        """Fitted on features [N, F] and labels [N] in [0, 1], full batch, from zero weights: the same on every
        run."""
        estimator = cls(features.mean(0), features.std(0).clamp_min(1e-6))
        nn.init.zeros_(estimator.linear.weight)
        nn.init.zeros_(estimator.linear.bias)
        optimizer = torch.optim.Adam(estimator.linear.parameters(), lr=1e-2, weight_decay=weight_decay)
        loss = nn.BCEWithLogitsLoss()
        for _ in range(steps):
            optimizer.zero_grad()
            loss(estimator.logits(features), labels).backward()
            optimizer.step()
        return estimator

    def save(self, path: Path, normal: NormalFile, model: dict, fitted: dict) -> None:
        """Into `path` (JSON), with what the model's translations look like (`normal`), the model it was fitted for
        and what it was fitted on."""
        file = EstimatorFile(format=1, signals=list(SIGNALS), mean=self.mean.tolist(), std=self.std.tolist(),
                             weights=self.linear.weight[0].tolist(), bias=self.linear.bias.item(), normal=normal,
                             model=model, fitted=fitted)
        atomic_write_bytes(path, file.model_dump_json(indent=1).encode("utf-8") + b"\n", ESTIMATOR)

    @classmethod
    def load(cls, path: Path) -> tuple[Estimator, EstimatorFile]:
        """The estimator in `path`, and its file (what it was fitted for and on)."""
        try:
            file = EstimatorFile.model_validate(json.loads(path.read_bytes()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as e:
            raise MtError(f"{path}: not a confidence estimator mt wrote ({str(e).splitlines()[0]}); fit it again "
                          "(mt confidence) or remove it") from None
        if file.signals != list(SIGNALS) or not len(file.weights) == len(file.mean) == len(file.std) == len(SIGNALS):
            raise MtError(f"{path}: fitted on other signals than this mt reads; fit it again (mt confidence)")
        estimator = cls(torch.tensor(file.mean), torch.tensor(file.std))
        with torch.no_grad():
            estimator.linear.weight.copy_(torch.tensor([file.weights]))
            estimator.linear.bias.fill_(file.bias)
        return estimator, file


def _is_estimator(path: Path) -> bool:
    try:
        return "signals" in json.loads(path.read_bytes())
    except (OSError, ValueError, TypeError):
        return False


ESTIMATOR = Kind("a confidence estimator", _is_estimator)
