"""Gymnasium environments for DQN: checked up front, observations flattened to 1-D (Dict
observations as :mod:`shoal.envs.dict_obs` lays them out)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from shoal.config import EnvConfig
from shoal.envs.atari import AtariSettings, atari_env, check_frame_stack, is_atari
from shoal.envs.dict_obs import DictLayout, DictObservation, dict_layout, tell_dropped
from shoal.envs.pixels import ChannelsFirst, channels_last, image_shape, register_pixel_envs
from shoal.envs.step_cost import StepCost
from shoal.errors import EnvError

__all__ = ["EnvSpec", "import_env_modules", "import_id_module", "make_env", "probe_env"]


@dataclass(frozen=True)
class EnvSpec:
    """What the learner needs to know about an env: flat observation size and actions.

    A hybrid action space ``Tuple(Discrete(K), Box(low, high, (d,)))`` has ``action_dim =
    d`` and the box's bounds; a plain ``Discrete(K)`` space has ``action_dim = 0``.
    """

    obs_dim: int
    n_actions: int
    action_dim: int = 0
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    image: tuple[int, int, int] | None = None
    """``(channels, height, width)`` when the flat observation is an image (read with an
    image encoder), else None."""
    image_high: float = 1.0
    """The image space's largest value (the encoder multiplies the image by its inverse:
    pixels of 0-255 land in [0, 1], a symbolic grid's small codes below it)."""
    board: tuple[int, int, int] | None = None
    """``(height, width, channels)`` of a board game's board at the start of each flat
    observation, as the env declares it (its ``board_shape``), else None."""
    observation_space: Any = field(default=None, compare=False, repr=False)
    """The flat observation space the networks read (what a user's network factory is
    given: a ``Box`` of ``obs_dim``, for a Dict observation too, laid out as
    :mod:`shoal.envs.dict_obs` says); None: a ``Box`` of ``obs_dim`` floats."""
    action_space: Any = field(default=None, compare=False, repr=False)
    """The env's action space; None: ``Discrete(n_actions)``."""
    dict_layout: DictLayout | None = field(default=None, compare=False, repr=False)
    """How the env's Dict observations become the flat ones (None: not a Dict)."""

    @property
    def obs_dtype(self) -> type:
        """How replay keeps flat observations: images as bytes (a quarter of the memory;
        the encoder scales them on the device) unless other entries beside them need
        floats, everything else as float32."""
        space = self.observation_space
        if self.image is None or (space is not None and space.dtype != np.uint8):
            return np.float32
        return np.uint8

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        """(observation space, action space) as a network factory is given them."""
        obs = self.observation_space
        if obs is None:
            obs = gym.spaces.Box(-np.inf, np.inf, (self.obs_dim,), np.float32)
        act = (
            self.action_space
            if self.action_space is not None
            else gym.spaces.Discrete(self.n_actions)
        )
        return obs, act

    @property
    def hybrid(self) -> bool:
        """Whether actions are (discrete, continuous) pairs."""
        return self.action_dim > 0


def _hybrid_parts(space: gym.Space) -> tuple[gym.spaces.Discrete, gym.spaces.Box] | None:
    """The (Discrete, 1-D bounded Box) parts of a hybrid action space, else None."""
    if not isinstance(space, gym.spaces.Tuple) or len(space.spaces) != 2:
        return None
    disc, box = space.spaces
    ok = (
        isinstance(disc, gym.spaces.Discrete)
        and isinstance(box, gym.spaces.Box)
        and len(box.shape) == 1
        and bool(np.isfinite(box.low).all() and np.isfinite(box.high).all())
    )
    return (disc, box) if ok else None


def _hint(env_id: str, error: Exception) -> str:
    """What to try when gymnasium does not know ``env_id``'s namespace: the package that
    registers it is imported with ``--import`` (``env.imports``), or named in the id."""
    if not isinstance(error, gym.error.NamespaceNotFound):
        return ""
    namespace = env_id.split("/")[0]
    module = namespace.lower()
    return (
        f" If a package registers it, import it first: --import {module} (env.imports),"
        f" or env.id = '{module}:{env_id}'"
    )


