"""Translating with a CTranslate2 export of mt (`mt export --ctranslate2`): the engine behind
`--engine ctranslate2`, searching and scoring as mt's own Searcher does.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from mt.config import DecodeConfig, config_from_dict
from mt.core.device import int8_decodes_faster
from mt.core.errors import MtError
from mt.data.tokenizer import BOS, PAD, Tokenizer
from mt.decode.constraints import NO_CONSTRAINTS, Terms
from mt.decode.engine import Hypothesis
from mt.decode.shortlist import Shortlist
from mt.exchange.export import EXPORT_META_FILE, check_export_files, export_meta, optional_package


def compute_type(requested: str, device: torch.device) -> str:
    """CTranslate2's compute type for --compute-type: auto is int8 (weights quantised as the model loads) where int8
    decodes faster than float32, at a small cost in quality (figures: docs/benchmarks.md); elsewhere the export's
    own type ("default")."""
    if requested != "auto":
        return requested
    return "int8" if int8_decodes_faster(device) else "default"


class CTranslate2Engine:
    """An exported model, searching a batch of sources (ids) as mt's own Searcher does: each sentence within its own
    output limit, PAD and BOS never output. Beam search differs in its length penalty: CTranslate2 divides by
    length ** alpha (mt: GNMT's), and so do the scores it returns. It runs torch's number of threads (one per core,
    or OMP_NUM_THREADS), as mt's own search does, rather than CTranslate2's default of 4. A shortlist becomes
    CTranslate2's vocabulary map (`use_vmap`), which narrows each call to its sources' pieces' targets: a call per
    output limit, so its lists can be narrower than mt's, which are the batch's."""

    def __init__(self, model_dir: Path, device: torch.device, requested_type: str = "auto"):
        self.ctranslate2 = optional_package("ctranslate2", "ctranslate2")
        model_dir = Path(model_dir)
        meta = export_meta(model_dir)
        if meta is None or meta["format"] != "ctranslate2":
            raise MtError(f"{model_dir}: not a CTranslate2 export of mt (make one with `mt export --ctranslate2`)")
        check_export_files(model_dir, meta)
        self.config = config_from_dict(meta.get("config"), source=str(model_dir / EXPORT_META_FILE))
        self.facts = meta.get("facts", {})
        self.tokenizer = Tokenizer.load(model_dir, self.config.data.scripts())
        if self.tokenizer is None:
            raise MtError(f"{model_dir}: its SentencePiece model is missing; export it again")
        self.model_dir, self.vocab_hash = model_dir, meta.get("vocab_hash", "")  # the checkpoint's tokenizer's
        self.options = {"device": device.type, "compute_type": compute_type(requested_type, device),
                        "intra_threads": torch.get_num_threads()}
        self.requested_type, self.vmap_of = requested_type, ""  # the shortlist whose vocabulary map it holds
        self.translator = self._load()

    def _load(self, vmap: str | None = None):
        """CTranslate2's translator of the export, with `vmap` (vmap.txt's text) as its vocabulary map if given:
        then it loads from a private directory of links to the export's files and that vmap.txt (CTranslate2 reads
        a directory's files as it loads, and keeps none of them; files handed over in memory it keeps)."""
        if vmap is None:
            return self._translator(self.model_dir)
        with tempfile.TemporaryDirectory() as private:
            directory = Path(private)
            for path in self.model_dir.iterdir():
                if path.is_file() and path.name != "vmap.txt":
                    (directory / path.name).symlink_to(path.resolve())
            (directory / "vmap.txt").write_text(vmap, encoding="utf-8")
            return self._translator(directory)

    def _translator(self, directory: Path):
        try:
            return self.ctranslate2.Translator(str(directory), **self.options)
        except ValueError as e:  # a compute type this device or build lacks
            raise MtError(f"--compute-type {self.requested_type}: {e}")
        except RuntimeError as e:  # model.bin missing or damaged
            raise MtError(f"{self.model_dir}: CTranslate2 cannot load it: {e}")

    @property
    def max_positions(self) -> int:
        return self.config.model.max_positions

    @property
    def compute_type(self) -> str:
        return self.options["compute_type"]

    def workers(self, decode: DecodeConfig) -> int:
        """One batch at a time: the translator splits each batch among its own threads (intra_threads)."""
        return 1

    def search_batch(self, src_ids: list[list[int]], limits: list[int], decode: DecodeConfig,
                     terms: list[Terms | None] | None = None) -> list[list[Hypothesis]]:
        """The decode.nbest best outputs of each source of one batch, best first, each of at most its limit's tokens.
        CTranslate2 takes one limit per call, so each group of sentences with the same limit is one call: decoding
        to a longer limit and cutting would change a cut output's score, and the n-best list and its order. A
        length-sorted batch has few such groups. Terms it refuses: it has no constrained search."""
        if terms and any(terms):
            raise MtError(NO_CONSTRAINTS)
        if decode.shortlist:
            self.shortlist(decode.shortlist)
        found: list[list[Hypothesis]] = [[] for _ in src_ids]
        groups: dict[int, list[int]] = {}  # limit → the batch's rows with that limit
        for row, limit in enumerate(limits):
            groups.setdefault(limit, []).append(row)
        for limit, rows in groups.items():
            for row, hyps in zip(rows, self._search([src_ids[row] for row in rows], limit, decode)):
                found[row] = hyps
        return found

    def shortlist(self, path: str) -> None:
        """The shortlist file at `path` (decode.shortlist) becomes the translator's vocabulary map: the model is
        loaded again with it, once."""
        if path != self.vmap_of:
            if not self.vocab_hash:
                raise MtError(f"{self.model_dir}: exported before mt.json named its vocabulary, which a shortlist "
                              f"must match; export it again to use --shortlist")
            vmap = vocabulary_map(Path(path), self.tokenizer, self.vocab_hash)
            self.translator = None  # one model in memory at a time
            self.translator = self._load(vmap)
            self.vmap_of = path

    def score_batch(self, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[list[float]]:
        """The log-probability of each token of each target (pieces then EOS) given its source, teacher forced.
        CTranslate2 takes a target's pieces alone: it puts its decoder's start token (BOS) before them, and scores
        them and the EOS that it puts after them (not BOS), as mt does."""
        src, tgt = self.tokenizer.src, self.tokenizer.tgt
        results = self.translator.score_batch(
            [[src.id_to_piece(t) for t in ids] for ids in src_ids],
            [[tgt.id_to_piece(t) for t in ids[:-1]] for ids in tgt_ids],  # EOS left to CTranslate2
            max_input_length=self.max_positions)
        return [result.log_probs for result in results]

    def cross_attention(self, src_ids: list[int], tgt_ids: list[int]) -> torch.Tensor:
        """The cross-attention of a target (ids: pieces then EOS) given its source (ids, EOS last), teacher forced:
        [1, 1, T, S], the last decoder layer's weights averaged over its heads (the export's alignment layer and
        heads, mt/exchange/ctranslate2.py). CTranslate2 gives them for a search: one whose target prefix is the
        whole target, then one step, which the EOS row reads. That step's row is kept whatever the step outputs: an
        EOS, which a search returns only with return_end_token, or another piece at the length limit."""
        src, tgt = self.tokenizer.src, self.tokenizer.tgt
        [result] = self.translator.translate_batch(
            [[src.id_to_piece(t) for t in src_ids]], target_prefix=[[tgt.id_to_piece(t) for t in tgt_ids[:-1]]],
            beam_size=1, max_decoding_length=len(tgt_ids), max_input_length=self.max_positions,
            return_attention=True, return_end_token=True)
        return torch.tensor(result.attention[0][:len(tgt_ids)])[None, None]

    def _search(self, src_ids: list[list[int]], limit: int, decode: DecodeConfig) -> list[list[Hypothesis]]:
        """One translate_batch call: every output of at most `limit` tokens."""
        src, tgt = self.tokenizer.src, self.tokenizer.tgt
        search = {"beam_size": decode.beam_size}
        if decode.sample:  # CTranslate2 samples with beam 1; top-k 0 draws from every token
            self.ctranslate2.set_random_seed(decode.seed)
            search = {"beam_size": 1, "sampling_topk": decode.top_k, "sampling_topp": decode.top_p,
                      "sampling_temperature": decode.temperature}
        results = self.translator.translate_batch(
            [[src.id_to_piece(t) for t in ids] for ids in src_ids],
            **search, num_hypotheses=decode.nbest, length_penalty=decode.alpha,
            max_decoding_length=limit, min_decoding_length=decode.min_len,
            no_repeat_ngram_size=decode.no_repeat_ngram_size,
            max_input_length=self.max_positions, return_scores=True, use_vmap=bool(decode.shortlist),
            suppress_sequences=[[tgt.id_to_piece(PAD)], [tgt.id_to_piece(BOS)]])
        return [[Hypothesis([tgt.piece_to_id(p) for p in pieces], score)  # CTranslate2 leaves EOS out
                 for pieces, score in zip(result.hypotheses, result.scores)] for result in results]


def vocabulary_map(path: Path, tokenizer: Tokenizer, vocab_hash: str) -> str:
    """The shortlist file at `path`, checked against a tokenizer whose vocabulary has `vocab_hash` (that of the
    checkpoint's), as CTranslate2's vocabulary map (vmap.txt): a line `piece<TAB>targets` per source piece, and one
    with no piece for the targets every batch may output. CTranslate2 adds UNK, BOS and EOS to those itself; BOS
    and PAD are suppressed in every search."""
    shortlist = Shortlist.load(path, vocab_hash, (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size))
    src, tgt = tokenizer.src, tokenizer.tgt
    lines = ["\t" + " ".join(tgt.id_to_piece(i) for i in shortlist.always.tolist())]
    for piece, row in enumerate(shortlist.translations.tolist()):
        targets = [i for i in row if i >= 0] + ([piece] if shortlist.joint else [])  # a joint piece is copied
        if piece != PAD and targets:
            lines.append(src.id_to_piece(piece) + "\t" + " ".join(tgt.id_to_piece(i) for i in targets))
    return "\n".join(lines) + "\n"
