"""Checkpoints: the typed record a checkpoint holds, its versions, saving, weights-only loading and averaging.

A checkpoint is self-contained: model weights; optimiser, schedule and loss-scaler state and the data position
(for an exact resume: dropout draws from a generator seeded by the seed, process and step, so no RNG state is
kept); the resolved config; and the SentencePiece model(s) with their vocabulary hash. It is written atomically
(mt/core/atomic.py) as plain data with its format's version; `upgrade` reads the formats mt wrote before. Where a
run keeps its checkpoints: mt/core/run_dir.py.
"""

from __future__ import annotations

import _compat_pickle
import dataclasses
import importlib.util
import io
import pickle
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

import torch
import yaml
from pydantic import ConfigDict, Strict, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import NotRequired, TypedDict  # pydantic reads typing's TypedDict from Python 3.12 on

from mt.core.atomic import CHECKPOINT, atomic_write_bytes, link_atomic
from mt.config import Config, config_from_dict
from mt.core.errors import MtError, first_line
from mt.core.run_dir import RunDir, latest_run
from mt.core.schema import Float, Int
from mt.model.transformer import Transformer
from mt.data.tokenizer import PAD, Tokenizer


def save_checkpoint(checkpoint: Checkpoint, path: Path) -> None:
    buffer = io.BytesIO()
    torch.save(checkpoint.state(), buffer)
    atomic_write_bytes(path, buffer.getvalue(), CHECKPOINT)


def load_checkpoint(path: Path) -> Checkpoint:
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
    if not isinstance(state, dict) or not {"model", "config", "tokenizer"} <= state.keys():
        raise MtError(f"{path}: not an mt checkpoint (no model weights, config and tokenizer in it)")
    return Checkpoint.from_state(state, path)


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


# --------------------------------------------------------------------------------------------- the record

FORMAT_VERSION = 2  # the format `Checkpoint.state` writes; `upgrade` reads the ones before it

Text, Bytes = Annotated[str, Strict()], Annotated[bytes, Strict()]


@dataclass
class Position:
    """Where training stands: updates done, and the next one in the epoch's fixed batch order."""

    step: Int = 0
    epoch: Int = 0
    batch_index: Int = 0  # the next update of the epoch (each uses accum_steps × processes batches)
    best_bleu: Float = -1.0
    evals_without_gain: Int = 0  # validations since dev BLEU last improved (for early stopping)


class TokenizerState(TypedDict):
    src: Bytes  # the SentencePiece model of the source side, or of both when joint
    tgt: Optional[Bytes]  # None: joint
    vocab_hash: Text


class DevScores(TypedDict):
    """Greedy search's scores on the dev set at the checkpoint's step, with sacreBLEU's signatures."""
    dev_loss: Float
    dev_ppl: Float
    dev_bleu: Float
    dev_chrf: Float
    bleu_signature: NotRequired[Text]
    chrf_signature: NotRequired[Text]


Imported = TypedDict("Imported", {"from": Text, "format": Text})  # `mt import --FORMAT` of a model from there
# The checkpoint a run started from (--init-from), what it kept of its training state, the layers a smaller model
# took of it, and where that checkpoint itself started from.
InitFrom = TypedDict("InitFrom", {"checkpoint": Text, "step": Int, "kept": list[Text],
                                  "layers": NotRequired[dict[Text, list[Int]]], "from": NotRequired["InitFrom"]})


class CorpusCleaning(TypedDict):
    pairs: Int
    kept: Int
    removed: NotRequired[dict[Text, Int]]  # pairs removed by each step (the guard, each filter)
    repaired: NotRequired[dict[Text, Int]]  # kept pairs changed by each repair (markup, encoding)
    contaminated: Int  # pairs holding a dev or test sentence


class Cleaning(TypedDict):
    contamination: Text  # data.contamination: remove or keep
    corpora: dict[Text, CorpusCleaning]


@pydantic_dataclass(config=ConfigDict(arbitrary_types_allowed=True, extra="forbid"))
class Checkpoint:
    """Everything a checkpoint holds, each part of a declared type; saved as plain data with FORMAT_VERSION."""

    model: dict[Text, torch.Tensor]  # the weights, by parameter name
    config: dict[Text, Any]  # the resolved config (config_to_dict), read by config_from_dict
    tokenizer: TokenizerState
    position: Position = field(default_factory=Position)
    world_size: Int = 1  # processes that trained it: a resumed run needs as many for the same data order
    optimizer: Optional[dict] = None  # None: no training state (an average, an import)
    scheduler: Optional[dict] = None
    scaler: dict = field(default_factory=dict)  # fp16's loss scale; empty without one
    dev: Optional[DevScores] = None  # None: not validated at this step
    averaged: list[Text] = field(default_factory=list)  # `mt average`: the step checkpoints it is the mean of
    imported: Optional[Imported] = None
    init_from: Optional[InitFrom] = None
    cleaning: Optional[Cleaning] = None  # what cleaning removed from its training corpora

    def state(self) -> dict:
        """The plain data torch.save writes and a weights-only load reads back."""
        return {"format_version": FORMAT_VERSION, "position": dataclasses.asdict(self.position),
                **{f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "position"}}

    @classmethod
    def from_state(cls, state: dict, path: Path) -> Checkpoint:
        state = upgrade(state, path)
        try:
            return cls(**{name: value for name, value in state.items() if name != "format_version"})
        except ValidationError as e:  # bits flipped in a record's name or value; a record missing
            bent = e.errors()[0]["loc"][0]
            raise MtError(f"{path}: not a readable checkpoint (corrupt: its {bent!r} record is not as mt writes it)")


