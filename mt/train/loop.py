"""The training loop: update → log → validate → checkpoint until train.max_steps, and the whole chain of
`mt train` for one run directory (config.yaml, the SentencePiece model, the token cache, log.jsonl, checkpoints/).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import torch

from mt.config import Config, Keep, save_config
from mt.core.atomic import remove_partial_writes
from mt.core.device import resolve_device
from mt.core.distributed import World, close_world, init_world, main_first, max_across
from mt.core.errors import MtError
from mt.core.run_dir import RunDir
from mt.core.run_lock import lock_run_dir
from mt.core.stopping import StopSignals, Stopped
from mt.data.batching import Batch
from mt.train.prepare import PreparedData, prepare_data
from mt.data.tokenizer import Tokenizer
from mt.exchange.checkpoint import load_checkpoint, save_run_checkpoint, started_how, tokenizer_from_state
from mt.train.progress import Progress, peak_memory_mb
from mt.train.trainer import Trainer, check_fits
from mt.train.updates import loader, step_batches
from mt.train.validation import validate

log = logging.getLogger(__name__)


class TrainingLoop:
    """A Trainer's updates over the run's data, with validation, checkpoints and stopping."""

    def __init__(self, trainer: Trainer, data: PreparedData):
        self.trainer, self.data = trainer, data
        self.config, self.world = trainer.config, trainer.world
        self.run_dir = Path(self.config.train.run_dir)

    @property
    def position(self):
        return self.trainer.position

    def run(self) -> None:
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
                        result = self.trainer.train_step(batches)
                        p.batch_index += 1
                        if result is not None:  # None: a non-finite gradient, no update
                            p.step += 1
                    time_up, signum = self.agreed_stop(progress.started, stops)
                    if signum:
                        raise Stopped(signum)
                    if result is None:
                        continue
                    progress.update(*result)
                    if p.step % t.log_every == 0:
                        progress.log(p.step, self.trainer.scheduler.get_last_lr()[0])
                    if p.step % t.eval_every == 0 or p.step == t.max_steps or time_up:
                        early_stop = self.validate_and_save(progress)
                        if early_stop or time_up:
                            break
            except Stopped as stop:
                with stops.deferred():  # a second SIGTERM (the launcher's, after the scheduler's) lets it save
                    raise self.stopped(stop) from None
            finally:
                progress.close()
        log.info(f"done: {p.step} steps, {progress.tokens_per_second():,.0f} target tokens/s, peak memory "
                 f"{peak_memory_mb():,.0f} MB, best dev BLEU {p.best_bleu:.2f}; checkpoints in "
                 f"{RunDir(self.run_dir).checkpoints}")

    def batches(self) -> Iterator[list[Batch]]:
        """This process's batches for each update from the current position on, epoch after epoch."""
        t = self.config.train
        while True:
            epoch = self.position.epoch
            with main_first(self.world):  # with subword regularisation, the main process segments the epoch
                train = self.data.train_batches(epoch)
            updates = step_batches(train, epoch, t.accum_steps, self.world)[self.position.batch_index:]
            yield from loader(train, updates, t.num_workers, self.trainer.device)
            self.position.epoch, self.position.batch_index = epoch + 1, 0

    def agreed_stop(self, started: float, stops: StopSignals) -> tuple[bool, int]:
        """(train.max_minutes has passed, the stop signal received or 0), on any process: all processes see the
        same answer, so all stop at the same update."""
        limit = self.config.train.max_minutes
        time_up = bool(limit) and time.perf_counter() - started > 60 * limit
        time_up, signum = max_across(self.world, [float(time_up), float(stops.received or 0)], self.trainer.device)
        return time_up > 0, int(signum)

    def validate_and_save(self, progress: Progress) -> bool:
        """Validate, checkpoint, report. Returns True when early stopping ends training."""
        dev = validate(self.trainer, self.data.dev)
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

    def save(self, dev: dict | None) -> Path:
        """A checkpoint of this update, the best so far when its dev BLEU improved. Main process only."""
        scores = {k: v for k, v in dev.items() if k != "sample"} if dev is not None else None
        best = dev is not None and self.position.evals_without_gain == 0
        return save_run_checkpoint(self.trainer.checkpoint(scores), self.run_dir, best, self.config.train.keep_last)

    def stopped(self, stop: Stopped) -> MtError:
        """The error that ends a stopped run, after the main process saved a checkpoint where it stopped."""
        step = self.position.step
        if not stop.whole:
            return MtError(f"{stop.name}: stopped at once in the middle of update {step + 1}, nothing saved; "
                           f"--resume continues from the last checkpoint", exit_code=stop.exit_status)
        if not self.world.is_main:
            return MtError(f"{stop.name}: stopped at step {step}", exit_code=stop.exit_status)
        return MtError(f"{stop.name}: stopped at step {step}, saved {self.save(None)}; continue with --resume",
                       exit_code=stop.exit_status)


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
    run = RunDir(run_dir)
    last = run.last
    if last.exists() and not resume:
        raise MtError(f"{run_dir} already holds a run: pass --resume to continue it, "
                      f"or choose another directory with --run-dir")
    if resume and not last.exists() and init_from is None:
        raise MtError(f"--resume: no checkpoint at {last}")
    torch.manual_seed(config.train.seed)  # the initial weights (DDP then copies rank 0's to all)
    with main_first(world):  # the main process trains the tokenizer and fills the token cache; others reuse them
        if world.is_main:
            run.checkpoints.mkdir(parents=True, exist_ok=True)
            remove_partial_writes(run.checkpoints)
        resumed = load_checkpoint(last) if last.exists() else None
        start = load_checkpoint(init_from) if resumed is None and init_from is not None else None
        tokenizer: Tokenizer | None = None
        if resumed or start:
            tokenizer = tokenizer_from_state(resumed or start, last if resumed else init_from, config.data.scripts())
        if start is not None:
            check_fits(start, init_from, config, tokenizer, run_dir, keep)
            if world.is_main:
                tokenizer.save(run_dir)  # the run's own copy, as a run that trained its tokenizer has
        data = prepare_data(config, run_dir, tokenizer)
    if world.is_main:
        save_config(config, run.config)
    trainer = Trainer(config, data.tokenizer, device, world)
    trainer.cleaning = data.cleaning
    if resumed is not None:
        trainer.restore(resumed)
        log.info(f"resumed from {last} at step {trainer.position.step}")
    elif start is not None:
        trainer.start_from(start, init_from, keep)
        how = started_how(trainer.init_from)
        log.info(f"started from the weights of {init_from} (step {start.position.step}){how}")
    params = sum(p.numel() for p in trainer.model.parameters())
    processes = f" × {world.size} processes" if world.is_distributed else ""
    log.info(f"model: {params:,} parameters, {config.model.norm}-LN, on {device}{processes}, "
             f"{trainer.dtype_name} (train.precision {config.train.precision}); "
             f"{data.train.padding_ratio():.1%} of batch positions are padding")
    TrainingLoop(trainer, data).run()
