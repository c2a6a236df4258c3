"""What the CTranslate2 and Hugging Face exports share: the optional package each needs, the directory's mt.json,
each vocabulary id's piece, and our layers' sublayers, which each export maps onto its format's names."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from torch import nn

from mt.config import Config, config_to_dict
from mt.core.atomic import Kind, file_checksum
from mt.core.errors import MtError
from mt.exchange.checkpoint import EXPORT_META_FILE, export_format
from mt.model.transformer import MultiHeadAttention, PositionwiseFeedForward, Transformer


def optional_package(name: str, extra: str) -> ModuleType:
    """The package `name`, which mt's optional dependencies `extra` install; without it, a one-line error that
    says how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise MtError(f'the {name} package is not installed: pip install -e ".[{extra}]"', exit_code=1)


def export_kind(format: str, name: str) -> Kind:
    """A directory holding mt's export in `format`: one that an export may replace whole."""
    return Kind(name, lambda directory: export_format(directory) == format, directory=True)


def write_meta(directory: Path, format: str, checkpoint: Path, config: Config, facts: dict, vocab_hash: str) -> None:
    """mt.json, written last: marks `directory` as mt's export in `format`, and keeps the checkpoint it came from,
    the model's config (languages, position table, decode settings), its training facts (checkpoint.training_facts),
    its tokenizer's vocab_hash (which a shortlist names) and the checksum of every other file, by which a damaged
    file is found before a library reads it."""
    meta = {"format": format, "checkpoint": str(checkpoint), "config": config_to_dict(config), "facts": facts,
            "vocab_hash": vocab_hash,
            "files": {path.name: file_checksum(path) for path in sorted(directory.iterdir()) if path.is_file()}}
    (directory / EXPORT_META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")


def pieces(processor) -> list[str]:
    """Each id's piece in a SentencePiece model, in id order: the vocabulary both formats list."""
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


@dataclass
class Sublayer:
    """A box of one layer (an attention or the feed-forward) with the LayerNorm of its Add & Norm."""

    stack: str  # "encoder" or "decoder"
    layer: int  # its number in the stack, from 0
    kind: str   # "self_attention", "cross_attention" or "feed_forward"
    box: MultiHeadAttention | PositionwiseFeedForward
    norm: nn.LayerNorm


def sublayers(model: Transformer) -> Iterator[Sublayer]:
    """Every sublayer of the model, layer by layer: an encoder layer's self-attention and feed-forward, then a
    decoder layer's self-attention, cross-attention and feed-forward."""
    for i, layer in enumerate(model.encoder.layers):
        yield Sublayer("encoder", i, "self_attention", layer.self_attn, layer.add_norm_attn.norm)
        yield Sublayer("encoder", i, "feed_forward", layer.feed_forward, layer.add_norm_ff.norm)
    for i, layer in enumerate(model.decoder.layers):
        yield Sublayer("decoder", i, "self_attention", layer.self_attn, layer.add_norm_self.norm)
        yield Sublayer("decoder", i, "cross_attention", layer.cross_attn, layer.add_norm_cross.norm)
        yield Sublayer("decoder", i, "feed_forward", layer.feed_forward, layer.add_norm_ff.norm)
