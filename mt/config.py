"""A config: the sections model, tokenizer, data, train and decode, assembled as Config, with YAML loading; each
key is declared once, with its default, help and range, and YAML files and `--set` only override them. The command
line's options, the server's request fields and docs/config.md are made from the same declarations.

Each section is declared beside what it configures: model in mt/model/config.py, tokenizer and data in
mt/data/config.py, the corpus filters in mt/data/filters.py (`mt serve`'s options in mt/serve/limits.py). train and
decode are declared here: a checkpoint holds the whole Config, so the packages that read one (mt/exchange/, and
mt/decode/ itself) import this module, which therefore cannot import from them or from mt/train/ above them.

pydantic checks every key's type and range and the rules between keys; its first error becomes one line that names
the file and the key (`_line`), or the command-line option that set it.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
import types
import typing
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

import yaml
from pydantic import TypeAdapter, ValidationError, model_validator

from mt.core.atomic import atomic_write_bytes
from mt.core.errors import MtError, first_line
from mt.core.run_dir import RUNS_ROOT
from mt.core.schema import (KEY_ERROR, SECTION, Bool, Float, Fraction, Int, NonNegative, NonNegativeFloat, Positive,
                            PositiveFloat, Section, Share, key, key_error, range_phrase)
from mt.data.config import DataConfig, TokenizerConfig
from mt.data.filters import FILTERS, CorpusFilter
from mt.model.config import ModelConfig

log = logging.getLogger(__name__)

# The allowed values of the keys and options that take one of a few words. The validator and the command line
# both read them from here (Typer shows them in --help and refuses others).
Device = Literal["auto", "cpu", "cuda"]  # auto: cuda when there is a GPU, else cpu
Engine = Literal["mt", "ctranslate2"]  # what translates: mt's own search, or a CTranslate2 export of the model
Precision = Literal["auto", "fp32", "bf16", "fp16"]  # auto: bf16 where the GPU or CPU has it natively, else fp32
Decay = Literal["inverse_sqrt", "linear"]  # after warm-up: the paper's step^-0.5, or a straight line to 0 at max_steps
OnFailure = Literal["keep", "mark", "empty"]  # a translation the failure guard finds failing after its retry
Keep = Literal["optimizer", "schedule", "position"]  # what a run started from another's weights also takes over
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]  # torch.compile's
S = TypeVar("S")


@dataclass
class TrainConfig:
    """The training loop. Defaults are the paper's optimiser and schedule."""

    __pydantic_config__ = SECTION

    run_dir: str = key("", "Where the run's files go (empty: runs/<first config file's name>).")
    seed: Int = key(1, "Seeds the initial weights, the data order, the samples and dropout.")
    device: Device = key("auto", "auto: cuda when there is a GPU, else cpu.")
    max_steps: Positive = key(100_000, "Updates to train for.")
    max_minutes: NonNegativeFloat = key(0.0, "Also stop after this many minutes of training, validations included; "
                                        "it validates and saves first (0: no limit).")
    max_tokens: Int = key(25_000, "Tokens per batch and side, padding included.")
    warmup_steps: Positive = key(4000, "Updates of linear learning-rate warm-up before the decay.")
    lr_scale: PositiveFloat = key(1.0, "Multiplies the paper's rate d_model^-0.5 · min(step^-0.5, step · "
                                  "warmup^-1.5).")
    decay: Decay = key("inverse_sqrt", "After warm-up: the paper's inverse square root, or linear: from the same "
                       "peak down to 0 at max_steps, which a run of few updates learns more from.")
    adam_beta1: Float = key(0.9, "Adam's β1.")
    adam_beta2: Float = key(0.98, "Adam's β2.")
    adam_eps: Float = key(1e-9, "Adam's ε.")
    label_smoothing: Fraction = key(0.1, "Label smoothing ε_ls of the cross entropy.")
    clip_grad_norm: NonNegativeFloat = key(0.0, "Clip the gradient's norm to this (0: no clipping; the paper does "
                                           "not clip).")
    accum_steps: Positive = key(1, "Batches whose gradients are summed into one update (per process).")
    precision: Precision = key("auto", "auto: bf16 autocast on a GPU or CPU that has bf16 in hardware, else fp32; "
                               "fp16 adds a dynamic loss scaler.")
    compile: Bool = key(False, "torch.compile the model: one graph per length bucket, or one with dynamic shapes.")
    compile_mode: CompileMode = key("default", "torch.compile's mode; reduce-overhead replays CUDA graphs (a GPU, "
                                    "with length_buckets).")
    length_buckets: list[Positive] = key([], "E.g. [16, 32, 64, 128]: every batch padded to one of these lengths, "
                                         "so that a compiled model meets a few fixed shapes (empty: none).")
    num_workers: NonNegative = key(0, "Processes that build batches ahead of the model (0: the training process "
                                   "itself).")
    patience: NonNegative = key(0, "Stop after this many validations without a better dev BLEU (0: never stop "
                                "early).")
    tensorboard: Bool = key(True, "Also write TensorBoard event files to RUN/tensorboard.")
    log_every: Positive = key(100, "Updates between lines of the training log.")
    eval_every: Positive = key(1000, "Updates between validations, each followed by a checkpoint.")
    keep_last: NonNegative = key(5, "Step checkpoints kept besides last.pt and best.pt.")

    @model_validator(mode="after")
    def _buckets_ascend_within_a_batch(self) -> TrainConfig:
        buckets = self.length_buckets
        if buckets != sorted(set(buckets)):
            raise key_error("must be positive lengths in ascending order, e.g. [16, 32, 64, 128]", "length_buckets")
        if buckets and buckets[-1] > self.max_tokens:
            raise key_error(f"a bucket over train.max_tokens ({self.max_tokens}) holds no pair", "length_buckets")
        return self


