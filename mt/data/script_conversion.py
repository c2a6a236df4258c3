"""Chinese script conversion compiled into a SentencePiece model's own normaliser, so that a model file converts
Traditional and Simplified text by itself, for every program that reads it.

mt converts a Chinese side with OpenCC before SentencePiece runs (data.chinese_script). A model file alone does not:
transformers' MarianTokenizer, or a CTranslate2 user's SentencePiece, would feed Traditional text unconverted. Both
OpenCC's conversion and SentencePiece's normaliser (NFKC) rewrite text by longest match, so one table of rules does
both in one pass: each key of OpenCC's dictionaries, and each of the model's own rules, maps to what the two passes
make of it alone. The exports write that table into the model file (its normalizer_spec.precompiled_charsmap).

SentencePiece refuses a rule that keeps its key unchanged. OpenCC has a few such phrases, there to keep a character
that alone would convert (s2t's 游泳, where 游 alone becomes 遊); in the model file those characters convert. mt's
own training and translation run OpenCC itself, exactly, unless a model file already converts.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import opencc
import sentencepiece as spm

from mt.core.errors import MtError

OPENCC = {"simplified": "t2s", "traditional": "s2t"}  # OpenCC's conversions into each script
MARK = "+opencc-"  # normalizer_spec.name of a model that converts, e.g. "nmt_nfkc+opencc-t2s"
OPENCC_FILES = Path(opencc.__file__).parent / "clib"  # the OpenCC wheel's dictionaries and its dictionary tool


def sentencepiece_model(proto: bytes):
    """A SentencePiece model file as its protobuf message (ModelProto), to read or edit. Imported when used: few
    commands need protobuf."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(proto)
    return model


def converts(proto: bytes, script: str) -> bool:
    """Whether the SentencePiece model `proto` converts text into `script` itself."""
    return script != "keep" and _named_converting(sentencepiece_model(proto), script)


def _named_converting(model, script: str) -> bool:
    return model.normalizer_spec.name.endswith(MARK + OPENCC[script])


def with_conversion(proto: bytes, script: str) -> bytes:
    """The SentencePiece model `proto` with conversion into `script` compiled into its normaliser (unchanged for
    "keep", or when it converts already). Its pieces, ids and whitespace handling stay as they were."""
    if script == "keep":
        return proto
    model = sentencepiece_model(proto)
    if _named_converting(model, script):
        return proto
    spec = model.normalizer_spec
    spec.precompiled_charsmap = _compiled(spec.precompiled_charsmap, OPENCC[script])
    spec.name += MARK + OPENCC[script]
    return model.SerializeToString()


@cache  # every model trained with one normalisation (nmt_nfkc, most) has the same rules
def _compiled(own_charsmap: bytes, conversion: str) -> bytes:
    """The precompiled charsmap of a model's own rules (`own_charsmap`) and OpenCC's `conversion`, composed."""
    from sentencepiece import sentencepiece_model_pb2

    spm.set_min_log_level(2)  # the rule compiler logs each table it builds
    own = spm.SentencePieceNormalizer(normalizer_spec=sentencepiece_model_pb2.NormalizerSpec(
        precompiled_charsmap=own_charsmap, add_dummy_prefix=False, escape_whitespaces=False,
        remove_extra_whitespaces=False))
    rules = dict(own.decompile())
    phrases = _opencc_keys(conversion)
    keys = sorted(set(rules) | phrases)
    for key, converted in zip(keys, _converted(keys, opencc.OpenCC(conversion))):
        if converted == key and key not in phrases:
            continue  # OpenCC leaves it: the model's own rule, if any, stands
        value = own.normalize(converted)
        if value == key:
            rules.pop(key, None)  # an identity, which SentencePiece refuses (and needs no rule)
        else:
            rules[key] = value
    compiled = sentencepiece_model_pb2.NormalizerSpec()
    compiled.ParseFromString(spm.SentencePieceNormalizer(norm_map=sorted(rules.items())).serialized_normalizer_spec())
    return compiled.precompiled_charsmap


def _converted(keys: list[str], converter: opencc.OpenCC) -> list[str]:
    """Each key as OpenCC converts it alone: one call on the keys joined by newlines (no dictionary key holds one,
    so none matches across them), and a call of its own for a key with a newline."""
    plain = iter(converter.convert("\n".join(key for key in keys if "\n" not in key)).split("\n"))
    return [converter.convert(key) if "\n" in key else next(plain) for key in keys]


def _opencc_keys(conversion: str) -> set[str]:
    """Every key of the dictionaries that OpenCC's `conversion` (t2s, s2t) reads, from its configuration. The wheel
    holds them compiled (.ocd2); its own tool, opencc_dict, writes them out as text."""
    tool, share = OPENCC_FILES / "bin" / "opencc_dict", OPENCC_FILES / "share" / "opencc"
    if not tool.exists():
        raise MtError(f"compiling Chinese script conversion into the model needs OpenCC's dictionary tool, which "
                      f"this OpenCC install lacks ({tool}); install OpenCC from PyPI (pip install opencc)")
    keys: set[str] = set()
    with tempfile.TemporaryDirectory() as scratch:
        text = Path(scratch) / "dictionary.txt"
        for name in _dictionary_files(json.loads((share / f"{conversion}.json").read_text(encoding="utf-8"))):
            subprocess.run([str(tool), "-i", str(share / name), "-o", str(text), "-f", "ocd2", "-t", "text"],
                           check=True, capture_output=True)
            keys |= {line.split("\t", 1)[0] for line in text.read_text(encoding="utf-8").splitlines() if line}
    return keys


def _dictionary_files(node) -> list[str]:
    """The dictionary files an OpenCC configuration names, at any depth of its groups and chains."""
    if isinstance(node, dict):
        return ([node["file"]] if "file" in node else []) + [f for value in node.values() for f in
                                                             _dictionary_files(value)]
    if isinstance(node, list):
        return [f for value in node for f in _dictionary_files(value)]
    return []
