"""train.device / --device → torch.device, with a clear error when CUDA is asked for but absent."""

import torch

from mt.config import Device
from mt.errors import MtError


def resolve_device(name: Device) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise MtError("--device cuda: CUDA is not available on this machine (use --device cpu or auto)")
    return torch.device(name)
