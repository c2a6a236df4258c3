"""What training reports as it goes: RUN/log.jsonl (one JSON object per line, for `mt plot` and other tools)
and TensorBoard event files in RUN/tensorboard (`tensorboard --logdir runs`)."""

from __future__ import annotations

import json
from pathlib import Path

from mt.core.run_dir import RunDir


class TrainingLog:
    def __init__(self, run_dir: Path, tensorboard: bool):
        self.jsonl = RunDir(run_dir).log.open("a", encoding="utf-8")
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # imported here: it takes a second to load
            self.writer = SummaryWriter(str(RunDir(run_dir).tensorboard))

    def write(self, step: int, values: dict) -> None:
        """One record: training values (loss, lr, tok_s) or validation values (dev_loss, dev_bleu, …)."""
        self.jsonl.write(json.dumps({"step": step, **values}, ensure_ascii=False) + "\n")
        self.jsonl.flush()  # readable while training runs
        if self.writer is not None:
            for key, value in values.items():
                if isinstance(value, (int, float)):
                    section, _, name = key.rpartition("_") if key.startswith("dev_") else ("train", "", key)
                    self.writer.add_scalar(f"{section}/{name}", value, step)
            self.writer.flush()

    def close(self) -> None:
        self.jsonl.close()
        if self.writer is not None:
            self.writer.close()
