"""derive_seeds is derive_seed (numpy's SeedSequence) for whole arrays of paths."""

import numpy as np
import pytest

from shoal.run.seeding import derive_seed, derive_seeds


@pytest.mark.parametrize("trial", range(40))
def test_derive_seeds_equals_seed_sequence(trial):
    rng = np.random.default_rng(trial)
    path = [
        int(rng.integers(0, 2 ** int(rng.choice([1, 3, 31, 32, 33, 64])), dtype=np.uint64))
        for _ in range(int(rng.integers(1, 8)))
    ]
    at = int(rng.integers(len(path)))
    column = rng.integers(0, 2**32, 17)
    column[:3] = [0, 1, 2**32 - 1]
    varied = [*path[:at], column, *path[at + 1 :]]
    want = [derive_seed(*path[:at], int(x), *path[at + 1 :]) for x in column]
    assert derive_seeds(*varied).tolist() == want


def test_derive_seeds_broadcasts_two_arrays():
    eps, envs = np.arange(5)[:, None], np.arange(3)[None, :]
    got = derive_seeds(7, 0, eps, envs)
    assert got.shape == (5, 3)
    assert got[4, 2] == derive_seed(7, 0, 4, 2)


def test_derive_seeds_rejects_negative_and_oversized():
    with pytest.raises(ValueError, match="non-negative"):
        derive_seeds(-1, np.arange(3))
    with pytest.raises(ValueError, match="2\\*\\*32"):
        derive_seeds(0, np.array([2**32]))
