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

import numpy as np

__all__ = ["BatchNStepWriter", "NStepWriter", "nstep_episodes"]


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

    def state_dict(self) -> dict[str, Any]:
        """The open window (its steps by reference) and the newest next observation, as
        plain data for a checkpoint."""
        return {"pending": [list(step) for step in self._pending], "last": self._last_next_obs}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (a window longer than n is refused)."""
        pending = [(obs, action, float(reward)) for obs, action, reward in state["pending"]]
        if len(pending) > self._n:
            raise ValueError(f"n-step state holds {len(pending)} open steps; n is {self._n}")
        self._pending = deque(pending)
        self._last_next_obs = state["last"]

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


def nstep_episodes(
    obs: np.ndarray,
    fields: dict[str, np.ndarray],
    rewards: np.ndarray,
    lengths: np.ndarray,
    terminated: np.ndarray,
    *,
    n: int,
    gamma: float,
) -> dict[str, np.ndarray]:
    """Whole episodes' n-step transitions in one go, one array per field: exactly what an
    :class:`NStepWriter` fed each episode step by step emits (same order, same bits), for
    whole episodes that would otherwise cost a Python call per step.

    The episodes lie back to back: episode e has ``lengths[e]`` steps, whose rows of
    ``rewards`` and of each array in ``fields`` (``action``, and ``action_cont`` for hybrid
    actions: copied to the transitions) are consecutive, and ``lengths[e] + 1`` rows of
    ``obs`` (the last its final observation). It ended terminated (no bootstrap from its
    end) or truncated, as ``terminated[e]`` says. The window from step t of an episode of
    T steps ends at ``min(t + n, T)``; its reward is folded newest first, as the writer
    folds it.

    Example:
        >>> out = nstep_episodes(np.arange(4.0), {"action": np.zeros(3)},
        ...                      np.array([1.0, 2.0, 4.0]), np.array([3]), np.array([True]),
        ...                      n=2, gamma=0.5)
        >>> out["reward"].tolist(), out["next_obs"].tolist(), out["discount"].tolist()
        ([2.0, 4.0, 4.0], [2.0, 3.0, 3.0], [0.25, 0.0, 0.0])
    """
    lengths = np.asarray(lengths, np.int64)
    steps = int(lengths.sum())
    episode = np.repeat(np.arange(len(lengths)), lengths)
    first_step = np.cumsum(lengths) - lengths  # each episode's first row of rewards
    t = np.arange(steps) - first_step[episode]  # the step within its episode
    size = lengths[episode]
    end = np.minimum(t + n, size)
    r = np.asarray(rewards, np.float64)
    ret = np.zeros(steps)
    for j in range(n - 1, -1, -1):  # Horner from the newest reward of each window
        inside = t + j < end
        ret = np.where(inside, r[np.minimum(np.arange(steps) + j, steps - 1)] + gamma * ret, ret)
    powers = np.array([float(gamma) ** i for i in range(n + 1)])  # Python's pow: the writer's
    discount = powers[end - t]
    discount[(end == size) & np.asarray(terminated, bool)[episode]] = 0.0
    obs_row = first_step[episode] + episode  # episode e's obs rows start e rows later
    return {
        "obs": obs[obs_row + t],
        **{name: np.asarray(a) for name, a in fields.items()},
        "reward": ret,
        "next_obs": obs[obs_row + end],
        "discount": discount,
    }


class BatchNStepWriter:
    """One n-step writer for each of ``num_envs`` envs stepped together, kept as arrays.

    What :class:`NStepWriter` per env emits, the same transitions bit for bit, but written
    a step of every env at a time and emitted as one array per field, ready for one replay
    write: the serial runner at 32 envs would otherwise spend a Python call per env per
    step and a stack of 32 dicts. Within an env the order is the writer's; envs follow
    each other in index order.

    Args:
        num_envs: envs in the batch.
        n, gamma: as for :class:`NStepWriter`.
    """

    def __init__(self, num_envs: int, n: int, gamma: float) -> None:
        self._one = NStepWriter(n, gamma)  # the same argument checks
        """One env's writer: for a batch of one, a row's worth of arrays costs more than
        the Python writer and a conversion of what it emits."""
        self.num_envs, self.n, self.gamma = num_envs, n, float(gamma)
        self._powers = np.array([self.gamma**i for i in range(n + 1)])  # Python's pow
        self._count = np.zeros(num_envs, np.int64)
        """Steps of each env whose window is still open (the newest ``count`` slots)."""
        self._slot = -1  # the ring slot the newest step went to
        self._ring: dict[str, np.ndarray] | None = None
        self._last_next: np.ndarray | None = None

    def _alloc(self, obs: np.ndarray, actions: dict[str, np.ndarray]) -> None:
        n, k = self.n, self.num_envs
        self._ring = {"obs": np.zeros((n, *obs.shape), obs.dtype), "reward": np.zeros((n, k))}
        for name, a in actions.items():
            self._ring[name] = np.zeros((n, *a.shape), a.dtype)
        self._last_next = np.zeros_like(obs)

    def append(
        self,
        obs: np.ndarray,
        actions: dict[str, np.ndarray],
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        live: np.ndarray,
    ) -> dict[str, np.ndarray]:
        """Record one step of every env and return the transitions it completes. A row
        where ``live`` is False is not a step: an engine's reset right after the env's
        episode ended (anywhere else it would split an open window: ValueError).
        ``actions`` holds the action fields (``action``, and ``action_cont`` for hybrid
        actions), one row per env."""
        if self.num_envs == 1:
            if not live[0]:
                return {}
            action = {k: a[0] for k, a in actions.items()}
            out = self._one.append(
                obs[0], action, rewards[0], next_obs[0], terminated[0], truncated[0]
            )
            return _rows(out)
        if self._ring is None:
            self._alloc(obs, actions)
        ring, last = self._ring, self._last_next
        assert ring is not None and last is not None
        self._slot = s = (self._slot + 1) % self.n
        every = bool(live.all())
        rows: Any = slice(None) if every else live  # a slice: no copies on the common path
        if not every and (self._count[~live] > 0).any():  # open windows: the newest slots
            raise ValueError("a row that is not a step must follow its env's episode end")
        ring["obs"][s, rows] = obs[rows]
        ring["reward"][s, rows] = rewards[rows]
        for name, a in actions.items():
            ring[name][s, rows] = a[rows]
        last[rows] = next_obs[rows]
        self._count[rows] += 1
        done = terminated | truncated
        return self._completed(done if every else done & live, terminated)

    def state_dict(self) -> dict[str, Any]:
        """The open windows as plain data (numpy arrays, ints) for a checkpoint."""
        return {
            "one": self._one.state_dict(),
            "count": self._count,
            "slot": self._slot,
            "ring": self._ring,
            "last_next": self._last_next,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (copies: the writer owns its arrays)."""
        count = np.asarray(state["count"], np.int64)
        if count.shape != (self.num_envs,) or (count < 0).any() or (count > self.n).any():
            raise ValueError(
                f"n-step state counts {count.tolist()} do not fit {self.num_envs} envs, n {self.n}"
            )
        self._one.load_state_dict(state["one"])
        self._count, self._slot = count.copy(), int(state["slot"])
        ring, last = state["ring"], state["last_next"]
        self._ring = None if ring is None else {k: np.array(a) for k, a in ring.items()}
        self._last_next = None if last is None else np.array(last)

    def _completed(self, done: np.ndarray, terminated: np.ndarray) -> dict[str, np.ndarray]:
        """The transitions the step just written completes: a full window of every env
        that goes on, every open window of every env whose episode ended (``done``)."""
        count = self._count
        full = count == self.n
        if not done.any():
            if full.all():  # mid-episode everywhere: one window per env, by slices
                return self._windows(slice(None), self.n, bootstrap=True)
            going = np.flatnonzero(full)
            if not len(going):
                return {}
            out = self._gather(going, np.full(len(going), self.n), np.ones(len(going), bool))
            count[going] = self.n - 1
            return out
        # Full windows of envs that go on, then every open window of the envs that ended
        # (env by env, oldest first): one gather for all of them.
        going = np.flatnonzero(full & ~done)
        ends = np.flatnonzero(done)
        end_envs, end_k, end_boot = self._open_windows(ends, ~terminated[ends])
        out = self._gather(
            np.concatenate([going, end_envs]),
            np.concatenate([np.full(len(going), self.n), end_k]),
            np.concatenate([np.ones(len(going), bool), end_boot]),
        )
        count[going], count[ends] = self.n - 1, 0
        return out

    def flush(self) -> dict[str, np.ndarray]:
        """Every open window, as if every env's episode were truncated now (a run cut
        mid-episode)."""
        if self.num_envs == 1:
            return _rows(self._one.flush())
        envs = np.flatnonzero(self._count)
        if self._ring is None or not len(envs):
            return {}
        out = self._gather(*self._open_windows(envs, np.ones(len(envs), bool)))
        self._count[envs] = 0
        return out

    def _open_windows(
        self, envs: np.ndarray, bootstrap: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every open window of ``envs``, env by env, oldest first: each window's env, its
        length and whether it bootstraps (``bootstrap``: per env)."""
        c = self._count[envs]
        offset = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
        return np.repeat(envs, c), np.repeat(c, c) - offset, np.repeat(bootstrap, c)

    def _gather(
        self, envs: np.ndarray, k: np.ndarray, bootstrap: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Transition j: the last ``k[j]`` steps of env ``envs[j]``, bootstrapping from the
        newest step's next observation where ``bootstrap[j]``."""
        ring, n, s = self._ring, self.n, self._slot
        assert ring is not None and self._last_next is not None
        starts = (s - k + 1) % n
        rewards = ring["reward"]
        ret = np.zeros(len(envs))
        for j in range(n - 1, -1, -1):  # Horner from the newest reward, as the writer folds
            ret = np.where(j < k, rewards[(starts + j) % n, envs] + self.gamma * ret, ret)
        out = {name: a[starts, envs] for name, a in ring.items() if name != "reward"}
        out["reward"] = ret
        out["next_obs"] = self._last_next[envs]
        out["discount"] = np.where(bootstrap, self._powers[k], 0.0)
        return out

    def _windows(self, envs: Any, k: int, bootstrap: bool) -> dict[str, np.ndarray]:
        """The window of the last ``k`` steps of each env in ``envs`` (indices, or a slice
        for all); the windows stay open but their oldest step (``count`` is ``k - 1``)."""
        ring, n, s = self._ring, self.n, self._slot
        assert ring is not None and self._last_next is not None
        start = (s - k + 1) % n
        ret: Any = 0.0
        for j in range(k - 1, -1, -1):  # Horner from the newest reward, as the writer folds
            ret = ring["reward"][(start + j) % n, envs] + self.gamma * ret
        out = {name: a[start, envs].copy() for name, a in ring.items() if name != "reward"}
        out["reward"] = ret
        out["next_obs"] = self._last_next[envs].copy()
        out["discount"] = np.full(len(out["reward"]), self._powers[k] if bootstrap else 0.0)
        self._count[envs] = k - 1
        return out


def _rows(transitions: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """A writer's transitions (their ``action`` a dict of action fields) as arrays."""
    if not transitions:
        return {}
    out: dict[str, np.ndarray] = {}
    for name in ("obs", "reward", "next_obs", "discount"):
        out[name] = np.array([t[name] for t in transitions])
    for name in transitions[0]["action"]:
        out[name] = np.array([t["action"][name] for t in transitions])
    return out
