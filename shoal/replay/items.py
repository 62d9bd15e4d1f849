"""Replay items as arrays: the one way a list of item dicts becomes a batch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["concat_items", "stack_items"]


def stack_items(
    items: Sequence[Mapping[str, Any]], fields: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """``items`` (dicts with the same fields) as one array per field, items along the
    first axis; ``fields`` picks which (default: the first item's).

    Example:
        >>> stack_items([{"a": 1, "b": [0, 1]}, {"a": 2, "b": [2, 3]}])["b"].shape
        (2, 2)
    """
    names = items[0] if fields is None else fields
    return {name: np.stack([np.asarray(item[name]) for item in items]) for name in names}


def concat_items(batches: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Batches of items (one array per field each, the same fields) as one batch.

    Example:
        >>> concat_items([{"a": np.zeros(2)}, {"a": np.ones(3)}])["a"].shape
        (5,)
    """
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}
