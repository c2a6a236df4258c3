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
from mt.model.transformer import MultiHeadAttention, PositionwiseFeedForward, Transformer


EXPORT_META_FILE = "mt.json"  # in an export's directory: marks it as mt's, with its format, config and facts


def export_meta(directory: Path) -> dict | None:
    """The mt.json of mt's export in `directory`, or None when the directory is not one: no mt.json, or one that is
    unreadable, not JSON, not an object, or names no format."""
    try:
        meta = json.loads((Path(directory) / EXPORT_META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none, unreadable, not UTF-8 or not JSON (both ValueErrors)
        return None
    return meta if isinstance(meta, dict) and "format" in meta else None


def check_export_files(directory: Path, meta: dict) -> None:
    """Refuse an export whose files are not the ones `mt export` wrote (damaged, cut short, changed or missing);
    an export made before mt.json listed its files is not checked."""
    files = meta.get("files")
    if files is None:
        return
    if not isinstance(files, dict) or any(Path(str(name)).name != name for name in files):  # names, not paths
        raise MtError(f"{Path(directory) / EXPORT_META_FILE}: damaged (its list of files); export it again")
    for name, checksum in files.items():
        path = Path(directory) / name
        if not path.is_file() or file_checksum(path) != checksum:
            raise MtError(f"{path}: {'damaged or changed' if path.is_file() else 'missing'} since `mt export` wrote "
                          f"it (its checksum differs from mt.json's); export it again")


def export_format(directory: Path) -> str | None:
    """The format of mt's export in `directory` ("ctranslate2", "huggingface"), or None when it is not one."""
    meta = export_meta(directory)
    return meta["format"] if meta else None


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
