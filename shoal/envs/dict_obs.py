"""Dict observations (gymnasium ``Dict`` spaces, MiniGrid's image, direction and mission)
read as one flat vector, with no wrapper of the user's.

- **Which keys**: ``env.obs_keys`` when given (each must hold numbers), else every key whose
  space holds numbers: ``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, and
  ``Tuple`` or ``Dict`` of them. The others (``Text``, MiniGrid's mission, ``Graph``,
  ``Sequence``, any space gymnasium cannot flatten) are left out, said in one line by
  :func:`tell_dropped`: gymnasium's own flatten of a mission raises, and text read as
  character codes is nothing a Q-network can use.
- **In what order**: the image first (the first key, in that order, that is a 3-D box of
  bytes or booleans, moved channels first), then the other keys in ``env.obs_keys``' order
  or the space's (gymnasium sorts a dict's keys). The conv encoder reads the image at the
  start of the vector and puts its features beside the rest
  (:class:`~shoal.agent.networks.ImageEncoder`); every other key is flattened as gymnasium
  flattens it (a ``Discrete`` one-hot).
- **As what**: bytes when every entry is a byte (images, one-hot codes, byte boxes), so that
  replay keeps them at a byte each as it keeps images; else float32. The encoder scales the
  image part by ``1 / high`` (the image space's largest value) and nothing else.
"""

from __future__ import annotations

import multiprocessing
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import gymnasium as gym
import numpy as np

from shoal.envs.pixels import channels_first, channels_first_space, channels_last, is_image
from shoal.errors import EnvError, ObservationError, first_line

__all__ = ["DictLayout", "DictObservation", "dict_layout", "tell_dropped"]

