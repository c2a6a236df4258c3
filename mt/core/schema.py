"""What a config section is made of: keys declared once with their default and help (`key`), strict scalar types,
and the ranges a key's type carries (Positive, Fraction, …), each refused with the phrase `range_phrase` gives it.

A section is a dataclass that pydantic checks (SECTION): a key's type holds its range, a rule between keys is a
validator of the section that holds them, raising `key_error` to name the key it refuses.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator, ConfigDict, Field, Strict
from pydantic_core import PydanticCustomError


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

# The ranges that keys share, in their types
Positive = Annotated[Int, Field(gt=0)]
NonNegative = Annotated[Int, Field(ge=0)]
PositiveFloat = Annotated[Float, Field(gt=0)]
NonNegativeFloat = Annotated[Float, Field(ge=0)]
Fraction = Annotated[Float, Field(ge=0, lt=1)]  # [0, 1): dropout, label smoothing
Share = Annotated[Float, Field(gt=0, le=1)]     # (0, 1]: a share of something that cannot be none of it

KEY_ERROR = "key_error"


def key(default: Any, help: str, *, flag: str = "", per_request: bool = True):
    """A config key: its default and its help, which --help and docs/config.md show.

    flag: its command-line option's name when not the key's own (beam_size → "beam"); per_request: whether a
    request to `mt serve` may set it.
    """
    metadata = {"help": help, "flag": flag, "per_request": per_request}
    if isinstance(default, list) or dataclasses.is_dataclass(default):  # each config gets a copy of its own
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def help_of(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")


def flag_of(f: dataclasses.Field) -> str:
    """The command-line option of a key: --beam for decode.beam_size, --max-len-a for decode.max_len_a."""
    return "--" + (f.metadata.get("flag") or f.name).replace("_", "-")


def key_error(why: str, *key: str | int) -> PydanticCustomError:
    """What a section's validator raises for a rule between its keys: `why`, said of `key` (a path inside the
    section: "num_heads", or "extra_train", 1; none: the section itself)."""
    return PydanticCustomError(KEY_ERROR, "{why}", {"why": why, "key": key})


def range_phrase(error: dict) -> str | None:
    """A pydantic error of a value out of its key's range, in words: greater_than 0 → "must be positive"; None for
    other errors."""
    ctx = error.get("ctx") or {}
    match error["type"]:
        case "greater_than":
            return "must be positive" if ctx["gt"] == 0 else f"must be more than {ctx['gt']}"
        case "greater_than_equal":
            return "must be 0 or more" if ctx["ge"] == 0 else f"must be at least {ctx['ge']}"
        case "less_than":
            return f"must be less than {ctx['lt']}"
        case "less_than_equal":
            return f"must be at most {ctx['le']}"
    return None
