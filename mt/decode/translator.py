"""Text in, text out: tokenise, sort by length into batches, search each batch with an engine (mt's own, or a
CTranslate2 export) within each sentence's output limit, detokenise, in input order; streamed chunk by chunk for
long inputs. The same engines score given translations (mt/decode/score.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from torch import Tensor

from mt.exchange.checkpoint import default_checkpoint, estimator_path, load_model, training_facts
from mt.config import Config, DecodeConfig, Device, Engine
from mt.core.device import has_native_bf16, resolve_device
from mt.core.errors import MtError
from mt.core.run_dir import latest_run
from mt.decode.confidence import SIGNALS, Confidence, Estimator, confidences_of, signals, words_of
from mt.decode.score import PairScore, score_pairs, token_log_probs
from mt.decode.engine import Hypothesis, SearchEngine, output_limit, search_sources
from mt.decode.guard import Normal, failure, on_failure, retried
from mt.decode.searcher import Searcher
from mt.decode.steps import Ensemble
from mt.data.terms import Match, TermFinder, TermUse
from mt.data.tokenizer import EOS, Tokenizer
from mt.decode.constraints import Terms, WordPieces, longest_forms

log = logging.getLogger(__name__)


@dataclass
class Translation:
    text: str
    score: float  # the hypothesis's score (see mt/decode/search.py)
    terms: list[TermUse] = field(default_factory=list)  # with a glossary: what became of each of its terms
    confidence: Confidence | None = None  # mt's search gives it; with_confidence reads the others'
    failure: str | None = None  # how the failure guard found it failing (mt/decode/guard.py), if it did
    tokens: list[int] = field(default_factory=list, repr=False)  # its output ids, as its search gave them


@dataclass
class Attention:
    """What each piece of a translation attended to in its source, teacher forced (mt/model/transformer.py's
    Transformer.cross_attention): weights [layers, heads, T, S], rows labelled by `target`, columns by `source`."""

    source: list[str]      # the source's pieces, EOS last
    source_ids: list[int]
    target: list[str]      # the translation's pieces, EOS last
    target_ids: list[int]
    weights: Tensor        # [layers, heads, T, S]
    layer_numbers: list[int]  # each weights layer's number in the decoder (from 1): all, or CTranslate2's last


@dataclass
class Translator:
    """A model ready to translate text: its engine, its tokenizer, and its config (its languages and position
    table; its `decode` section holds the decode settings a command starts from). It batches the sources and
    sets each one's output limit (search_sources), the same way for either engine."""

    engine: SearchEngine
    tokenizer: Tokenizer
    config: Config
    facts: dict = field(default_factory=dict)  # of its training: step, dev scores (checkpoint.training_facts)
    estimator: Estimator | None = None  # its confidence estimator (mt/decode/confidence.py), if fitted
    normal: Normal = field(default_factory=Normal)  # what its translations look like, for the failure guard

    @property
    def decode(self) -> DecodeConfig:
        return self.config.decode

    @cached_property
    def word_pieces(self) -> WordPieces:
        """Its target vocabulary's WordPieces, for the searches with terms."""
        pieces = self.tokenizer.tgt
        return WordPieces.of([pieces.id_to_piece(i) for i in range(pieces.get_piece_size())])

    def encode(self, lines: list[str], first_line: int = 1) -> list[list[int]]:
        """Source ids per line, EOS last (an empty line: EOS alone); a line longer than the position table is cut
        there, with a warning that numbers it from `first_line`."""
        return encode_sources(self.tokenizer, lines, self.config.model.max_positions, first_line)

    def score(self, src_lines: list[str], tgt_lines: list[str], first_line: int = 1) -> list[PairScore]:
        """The model's log-probability of each target line given its source line (forced decoding), in input order.
        A line longer than the position table is cut there, with a warning that numbers it from `first_line`; a
        target is cut one token shorter, to what search could output (output_limit)."""
        return score_pairs(self.engine, *self._pairs(src_lines, tgt_lines, first_line, "scoring"),
                           self.decode.max_tokens)

    def signals(self, sources: list[str], translations: list[str], src_ids: list[list[int]] | None = None
                ) -> tuple[Tensor, list[list[tuple[str, float]]]]:
        """The confidence signals of each translation given its source, read in one forced pass (as `score`; lines
        are cut as it cuts them; `src_ids`: the sources encoded already, `encode`): [N, F], and each translation's
        words with their log-probabilities."""
        src_ids, tgt_ids = self._pairs(sources, translations, 1, "reading", src_ids)
        log_probs = token_log_probs(self.engine, src_ids, tgt_ids, self.decode.max_tokens)
        return self.read_signals(src_ids, [ids[:-1] for ids in tgt_ids], log_probs)

    def confidences(self, sources: list[str], translations: list[str],
                    src_ids: list[list[int]] | None = None) -> list[Confidence]:
        """Each translation's confidence given its source (as `signals`): its estimator's score (untrained without
        one), and each word's probability."""
        return confidences_of(*self.signals(sources, translations, src_ids), self.estimator)

    def read_signals(self, src_ids: list[list[int]], tgt_ids: list[list[int]],
                     log_probs: list[list[float]]) -> tuple[Tensor, list[list[tuple[str, float]]]]:
        """Signals [N, F] and words of translations: sources' ids (EOS last), outputs' ids (no EOS), and the
        log-probability of each output token, then EOS's where the output ended."""
        src_pieces = [[self.tokenizer.src.id_to_piece(i) for i in ids[:-1]] for ids in src_ids]
        tgt_pieces = [[self.tokenizer.tgt.id_to_piece(i) for i in ids] for ids in tgt_ids]
        features = torch.tensor([signals(*read) for read in zip(src_pieces, tgt_pieces, log_probs)])
        return features.view(len(log_probs), len(SIGNALS)), [words_of(*read) for read in zip(tgt_pieces, log_probs)]

    def _pairs(self, src_lines: list[str], tgt_lines: list[str], first_line: int, doing: str,
               src_ids: list[list[int]] | None = None) -> tuple[list[list[int]], list[list[int]]]:
        """The ids of source lines (EOS last; or `src_ids`, encoded already) and of their target lines (pieces then
        EOS), cut to fit."""
        limit = self.config.model.max_positions
        src_ids = src_ids or cut_long(self.tokenizer.encode_src([line.strip() for line in src_lines]), limit,
                                      first_line, "source", doing)
        tgt_ids = [ids[1:] for ids in self.tokenizer.encode_tgt([line.strip() for line in tgt_lines])]  # BOS dropped
        return src_ids, cut_long(tgt_ids, limit - 1, first_line, "target", doing)

    def translate(self, lines: list[str], decode: DecodeConfig | None = None,
                  first_line: int = 1) -> list[list[Translation]]:
        """The decode.nbest best translations of each line, best first, in input order. An empty line gets one
        empty translation. `first_line` numbers the lines in warnings. (With a glossary: GlossaryUse.translate,
        mt/text/glossary_modes.py.)"""
        return self.translate_ids(self.encode(lines, first_line), decode)

    def find_terms(self, lines: list[str], glossary: TermFinder) -> tuple[list[list[Match]], list[Terms | None]]:
        """Each line's glossary terms, and what the search must hold for them (None for a line without)."""
        matches = [glossary.find(line) for line in lines]
        return matches, [Terms.of(glossary.forms(m), self.word_pieces) if m else None for m in matches]

    def translate_ids(self, src_ids: list[list[int]], decode: DecodeConfig | None = None,
                      terms: list[Terms | None] | None = None) -> list[list[Translation]]:
        """As `translate`, for sources already encoded (`encode`), with each source's terms (None for none): an
        empty source gets one empty translation. With decode.guard, a best translation that fails
        (mt/decode/guard.py) is searched again another way; one that still fails is as decode.on_failure says."""
        decode = decode or self.decode
        todo = to_search(src_ids)
        found = search_sources(self.engine, [src_ids[i] for i in todo], decode,
                               [terms[i] for i in todo] if terms else None)
        return self.translated(src_ids, todo, found, decode, terms)

    def translated(self, src_ids: list[list[int]], todo: list[int], found: list[list[Hypothesis]],
                   decode: DecodeConfig, terms: list[Terms | None] | None = None) -> list[list[Translation]]:
        """The translations of sources whose `todo` ones (to_search) were searched with decode's settings, `found`
        their hypotheses; the others empty (as translate_ids)."""
        outputs = [[Translation("", 0.0, confidence=Confidence(1.0, []))] for _ in src_ids]  # nothing to get wrong
        for i, translations in zip(todo, self._read([src_ids[i] for i in todo], found)):
            outputs[i] = translations
        if decode.guard and not decode.sample:
            self._guard(src_ids, todo, outputs, decode, terms)
        return outputs

    def _search(self, src_ids: list[list[int]], decode: DecodeConfig,
                terms: list[Terms | None] | None) -> list[list[Translation]]:
        """Each source's translations (none empty), as _read gives them."""
        return self._read(src_ids, search_sources(self.engine, src_ids, decode, terms))

    def _read(self, src_ids: list[list[int]], found: list[list[Hypothesis]]) -> list[list[Translation]]:
        """Each source's translations from its search's hypotheses, each with the tokens its search gave, and its
        confidence where the search gave its tokens' log-probabilities (mt's own searches but the constrained one):
        no pass more; the others get theirs where asked for (with_confidence)."""
        outputs = [[Translation(text, h.score, tokens=h.tokens) for text, h in
                    zip(self.tokenizer.decode_tgt([h.tokens for h in hyps]), hyps)] for hyps in found]
        read = [(k, n, h) for k, hyps in enumerate(found) for n, h in enumerate(hyps) if h.log_probs is not None]
        if read:
            signals_read = self.read_signals([src_ids[k] for k, _, _ in read], [h.tokens for _, _, h in read],
                                             [h.log_probs for _, _, h in read])
            for (k, n, _), confidence in zip(read, confidences_of(*signals_read, self.estimator)):
                outputs[k][n].confidence = confidence
        return outputs

    def _guard(self, src_ids: list[list[int]], todo: list[int], outputs: list[list[Translation]],
               decode: DecodeConfig, terms: list[Terms | None] | None) -> None:
        """Each of the `todo` sources whose best translation fails, searched again (guard.retried): its new
        translations take the place of the old where their best passes, or is more confident; a best translation
        that still fails says how (`failure`) and is kept, marked or emptied (decode.on_failure)."""
        failed = [i for i in todo if self.failure_of(src_ids[i], outputs[i][0], decode, terms[i] if terms else None)]
        if not failed:
            return
        again = retried(decode)
        found = self._search([src_ids[i] for i in failed], again, [terms[i] for i in failed] if terms else None)
        # the two to choose between, read alike by either engine: their search's tokens in one forced pass
        pairs = [(src_ids[i], t) for i, new in zip(failed, found) for t in (outputs[i][0], new[0])]
        log_probs = token_log_probs(self.engine, [ids for ids, _ in pairs], [t.tokens + [EOS] for _, t in pairs],
                                    self.decode.max_tokens)
        read = confidences_of(*self.read_signals([ids for ids, _ in pairs], [t.tokens for _, t in pairs], log_probs),
                              self.estimator)
        for (_, translation), confidence in zip(pairs, read):
            translation.confidence = translation.confidence or confidence  # where its search gave none
        for k, (i, translations) in enumerate(zip(failed, found)):
            best, new = outputs[i][0], translations[0]
            new.failure = self.failure_of(src_ids[i], new, again, terms[i] if terms else None)
            if new.failure is None or read[2 * k + 1].score > read[2 * k].score:
                outputs[i], best = translations, new
            if best.failure is not None:
                best.text = on_failure(best.text, decode.on_failure)

    def failure_of(self, src_ids: list[int], translation: Translation, decode: DecodeConfig,
                   terms: Terms | None) -> str | None:
        """How a translation of a source fails (guard.failure), kept in it; None when it passes."""
        limit = output_limit(decode, len(src_ids), self.engine.max_positions, longest_forms(terms))
        src_pieces = [self.tokenizer.src.id_to_piece(i) for i in src_ids[:-1]]
        tgt_pieces = [self.tokenizer.tgt.id_to_piece(i) for i in translation.tokens]
        translation.failure = failure(src_pieces, tgt_pieces, translation.text, len(translation.tokens) >= limit,
                                      self.normal)
        return translation.failure

    def attention(self, source: str, translation: str, src_ids: list[int] | None = None) -> Attention:
        """The cross-attention of `translation` (its pieces re-encoded from the text) given `source`, or given
        `src_ids` where the caller has cut the source into pieces its own way (EOS last): every layer's and head's
        with mt's own engine, the last layer's averaged over its heads with a CTranslate2 export."""
        src_ids = src_ids or self.tokenizer.encode_src([source.strip()])[0]        # pieces … EOS
        tgt_ids = self.tokenizer.encode_tgt([translation])[0][1:]                  # pieces … EOS (BOS dropped)
        weights = self.engine.cross_attention(src_ids, tgt_ids)
        last = self.config.model.num_decoder_layers  # an engine giving fewer layers gives the last ones
        return Attention([self.tokenizer.src.id_to_piece(i) for i in src_ids], src_ids,
                         [self.tokenizer.tgt.id_to_piece(i) for i in tgt_ids], tgt_ids, weights,
                         list(range(last - weights.size(0) + 1, last + 1)))

    def translate_lines(self, lines: list[str], decode: DecodeConfig | None = None) -> list[str]:
        """One output line per input line, in input order; an empty input line gives an empty output line."""
        return [best[0].text for best in self.translate(lines, decode)]


