"""Turn one environment's step stream into n-step transitions.

An n-step transition replaces the one-step target ``r_t + gamma * max_a Q(s_{t+1}, a)``
with ``sum_{i<k} gamma^i r_{t+i} + gamma^k * max_a Q(s_{t+k}, a)``, which propagates reward
k times faster. The writer folds the rewards and the bootstrap discount into each stored
transition, so the learner's target is always ``reward + discount * max_a Q(next_obs, a)``
whatever n is, and the replay buffer never has to know n.
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["NStepWriter"]


class NStepWriter:
    """Accumulates one environment stream's steps and emits finished n-step transitions.

    Each emitted transition is a dict with keys ``obs, action, reward, next_obs, discount``:
    ``reward`` is ``sum_{i<k} gamma^i r_{t+i}``, ``next_obs`` is the observation ``k`` steps
    after ``obs`` and ``discount`` is ``gamma**k``, or ``0.0`` if the episode terminated
    within those ``k`` steps (there is nothing to bootstrap from). ``k == n`` except at an
    episode's end, where the last ``n - 1`` starts get shorter windows.

    Termination (a true end state) and truncation (a time limit) differ: after truncation
    the final ``next_obs`` is a real, non-terminal state, so its value is bootstrapped.
    When both flags are set, termination wins. Use one writer per environment: steps from
    different environments must not share a window. Observations are kept by reference,
    not copied.

    Args:
        n: number of steps per transition (>= 1); ``n=1`` gives ordinary transitions.
        gamma: discount factor, in [0, 1].

    Example:
        >>> writer = NStepWriter(n=2, gamma=0.5)
        >>> writer.append(0, 0, 1.0, 1, terminated=False, truncated=False)
        []
        >>> [t["reward"] for t in writer.append(1, 0, 2.0, 2, False, False)]
        [2.0]
        >>> out = writer.append(2, 0, 4.0, 3, terminated=True, truncated=False)
        >>> [(t["obs"], t["reward"], t["next_obs"], t["discount"]) for t in out]
        [(1, 4.0, 3, 0.0), (2, 4.0, 3, 0.0)]
    """

    def __init__(self, n: int, gamma: float) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {gamma!r}")
        self._n = n
        self._gamma = float(gamma)
        # (obs, action, reward) of the steps whose n-step window is still open, oldest first.
        self._pending: deque[tuple[Any, Any, float]] = deque()
        self._last_next_obs: Any = None

    @property
    def n(self) -> int:
        """Number of steps per transition."""
        return self._n

    @property
    def gamma(self) -> float:
        """Discount factor."""
        return self._gamma

    def __len__(self) -> int:
        """Number of steps whose transition has not been emitted yet."""
        return len(self._pending)

    def append(
        self,
        obs: Any,
        action: Any,
        reward: float,
        next_obs: Any,
        terminated: bool,
        truncated: bool,
    ) -> list[dict[str, Any]]:
        """Record one step and return the transitions it completes, oldest first.

        Mid-episode that is at most one transition (once ``n`` steps are pending). At an
        episode's end (``terminated`` or ``truncated``) every pending step is emitted and the
        writer is ready for the next episode. ``next_obs`` must be the step's true next
        observation (with gymnasium's autoreset, the final observation, not the reset one).
        """
        self._pending.append((obs, action, float(reward)))
        self._last_next_obs = next_obs
        if terminated:
            return self._emit_all(bootstrap=False)
        if truncated:
            return self._emit_all(bootstrap=True)
        if len(self._pending) == self._n:
            out = [self._transition(0, bootstrap=True)]
            self._pending.popleft()
            return out
        return []

    def flush(self) -> list[dict[str, Any]]:
        """Emit every pending step as if the episode were truncated now (bootstrapping).

        For a run that stops mid-episode: the unfinished windows still hold valid, shorter
        transitions. Returns ``[]`` when nothing is pending.
        """
        return self._emit_all(bootstrap=True)

    def _emit_all(self, *, bootstrap: bool) -> list[dict[str, Any]]:
        out = [self._transition(start, bootstrap) for start in range(len(self._pending))]
        self._pending.clear()
        self._last_next_obs = None
        return out

    def _transition(self, start: int, bootstrap: bool) -> dict[str, Any]:
        """The transition from pending step ``start`` to the newest ``next_obs``."""
        k = len(self._pending) - start
        ret = 0.0
        # Horner's rule from the newest reward back: r_t + g*(r_{t+1} + g*(...)).
        for i in range(len(self._pending) - 1, start - 1, -1):
            ret = self._pending[i][2] + self._gamma * ret
        obs, action, _ = self._pending[start]
        return {
            "obs": obs,
            "action": action,
            "reward": ret,
            "next_obs": self._last_next_obs,
            "discount": self._gamma**k if bootstrap else 0.0,
        }
