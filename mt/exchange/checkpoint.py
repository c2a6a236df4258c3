"""Checkpoints: saving, weights-only loading, averaging, and the run directory's bookkeeping.

A checkpoint is self-contained: model weights; optimiser, schedule and loss-scaler state and the data position
(for an exact resume: dropout draws from a generator seeded by the seed, process and step, so no RNG state is
kept); the resolved config; and the SentencePiece model(s) with their vocabulary hash. It is written atomically
(mt/core/atomic.py).

    runs/NAME/checkpoints/step-00001000.pt   the last `train.keep_last` of these
    runs/NAME/checkpoints/last.pt            hard link to the newest
    runs/NAME/checkpoints/best.pt            hard link to the best by dev BLEU
    runs/NAME/checkpoints/average.pt         `mt average`: the mean of the last N step checkpoints
"""

from __future__ import annotations

import _compat_pickle
import importlib.util
import io
import json
import pickle
import re
import sys
from pathlib import Path

import torch

from mt.core.atomic import CHECKPOINT, atomic_write_bytes, file_checksum, link_atomic
from mt.config import Config, config_from_dict
from mt.core.errors import MtError, first_line
from mt.model.transformer import Transformer
from mt.data.tokenizer import PAD, Tokenizer

RUNS_ROOT = Path("runs")


def save_checkpoint(state: dict, path: Path) -> None:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue(), CHECKPOINT)


def load_checkpoint(path: Path) -> dict:
    """Load with weights_only=True: a checkpoint can hold tensors and plain data, never code. A file that names code
    to run is refused as such; any other file torch cannot read is damaged (truncated, corrupt or not a checkpoint)."""
    path = Path(path)
    if not path.is_file():
        raise MtError(f"{path}: no such checkpoint")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if code := _code_named(str(e)):
            raise MtError(f"{path}: refused, it could run code: it names {code}")
        raise MtError(f"{path}: not a readable checkpoint (corrupt: {first_line(e)[:200]})")
    except Exception as e:  # damaged bytes reach torch's readers anywhere: IndexError, UnicodeDecodeError, …
        raise MtError(f"{path}: not a readable checkpoint (truncated or corrupt: {first_line(e)[:200]})")
    if not _is_mt_state(state):
        raise MtError(f"{path}: not an mt checkpoint (no model weights, config and tokenizer in it)")
    if bent := _bent_record(state):
        raise MtError(f"{path}: not a readable checkpoint (corrupt: its {bent!r} record is not as mt writes it)")
    return state


# torch's weights-only unpickler names the global it would not import: "Unsupported global: GLOBAL os.system was
# not an allowed global …", "… GLOBAL subprocess.Popen whose module subprocess is blocked". A damaged file makes it
# stop elsewhere (an unknown opcode, a string too long) or name a global that does not exist
# ("torch._utils._rebuild_tenso2_v2"), or is no name at all ("torch._utils.^rebuild_tensor_v2", or a name running
# into the bytes after it when its line end is damaged).
NAMED_GLOBAL = re.compile(r"GLOBAL (.+?) (?:was not an allowed global|whose module)", re.S)


def _code_named(message: str) -> str | None:
    """The code a weights-only load refused to import, from torch's message; None when it refused something else,
    or named code that does not exist here or cannot be a name."""
    found = NAMED_GLOBAL.search(message)
    if not found or not all(part.isidentifier() for part in found.group(1).split(".")):
        return None
    module, _, name = found.group(1).rpartition(".")  # a builtin comes without its module: "GLOBAL exec"
    # pickle's protocol 2 (torch.save's) writes Python 2's names, "commands.Popen" for subprocess.Popen; the
    # unpickler maps them back, and so does this
    module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
    module = _compat_pickle.IMPORT_MAPPING.get(module, module) or "builtins"
    return f"{module}.{name}" if _exists(module, name) else None


def _exists(module: str, name: str) -> bool:
    """Whether `module.name` is code installed here, importing nothing new: an imported module is looked in; a
    module of an imported package is looked for; another counts when its top-level package is installed."""
    if module in sys.modules:
        return hasattr(sys.modules[module], name)
    parent = module.rpartition(".")[0]
    try:
        return importlib.util.find_spec(module if parent in sys.modules else module.split(".")[0]) is not None
    except (ImportError, ValueError):  # a parent that is no package, a name that is no module name
        return False


