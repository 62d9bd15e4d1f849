"""Social outcome metrics of a multi-agent episode (Perolat et al. 2017, "A multi-agent
reinforcement learning model of common-pool resource appropriation").

Returns alone cannot tell a group that shares a resource well from one where a few agents
grab everything, or one that lives off its capital until the commons is gone. These four
numbers can, from an episode's per-agent, per-step rewards ``r`` (``(T, N)``) and tagged-out
flags ``o`` (``(T, N)`` bool), with ``R_i = sum_t r[t, i]`` agent ``i``'s return:

* **efficiency** (utilitarian) ``U = sum_i R_i / T``: reward collected per step, by everyone.
* **equality** ``E = 1 - G``, ``G = sum_i sum_j |R_i - R_j| / (2 N sum_i |R_i|)`` (the Gini
  coefficient; ``|R_i|`` in the denominator keeps ``G`` in ``[0, 1]`` when a tagging cost
  makes some returns negative, and equals the usual ``sum_i R_i`` otherwise). ``E = 1`` when
  every return is 0.
* **sustainability** ``S``: the mean over agents of the average step (numbered ``1 .. T``) at
  which that agent got a positive reward. High when rewards keep coming late in the
  episode, low when the resource was used up early. Agents that never got a positive
  reward are left out of the mean: counting them as ``T`` (one reading of the paper) would
  rank a group that starved half its members as *more* sustainable, counting them as 0 would
  mix starvation into a measure of timing. ``S = 0`` when no agent got a positive reward.
* **peace** ``P = (N T - sum o) / T``: the average number of agents not tagged out per step
  (``N`` when nobody is ever tagged).

:func:`social_outcomes` computes them from whole arrays; :class:`EpisodeMetrics` from steps
fed one at a time, as a runner sees them. Pure numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["EpisodeMetrics", "social_outcomes"]


def _outcomes(
    returns: np.ndarray,
    steps: int,
    positive_step_sum: np.ndarray,
    positive_count: np.ndarray,
    tagged: float,
) -> dict[str, float]:
    """The four metrics from per-agent sums (what both entry points accumulate)."""
    n = len(returns)
    if steps == 0:
        return {"efficiency": 0.0, "equality": 1.0, "sustainability": 0.0, "peace": float(n)}
    scale = np.abs(returns).sum()
    if scale == 0.0:
        equality = 1.0
    else:
        gini = np.abs(returns[:, None] - returns[None, :]).sum() / (2.0 * n * scale)
        equality = 1.0 - float(gini)
    got = positive_count > 0
    sustainability = (
        float(np.mean(positive_step_sum[got] / positive_count[got])) if got.any() else 0.0
    )
    return {
        "efficiency": float(returns.sum() / steps),
        "equality": equality,
        "sustainability": sustainability,
        "peace": float((n * steps - tagged) / steps),
    }


def social_outcomes(
    rewards: np.ndarray | Sequence[Sequence[float]],
    tagged_out: np.ndarray | Sequence[Sequence[bool]] | None = None,
) -> dict[str, float]:
    """Efficiency, equality, sustainability and peace (module docstring) of an episode's
    rewards ``(T, N)`` and tagged-out flags ``(T, N)`` (None: nobody was tagged).

    Example:
        >>> r = [[1, 0], [0, 0], [1, 1]]     # agent 0 eats at steps 1 and 3, agent 1 at 3
        >>> o = [[0, 0], [0, 1], [0, 1]]     # agent 1 is tagged out for two steps
        >>> m = social_outcomes(r, o)
        >>> m["efficiency"], m["sustainability"], m["peace"]  # 3/3, mean(2, 3), (6-2)/3
        (1.0, 2.5, 1.3333333333333333)
        >>> round(m["equality"], 4)          # 1 - |2 - 1| * 2 / (2 * 2 * 3)
        0.8333
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"social_outcomes rewards: shape {r.shape} is not (T, N)")
    o = np.zeros(r.shape, bool) if tagged_out is None else np.asarray(tagged_out, dtype=bool)
    if o.shape != r.shape:
        raise ValueError(f"social_outcomes tagged_out: shape {o.shape} is not {r.shape}")
    positive = r > 0
    t = np.arange(1, r.shape[0] + 1, dtype=np.float64)[:, None]
    return _outcomes(
        r.sum(axis=0),
        r.shape[0],
        (positive * t).sum(axis=0),
        positive.sum(axis=0),
        float(o.sum()),
    )


