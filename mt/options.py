"""The command line's options, declared once: a config section's keys as a command's options (`config_options`),
the model a command translates with (`ModelChoice`), the decode settings from the options given, and the option
types that several commands share.

Nothing here loads torch: `mt --help` reads these declarations.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer

from mt.config import DecodeConfig, Device, Engine
from mt.core.openmp import load_ctranslate2_first
from mt.core.schema import flag_of, help_of, key

if TYPE_CHECKING:
    from mt.decode.translator import Translator

LATEST = "Default: best.pt of the most recently trained run under runs/."

ConfigOption = Annotated[list[Path], typer.Option(
    "--config", "-c", help="YAML config; repeat to layer files (later ones override previous ones).")]
SetOption = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Override one config key, e.g. --set train.max_steps=200 (repeatable).")]
RunDirOption = Annotated[Optional[str], typer.Option("--run-dir", help="Default: runs/<config name>.")]
DeviceOption = Annotated[Optional[Device], typer.Option(
    "--device", help="auto: cuda when there is a GPU, else cpu (default: the config's train.device).")]
CheckpointOption = Annotated[Optional[Path], typer.Option("--checkpoint", help=LATEST)]
GlossaryModeOption = Annotated[Literal["hard", "soft"], typer.Option(
    "--glossary-mode",
    help="hard: mt's own search holds each term; soft (either engine): each missed term is written over the words "
    "its source is aligned to (docs/translating.md#glossaries).")]
GlossaryOption = Annotated[Optional[Path], typer.Option(
    "--glossary", help="A glossary (SOURCE<TAB>TARGET lines): each translation holds the target of each source term "
    "its sentence has (engine mt; docs/translating.md#glossaries).")]


def config_options(name: str, section: type, panel: str, given_only: bool = False, leave_out: frozenset = frozenset()):
    """A command gets one option per key of the config section `section` (its name from the key's flag, its help
    from the key's), and receives them as `name`: an instance of the section, or with `given_only` a dict of the
    keys whose options were given (the others stay the checkpoint's). Keys in `leave_out` get no option and keep
    their defaults; a key without a default is a required option. The options are declared once, as the section's
    keys, like fairseq's options made from its dataclasses."""
    hints = typing.get_type_hints(section)
    keys = [f for f in dataclasses.fields(section) if f.name not in leave_out]

    def option(f: dataclasses.Field) -> inspect.Parameter:
        kind = hints[f.name]
        kind = typing.get_args(kind)[0] if typing.get_origin(kind) is Annotated else kind
        default = None if given_only else inspect.Parameter.empty if f.default is MISSING else f.default
        return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                 annotation=Annotated[Optional[kind] if given_only else kind,
                                                      typer.Option(_switch(flag_of(f)) if kind is bool else flag_of(f),
                                                                   help=help_of(f),
                                                                   rich_help_panel=panel)],
                                 default=default)

    def decorate(command):
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != name]

        @functools.wraps(command)
        def with_section(**values):
            chosen = {f.name: values.pop(f.name) for f in keys}
            values[name] = ({k: v for k, v in chosen.items() if v is not None} if given_only
                            else section(**chosen))
            return command(**values)

        parameters = own + [option(f) for f in keys]
        with_section.__signature__ = inspect.Signature(parameters)
        with_section.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_section

    return decorate


def _switch(flag: str) -> str:
    """A yes/no key's pair of options: --split/--no-split."""
    return f"{flag}/--no-{flag[2:]}"


DECODE_FLAGS = {f.name: flag_of(f) for f in dataclasses.fields(DecodeConfig)}  # for errors that name the option
decode_options = config_options("decode", DecodeConfig, "Decoding (default: the checkpoint's decode settings)",
                                given_only=True)


def decoding(translator: Translator, given: dict, **fixed) -> DecodeConfig:
    """The checkpoint's decode settings with the options given; a shortlist is read now, so that a bad one is
    reported before anything is translated."""
    decode = translator.decode.replace(DECODE_FLAGS, **given, **fixed)
    if decode.shortlist:
        translator.engine.shortlist(decode.shortlist)
    return decode


def split_and_decode(translator: Translator, given: dict) -> tuple[bool, DecodeConfig]:
    """Whether to split sentences, and the decode settings: the checkpoint's, with the options given."""
    given = dict(given)
    split = given.pop("split_sentences", translator.decode.split_sentences)
    return split, decoding(translator, given)


@dataclass
class ModelChoice:
    """The model a command translates with: checkpoints (several: an ensemble) with mt's own engine, or a
    CTranslate2 export, on a device, computing in a compute type."""

    checkpoints: Optional[list[Path]] = key(None, f"{LATEST} Repeat to translate with an ensemble of models that "
                                            "share a vocabulary (their log-probabilities averaged at every step).",
                                            flag="checkpoint")
    weights: Optional[list[float]] = key(None, "With several --checkpoint: each model's weight in the ensemble, in "
                                         "order (repeatable; default equal).")
    device: Device = key("auto", "auto: cuda when there is a GPU, else cpu.")
    engine: Engine = key("mt", "mt, or ctranslate2 to use a model made by `mt export --ctranslate2 DIR` "
                         "(--checkpoint DIR; default: the latest run's ctranslate2/).")
    compute_type: str = key("auto", "mt's engine: float32 (auto, default), or bfloat16: products by bf16 weights, "
                            "where the CPU (AVX512-BF16 or AMX) or GPU has them in hardware. --engine ctranslate2: "
                            "CTranslate2's compute type (default, float32, int8, int8_float32, int16, float16, "
                            "bfloat16, …; default: the export's own); auto: int8 where it is faster (an Intel CPU "
                            "with 8-bit products in hardware, VNNI; an AMD CPU with AVX2 and no AVX-512), else "
                            "default.")

    def __post_init__(self) -> None:
        if self.engine == "ctranslate2":  # before the command loads torch, so that CTranslate2 keeps its threads
            load_ctranslate2_first()

    def load(self) -> Translator:
        from mt.decode.translator import load_translator

        return load_translator(self.checkpoints, self.device, self.engine, self.weights, self.compute_type)


@dataclass
class Teacher(ModelChoice):
    """`mt distill`'s model: --teacher, required."""

    checkpoints: list[Path] = key(MISSING, "A checkpoint, or a CTranslate2 export with --engine ctranslate2; repeat "
                                  "for an ensemble.", flag="teacher")


@dataclass
class ServedModel(ModelChoice):
    """`mt serve`'s model: one checkpoint or export."""

    checkpoints: Optional[Path] = key(None, LATEST, flag="checkpoint")


model_options = config_options("model", ModelChoice, "Model")
teacher_options = config_options("model", Teacher, "Teacher")
served_model_options = config_options("model", ServedModel, "Model", leave_out=frozenset({"weights"}))