def _is_mt_state(state) -> bool:
    """The parts every command reads: named weight tensors, the config mapping and the tokenizer's models."""
    if not isinstance(state, dict) or not isinstance(state.get("config"), dict):
        return False
    model, tokenizer = state.get("model"), state.get("tokenizer")
    weights = isinstance(model, dict) and all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in model.items())
    return (weights and isinstance(tokenizer, dict) and isinstance(tokenizer.get("src"), bytes)
            and isinstance(tokenizer.get("tgt"), (bytes, type(None))) and isinstance(tokenizer.get("vocab_hash"), str))


# The shapes of the records that commands read besides the weights (mt info, the model card, fine-tuning): a type,
# [the type of each item], or {key: shape} for keys it must have ({str: shape}: any keys, each value of that shape).
RECORDS = {
    "step": int,
    "averaged": [str],
    "imported": {"from": str, "format": str},
    # and "layers": {"encoder" or "decoder": [int]} when it took fewer; "from": the same again, when it has one
    "init_from": {"checkpoint": str, "step": int, "kept": [str]},
    "cleaning": {"contamination": str, "corpora": {str: {"pairs": int, "kept": int, "contaminated": int}}},
    "dev": {"dev_bleu": float, "dev_chrf": float, "dev_loss": float, "dev_ppl": float},  # or {}: not validated
}


def started_how(init_from: dict) -> str:
    """What a run took of the checkpoint it started from besides its weights, and which of its layers when fewer:
    ", keeping its schedule, with its decoder layers 0, 2" (empty when nothing more)."""
    kept = [f", keeping its {', '.join(init_from['kept'])}"] if init_from["kept"] else []
    return "".join(kept + [f", with its {stack} layers {', '.join(map(str, chosen))}"
                           for stack, chosen in init_from.get("layers", {}).items()])


def _bent_record(state: dict) -> str | None:
    """The name of the first record whose shape is not as mt writes it (bits flipped in a key or a value); None
    when every record present is whole."""
    for name, shape in RECORDS.items():
        record = state.get(name)
        while record is not None and record != {}:
            if not _fits(record, shape):
                return name
            record = record.get("from") if name == "init_from" else None
    return None


def _fits(value, shape) -> bool:
    if isinstance(shape, list):
        return isinstance(value, list) and all(_fits(item, shape[0]) for item in value)
    if isinstance(shape, dict) and str in shape:
        return isinstance(value, dict) and all(isinstance(k, str) and _fits(v, shape[str]) for k, v in value.items())
    if isinstance(shape, dict):
        return isinstance(value, dict) and all(key in value and _fits(value[key], part) for key, part in shape.items())
    if shape is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, shape) and not isinstance(value, bool)


def tokenizer_state(tokenizer: Tokenizer) -> dict:
    return {"src": tokenizer.src_proto, "tgt": tokenizer.tgt_proto, "vocab_hash": tokenizer.vocab_hash}


def tokenizer_from_state(state: dict, path: Path, scripts: tuple[str, str]) -> Tokenizer:
    """The checkpoint's own tokenizer, refused when it is not the one its vocabulary hash names (damaged)."""
    saved = state["tokenizer"]
    try:
        tokenizer = Tokenizer(saved["src"], saved["tgt"], scripts)
    except MtError as e:
        raise MtError(f"{path}: its tokenizer is damaged ({e})")
    if tokenizer.vocab_hash != saved["vocab_hash"]:
        raise MtError(f"{path}: the tokenizer inside does not match its vocabulary hash")
    return tokenizer


def load_model(path: Path, device: torch.device) -> tuple[Transformer, Tokenizer, Config, dict]:
    """Rebuild the model and its tokenizer from a checkpoint, checking that they belong together."""
    state = load_checkpoint(path)
    config = config_from_dict(state["config"], source=str(path))
    tokenizer = tokenizer_from_state(state, path, config.data.scripts())
    model = Transformer(config.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, PAD)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:
        raise MtError(f"{path}: weights do not fit the model its config describes "
                      f"({str(e).strip().splitlines()[-1].strip()})")
    return model.to(device).eval(), tokenizer, config, state


