"""64-bit table keys for (state key, action) pairs, vectorized.

Tables store one uint64 per state-action pair. The key mixes the two with the splitmix64
finaliser, whose output bits all depend on all input bits, so nearby states and actions
spread over the whole table (open addressing with linear probing needs that). Zero marks
an empty slot, so a key that mixes to zero is moved to one.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["EMPTY", "mix64", "pair_keys", "state_key"]

EMPTY = np.uint64(0)
"""The key of an empty slot; never produced by :func:`pair_keys`."""

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, elementwise on uint64 (wrapping arithmetic)."""
    z = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def pair_keys(states: np.ndarray | int, actions: np.ndarray | int) -> np.ndarray:
    """Keys of (state key, action) pairs; broadcasts like numpy.

    Example:
        >>> k = pair_keys(np.uint64(7), np.arange(3))
        >>> k.dtype, len(set(k.tolist()))
        (dtype('uint64'), 3)
    """
    s = np.asarray(states).astype(np.uint64)
    a = np.asarray(actions).astype(np.uint64)
    with np.errstate(over="ignore"):
        k = mix64(mix64(s) + (a + np.uint64(1)) * _GOLDEN)
    k[k == EMPTY] = np.uint64(1)
    return k


def state_key(data: bytes) -> np.uint64:
    """A 64-bit key for a state given as bytes (e.g. a board's ``tobytes()``)."""
    return np.uint64(int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little"))
