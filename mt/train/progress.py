"""What the person watching a training sees (a progress bar, the time it expects to take, a line per validation)
and what the run's log keeps (log.jsonl, TensorBoard)."""

from __future__ import annotations

import logging
import resource
import sys
import time
from pathlib import Path

from tqdm import tqdm

from mt.config import TrainConfig
from mt.train.training_log import TrainingLog

log = logging.getLogger(__name__)


class Progress:
    """What the person watching sees (a progress bar, and a line per validation) and what the run's log keeps
    (log.jsonl, TensorBoard): the main process's only."""

    def __init__(self, run_dir: Path, t: TrainConfig, step: int, main: bool):
        self.training_log = TrainingLog(run_dir, t.tensorboard) if main else None
        # under a time budget the last update is unknown until the first log line measures the speed: no total yet
        self.bar = tqdm(total=None if t.max_minutes else t.max_steps, initial=step, desc="train", unit="step",
                        dynamic_ncols=True,
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
        last, by_time = self._last_update(step)
        if not self.estimated:
            self.estimated = True
            self._estimate(step, last, by_time, tok_s)
        if self.max_minutes:  # the bar counts to where the time budget ends training, so its % and time left are true
            self.bar.total = last
            self.bar.refresh()
        self.bar.set_postfix(loss=f"{self.smoothed:.3f}", lr=f"{lr:.2e}", tok_s=f"{tok_s:,.0f}")
        if self.training_log is not None:
            self.training_log.write(step, {"loss": self.smoothed, "lr": lr, "tok_s": tok_s})

    def _last_update(self, step: int) -> tuple[int, bool]:
        """The update where training stops at the speed so far (validations included), and whether it is
        train.max_minutes that stops it there (before max_steps)."""
        elapsed = time.perf_counter() - self.started
        rate = (step - self.first_step) / max(elapsed, 1e-9)
        if self.max_minutes:
            by_time = step + round(rate * max(60 * self.max_minutes - elapsed, 0))
            if by_time < self.max_steps:
                return by_time, True
        return self.max_steps, False

    def _estimate(self, step: int, last: int, by_time: bool, tok_s: float) -> None:
        """The time to the last update at the speed of the updates so far."""
        left = (time.perf_counter() - self.started) / (step - self.first_step) * (last - step)
        duration = f"{left:.0f} s" if left < 90 else f"{left / 60:.0f} min"
        bound = " (train.max_minutes)" if by_time else ""
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
