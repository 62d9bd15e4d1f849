"""Cut one recurrent agent's step stream into fixed-length, overlapping sequences (R2D2).

A recurrent Q-network learns from sequences, not single transitions: the learner replays
``burn_in + length`` consecutive steps from the recurrent state the actor stored at their
start, warms the state up on the ``burn_in`` prefix, and trains on the ``length`` steps
after it (Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed
Reinforcement Learning"). The writer emits such items as plain dicts of fixed-shape arrays,
so an ordinary :class:`~shoal.replay.buffer.ReplayBuffer` built with
:meth:`ReplayBuffer.from_specs <shoal.replay.buffer.ReplayBuffer.from_specs>` stores and
samples them, uniformly or by priority, like any other item.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

__all__ = ["SequenceWriter"]


def _check_count(name: str, value: Any, minimum: int) -> int:
    """Return ``value`` as an int, or raise naming the argument, the value and what is allowed."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _conform(name: str, value: Any, template: np.ndarray) -> np.ndarray:
    """A copy of ``value`` with ``template``'s shape (checked) and dtype (cast)."""
    array = np.array(value)  # a copy: actors may reuse their arrays in place
    if array.shape != template.shape:
        raise ValueError(
            f"{name} must have shape {template.shape}, as in this writer's first step, "
            f"got {array.shape}"
        )
    return array.astype(template.dtype, copy=False)


def _template(name: str, value: Any) -> np.ndarray:
    """A zero array shaped like ``value``, which fixes a field's shape and dtype."""
    array = np.asarray(value)
    if array.dtype.hasobject:
        raise ValueError(
            f"{name} must be a numeric array of fixed shape, got {type(value).__name__} "
            f"(dtype {array.dtype})"
        )
    return np.zeros_like(array)


