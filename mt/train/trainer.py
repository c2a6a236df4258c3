"""One update of the model, and the state a checkpoint keeps of it.

Teacher forcing: the decoder reads `tgt[:, :-1]` and is scored on `tgt[:, 1:]` with label-smoothed cross
entropy over non-PAD positions. Adam(0.9, 0.98, 1e-9) with the paper's inverse-square-root warm-up (section 5.3).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from mt.config import Config, Keep, Precision, config_from_dict, config_to_dict
from mt.core.device import has_native_bf16
from mt.core.distributed import World, sum_across
from mt.core.errors import MtError
from mt.data.batching import Batch
from mt.data.tokenizer import PAD, Tokenizer
from mt.exchange.checkpoint import Checkpoint, InitFrom, Position, tokenizer_state
from mt.model.transformer import Transformer
from mt.train.loss import SmoothedCrossEntropy

log = logging.getLogger(__name__)


def inverse_sqrt_lr(step: int, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """The paper's schedule (section 5.3): lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""
    step = max(step, 1)
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def linear_lr(step: int, d_model: int, warmup_steps: int, max_steps: int, scale: float = 1.0) -> float:
    """The paper's warm-up to the same peak, then a straight line down to 0 at max_steps: a short run ends on small
    steps that settle its weights, as averaging its last checkpoints would, instead of stopping at a high rate.
    A run of no more updates than the warm-up (a short check of a recipe) ends within it."""
    peak = inverse_sqrt_lr(warmup_steps, d_model, warmup_steps, scale)
    step = max(step, 1)
    if step <= warmup_steps:
        return peak * step / warmup_steps
    return peak * max(max_steps - step, 0) / max(max_steps - warmup_steps, 1)


def learning_rate(step: int, config: Config) -> float:
    """The rate of update `step` (1-based) under train.decay."""
    d, t = config.model.d_model, config.train
    if t.decay == "linear":
        return linear_lr(step, d, t.warmup_steps, t.max_steps, t.lr_scale)
    return inverse_sqrt_lr(step, d, t.warmup_steps, t.lr_scale)


MAX_SKIPPED_IN_A_ROW = 25  # fp16 loss scaling may skip a few steps while it finds its scale; more is divergence


def autocast_dtype(precision: Precision, device: torch.device) -> torch.dtype | None:
    """train.precision → the dtype that autocast computes in, or None for plain fp32."""
    if precision == "auto":
        return torch.bfloat16 if has_native_bf16(device) else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


