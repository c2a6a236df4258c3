"""The training loop: build the model, then update → log → validate → checkpoint until max_steps.

Teacher forcing: the decoder reads `tgt[:, :-1]` and is scored on `tgt[:, 1:]` with label-smoothed cross
entropy over non-PAD positions. Adam(0.9, 0.98, 1e-9) with the paper's inverse-square-root warm-up.
A run lives in one directory: config.yaml, the SentencePiece model, the token cache, log.jsonl, checkpoints/.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from mt.atomic import link_atomic, remove_partial_writes
from mt.batching import Batch, TrainBatches, make_batch, token_batches
from mt.checkpoint import checkpoint_dir, load_checkpoint, prune_step_checkpoints, save_checkpoint, tokenizer_state
from mt.config import Config, Keep, Precision, TrainConfig, config_from_dict, config_to_dict, save_config
from mt.data import lengths
from mt.device import has_native_bf16, resolve_device
from mt.distributed import World, close_world, gather_objects, init_world, main_first, max_across, sum_across
from mt.errors import MtError
from mt.loss import SmoothedCrossEntropy
from mt.scoring import score
from mt.model import Transformer
from mt.prepare import PreparedData, prepare_data
from mt.run_lock import lock_run_dir
from mt.search import Searcher
from mt.stopping import StopSignals, Stopped
from mt.tokenizer import PAD, Tokenizer
from mt.training_log import TrainingLog

log = logging.getLogger(__name__)


def inverse_sqrt_lr(step: int, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """The paper's schedule (section 5.3): lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""
    step = max(step, 1)
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