def to_search(src_ids: list[list[int]]) -> list[int]:
    """The sources a search translates: those with more than EOS alone (an empty one's translation is empty)."""
    return [i for i, ids in enumerate(src_ids) if len(ids) > 1]


def reported(glossary: TermFinder, matches: list[list[Match]],
             found: list[list[Translation]]) -> list[list[Translation]]:
    """Each line's translations, each with what became of the line's terms (`matches`)."""
    return [[dataclasses.replace(t, terms=glossary.report(m, t.text)) for t in hyps] for m, hyps in zip(matches, found)]


def with_confidence(translator: Translator, lines: list[str], found: list[list[Translation]],
                    src_ids: list[list[int]] | None = None) -> list[list[Translation]]:
    """Each line's translations, each with its confidence given the line (or its `src_ids`, encoded already): the
    search's, read in one forced pass where the search gave none."""
    flat = [(n, t) for n, hyps in enumerate(found) for t in hyps if t.confidence is None]
    confidences = iter(translator.confidences([lines[n] for n, _ in flat], [t.text for _, t in flat],
                                              [src_ids[n] for n, _ in flat] if src_ids else None))
    return [[t if t.confidence is not None else dataclasses.replace(t, confidence=next(confidences)) for t in hyps]
            for hyps in found]


def load_translator(checkpoint: Path | list[Path] | None, device: Device = "auto", engine: Engine = "mt",
                    weights: list[float] | None = None, compute_type: str = "auto") -> Translator:
    """A checkpoint (default: the latest run's best) with mt's own search, or a CTranslate2 export directory
    (default: the latest run's ctranslate2/) computing in `compute_type` (mt/decode/ctranslate2.py). Several
    checkpoints that share a vocabulary translate as an ensemble, each with its weight (default: equal)."""
    torch_device = resolve_device(device)
    paths = checkpoint if isinstance(checkpoint, list) else [checkpoint] if checkpoint else []
    dtype = products_dtype(compute_type, torch_device) if engine == "mt" else None  # refused before a model loads
    if engine == "ctranslate2":
        if len(paths) > 1:
            raise MtError("--engine ctranslate2 translates with one model (CTranslate2 has no ensembles); "
                          "ensembles use mt's own engine")
        from mt.decode.ctranslate2 import CTranslate2Engine  # the optional ctranslate2 package

        directory = paths[0] if paths else latest_run().ctranslate2
        ct2 = CTranslate2Engine(directory, torch_device, compute_type)
        return Translator(ct2, ct2.tokenizer, ct2.config, ct2.facts, *load_fitted(directory, ct2.facts, ct2.vocab_hash))
    paths = paths or [default_checkpoint()]
    if weights and len(paths) == 1:
        raise MtError("--weights weighs the models of an ensemble: give several --checkpoint")
    weights = ensemble_weights(weights, len(paths))  # checked before the models load
    loaded = [load_model(path, torch_device) for path in paths]  # (model, tokenizer, config, record) each
    model, tokenizer, config, record = loaded[0]  # the first one's config and decode settings lead
    for path, (_, other, _, _) in zip(paths[1:], loaded[1:]):
        if (other.vocab_hash, other.scripts) != (tokenizer.vocab_hash, tokenizer.scripts):
            raise MtError(f"{path}: its vocabulary (hash {other.vocab_hash}) or script conversion differs from "
                          f"{paths[0]}'s ({tokenizer.vocab_hash}); an ensemble's models share one tokenizer")
    facts = training_facts(record)
    if len(paths) > 1:  # an ensemble's confidence is untrained: each estimator reads its own model's signals
        facts["ensemble"] = [str(path) for path in paths]
        model = Ensemble([member for member, *_ in loaded], weights)
    fitted = load_fitted(paths[0], facts, tokenizer.vocab_hash) if len(paths) == 1 else (None, Normal())
    return Translator(Searcher(model, torch_device, tokenizer.vocab_hash, dtype), tokenizer, config, facts, *fitted)