class EpisodeMetrics:
    """Accumulates one episode's social outcomes step by step, in O(N) memory.

    Feed each step's rewards and tagged-out flags, either as arrays in agent order or as
    PettingZoo-style dicts keyed by agent name. With dicts, an agent missing from the step's
    rewards has left the game: it gets reward 0 and, unless ``absent_is_tagged=False``,
    counts as tagged out (in harvest, agents leave only by being tagged). A runner holding
    harvest's infos passes ``{a: info["tagged_out"] for a, info in infos.items()}``.

    Args:
        agents: the agents' names (``env.possible_agents``) or their number.
        absent_is_tagged: whether an agent missing from a step's dicts counts as tagged out.

    Example:
        >>> m = EpisodeMetrics(["a", "b"])
        >>> m.add({"a": 1.0, "b": 0.0}, {"a": False, "b": False})
        >>> m.add({"a": 0.0}, {"a": False})      # "b" has left: tagged out, reward 0
        >>> m.add({"a": 1.0})                    # no flags: nobody present is tagged out
        >>> m.result() == social_outcomes([[1, 0], [0, 0], [1, 0]], [[0, 0], [0, 1], [0, 1]])
        True
    """

    def __init__(self, agents: Sequence[str] | int, *, absent_is_tagged: bool = True) -> None:
        self.agents = [str(i) for i in range(agents)] if isinstance(agents, int) else list(agents)
        self.absent_is_tagged = absent_is_tagged
        self._index = {a: i for i, a in enumerate(self.agents)}
        self.reset()

    def reset(self) -> None:
        """Forget everything added (start a new episode)."""
        n = len(self.agents)
        self.steps = 0
        """Steps added so far (T)."""
        self._returns = np.zeros(n)
        self._pos_sum = np.zeros(n)
        self._pos_count = np.zeros(n, np.int64)
        self._tagged = 0

    def add(
        self,
        rewards: Mapping[str, float] | np.ndarray | Sequence[float],
        tagged_out: Mapping[str, bool] | np.ndarray | Sequence[bool] | None = None,
    ) -> None:
        """Add one step: every agent's reward and whether it was tagged out."""
        n = len(self.agents)
        if isinstance(rewards, Mapping):
            r = np.zeros(n)
            here = np.zeros(n, bool)
            for name, value in rewards.items():
                i = self._index[name]
                r[i] = value
                here[i] = True
            o = np.zeros(n, bool) if not self.absent_is_tagged else ~here
            if tagged_out is not None:
                if not isinstance(tagged_out, Mapping):
                    raise TypeError("EpisodeMetrics.add: rewards is a dict, so tagged_out must be")
                for name, flag in tagged_out.items():
                    o[self._index[name]] |= bool(flag)
        else:
            r = np.asarray(rewards, dtype=np.float64)
            o = np.zeros(n, bool) if tagged_out is None else np.asarray(tagged_out, dtype=bool)
            if r.shape != (n,) or o.shape != (n,):
                raise ValueError(
                    f"EpisodeMetrics.add: shapes {r.shape} and {o.shape}; expected ({n},)"
                )
        self.steps += 1
        self._returns += r
        self._pos_sum += np.where(r > 0, self.steps, 0)
        self._pos_count += r > 0
        self._tagged += int(o.sum())

    def result(self) -> dict[str, float]:
        """``{"efficiency", "equality", "sustainability", "peace"}`` of the steps so far."""
        return _outcomes(
            self._returns, self.steps, self._pos_sum, self._pos_count, float(self._tagged)
        )
