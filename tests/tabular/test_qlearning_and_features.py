"""Pure tabular pieces: step-size schedules, exploration, TD targets, keys, encoders."""

import numpy as np
import pytest

from shoal.agent.qlearning import (
    constant,
    count_bonus,
    epsilon_greedy,
    harmonic,
    inverse_count,
    make_alpha,
    td_target,
)
from shoal.envs.sudoku_puzzles import candidates, parse_puzzle
from shoal.tabular.keys import pair_keys, state_key
from shoal.tabular.sudoku_features import ExactEncoder, LocalEncoder, make_encoder


def test_alpha_schedules():
    n = np.array([1, 2, 4])
    assert inverse_count()(n).tolist() == [1.0, 0.5, 0.25]
    assert harmonic(2.0)(n).tolist() == [2 / 3, 0.5, 1 / 3]
    assert constant(0.1)(n).tolist() == [0.1, 0.1, 0.1]
    assert make_alpha("harmonic", 2.0)(n).tolist() == harmonic(2.0)(n).tolist()
    for bad in (lambda: harmonic(0), lambda: constant(1.5), lambda: make_alpha("cosine")):
        with pytest.raises(ValueError):
            bad()


def test_inverse_count_averages_targets():
    q, alpha = 0.0, inverse_count()
    targets = [3.0, 5.0, 10.0]
    for n, t in enumerate(targets, 1):
        q += float(alpha(np.array(n))) * (t - q)
    assert q == pytest.approx(np.mean(targets))


def test_epsilon_greedy_breaks_ties_at_random_and_explores():
    rng = np.random.default_rng(0)
    q = np.array([1.0, 3.0, 3.0, 0.0])
    picks = {epsilon_greedy(q, 0.0, rng) for _ in range(200)}
    assert picks == {1, 2}
    picks = [epsilon_greedy(q, 1.0, rng) for _ in range(400)]
    assert set(picks) == {0, 1, 2, 3}
    with pytest.raises(ValueError):
        epsilon_greedy(np.array([]), 0.1, rng)


def test_td_target_and_bonus():
    assert td_target(1.0, 0.9, np.array([2.0, 5.0]), terminal=False) == pytest.approx(5.5)
    assert td_target(1.0, 0.9, np.array([2.0, 5.0]), terminal=True) == 1.0
    assert td_target(1.0, 0.9, None, terminal=False) == 1.0
    assert count_bonus(np.array([0, 3]), 2.0).tolist() == [2.0, 1.0]
    assert count_bonus(np.array([0, 3]), 0.0).tolist() == [0.0, 0.0]


def test_pair_keys_are_distinct_and_never_empty():
    keys = pair_keys(np.arange(1000)[:, None], np.arange(9)[None, :]).reshape(-1)
    assert len(np.unique(keys)) == 9000 and (keys != 0).all()
    assert state_key(b"abc") == state_key(b"abc") != state_key(b"abd")


BOARD = parse_puzzle("1.....2..3.....4")


def test_local_features_on_a_hand_made_board():
    flat, cand = BOARD.reshape(-1), candidates(BOARD)
    actions, keys = LocalEncoder().encode(flat, cand)
    assert len(actions) == 12 * 4
    # Two actions with the same local situation share a key; different situations do not.
    by_action = dict(zip(actions.tolist(), keys.tolist()))
    conflicting = [c * 4 + d for c in range(16) if flat[c] == 0 for d in range(4) if not cand[c, d]]
    candidate = [c * 4 + d for c in range(16) if flat[c] == 0 for d in range(4) if cand[c, d]]
    assert not {by_action[a] for a in conflicting} & {by_action[a] for a in candidate}
    assert len(set(keys.tolist())) < len(keys)  # generalises: far fewer keys than actions


def test_exact_keys_depend_on_the_whole_board():
    flat = BOARD.reshape(-1)
    a1, k1 = ExactEncoder().encode(flat, candidates(BOARD))
    other = BOARD.copy()
    other[3, 0] = 2
    a2, k2 = ExactEncoder().encode(other.reshape(-1), candidates(other))
    common = np.intersect1d(a1, a2)
    assert len(common) and not set(k1[np.isin(a1, common)]) & set(k2[np.isin(a2, common)])
    with pytest.raises(ValueError):
        make_encoder("fancy")