def load_fitted(model: Path, facts: dict, vocab_hash: str) -> tuple[Estimator | None, Normal]:
    """The confidence estimator beside a checkpoint or in an export (estimator_path), and what the model's
    translations look like, if `mt confidence` fitted them for this model: ones fitted for another step or
    vocabulary are left aside, with a warning (None, and the failure guard's defaults)."""
    path = estimator_path(model)
    if not path.is_file():
        return None, Normal()
    estimator, file = Estimator.load(path)
    if file.model != estimator_facts(facts, vocab_hash):
        log.warning(f"{path}: fitted for another model (step {file.model.get('step')}, vocabulary "
                    f"{file.model.get('vocab_hash')}; this one's: step {facts.get('step')}, vocabulary {vocab_hash}); "
                    "confidence is untrained until `mt confidence` fits it again")
        return None, Normal()
    return estimator, Normal(file.normal.length_ratio, tuple(file.normal.scripts))


def estimator_facts(facts: dict, vocab_hash: str) -> dict:
    """What an estimator's file names of the model it was fitted for."""
    return {"step": facts.get("step"), "vocab_hash": vocab_hash}


def products_dtype(compute_type: str, device: torch.device) -> torch.dtype:
    """mt's engine's --compute-type → the dtype of its products by weights: float32 (also auto and default: the
    checkpoint's own), or bfloat16 where the device multiplies bf16 in hardware (mt/decode/packing.py); elsewhere
    bf16 would be emulated, slower than float32."""
    if compute_type in ("auto", "default", "float32"):
        return torch.float32
    if compute_type != "bfloat16":
        raise MtError(f"--compute-type {compute_type}: mt's engine computes in float32 or bfloat16; the other "
                      "compute types are CTranslate2's (--engine ctranslate2)")
    if not has_native_bf16(device) or (device.type == "cpu" and not torch.backends.mkldnn.is_available()):
        raise MtError(f"--compute-type bfloat16: this {device.type.upper()} has no bf16 products in hardware "
                      "(a CPU needs AVX512-BF16 or AMX), where they would be slower than float32")
    return torch.bfloat16


