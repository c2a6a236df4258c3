"""The tokenizer and data sections of a config: SentencePiece's settings, the language pair and its corpora, each key
with its default, help and range (the corpus filters' keys: mt/data/filters.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from mt.core.schema import (SECTION, Bool, Fraction, Int, NonNegative, Positive, Section, Share, key,
                            key_error)
from mt.data.filters import DEFAULT_FILTERS, CorpusFilter

Script = Literal["simplified", "traditional", "keep"]
Contamination = Literal["remove", "keep"]  # training pairs that hold a dev or test sentence


@dataclass
class TokenizerConfig:
    """SentencePiece BPE. Ids are fixed: pad 0, unk 1, bos 2, eos 3."""

    __pydantic_config__ = SECTION

    vocab_size: Annotated[Int, Field(ge=16)] = key(8000, "Pieces in the vocabulary (of each language, when not "
                                                   "joint).")
    joint: Bool = key(True, "One vocabulary for both languages; false trains one model per language.")
    character_coverage: Share = key(0.9995, "Share of the training characters that get pieces of their own; the "
                                    "rarest others become byte pieces or `<unk>`.")
    byte_fallback: Bool = key(True, "Unknown characters become UTF-8 byte pieces instead of `<unk>`.")
    sample_size: Int = key(300_000, "Pairs drawn at random from the training corpora to learn the pieces from.")
    sampling_alpha: Fraction = key(0.0, "Subword regularisation (BPE-dropout, Provilkov et al. 2020): each epoch, "
                                   "training pairs are segmented anew, each merge skipped with this probability (0: "
                                   "off). Validation and translation always use the best segmentation.")


def _one_token(tag: str) -> str:
    if tag != tag.strip() or " " in tag:
        raise key_error(f"one token, without spaces ({tag!r})")
    return tag


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
    max_pairs: NonNegative = key(0, "Training corpora only: a random sample of this many pairs, the same on every "
                                 "run with the same seed (0: all).")
    repeat: Positive = key(1, "Training corpora only: each pair this many times per epoch, to weigh a small corpus "
                           "up.")
    filters: list[CorpusFilter] | None = key(None, "Training corpora only: this corpus's filters instead of "
                                             "data.filters (null: data.filters; []: none).")
    tag: Annotated[str, AfterValidator(_one_token)] = key(
        "", "Training corpora only: a token put before each source sentence, e.g. <BT> on back-translated pairs "
        "(tagged back-translation, Caswell et al., 2019); the tokenizer keeps it one piece. Never given in "
        "translation.")
    synthetic: Bool = key(False, "Training corpora only: machine-made pairs (back-translated or distilled), marked "
                          "as such in the Hugging Face export's model card.")

    @model_validator(mode="after")
    def _one_source(self) -> CorpusConfig:
        if self.path and self.hub:
            raise key_error("set either path or hub, not both")
        return self

    @property
    def is_set(self) -> bool:
        return bool(self.path or self.hub)


def _given(corpus: CorpusConfig) -> CorpusConfig:
    """Each of data.extra_train names its corpus."""
    if not corpus.is_set:
        raise key_error("no corpus given (set path or hub)")
    return corpus


def _held_out(corpus: CorpusConfig) -> CorpusConfig:
    """data.dev and data.test are read as they are."""
    if corpus.max_pairs or corpus.repeat != 1:
        raise key_error("only training corpora are sampled (max_pairs) or repeated")
    if corpus.filters is not None:
        raise key_error("only training corpora are filtered", "filters")
    if corpus.tag or corpus.synthetic:
        raise key_error("only training corpora are tagged or synthetic")
    return corpus


ExtraCorpus = Section[Annotated[CorpusConfig, AfterValidator(_given)]]
HeldOutCorpus = Section[Annotated[CorpusConfig, AfterValidator(_held_out)]]


@dataclass
class DataConfig:
    """The language pair and its corpora."""

    __pydantic_config__ = SECTION

    src_lang: str = key("zh", "Source language code.")
    tgt_lang: str = key("en", "Target language code; BLEU picks sacreBLEU's tokenizer for it.")
    train: Section[CorpusConfig] = key(CorpusConfig(), "The training corpus.")
    extra_train: list[ExtraCorpus] = key([], "More training corpora, mixed with train.")
    dev: HeldOutCorpus = key(CorpusConfig(split="validation"), "The dev corpus: validation's loss and scores.")
    test: HeldOutCorpus = key(CorpusConfig(split="test"), "The test corpus of `mt evaluate`.")
    max_len: Positive = key(128, "Training pairs with more tokens on either side are dropped (and counted).")
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
