"""A lexical shortlist: at each step, score only the target pieces that a batch's sources can plausibly turn into,
not the whole vocabulary (Jean et al. 2015; L'Hostis et al. 2016; Marian's `--shortlist`, which the students of
Firefox's translations use).

In a small decoder, the generator's product [N, D] × [D, V] and the softmax and top-k over V are a large part of a
step; a batch's shortlist is a few thousand of the V pieces. It is the union, over the pieces of the batch's
sources, of each piece's likeliest translations (t(e | f) of IBM Model 1, mt/data/word_translation.py, learned from
the model's training pairs), with the target language's most frequent pieces, EOS and UNK, and (with a joint
vocabulary) the source pieces themselves, which names and numbers copy. A search scores and outputs those pieces
only, so an output can differ from the full search's where its best piece lies outside.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from mt.core.atomic import Kind, atomic_open
from mt.core.errors import MtError
from mt.data.tokenizer import BOS, EOS, PAD, UNK, Tokenizer
from mt.data.word_translation import Sides, Table, chunks
from mt.model.transformer import Transformer

FORMAT = "mt shortlist 1"
SHORTLIST = Kind("a shortlist", lambda path: zipfile.is_zipfile(path) and Shortlist.is_one(path))
MAX_PAIRS = 200_000  # pairs drawn and tokenised at most; the tables learn from as many as MAX_LINKS allows


@dataclass
class Shortlist:
    """Each source piece's likeliest target pieces, and the target pieces every batch may output."""

    translations: Tensor  # [V_src, K] target ids, best first; -1 where a piece has fewer than K
    always: Tensor        # [F] the most frequent target pieces, EOS and UNK
    joint: bool           # one vocabulary for both sides: a source piece may be copied
    vocab_hash: str       # the tokenizer's (Tokenizer.vocab_hash)

    def targets(self, src_ids: list[list[int]]) -> Tensor:
        """The target ids the sources of one batch may turn into, ascending [V']; never PAD or BOS."""
        pieces = torch.tensor([i for ids in src_ids for i in ids], dtype=torch.long).unique()     # [P]
        parts = [self.translations[pieces].flatten(), self.always] + ([pieces] if self.joint else [])
        allowed = torch.cat(parts).unique()                                                       # ascending
        return allowed[(allowed >= 0) & (allowed != PAD) & (allowed != BOS)]

    def save(self, path: Path) -> None:
        with atomic_open(path, SHORTLIST) as f:
            torch.save({"format": FORMAT, "translations": self.translations, "always": self.always,
                        "joint": self.joint, "vocab_hash": self.vocab_hash}, f)

    @staticmethod
    def is_one(path: Path) -> bool:
        try:
            return torch.load(path, map_location="cpu", weights_only=True).get("format") == FORMAT
        except Exception:  # anything else torch wrote, or a damaged file
            return False

    @classmethod
    def load(cls, path: Path, vocab_hash: str, vocab_sizes: tuple[int, int]) -> Shortlist:
        """A shortlist file made by `mt shortlist`, for the model whose tokenizer has `vocab_hash` (if given) and
        whose vocabularies have `vocab_sizes` (source, target) pieces."""
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise MtError(f"{path}: no such file (--shortlist; make one with `mt shortlist`)") from None
        except Exception as e:  # a damaged or foreign file: pickle, zip and torch raise many kinds
            raise MtError(f"{path}: not a shortlist made by `mt shortlist` ({type(e).__name__})") from None
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise MtError(f"{path}: not a shortlist made by `mt shortlist`")
        try:
            found = cls(state["translations"].long(), state["always"].long(), bool(state["joint"]),
                        str(state["vocab_hash"]))
        except (KeyError, AttributeError):
            raise MtError(f"{path}: a damaged shortlist; make it again with `mt shortlist`") from None
        if vocab_hash and found.vocab_hash != vocab_hash:
            raise MtError(f"{path}: a shortlist for another vocabulary (hash {found.vocab_hash}, the model's "
                          f"{vocab_hash}); make one for this model with `mt shortlist`")
        src_size, tgt_size = vocab_sizes
        if (found.translations.dim() != 2 or len(found.translations) != src_size or found.always.dim() != 1
                or not _within(found.translations, -1, tgt_size) or not _within(found.always, 0, tgt_size)):
            raise MtError(f"{path}: a damaged shortlist (its pieces do not fit the model's vocabulary); make it "
                          f"again with `mt shortlist`")
        return found


def _within(ids: Tensor, low: int, high: int) -> bool:
    """Whether every id is in [low, high)."""
    return ids.numel() == 0 or (int(ids.min()) >= low and int(ids.max()) < high)


def learn_shortlist(src_texts: list[str], tgt_texts: list[str], tokenizer: Tokenizer, translations: int,
                    frequent: int, seed: int = 0) -> Shortlist:
    """Each source piece's `translations` likeliest target pieces by t(e | f) of IBM Model 1, learned from at most
    MAX_PAIRS of the pairs, drawn at random (and at most word_translation.MAX_LINKS links), and the `frequent` most
    frequent target pieces of those pairs."""
    rows = np.random.default_rng(seed).permutation(len(src_texts))[:MAX_PAIRS]
    src = _sides(tokenizer.encode_src([src_texts[i] for i in rows]))
    tgt = _sides(tokenizer.encode_tgt([tgt_texts[i] for i in rows]))
    if not tgt.lengths.any():
        raise MtError("no pair with words on its target side: nothing to learn a shortlist from")
    size = max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    learned = np.sort(next(chunks(np.arange(len(rows)), (src.lengths + 1) * tgt.lengths)))
    table = Table.learn(src.take(learned), tgt.take(learned), size)   # source id 0, PAD, stands for NULL
    f, e = table.keys // size, table.keys % size
    order = np.lexsort((-table.probs, f))                            # by source piece, likeliest first
    f, e = f[order], e[order]
    rank = np.arange(len(f)) - np.searchsorted(f, f)                 # each link's rank within its source piece
    keep = (rank < translations) & (f != PAD)
    table_ids = np.full((tokenizer.src_vocab_size, translations), -1, dtype=np.int64)
    table_ids[f[keep], rank[keep]] = e[keep]
    counts = np.bincount(tgt.ids, minlength=tokenizer.tgt_vocab_size)
    always = np.union1d(np.argsort(-counts, kind="stable")[:frequent], [EOS, UNK])
    return Shortlist(torch.from_numpy(table_ids), torch.from_numpy(always), tokenizer.tgt_proto is None,
                     tokenizer.vocab_hash)


def _sides(ids: list[list[int]]) -> Sides:
    """Pieces of many sentences as word_translation.Sides, without PAD, UNK, BOS and EOS, which translate nothing."""
    kept = [[i for i in row if i > EOS] for row in ids]
    return Sides(np.fromiter((i for row in kept for i in row), dtype=np.int64),
                 np.array([len(row) for row in kept], dtype=np.int64))


def narrowed_generator(model: Transformer, vocab: Tensor | None) -> nn.Module:
    """The model's generator (vocab None), or a copy of it that gives logits for the target ids `vocab` [V'] only,
    in that order: [N, V']. The model itself is left as it is, for other searches to read at the same time."""
    if vocab is None:
        return model.generator
    proj = model.generator.proj
    head = nn.Linear(proj.in_features, len(vocab), bias=proj.bias is not None,
                     device=proj.weight.device, dtype=proj.weight.dtype)
    rows = vocab.to(proj.weight.device)
    head.weight.data = proj.weight.detach().index_select(0, rows)                # [V', D]
    if proj.bias is not None:
        head.bias.data = proj.bias.detach().index_select(0, rows)
    return head