@dataclass
class Position:
    """Where training stands: updates done, and the next one in the epoch's fixed batch order."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0  # the next update of the epoch (each uses accum_steps × processes batches)
    best_bleu: float = -1.0
    evals_without_gain: int = 0  # validations since dev BLEU last improved (for early stopping)


MAX_SKIPPED_IN_A_ROW = 25  # fp16 loss scaling may skip a few steps while it finds its scale; more is divergence


def autocast_dtype(precision: Precision, device: torch.device) -> torch.dtype | None:
    """train.precision → the dtype that autocast computes in, or None for plain fp32."""
    if precision == "auto":
        return torch.bfloat16 if has_native_bf16(device) else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


class StepBatches(torch.utils.data.Dataset):
    """Item i: this process's batches for update i, built in DataLoader workers when train.num_workers > 0.

    Workers are forked, so they share the memory-mapped Arrow ids instead of copying the corpus.
    """

    def __init__(self, train: TrainBatches, steps: list[list[np.ndarray]]):
        self.train, self.steps = train, steps

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i: int) -> list[Batch]:
        return [self.train.batch(indices) for indices in self.steps[i]]


class Trainer:
    def __init__(self, config: Config, data: PreparedData, device: torch.device, world: World = World()):
        self.config, self.data, self.device, self.world = config, data, device, world
        t = config.train
        tok = data.tokenizer
        self.model = Transformer(config.model, tok.src_vocab_size, tok.tgt_vocab_size, PAD).to(device)
        self.network = self.model  # what a training step calls: the model, wrapped for DDP and/or compiled
        if world.is_distributed:  # DDP copies rank 0's initial weights to every process
            self.network = DistributedDataParallel(self.model, device_ids=[device] if device.type == "cuda" else None)
        if t.compile:  # length buckets: one static graph per bucket shape; none: one graph for every shape
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, len(t.length_buckets))
            self.network = torch.compile(self.network, dynamic=not t.length_buckets, mode=t.compile_mode)
        # On a GPU, fused Adam updates all parameters in a few kernels instead of several per parameter list.
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1.0, betas=(t.adam_beta1, t.adam_beta2),
                                          eps=t.adam_eps, fused=device.type == "cuda")
        # LambdaLR counts from 0; update k (1-based) uses the paper's rate at step k.
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: inverse_sqrt_lr(
            s + 1, config.model.d_model, t.warmup_steps, t.lr_scale))
        # The same loss either way; torch's fused kernels are the faster on a GPU, blocks in the cache on a CPU.
        self.criterion = (SmoothedCrossEntropy(PAD, t.label_smoothing) if device.type == "cpu" else
                          nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=t.label_smoothing, reduction="sum"))
        self.dtype = autocast_dtype(t.precision, device)
        self.dtype_name = str(self.dtype or torch.float32).removeprefix("torch.")  # for reports: bfloat16, float32
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.dtype == torch.float16)
        self.position = Position()
        self.init_from: dict | None = None  # where the weights came from, when not from a random start
        self.skipped_in_a_row = 0
        self.run_dir = Path(t.run_dir)
        self.searcher = Searcher(self.model, device)  # validation's greedy translations

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

    def step_batches(self, train: TrainBatches, epoch: int) -> list[list[np.ndarray]]:
        """The epoch's batches grouped by update: for each, this process's `accum_steps` batches.

        Update s of the epoch uses the global batches s·k·W … s·k·W + k·W − 1 (k accumulated, W processes);
        process r takes every W-th of them from r. An epoch's last few batches that fill no update are dropped.
        """
        k, size, rank = self.config.train.accum_steps, self.world.size, self.world.rank
        batches = train.epoch(epoch)
        per_update = k * size
        if len(batches) < per_update:
            raise MtError(f"train.accum_steps × processes = {per_update} batches per update, but an epoch has "
                          f"only {len(batches)}: lower train.accum_steps or train.max_tokens")
        return [[batches[s * per_update + j * size + rank] for j in range(k)]
                for s in range(len(batches) // per_update)]

    def loader(self, train: TrainBatches, steps: list[list[np.ndarray]]) -> torch.utils.data.DataLoader:
        workers = self.config.train.num_workers
        return torch.utils.data.DataLoader(StepBatches(train, steps), batch_size=None, num_workers=workers,
                                           prefetch_factor=4 if workers else None,
                                           pin_memory=self.device.type == "cuda")

    # ------------------------------------------------------------ validation

    @torch.no_grad()
    def validate(self) -> dict:
        """Dev loss and perplexity (teacher forced, no smoothing), and BLEU/chrF of greedy translations.

        Each process takes every W-th dev pair; the parts are gathered, so every process gets the same scores.
        """
        self.model.eval()
        dev = self.data.dev
        mine = list(range(self.world.rank, len(dev), self.world.size))
        part = dev.select(mine)
        loss_sum, tokens = 0.0, 0
        for indices in token_batches(*lengths(part), self.config.train.max_tokens):
            rows = part[indices.tolist()]
            batch = make_batch(rows["src_ids"], rows["tgt_ids"]).to(self.device)
            with self.autocast():
                logits = self.model(batch.src, batch.tgt_input)
            loss_sum += nn.functional.cross_entropy(logits.flatten(0, 1).float(), batch.tgt_label.flatten(),
                                                    ignore_index=PAD, reduction="sum").item()
            tokens += batch.num_tokens
        greedy = self.config.decode.replace(beam_size=1, nbest=1)  # fast, and comparable across runs
        found = self.searcher.search(part["src_ids"], greedy)
        hypotheses = self.data.tokenizer.decode_tgt([hyps[0].tokens for hyps in found])
        parts = gather_objects(self.world, (loss_sum, tokens, mine, hypotheses))
        loss = sum(p[0] for p in parts) / sum(p[1] for p in parts)
        in_order = [hyp for _, hyp in sorted((i, hyp) for p in parts for i, hyp in zip(p[2], p[3]))]
        scores = score(in_order, [dev["tgt"]], self.config.data.tgt_lang)
        return {"dev_loss": loss, "dev_ppl": math.exp(min(loss, 50.0)), "dev_bleu": scores.bleu,
                "dev_chrf": scores.chrf, "bleu_signature": scores.bleu_signature,
                "chrf_signature": scores.chrf_signature, "sample": in_order[0] if in_order else ""}

    # ------------------------------------------------------------ checkpoints

    def state(self) -> dict:
        p = self.position
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(), "scaler": self.scaler.state_dict(),
                **dataclasses.asdict(p), "world_size": self.world.size,
                "config": config_to_dict(self.config), "tokenizer": tokenizer_state(self.data.tokenizer),
                **({"init_from": self.init_from} if self.init_from else {})}

    def save(self, dev: dict | None) -> Path:
        """step-N.pt, then last.pt (and best.pt when dev BLEU improved) as hard links to it. Main process only."""
        directory = checkpoint_dir(self.run_dir)
        path = directory / f"step-{self.position.step:08d}.pt"
        state = self.state()
        state["dev"] = {k: v for k, v in (dev or {}).items() if k != "sample"}
        save_checkpoint(state, path)
        link_atomic(path, directory / "last.pt")
        if dev is not None and self.position.evals_without_gain == 0:
            link_atomic(path, directory / "best.pt")
        prune_step_checkpoints(self.run_dir, self.config.train.keep_last)
        return path

    def restore(self, state: dict) -> None:
        try:
            self.model.load_state_dict(state["model"])
        except RuntimeError as e:
            raise MtError(f"--resume: the checkpoint's weights do not fit this config's model "
                          f"({str(e).strip().splitlines()[-1].strip()})")
        if state.get("world_size", 1) != self.world.size:
            raise MtError(f"--resume: the run was trained by {state.get('world_size', 1)} processes; resume it with "
                          f"as many (this is {self.world.size}), or the data order would change")
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if "scaler" in state:  # checkpoints of earlier versions have none, nor every Position field
            self.scaler.load_state_dict(state["scaler"])
        self.position = Position(**{f.name: state[f.name] for f in dataclasses.fields(Position) if f.name in state})
        self.init_from = state.get("init_from")

    def start_from(self, state: dict, path: Path, keep: frozenset[Keep]) -> None:
        """A new run from another run's weights (fine-tuning). Its optimizer's moments, its learning-rate
        schedule and its place in the data are fresh unless `keep` names them."""
        self.model.load_state_dict(state["model"])
        missing = [part for part, key in (("optimizer", "optimizer"), ("schedule", "scheduler")) if part in keep
                   and key not in state]
        if missing:
            raise MtError(f"--init-from {path}: has no {missing[0]} state to keep (an average of checkpoints?)")
        if "optimizer" in keep:  # the moments; the learning rate and betas stay this config's
            fresh = self.optimizer.state_dict()
            self.optimizer.load_state_dict({**fresh, "state": state["optimizer"]["state"]})
        if "schedule" in keep:  # no second warm-up: the rate goes on from the checkpoint's update count
            self.scheduler.load_state_dict(state["scheduler"])
            for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
                group["lr"] = lr
        if "position" in keep:  # the same data order, from where it stood (the update count goes on too)
            self.position = Position(step=state.get("step", 0), epoch=state.get("epoch", 0),
                                     batch_index=state.get("batch_index", 0))
        self.init_from = {"checkpoint": str(Path(path).resolve()), "step": state.get("step", 0), "kept": sorted(keep),
                          **({"from": state["init_from"]} if "init_from" in state else {})}

    # ------------------------------------------------------------ the loop

    def fit(self) -> None:
        """Update, log, validate and checkpoint until train.max_steps, train.max_minutes or early stopping.
        A stop signal (Ctrl-C, SIGTERM, SIGUSR1) saves a checkpoint of the updates done so far."""
        t, p = self.config.train, self.position
        progress = Progress(self.run_dir, t, p.step, self.world.is_main)
        # In a DDP run every process must stop at the same update, so each one only records a signal, and they
        # agree after every update; alone, a process stops at once except in the middle of an update.
        with StopSignals() as stops, stops.deferred() if self.world.is_distributed else contextlib.nullcontext():
            try:
                for batches in self.batches():
                    if p.step >= t.max_steps:
                        break
                    with stops.deferred():  # an update is applied whole, or not at all
                        result = self.train_step(batches)
                        p.batch_index += 1
                        if result is not None:  # None: a non-finite gradient, no update
                            p.step += 1
                    time_up, signum = self._agreed_stop(progress.started, stops)
                    if signum:
                        raise Stopped(signum)
                    if result is None:
                        continue
                    progress.update(*result)
                    if p.step % t.log_every == 0:
                        progress.log(p.step, self.scheduler.get_last_lr()[0])
                    if p.step % t.eval_every == 0 or p.step == t.max_steps or time_up:
                        early_stop = self._validate_and_save(progress)
                        if early_stop or time_up:
                            break
            except Stopped as stop:
                with stops.deferred():  # a second SIGTERM (the launcher's, after the scheduler's) lets it save
                    raise self._stopped(stop) from None
            finally:
                progress.close()
        log.info(f"done: {p.step} steps, {progress.tokens_per_second():,.0f} target tokens/s, peak memory "
                 f"{peak_memory_mb():,.0f} MB, best dev BLEU {p.best_bleu:.2f}; checkpoints in "
                 f"{checkpoint_dir(self.run_dir)}")

    def _stopped(self, stop: Stopped) -> MtError:
        """The error that ends a stopped run, after the main process saved a checkpoint where it stopped."""
        step = self.position.step
        if not stop.whole:
            return MtError(f"{stop.name}: stopped at once in the middle of update {step + 1}, nothing saved; "
                           f"--resume continues from the last checkpoint", exit_code=stop.exit_status)
        if not self.world.is_main:
            return MtError(f"{stop.name}: stopped at step {step}", exit_code=stop.exit_status)
        return MtError(f"{stop.name}: stopped at step {step}, saved {self.save(None)}; continue with --resume",
                       exit_code=stop.exit_status)

    def batches(self) -> Iterator[list[Batch]]:
        """This process's batches for each update from the current position on, epoch after epoch."""
        while True:
            epoch = self.position.epoch
            with main_first(self.world):  # with subword regularisation, the main process segments the epoch
                train = self.data.train_batches(epoch)
            yield from self.loader(train, self.step_batches(train, epoch)[self.position.batch_index:])
            self.position.epoch, self.position.batch_index = epoch + 1, 0

    def _agreed_stop(self, started: float, stops: StopSignals) -> tuple[bool, int]:
        """(train.max_minutes has passed, the stop signal received or 0), on any process: all processes see the
        same answer, so all stop at the same update."""
        limit = self.config.train.max_minutes
        time_up = bool(limit) and time.perf_counter() - started > 60 * limit
        time_up, signum = max_across(self.world, [float(time_up), float(stops.received or 0)], self.device)
        return time_up > 0, int(signum)

    def _validate_and_save(self, progress: Progress) -> bool:
        """Validate, checkpoint, report. Returns True when early stopping ends training."""
        dev = self.validate()
        p, patience = self.position, self.config.train.patience
        if dev["dev_bleu"] > p.best_bleu:
            p.best_bleu, p.evals_without_gain = dev["dev_bleu"], 0
        else:
            p.evals_without_gain += 1
        stop = patience > 0 and p.evals_without_gain >= patience
        if self.world.is_main:
            path = self.save(dev)
            progress.validated(p.step, dev, path)
            if stop:
                log.info(f"early stop: no better dev BLEU in {patience} validations (best {p.best_bleu:.2f})")
        return stop


