"""Several training processes with PyTorch DDP, launched by `torchrun` (which sets RANK, WORLD_SIZE, LOCAL_RANK).

Without torchrun this is a world of one and every helper is a no-op, so the training loop reads the same
either way. On CUDA the backend is NCCL and each process takes the GPU of its LOCAL_RANK; on CPU it is gloo.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Only the main process writes checkpoints, logs and progress bars."""
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.size > 1


def init_world(device: torch.device) -> tuple[World, torch.device]:
    """Join the process group when launched by torchrun; return the world and this process's device."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World(), device
    world = World(int(os.environ["RANK"]), size, int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        device = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return world, device


def close_world(world: World) -> None:
    if world.is_distributed and dist.is_initialized():
        dist.destroy_process_group()


def sum_across(world: World, value: float, device: torch.device) -> float:
    """The sum of a number over all processes (e.g. target tokens in the global batch)."""
    if not world.is_distributed:
        return value
    total = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return float(total.item())


def max_across(world: World, values: list[float], device: torch.device) -> list[float]:
    """Each number's largest value over all processes (e.g. whether any of them was asked to stop)."""
    if not world.is_distributed:
        return values
    largest = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(largest, op=dist.ReduceOp.MAX)
    return largest.tolist()


def gather_objects(world: World, obj) -> list:
    """Every process's `obj`, in rank order, on every process."""
    if not world.is_distributed:
        return [obj]
    gathered = [None] * world.size
    dist.all_gather_object(gathered, obj)
    return gathered


@contextlib.contextmanager
def main_first(world: World):
    """The main process runs the block first (e.g. filling a cache); the others run it after, reusing its work."""
    if world.is_distributed and not world.is_main:
        dist.barrier()
    yield
    if world.is_distributed and world.is_main:
        dist.barrier()
