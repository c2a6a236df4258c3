"""The order of the data: each epoch's batches grouped by update, this process's share of each, built ahead by
DataLoader workers when train.num_workers > 0."""

from __future__ import annotations

import numpy as np
import torch

from mt.core.distributed import World
from mt.core.errors import MtError
from mt.data.batching import Batch, TrainBatches


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


def step_batches(train: TrainBatches, epoch: int, accum_steps: int, world: World) -> list[list[np.ndarray]]:
    """The epoch's batches grouped by update: for each, this process's `accum_steps` batches.

    Update s of the epoch uses the global batches s·k·W … s·k·W + k·W − 1 (k accumulated, W processes);
    process r takes every W-th of them from r. An epoch's last few batches that fill no update are dropped.
    """
    batches = train.epoch(epoch)
    per_update = accum_steps * world.size
    if len(batches) < per_update:
        raise MtError(f"train.accum_steps × processes = {per_update} batches per update, but an epoch has "
                      f"only {len(batches)}: lower train.accum_steps or train.max_tokens")
    return [[batches[s * per_update + j * world.size + world.rank] for j in range(accum_steps)]
            for s in range(len(batches) // per_update)]


def loader(train: TrainBatches, steps: list[list[np.ndarray]], workers: int,
           device: torch.device) -> torch.utils.data.DataLoader:
    """The updates' batches, built ahead by `workers` processes (0: by the training process as it goes)."""
    return torch.utils.data.DataLoader(StepBatches(train, steps), batch_size=None, num_workers=workers,
                                       prefetch_factor=4 if workers else None,
                                       pin_memory=device.type == "cuda")
