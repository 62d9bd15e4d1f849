"""Connect Four from one player's side: PettingZoo's ``connect_four_v3`` with an opponent
inside, as a gymnasium env, for DQN and self-play.

The learner is one seat (first or second, drawn at every reset unless fixed); the other
seat is played by ``opponent``, a callable from an observation to a column (a random
player until :meth:`ConnectFourEnv.set_opponent` installs another, e.g. a snapshot from a
self-play pool). A learner ``step`` plays its move and then the opponent's reply, so the
env is an ordinary single-agent MDP from the learner's side.

Observations (float32, 91 values) are the board from the side of the player to move,
two 6 x 7 planes (own pieces, opponent's pieces) flattened, followed by the 7-entry mask of
legal columns: DQN with ``dqn.action_mask=true`` reads that mask from the end of the
observation. Rewards: +1 win, -1 loss, 0 draw or game still on. Playing a full column is
an error (agents act from the mask).

Players for evaluation: :func:`random_player`, :func:`heuristic_player` (win if it can,
else block the opponent's win, else random) and :func:`search2_player` (a depth-2 search:
the heuristic, and never a column that hands the opponent a win).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from shoal.errors import ShoalError

__all__ = [
    "ENV_ID",
    "ConnectFourEnv",
    "Player",
    "heuristic_player",
    "search2_player",
    "play_match",
    "random_player",
]

ENV_ID = "shoal/ConnectFour-v0"
ROWS, COLS = 6, 7
OBS_DIM = ROWS * COLS * 2 + COLS

Player = Callable[[np.ndarray, np.random.Generator], int]
"""A policy: (observation of the player to move, rng) -> column."""


def _planes(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    board = obs[: ROWS * COLS * 2].reshape(ROWS, COLS, 2)
    return board[:, :, 0] > 0.5, board[:, :, 1] > 0.5, obs[ROWS * COLS * 2 :] > 0.5


def random_player(obs: np.ndarray, rng: np.random.Generator) -> int:
    """A uniformly random legal column."""
    return int(rng.choice(np.flatnonzero(_planes(obs)[2])))


def _wins_with(pieces: np.ndarray, filled: np.ndarray, col: int) -> bool:
    """Whether dropping a piece into ``col`` completes four for ``pieces``."""
    empty = np.flatnonzero(~filled[:, col])
    if len(empty) == 0:
        return False
    row = int(empty.max())  # pieces fall to the lowest empty row (row 0 is the top)
    board = pieces.copy()
    board[row, col] = True
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLS and board[r, c]:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def heuristic_player(obs: np.ndarray, rng: np.random.Generator) -> int:
    """One-step lookahead: a winning column if any, else one that blocks the opponent's
    immediate win, else a random legal column."""
    mine, theirs, legal = _planes(obs)
    cols = [int(c) for c in np.flatnonzero(legal)]
    forced = _win_or_block(mine, theirs, cols, rng)
    return int(rng.choice(cols)) if forced is None else forced


def _win_or_block(
    mine: np.ndarray, theirs: np.ndarray, cols: list[int], rng: np.random.Generator
) -> int | None:
    """A column among ``cols`` that wins at once, else one that blocks the opponent's
    immediate win, else None."""
    filled = mine | theirs
    for pieces in (mine, theirs):
        hits = [c for c in cols if _wins_with(pieces, filled, c)]
        if hits:
            return int(rng.choice(hits))
    return None


def search2_player(obs: np.ndarray, rng: np.random.Generator) -> int:
    """A depth-2 search (its move and the opponent's reply): a winning column if any, else
    one that blocks the opponent's immediate win, else a random column after which the
    opponent cannot win at once (the heuristic plays under the opponent's threats; this
    player does not), else any legal column."""
    mine, theirs, legal = _planes(obs)
    cols = [int(c) for c in np.flatnonzero(legal)]
    forced = _win_or_block(mine, theirs, cols, rng)
    if forced is not None:
        return forced
    safe = [c for c in cols if not _hands_a_win(theirs, mine | theirs, c)]
    return int(rng.choice(safe or cols))


def _hands_a_win(theirs: np.ndarray, filled: np.ndarray, col: int) -> bool:
    """Whether playing ``col`` lets the opponent win with their next piece."""
    after = filled.copy()
    after[int(np.flatnonzero(~filled[:, col]).max()), col] = True
    return any(_wins_with(theirs, after, c) for c in range(COLS) if not after[0, c])


class ConnectFourEnv(gym.Env):
    """Connect Four against a built-in opponent (see the module docstring).

    Example:
        >>> env = ConnectFourEnv()
        >>> obs, info = env.reset(seed=0, options={"learner_first": True})
        >>> obs.shape, info["learner_first"]
        ((91,), True)
    """

    metadata = {"render_modes": []}
    board_shape = (ROWS, COLS, 2)
    """The board at the start of each observation (height, width, planes): what a
    convolutional encoder and ``dqn.augment = 'mirror'`` read."""

    def __init__(self, opponent: Player | None = None, learner_first: bool | None = None) -> None:
        import pettingzoo  # the registry API; the old module import path is deprecated

        self._game = pettingzoo.make("aec", "classic/connect_four-v3")
        self.observation_space = gym.spaces.Box(0.0, 1.0, (OBS_DIM,), np.float32)
        self.action_space = gym.spaces.Discrete(COLS)
        self.opponent: Player = opponent or random_player
        self.learner_first = learner_first
        self._me = "player_0"
        self._opp_rng = np.random.default_rng()

    def set_opponent(self, opponent: Player) -> None:
        """Who plays the other seat from the next move on."""
        self.opponent = opponent

    def _obs(self) -> np.ndarray:
        obs, _, _, _, _ = self._game.last()
        return np.concatenate(
            [
                obs["observation"].astype(np.float32).reshape(-1),
                obs["action_mask"].astype(np.float32),
            ]
        )

    def _over(self) -> bool:
        return any(self._game.terminations.values()) or any(self._game.truncations.values())

    def _opponent_moves(self) -> None:
        self._game.step(int(self.opponent(self._obs(), self._opp_rng)))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """New game; ``options={"learner_first": bool}`` fixes the learner's seat."""
        super().reset(seed=seed)
        self._game.reset(seed=None if seed is None else int(seed))
        self._opp_rng = np.random.default_rng(self.np_random.integers(2**63))
        first = (options or {}).get("learner_first", self.learner_first)
        if first is None:
            first = bool(self.np_random.integers(2))
        self._me = "player_0" if first else "player_1"
        if not first:
            self._opponent_moves()
        return self._obs(), {"learner_first": bool(first)}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """The learner's move, then (unless the game ended) the opponent's reply."""
        obs = self._obs()
        if obs[ROWS * COLS * 2 + int(action)] < 0.5:
            raise ShoalError(f"connect four: column {int(action)} is full; act from the mask")
        self._game.step(int(action))
        if not self._over():
            self._opponent_moves()
        if self._over():
            reward = float(self._game.rewards[self._me])
            return np.zeros(OBS_DIM, np.float32), reward, True, False, {"result": reward}
        return self._obs(), 0.0, False, False, {}


def play_match(
    learner: Callable[[np.ndarray], int],
    opponent: Player,
    games: int,
    *,
    learner_first: bool,
    seed: int = 0,
) -> dict[str, float]:
    """Win, draw and loss rates of ``learner`` (obs -> column) against ``opponent``."""
    env = ConnectFourEnv(opponent=opponent, learner_first=learner_first)
    results = []
    for g in range(games):
        obs, _ = env.reset(seed=seed + g)
        while True:
            obs, reward, term, _, _ = env.step(learner(obs))
            if term:
                results.append(reward)
                break
    r = np.asarray(results)
    return {
        "win": float((r > 0).mean()),
        "draw": float((r == 0).mean()),
        "loss": float((r < 0).mean()),
    }


def _register() -> None:
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=ConnectFourEnv)


_register()
