"""Deterministic seeds derived from the run seed, so that runs and resumes repeat exactly."""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum, unique

import numpy as np

__all__ = ["SeedStream", "derive_seed", "derive_seeds"]


@unique
class SeedStream(IntEnum):
    """The first element of every seed path: each kind of randomness in a run draws from a
    stream of its own, so no two kinds share numbers. The values are the ones runs have
    always used (a run repeats across versions), but self-play's, which shared the workers'
    stream and now has its own."""

    TRAIN = 0
    """Training env resets (the serial runner's envs, the agents runner's epochs)."""
    EVAL = 1
    """Evaluation resets."""
    REPLAY = 2
    """Replay sampling."""
    ACTION = 3
    """Exploration draws (epsilon-greedy, noise) of the driver's actors."""
    WORKER = 4
    """Rollout workers' resets and exploration."""
    LEARNER = 5
    """The agents runner's agents' initial weights."""
    ACTOR = 7
    """Ray actors' resets and exploration."""
    CONFIRM = 8
    """The evaluations that confirm a solve (``run.confirm_solve``)."""
    EPSILON = 9
    """Evaluation episodes' random actions (``run.eval_epsilon``)."""
    SELFPLAY = 10
    """Self-play's opponent choices (until issue 54: the workers' stream, 4)."""
    AUGMENT = 11
    """The learner's batch augmentation (``dqn.augment``)."""
    MAPF_EVAL = 21
    """MAPF's generated evaluation instances."""


def derive_seed(seed: int, *path: int) -> int:
    """A 32-bit seed for the stream named by ``path`` (e.g. (TRAIN_RESETS, episode)).

    Seeding each episode's reset from (seed, episode index) means a resumed run needs no
    env internals: the next episode starts from the same seed it would have had.
    """
    return int(np.random.SeedSequence([seed, *path]).generate_state(1)[0])


# numpy's SeedSequence constants (numpy/random/bit_generator.pyx).
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = np.uint32(0xCA01F9DD), np.uint32(0x4973F715)
_POOL = 4
_SHIFT = np.uint32(16)


def derive_seeds(seed: int, *path: int | np.ndarray) -> np.ndarray:
    """:func:`derive_seed` for many paths at once: any element of ``path`` may be an array
    of ints below 2**32 (they broadcast), and element j of the result equals
    ``derive_seed`` of the path with element j of those arrays.

    One ``SeedSequence`` costs ~8 us; a batch of envs with short episodes resets thousands
    of times a second, each from its own seed. This computes SeedSequence's hash for a whole
    array in numpy (checked against ``SeedSequence`` in tests/run/test_seeding.py).
    """
    entropy, shape = _entropy_words((seed, *path))
    with np.errstate(over="ignore"):
        hashmix = _hashmixer()
        zero = np.zeros(shape, np.uint32)
        pool = [hashmix(entropy[i] if i < len(entropy) else zero) for i in range(_POOL)]
        for src in range(_POOL):  # every pool word feeds every other
            for dst in range(_POOL):
                if src != dst:
                    pool[dst] = _mix(pool[dst], hashmix(pool[src]))
        for word in entropy[_POOL:]:  # entropy beyond the pool, into every pool word
            for dst in range(_POOL):
                pool[dst] = _mix(pool[dst], hashmix(word))
        out = (pool[0] ^ np.uint32(_INIT_B)) * np.uint32((_INIT_B * _MULT_B) & 0xFFFFFFFF)
        return out ^ (out >> _SHIFT)


def _entropy_words(path: tuple[int | np.ndarray, ...]) -> tuple[list[np.ndarray], tuple]:
    """SeedSequence's entropy: each int as its little-endian 32-bit words (0 as one word);
    array elements as one word each."""
    arrays = [np.asarray(p) for p in path]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    words: list[np.ndarray] = []
    for a in arrays:
        if a.ndim == 0:
            x = int(a)
            if x < 0:
                raise ValueError(f"seeds must be non-negative, got {x}")
            while True:
                words.append(np.full(shape, x & 0xFFFFFFFF, np.uint32))
                x >>= 32
                if not x:
                    break
        else:
            if a.size and (a.min() < 0 or a.max() >= 1 << 32):
                raise ValueError("array elements of a seed path must be in [0, 2**32)")
            words.append(np.broadcast_to(a.astype(np.uint32), shape))
    return words, shape


def _hashmixer() -> Callable[[np.ndarray], np.ndarray]:
    """SeedSequence's ``hashmix`` with its running multiplier (one per mixing pass)."""
    const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal const
        value = value ^ np.uint32(const)
        const = (const * _MULT_A) & 0xFFFFFFFF
        value = value * np.uint32(const)
        return value ^ (value >> _SHIFT)

    return hashmix


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r = _MIX_L * x - _MIX_R * y
    return r ^ (r >> _SHIFT)