_NUMBERS = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def holds_numbers(space: gym.Space) -> bool:
    """Whether gymnasium flattens ``space`` to numbers a network can read."""
    if isinstance(space, _NUMBERS):
        return True
    if isinstance(space, gym.spaces.Tuple):
        return all(holds_numbers(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return all(holds_numbers(s) for s in space.spaces.values())
    return False


def _bytes(space: gym.Space) -> bool:
    """Whether every entry of ``space`` flattened is a byte (one-hot codes are 0 or 1)."""
    if isinstance(space, gym.spaces.Box):
        return space.dtype in (np.uint8, np.bool_)
    if isinstance(space, gym.spaces.Tuple):
        return all(_bytes(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return all(_bytes(s) for s in space.spaces.values())
    return True


@dataclass(frozen=True)
class DictLayout:
    """How one Dict observation becomes the flat vector the networks read: the keys read,
    in order, and the flat space. Plain data (it travels to workers inside the env's
    spec), and what :meth:`shoal.Policy.act` flattens the env's own dicts with."""

    keys: tuple[str, ...]
    """The keys read, in the vector's order (the image's first)."""
    parts: tuple[gym.Space, ...]
    """Each key's space as it enters the vector (the image channels first)."""
    space: gym.spaces.Box
    """The flat observation space."""
    image: str | None = None
    """The key the conv encoder reads (None: no image)."""
    transpose: bool = False
    """The image comes height x width x channels and is moved channels first."""
    dropped: tuple[tuple[str, str], ...] = ()
    """(key, its space's kind) of the keys left out."""

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        """Each key's number of entries in the vector."""
        return tuple(int(gym.spaces.flatdim(s)) for s in self.parts)

    @property
    def image_shape(self) -> tuple[int, int, int] | None:
        """``(channels, height, width)`` of the image at the vector's start, else None."""
        if self.image is None:
            return None
        c, h, w = self.parts[0].shape
        return int(c), int(h), int(w)

    @property
    def image_high(self) -> float:
        """The image space's largest value (the encoder scales the image by its inverse)."""
        return 1.0 if self.image is None else float(np.max(self.parts[0].high))

    def key_at(self, entry: int) -> str:
        """The key whose values fill ``entry`` of the vector."""
        ends = np.cumsum(self.sizes)
        return self.keys[int(np.searchsorted(ends, entry, side="right"))]

    def flatten(self, obs: Mapping[str, Any]) -> np.ndarray:
        """One observation as the flat vector; an
        :class:`~shoal.errors.ObservationError` naming the key whose value is missing or
        does not fit its space."""
        if not isinstance(obs, Mapping):
            raise ObservationError(
                f"observation is {type(obs).__name__}, not a dict with keys {list(self.keys)}"
            )
        parts = []
        for key, space, size in zip(self.keys, self.parts, self.sizes):
            if key not in obs:
                raise ObservationError(f"observation has no key {key!r} (keys: {list(obs)})")
            part = self._part(key, space, obs[key])
            if part.size != size:
                raise ObservationError(
                    f"observation key {key!r}: {part.size} values, and {space} holds {size}"
                )
            parts.append(part)
        return np.concatenate(parts).astype(self.space.dtype, copy=False)

    def _part(self, key: str, space: gym.Space, value: Any) -> np.ndarray:
        """``value`` of ``key`` flattened (the image as bytes, channels first)."""
        try:
            if key == self.image:
                image = np.asarray(value)
                return (channels_first(image) if self.transpose else image.astype(np.uint8)).ravel()
            return np.asarray(gym.spaces.flatten(space, value)).ravel()
        except (IndexError, KeyError, TypeError, ValueError) as e:
            text = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise ObservationError(
                f"observation key {key!r}: {text} does not fit {space} ({first_line(e)})"
            ) from None


def dict_layout(space: gym.spaces.Dict, keys: Sequence[str], env_id: str) -> DictLayout:
    """The layout of ``space``'s observations reading ``keys`` (``env.obs_keys``; empty:
    every key that holds numbers). A key that is not the space's, one listed twice or one
    that holds no numbers is an :class:`~shoal.errors.EnvError` naming it and what is
    allowed.

    Example:
        >>> space = gym.spaces.Dict({
        ...     "image": gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
        ...     "direction": gym.spaces.Discrete(4),
        ...     "mission": gym.spaces.Text(10),
        ... })
        >>> layout = dict_layout(space, [], "Demo-v0")
        >>> layout.keys, layout.image_shape, layout.space.shape, layout.space.dtype
        (('image', 'direction'), (3, 4, 4), (52,), dtype('uint8'))
        >>> layout.dropped
        (('mission', 'Text'),)
    """
    readable = [k for k, s in space.spaces.items() if holds_numbers(s)]
    if keys:
        _check_keys(space, keys, readable, env_id)
        chosen, dropped = list(keys), []
    else:
        chosen = readable
        dropped = [(k, type(s).__name__) for k, s in space.spaces.items() if k not in readable]
    if not chosen:
        raise EnvError(
            f"env.id {env_id!r}: no key of its observations holds numbers shoal can read"
            f" ({_kinds(space)}); shoal reads Box, Discrete, MultiDiscrete and MultiBinary"
        )
    image = next((k for k in chosen if is_image(space[k])), None)
    if image is not None:
        chosen = [image, *(k for k in chosen if k != image)]
    transpose = image is not None and channels_last(space[image])
    parts = [_entering(space[k], transpose and k == image, k == image) for k in chosen]
    return DictLayout(
        keys=tuple(chosen),
        parts=tuple(parts),
        space=_flat_space(parts),
        image=image,
        transpose=transpose,
        dropped=tuple(dropped),
    )


def _kinds(space: gym.spaces.Dict) -> str:
    """``space``'s keys with their kinds of space, for a message."""
    return ", ".join(f"{k!r}: {type(s).__name__}" for k, s in space.spaces.items())


def _check_keys(
    space: gym.spaces.Dict, keys: Sequence[str], readable: list[str], env_id: str
) -> None:
    """``env.obs_keys`` names readable keys of ``space``, each once."""
    allowed = ", ".join(repr(k) for k in readable) or "none"
    for i, key in enumerate(keys):
        where = f"config key 'env.obs_keys[{i}]'"
        if key not in space.spaces:
            raise EnvError(
                f"{where}: {key!r} is not a key of env.id {env_id!r}'s observations;"
                f" allowed: {allowed}"
            )
        if key not in readable:
            raise EnvError(
                f"{where}: {key!r} is {type(space[key]).__name__}, which holds no numbers"
                f" shoal can read; allowed: {allowed}"
            )
        if key in keys[:i]:
            raise EnvError(f"{where}: {key!r} is listed twice; list each of {allowed} once")


def _entering(space: gym.Space, transpose: bool, image: bool) -> gym.Space:
    """``space`` as it enters the vector: an image channels first, as bytes."""
    if transpose:
        return channels_first_space(space)
    if image:
        return gym.spaces.Box(0, np.asarray(space.high, np.uint8), space.shape, np.uint8)
    return space


def _flat_space(parts: list[gym.Space]) -> gym.spaces.Box:
    """One box of every part flattened: bytes if every entry is one, else float32."""
    flat = [gym.spaces.flatten_space(s) for s in parts]
    low = np.concatenate([np.asarray(b.low).ravel() for b in flat])
    high = np.concatenate([np.asarray(b.high).ravel() for b in flat])
    dtype = np.uint8 if all(_bytes(s) for s in parts) else np.float32
    with warnings.catch_warnings():  # wide integer or float64 bounds cast to float32
        warnings.simplefilter("ignore")
        return gym.spaces.Box(low.astype(dtype), high.astype(dtype), dtype=dtype)


class DictObservation(gym.ObservationWrapper):
    """A Dict-observation env whose observations are the flat vectors ``layout`` makes."""

    def __init__(self, env: gym.Env, layout: DictLayout) -> None:
        super().__init__(env)
        self.layout = layout
        self.observation_space = layout.space

    def observation(self, observation: Any) -> np.ndarray:
        """The observation flattened."""
        return self.layout.flatten(observation)


_told: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
"""(env id, keys left out) already told in this process."""


def tell_dropped(env_id: str, layout: DictLayout) -> None:
    """One line on stderr naming the keys ``layout`` leaves out: once per env in the
    process the user started (its workers probe the env too, and a run probes it more
    than once)."""
    told = (env_id, layout.dropped)
    if not layout.dropped or told in _told or multiprocessing.parent_process() is not None:
        return
    _told.add(told)
    names = ", ".join(f"{k!r} ({kind})" for k, kind in layout.dropped)
    print(
        f"shoal: env.id {env_id!r}: left out observation key(s) {names}, which hold no"
        f" numbers; learning from {', '.join(repr(k) for k in layout.keys)}"
        " (env.obs_keys chooses)",
        file=sys.stderr,
    )