@dataclass
class DecodeConfig:
    """Translation: the checkpoint's defaults for `mt translate`, `mt evaluate` and `mt serve`, which the command
    line changes; a request to the server changes the search's keys and split_sentences, not batching, the
    shortlist or sampling. Defaults are the paper's beam search (section 6.1)."""

    __pydantic_config__ = SECTION

    beam_size: Positive = key(4, "Beam size; 1 is greedy search.", flag="beam")
    alpha: NonNegativeFloat = key(0.6, "GNMT length penalty: score = log p / ((5 + length) / 6) ** alpha.")
    nbest: Positive = key(1, "Translations given per sentence, best first, with their scores (at most the beam "
                          "size; a smaller beam given alone lowers it).")
    max_len_a: NonNegativeFloat = key(2.0, "Outputs may have up to a · source length + b tokens.")
    max_len_b: Positive = key(10, "The b of an output's limit, a · source length + b tokens.")
    min_len: NonNegative = key(0, "No end of sentence before this many output tokens.")
    no_repeat_ngram_size: NonNegative = key(0, "No n-gram of this many tokens twice in an output (0: off).",
                                            flag="no_repeat_ngram")
    max_tokens: Positive = key(4000, "Source tokens per decoding batch (sentences sorted by length, then grouped).",
                               per_request=False)
    parallel_batches: NonNegative = key(0, "Batches that mt's engine decodes at once on the CPU, each on its share of "
                                        "torch's threads: a batch alone leaves cores idle between its small products. "
                                        "The sentences are then cut into batches of about equal work (of 64 sentences "
                                        "at the least). 0: one per thread, at most 4; 1: one at a time.",
                                        per_request=False)
    shortlist: str = key("", "A file made by `mt shortlist`: each step scores only the target pieces that the "
                         "batch's sources may turn into, not the whole vocabulary (faster, most for small models; "
                         "CTranslate2's engine reads it as its vocabulary map). Empty: the whole vocabulary.",
                         per_request=False)
    sample: Bool = key(False, "Draw each next token at random from the model's distribution (narrowed by top_k, "
                       "top_p and temperature) instead of searching for the likeliest output: varied outputs, as "
                       "back-translation wants (Edunov et al., 2018). One output per sentence; seeded by seed.",
                       per_request=False)
    top_k: NonNegative = key(0, "Sampling: draw from the k likeliest tokens only (0: from all).", per_request=False)
    top_p: Share = key(1.0, "Sampling: draw from the fewest likeliest tokens whose probabilities reach p (nucleus "
                       "sampling; 1: from all).", per_request=False)
    temperature: PositiveFloat = key(1.0, "Sampling: divides the log-probabilities before the draw (below 1: closer "
                                     "to greedy; above: more varied).", per_request=False)
    seed: Int = key(0, "Sampling: the same seed, input and settings give the same outputs (mt's engine; "
                    "CTranslate2's draws do not repeat).", per_request=False)
    guard: Bool = key(True, "Check each translation for the ways small models fail (a copied source, a loop, a "
                      "length limit reached, a length far from normal, another script) and search a failed one again "
                      "another way (docs/confidence.md). Off with sample.")
    on_failure: OnFailure = key("keep", "A translation that fails after its retry: keep it, mark it ([?] before it) "
                                "or leave it empty. Its failure is reported either way (--scores, the server's "
                                "answers).")
    split_sentences: Bool = key(True, "Split each text into sentences before translating and rejoin them in the "
                                "text's shape (off: each line is translated whole, as `mt evaluate --src` does "
                                "unless --split is given).", flag="split")

    @model_validator(mode="after")
    def _nbest_within_the_outputs(self) -> DecodeConfig:
        if self.nbest > self.beam_size:
            raise key_error(f"must be between 1 and the beam size ({self.beam_size})", "nbest")
        if self.sample and self.nbest != 1:
            raise key_error("sampling gives one output per sentence", "nbest")
        return self

    def replace(self, names: dict[str, str] | None = None, **values) -> DecodeConfig:
        """A copy with the given values (None: keep this one's), checked: an error names a given key as `names`
        has it (the command-line option or request field that set it), else as the config key. A smaller beam given
        alone also lowers nbest, which cannot exceed it."""
        given = {k: v for k, v in values.items() if v is not None}
        if "beam_size" in given and "nbest" not in given:
            given["nbest"] = min(self.nbest, given["beam_size"])
        named = {k: v for k, v in (names or {}).items() if k in given}
        return checked(DecodeConfig, dataclasses.asdict(self) | given, ("decode",), named)