FIELDS = {f.name for f in dataclasses.fields(Checkpoint)}
POSITION_FIELDS = [f.name for f in dataclasses.fields(Position)]


def upgrade(state: dict, path: Path) -> dict:
    """A saved checkpoint's data in the current format: the one place that knows the formats mt wrote before.

    Format 1 has no format_version; the position's fields stand at the top and the first checkpoints miss some
    of them, with no scaler or world_size either (their defaults stand); `dev` is {} when not validated.
    """
    version = state.get("format_version", 1)
    if version == 1:
        position = {name: state[name] for name in POSITION_FIELDS if name in state}
        state = {name: value for name, value in state.items() if name in FIELDS}
        state.update(format_version=2, position=position, dev=state.get("dev") or None)
    elif version != FORMAT_VERSION:
        raise MtError(f"{path}: a checkpoint of format {version!r}, which this mt cannot read (it reads formats 1 to "
                      f"{FORMAT_VERSION}); upgrade mt to use it")
    return state


def tokenizer_state(tokenizer: Tokenizer) -> TokenizerState:
    return {"src": tokenizer.src_proto, "tgt": tokenizer.tgt_proto, "vocab_hash": tokenizer.vocab_hash}


def tokenizer_from_state(checkpoint: Checkpoint, path: Path, scripts: tuple[str, str]) -> Tokenizer:
    """The checkpoint's own tokenizer, refused when it is not the one its vocabulary hash names (damaged)."""
    saved = checkpoint.tokenizer
    try:
        tokenizer = Tokenizer(saved["src"], saved["tgt"], scripts)
    except MtError as e:
        raise MtError(f"{path}: its tokenizer is damaged ({e})")
    if tokenizer.vocab_hash != saved["vocab_hash"]:
        raise MtError(f"{path}: the tokenizer inside does not match its vocabulary hash")
    return tokenizer


def load_model(path: Path, device: torch.device) -> tuple[Transformer, Tokenizer, Config, Checkpoint]:
    """Rebuild the model and its tokenizer from a checkpoint, checking that they belong together."""
    checkpoint = load_checkpoint(path)
    config = config_from_dict(checkpoint.config, source=str(path))
    tokenizer = tokenizer_from_state(checkpoint, path, config.data.scripts())
    model = Transformer(config.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, PAD)
    try:
        model.load_state_dict(checkpoint.model)
    except RuntimeError as e:
        raise MtError(f"{path}: weights do not fit the model its config describes "
                      f"({str(e).strip().splitlines()[-1].strip()})")
    return model.to(device).eval(), tokenizer, config, checkpoint


def training_facts(checkpoint: Checkpoint) -> dict:
    """What a checkpoint tells of its training, as an export's mt.json keeps it: its step, its dev scores with
    their sacreBLEU signatures ({} when not validated), the checkpoints it averages and what cleaning removed."""
    return {"step": checkpoint.position.step, "dev": checkpoint.dev or {},
            **({"averaged": checkpoint.averaged} if checkpoint.averaged else {}),
            **({"cleaning": checkpoint.cleaning} if checkpoint.cleaning else {})}


def started_how(init_from: InitFrom) -> str:
    """What a run took of the checkpoint it started from besides its weights, and which of its layers when fewer:
    ", keeping its schedule, with its decoder layers 0, 2" (empty when nothing more)."""
    kept = [f", keeping its {', '.join(init_from['kept'])}"] if init_from["kept"] else []
    return "".join(kept + [f", with its {stack} layers {', '.join(map(str, chosen))}"
                           for stack, chosen in init_from.get("layers", {}).items()])


def cleaning_line(cleaning: Cleaning | None) -> str:
    """What cleaning removed from a checkpoint's training corpora, for `mt info` and the model card."""
    if not cleaning:
        return "cleaning: not recorded (trained before mt cleaned corpora, or an imported model)"
    corpora = cleaning["corpora"].values()
    pairs, kept = sum(c["pairs"] for c in corpora), sum(c["kept"] for c in corpora)
    held = sum(c["contaminated"] for c in corpora)
    repaired = sum(n for c in corpora for n in c.get("repaired", {}).values())
    guard = "removed" if cleaning["contamination"] == "remove" else "KEPT: test scores overstate the model"
    return (f"cleaning: {kept:,} of {pairs:,} training pairs kept" + (f" ({repaired:,} repaired)" if repaired else "")
            + f"; {held:,} held a dev or test sentence ({guard})")


