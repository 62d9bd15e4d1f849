"""A tabular Q-learning agent for Sudoku, over any table and any encoder.

The agent is single-threaded and lock-free; sharing happens in the table it is given
(a :class:`~shoal.tabular.SharedQTable` that other processes update too, or a private one).
Each step it scores every legal action by the table's Q (plus an optional count bonus),
acts epsilon-greedily, and applies one atomic Q-learning step to the key it acted on.

Example:
    >>> import numpy as np
    >>> from shoal.envs.sudoku import SudokuEnv
    >>> from shoal.tabular import LocalQTable
    >>> from shoal.tabular.sudoku_features import LocalEncoder
    >>> agent = SudokuQAgent(LocalQTable(), LocalEncoder())
    >>> env = SudokuEnv(size=4)
    >>> result = agent.run_episode(env, "12.." "34.." "...." "....", np.random.default_rng(0))
    >>> result.steps > 0
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from shoal.agent.qlearning import AlphaSchedule, count_bonus, epsilon_greedy, harmonic

__all__ = ["EpisodeResult", "SudokuQAgent"]


class QTableLike(Protocol):
    """What the agent needs from a table (LocalQTable and SharedQTable both have it)."""

    def get_many(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def update(self, key: Any, target: float, alpha: AlphaSchedule) -> float: ...


class EncoderLike(Protocol):
    """Maps a flat board and its candidates to legal actions and their table keys."""

    def encode(self, flat: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(frozen=True)
class EpisodeResult:
    """How one episode went."""

    solved: bool
    steps: int
    total_reward: float


class SudokuQAgent:
    """Epsilon-greedy tabular Q-learning on Sudoku (see the module docstring).

    Args:
        table: the Q-table (shared or private).
        encoder: turns a board into legal actions and keys (``exact`` or ``local``).
        gamma: discount.
        alpha: step size as a function of the visit count.
        epsilon: probability of a uniformly random legal action while learning.
        bonus: count-based exploration bonus weight (beta / sqrt(N + 1)), 0 for none.
    """

    def __init__(
        self,
        table: QTableLike,
        encoder: EncoderLike,
        *,
        gamma: float = 0.9,
        alpha: AlphaSchedule | None = None,
        epsilon: float = 0.05,
        bonus: float = 0.0,
    ) -> None:
        self.table = table
        self.encoder = encoder
        self.gamma = gamma
        self.alpha = alpha if alpha is not None else harmonic(10.0)
        self.epsilon = epsilon
        self.bonus = bonus

    def _scores(self, keys: np.ndarray, explore: bool) -> tuple[np.ndarray, np.ndarray]:
        # Many actions share a key under a generalising encoder: read each key once.
        uniq, inverse = np.unique(keys, return_inverse=True)
        q, n = self.table.get_many(uniq)
        score = q + count_bonus(n, self.bonus) if explore and self.bonus else q
        return score[inverse], q[inverse]

    def run_episode(
        self,
        env: Any,
        puzzle: np.ndarray | str,
        rng: np.random.Generator,
        *,
        learn: bool = True,
    ) -> EpisodeResult:
        """Play one episode on ``puzzle``; learn from it unless ``learn`` is False, in which
        case the policy is greedy (ties broken at random)."""
        obs, info = env.reset(options={"puzzle": puzzle})
        actions, keys = self.encoder.encode(obs, info["candidates"])
        eps = self.epsilon if learn else 0.0
        steps, total = 0, 0.0
        while True:
            if len(actions) == 0:  # a board with no blank: nothing to do
                return EpisodeResult(False, steps, total)
            score, _ = self._scores(keys, learn)
            i = epsilon_greedy(score, eps, rng)
            obs, reward, terminated, _, info = env.step(int(actions[i]))
            steps += 1
            total += float(reward)
            if terminated:
                if learn:
                    self.table.update(keys[i], float(reward), self.alpha)
                return EpisodeResult(bool(info.get("solved", False)), steps, total)
            next_actions, next_keys = self.encoder.encode(obs, info["candidates"])
            if learn:
                _, next_q = self._scores(next_keys, False)
                target = float(reward) + self.gamma * float(next_q.max())
                self.table.update(keys[i], target, self.alpha)
            actions, keys = next_actions, next_keys
