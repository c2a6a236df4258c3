"""The requests the server takes, declared once: each route's fields with their types, ranges, defaults and help.
Each request's parameters are parsed into its route's schema (`parse`); `request_fields` lists the same
declarations for the docs.

A value must have its field's type, as in a config file: JSON's true is no number, and 1 is not true. A form sends
texts, so the field of a number or of a yes-or-no also takes the text that spells one ("4", "0.6", "true"). The
decode options a request may set are DecodeConfig's keys marked per_request, by their command-line names (beam,
alpha, nbest, split, …), with DecodeConfig's types, which carry their ranges, and its help; a rule between them (nbest
at most the beam) is DecodeConfig's, checked where the request's values replace the server's. A range that is one of
the server's limits (--max-beam, --char-limit, --batch-limit), and the languages, are checked against the Bounds a
request is parsed with.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
import json
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, TypeVar, Union

from annotated_types import Ge, Gt, Le, Lt
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, InstanceOf, ValidationError,
                      create_model)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError, PydanticKnownError, core_schema

from mt.config import DecodeConfig
from mt.core.errors import MtError
from mt.core.schema import flag_of, help_of
from mt.data.glossary import Glossary, glossary_of, parse_glossary
from mt.serve.bodies import Upload
from mt.serve.errors import ApiError
from mt.serve.languages import ALIASES
from mt.serve.limits import ServeConfig

REFUSED = "refused"  # the type of an error whose message is the whole answer, as LibreTranslate words it


@dataclass(frozen=True)
class Bounds:
    """What a request is checked against besides its fields' types: the server's limits and its model's languages."""

    limits: ServeConfig
    source: str
    target: str


class Bound(ABC):
    """A check of a field's value against the Bounds, run after its type's check; `text` says it for the docs."""

    @abstractmethod
    def check(self, value: Any, bounds: Bounds) -> Any:
        """The value, or a pydantic error that refuses it."""

    def text(self) -> str:
        return ""

    def __get_pydantic_core_schema__(self, source: Any, handler) -> core_schema.CoreSchema:
        return core_schema.with_info_after_validator_function(
            lambda value, info: self.check(value, info.context["bounds"]), handler(source))


@dataclass(frozen=True)
class AtMost(Bound):
    """A number's largest value: one of the server's limits (a ServeConfig key), less `less`."""

    limit: str
    less: int = 0

    def most(self, limits: ServeConfig) -> int:
        return getattr(limits, self.limit) - self.less

    def check(self, value: int, bounds: Bounds) -> int:
        if value > self.most(bounds.limits):
            raise PydanticKnownError("less_than_equal", {"le": self.most(bounds.limits)})
        return value

    def option(self) -> str:
        """The bound by the server's option: --max-beam − 1."""
        flag = flag_of(ServeConfig.__dataclass_fields__[self.limit])
        return f"{flag} − {self.less}" if self.less else flag


@dataclass(frozen=True)
class Within(Bound):
    """Texts within the server's limits: each of at most --char-limit characters, and, where `lists`, a list of at
    most --batch-limit texts."""

    lists: bool = False

    def check(self, value: str | list[str], bounds: Bounds) -> str | list[str]:
        limits = bounds.limits
        if isinstance(value, list) and len(value) > limits.batch_limit:
            raise _refused(f"Invalid request: request ({len(value)}) exceeds text limit ({limits.batch_limit})")
        for text in value if isinstance(value, list) else [value]:
            if len(text) > limits.char_limit:
                raise _refused(f"Invalid request: request ({len(text)}) exceeds text limit ({limits.char_limit})")
        return value

    def text(self) -> str:
        return "at most --char-limit characters" + (" each, at most --batch-limit texts" if self.lists else "")


@dataclass(frozen=True)
class Language(Bound):
    """The model's source or target language (`side`): its code or an alias of it (zh-Hans for zh), or, where
    `auto`, "auto"."""

    side: Literal["source", "target"]
    auto: bool = False

    def check(self, code: str, bounds: Bounds) -> str:
        expected = getattr(bounds, self.side)
        if not (code == expected or code in ALIASES.get(expected, ()) or (self.auto and code == "auto")):
            raise _refused(f"{code} is not supported (this model translates {bounds.source} to {bounds.target})")
        return code

    def text(self) -> str:
        return f"the model's {self.side} language" + (", or auto" if self.auto else "")


def _refused(message: str) -> PydanticCustomError:
    return PydanticCustomError(REFUSED, "{message}", {"message": message})


def _given(value: Any) -> Any:
    """An empty value is a missing one, as LibreTranslate has it."""
    if value is None or value == "" or value == []:
        raise PydanticKnownError("missing")
    return value


def _spelt(value: Any) -> Any:
    """A text that spells true or false (in any case) or a number, as that value; a whole float (2.0, as some
    clients write a count) as an int; any other value as it is."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return value
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _text_by_default(value: Any) -> Any:
    return "text" if value is None or value == "" else value


Given = BeforeValidator(_given)
Spelt = BeforeValidator(_spelt)
Source = Annotated[str, Given, Language("source", auto=True)]
Target = Annotated[str, Given, Language("target")]
ApiKey = Annotated[Optional[str], Field(description="One of the server's API keys; needed where it has some "
                                                    "(--api-keys FILE).")]


class Request(BaseModel):
    """A request's fields: strict types, as a config's keys have; fields of no route's are ignored, as clients send
    some of LibreTranslate's that mt has no use for."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


