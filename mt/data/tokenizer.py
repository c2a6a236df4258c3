"""SentencePiece BPE: training on a corpus, and a small wrapper that turns text into ids and back.

Ids are fixed for every model: PAD 0, UNK 1, BOS 2, EOS 3. A source sentence is `pieces + EOS`; a target
sentence is `BOS + pieces + EOS`, so that training can feed `tgt[:, :-1]` and predict `tgt[:, 1:]`.
Chinese text is first converted to one script with OpenCC (data.chinese_script), so that Traditional and
Simplified input meet the same pieces, in training and in translation alike; an exported model file converts by
itself (mt/data/script_conversion.py), and then mt leaves the conversion to it.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import opencc
import sentencepiece as spm

from mt.core.atomic import atomic_write_bytes
from mt.data.config import TokenizerConfig
from mt.core.errors import MtError
from mt.core.run_dir import RunDir
from mt.data.script_conversion import OPENCC, converts, with_conversion

PAD, UNK, BOS, EOS = 0, 1, 2, 3


# SentencePiece's call for a list starts its threads anew each time: for fewer texts than this, one call per text
# costs less (a request's few sentences in `mt serve`, most of all)
BATCH_CALL_MIN = 128
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]+")  # control characters, line and paragraph separators


@dataclass(frozen=True)
class Sampling:
    """A sampled segmentation (BPE-dropout): each merge is skipped with probability `alpha`; the same `seed`
    gives the same pieces."""

    alpha: float
    seed: int


def _each(call: Callable, items: list) -> list:
    """call(items) for SentencePiece's list call, or one call per item where that costs less (BATCH_CALL_MIN)."""
    return call(items) if len(items) >= BATCH_CALL_MIN else [call(item) for item in items]


def _encode(processor: spm.SentencePieceProcessor, texts: list[str], sampling: Sampling | None) -> list[list[int]]:
    if sampling is None:
        return _each(processor.encode, texts)
    # SentencePiece draws from a generator it seeds per encoding thread; one thread, seeded first, repeats
    spm.set_random_generator_seed(sampling.seed)
    return processor.encode(texts, enable_sampling=True, alpha=sampling.alpha, nbest_size=-1, num_threads=1)


class Tokenizer:
    """One SentencePiece model for both sides (joint) or one per side; `scripts` says what each side's text
    is converted to first ("keep": nothing)."""

    def __init__(self, src_proto: bytes, tgt_proto: bytes | None = None, scripts: tuple[str, str] = ("keep", "keep")):
        self.src_proto = src_proto
        self.tgt_proto = tgt_proto  # None: joint vocabulary
        self.scripts = tuple(scripts)
        self.src = _processor(src_proto)
        self.tgt = self.src if tgt_proto is None else _processor(tgt_proto)
        self.normalize_src, self.normalize_tgt = (script_converter("keep" if converts(proto, script) else script)
                                                  for proto, script in zip(self._protos(), self.scripts))

    def __reduce__(self):  # datasets.map sends the tokenizer to its processes; OpenCC's converters don't pickle
        return Tokenizer, (self.src_proto, self.tgt_proto, self.scripts)

    def _protos(self) -> tuple[bytes, bytes]:
        """Each side's SentencePiece model."""
        return self.src_proto, self.tgt_proto or self.src_proto

    def self_converting(self) -> Tokenizer:
        """This tokenizer with each side's script conversion compiled into its SentencePiece model, as the exports
        write it: the same pieces and ids, for any program that reads the model file."""
        if self.joint:  # one model for both sides: the script of the side that converts (a Chinese one)
            script = next((s for s in self.scripts if s != "keep"), "keep")
            return Tokenizer(with_conversion(self.src_proto, script), None, self.scripts)
        return Tokenizer(*(with_conversion(p, s) for p, s in zip(self._protos(), self.scripts)), self.scripts)

    @property
    def joint(self) -> bool:
        return self.tgt_proto is None

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size()

    @property
    def vocab_hash(self) -> str:
        """Identifies the vocabulary: a checkpoint only works with the tokenizer it was trained with."""
        digest = hashlib.sha256(self.src_proto)
        if self.tgt_proto is not None:
            digest.update(self.tgt_proto)
        return digest.hexdigest()[:16]

    def encode_src(self, texts: list[str], sampling: Sampling | None = None) -> list[list[int]]:
        return [ids + [EOS] for ids in _encode(self.src, self.normalize_src(texts), sampling)]

    def encode_tgt(self, texts: list[str], sampling: Sampling | None = None) -> list[list[int]]:
        return [[BOS] + ids + [EOS] for ids in _encode(self.tgt, self.normalize_tgt(texts), sampling)]

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        """Output ids → texts of one line each: a byte piece drawn by sampling (or an untrained model) can decode
        to a line break or another control character, which would split an output line in two."""
        texts = _each(self.tgt.decode, [[i for i in seq if i not in (PAD, BOS, EOS)] for seq in ids])  # UNK: ⁇
        return [CONTROL.sub(" ", text) for text in texts]

    def save(self, run_dir: Path) -> None:
        run = RunDir(run_dir)
        if self.joint:
            atomic_write_bytes(run.joint_tokenizer, self.src_proto)
        else:
            for path, proto in zip(run.side_tokenizers, (self.src_proto, self.tgt_proto)):
                atomic_write_bytes(path, proto)

    @classmethod
    def load(cls, run_dir: Path, scripts: tuple[str, str] = ("keep", "keep")) -> Tokenizer | None:
        """The tokenizer saved in a run directory, or None when there is none yet."""
        run = RunDir(run_dir)
        if run.joint_tokenizer.exists():
            return cls(_read_model(run.joint_tokenizer), None, scripts)
        if all(path.exists() for path in run.side_tokenizers):
            return cls(*map(_read_model, run.side_tokenizers), scripts)
        return None


