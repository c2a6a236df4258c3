"""Typed configuration: every default lives in these dataclasses, YAML and `--set` only override them.

A config file is a YAML mapping with the sections `model`, `tokenizer`, `data`, `train` and `decode`.
Unknown keys, wrong types and out-of-range values are errors that name the key.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from mt.atomic import atomic_write_bytes
from mt.errors import MtError

log = logging.getLogger(__name__)

# The allowed values of the keys and options that take one of a few words. The validator and the command line
# both read them from here (Typer shows them in --help and refuses others).
Norm = Literal["post", "pre"]  # post: Add&Norm as in the paper; pre: LayerNorm before each sub-layer
Positions = Literal["sinusoidal", "learned"]  # learned: a trained vector per position (the paper's Table 3, row E)
Script = Literal["simplified", "traditional", "keep"]
Device = Literal["auto", "cpu", "cuda"]  # auto: cuda when there is a GPU, else cpu
Engine = Literal["mt", "ctranslate2"]  # what translates: mt's own search, or a CTranslate2 export of the model
Precision = Literal["auto", "fp32", "bf16", "fp16"]  # auto: bf16 where the GPU or CPU has it natively, else fp32
Keep = Literal["optimizer", "schedule", "position"]  # what a run started from another's weights also takes over
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]  # torch.compile's


@dataclass
class ModelConfig:
    """The Transformer's shape. Defaults are the paper's base model."""

    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    dropout: float = 0.1
    norm: Norm = "post"
    positions: Positions = "sinusoidal"
    tie_embeddings: bool = True  # share source/target embeddings and the generator (joint vocabulary only)
    init_std: float = 0.0  # 0: Glorot-uniform projections (tensor2tensor); > 0: all weights N(0, init_std²) (Marian)
    max_positions: int = 1024  # rows of the sinusoidal position table


@dataclass
class TokenizerConfig:
    """SentencePiece BPE. Ids are fixed: pad 0, unk 1, bos 2, eos 3."""

    vocab_size: int = 8000
    joint: bool = True  # one vocabulary for both languages; False trains one model per language
    character_coverage: float = 0.9995
    byte_fallback: bool = True  # unknown characters become UTF-8 byte pieces instead of <unk>
    sample_size: int = 300_000  # pairs drawn at random from the training corpus to learn the pieces from
    # Subword regularisation (BPE-dropout, Provilkov et al. 2020): each epoch, training pairs are segmented anew,
    # each merge skipped with this probability (0: off). Validation and translation always use the best one.
    sampling_alpha: float = 0.0


@dataclass
class CorpusConfig:
    """Where one split's sentence pairs come from: local files, or a Hugging Face hub dataset.

    path: a prefix of aligned text files (PATH.zh and PATH.en), a .tsv file (source<TAB>target), or a .jsonl
    file (one object per line). hub: a hub dataset name, with hub_config and split. src_field/tgt_field name the
    fields of JSONL and hub rows; a dot reaches into a nested field ("translation.zh"); empty means the language
    code.
    """

    path: str = ""
    hub: str = ""
    hub_config: str = ""
    split: str = "train"
    src_field: str = ""
    tgt_field: str = ""
    max_pairs: int = 0  # training only: a random sample of this many pairs (0: all), e.g. of a large corpus
    repeat: int = 1  # training only: each pair this many times per epoch, to weigh a small corpus up

    @property
    def is_set(self) -> bool:
        return bool(self.path or self.hub)


@dataclass
class DataConfig:
    src_lang: str = "zh"
    tgt_lang: str = "en"
    train: CorpusConfig = field(default_factory=CorpusConfig)
    extra_train: list[CorpusConfig] = field(default_factory=list)  # more training corpora, mixed with train
    dev: CorpusConfig = field(default_factory=lambda: CorpusConfig(split="validation"))
    test: CorpusConfig = field(default_factory=lambda: CorpusConfig(split="test"))
    max_len: int = 128  # pairs with more tokens on either side are dropped from training (and counted)
    chinese_script: Script = "simplified"  # a zh side is converted to this script (OpenCC) before tokenising
    dev_max_sentences: int = 0  # validate on the first N dev pairs (0: all)

    def training_corpora(self) -> dict[str, CorpusConfig]:
        """data.train and data.extra_train, by the names that errors and reports give them."""
        return {"train": self.train} | {f"extra_train[{i}]": c for i, c in enumerate(self.extra_train)}

    def scripts(self) -> tuple[Script, Script]:
        """The script that each side's text is converted to before tokenising; "keep" unless it is Chinese."""
        return tuple(self.chinese_script if lang.split("-")[0] == "zh" else "keep"
                     for lang in (self.src_lang, self.tgt_lang))


