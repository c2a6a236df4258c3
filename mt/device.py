"""--device auto|cpu|cuda → torch.device, with a clear error when CUDA is asked for but absent."""

import torch

from mt.errors import MtError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise MtError("--device cuda: CUDA is not available on this machine (use --device cpu or auto)")
    if name not in ("cpu", "cuda"):
        raise MtError(f"--device {name}: expected auto, cpu or cuda")
    return torch.device(name)
