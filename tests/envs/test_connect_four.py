"""Connect Four from one seat, the evaluation players, and DQN action masking."""

import numpy as np
import pytest
import torch

from shoal.agent.actor import Actor, epsilon_greedy_action
from shoal.agent.learner import DQN
from shoal.agent.losses import Batch
from shoal.config import DQNConfig
from shoal.envs.connect_four import (
    COLS,
    OBS_DIM,
    ROWS,
    ConnectFourEnv,
    heuristic_player,
    play_match,
    random_player,
    search2_player,
)
from shoal.errors import ShoalError

pytestmark = pytest.mark.timeout(120)


def position(mine=(), theirs=()):
    """An observation with pieces at (row, col) for the player to move and the opponent."""
    board = np.zeros((ROWS, COLS, 2), np.float32)
    for r, c in mine:
        board[r, c, 0] = 1
    for r, c in theirs:
        board[r, c, 1] = 1
    legal = (board[0, :, :].sum(axis=1) == 0).astype(np.float32)
    return np.concatenate([board.reshape(-1), legal])


def test_seats_alternate_and_rewards_are_from_the_learner_side():
    env = ConnectFourEnv()
    obs, info = env.reset(seed=1, options={"learner_first": False})
    assert obs.shape == (OBS_DIM,) and not info["learner_first"]
    assert obs[: ROWS * COLS * 2].reshape(ROWS, COLS, 2)[:, :, 1].sum() == 1  # opponent moved
    # always playing column 0 against a random opponent ends the game one way or another
    rng = np.random.default_rng(0)
    for _ in range(30):
        legal = np.flatnonzero(obs[-COLS:])
        obs, reward, term, trunc, info = env.step(int(rng.choice(legal)))
        if term:
            assert reward in (-1.0, 0.0, 1.0) and info["result"] == reward
            break
    assert term


def test_full_column_is_an_error():
    env = ConnectFourEnv(opponent=lambda obs, rng: 0)  # the opponent stacks column 0 too
    env.reset(seed=0, options={"learner_first": True})
    with pytest.raises(ShoalError, match="full"):
        for _ in range(4):
            env.step(0)


def test_heuristic_wins_and_blocks():
    rng = np.random.default_rng(0)
    win = position(mine=[(5, 0), (5, 1), (5, 2)], theirs=[(4, 0), (4, 1)])
    assert heuristic_player(win, rng) == 3
    block = position(mine=[(5, 6), (4, 6)], theirs=[(5, 2), (5, 3), (5, 4)])
    assert heuristic_player(block, rng) in (1, 5)
    vertical = position(mine=[(5, 4), (4, 4), (3, 4)], theirs=[(5, 0), (5, 1)])
    assert heuristic_player(vertical, rng) == 4


def test_heuristic_beats_random_and_random_is_legal():
    rng = np.random.default_rng(0)
    res = play_match(lambda o: heuristic_player(o, rng), random_player, 60, learner_first=True)
    assert res["win"] >= 0.85
    obs = position(theirs=[(r, 3) for r in range(6)])
    assert all(random_player(obs, rng) != 3 for _ in range(50))


def test_search2_never_hands_a_win_where_it_can_help_it():
    rng = np.random.default_rng(0)
    # The opponent has (4,1), (4,2), (4,3): a piece at (4,0) or (4,4) wins once the square
    # below is filled. Column 0's (5,0) and column 4's (5,4) would open those squares.
    trap = position(mine=[(5, 1), (5, 3), (3, 2)], theirs=[(5, 2), (4, 1), (4, 2), (4, 3)])
    heuristic = {heuristic_player(trap, rng) for _ in range(200)}
    search = {search2_player(trap, rng) for _ in range(200)}
    assert {0, 4} & heuristic  # the heuristic walks into it some of the time
    assert not {0, 4} & search and search <= {1, 2, 3, 5, 6}
    # Winning and blocking come first, as for the heuristic.
    win = position(mine=[(5, 0), (5, 1), (5, 2)], theirs=[(4, 0), (4, 1)])
    assert search2_player(win, rng) == 3


def test_search2_beats_the_heuristic_from_both_seats():
    rng = np.random.default_rng(0)
    player = lambda o: search2_player(o, rng)  # noqa: E731
    for first in (True, False):
        res = play_match(player, heuristic_player, 100, learner_first=first, seed=1)
        assert res["win"] > res["loss"]


def test_dqn_masking_in_targets_acting_and_greedy():
    torch.manual_seed(0)
    dqn = DQN(4 + 3, 3, DQNConfig(hidden=[8], action_mask=True, double=True), device="cpu")
    obs = np.zeros((2, 7), np.float32)
    obs[:, 4:] = [[0, 1, 0], [0, 0, 1]]  # one legal action each
    rng = np.random.default_rng(0)
    actor = Actor(dqn.online, params=dqn.params, n_actions=3, action_mask=True, rng=rng)
    assert actor.greedy(obs).tolist() == [1, 2]
    picks = {
        epsilon_greedy_action(actor.greedy, obs[0], 1.0, rng, 3, masked=True) for _ in range(50)
    }
    assert picks == {1}
    actor.epsilon = 1.0
    assert {actor.select_action(obs[1])[0] for _ in range(50)} == {2}
    batch = Batch.from_numpy(
        {
            "obs": obs,
            "action": np.array([1, 2]),
            "reward": np.zeros(2, np.float32),
            "next_obs": obs,
            "discount": np.ones(2, np.float32),
        },
        "cpu",
    )
    _, td = dqn.loss(dqn.params, dqn.target_params, batch)
    with torch.no_grad():
        q_next = dqn.target(batch.next_obs)
        q = dqn.online(batch.obs)
    expected = q_next[[0, 1], [1, 2]] - q[[0, 1], [1, 2]]
    torch.testing.assert_close(td, expected)
    # a terminal next state with no legal action bootstraps nothing (and stays finite)
    term = Batch.from_numpy(
        {
            "obs": obs,
            "action": np.array([1, 2]),
            "reward": np.ones(2, np.float32),
            "next_obs": np.zeros((2, 7), np.float32),
            "discount": np.zeros(2, np.float32),
        },
        "cpu",
    )
    loss, td = dqn.loss(dqn.params, dqn.target_params, term)
    assert torch.isfinite(loss) and torch.isfinite(td).all()
