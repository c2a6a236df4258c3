"""Typed configuration: every key is declared once here, with its default and its help; YAML files and `--set`
only override them, and the command line's options, the server's request fields and docs/config.md are made
from these declarations.

A config file is a YAML mapping with the sections `model`, `tokenizer`, `data`, `train` and `decode`.
pydantic checks every key and type against the dataclasses; unknown keys, wrong types and out-of-range values are
errors that name the key.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union

import yaml
from pydantic import BeforeValidator, ConfigDict, Field, Strict, TypeAdapter, ValidationError

from mt.core.atomic import atomic_write_bytes
from mt.core.errors import MtError, first_line

log = logging.getLogger(__name__)

# The allowed values of the keys and options that take one of a few words. The validator and the command line
# both read them from here (Typer shows them in --help and refuses others).
Norm = Literal["post", "pre"]  # post: Add&Norm as in the paper; pre: LayerNorm before each sub-layer
Positions = Literal["sinusoidal", "learned"]  # learned: a trained vector per position (the paper's Table 3, row E)
Activation = Literal["relu", "swish"]  # the feed-forward network's: the paper's max(0, x), or Marian's x·sigmoid(x)
Script = Literal["simplified", "traditional", "keep"]
Device = Literal["auto", "cpu", "cuda"]  # auto: cuda when there is a GPU, else cpu
Engine = Literal["mt", "ctranslate2"]  # what translates: mt's own search, or a CTranslate2 export of the model
Precision = Literal["auto", "fp32", "bf16", "fp16"]  # auto: bf16 where the GPU or CPU has it natively, else fp32
Decay = Literal["inverse_sqrt", "linear"]  # after warm-up: the paper's step^-0.5, or a straight line to 0 at max_steps
Keep = Literal["optimizer", "schedule", "position"]  # what a run started from another's weights also takes over
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]  # torch.compile's
Contamination = Literal["remove", "keep"]  # training pairs that hold a dev or test sentence
WritingSystem = Literal["", "Latin", "Han", "Cyrillic", "Greek", "Arabic", "Hebrew", "Hangul", "Japanese",
                        "Devanagari", "Thai"]  # the script filter's; "": the one of the side's language


def _number_text(value: Any) -> Any:
    """A text that is a number, as the number: YAML 1.1 reads 1e-9 (no dot) as a text."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    return value


# YAML gives every value its type, so a key takes only values of its own type: `true` is not a number, "5" not an
# int (pydantic's lax mode would convert both). An int is a float too, a text that is a number is one where a float
# is expected (_number_text), and a number is a text where a key is one.
Int = Annotated[int, Strict()]
Float = Annotated[float, Strict(), BeforeValidator(_number_text)]
Bool = Annotated[bool, Strict()]
T = TypeVar("T")
Section = Annotated[T, BeforeValidator(lambda value: {} if value is None else value)]  # `train:` alone: defaults

SECTION = ConfigDict(extra="forbid", coerce_numbers_to_str=True)


