"""Weights that are no longer numbers: a learner whose loss became NaN or inf (a learning
rate too high for the rewards' scale, an observation that overflowed) steps NaN into every
weight, and a run that goes on plays and checkpoints garbage without a word. The run loop
checks the weights it evaluates and everything it checkpoints; a checkpoint holding them is
refused on load. One pass over the learner's tensors: about a millisecond for the presets'
networks, against the seconds an evaluation or a checkpoint takes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["first_non_finite"]


def first_non_finite(tree: Any, prefix: str = "") -> str | None:
    """The key (``online.torso.0.weight``) of the first floating tensor or array in
    ``tree`` (nested mappings and lists) that holds NaN or inf, or None if none does."""
    if isinstance(tree, torch.Tensor):
        bad = tree.is_floating_point() and not bool(torch.isfinite(tree).all())
        return prefix or "(the tensor)" if bad else None
    if isinstance(tree, np.ndarray):
        bad = np.issubdtype(tree.dtype, np.floating) and not bool(np.isfinite(tree).all())
        return prefix or "(the array)" if bad else None
    if isinstance(tree, Mapping):
        items = tree.items()
    elif isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    else:
        return None
    for key, value in items:
        found = first_non_finite(value, f"{prefix}.{key}" if prefix else str(key))
        if found is not None:
            return found
    return None
