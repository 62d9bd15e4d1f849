"""What a checkpoint may hold: tensors and plain Python data, so that reading one runs no code.

``torch.load(weights_only=True)`` unpickles only tensors, containers and scalars; anything
else (a class, a numpy array, a function) is refused before it is built. Run directories
are what people share, so every checkpoint shoal writes must pass that loader. A runner's
state holds numpy arrays (replay, episode counters, RNG states) besides tensors: they go
to disk as tensors sharing the arrays' memory, tagged so that they come back as the same
numpy dtype and shape. Sharing matters for size: ``torch.save`` pickles a numpy array's
bytes as latin-1 text into a stream built whole in memory, 7.5x a replay buffer's size at
the save (``benchmarks/checkpoint_memory.py``); a tensor is written straight from its
storage.

Example:
    >>> import numpy as np
    >>> state = {"obs": np.arange(3, dtype=np.uint8), "n": np.int64(4), "steps": [1, 2]}
    >>> plain = to_plain(state)
    >>> back = from_plain(plain)
    >>> back["obs"].dtype, back["obs"].tolist(), type(back["n"]).__name__, back["steps"]
    (dtype('uint8'), [0, 1, 2], 'int64', [1, 2])
"""

from __future__ import annotations

import collections
import warnings
from typing import Any

import numpy as np
import torch

__all__ = ["from_plain", "to_plain"]

_ARRAY = "__shoal_ndarray__"
_SCALAR = "__shoal_npscalar__"
_ATOMS = (str, int, float, bool, bytes, type(None))


def to_plain(obj: Any, path: str = "state") -> Any:
    """``obj`` with every numpy array and scalar as a tagged tensor (sharing the array's
    memory where it can); tensors, containers and Python scalars are kept. Anything else
    is a bug in the code that built the state: TypeError naming where it sits."""
    if isinstance(obj, torch.Tensor) or isinstance(obj, _ATOMS):
        return obj
    if isinstance(obj, np.ndarray):
        return {_ARRAY: _tensor(obj, path)}
    if isinstance(obj, np.generic):
        return {_SCALAR: _tensor(np.asarray(obj), path)}
    if isinstance(obj, dict):
        out = {k: to_plain(v, f"{path}[{k!r}]") for k, v in obj.items()}
        return collections.OrderedDict(out) if isinstance(obj, collections.OrderedDict) else out
    if isinstance(obj, (list, tuple, collections.deque)):
        items = [to_plain(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        return tuple(items) if isinstance(obj, tuple) else items
    raise TypeError(
        f"{path} holds a {type(obj).__module__}.{type(obj).__qualname__}: a checkpoint holds "
        "tensors, numpy arrays and plain Python data only (give the object a state_dict)"
    )


def from_plain(obj: Any) -> Any:
    """Undo :func:`to_plain`: tagged tensors become numpy arrays and scalars again (sharing
    the tensors' memory)."""
    if isinstance(obj, dict):
        if len(obj) == 1 and _ARRAY in obj and isinstance(obj[_ARRAY], torch.Tensor):
            return obj[_ARRAY].numpy()
        if len(obj) == 1 and _SCALAR in obj and isinstance(obj[_SCALAR], torch.Tensor):
            return obj[_SCALAR].numpy()[()]
        out = {k: from_plain(v) for k, v in obj.items()}
        return collections.OrderedDict(out) if isinstance(obj, collections.OrderedDict) else out
    if isinstance(obj, list):
        return [from_plain(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(from_plain(v) for v in obj)
    return obj


def _tensor(a: np.ndarray, path: str) -> torch.Tensor:
    """A CPU tensor holding ``a``: its own memory where torch can share it (native byte
    order, writeable, no negative strides), a copy otherwise."""
    if a.dtype.hasobject or a.dtype.kind in "USVMm":
        raise TypeError(
            f"{path} is a numpy array of dtype {a.dtype}: a checkpoint holds numeric arrays only"
        )
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if not a.flags.writeable or any(stride < 0 for stride in a.strides):
        a = a.copy()
    with warnings.catch_warnings():  # zero-size or oddly strided arrays: torch copes
        warnings.simplefilter("ignore")
        return torch.from_numpy(a)