def key(default: Any, help: str, *, flag: str = "", least: float | None = None, per_request: bool = True):
    """A config key: its default and its help, which --help and docs/config.md show.

    flag: its command-line option's name when not the key's own (beam_size → "beam"); least: the smallest value
    allowed (for the options that have no section of a config file); per_request: whether a request to
    `mt serve` may set it.
    """
    metadata = {"help": help, "flag": flag, "least": least, "per_request": per_request}
    if isinstance(default, list) or dataclasses.is_dataclass(default):  # each config gets a copy of its own
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def help_of(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")


def flag_of(f: dataclasses.Field) -> str:
    """The command-line option of a key: --beam for decode.beam_size, --max-len-a for decode.max_len_a."""
    return "--" + (f.metadata.get("flag") or f.name).replace("_", "-")


@dataclass
class ModelConfig:
    """The Transformer's shape. Defaults are the paper's base model."""

    __pydantic_config__ = SECTION

    d_model: Int = key(512, "Width of every layer's input and output (the residual stream).")
    num_heads: Int = key(8, "Attention heads per attention layer; must divide d_model.")
    d_ff: Int = key(2048, "Inner width of the position-wise feed-forward network.")
    num_encoder_layers: Int = key(6, "Encoder layers (N in the paper).")
    num_decoder_layers: Int = key(6, "Decoder layers.")
    dropout: Float = key(0.1, "Dropout on sub-layer outputs and on embeddings + positions (the paper's P_drop).")
    norm: Norm = key("post", "post: Add&Norm after each sub-layer, as in the paper; pre: LayerNorm before it.")
    positions: Positions = key("sinusoidal", "sinusoidal, as in the paper; or learned: a trained vector per "
                               "position (the paper's Table 3, row E).")
    tie_embeddings: Bool = key(True, "Share the source and target embeddings and the generator (joint vocabulary "
                               "only).")
    init_std: Float = key(0.0, "0: Glorot-uniform projections (tensor2tensor); > 0: every weight drawn from "
                          "N(0, init_std²), as BERT and Marian do.")
    max_positions: Int = key(1024, "Rows of the position table: the longest sentence, in tokens, the model reads.")
    activation: Activation = key("relu", "The feed-forward network's activation: relu, as in the paper; or swish "
                                 "(x·sigmoid(x)), as Marian's models (OPUS-MT) have.")
    output_bias: Bool = key(False, "A bias on the generator's logits, as Marian's models have (final_logits_bias); "
                            "the paper's has none.")


@dataclass
class TokenizerConfig:
    """SentencePiece BPE. Ids are fixed: pad 0, unk 1, bos 2, eos 3."""

    __pydantic_config__ = SECTION

    vocab_size: Int = key(8000, "Pieces in the vocabulary (of each language, when not joint).")
    joint: Bool = key(True, "One vocabulary for both languages; false trains one model per language.")
    character_coverage: Float = key(0.9995, "Share of the training characters that get pieces of their own; the "
                                    "rarest others become byte pieces or `<unk>`.")
    byte_fallback: Bool = key(True, "Unknown characters become UTF-8 byte pieces instead of `<unk>`.")
    sample_size: Int = key(300_000, "Pairs drawn at random from the training corpora to learn the pieces from.")
    sampling_alpha: Float = key(0.0, "Subword regularisation (BPE-dropout, Provilkov et al. 2020): each epoch, "
                                "training pairs are segmented anew, each merge skipped with this probability (0: "
                                "off). Validation and translation always use the best segmentation.")


# ---------------------------------------------------------------- corpus filters (data.filters)
# Each filter is a section of its own, named by its `filter` key; mt/clean/filters.py holds the function of each.

class Filter:
    """What every filter section has: pydantic's checks of a section, and its range checks, (ok, key, why) each;
    none unless it says."""

    __pydantic_config__ = SECTION

    def checks(self) -> list[tuple[bool, str, str]]:
        return []


@dataclass
class LengthFilter(Filter):
    """length: a pair with a side of fewer or more characters than these. (Length in pieces is bounded by
    data.max_len, after tokenising.)"""

    filter: Literal["length"] = key("length", "The filter.")
    min_chars: Int = key(1, "Fewest characters on a side (spaces at its ends not counted).")
    max_chars: Int = key(1000, "Most characters on a side.")

    def checks(self) -> list[tuple[bool, str, str]]:
        return [(0 <= self.min_chars <= self.max_chars, "max_chars", "must be at least min_chars (0 or more)")]


@dataclass
class RatioFilter(Filter):
    """ratio: a pair whose length ratio (target characters / source characters) is more than max_factor times the
    corpus's median ratio, or less than its 1/max_factor. The median makes one bound fit every language pair
    (zh→en: about 3 English characters per Chinese one)."""

    filter: Literal["ratio"] = key("ratio", "The filter.")
    max_factor: Float = key(3.0, "How far a pair's ratio may be from the median, as a factor either way.")
    min_chars: Int = key(12, "Pairs whose longer side has fewer characters are kept: short pairs vary most.")

    def checks(self) -> list[tuple[bool, str, str]]:
        return [(self.max_factor > 1, "max_factor", "must be more than 1"),
                (self.min_chars >= 0, "min_chars", "must be 0 or more")]


@dataclass
class CopyFilter(Filter):
    """copy: a target that is its source copied, or nearly (a normalised similarity of max_similarity or more:
    case, width, punctuation and spaces ignored)."""

    filter: Literal["copy"] = key("copy", "The filter.")
    max_similarity: Float = key(0.8, "difflib's similarity ratio of the two normalised sides, from 0 to 1.")

    def checks(self) -> list[tuple[bool, str, str]]:
        return [(0 < self.max_similarity <= 1, "max_similarity", "must be in (0, 1]")]


@dataclass
class ScriptFilter(Filter):
    """script: a side with less than min_share of its letters in its language's writing system (Han for Chinese,
    Latin for English): the wrong language, swapped sides, or markup."""

    filter: Literal["script"] = key("script", "The filter.")
    min_share: Float = key(0.5, "The smallest share of a side's letters in its writing system.")
    src_script: WritingSystem = key("", "The source's writing system (empty: data.src_lang's).")
    tgt_script: WritingSystem = key("", "The target's writing system (empty: data.tgt_lang's).")

    def checks(self) -> list[tuple[bool, str, str]]:
        return [(0 < self.min_share <= 1, "min_share", "must be in (0, 1]")]


@dataclass
class NumbersFilter(Filter):
    """numbers: a number of min_digits or more digits on one side only (smaller ones are often spelt out)."""

    filter: Literal["numbers"] = key("numbers", "The filter.")
    min_digits: Int = key(2, "The fewest digits of a number that must appear on both sides.")

    def checks(self) -> list[tuple[bool, str, str]]:
        return [(self.min_digits >= 1, "min_digits", "must be at least 1")]


@dataclass
class UrlsFilter(Filter):
    """urls: a URL or e-mail address on one side only, or different ones on the two sides."""

    filter: Literal["urls"] = key("urls", "The filter.")


@dataclass
class QuestionsFilter(Filter):
    """questions: a question mark on one side only: a question paired with a statement, most often another
    sentence's translation. A corpus whose two sides do not mark questions alike is left alone: where the side with
    fewer marked lines has less than min_agreement times the other's (TVsub's Chinese side, nearly without
    punctuation, marks 1.7% of its lines against its English side's 18.6%)."""

    filter: Literal["questions"] = key("questions", "The filter.")
    min_agreement: Float = key(0.5, "The smallest ratio of the two sides' shares of lines with a question mark "
                               "for the filter to act on a corpus.")

    def checks(self) -> list[tuple[bool, str, str]]:
        return [(0 <= self.min_agreement <= 1, "min_agreement", "must be in [0, 1]")]


@dataclass
class DuplicatesFilter(Filter):
    """duplicates: a pair seen before in the corpus (spaces at the ends and doubled inside ignored)."""

    filter: Literal["duplicates"] = key("duplicates", "The filter.")


@dataclass
class DuplicateSourcesFilter(Filter):
    """duplicate_sources: a source seen `keep` times before with other targets. Not among the defaults: a
    hand-made corpus such as Tatoeba gives a fifth of its sentences several translations, all good."""

    filter: Literal["duplicate_sources"] = key("duplicate_sources", "The filter.")
    keep: Int = key(1, "Pairs kept per source, the first ones in the corpus.")

    def checks(self) -> list[tuple[bool, str, str]]:
        return [(self.keep >= 1, "keep", "must be at least 1")]


@dataclass
class LangidFilter(Filter):
    """langid: a side that py3langid (its model ships inside the package: `pip install 'mt[langid]'`) identifies as
    another language than the side's. Not among the defaults: it removes good short sentences."""

    filter: Literal["langid"] = key("langid", "The filter.")


@dataclass
class CrossEntropyFilter(Filter):
    """cross_entropy: dual conditional cross-entropy (Junczys-Dowmunt, 2018): with H(y|x) the forward model's and
    H(x|y) the reverse model's cross-entropy per token, a pair scores |H(y|x) − H(x|y)| + (H(y|x) + H(x|y)) / 2
    (H(y|x) alone without a reverse model); the pairs scoring lowest are kept."""

    filter: Literal["cross_entropy"] = key("cross_entropy", "The filter.")
    forward: str = key("", "A checkpoint translating source → target.")
    reverse: str = key("", "A checkpoint translating target → source (optional).")
    threshold: Float = key(0.0, "Keep pairs scoring at most this (nats per token); 0: use keep_fraction.")
    keep_fraction: Float = key(0.0, "Keep this share of the pairs, the best scoring (with threshold 0).")

    def checks(self) -> list[tuple[bool, str, str]]:
        return [(bool(self.forward), "forward", "a checkpoint is needed"),
                ((self.threshold > 0) != (0 < self.keep_fraction <= 1), "threshold",
                 "give either a positive threshold or a keep_fraction in (0, 1]")]


@dataclass
class LexicalFilter(Filter):
    """lexical: a pair whose words translate each other no better than those of random pairings of the corpus's
    sentences do (a misaligned pair, most often), by word-translation tables learned from the corpus itself (IBM
    Model 1, both ways; mt/clean/lexical.py), each pair scored by tables learned from the other half of the corpus.
    A corpus of which fewer than 10,000 pairs reach it is left alone: half of them teach too few words."""

    filter: Literal["lexical"] = key("lexical", "The filter.")
    quantile: Float = key(0.9, "A pair stays when it scores above this share of random pairings: about the share "
                          "of misaligned pairs it removes.")
    max_pairs: Int = key(100_000, "The most pairs each half's tables learn from (and at most 20 million word links), "
                         "and random pairings scored; drawn at random.")

    def checks(self) -> list[tuple[bool, str, str]]:
        return [(0 < self.quantile < 1, "quantile", "must be in (0, 1)"),
                (self.max_pairs >= 1000, "max_pairs", "must be at least 1000")]


CorpusFilter = Annotated[Union[LengthFilter, RatioFilter, CopyFilter, ScriptFilter, NumbersFilter, UrlsFilter,
                               QuestionsFilter, DuplicatesFilter, DuplicateSourcesFilter, LangidFilter,
                               CrossEntropyFilter, LexicalFilter],
                         Field(discriminator="filter")]
FILTER_UNION = typing.get_args(CorpusFilter)[0]
FILTERS = typing.get_args(FILTER_UNION)  # the filter sections, in the order above
DEFAULT_FILTERS = [LengthFilter(), CopyFilter(), ScriptFilter(), NumbersFilter(), UrlsFilter(), QuestionsFilter(),
                   RatioFilter(), DuplicatesFilter(), LexicalFilter()]


@dataclass
class CorpusConfig:
    """Where one split's sentence pairs come from: local files, or a Hugging Face hub dataset."""

    __pydantic_config__ = SECTION

    path: str = key("", "A prefix of aligned text files (PATH.zh and PATH.en, or .gz), a .tsv file "
                    "(source<TAB>target), or a .jsonl file (one object per line). Relative to where mt runs.")
    hub: str = key("", "A Hugging Face hub dataset name, instead of path.")
    hub_config: str = key("", "The hub dataset's configuration (e.g. en-zh).")
    split: str = key("train", "The hub dataset's split; slices work, e.g. train[:1000000].")
    src_field: str = key("", "The source field of JSONL and hub rows; a dot reaches into a nested field "
                         "(translation.zh). Empty: the source language's code.")
    tgt_field: str = key("", "The target field, as src_field.")
    max_pairs: Int = key(0, "Training corpora only: a random sample of this many pairs, the same on every run with "
                         "the same seed (0: all).")
    repeat: Int = key(1, "Training corpora only: each pair this many times per epoch, to weigh a small corpus up.")
    filters: list[CorpusFilter] | None = key(None, "Training corpora only: this corpus's filters instead of "
                                             "data.filters (null: data.filters; []: none).")
    tag: str = key("", "Training corpora only: a token put before each source sentence, e.g. <BT> on back-translated "
                   "pairs (tagged back-translation, Caswell et al., 2019); the tokenizer keeps it one piece. Never "
                   "given in translation.")
    synthetic: Bool = key(False, "Training corpora only: machine-made pairs (back-translated or distilled), marked "
                          "as such in the Hugging Face export's model card.")

    @property
    def is_set(self) -> bool:
        return bool(self.path or self.hub)


@dataclass
class DataConfig:
    """The language pair and its corpora."""

    __pydantic_config__ = SECTION

    src_lang: str = key("zh", "Source language code.")
    tgt_lang: str = key("en", "Target language code; BLEU picks sacreBLEU's tokenizer for it.")
    train: Section[CorpusConfig] = key(CorpusConfig(), "The training corpus.")
    extra_train: list[Section[CorpusConfig]] = key([], "More training corpora, mixed with train.")
    dev: Section[CorpusConfig] = key(CorpusConfig(split="validation"), "The dev corpus: validation's loss and scores.")
    test: Section[CorpusConfig] = key(CorpusConfig(split="test"), "The test corpus of `mt evaluate`.")
    max_len: Int = key(128, "Training pairs with more tokens on either side are dropped (and counted).")
    filters: list[CorpusFilter] = key(DEFAULT_FILTERS, "The filters every training corpus goes through, in order, "
                                      "before its tokenizer is trained (see \"Corpus filters\" below; []: none).")
    contamination: Contamination = key("remove", "Training pairs whose source or target is a dev or test "
                                       "sentence (case, width, punctuation, spaces and Chinese script ignored): "
                                       "remove them, or keep them (with a warning: test scores then overstate).")
    chinese_script: Script = key("simplified", "A Chinese side is converted to this script (OpenCC) before "
                                 "tokenising, in training and translation alike; keep: as it is.")
    dev_max_sentences: Int = key(0, "Validate on the first N dev pairs (0: all).")

    def training_corpora(self) -> dict[str, CorpusConfig]:
        """data.train and data.extra_train, by the names that errors and reports give them."""
        return {"train": self.train} | {f"extra_train[{i}]": c for i, c in enumerate(self.extra_train)}

    def tags(self) -> list[str]:
        """The training corpora's source tags, each once: pieces of their own in the tokenizer."""
        return list(dict.fromkeys(c.tag for c in self.training_corpora().values() if c.tag))

    def scripts(self) -> tuple[Script, Script]:
        """The script that each side's text is converted to before tokenising; "keep" unless it is Chinese."""
        return tuple(self.chinese_script if lang.split("-")[0] == "zh" else "keep"
                     for lang in (self.src_lang, self.tgt_lang))


@dataclass
class TrainConfig:
    """The training loop. Defaults are the paper's optimiser and schedule."""

    __pydantic_config__ = SECTION

    run_dir: str = key("", "Where the run's files go (empty: runs/<first config file's name>).")
    seed: Int = key(1, "Seeds the initial weights, the data order, the samples and dropout.")
    device: Device = key("auto", "auto: cuda when there is a GPU, else cpu.")
    max_steps: Int = key(100_000, "Updates to train for.")
    max_minutes: Float = key(0.0, "Also stop after this many minutes of training, validations included; it "
                             "validates and saves first (0: no limit).")
    max_tokens: Int = key(25_000, "Tokens per batch and side, padding included.")
    warmup_steps: Int = key(4000, "Updates of linear learning-rate warm-up before the decay.")
    lr_scale: Float = key(1.0, "Multiplies the paper's rate d_model^-0.5 · min(step^-0.5, step · warmup^-1.5).")
    decay: Decay = key("inverse_sqrt", "After warm-up: the paper's inverse square root, or linear: from the same "
                       "peak down to 0 at max_steps, which a run of few updates learns more from.")
    adam_beta1: Float = key(0.9, "Adam's β1.")
    adam_beta2: Float = key(0.98, "Adam's β2.")
    adam_eps: Float = key(1e-9, "Adam's ε.")
    label_smoothing: Float = key(0.1, "Label smoothing ε_ls of the cross entropy.")
    clip_grad_norm: Float = key(0.0, "Clip the gradient's norm to this (0: no clipping; the paper does not clip).")
    accum_steps: Int = key(1, "Batches whose gradients are summed into one update (per process).")
    precision: Precision = key("auto", "auto: bf16 autocast on a GPU or CPU that has bf16 in hardware, else fp32; "
                               "fp16 adds a dynamic loss scaler.")
    compile: Bool = key(False, "torch.compile the model: one graph per length bucket, or one with dynamic shapes.")
    compile_mode: CompileMode = key("default", "torch.compile's mode; reduce-overhead replays CUDA graphs (a GPU, "
                                    "with length_buckets).")
    length_buckets: list[Int] = key([], "E.g. [16, 32, 64, 128]: every batch padded to one of these lengths, so "
                                    "that a compiled model meets a few fixed shapes (empty: none).")
    num_workers: Int = key(0, "Processes that build batches ahead of the model (0: the training process itself).")
    patience: Int = key(0, "Stop after this many validations without a better dev BLEU (0: never stop early).")
    tensorboard: Bool = key(True, "Also write TensorBoard event files to RUN/tensorboard.")
    log_every: Int = key(100, "Updates between lines of the training log.")
    eval_every: Int = key(1000, "Updates between validations, each followed by a checkpoint.")
    keep_last: Int = key(5, "Step checkpoints kept besides last.pt and best.pt.")


@dataclass
class DecodeConfig:
    """Translation: the checkpoint's defaults for `mt translate`, `mt evaluate` and `mt serve`, which the command
    line changes (and a request to the server, but for max_tokens). Defaults are the paper's beam search (section
    6.1)."""

    __pydantic_config__ = SECTION

    beam_size: Int = key(4, "Beam size; 1 is greedy search.", flag="beam")
    alpha: Float = key(0.6, "GNMT length penalty: score = log p / ((5 + length) / 6) ** alpha.")
    nbest: Int = key(1, "Translations given per sentence, best first, with their scores (at most the beam size; "
                     "a smaller beam given alone lowers it).")
    max_len_a: Float = key(2.0, "Outputs may have up to a · source length + b tokens.")
    max_len_b: Int = key(10, "The b of an output's limit, a · source length + b tokens.")
    min_len: Int = key(0, "No end of sentence before this many output tokens.")
    no_repeat_ngram_size: Int = key(0, "No n-gram of this many tokens twice in an output (0: off).",
                                    flag="no_repeat_ngram")
    max_tokens: Int = key(4000, "Source tokens per decoding batch (sentences sorted by length, then grouped).",
                          per_request=False)
    parallel_batches: Int = key(0, "Batches that mt's engine decodes at once on the CPU, each on its share of "
                                "torch's threads: a batch alone leaves cores idle between its small products. The "
                                "sentences are then cut into batches of about equal work (of 64 sentences at the "
                                "least). 0: one per thread, at most 4; 1: one at a time.",
                                per_request=False)
    shortlist: str = key("", "A file made by `mt shortlist`: each step scores only the target pieces that the "
                         "batch's sources may turn into, not the whole vocabulary (faster, most for small models; "
                         "CTranslate2's engine reads it as its vocabulary map). Empty: the whole vocabulary.",
                         per_request=False)
    sample: Bool = key(False, "Draw each next token at random from the model's distribution (narrowed by top_k, "
                       "top_p and temperature) instead of searching for the likeliest output: varied outputs, as "
                       "back-translation wants (Edunov et al., 2018). One output per sentence; seeded by seed.",
                       per_request=False)
    top_k: Int = key(0, "Sampling: draw from the k likeliest tokens only (0: from all).", per_request=False)
    top_p: Float = key(1.0, "Sampling: draw from the fewest likeliest tokens whose probabilities reach p (nucleus "
                       "sampling; 1: from all).", per_request=False)
    temperature: Float = key(1.0, "Sampling: divides the log-probabilities before the draw (below 1: closer to "
                             "greedy; above: more varied).", per_request=False)
    seed: Int = key(0, "Sampling: the same seed, input and settings give the same outputs (mt's engine; "
                    "CTranslate2's draws do not repeat).", per_request=False)
    split_sentences: Bool = key(True, "Split each text into sentences before translating and rejoin them in the "
                                "text's shape (off: each line is translated whole, as `mt evaluate --src` does "
                                "unless --split is given).", flag="split")

    def replace(self, names: dict[str, str] | None = None, **values) -> DecodeConfig:
        """A copy with the given values (None: keep this one's), checked; see `checked` for `names`. A smaller
        beam given alone also lowers nbest, which cannot exceed it."""
        given = {k: v for k, v in values.items() if v is not None}
        if "beam_size" in given and "nbest" not in given:
            given["nbest"] = min(self.nbest, given["beam_size"])
        return dataclasses.replace(self, **given).checked({k: v for k, v in (names or {}).items() if k in given})

    def checked(self, names: dict[str, str] | None = None) -> DecodeConfig:
        """self, after the range checks; an error names a key as `names` has it (e.g. the command-line option
        that set it), else as the config key."""
        checks = [
            (self.beam_size >= 1, "beam_size", "must be at least 1"),
            (self.alpha >= 0, "alpha", "must be 0 or more"),
            (1 <= self.nbest <= self.beam_size, "nbest", f"must be between 1 and the beam size ({self.beam_size})"),
            (self.max_len_a >= 0, "max_len_a", "must be 0 or more"),
            (self.max_len_b >= 1, "max_len_b", "outputs need room for at least one token"),
            (self.min_len >= 0, "min_len", "must be 0 or more"),
            (self.no_repeat_ngram_size >= 0, "no_repeat_ngram_size", "must be 0 (off) or more"),
            (self.max_tokens > 0, "max_tokens", "must be positive"),
            (self.parallel_batches >= 0, "parallel_batches", "must be 0 (one per thread) or more"),
            (self.top_k >= 0, "top_k", "must be 0 (all tokens) or more"),
            (0 < self.top_p <= 1, "top_p", "must be in (0, 1]"),
            (self.temperature > 0, "temperature", "must be positive"),
            (not self.sample or self.nbest == 1, "nbest", "sampling gives one output per sentence"),
        ]
        for ok, name, why in checks:
            if not ok:
                named = names and name in names
                where = f"{names[name]} {getattr(self, name)}" if named else f"config key decode.{name}"
                raise MtError(f"{where}: {why}")
        return self


@dataclass
class ServeConfig:
    """`mt serve`'s limits and batching: command-line options, not a section of a config file. LibreTranslate
    leaves its limits unlimited by default; a server open to others needs some, so these are on."""

    __pydantic_config__ = SECTION

    char_limit: Int = key(5000, "Characters per text; more: 400.", least=1)
    batch_limit: Int = key(64, "Texts per request (q as a list); more: 400.", least=1)
    body_limit: Int = key(1_000_000, "Bytes per request body; more: 413.", least=1)
    max_beam: Int = key(16, "The largest beam (and n-best) a request may ask for.", least=1)
    req_limit: Int = key(0, "Requests per minute per client (its API key, else its address); more: 429; 0: no "
                         "limit.", least=0)
    cache_size: Int = key(10_000, "Sentences whose translations the server keeps, to answer them again without the "
                          "model (1 KB of text each on average); 0: no cache.", least=0)
    download_timeout: Float = key(600.0, "Seconds a translated file (/translate_file) waits for its download; then it "
                                  "is removed.", least=1e-3)
    download_limit: Int = key(200_000_000, "Bytes of translated files waiting for their download at most; more: 503.",
                              least=1)
    batch_wait_ms: Float = key(5.0, "Gathering requests to decode together ends when none has come for this long "
                               "(a request waits at most 10×).", least=0)
    batch_tokens: Int = key(4000, "Source tokens decoded together at most; 1 decodes one request at a time.",
                            least=1)
    queue_size: Int = key(256, "Requests waiting for the model at most; more: 503.", least=1)
    request_timeout: Float = key(60.0, "Seconds a request may wait for its translation; more: 503.", least=1e-3)
    body_timeout: Float = key(10.0, "Seconds a client may take to send its request body; more: 408.", least=1e-3)

    def checked(self) -> ServeConfig:
        """self, after the range checks; errors name the command-line option."""
        for f in dataclasses.fields(self):
            value, least = getattr(self, f.name), f.metadata["least"]
            if value < least:
                raise MtError(f"{flag_of(f)} {value}: must be {'0 or more' if least == 0 else 'positive'}")
        return self


@dataclass
class Config:
    __pydantic_config__ = SECTION

    model: Section[ModelConfig] = key(ModelConfig(), "The Transformer's shape.")
    tokenizer: Section[TokenizerConfig] = key(TokenizerConfig(), "SentencePiece BPE.")
    data: Section[DataConfig] = key(DataConfig(), "The language pair and its corpora.")
    train: Section[TrainConfig] = key(TrainConfig(), "The training loop.")
    decode: Section[DecodeConfig] = key(DecodeConfig(), "Translation's defaults.")


def load_config(paths: list[str | Path] = (), overrides: list[str] = (), run_dir: str = "") -> Config:
    """Defaults ← each YAML file in turn ← `key=value` overrides; then validate. Errors name the file or key."""
    paths = [Path(p) for p in paths]
    raw: dict = {}
    for path in paths:
        _merge(raw, _read_yaml(path))
    for item in overrides:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise MtError(f"--set {item!r}: expected KEY=VALUE, e.g. train.max_steps=200")
        keys = name.strip().split(".")
        try:
            update: dict = {keys[-1]: yaml.safe_load(value)}
        except yaml.YAMLError as e:
            raise MtError(f"--set {item!r}: the value is not valid YAML ({first_line(e)})")
        for part in reversed(keys[:-1]):
            update = {part: update}
        _merge(raw, update)
    source = " + ".join([str(p) for p in paths] + (["--set"] if overrides else [])) or "defaults"
    config = _build(raw, source)
    if run_dir:
        config.train.run_dir = run_dir
    if not config.train.run_dir:
        config.train.run_dir = str(Path("runs") / (paths[0].stem if paths else "default"))
    validate(config)
    return config


def _read_yaml(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise MtError(f"{path}: cannot read config ({e.strerror})")
    except UnicodeDecodeError:
        raise MtError(f"{path}: config is not valid UTF-8")
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise MtError(f"{path}: not valid YAML ({first_line(e)})")
    if not isinstance(raw, dict):
        raise MtError(f"{path}: a config must be a YAML mapping of sections")
    return raw


def _merge(base: dict, update: dict) -> None:
    """Deep-merge `update` into `base`: a later file overrides single keys, not whole sections."""
    for name, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(name), dict):
            _merge(base[name], value)
        else:
            base[name] = value


def config_to_dict(config: Config) -> dict:
    return dataclasses.asdict(config)


def config_from_dict(raw: dict, source: str = "checkpoint") -> Config:
    """The config stored in a checkpoint. Keys this version of mt no longer has (from a checkpoint of an
    earlier version) are dropped with a warning; the defaults stand for keys it did not have yet."""
    config = _build(raw, source, strict=False)
    validate(config)
    return config


def save_config(config: Config, path: Path) -> None:
    text = yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True)
    atomic_write_bytes(path, text.encode("utf-8"))