def describe(path: Path) -> str:
    """`mt info`: a checkpoint's step, origin, parameters, vocabulary, cleaning, dev scores with their sacreBLEU
    signatures, and config, as lines."""
    model, tokenizer, _, checkpoint = load_model(path, torch.device("cpu"))
    averaged = f" (average of {', '.join(checkpoint.averaged)})" if checkpoint.averaged else ""
    lines = [f"checkpoint: {path}{averaged}", f"step: {checkpoint.position.step:,}"]
    if imported := checkpoint.imported:
        lines.append(f"imported from: {imported['from']} (mt import --{imported['format']})")
    started = checkpoint.init_from
    while started:  # fine-tuned from a checkpoint, itself perhaps fine-tuned from another
        lines.append(f"started from: {started['checkpoint']} (step {started['step']:,}){started_how(started)}")
        started = started.get("from")
    vocabulary = (f"{tokenizer.src_vocab_size:,} pieces, joint" if tokenizer.joint
                  else f"{tokenizer.src_vocab_size:,} source and {tokenizer.tgt_vocab_size:,} target pieces")
    lines += [f"parameters: {sum(p.numel() for p in model.parameters()):,}",
              f"vocabulary: {vocabulary} (hash {tokenizer.vocab_hash})", cleaning_line(checkpoint.cleaning)]
    if dev := checkpoint.dev:
        unrecorded = "not recorded by this checkpoint"
        lines += [f"dev: BLEU {dev['dev_bleu']:.2f}, chrF {dev['dev_chrf']:.2f}, loss {dev['dev_loss']:.3f}, "
                  f"perplexity {dev['dev_ppl']:.1f} (greedy search)",
                  f"  BLEU signature: {dev.get('bleu_signature', unrecorded)}",
                  f"  chrF signature: {dev.get('chrf_signature', unrecorded)}"]
    else:
        lines.append("dev: not validated at this checkpoint")
    config = yaml.safe_dump(checkpoint.config, sort_keys=False, allow_unicode=True)
    return "\n".join(lines) + "\nconfig:\n" + textwrap.indent(config, "  ")


# ------------------------------------------------------------------------------------------ a run's checkpoints

def save_run_checkpoint(checkpoint: Checkpoint, run_dir: Path, best: bool, keep_last: int) -> Path:
    """step-N.pt, then last.pt (and best.pt when `best`) as hard links to it; then only the newest `keep_last` step
    checkpoints are kept (last.pt and best.pt are links and survive on their own). Returns step-N.pt."""
    run = RunDir(run_dir)
    path = run.step(checkpoint.position.step)
    save_checkpoint(checkpoint, path)
    link_atomic(path, run.last)
    if best:
        link_atomic(path, run.best)
    steps = run.steps()
    for old in steps[:max(len(steps) - keep_last, 0)]:
        old.unlink()
    return path


def default_checkpoint() -> Path:
    """The best checkpoint of the most recently trained run under runs/."""
    run = latest_run()
    return run.best if run.best.exists() else run.last


def average_checkpoints(run_dir: Path, last: int) -> Checkpoint:
    """A checkpoint whose weights are the element-wise mean of the run's newest `last` step checkpoints
    (the paper averages the last 5 or 20). Loaded one at a time, so memory holds two models, not N."""
    run = RunDir(run_dir)
    paths = run.steps()[-last:]
    if len(paths) < last:
        raise MtError(f"{run.checkpoints}: {len(paths)} step checkpoints, {last} asked for "
                      f"(train.keep_last decides how many a run keeps)")
    newest = load_checkpoint(paths[0])
    model_config, vocab_hash = newest.config["model"], newest.tokenizer["vocab_hash"]
    dtypes = {name: tensor.dtype for name, tensor in newest.model.items()}
    total = {name: tensor.double() for name, tensor in newest.model.items()}  # N identical weights average exactly
    for path in paths[1:]:
        newest = load_checkpoint(path)
        if newest.config["model"] != model_config or newest.tokenizer["vocab_hash"] != vocab_hash:
            raise MtError(f"{path}: its model or vocabulary differs from {paths[0].name}'s; cannot average them")
        for name, tensor in newest.model.items():
            total[name] += tensor.double()
    weights = {name: (tensor / len(paths)).to(dtypes[name]) for name, tensor in total.items()}
    return Checkpoint(model=weights, config=newest.config, tokenizer=newest.tokenizer,
                      position=Position(step=newest.position.step), averaged=[path.name for path in paths],
                      cleaning=newest.cleaning)


def estimator_path(model: Path) -> Path:
    """Where a model's confidence estimator is (mt/decode/confidence.py): beside a checkpoint file (best.pt →
    best.confidence.json), inside an export's directory (confidence.json)."""
    model = Path(model)
    return model / "confidence.json" if model.is_dir() else model.with_suffix(".confidence.json")