def tokenizer_files(run_dir: Path) -> list[Path]:
    """The tokenizer files present in a run directory."""
    run = RunDir(run_dir)
    return [path for path in (run.joint_tokenizer, *run.side_tokenizers) if path.exists()]


def script_converter(script: str) -> Callable[[list[str]], list[str]]:
    """Texts → the same texts in `script` (OpenCC), or unchanged for "keep"."""
    if script == "keep":
        return lambda texts: texts
    converter = opencc.OpenCC(OPENCC[script])
    return lambda texts: [converter.convert(text) for text in texts]


def train_tokenizer(src_texts: list[str], tgt_texts: list[str], config: TokenizerConfig,
                    scripts: tuple[str, str] = ("keep", "keep"), tags: list[str] | None = None) -> Tokenizer:
    """Train SentencePiece BPE on (a sample of) the training corpus: one joint model, or one per language. `tags`
    (source tags such as <BT>) become pieces of their own in the source side's model."""
    src_texts, tgt_texts = (script_converter(s)(texts) for s, texts in zip(scripts, (src_texts, tgt_texts)))
    if config.joint:
        return Tokenizer(_train_bpe(itertools.chain(src_texts, tgt_texts), config, tags), None, scripts)
    return Tokenizer(_train_bpe(src_texts, config, tags), _train_bpe(tgt_texts, config), scripts)


def _train_bpe(texts: Iterable[str], config: TokenizerConfig, symbols: list[str] | None = None) -> bytes:
    model = io.BytesIO()
    seen = 0

    def sentences():
        nonlocal seen
        for text in texts:
            if text.strip():
                seen += 1
                yield text

    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences(),
            model_writer=model,
            model_type="bpe",
            vocab_size=config.vocab_size,
            character_coverage=config.character_coverage,
            byte_fallback=config.byte_fallback,
            pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
            user_defined_symbols=symbols or [],
            minloglevel=2,
        )
    except RuntimeError as e:  # e.g. a vocabulary too large for a small corpus
        if seen == 0:
            raise MtError("the training corpus has no non-empty lines to train the tokenizer on")
        reason = str(e).split("]", 1)[-1].strip() or str(e).strip()
        raise MtError(f"config key tokenizer.vocab_size: SentencePiece cannot train it: {reason}")
    return model.getvalue()


def _processor(proto: bytes, name: str = "a SentencePiece model") -> spm.SentencePieceProcessor:
    try:
        processor = spm.SentencePieceProcessor(model_proto=proto)
    except RuntimeError:
        processor = None
    if processor is None or processor.get_piece_size() == 0:  # an empty proto loads, as a model of no pieces
        raise MtError(f"{name}: not a SentencePiece model (damaged?)")
    return processor


def _read_model(path: Path) -> bytes:
    proto = path.read_bytes()
    _processor(proto, str(path))
    return proto
