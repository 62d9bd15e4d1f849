"""Deterministic seeds derived from the run seed, so that runs and resumes repeat exactly."""

from __future__ import annotations

import numpy as np

__all__ = ["derive_seed"]


def derive_seed(seed: int, *path: int) -> int:
    """A 32-bit seed for the stream named by ``path`` (e.g. (TRAIN_RESETS, episode)).

    Seeding each episode's reset from (seed, episode index) means a resumed run needs no
    env internals: the next episode starts from the same seed it would have had.
    """
    return int(np.random.SeedSequence([seed, *path]).generate_state(1)[0])
