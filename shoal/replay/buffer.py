"""The replay buffer the learners use: a ring storage of items times a sampler."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shoal.replay.frames import FrameStorage
from shoal.replay.items import stack_items
from shoal.replay.samplers import PrioritizedSampler, UniformSampler
from shoal.replay.storage import RingStorage

__all__ = ["ReplayBuffer"]

# sample() adds these two to every batch; a stored field of the same name would be shadowed.
_RESERVED_FIELDS = ("weights", "indices")


def _check_specs(
    specs: Mapping[str, tuple[Sequence[int], Any]],
) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Return ``specs`` with tuple shapes and numpy dtypes, or raise naming the bad field."""
    if not isinstance(specs, Mapping) or not specs:
        raise ValueError(f"specs must map at least one field name to (shape, dtype), got {specs!r}")
    checked: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    for name, spec in specs.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"field names must be non-empty strings, got {name!r}")
        if name in _RESERVED_FIELDS:
            raise ValueError(
                f"field name {name!r} is reserved: sample() adds {list(_RESERVED_FIELDS)} "
                "to every batch"
            )
        if not isinstance(spec, (tuple, list)) or len(spec) != 2:
            raise ValueError(f"specs[{name!r}] must be a (shape, dtype) pair, got {spec!r}")
        shape, dtype = spec
        if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise ValueError(
                f"specs[{name!r}] shape must be a tuple of non-negative ints (() for a scalar), "
                f"got {shape!r}"
            )
        try:
            dtype = np.dtype(dtype)
        except TypeError as err:
            raise ValueError(f"specs[{name!r}] dtype {dtype!r} is not a numpy dtype") from err
        if dtype.hasobject:
            raise ValueError(
                f"specs[{name!r}] dtype must be a fixed-size numpy dtype, got {dtype} (objects "
                "cannot be preallocated or checkpointed as plain arrays)"
            )
        checked[name] = (tuple(int(d) for d in shape), dtype)
    return checked


def _check_priority(priority: Any) -> float:
    """Return one initial priority as a float, or raise ``ValueError`` naming the value."""
    if isinstance(priority, (str, bytes)) or np.ndim(priority) != 0:
        raise ValueError(
            f"priority must be a single number (an absolute TD error), got {priority!r}"
        )
    try:
        value = float(priority)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"priority must be a number (an absolute TD error), got {priority!r}"
        ) from err
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"priority must be finite and non-negative (an absolute TD error), got {value}"
        )
    return value


def _check_priorities(priorities: Any, count: int) -> np.ndarray:
    """Return ``count`` initial priorities as float64, or raise ``ValueError`` naming a bad one."""
    try:
        values = np.asarray(priorities, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"priorities must be numbers (absolute TD errors), got {priorities!r}"
        ) from err
    if values.shape != (count,):
        raise ValueError(
            f"priorities must hold one value per transition ({count}), got shape {values.shape}"
        )
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"priorities[{i}] must be finite and non-negative (an absolute TD error), "
            f"got {values[i]}"
        )
    return values


