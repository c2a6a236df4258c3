"""`mt serve`'s limits and batching, declared once: each option with its default, help and range."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from mt.config import checked
from mt.core.errors import MtError
from mt.core.schema import SECTION, Float, NonNegative, NonNegativeFloat, Positive, flag_of, key

Seconds = Annotated[Float, Field(ge=1e-3)]  # a wait: a millisecond at the least
Batching = Literal["continuous", "rounds"]  # how the worker decodes requests together (docs/serving.md)


@dataclass
class ServeConfig:
    """`mt serve`'s limits and batching: command-line options, not a section of a config file. LibreTranslate
    leaves its limits unlimited by default; a server open to others needs some, so these are on."""

    __pydantic_config__ = SECTION

    char_limit: Positive = key(5000, "Characters per text; more: 400.")
    batch_limit: Positive = key(64, "Texts per request (q as a list); more: 400.")
    body_limit: Positive = key(1_000_000, "Bytes per request body; more: 413.")
    max_beam: Positive = key(16, "The largest beam (and n-best) a request may ask for.")
    req_limit: NonNegative = key(0, "Requests per minute per client (its API key, else its address); more: 429; 0: "
                                 "no limit.")
    cache_size: NonNegative = key(10_000, "Sentences whose translations the server keeps, to answer them again "
                                  "without the model (1 KB of text each on average); 0: no cache.")
    download_timeout: Seconds = key(600.0, "Seconds a translated file (/translate_file) waits for its download; then "
                                    "it is removed.")
    download_limit: Positive = key(200_000_000, "Bytes of translated files waiting for their download at most; more: "
                                   "503.")
    batching: Batching = key("rounds", "How requests are decoded together: rounds (the requests gathered are decoded "
                             "as one batch) or continuous (their sentences join a running search at every decoder "
                             "step and leave it when done; mt's own engine, else rounds).")
    batch_wait_ms: NonNegativeFloat = key(5.0, "With rounds: gathering requests to decode together ends when none has "
                                          "come for this long (a request waits at most 10×).")
    batch_tokens: Positive = key(4000, "Source tokens decoded together at most; 1 decodes one request at a time.")
    queue_size: Positive = key(256, "Requests waiting for the model at most; more: 503.")
    request_timeout: Seconds = key(60.0, "Seconds a request may wait for its translation; more: 503.")
    body_timeout: Seconds = key(10.0, "Seconds a client may take to send its request body; more: 408.")

    def checked(self) -> ServeConfig:
        """self, checked against the options' ranges; errors name the command-line option."""
        options = {f.name: flag_of(f) for f in dataclasses.fields(self)}
        return checked(ServeConfig, dataclasses.asdict(self), names=options)

    def check_beam(self, beam_size: int) -> None:
        """Refuses a beam (and so an n-best) wider than max_beam: an MtError, which each caller words for its user."""
        if beam_size > self.max_beam:
            raise MtError(f"beam {beam_size}: over --max-beam {self.max_beam}")