@cache
def _validator() -> TypeAdapter:
    return TypeAdapter(Config)


UNKNOWN = ("unexpected_keyword_argument", "extra_forbidden")


def _build(raw: Any, source: str, strict: bool = True) -> Config:
    """The Config that `raw` describes, every key and type checked by pydantic; the first error, named by its
    key. Not strict: unknown keys are dropped with a warning."""
    if not isinstance(raw, dict):
        raise MtError(f"{source}: a config must be a mapping of sections")
    try:
        return _validator().validate_python(raw)
    except ValidationError as e:
        errors = e.errors()
    unknown = [error for error in errors if error["type"] in UNKNOWN]
    if strict or len(unknown) < len(errors):
        raise MtError(f"{source}: {_message(next(x for x in errors if strict or x['type'] not in UNKNOWN))}")
    raw = copy.deepcopy(raw)
    for error in unknown:
        *parents, name = _key_loc(error["loc"])
        section = raw
        for part in parents:
            section = section[part]
        log.warning(f"{source}: ignoring config key {_dotted(_key_loc(error['loc']))}, unknown to this version of mt")
        del section[name]
    return _build(raw, source, strict)


def _dotted(loc: tuple) -> str:
    """pydantic's location of a value → its key: ("data", "extra_train", 1, "path") → data.extra_train[1].path"""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{_printable(part)}" for part in loc).lstrip(".")