class Progress:
    """What the person watching sees (a progress bar, and a line per validation) and what the run's log keeps
    (log.jsonl, TensorBoard): the main process's only."""

    def __init__(self, run_dir: Path, t: TrainConfig, step: int, main: bool):
        self.training_log = TrainingLog(run_dir, t.tensorboard) if main else None
        self.bar = tqdm(total=t.max_steps, initial=step, desc="train", unit="step", dynamic_ncols=True,
                        disable=not (main and log.isEnabledFor(logging.INFO)),  # --quiet: no bar
                        mininterval=0.5 if sys.stderr.isatty() else 30)  # into a log file: a line every 30 s
        self.started, self.tokens, self.smoothed = time.perf_counter(), 0, None
        self.first_step, self.max_steps, self.max_minutes = step, t.max_steps, t.max_minutes
        self.estimated = not main  # the time left is told once, at the first log line

    def update(self, loss: float, tokens: float) -> None:
        """One update's loss per target token and the global batch's target tokens."""
        self.tokens += tokens
        self.smoothed = loss if self.smoothed is None else 0.98 * self.smoothed + 0.02 * loss
        self.bar.update(1)

    def tokens_per_second(self) -> float:
        return self.tokens / max(time.perf_counter() - self.started, 1e-9)

    def log(self, step: int, lr: float) -> None:
        tok_s = self.tokens_per_second()
        if not self.estimated:
            self.estimated = True
            self._estimate(step, tok_s)
        self.bar.set_postfix(loss=f"{self.smoothed:.3f}", lr=f"{lr:.2e}", tok_s=f"{tok_s:,.0f}")
        if self.training_log is not None:
            self.training_log.write(step, {"loss": self.smoothed, "lr": lr, "tok_s": tok_s})

    def _estimate(self, step: int, tok_s: float) -> None:
        """The time to max_steps (or max_minutes) at the speed of the updates so far, validations not counted."""
        elapsed = time.perf_counter() - self.started
        left = elapsed / (step - self.first_step) * (self.max_steps - step)
        bound = ""
        if self.max_minutes and left > 60 * self.max_minutes - elapsed:
            left, bound = 60 * self.max_minutes - elapsed, " (train.max_minutes)"
        duration = f"{left:.0f} s" if left < 90 else f"{left / 60:.0f} min"
        log.info(f"about {duration} to go{bound}, at {tok_s:,.0f} target tokens/s; validations add to it")

    def validated(self, step: int, dev: dict, path: Path) -> None:
        log.info(f"step {step}: dev loss {dev['dev_loss']:.3f} ppl {dev['dev_ppl']:.1f} BLEU {dev['dev_bleu']:.2f} "
                 f"chrF {dev['dev_chrf']:.2f} | {dev['sample'][:60]!r} → {path.name}")
        self.training_log.write(step, dev)

    def close(self) -> None:
        self.bar.close()
        if self.training_log is not None:
            self.training_log.close()