def make_env(cfg: EnvConfig, *, evaluation: bool = False) -> gym.Env:
    """Create the env, rejecting ids that do not exist and action spaces DQN cannot act in
    (anything but Discrete, or Tuple(Discrete, bounded 1-D Box) for hybrid actions).

    Non-vector observations (Discrete, Tuple, images) are flattened, so the MLP learner
    sees a 1-D vector whatever the env; Dict observations as :mod:`shoal.envs.dict_obs`
    lays them out (``env.obs_keys``: which keys). Atari ids get the standard
    preprocessing (:mod:`shoal.envs.atari`); ``evaluation`` drops its training-only parts
    (episodic life, reward clipping), so evaluations report raw game scores.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = _make(cfg, evaluation)
    except gym.error.Error as e:
        raise EnvError(
            f"env.id {cfg.id!r}: cannot be made by gymnasium: {e}{_hint(cfg.id, e)}"
        ) from None
    except (ImportError, ModuleNotFoundError) as e:
        raise EnvError(f"env.id {cfg.id!r}: needs a package that is not installed: {e}") from None
    space = env.action_space
    if not isinstance(space, gym.spaces.Discrete) and _hybrid_parts(space) is None:
        env.close()
        raise EnvError(
            f"env.id {cfg.id!r}: action space is {space}; shoal's DQN needs a Discrete "
            "action space, or Tuple(Discrete, Box) with a bounded 1-D Box (hybrid actions)"
        )
    if cfg.step_cost_us > 0:
        env = StepCost(env, micros=cfg.step_cost_us, kind=cfg.step_cost_kind)
    try:
        return _flat_observations(env, cfg)
    except EnvError:
        env.close()
        raise


def _flat_observations(env: gym.Env, cfg: EnvConfig) -> gym.Env:
    """``env`` with 1-D observations: a Dict's laid out as ``env.obs_keys`` says, an image
    channels first, anything else flattened."""
    obs_space = env.observation_space
    if isinstance(obs_space, gym.spaces.Dict):
        return DictObservation(env, dict_layout(obs_space, cfg.obs_keys, cfg.id))
    if cfg.obs_keys:
        raise EnvError(
            f"config key 'env.obs_keys': {cfg.obs_keys} chooses keys of a Dict observation,"
            f" and env.id {cfg.id!r} observes {obs_space}; leave it empty ([])"
        )
    if channels_last(obs_space):
        env = ChannelsFirst(env)
        obs_space = env.observation_space
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        env = gym.wrappers.FlattenObservation(env)
    return env


def _make(cfg: EnvConfig, evaluation: bool) -> gym.Env:
    """The gymnasium env of ``cfg.id``, preprocessed and frame-stacked as configured."""
    import_env_modules(cfg)
    kwargs = dict(cfg.kwargs)
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    if is_atari(cfg.id):
        return atari_env(cfg.id, AtariSettings.from_config(cfg, evaluation=evaluation), **kwargs)
    register_pixel_envs(cfg.id)
    try:
        env = gym.make(cfg.id, disable_env_checker=True, **kwargs)
    except TypeError as e:  # a constructor argument the env does not take
        if not cfg.kwargs:
            raise
        raise EnvError(f"env.id {cfg.id!r} with env.kwargs {cfg.kwargs}: {e}") from None
    if cfg.frame_stack > 1:
        try:
            check_frame_stack(cfg.id, cfg.frame_stack, env.observation_space)
        except EnvError:
            env.close()
            raise
        env = gym.wrappers.FrameStackObservation(env, cfg.frame_stack)
    return env


def import_env_modules(cfg: EnvConfig) -> None:
    """Import ``env.imports`` and the module of a ``module:Id`` id (the working directory is
    searched too), so the env is registered in whichever process makes it."""
    from shoal.run.imports import import_modules

    import_modules(cfg.imports, "env.imports")
    import_id_module(cfg.id)


def import_id_module(env_id: str) -> None:
    """Import the module a ``module:Id`` id names (the working directory is searched too),
    so that it registers its envs; nothing for a plain id."""
    from shoal.run.imports import import_modules

    module, colon, _ = env_id.partition(":")
    if colon and module and all(p.isidentifier() for p in module.split(".")):
        import_modules([module], "env.id")


def _image(env: gym.Env) -> tuple[tuple[int, int, int] | None, float]:
    """The image shape (channels first) and largest pixel value behind the flattening, if
    the observations are images or a Dict with an image."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, DictObservation):
            return env.layout.image_shape, env.layout.image_high
        if isinstance(env, gym.wrappers.FlattenObservation):
            space = env.env.observation_space
            shape = image_shape(space)
            if shape is None or space.dtype != np.uint8:
                return None, 1.0
            return shape, float(np.max(space.high))
        env = env.env
    return None, 1.0


def probe_env(cfg: EnvConfig) -> EnvSpec:
    """Make the env once to validate it and read its sizes (and say which keys of a Dict
    observation it leaves out)."""
    env = make_env(cfg)
    try:
        obs_dim = int(np.prod(env.observation_space.shape))
        image, high = _image(env)
        layout = env.layout if isinstance(env, DictObservation) else None  # make_env's last
        if layout is not None:
            tell_dropped(cfg.id, layout)
        parts = _hybrid_parts(env.action_space)
        if parts is None:
            n = int(env.action_space.n)
            return EnvSpec(
                obs_dim=obs_dim,
                n_actions=n,
                image=image,
                image_high=high,
                board=getattr(env.unwrapped, "board_shape", None),
                observation_space=env.observation_space,
                action_space=env.action_space,
                dict_layout=layout,
            )
        disc, box = parts
        return EnvSpec(
            obs_dim=obs_dim,
            observation_space=env.observation_space,
            action_space=env.action_space,
            dict_layout=layout,
            n_actions=int(disc.n),
            action_dim=int(box.shape[0]),
            action_low=tuple(float(x) for x in box.low),
            action_high=tuple(float(x) for x in box.high),
        )
    finally:
        env.close()