class ReplayBuffer:
    """Experience replay: ring storage of fixed-shape items times a uniform or prioritized sampler.

    The default constructor stores ``(obs, action, reward, next_obs, discount)``
    transitions, what :class:`~shoal.replay.nstep.NStepWriter` produces, so the learner's
    target is ``reward + discount * max_a Q(next_obs, a)`` for any n. :meth:`from_specs`
    builds a buffer of any other named fixed-shape fields instead, such as the sequences
    of :class:`~shoal.replay.sequence.SequenceWriter`; storage and sampling are the same.
    With ``prioritized=True`` sampling is proportional to ``(|td_error| + eps) ** alpha``
    (see :class:`~shoal.replay.samplers.PrioritizedSampler`); otherwise it is uniform and
    every weight is 1. Sampling is with replacement and uses the buffer's own generator, so
    a buffer restored with :meth:`load_state_dict` draws exactly the batches the original
    would have.

    Args:
        capacity: maximum number of transitions; the oldest are overwritten when full.
        obs_shape: shape of one observation (of a transition buffer).
        obs_dtype: dtype observations are stored as.
        action_shape: shape of one action (``()`` for a discrete action).
        action_dtype: dtype actions are stored as.
        specs: other named fixed-shape fields instead of transitions (see
            :meth:`from_specs`); ``obs_shape`` and the other field settings are then unused.
        prioritized: use proportional prioritized sampling instead of uniform.
        alpha, beta, beta_final, beta_steps, eps: prioritized sampling settings (ignored when
            ``prioritized`` is false).
        seed: seed of the sampling generator; ``None`` draws fresh entropy.
        frame_stack: frames per observation when ``obs`` and ``next_obs`` are flat stacks
            of byte frames: above 1, each distinct frame is stored once
            (:class:`~shoal.replay.frames.FrameStorage`).

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

        An actor that knows an item's TD error gives it as the initial priority:

        >>> buffer.add({"obs": np.zeros(4), "action": 0, "reward": 0.0,
        ...             "next_obs": np.ones(4), "discount": 0.99}, priority=2.5)
        10
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...] | None = None,
        *,
        obs_dtype: np.dtype | type = np.float32,
        action_shape: tuple[int, ...] = (),
        action_dtype: np.dtype | type = np.int64,
        specs: Mapping[str, tuple[Sequence[int], np.dtype | type]] | None = None,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_steps: int = 100_000,
        eps: float = 1e-6,
        seed: int | None = None,
        frame_stack: int = 1,
    ) -> None:
        if specs is None:
            if obs_shape is None:
                raise ValueError("ReplayBuffer needs obs_shape (transitions) or specs")
            obs_shape = tuple(obs_shape)
            specs = {
                "obs": (obs_shape, obs_dtype),
                "action": (tuple(action_shape), action_dtype),
                "reward": ((), np.float32),
                "next_obs": (obs_shape, obs_dtype),
                "discount": ((), np.float32),
            }
        self._storage: RingStorage | FrameStorage
        if frame_stack > 1:  # obs and next_obs are stacks of frames: keep each frame once
            self._storage = FrameStorage(capacity, _check_specs(specs), frame_stack)
        else:
            self._storage = RingStorage(capacity, _check_specs(specs))
        self._sampler: UniformSampler | PrioritizedSampler = UniformSampler()
        if prioritized:
            self._sampler = PrioritizedSampler(
                capacity,
                alpha=alpha,
                beta=beta,
                beta_final=beta_final,
                beta_steps=beta_steps,
                eps=eps,
            )
        self._rng = np.random.default_rng(seed)

    @classmethod
    def from_specs(
        cls,
        capacity: int,
        specs: Mapping[str, tuple[Sequence[int], np.dtype | type]],
        **sampler: Any,
    ) -> ReplayBuffer:
        """A buffer of arbitrary named fixed-shape fields instead of one-step transitions.

        ``specs`` maps each field name to ``(shape, dtype)`` of one item, e.g. the result
        of :meth:`SequenceWriter.specs <shoal.replay.sequence.SequenceWriter.specs>` for
        recurrent sequences. Items added must have exactly these keys; ``sampler`` takes
        the constructor's sampling keywords (``prioritized``, ``alpha``, ``beta``,
        ``beta_final``, ``beta_steps``, ``eps``, ``seed``). Raises ``ValueError`` naming the
        field whose spec is malformed, or that uses a name ``sample`` reserves
        (``weights``, ``indices``).

        Example:
            >>> import numpy as np
            >>> specs = {"frames": ((2, 3), np.uint8), "label": ((), np.int64)}
            >>> buffer = ReplayBuffer.from_specs(8, specs, prioritized=True, seed=0)
            >>> buffer.add({"frames": np.ones((2, 3)), "label": 7}, priority=0.5)
            0
            >>> batch = buffer.sample(2)
            >>> batch["frames"].shape, batch["frames"].dtype, batch["label"].tolist()
            ((2, 2, 3), dtype('uint8'), [7, 7])
        """
        return cls(capacity, specs=specs, **sampler)

    @property
    def prioritized(self) -> bool:
        """Whether sampling is prioritized."""
        return isinstance(self._sampler, PrioritizedSampler)

    @property
    def capacity(self) -> int:
        """Maximum number of transitions held."""
        return self._storage.capacity

    @property
    def specs(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Field name -> ``(shape, dtype)`` of one stored item."""
        return self._storage.specs

    @property
    def storage(self) -> RingStorage | FrameStorage:
        """Where the items live."""
        return self._storage

    @property
    def sampler(self) -> UniformSampler | PrioritizedSampler:
        """The sampler in use (e.g. to read the current ``beta``)."""
        return self._sampler

    def __len__(self) -> int:
        """Number of transitions held."""
        return len(self._storage)

    def add(self, transition: Mapping[str, Any], priority: float | None = None) -> int:
        """Store one item and return its index.

        ``transition`` needs exactly the buffer's fields (``obs, action, reward, next_obs,
        discount`` by default, as :class:`~shoal.replay.nstep.NStepWriter` emits them;
        ``KeyError`` otherwise). ``priority`` is the item's initial ``|td_error|``: a
        prioritized buffer stores it exactly as :meth:`update_priorities` would, while
        ``None`` gives the largest priority seen so far. Uniform replay checks and ignores
        it. Raises ``ValueError`` naming the value if it is negative or not finite.
        """
        value = None if priority is None else _check_priority(priority)
        index = self._storage.add(transition)
        indices = np.array([index], dtype=np.int64)
        self._sampler.on_add(indices, None if value is None else np.array([value]))
        return index

    def add_many(
        self,
        transitions: Sequence[Mapping[str, Any]],
        priorities: Sequence[float] | np.ndarray | None = None,
    ) -> None:
        """Store several items with one vectorized write (order is preserved).

        ``priorities``, if given, holds one initial ``|td_error|`` per item, as for
        :meth:`add`. Raises ``ValueError`` naming the length or the first bad value, and
        ``KeyError`` naming the first item with wrong keys; nothing is stored then.
        """
        values = None if priorities is None else _check_priorities(priorities, len(transitions))
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
        batch = stack_items(transitions, fields)
        indices = self._storage.add_batch(batch)
        self._sampler.on_add(indices, values)

    def add_batch(
        self,
        batch: Mapping[str, np.ndarray],
        priorities: Sequence[float] | np.ndarray | None = None,
    ) -> np.ndarray:
        """Store ``B`` items given as one array per field (leading dimension ``B``), in
        order; returns their indices. ``priorities`` as for :meth:`add_many`. Raises
        ``KeyError`` / ``ValueError`` naming a missing field, a shape or a bad priority;
        nothing is stored then."""
        first = np.asarray(next(iter(batch.values()), np.zeros(0)))
        count = first.shape[0] if first.ndim else 0
        values = None if priorities is None else _check_priorities(priorities, count)
        indices = self._storage.add_batch(batch)
        self._sampler.on_add(indices, values)
        return indices

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """Draw ``batch_size`` transitions with replacement.

        Returns the stored fields plus ``weights`` (float32 importance weights, all 1 when
        uniform) and ``indices`` (int64, to pass back to :meth:`update_priorities`).
        Raises ``ValueError`` if the buffer is empty or ``batch_size <= 0``.
        """
        indices, weights = self.sample_indices(batch_size)
        batch = self._storage.get(indices)
        batch["weights"] = weights
        batch["indices"] = indices
        return batch

    def sample_indices(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """The indices and importance weights :meth:`sample` would draw (it draws them
        here), without reading the items: for a caller that gathers them itself."""
        if len(self._storage) == 0:
            raise ValueError("cannot sample from an empty ReplayBuffer; add transitions first")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer (>= 1), got {batch_size}")
        return self._sampler.sample(len(self._storage), batch_size, self._rng)

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

        Raises ``ValueError`` if the snapshot does not fit this buffer (capacity, field
        names, shapes, dtypes, or uniform vs prioritized).
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