def _printable(key: Any) -> str:
    """A key as it can be shown on one line: quoted with escapes when it holds a line break or a control."""
    return str(key) if str(key).isprintable() else repr(str(key))


def _message(error: dict) -> str:
    """One pydantic error → a line that names the config key."""
    loc, kind, value = error["loc"], error["type"], error.get("input")
    name = _dotted(_key_loc(loc)) or "the top level"
    if kind in UNKNOWN:
        section = _section_at(loc[:-1])
        where = _dotted(_key_loc(loc[:-1])) or "the top level"
        return f"unknown config key {name} (known in {where}: {', '.join(f.name for f in dataclasses.fields(section))})"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", error["msg"])
        return f"config key {name}: must be one of {', '.join(allowed)}, got {value!r}"
    if kind in ("dataclass_type", "dict_type", "model_type", "model_attributes_type"):
        return f"config key {name} must be a mapping"
    if kind == "list_type":
        return f"config key {name} must be a list"
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        return f"config key {name}.filter: must be one of {', '.join(f.filter for f in FILTERS)}" + (
            f", got {value.get('filter')!r}" if kind == "union_tag_invalid" else " (each filter names its kind)")
    expected = {"int": "int", "float": "float", "bool": "bool", "string": "str"}.get(kind.split("_")[0])
    if expected:
        return f"config key {name} must be {expected}, got {value!r}"
    return f"config key {name}: {error['msg']}"