def peak_memory_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def train(config: Config, resume: bool = False, init_from: Path | None = None,
          keep: frozenset[Keep] = frozenset()) -> Path:
    """`mt train`: the whole chain for one run directory. Returns the run directory.

    init_from: a checkpoint whose weights (and tokenizer) a new run starts from, with what `keep` names of its
    training state; with `resume`, a run that has checkpoints continues instead.
    """
    run_dir = Path(config.train.run_dir)
    world, device = init_world(resolve_device(config.train.device))
    try:
        # the main process writes the run; the others follow it
        with lock_run_dir(run_dir, "mt train") if world.is_main else contextlib.nullcontext():
            _train(config, run_dir, resume, init_from, keep, world, device)
    finally:
        close_world(world)
    return run_dir


def _train(config: Config, run_dir: Path, resume: bool, init_from: Path | None, keep: frozenset[Keep],
           world: World, device: torch.device) -> None:
    last = checkpoint_dir(run_dir) / "last.pt"
    if last.exists() and not resume:
        raise MtError(f"{run_dir} already holds a run: pass --resume to continue it, "
                      f"or choose another directory with --run-dir")
    if resume and not last.exists() and init_from is None:
        raise MtError(f"--resume: no checkpoint at {last}")
    torch.manual_seed(config.train.seed)  # the initial weights (DDP then copies rank 0's to all)
    with main_first(world):  # the main process trains the tokenizer and fills the token cache; others reuse them
        if world.is_main:
            checkpoint_dir(run_dir).mkdir(parents=True, exist_ok=True)
            remove_partial_writes(checkpoint_dir(run_dir))
        state = load_checkpoint(last) if last.exists() else None
        start = load_checkpoint(init_from) if state is None and init_from is not None else None
        tokenizer = None
        if state or start:
            saved = (state or start)["tokenizer"]
            tokenizer = Tokenizer(saved["src"], saved["tgt"], config.data.scripts())
        if start is not None:
            check_fits(start, init_from, config, tokenizer, run_dir)
            if world.is_main:
                tokenizer.save(run_dir)  # the run's own copy, as a run that trained its tokenizer has
        data = prepare_data(config, run_dir, tokenizer)
    if world.is_main:
        save_config(config, run_dir / "config.yaml")
    trainer = Trainer(config, data, device, world)
    if state is not None:
        trainer.restore(state)
        log.info(f"resumed from {last} at step {trainer.position.step}")
    elif start is not None:
        trainer.start_from(start, init_from, keep)
        kept = f", keeping its {', '.join(sorted(keep))}" if keep else ""
        log.info(f"started from the weights of {init_from} (step {start.get('step', 0)}){kept}")
    params = sum(p.numel() for p in trainer.model.parameters())
    processes = f" × {world.size} processes" if world.is_distributed else ""
    log.info(f"model: {params:,} parameters, {config.model.norm}-LN, on {device}{processes}, "
             f"{trainer.dtype_name} (train.precision {config.train.precision}); "
             f"{data.train.padding_ratio():.1%} of batch positions are padding")
    trainer.fit()


# Model keys a fine-tuning run may change: they shape no weight.
TUNABLE_MODEL_KEYS = {"dropout", "init_std"}


def check_fits(start: dict, path: Path, config: Config, tokenizer: Tokenizer, run_dir: Path) -> None:
    """A run started from a checkpoint's weights keeps its model's shape, its tokenizer and its script conversion;
    refuse a config that differs, naming the key."""
    theirs = config_from_dict(start["config"], source=str(path))
    for field in dataclasses.fields(config.model):
        mine, their = getattr(config.model, field.name), getattr(theirs.model, field.name)
        if field.name not in TUNABLE_MODEL_KEYS and mine != their:
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
