"""Image observations: MinAtar's games through gymnasium, and image shapes channels first.

MinAtar (Young and Tian, 2019: Breakout, Asterix, Freeway, Seaquest and Space Invaders on
10 x 10 grids, one binary channel per kind of object) is DQN research at CPU scale. Its
package registers ``MinAtar/*`` with gymnasium through an entry-point hook that gymnasium
1.x no longer runs, so ``gym.make("MinAtar/Breakout-v1")`` fails until
``minatar.gym.register_envs()`` has: :func:`register_pixel_envs` does that for any
``MinAtar/`` id. Its observations are height x width x channels booleans;
:class:`ChannelsFirst` makes them channels x height x width ``uint8``, the layout torch's
convolutions read, stored once per frame at a byte each.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from shoal.errors import EnvError

__all__ = [
    "ChannelsFirst",
    "channels_first",
    "channels_first_space",
    "channels_last",
    "image_shape",
    "is_image",
    "register_pixel_envs",
]

MINATAR = "MinAtar/"


def register_pixel_envs(env_id: str) -> None:
    """Make ``env_id`` known to gymnasium if it is a MinAtar id (a no-op otherwise, and
    once registered); an :class:`~shoal.errors.EnvError` naming the package when it is not
    installed."""
    if not env_id.startswith(MINATAR) or env_id in gym.registry:
        return
    try:
        from minatar.gym import register_envs
    except ImportError:
        raise EnvError(
            f"env.id {env_id!r}: MinAtar's games need the minatar package"
            " (pip install 'shoal[pixels]')"
        ) from None
    register_envs()


class ChannelsFirst(gym.ObservationWrapper):
    """Height x width x channels images as channels x height x width ``uint8`` (booleans
    become 0 and 1)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = channels_first_space(env.observation_space)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """The image with its channels first, as bytes."""
        return channels_first(observation)


def channels_first_space(space: gym.Space) -> gym.spaces.Box:
    """The channels x height x width ``uint8`` space of a height x width x channels image
    space (its largest pixel value kept; booleans: 1)."""
    assert isinstance(space, gym.spaces.Box) and len(space.shape) == 3
    h, w, c = space.shape
    high = 1 if space.dtype == np.bool_ else int(np.max(space.high))
    return gym.spaces.Box(0, high, (c, h, w), np.uint8)


def channels_first(image: np.ndarray) -> np.ndarray:
    """A height x width x channels image as channels x height x width bytes."""
    return np.ascontiguousarray(np.moveaxis(image, -1, 0), dtype=np.uint8)


def image_shape(space: gym.Space) -> tuple[int, int, int] | None:
    """``(channels, height, width)`` of a channels-first image space, else None."""
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 3:
        c, h, w = space.shape
        return int(c), int(h), int(w)
    return None


def is_image(space: gym.Space) -> bool:
    """Whether ``space`` is an image the encoders read: a 3-D box of bytes or booleans
    (either layout; :func:`channels_last` tells which)."""
    return (
        isinstance(space, gym.spaces.Box)
        and len(space.shape) == 3
        and space.dtype in (np.uint8, np.bool_)
    )


def channels_last(space: gym.Space) -> bool:
    """Whether ``space`` is an image stored height x width x channels: 3-D bytes or
    booleans whose last axis is no longer than the others (MinAtar's 10 x 10 x 4;
    a frame stack of 4 x 84 x 84 is channels first already)."""
    return is_image(space) and space.shape[2] <= min(space.shape[:2])