@dataclass
class Config:
    __pydantic_config__ = SECTION

    model: Section[ModelConfig] = key(ModelConfig(), "The Transformer's shape.")
    tokenizer: Section[TokenizerConfig] = key(TokenizerConfig(), "SentencePiece BPE.")
    data: Section[DataConfig] = key(DataConfig(), "The language pair and its corpora.")
    train: Section[TrainConfig] = key(TrainConfig(), "The training loop.")
    decode: Section[DecodeConfig] = key(DecodeConfig(), "Translation's defaults.")

    @model_validator(mode="after")
    def _sections_agree(self) -> Config:
        """The rules between keys of different sections."""
        m, d, t = self.model, self.data, self.train
        if d.max_len > m.max_positions:
            raise key_error(f"must not exceed model.max_positions ({m.max_positions})", "data", "max_len")
        if t.max_tokens < d.max_len + 2:
            raise key_error("must hold one pair of data.max_len + 2 tokens", "train", "max_tokens")
        if t.length_buckets and t.length_buckets[-1] < d.max_len:
            raise key_error(f"the longest must hold data.max_len ({d.max_len}) tokens", "train", "length_buckets")
        return self


def load_config(paths: list[str | Path] = (), overrides: list[str] = (), run_dir: str = "") -> Config:
    """Defaults ← each YAML file in turn ← `key=value` overrides, checked. Errors name the file or key."""
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
        config.train.run_dir = str(RUNS_ROOT / (paths[0].stem if paths else "default"))
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
    """The config stored in a checkpoint. Keys this version of mt no longer has (from a checkpoint of a
    previous version) are dropped with a warning; the defaults stand for keys it did not have yet."""
    return _build(raw, source, strict=False)


def save_config(config: Config, path: Path) -> None:
    text = yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True)
    atomic_write_bytes(path, text.encode("utf-8"))


# ---------------------------------------------------------------- pydantic's errors, told by the keys they are of

@cache
def _adapter(section: type) -> TypeAdapter:
    return TypeAdapter(section)


def checked(section: type[S], raw: dict, at: tuple = (), names: dict[str, str] | None = None) -> S:
    """`raw` as a `section` (whose config keys are under `at`: ("decode",)), checked; an error names a key as
    `names` has it (key → the option that set it), else as its config key."""
    try:
        return _adapter(section).validate_python(raw)
    except ValidationError as e:
        raise MtError(_line(e.errors()[0], section, at, names or {}))