def _glossary(value: str | dict | None) -> Glossary | None:
    """A request's glossary: the file's lines in a text, or a JSON object of source term → target (or a list of
    alternatives)."""
    if not value:  # an empty value is a missing one
        return None
    try:
        return parse_glossary(value, "glossary") if isinstance(value, str) else glossary_of(value, "glossary")
    except MtError as e:
        raise _refused(f"Invalid request: {e}")


class GlossaryRequest(Request):
    """A request that may bring a glossary."""

    glossary: Annotated[Optional[Union[str, dict[str, Union[str, list[str]]]]], AfterValidator(_glossary)] = Field(
        None, description="Terms each translation holds: SOURCE<TAB>TARGET lines as in a glossary file, or (JSON) an "
                          "object of source term → target or list of alternatives; added to the server's glossary "
                          "(--glossary), over it where both have a term.")


class TextsRequest(Request):
    """A request of a text or a list of texts."""

    q: Annotated[Union[str, list[str]], Given, Within(lists=True)] = Field(description="A text, or a list of texts.")

    def texts(self) -> list[str]:
        return self.q if isinstance(self.q, list) else [self.q]


class LibreTranslateRequest(TextsRequest, GlossaryRequest):
    """POST /translate, LibreTranslate's."""

    source: Source = Field(description="The source language's code, or auto.")
    target: Target = Field(description="The target language's code.")
    format: Annotated[Literal["text", "html"], BeforeValidator(_text_by_default)] = Field(
        "text", description="With html, the markup is kept and each inline tag placed on the translation of the "
                            "words it was on.")
    alternatives: Annotated[int, Spelt, Ge(0), AtMost("max_beam", less=1)] = Field(
        0, description="Other translations per text besides the best (none for HTML).")
    api_key: ApiKey = None


class FileRequest(GlossaryRequest):
    """POST /translate_file, LibreTranslate's: a multipart form."""

    file: Annotated[InstanceOf[Upload], Given] = Field(
        description="The file, of a type /frontend/settings lists (supportedFilesFormat).")
    source: Source = Field(description="The source language's code, or auto.")
    target: Target = Field(description="The target language's code.")
    api_key: ApiKey = None


class DetectRequest(TextsRequest):
    """POST /detect, LibreTranslate's."""

    api_key: ApiKey = None


class SuggestRequest(Request):
    """POST /suggest, LibreTranslate's."""

    q: Annotated[str, Given, Within()] = Field(description="The source text: one sentence.")
    s: Annotated[str, Given, Within()] = Field(description="A better translation of it.")
    source: Source = Field(description="The source language's code.")
    target: Target = Field(description="The target language's code.")
    api_key: ApiKey = None


class SuggestionsRequest(Request):
    """GET /api/suggestions, mt's own: an operator's list."""

    status: Optional[Literal["accepted", "refused"]] = Field(None, description="Only those (default: all).")
    limit: Annotated[int, Spelt, Ge(1), Le(1000)] = Field(100, description="The newest this many.")
    api_key: ApiKey = None


class DecisionRequest(Request):
    """POST /api/suggestions/{id}, mt's own: an operator's decision on one suggestion."""

    status: Literal["accepted", "refused"] = Field(description="accepted: it answers its source; refused: it "
                                                               "does not.")
    reason: Annotated[str, Within()] = Field("", description="Why (kept with it).")
    api_key: ApiKey = None


class ModelRequest(Request):
    """POST /api/model, mt's own: an operator's change of the served model."""

    checkpoint: Annotated[str, Given, Within()] = Field(description="A checkpoint file on the server, of the served "
                                                        "model's vocabulary (e.g. RUN/checkpoints/adapted.pt).")
    api_key: ApiKey = None


# The decode keys a request may set, by the names of their command-line options: beam, alpha, nbest, split, …
DECODE_OPTIONS = {f.name: flag_of(f)[2:].replace("-", "_") for f in dataclasses.fields(DecodeConfig)
                  if f.metadata["per_request"]}


class _MtTranslateRequest(GlossaryRequest):
    q: Annotated[str, Given, Within()] = Field(description="One text; each of its lines is answered.")
    attention: Annotated[bool, Spelt] = Field(
        False, description="Give each translation's cross-attention: per layer, heads averaged.")
    api_key: ApiKey = None

    def decode_values(self) -> dict[str, Any]:
        """The decode keys this request sets, by DecodeConfig's names (None: the server's setting)."""
        return {key: getattr(self, name) for key, name in DECODE_OPTIONS.items()}


def _decode_fields() -> dict[str, tuple]:
    """The fields of DECODE_OPTIONS, with DecodeConfig's types and help; None (not given): the server's setting."""
    kinds = typing.get_type_hints(DecodeConfig, include_extras=True)
    fields = {f.name: f for f in dataclasses.fields(DecodeConfig)}
    return {name: (Annotated[Optional[kinds[key]], Spelt], Field(None, description=help_of(fields[key])))
            for key, name in DECODE_OPTIONS.items()}