@dataclass
class TrainConfig:
    """The training loop. Defaults are the paper's optimiser and schedule."""

    run_dir: str = ""  # empty: runs/<config file name>
    seed: int = 1
    device: Device = "auto"
    max_steps: int = 100_000
    max_minutes: float = 0.0  # also stop after this many minutes of training, validations included (0: no limit)
    max_tokens: int = 25_000  # a batch holds at most this many padded tokens (per side)
    warmup_steps: int = 4000
    lr_scale: float = 1.0  # multiplies the paper's rate d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1
    clip_grad_norm: float = 0.0  # 0: no clipping (the paper does not clip)
    accum_steps: int = 1  # batches whose gradients are summed into one update (per process)
    precision: Precision = "auto"  # fp16 adds a dynamic loss scaler
    compile: bool = False  # torch.compile the model: one graph per length bucket, or one with dynamic shapes
    compile_mode: CompileMode = "default"  # "reduce-overhead" replays CUDA graphs (GPU, with length buckets)
    length_buckets: list[int] = field(default_factory=list)  # e.g. [16, 32, 64, 128]: batches of fixed shapes
    num_workers: int = 0  # processes that build batches ahead of the model (0: the training process itself)
    patience: int = 0  # stop after this many validations without a better dev BLEU (0: never stop early)
    tensorboard: bool = True  # also write TensorBoard event files to RUN/tensorboard
    log_every: int = 100
    eval_every: int = 1000
    keep_last: int = 5  # step checkpoints kept besides last.pt and best.pt


@dataclass
class DecodeConfig:
    """Translation. Defaults are the paper's beam search (section 6.1: beam 4, length penalty 0.6)."""

    beam_size: int = 4  # 1: greedy search
    alpha: float = 0.6  # GNMT length penalty: scores are log-probability / ((5 + length) / 6) ** alpha
    nbest: int = 1  # translations returned per sentence
    max_len_a: float = 2.0  # an output may have up to a * source_length + b tokens
    max_len_b: int = 10
    min_len: int = 0  # no EOS before this many output tokens
    no_repeat_ngram_size: int = 0  # > 0: no n-gram of this many tokens twice in an output (stops loops); 0: off
    max_tokens: int = 4000  # source tokens per decoding batch (sentences sorted by length, then grouped)

    def replace(self, names: dict[str, str] | None = None, **values) -> DecodeConfig:
        """A copy with the given values (None: keep this one's), checked; see `checked` for `names`."""
        return dataclasses.replace(self, **{k: v for k, v in values.items() if v is not None}).checked(names)

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
        ]
        for ok, key, why in checks:
            if not ok:
                where = f"{names[key]} {getattr(self, key)}" if names and key in names else f"config key decode.{key}"
                raise MtError(f"{where}: {why}")
        return self


@dataclass
class ServeConfig:
    """`mt serve`'s limits and batching (command-line options, not a config file's section). LibreTranslate leaves
    its limits unlimited by default; a server open to others needs some, so these are on."""

    char_limit: int = 5000        # characters per text; more: 400
    batch_limit: int = 64         # texts per request (`q` as a list); more: 400
    body_limit: int = 1_000_000   # bytes per request body; more: 413
    max_beam: int = 16            # the largest beam (and n-best) a request may ask for
    req_limit: int = 0            # requests per minute per client (its API key, else its address); more: 429; 0: off
    batch_wait_ms: float = 5.0    # how long a request waits for others to be decoded with
    batch_tokens: int = 4000      # source tokens gathered into one decoding round at most
    queue_size: int = 256         # requests waiting for the model at most; more: 503
    request_timeout: float = 60.0  # seconds a request may wait for its translation; more: 503
    body_timeout: float = 10.0    # seconds a client may take to send its request body; more: 408

    def checked(self) -> ServeConfig:
        """self, after the range checks; errors name the command-line option."""
        for name, value in dataclasses.asdict(self).items():
            least = 0 if name in ("req_limit", "batch_wait_ms") else 1e-3 if "timeout" in name else 1
            if value < least:
                why = "0 or more" if least == 0 else "positive"
                raise MtError(f"--{name.replace('_', '-')} {value}: must be {why}")
        return self


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