def _section_at(loc: tuple) -> Any:
    """The section at a location of pydantic's: () → Config, ("data", "extra_train", 0) → CorpusConfig,
    ("data", "filters", 0, "ratio") → RatioFilter (pydantic puts the filter's name after its index), and
    ("data", "filters", 0) → the union of the filters."""
    section: Any = Config
    for part in loc:
        if section is FILTER_UNION and isinstance(part, str):
            section = next(f for f in FILTERS if f.filter == part)
        elif isinstance(part, str):
            section = _inner(typing.get_type_hints(section)[part])
    return section


def _inner(kind: Any) -> Any:
    """A key's type → what its value or each of its items is: lists and Optional unwrapped."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) is list:
        return _inner(args[0])
    if typing.get_origin(kind) in (Union, types.UnionType) and type(None) in args:
        return _inner(next(arg for arg in args if arg is not type(None)))
    return kind


def _key_loc(loc: tuple) -> tuple:
    """A location of pydantic's as a config key's: without the filter's name after its index."""
    return tuple(part for i, part in enumerate(loc)
                 if not (isinstance(part, str) and _section_at(loc[:i]) is FILTER_UNION))


def validate(config: Config) -> None:
    """Range checks that types alone cannot express (the types, allowed words included, are checked by _build)."""
    m, t, d, k = config.model, config.train, config.data, config.tokenizer
    buckets = t.length_buckets or [d.max_len]  # none is always valid
    checks = [
        (m.d_model > 0, "model.d_model", "must be positive"),
        (m.num_heads > 0 and m.d_model % m.num_heads == 0, "model.num_heads",
         f"must divide model.d_model ({m.d_model})"),
        (m.d_ff > 0, "model.d_ff", "must be positive"),
        (m.num_encoder_layers > 0, "model.num_encoder_layers", "must be positive"),
        (m.num_decoder_layers > 0, "model.num_decoder_layers", "must be positive"),
        (0.0 <= m.dropout < 1.0, "model.dropout", "must be in [0, 1)"),
        (m.max_positions > 0, "model.max_positions", "must be positive"),
        (m.init_std >= 0, "model.init_std", "must be 0 (Glorot) or positive"),
        (k.vocab_size >= 16, "tokenizer.vocab_size", "must be at least 16"),
        (0.0 < k.character_coverage <= 1.0, "tokenizer.character_coverage", "must be in (0, 1]"),
        (0.0 <= k.sampling_alpha < 1.0, "tokenizer.sampling_alpha", "must be in [0, 1)"),
        (d.max_len > 0, "data.max_len", "must be positive"),
        (d.max_len <= m.max_positions, "data.max_len", f"must not exceed model.max_positions ({m.max_positions})"),
        (t.max_steps > 0, "train.max_steps", "must be positive"),
        (t.max_minutes >= 0, "train.max_minutes", "must be 0 (no limit) or positive"),
        (t.max_tokens >= d.max_len + 2, "train.max_tokens", "must hold one pair of data.max_len + 2 tokens"),
        (t.warmup_steps > 0, "train.warmup_steps", "must be positive"),
        (t.lr_scale > 0, "train.lr_scale", "must be positive"),
        (0.0 <= t.label_smoothing < 1.0, "train.label_smoothing", "must be in [0, 1)"),
        (t.clip_grad_norm >= 0, "train.clip_grad_norm", "must be 0 (off) or positive"),
        (t.log_every > 0, "train.log_every", "must be positive"),
        (t.eval_every > 0, "train.eval_every", "must be positive"),
        (t.keep_last >= 0, "train.keep_last", "must be 0 or more"),
        (t.accum_steps >= 1, "train.accum_steps", "must be at least 1"),
        (t.num_workers >= 0, "train.num_workers", "must be 0 or more"),
        (buckets == sorted(set(buckets)) and buckets[0] > 0, "train.length_buckets",
         "must be positive lengths in ascending order, e.g. [16, 32, 64, 128]"),
        (buckets[-1] >= d.max_len, "train.length_buckets", f"the longest must hold data.max_len ({d.max_len}) tokens"),
        (buckets[-1] <= t.max_tokens, "train.length_buckets",
         f"a bucket over train.max_tokens ({t.max_tokens}) holds no pair"),
        (t.patience >= 0, "train.patience", "must be 0 (off) or more"),
    ]
    for ok, key, why in checks:
        if not ok:
            raise MtError(f"config key {key}: {why}")
    config.decode.checked()
    corpora = d.training_corpora() | {"dev": d.dev, "test": d.test}
    for name, corpus in corpora.items():
        if corpus.path and corpus.hub:
            raise MtError(f"config key data.{name}: set either path or hub, not both")
        if corpus.max_pairs < 0 or corpus.repeat < 1:
            raise MtError(f"config key data.{name}: max_pairs must be 0 (all) or more and repeat at least 1")
        if name in ("dev", "test") and (corpus.max_pairs or corpus.repeat != 1):
            raise MtError(f"config key data.{name}: only training corpora are sampled (max_pairs) or repeated")
        if name.startswith("extra") and not corpus.is_set:
            raise MtError(f"config key data.{name}: no corpus given (set path or hub)")
        if name in ("dev", "test") and corpus.filters is not None:
            raise MtError(f"config key data.{name}.filters: only training corpora are filtered")
        if name in ("dev", "test") and (corpus.tag or corpus.synthetic):
            raise MtError(f"config key data.{name}: only training corpora are tagged or synthetic")
        if corpus.tag and (corpus.tag != corpus.tag.strip() or " " in corpus.tag):
            raise MtError(f"config key data.{name}.tag: one token, without spaces ({corpus.tag!r})")
    for name, filters in [("data.filters", d.filters)] + [(f"data.{name}.filters", c.filters) for name, c
                                                           in d.training_corpora().items() if c.filters]:
        for i, f in enumerate(filters):
            _check_filter(f, f"{name}[{i}]")


def _check_filter(f: Any, where: str) -> None:
    """A filter's range checks; errors name its key."""
    for ok, name, why in f.checks():
        if not ok:
            raise MtError(f"config key {where}.{name}: {why}")
