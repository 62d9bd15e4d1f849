"""Moving host data to a learner's device without making the host wait for it."""

from __future__ import annotations

import torch

__all__ = ["to_device"]


def to_device(t: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    """``t`` on ``device`` without blocking the host: a CPU tensor bound for CUDA goes
    through pinned memory (a copy from pageable memory waits behind the device's queue,
    the whole update a GPU learner just launched)."""
    kind = device.type if isinstance(device, torch.device) else str(device).split(":")[0]
    if kind == "cuda" and not t.is_cuda:
        t = t.pin_memory()
    return t.to(device, non_blocking=True)