TranslateRequest = create_model("TranslateRequest", __base__=_MtTranslateRequest, __module__=__name__,
                                __doc__="POST /api/translate, mt's own.", **_decode_fields())

S = TypeVar("S", bound=Request)


def parse(schema: type[S], params: dict, bounds: Bounds) -> S:
    """The parameters as `schema`, or a 400 that names the first wrong field (a missing one before others)."""
    try:
        return schema.model_validate(params, context={"bounds": bounds})
    except ValidationError as e:
        errors = e.errors()
    error = next((error for error in errors if error["type"] == "missing"), errors[0])
    name = error["loc"][0]
    field = schema.model_fields[name]
    if error["type"] == "missing":
        raise ApiError(400, f"Invalid request: missing {name} parameter")
    if error["type"] == REFUSED:
        raise ApiError(400, error["msg"])
    if error["type"] == "literal_error":
        allowed = ", ".join(typing.get_args(field.annotation))
        raise ApiError(400, f"{error['input']} {name} is not supported (supported: {allowed})")
    span = _span(field, bounds.limits)
    raise ApiError(400, f"Invalid request: {name} parameter must be {_kind(field.annotation)}"
                        + (f" {span}" if span else ""))


KINDS = {int: "a whole number", float: "a number", bool: "true or false", str: "a text", Upload: "a file"}


def _kind(annotation: Any) -> str:
    """A type in the API's words: int → "a whole number", str | list[str] → "a text or a list of texts"."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _kind(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(_kind(arg) for arg in args if arg is not type(None))
    if origin is list:
        return f"a list of {_kind(args[0])[2:]}s"
    if origin is dict:
        return "an object"
    if origin is Literal:
        return "one of " + ", ".join(args)
    return KINDS[annotation]


def _constraints(annotation: Any) -> list:
    """The metadata a type carries, nested ones included: Annotated[Optional[Annotated[int, Field(gt=0)]], …] →
    [Gt(0), …]."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _constraints(args[0]) + [m for extra in args[1:] for m in _unpacked(extra)]
    if origin in (Union, types.UnionType):
        return [m for arg in args for m in _constraints(arg)]
    return []


def _unpacked(metadata: Any) -> list:
    """A FieldInfo in an Annotated as the constraints it holds (Field(gt=0) → [Gt(0)]); other metadata as it is."""
    return list(metadata.metadata) if isinstance(metadata, FieldInfo) else [metadata]


def _span(field: FieldInfo, limits: ServeConfig | None = None) -> str:
    """A number's range, from its type's constraints: "from 0 to 15" with the server's limits, "from 0 to
    --max-beam − 1" without; "from 1" for a whole number over 0."""
    whole = _kind(field.annotation) == KINDS[int]
    parts = []
    for m in _constraints(field.annotation) + list(field.metadata):
        if isinstance(m, Ge):
            parts.append(f"from {m.ge}")
        elif isinstance(m, Gt):
            parts.append(f"from {m.gt + 1}" if whole else f"over {m.gt}")
        elif isinstance(m, Le):
            parts.append(f"to {m.le}")
        elif isinstance(m, Lt):
            parts.append(f"to {m.lt - 1}" if whole else f"under {m.lt}")
        elif isinstance(m, AtMost):
            parts.append(f"to {m.most(limits) if limits else m.option()}")
    return " ".join(parts)


ROUTES = {"POST /translate": LibreTranslateRequest, "POST /translate_file": FileRequest,
          "POST /detect": DetectRequest, "POST /api/translate": TranslateRequest, "POST /suggest": SuggestRequest,
          "GET /api/suggestions": SuggestionsRequest, "POST /api/suggestions/{id}": DecisionRequest,
          "POST /api/model": ModelRequest}


def request_fields() -> dict[str, list[dict[str, str]]]:
    """Each route's request fields, for the docs, from the declarations requests are parsed with: route →
    [{"name", "type", "range", "default", "help"}], e.g. "POST /translate" → [{"name": "alternatives", "type":
    "a whole number", "range": "from 0 to --max-beam − 1", "default": "0", "help": …}, …]. A range that is a server's
    limit names its option; a decode option's default is the server's setting of its config key."""
    config_keys = {name: key for key, name in DECODE_OPTIONS.items()}
    return {route: [_described(name, field, config_keys.get(name)) for name, field in schema.model_fields.items()]
            for route, schema in ROUTES.items()}


def _described(name: str, field: FieldInfo, config_key: str | None) -> dict[str, str]:
    span = ", ".join(filter(None, [_span(field), *(m.text() for m in field.metadata if isinstance(m, Bound))]))
    if config_key:
        default = f"the server's decode.{config_key}"
    else:
        default = "required" if field.is_required() else "none" if field.default is None else json.dumps(field.default)
    return {"name": name, "type": _kind(field.annotation), "range": span, "default": default,
            "help": field.description or ""}
