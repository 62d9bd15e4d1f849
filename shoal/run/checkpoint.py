"""Checkpoint files: written atomically, read back with a clear error when damaged.

A checkpoint is one ``torch.save`` file holding everything needed to continue a run
exactly: weights, optimizer, replay buffer, RNG states and counters. It is written with
:func:`~shoal.run.files.atomic_write` (temp file in the same directory, fsync, rename), so
a crash or Ctrl-C mid-write leaves the previous checkpoint intact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from shoal.errors import CheckpointError
from shoal.run.files import atomic_write

__all__ = ["FORMAT", "load_checkpoint", "save_checkpoint"]

FORMAT = "shoal-checkpoint-v2"
"""v2: the run loop's layout (``loop``, ``learner``, ``replay``, runner keys); v1 files
(``dqn``, ``counters``) came before the shared run loop and cannot be resumed."""


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (temp file, fsync, rename); the parent
    directory is created if missing."""
    atomic_write(path, lambda f: torch.save({"format": FORMAT, **state}, f))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint; a missing, truncated or foreign file raises CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' does not exist")
    try:
        # The file holds numpy arrays and RNG states besides tensors, so the safe
        # weights-only unpickler cannot read it; it is the user's own run output.
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as e:  # any failure to unpickle means a damaged or foreign file
        raise CheckpointError(f"checkpoint '{path}' is corrupt or truncated ({e})") from None
    if isinstance(state, dict) and state.get("format") == "shoal-checkpoint-v1":
        raise CheckpointError(
            f"checkpoint '{path}' was written by an older shoal (shoal-checkpoint-v1, before "
            f"the shared run loop); this version reads {FORMAT}: retrain the run"
        )
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint '{path}' is not a shoal checkpoint ({FORMAT})")
    return state