class SequenceWriter:
    """Turns one environment stream's steps into fixed-length sequence items for replay.

    Use one writer per stream (per environment, or per agent in a multi-agent
    environment): an item never mixes streams, nor episodes. A new item starts every
    ``period`` steps of an episode, so consecutive items' training parts overlap by
    ``length - period`` steps; an item's burn-in is the ``burn_in`` steps just before its
    training part (fewer near the episode's start, where there is no earlier context).
    An item is emitted as soon as the observation after its last step is known, so
    mid-episode :meth:`append` returns at most one item. When an episode ends, the items
    still open are emitted, padded, except one that would hold no step the previous item
    did not already train on.

    Each item is a dict of numpy arrays with ``S = burn_in + length`` step slots:

    ============  ========================  ==============================================
    key           shape, dtype              content
    ============  ========================  ==============================================
    ``obs``       ``(S + 1, *obs_shape)``   observation at each slot, then the one after
                                            the last valid step (the bootstrap state)
    ``action``    ``(S, *action_shape)``    action taken at each slot
    ``reward``    ``(S, *reward_shape)``    reward received at each slot (a vector in a
                  float32                   multi-agent world: one per agent)
    ``discount``  ``(S,)`` float32          0.0 on the step that terminated the episode,
                                            1.0 on other valid steps, 0.0 on padding
    ``mask``      ``(S,)`` bool             True on valid steps, False on padding
    ``burn_in``   ``()`` int64              number of valid burn-in steps, ``<= burn_in``
    ``state``     ``state_shape``           recurrent state held before the first valid
                                            step (the start of the burn-in)
    ============  ========================  ==============================================

    The training part always fills slots ``[burn_in, burn_in + length)``, in every item,
    so a learner splits a batch with fixed slices. The valid burn-in steps sit just
    before it: an item whose training part starts ``k < burn_in`` steps into an episode
    has its ``k`` burn-in steps in slots ``[burn_in - k, burn_in)`` and padding in
    ``[0, burn_in - k)``; ``mask[:burn_in]`` is the burn-in prefix mask and the
    ``burn_in`` field its count. An item cut short by the episode's end has padding after
    its last valid step. Padding is all zeros. A learner unrolls from ``state`` keeping
    the recurrent state unchanged on masked slots (``h = where(mask_t, cell(x_t, h), h)``),
    so leading padding leaves it exactly the stored state.

    ``discount`` is the environment's discount as in dm_env, without gamma: an n-step
    target at slot ``i`` is ``sum_k gamma^k r_{i+k} prod_{j<k} d_{i+j}`` plus
    ``gamma^m prod_{j<m} d_{i+j} Q(obs_{i+m})`` with ``m = min(n, valid slots left)``.
    After a termination ``d = 0`` stops the bootstrap; after a truncation (or
    :meth:`flush`) the last step keeps ``d = 1`` and ``obs`` after it is the true final
    observation, so the learner bootstraps from it.

    Args:
        length: steps per item that the learner trains on (R2D2: 80).
        burn_in: steps before them used only to warm up the recurrent state (R2D2: 40).
        period: steps between the starts of consecutive items, in ``[1, length]``;
            ``None`` means ``length`` (no overlap; R2D2: 40).

    Example:
        >>> import numpy as np
        >>> from shoal.replay import ReplayBuffer
        >>> writer = SequenceWriter(3, burn_in=2, period=2)
        >>> items = []
        >>> for t in range(5):  # observation 10 + t, recurrent state (t, t)
        ...     items += writer.append(
        ...         np.array([10.0 + t]), t, 1.0, terminated=t == 4, truncated=False,
        ...         state=np.full(2, float(t)))
        >>> len(items), [int(item["burn_in"]) for item in items]
        (2, [0, 2])
        >>> items[0]["obs"][:, 0].tolist(), items[0]["mask"].tolist()
        ([0.0, 0.0, 10.0, 11.0, 12.0, 13.0], [False, False, True, True, True])
        >>> items[1]["action"].tolist(), items[1]["discount"].tolist()
        ([0, 1, 2, 3, 4], [1.0, 1.0, 1.0, 1.0, 0.0])
        >>> specs = writer.specs((1,), state_shape=(2,))
        >>> buffer = ReplayBuffer.from_specs(100, specs, prioritized=True, seed=0)
        >>> buffer.add_many(items, priorities=[0.5, 2.0])
        >>> buffer.sample(4)["obs"].shape
        (4, 6, 1)
    """

    def __init__(self, length: int, *, burn_in: int = 0, period: int | None = None) -> None:
        self._length = _check_count("length", length, 1)
        self._burn_in = _check_count("burn_in", burn_in, 0)
        self._period = self._length if period is None else _check_count("period", period, 1)
        if self._period > self._length:
            raise ValueError(
                f"period must lie in [1, length={self._length}], got {period}: a longer period "
                "would leave steps that no item trains on"
            )
        # Zero arrays fixing the shape and dtype of obs, action and state: set by the first
        # append, kept across episodes so every item of the stream has one layout.
        self._templates: dict[str, np.ndarray] | None = None
        self._start_episode()

    def _start_episode(self) -> None:
        """Forget the current episode's steps (the shapes stay fixed)."""
        # Steps kept are those the next item still needs: from the start of its burn-in on.
        self._first = 0  # episode step of self._obs[0]
        self._obs: list[np.ndarray] = []
        self._actions: list[np.ndarray] = []
        self._rewards: list[np.ndarray] = []
        self._states: list[np.ndarray] = []
        self._steps = 0  # steps appended in this episode
        self._next_start = 0  # episode step where the next item's training part starts
        self._last_next_obs: np.ndarray | None = None

    def state_dict(self) -> dict[str, Any]:
        """The open episode's steps and counters (copies), for a checkpoint that resumes
        the stream mid-episode."""
        return copy.deepcopy(vars(self))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        vars(self).update(copy.deepcopy(state))

    @property
    def length(self) -> int:
        """Steps per item that the learner trains on."""
        return self._length

    @property
    def burn_in(self) -> int:
        """Slots per item before the training part, for warming up the recurrent state."""
        return self._burn_in

    @property
    def period(self) -> int:
        """Steps between the starts of consecutive items of an episode."""
        return self._period

    def specs(
        self,
        obs_shape: tuple[int, ...],
        *,
        state_shape: tuple[int, ...],
        obs_dtype: np.dtype | type = np.float32,
        action_shape: tuple[int, ...] = (),
        action_dtype: np.dtype | type = np.int64,
        state_dtype: np.dtype | type = np.float32,
        reward_shape: tuple[int, ...] = (),
    ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Field specs of this writer's items, for :meth:`ReplayBuffer.from_specs`.

        The shapes of one step's observation, action, reward (one per agent in a
        multi-agent world) and recurrent state (stack an LSTM's ``(h, c)`` into one array,
        e.g. shape ``(2, hidden)``) and the dtypes to store them as; the buffer casts every
        item to these dtypes.
        """
        slots = self._burn_in + self._length
        return {
            "obs": ((slots + 1, *tuple(obs_shape)), np.dtype(obs_dtype)),
            "action": ((slots, *tuple(action_shape)), np.dtype(action_dtype)),
            "reward": ((slots, *tuple(reward_shape)), np.dtype(np.float32)),
            "discount": ((slots,), np.dtype(np.float32)),
            "mask": ((slots,), np.dtype(np.bool_)),
            "burn_in": ((), np.dtype(np.int64)),
            "state": (tuple(state_shape), np.dtype(state_dtype)),
        }

    def append(
        self,
        obs: np.ndarray,
        action: Any,
        reward: float | np.ndarray,
        terminated: bool,
        truncated: bool,
        state: np.ndarray,
        *,
        next_obs: np.ndarray | None = None,
    ) -> list[dict[str, np.ndarray]]:
        """Record one step and return the items it completes, oldest first.

        ``state`` is the recurrent state the actor held *before* acting on ``obs``.
        ``next_obs`` is the observation after this step: required when the step truncates
        the episode (the learner bootstraps from it), optional when it terminates (stored,
        never bootstrapped from; zeros if omitted), and mid-episode only kept for
        :meth:`flush`, since the next step's ``obs`` is the same observation. With
        gymnasium's autoreset it is the final observation, not the reset one. When both
        flags are set, termination wins. The first step fixes the shapes of obs, action, reward
        and state for the stream; later values are cast to its dtypes. Raises ``ValueError``
        (before recording anything) for a shape mismatch or a truncation without
        ``next_obs``.
        """
        templates = self._templates or {
            "obs": _template("obs", obs),
            "action": _template("action", action),
            "state": _template("state", state),
            "reward": _template("reward", np.asarray(reward, np.float32)),
        }
        obs_a = _conform("obs", obs, templates["obs"])
        action_a = _conform("action", action, templates["action"])
        state_a = _conform("state", state, templates["state"])
        next_a = None if next_obs is None else _conform("next_obs", next_obs, templates["obs"])
        terminated, truncated = bool(terminated), bool(truncated)
        if truncated and not terminated and next_a is None:
            raise ValueError(
                "next_obs is required when truncated is true: the learner bootstraps from the "
                "observation after a truncated step"
            )
        reward_a = _conform("reward", reward, templates["reward"])
        self._templates = templates
        self._obs.append(obs_a)
        self._actions.append(action_a)
        self._rewards.append(reward_a)
        self._states.append(state_a)
        self._steps += 1
        if terminated or truncated:
            return self._finish(next_a, terminal=terminated)
        self._last_next_obs = next_a
        return self._completed()

    def _completed(self) -> list[dict[str, np.ndarray]]:
        """The items the newest step completed mid-episode: an item is complete once the
        observation after its last step (the newest step's obs) is in."""
        items = []
        newest = self._steps - 1
        while self._next_start + self._length <= newest:
            end = self._next_start + self._length
            items.append(
                self._item(self._next_start, end, self._obs[end - self._first], terminal=False)
            )
            self._next_start += self._period
        self._trim()
        return items

    def flush(self, next_obs: np.ndarray | None = None) -> list[dict[str, np.ndarray]]:
        """End the current episode as a truncation now and return its remaining items.

        For a stream cut mid-episode (the run stops, the actor restarts): the steps so far
        are still valid sequences, bootstrapping from ``next_obs``, the observation after
        the last appended step (the one given to the last :meth:`append` if omitted here).
        Returns ``[]`` when no step is pending. Raises ``ValueError`` if steps are pending
        but no such observation is known.
        """
        if self._steps == 0:
            return []
        if next_obs is not None:
            assert self._templates is not None  # steps are pending, so shapes are fixed
            final = _conform("next_obs", next_obs, self._templates["obs"])
        else:
            final = self._last_next_obs
        if final is None:
            raise ValueError(
                "flush() ends the episode as a truncation, so it needs next_obs, the "
                "observation after the last appended step, to bootstrap from; pass it to "
                "flush() or to that append()"
            )
        return self._finish(final, terminal=False)

    def _trim(self) -> None:
        """Drop the steps no future item of this episode needs (keeps memory bounded)."""
        needed = self._next_start - min(self._burn_in, self._next_start)
        drop = needed - self._first
        if drop > 0:
            del self._obs[:drop], self._actions[:drop], self._rewards[:drop], self._states[:drop]
            self._first = needed

    def _finish(
        self, final_obs: np.ndarray | None, *, terminal: bool
    ) -> list[dict[str, np.ndarray]]:
        """Emit the episode's open items (padded) and start a new episode."""
        steps = self._steps
        items = []
        start = self._next_start
        # An item after the first is worth emitting only if the previous one, which ends at
        # start - period + length, did not already reach the episode's end.
        while start < steps and (start == 0 or start - self._period + self._length < steps):
            end = min(start + self._length, steps)
            bootstrap = self._obs[end - self._first] if end < steps else final_obs
            items.append(self._item(start, end, bootstrap, terminal=terminal and end == steps))
            start += self._period
        self._start_episode()
        return items

    def _item(
        self, start: int, end: int, bootstrap_obs: np.ndarray | None, *, terminal: bool
    ) -> dict[str, np.ndarray]:
        """The item training on episode steps ``[start, end)``, with its burn-in before."""
        assert self._templates is not None
        slots = self._burn_in + self._length
        burn = min(self._burn_in, start)
        first = start - burn  # first valid step, the one whose state the item stores
        valid = end - first
        lo = self._burn_in - burn  # slot of the first valid step
        kept = slice(first - self._first, end - self._first)
        obs_t, action_t = self._templates["obs"], self._templates["action"]

        obs = np.zeros((slots + 1, *obs_t.shape), dtype=obs_t.dtype)
        obs[lo : lo + valid] = np.stack(self._obs[kept])
        if bootstrap_obs is not None:
            obs[lo + valid] = bootstrap_obs
        action = np.zeros((slots, *action_t.shape), dtype=action_t.dtype)
        action[lo : lo + valid] = np.stack(self._actions[kept])
        reward = np.zeros((slots, *self._templates["reward"].shape), dtype=np.float32)
        reward[lo : lo + valid] = np.stack(self._rewards[kept])
        discount = np.zeros(slots, dtype=np.float32)
        discount[lo : lo + valid] = 1.0
        if terminal:
            discount[lo + valid - 1] = 0.0
        mask = np.zeros(slots, dtype=np.bool_)
        mask[lo : lo + valid] = True
        return {
            "obs": obs,
            "action": action,
            "reward": reward,
            "discount": discount,
            "mask": mask,
            "burn_in": np.array(burn, dtype=np.int64),
            "state": self._states[first - self._first].copy(),
        }
