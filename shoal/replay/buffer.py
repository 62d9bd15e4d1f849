"""The replay buffer the learners use: a ring storage of transitions times a sampler."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shoal.replay.samplers import PrioritizedSampler, UniformSampler
from shoal.replay.storage import RingStorage

__all__ = ["ReplayBuffer"]


class ReplayBuffer:
    """Experience replay of ``(obs, action, reward, next_obs, discount)`` transitions.

    ``reward`` and ``discount`` are what :class:`~shoal.replay.nstep.NStepWriter` produces,
    so the learner's target is ``reward + discount * max_a Q(next_obs, a)`` for any n.
    With ``prioritized=True`` sampling is proportional to ``(|td_error| + eps) ** alpha``
    (see :class:`~shoal.replay.samplers.PrioritizedSampler`); otherwise it is uniform and
    every weight is 1. Sampling is with replacement and uses the buffer's own generator, so
    a buffer restored with :meth:`load_state_dict` draws exactly the batches the original
    would have.

    Args:
        capacity: maximum number of transitions; the oldest are overwritten when full.
        obs_shape: shape of one observation.
        obs_dtype: dtype observations are stored as.
        action_shape: shape of one action (``()`` for a discrete action).
        action_dtype: dtype actions are stored as.
        prioritized: use proportional prioritized sampling instead of uniform.
        alpha, beta, beta_final, beta_steps, eps: prioritized sampling settings (ignored when
            ``prioritized`` is false).
        seed: seed of the sampling generator; ``None`` draws fresh entropy.

    Example:
        >>> import numpy as np
        >>> buffer = ReplayBuffer(100, (4,), prioritized=True, seed=0)
        >>> buffer.add_many([
        ...     {"obs": np.full(4, t), "action": t % 2, "reward": 1.0,
        ...      "next_obs": np.full(4, t + 1), "discount": 0.99}
        ...     for t in range(10)
        ... ])
        >>> batch = buffer.sample(8)
        >>> batch["obs"].shape, batch["weights"].dtype, batch["indices"].dtype
        ((8, 4), dtype('float32'), dtype('int64'))
        >>> buffer.update_priorities(batch["indices"], np.linspace(-1.0, 1.0, 8))
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        *,
        obs_dtype: np.dtype | type = np.float32,
        action_shape: tuple[int, ...] = (),
        action_dtype: np.dtype | type = np.int64,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_steps: int = 100_000,
        eps: float = 1e-6,
        seed: int | None = None,
    ) -> None:
        obs_shape = tuple(obs_shape)
        self._storage = RingStorage(
            capacity,
            {
                "obs": (obs_shape, obs_dtype),
                "action": (tuple(action_shape), action_dtype),
                "reward": ((), np.float32),
                "next_obs": (obs_shape, obs_dtype),
                "discount": ((), np.float32),
            },
        )
        self._sampler: UniformSampler | PrioritizedSampler
        if prioritized:
            self._sampler = PrioritizedSampler(
                capacity,
                alpha=alpha,
                beta=beta,
                beta_final=beta_final,
                beta_steps=beta_steps,
                eps=eps,
            )
        else:
            self._sampler = UniformSampler()
        self._rng = np.random.default_rng(seed)

    @property
    def prioritized(self) -> bool:
        """Whether sampling is prioritized."""
        return isinstance(self._sampler, PrioritizedSampler)

    @property
    def capacity(self) -> int:
        """Maximum number of transitions held."""
        return self._storage.capacity

    @property
    def sampler(self) -> UniformSampler | PrioritizedSampler:
        """The sampler in use (e.g. to read the current ``beta``)."""
        return self._sampler

    def __len__(self) -> int:
        """Number of transitions held."""
        return len(self._storage)

    def add(self, transition: Mapping[str, Any]) -> int:
        """Store one transition and return its index.

        ``transition`` needs exactly the keys ``obs, action, reward, next_obs, discount``
        (``KeyError`` otherwise), as :class:`~shoal.replay.nstep.NStepWriter` emits them.
        """
        index = self._storage.add(transition)
        self._sampler.on_add(np.array([index], dtype=np.int64))
        return index

    def add_many(self, transitions: Sequence[Mapping[str, Any]]) -> None:
        """Store several transitions with one vectorized write (order is preserved)."""
        if len(transitions) == 0:
            return
        fields = self._storage.fields
        for position, t in enumerate(transitions):
            if set(t) != set(fields):
                missing = sorted(set(fields) - set(t))
                unknown = sorted(map(str, set(t) - set(fields)))
                raise KeyError(
                    f"transition {position} keys must be exactly {sorted(fields)}; "
                    f"missing {missing}, unknown {unknown}"
                )
        batch = {name: np.stack([np.asarray(t[name]) for t in transitions]) for name in fields}
        indices = self._storage.add_batch(batch)
        self._sampler.on_add(indices)

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """Draw ``batch_size`` transitions with replacement.

        Returns the stored fields plus ``weights`` (float32 importance weights, all 1 when
        uniform) and ``indices`` (int64, to pass back to :meth:`update_priorities`).
        Raises ``ValueError`` if the buffer is empty or ``batch_size <= 0``.
        """
        if len(self._storage) == 0:
            raise ValueError("cannot sample from an empty ReplayBuffer; add transitions first")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer (>= 1), got {batch_size}")
        indices, weights = self._sampler.sample(len(self._storage), batch_size, self._rng)
        batch = self._storage.get(indices)
        batch["weights"] = weights
        batch["indices"] = indices
        return batch

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Set priorities from TD errors (their absolute value); a no-op when uniform."""
        self._sampler.update_priorities(indices, np.abs(np.asarray(td_errors, dtype=np.float64)))

    def state_dict(self) -> dict[str, Any]:
        """Return storage, sampler and generator state, enough to resume sampling exactly."""
        return {
            "storage": self._storage.state_dict(),
            "sampler": self._sampler.state_dict(),
            "rng": copy.deepcopy(self._rng.bit_generator.state),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot; later samples match the original buffer's.

        Raises ``ValueError`` if the snapshot does not fit this buffer (capacity, shapes,
        dtypes, or uniform vs prioritized).
        """
        # Each part validates before it writes; putting the sampler back if a later part
        # fails keeps a rejected snapshot from leaving the buffer half-loaded.
        # A scratch generator checks the generator state without touching ours.
        type(self._rng.bit_generator)().state = state["rng"]
        previous_sampler = self._sampler.state_dict()
        self._sampler.load_state_dict(state["sampler"])
        try:
            self._storage.load_state_dict(state["storage"])
        except (KeyError, ValueError):
            self._sampler.load_state_dict(previous_sampler)
            raise
        self._rng.bit_generator.state = copy.deepcopy(state["rng"])