class Trainer:
    """The model, its optimiser, schedule and loss scaler, and where training stands: one update at a time, and
    the state that a checkpoint keeps."""

    def __init__(self, config: Config, tokenizer: Tokenizer, device: torch.device, world: World = World()):
        self.config, self.tokenizer, self.device, self.world = config, tokenizer, device, world
        t = config.train
        self.model = Transformer(config.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, PAD).to(device)
        self.network = self.model  # what a training step calls: the model, wrapped for DDP and/or compiled
        if world.is_distributed:  # DDP copies rank 0's initial weights to every process
            self.network = DistributedDataParallel(self.model, device_ids=[device] if device.type == "cuda" else None)
        if t.compile:  # length buckets: one static graph per bucket shape; none: one graph for every shape
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, len(t.length_buckets))
            self.network = torch.compile(self.network, dynamic=not t.length_buckets, mode=t.compile_mode)
        # On a GPU, fused Adam updates all parameters in a few kernels instead of several per parameter list.
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1.0, betas=(t.adam_beta1, t.adam_beta2),
                                          eps=t.adam_eps, fused=device.type == "cuda")
        # LambdaLR counts from 0; update k (1-based) takes the rate of step k.
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: learning_rate(s + 1, config))
        # The same loss either way; torch's fused kernels are the faster on a GPU, blocks in the cache on a CPU.
        self.criterion = (SmoothedCrossEntropy(PAD, t.label_smoothing) if device.type == "cpu" else
                          nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=t.label_smoothing, reduction="sum"))
        self.dtype = autocast_dtype(t.precision, device)
        self.dtype_name = str(self.dtype or torch.float32).removeprefix("torch.")  # for reports: bfloat16, float32
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.dtype == torch.float16)
        self.position = Position()
        self.init_from: InitFrom | None = None  # where the weights came from, when not from a random start
        self.cleaning: dict = {}  # what cleaning removed from the training corpora (mt/clean), for `mt info`
        self.skipped_in_a_row = 0

    def autocast(self):
        return torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None)

    # ------------------------------------------------------------ one update

    def train_step(self, batches: list[Batch]) -> tuple[float, float] | None:
        """One update from this process's `accum_steps` batches (on the CPU; counted there, then moved to the
        device, so that counting waits for no GPU work): forward, loss, backward, clip, Adam, schedule.

        The loss is summed over the whole global batch (all accumulated batches, all processes) and divided by
        its target tokens, so k accumulated batches give the same update as one k-times-larger batch.
        Returns (loss per target token, global target tokens), or None when a non-finite gradient skipped it.
        """
        self.model.train()
        # Dropout masks depend only on (seed, process, update), so a resumed run draws the same ones.
        torch.manual_seed(int(np.random.SeedSequence(
            [self.config.train.seed, self.world.rank, self.position.step]).generate_state(1)[0]))
        local_tokens = sum(batch.num_tokens for batch in batches)
        batches = [batch.to(self.device) for batch in batches]
        global_tokens = sum_across(self.world, local_tokens, self.device)
        scale = self.world.size / global_tokens  # DDP averages gradients over processes; this makes it a sum
        total = torch.zeros((), device=self.device)
        self.optimizer.zero_grad(set_to_none=True)
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            sync = contextlib.nullcontext() if last or not self.world.is_distributed else self.network.no_sync()
            with sync:
                with self.autocast():
                    logits = self.network(batch.src, batch.tgt_input)                    # [B,T,V]
                    loss = self.criterion(logits.flatten(0, 1), batch.tgt_label.flatten())
                self.scaler.scale(loss * scale).backward()
            total += loss.detach()
        self.scaler.unscale_(self.optimizer)
        parameters = [p for p in self.model.parameters() if p.grad is not None]
        norm = nn.utils.get_total_norm([p.grad for p in parameters])  # the same on every process after DDP
        if not torch.isfinite(norm):
            self.scaler.update()  # fp16: a smaller loss scale next time
            self._skip()
            return None
        self.skipped_in_a_row = 0
        if self.config.train.clip_grad_norm > 0:
            nn.utils.clip_grads_with_norm_(parameters, self.config.train.clip_grad_norm, norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        return total.item() / local_tokens, global_tokens

    def _skip(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.skipped_in_a_row += 1
        log.warning(f"step {self.position.step + 1}: skipped, the gradient is not finite "
                    f"({self.skipped_in_a_row} in a row)")
        if self.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
            raise MtError(f"training diverged: {self.skipped_in_a_row} updates in a row had a non-finite gradient "
                          f"at step {self.position.step}; lower train.lr_scale, set train.clip_grad_norm, "
                          f"or use train.precision bf16 or fp32", exit_code=1)

    # ------------------------------------------------------------ run state

    def checkpoint(self, dev: dict | None = None) -> Checkpoint:
        """What a checkpoint keeps of this update, with its dev scores when it was validated."""
        return Checkpoint(model=self.model.state_dict(), config=config_to_dict(self.config),
                          tokenizer=tokenizer_state(self.tokenizer), position=dataclasses.replace(self.position),
                          world_size=self.world.size, optimizer=self.optimizer.state_dict(),
                          scheduler=self.scheduler.state_dict(), scaler=self.scaler.state_dict(), dev=dev,
                          init_from=self.init_from, cleaning=self.cleaning or None)

    def restore(self, checkpoint: Checkpoint) -> None:
        try:
            self.model.load_state_dict(checkpoint.model)
        except RuntimeError as e:
            raise MtError(f"--resume: the checkpoint's weights do not fit this config's model "
                          f"({str(e).strip().splitlines()[-1].strip()})")
        if checkpoint.world_size != self.world.size:
            raise MtError(f"--resume: the run was trained by {checkpoint.world_size} processes; resume it with "
                          f"as many (this is {self.world.size}), or the data order would change")
        self.optimizer.load_state_dict(checkpoint.optimizer)
        self.scheduler.load_state_dict(checkpoint.scheduler)
        if checkpoint.scaler:  # empty: saved by a run without loss scaling, whose scale starts afresh here
            self.scaler.load_state_dict(checkpoint.scaler)
        self.position = dataclasses.replace(checkpoint.position)
        self.init_from = checkpoint.init_from

    def start_from(self, checkpoint: Checkpoint, path: Path, keep: frozenset[Keep]) -> None:
        """A new run from another run's weights (fine-tuning). Its optimizer's moments, its learning-rate
        schedule and its place in the data are fresh unless `keep` names them. A model with fewer layers than the
        checkpoint's takes a spread of them (`spread_layers`)."""
        theirs, mine = config_from_dict(checkpoint.config, source=str(path)).model, self.config.model
        weights, shrunk = checkpoint.model, {}
        for stack in ("encoder", "decoder"):
            have, want = getattr(theirs, f"num_{stack}_layers"), getattr(mine, f"num_{stack}_layers")
            if want < have:
                shrunk[stack] = spread_layers(have, want)
                weights = take_layers(weights, stack, shrunk[stack])
        self.model.load_state_dict(weights)
        missing = [part for part, state in (("optimizer", checkpoint.optimizer), ("schedule", checkpoint.scheduler))
                   if part in keep and state is None]
        if missing:
            raise MtError(f"--init-from {path}: has no {missing[0]} state to keep (an average of checkpoints?)")
        if "optimizer" in keep:  # the moments; the learning rate and betas stay this config's
            fresh = self.optimizer.state_dict()
            self.optimizer.load_state_dict({**fresh, "state": checkpoint.optimizer["state"]})
        if "schedule" in keep:  # no second warm-up: the rate goes on from the checkpoint's update count
            self.scheduler.load_state_dict(checkpoint.scheduler)
            for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
                group["lr"] = lr
        if "position" in keep:  # the same data order, from where it stood (the update count goes on too)
            at = checkpoint.position
            self.position = Position(step=at.step, epoch=at.epoch, batch_index=at.batch_index)
        self.init_from = InitFrom(checkpoint=str(Path(path).resolve()), step=checkpoint.position.step,
                                  kept=sorted(keep), **({"layers": shrunk} if shrunk else {}),
                                  **({"from": checkpoint.init_from} if checkpoint.init_from else {}))


def spread_layers(theirs: int, mine: int) -> list[int]:
    """Which of a checkpoint's `theirs` layers a stack of fewer, `mine`, starts from: evenly spread with the first
    and the last (Shleifer & Rush 2020, "shrink and fine-tune"); one alone is the last, whose output the next box
    (the decoder, the generator) was trained to read."""
    if mine == 1:
        return [theirs - 1]
    return [round(i * (theirs - 1) / (mine - 1)) for i in range(mine)]


def take_layers(weights: dict[str, torch.Tensor], stack: str, chosen: list[int]) -> dict[str, torch.Tensor]:
    """`weights` with `stack`'s ("encoder" or "decoder") layers chosen[0], chosen[1], … as its layers 0, 1, … and
    its other layers left out."""
    prefix, taken = f"{stack}.layers.", {}
    for name, tensor in weights.items():
        if not name.startswith(prefix):
            taken[name] = tensor
            continue
        index, rest = name[len(prefix):].split(".", 1)
        if int(index) in chosen:
            taken[f"{prefix}{chosen.index(int(index))}.{rest}"] = tensor
    return taken


# Model keys a fine-tuning run may change: they shape no weight. The layer counts may be smaller than the
# checkpoint's: a student then starts from a spread of its teacher's layers (`spread_layers`).
TUNABLE_MODEL_KEYS = {"dropout", "init_std"}
SHRINKABLE_MODEL_KEYS = {"num_encoder_layers", "num_decoder_layers"}


def check_fits(start: Checkpoint, path: Path, config: Config, tokenizer: Tokenizer, run_dir: Path,
               keep: frozenset[Keep]) -> None:
    """A run started from a checkpoint's weights keeps its model's shape (or fewer of its layers), its tokenizer and
    its script conversion; refuse a config that differs, naming the key."""
    theirs = config_from_dict(start.config, source=str(path))
    for field in dataclasses.fields(config.model):
        mine, their = getattr(config.model, field.name), getattr(theirs.model, field.name)
        if field.name in SHRINKABLE_MODEL_KEYS and mine > their:
            raise MtError(f"--init-from {path}: config key model.{field.name} is {mine!r} here but {their!r} in the "
                          f"checkpoint; a run started from its weights can take fewer of its layers, not more")
        if field.name in SHRINKABLE_MODEL_KEYS and mine < their and "optimizer" in keep:
            raise MtError(f"--init-from {path} --keep optimizer: its moments are for all its {their} layers, and "
                          f"config key model.{field.name} takes {mine}")
        if field.name not in TUNABLE_MODEL_KEYS | SHRINKABLE_MODEL_KEYS and mine != their:
            raise MtError(f"--init-from {path}: config key model.{field.name} is {mine!r} here but {their!r} in the "
                          f"checkpoint; a run started from its weights keeps its model's shape")
    sizes = {tokenizer.src_vocab_size, tokenizer.tgt_vocab_size}
    if sizes != {config.tokenizer.vocab_size} or tokenizer.joint != config.tokenizer.joint:
        raise MtError(f"--init-from {path}: config keys tokenizer.vocab_size/joint are "
                      f"{config.tokenizer.vocab_size}/{config.tokenizer.joint} here but the checkpoint's tokenizer "
                      f"has {'/'.join(map(str, sorted(sizes)))} pieces/{tokenizer.joint}; the run uses its tokenizer")
    if config.data.scripts() != theirs.data.scripts():
        raise MtError(f"--init-from {path}: config key data.chinese_script is {config.data.chinese_script!r} here "
                      f"but {theirs.data.chinese_script!r} in the checkpoint; its tokenizer learned that script")
    own = Tokenizer.load(run_dir, config.data.scripts())
    if own is not None and own.vocab_hash != tokenizer.vocab_hash:
        raise MtError(f"--init-from {path}: {run_dir} already has a tokenizer of its own, not the checkpoint's; "
                      f"choose a new --run-dir")