UNKNOWN = ("unexpected_keyword_argument", "extra_forbidden")
FILTER_UNION = typing.get_args(CorpusFilter)[0]


def _build(raw: Any, source: str, strict: bool = True) -> Config:
    """The Config that `raw` describes, checked by pydantic; the first error, named by its key. Not strict: unknown
    keys are dropped with a warning."""
    if not isinstance(raw, dict):
        raise MtError(f"{source}: a config must be a mapping of sections")
    try:
        return _adapter(Config).validate_python(raw)
    except ValidationError as e:
        errors = e.errors()
    unknown = [error for error in errors if error["type"] in UNKNOWN]
    if strict or len(unknown) < len(errors):
        raise MtError(f"{source}: {_line(next(x for x in errors if strict or x['type'] not in UNKNOWN), Config)}")
    raw = copy.deepcopy(raw)
    for error in unknown:
        *parents, name = _key_loc(error, Config)
        section = raw
        for part in parents:
            section = section[part]
        log.warning(f"{source}: ignoring config key {_dotted(_key_loc(error, Config))}, unknown to this version of mt")
        del section[name]
    return _build(raw, source, strict)


def _line(error: dict, root: type, at: tuple = (), names: dict[str, str] | None = None) -> str:
    """One pydantic error of validating `root` (whose keys are under `at`) → a line that names the config key, or
    the option that `names` gives for it."""
    loc, kind, value = _key_loc(error, root), error["type"], error.get("input")
    why = range_phrase(error) or error["msg"]
    if names and loc and loc[-1] in names:
        return f"{names[loc[-1]]} {value.get(loc[-1]) if isinstance(value, dict) else value}: {why}"
    name = _dotted(at + loc) or "the top level"
    if kind in UNKNOWN:
        section = _section_at(error["loc"][:-1], root)
        where = _dotted(at + loc[:-1]) or "the top level"
        return f"unknown config key {name} (known in {where}: {', '.join(f.name for f in dataclasses.fields(section))})"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", error["msg"])
        return f"config key {name}: must be one of {', '.join(allowed)}, got {value!r}"
    if kind in ("dataclass_type", "dict_type", "model_type", "model_attributes_type"):
        return f"config key {name} must be a mapping"
    if kind == "list_type":
        return f"config key {name} must be a list"
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        return f"config key {name}.filter: must be one of {', '.join(FILTERS)}" + (
            f", got {value.get('filter')!r}" if kind == "union_tag_invalid" else " (each filter names its kind)")
    expected = {"int": "int", "float": "float", "bool": "bool", "string": "str"}.get(kind.split("_")[0])
    if expected:
        return f"config key {name} must be {expected}, got {value!r}"
    return f"config key {name}: {why}"


def _key_loc(error: dict, root: type) -> tuple:
    """pydantic's location of an error → its config key's, under `root`: with the key that a section's validator
    names, and without the filter's name that pydantic puts after a filter's index."""
    loc = error["loc"] + (error["ctx"]["key"] if error["type"] == KEY_ERROR else ())
    return tuple(part for i, part in enumerate(loc)
                 if not (isinstance(part, str) and _section_at(loc[:i], root) == FILTER_UNION))


def _section_at(loc: tuple, root: type) -> Any:
    """The section at a location of pydantic's under `root`: () → root, ("data", "extra_train", 0) → CorpusConfig,
    ("data", "filters", 0) → the union of the filters, ("data", "filters", 0, "ratio") → RatioFilter."""
    section: Any = root
    for part in loc:
        if isinstance(part, str):
            section = FILTERS[part] if section == FILTER_UNION else _inner(typing.get_type_hints(section)[part])
    return section


def _inner(kind: Any) -> Any:
    """A key's type → what its value or each of its items is: lists and Optional unwrapped."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) is list:
        return _inner(args[0])
    if typing.get_origin(kind) in (Union, types.UnionType) and type(None) in args:
        return _inner(next(arg for arg in args if arg is not type(None)))
    return kind


def _dotted(loc: tuple) -> str:
    """A key's location → its name: ("data", "extra_train", 1, "path") → data.extra_train[1].path"""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{_printable(part)}" for part in loc).lstrip(".")


def _printable(key: Any) -> str:
    """A key as it can be shown on one line: quoted with escapes when it holds a line break or a control."""
    return str(key) if str(key).isprintable() else repr(str(key))