def load_config(paths: list[str | Path] = (), overrides: list[str] = (), run_dir: str = "") -> Config:
    """Defaults ← each YAML file in turn ← `key=value` overrides; then validate. Errors name the file or key."""
    paths = [Path(p) for p in paths]
    raw: dict = {}
    for path in paths:
        _merge(raw, _read_yaml(path))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise MtError(f"--set {item!r}: expected KEY=VALUE, e.g. train.max_steps=200")
        _set_dotted(raw, key.strip().split("."), yaml.safe_load(value))
    source = " + ".join([str(p) for p in paths] + (["--set"] if overrides else [])) or "defaults"
    config = _build(Config, raw, prefix="", source=source)
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
        raise MtError(f"{path}: not valid YAML ({str(e).splitlines()[0]})")
    if not isinstance(raw, dict):
        raise MtError(f"{path}: a config must be a YAML mapping of sections")
    return raw


def _merge(base: dict, update: dict) -> None:
    """Deep-merge `update` into `base`: a later file overrides single keys, not whole sections."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def config_to_dict(config: Config) -> dict:
    return dataclasses.asdict(config)


def config_from_dict(raw: dict, source: str = "checkpoint") -> Config:
    """The config stored in a checkpoint. Keys this version of mt no longer has (from a checkpoint of an
    earlier version) are dropped with a warning; the defaults stand for keys it did not have yet."""
    config = _build(Config, raw, prefix="", source=source, strict=False)
    validate(config)
    return config


def save_config(config: Config, path: Path) -> None:
    text = yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True)
    atomic_write_bytes(path, text.encode("utf-8"))


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


def _set_dotted(raw: dict, keys: list[str], value) -> None:
    for key in keys[:-1]:
        raw = raw.setdefault(key, {})
        if not isinstance(raw, dict):
            raise MtError(f"--set {'.'.join(keys)}: {key} is not a section")
    raw[keys[-1]] = value


def _build(cls, raw, prefix: str, source: str, strict: bool = True):
    """Make dataclass `cls` from a mapping, checking every key and type."""
    where = prefix.rstrip(".") or "the top level"
    if not isinstance(raw, dict):
        raise MtError(f"{source}: config key {where} must be a mapping")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(raw) - set(fields))
    if unknown and strict:
        raise MtError(f"{source}: unknown config key {prefix}{unknown[0]} (known in {where}: {', '.join(fields)})")
    for name in unknown:
        log.warning(f"{source}: ignoring config key {prefix}{name}, unknown to this version of mt")
    values = {}
    for name, value in raw.items():
        if name in unknown:
            continue
        kind = hints[name]
        if dataclasses.is_dataclass(kind):
            values[name] = _build(kind, value or {}, f"{prefix}{name}.", source, strict)
        elif typing.get_origin(kind) is list:  # a list of sections (data.extra_train) or of values
            if not isinstance(value, list):
                raise MtError(f"{source}: config key {prefix}{name} must be a list")
            item = typing.get_args(kind)[0]
            values[name] = [_build(item, v or {}, f"{prefix}{name}[{i}].", source, strict)
                            if dataclasses.is_dataclass(item) else _check_type(v, item, f"{prefix}{name}[{i}]", source)
                            for i, v in enumerate(value)]
        else:
            values[name] = _check_type(value, kind, f"{prefix}{name}", source)
    return cls(**values)


def _check_type(value, kind, key: str, source: str):
    if typing.get_origin(kind) is Literal:  # one of a few words
        if value in typing.get_args(kind):
            return value
        raise MtError(f"{source}: config key {key}: must be one of {', '.join(typing.get_args(kind))}, got {value!r}")
    if kind is float and not isinstance(value, bool) and isinstance(value, (int, str)):
        try:  # YAML 1.1 reads "1e-9" as a string
            return float(value)
        except ValueError:
            pass
    if kind is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # e.g. a hub config named "2019"
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise MtError(f"{source}: config key {key} must be {kind.__name__}, got {value!r}")