def training_facts(state: dict) -> dict:
    """What a checkpoint tells of its training: its step, its dev scores with their sacreBLEU signatures (when it
    was validated), the checkpoints it averages (`mt average`) and what cleaning removed from its corpora."""
    return {"step": state.get("step", 0), "dev": state.get("dev") or {},
            **{key: state[key] for key in ("averaged", "cleaning") if key in state}}


def cleaning_line(cleaning: dict | None) -> str:
    """What cleaning removed from a checkpoint's training corpora, for `mt info` and the model card."""
    if not cleaning:
        return "cleaning: not recorded (trained before mt cleaned corpora, or an imported model)"
    corpora = cleaning["corpora"].values()
    pairs, kept = sum(c["pairs"] for c in corpora), sum(c["kept"] for c in corpora)
    held = sum(c["contaminated"] for c in corpora)
    guard = "removed" if cleaning["contamination"] == "remove" else "KEPT: test scores overstate the model"
    return (f"cleaning: {kept:,} of {pairs:,} training pairs kept; {held:,} held a dev or test sentence ({guard})")


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


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def last_checkpoint(run_dir: Path) -> Path:
    return checkpoint_dir(run_dir) / "last.pt"


def save_run_checkpoint(state: dict, run_dir: Path, step: int, best: bool, keep_last: int) -> Path:
    """step-N.pt, then last.pt (and best.pt when `best`) as hard links to it; then only the newest `keep_last` step
    checkpoints are kept (last.pt and best.pt are links and survive on their own). Returns step-N.pt."""
    directory = checkpoint_dir(run_dir)
    path = directory / f"step-{step:08d}.pt"
    save_checkpoint(state, path)
    link_atomic(path, last_checkpoint(run_dir))
    if best:
        link_atomic(path, directory / "best.pt")
    steps = sorted(directory.glob("step-*.pt"))
    for old in steps[:max(len(steps) - keep_last, 0)]:
        old.unlink()
    return path


def default_checkpoint() -> Path:
    """The best checkpoint of the most recently trained run under runs/."""
    candidates = list(RUNS_ROOT.glob("*/checkpoints/last.pt"))
    if not candidates:
        raise MtError(f"no trained run under {RUNS_ROOT}/: train one with `mt train` or pass --checkpoint")
    latest = max(candidates, key=lambda p: p.stat().st_mtime).parent
    best = latest / "best.pt"
    return best if best.exists() else latest / "last.pt"


def average_checkpoints(run_dir: Path, last: int) -> dict:
    """A checkpoint whose weights are the element-wise mean of the run's newest `last` step checkpoints
    (the paper averages the last 5 or 20). Loaded one at a time, so memory holds two models, not N."""
    paths = sorted(checkpoint_dir(run_dir).glob("step-*.pt"))[-last:]
    if len(paths) < last:
        raise MtError(f"{checkpoint_dir(run_dir)}: {len(paths)} step checkpoints, {last} asked for "
                      f"(train.keep_last decides how many a run keeps)")
    newest = load_checkpoint(paths[0])
    model_config, vocab_hash = newest["config"]["model"], newest["tokenizer"]["vocab_hash"]
    dtypes = {name: tensor.dtype for name, tensor in newest["model"].items()}
    total = {name: tensor.double() for name, tensor in newest["model"].items()}  # N identical weights average exactly
    for path in paths[1:]:
        newest = load_checkpoint(path)
        if newest["config"]["model"] != model_config or newest["tokenizer"]["vocab_hash"] != vocab_hash:
            raise MtError(f"{path}: its model or vocabulary differs from {paths[0].name}'s; cannot average them")
        for name, tensor in newest["model"].items():
            total[name] += tensor.double()
    weights = {name: (tensor / len(paths)).to(dtypes[name]) for name, tensor in total.items()}
    return {"model": weights, "config": newest["config"], "tokenizer": newest["tokenizer"], "step": newest["step"],
            "averaged": [path.name for path in paths], **({"cleaning": newest["cleaning"]} if "cleaning" in newest else {})}
