"""Samplers decide which stored items a batch draws, and with what importance weight.

A sampler never touches the data itself; it sees only indices. That is why prioritized
replay is "just a sampler" here: the same :class:`~shoal.replay.storage.RingStorage` serves
both the uniform and the prioritized buffer. Both samplers share one small interface:
``on_add`` (optionally with initial priorities), ``sample``, ``update_priorities``,
``state_dict`` and ``load_state_dict``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from shoal.replay.sum_tree import SumTree

__all__ = ["PrioritizedSampler", "UniformSampler"]


def _check_sample_args(size: int, batch_size: int) -> None:
    if size <= 0:
        raise ValueError(f"cannot sample: size (number of stored items) is {size}, need >= 1")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer (>= 1), got {batch_size}")


class UniformSampler:
    """Draws stored items uniformly at random, with replacement; every weight is 1.

    Example:
        >>> import numpy as np
        >>> sampler = UniformSampler()
        >>> indices, weights = sampler.sample(10, 4, np.random.default_rng(0))
        >>> indices.dtype, weights.tolist()
        (dtype('int64'), [1.0, 1.0, 1.0, 1.0])
    """

    def on_add(self, indices: np.ndarray, priorities: np.ndarray | None = None) -> None:
        """Do nothing: uniform sampling keeps no per-item state and ignores priorities."""

    def sample(
        self, size: int, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return ``batch_size`` int64 indices in ``[0, size)`` and float32 weights of 1."""
        _check_sample_args(size, batch_size)
        indices = rng.integers(0, size, size=batch_size, dtype=np.int64)
        return indices, np.ones(batch_size, dtype=np.float32)

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Do nothing: uniform sampling ignores priorities."""

    def state_dict(self) -> dict[str, Any]:
        """Return the (stateless) sampler's kind, so loading into the wrong kind fails loudly."""
        return {"kind": "uniform"}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Check that ``state`` came from a uniform sampler; there is nothing else to restore."""
        if state.get("kind") != "uniform":
            raise ValueError(
                f"cannot load a {state.get('kind')!r} sampler state into a UniformSampler"
            )


class PrioritizedSampler:
    """Proportional prioritized sampling (Schaul et al. 2016, "Prioritized Experience Replay").

    Item ``i`` is drawn with probability ``P(i) = p_i / sum_k p_k`` where the stored value
    ``p_i = (|td_i| + eps) ** alpha``. A batch is drawn by stratified sampling: the total is
    cut into ``batch_size`` equal segments and one point is drawn uniformly in each, which
    lowers the variance of the batch composition compared with independent draws. The bias
    this sampling introduces is corrected by importance weights
    ``w_i = (N * P(i)) ** -beta``, divided by the largest possible weight (that of the
    smallest priority) so every weight lies in ``(0, 1]`` and only ever scales updates down.
    ``beta`` anneals linearly from ``beta`` to ``beta_final`` over ``beta_steps`` calls to
    :meth:`sample`, reaching full correction at the end of training as the paper advises.

    New items get the largest priority seen so far (initially 1.0), so each is likely to be
    replayed at least once before its TD error is known, unless :meth:`on_add` is given
    their priorities (Ape-X actors compute initial TD errors themselves).

    Args:
        capacity: number of item slots (the storage's capacity).
        alpha: how strongly priorities skew sampling; 0 is uniform.
        beta: initial importance-correction exponent, in [0, 1].
        beta_final: final importance-correction exponent, in [0, 1].
        beta_steps: number of :meth:`sample` calls over which beta anneals.
        eps: added to every priority so that no item's probability drops to zero.

    Example:
        >>> import numpy as np
        >>> sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0)
        >>> sampler.on_add(np.arange(4))
        >>> sampler.update_priorities(np.arange(4), np.array([1.0, 1.0, 1.0, 3.0]))
        >>> indices, weights = sampler.sample(4, 6, np.random.default_rng(0))
        >>> indices.tolist()  # item 3 holds half the total priority, so half the batch
        [0, 1, 2, 3, 3, 3]
        >>> weights.astype(float).round(3).tolist()  # and its updates are scaled down 3x
        [1.0, 1.0, 1.0, 0.333, 0.333, 0.333]
    """

    def __init__(
        self,
        capacity: int,
        *,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_steps: int = 100_000,
        eps: float = 1e-6,
    ) -> None:
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        if not 0 <= beta <= 1:
            raise ValueError(f"beta must lie in [0, 1], got {beta}")
        if not 0 <= beta_final <= 1:
            raise ValueError(f"beta_final must lie in [0, 1], got {beta_final}")
        if not beta_steps > 0:
            raise ValueError(f"beta_steps must be a positive integer (> 0), got {beta_steps}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        self._tree = SumTree(capacity)
        self._alpha = float(alpha)
        self._beta_start = float(beta)
        self._beta_final = float(beta_final)
        self._beta_steps = int(beta_steps)
        self._eps = float(eps)
        # Kept in priority space (|td| + eps), before the alpha exponent.
        self._max_priority = 1.0
        self._sample_calls = 0

    @property
    def alpha(self) -> float:
        """Priority exponent."""
        return self._alpha

    @property
    def beta(self) -> float:
        """The importance-correction exponent the next :meth:`sample` call will use."""
        progress = min(1.0, self._sample_calls / self._beta_steps)
        return self._beta_start + progress * (self._beta_final - self._beta_start)

    @property
    def max_priority(self) -> float:
        """Largest priority (``|td| + eps``, before alpha) seen so far; given to new items."""
        return self._max_priority

    def on_add(self, indices: np.ndarray, priorities: np.ndarray | None = None) -> None:
        """Give the items just written at ``indices`` their first priority.

        With ``priorities=None`` each gets the maximum priority seen so far, so it is likely
        replayed before its TD error is known. Given priorities (``|td_error|``, one per
        index, as an Ape-X actor computes them) are stored exactly as
        :meth:`update_priorities` stores them, running max included.
        """
        indices = np.atleast_1d(np.asarray(indices, dtype=np.int64))
        if priorities is not None:
            self.update_priorities(indices, np.atleast_1d(np.asarray(priorities)))
            return
        self._tree.update(indices, np.full(indices.shape, self._max_priority**self._alpha))

    def sample(
        self, size: int, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``batch_size`` indices by stratified proportional sampling.

        Returns ``(indices, weights)``: int64 indices and float32 importance weights in
        ``(0, 1]``. ``size`` is the number of stored items, the ``N`` of the weight formula.
        Each call advances the beta schedule by one step.
        """
        _check_sample_args(size, batch_size)
        total = self._tree.total
        if total <= 0:
            raise ValueError("cannot sample: no item has a priority yet (was on_add called?)")
        segment = total / batch_size
        points = (np.arange(batch_size) + rng.random(batch_size)) * segment
        indices = self._tree.find(points)

        beta = self.beta
        self._sample_calls += 1
        probs = self._tree[indices] / total
        min_prob = self._tree.min() / total
        # Dividing by the largest possible weight, (N * min_prob) ** -beta, keeps weights in
        # (0, 1]; N cancels but is kept so the code reads like the paper's formula.
        weights = (size * probs) ** -beta / (size * min_prob) ** -beta
        return indices, weights.astype(np.float32)

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set new priorities (e.g. ``|td_error|``, non-negative) for ``indices``.

        Stores ``(priority + eps) ** alpha`` and raises the running max priority if needed.
        For a repeated index the last priority wins. Raises ``ValueError`` for NaN, infinite
        or negative priorities, or if ``indices`` and ``priorities`` differ in shape.
        """
        indices = np.asarray(indices, dtype=np.int64)
        priorities = np.asarray(priorities, dtype=np.float64)
        if indices.shape != priorities.shape:
            raise ValueError(
                f"indices and priorities must have the same shape, got {indices.shape} "
                f"and {priorities.shape}"
            )
        if np.isnan(priorities).any():
            raise ValueError("priorities must not be NaN (a diverging loss?)")
        if np.isinf(priorities).any():
            raise ValueError("priorities must be finite, got inf (a diverging loss?)")
        if (priorities < 0).any():
            raise ValueError(
                f"priorities must be non-negative (pass |td_error|), got minimum {priorities.min()}"
            )
        if priorities.size == 0:
            return
        shifted = priorities.ravel() + self._eps
        self._tree.update(indices.ravel(), shifted**self._alpha)
        self._max_priority = max(self._max_priority, float(shifted.max()))

    def state_dict(self) -> dict[str, Any]:
        """Return the priorities, running max priority and beta-schedule position."""
        return {
            "kind": "prioritized",
            "tree": self._tree.state_dict(),
            "max_priority": self._max_priority,
            "sample_calls": self._sample_calls,
            "alpha": self._alpha,
            "eps": self._eps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot.

        Raises ``ValueError`` if the state is not from a prioritized sampler, or its
        ``alpha`` or ``eps`` differ from this sampler's: the stored values already include
        both, so mixing them would silently change the sampling distribution.
        """
        if state.get("kind") != "prioritized":
            raise ValueError(
                f"cannot load a {state.get('kind')!r} sampler state into a PrioritizedSampler"
            )
        for name in ("alpha", "eps"):
            if float(state[name]) != getattr(self, f"_{name}"):
                raise ValueError(
                    f"state {name}={state[name]} does not match this sampler's "
                    f"{name}={getattr(self, f'_{name}')}"
                )
        self._tree.load_state_dict(state["tree"])
        self._max_priority = float(state["max_priority"])
        self._sample_calls = int(state["sample_calls"])