def ensemble_weights(weights: list[float] | None, models: int) -> list[float]:
    """--weights, one per model (default: equal), as fractions of their sum."""
    weights = weights or [1.0] * models
    if len(weights) != models:
        raise MtError(f"--weights: {len(weights)} given for {models} checkpoints")
    if any(w <= 0 for w in weights):
        raise MtError(f"--weights {' '.join(map(str, weights))}: each must be positive")
    return [w / sum(weights) for w in weights]


ChunkTranslator = Callable[[list[str], int], list[list[Translation]]]  # (lines, number of the first) → n-best


def translate_stream(translate_chunk: ChunkTranslator, lines: Iterable[str], chunk_size: int
                     ) -> Iterator[list[Translation]]:
    """Translate `chunk_size` lines at a time and yield each line's translations as soon as its chunk is
    done, holding one chunk at a time. Lines are sorted by length within a chunk only."""
    lines = iter(lines)
    first_line = 1
    while chunk := list(itertools.islice(lines, chunk_size)):
        yield from translate_chunk(chunk, first_line)
        first_line += len(chunk)


def encode_sources(tokenizer: Tokenizer, lines: list[str], limit: int, first_line: int) -> list[list[int]]:
    """Source ids per line; a line longer than the position table is cut there, with a warning."""
    return cut_long(tokenizer.encode_src([line.strip() for line in lines]), limit, first_line, "input", "translating")


def cut_long(lines_ids: list[list[int]], limit: int, first_line: int, side: str, doing: str) -> list[list[int]]:
    """Each line's ids (EOS last) cut to at most `limit` tokens, EOS kept, with a warning for each line cut:
    "{side} line N has … tokens; {doing} its first {limit}"."""
    for i, ids in enumerate(lines_ids):
        if len(ids) > limit:
            log.warning(f"{side} line {first_line + i} has {len(ids)} tokens; {doing} its first {limit}")
            lines_ids[i] = ids[:limit - 1] + ids[-1:]
    return lines_ids
