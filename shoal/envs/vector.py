"""A batch of envs stepped as one: the engines behind every actor (``env.vector``).

* ``"sync"``: the envs in this process, stepped one after another in a loop
  (:class:`EnvList`; the default: no processes, no pickling, any env). It does what
  :class:`gymnasium.vector.SyncVectorEnv` with autoreset off does, without the per-step
  space checks and buffer copies that cost 2x at one env and 1.4x per env step at 32
  (CartPole, measured); episodes are reset by the caller anyway.
* ``"async"``: :class:`gymnasium.vector.AsyncVectorEnv`, one spawned process per env (pays
  only for envs whose step costs far more than a pipe round trip).
* ``"envpool"``: envpool's C++ pool (an optional extra), stepped outside the GIL.

The sync and async engines run with autoreset off: shoal resets a finished env itself,
seeded from (run seed, actor, env index, episode), so episode starts are the same whatever
the batch and a resumed run re-creates them. envpool resets a finished env on its next
step by itself (the step's action is ignored and its reward is not a transition): such an
engine says ``autoreset = True`` and the caller skips that step for that env.
"""

from __future__ import annotations

import functools
import importlib.util
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from shoal.config import VECTOR_ENGINES, EnvConfig
from shoal.envs.atari import AtariSettings, envpool_atari, envpool_task, is_atari
from shoal.envs.gym_env import make_env
from shoal.errors import ConfigError, EnvError

__all__ = ["ENGINES", "EnvList", "VectorEnvs", "check_engine", "make_vector_env"]

ENGINES = VECTOR_ENGINES
"""Values of ``env.vector``."""


class VectorEnvs:
    """``num_envs`` envs stepped as one batch (see the module docstring).

    Args:
        vec: the gymnasium vector env or envpool pool.
        autoreset: whether the engine resets a finished env on its next step by itself.
        envs: the env objects when they live in this process (the sync engine), else None.
    """

    def __init__(self, vec: Any, num_envs: int, *, autoreset: bool, envs: Any = None) -> None:
        self.vec = vec
        self.num_envs = num_envs
        self.autoreset = autoreset
        self.envs: list[gym.Env] | None = envs
        """The envs themselves (sync engine only: plug-ins that set up an env's episode,
        e.g. load a self-play opponent, and resume's re-play need them)."""

    def reset(self, seeds: list[int] | None = None) -> np.ndarray:
        """Reset every env (env i from ``seeds[i]``); their first observations."""
        obs, _ = self.vec.reset(seed=seeds)
        return _flat(obs, self.num_envs)

    def reset_some(self, mask: np.ndarray, seeds: list[int | None]) -> np.ndarray:
        """Reset the envs where ``mask`` is set (engines without autoreset); every env's
        observation, the others' unchanged."""
        obs, _ = self.vec.reset(seed=seeds, options={"reset_mask": mask})
        return _flat(obs, self.num_envs)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One step of every env: observations, rewards, terminated, truncated. Hybrid
        actions come as a list of ``(discrete, continuous)`` pairs."""
        if isinstance(actions, list):  # gymnasium batches a Tuple space part by part
            actions = (np.array([a for a, _ in actions]), np.stack([x for _, x in actions]))
        obs, rew, term, trunc, _ = self.vec.step(actions)
        obs = _flat(obs, self.num_envs)
        return obs, np.asarray(rew, np.float64), np.asarray(term), np.asarray(trunc)

    def close(self) -> None:
        """Close the envs (and the async engine's processes)."""
        self.vec.close()


def _flat(obs: Any, num_envs: int) -> np.ndarray:
    """One flat row per env (envpool's Atari frames come as stacks of images)."""
    return np.asarray(obs).reshape(num_envs, -1)


class EnvList(VectorEnvs):
    """The sync engine: gymnasium envs in this process, stepped in turn."""

    def __init__(self, envs: list[gym.Env]) -> None:
        super().__init__(None, len(envs), autoreset=False, envs=envs)
        self._obs: np.ndarray | None = None

    def reset(self, seeds: list[int] | None = None) -> np.ndarray:
        """Reset every env (env i from ``seeds[i]``); their first observations."""
        seeds = seeds or [None] * self.num_envs  # type: ignore[list-item]
        assert self.envs is not None
        self._obs = np.stack([env.reset(seed=s)[0] for env, s in zip(self.envs, seeds)])
        return self._obs

    def reset_some(self, mask: np.ndarray, seeds: list[int | None]) -> np.ndarray:
        """Reset the envs where ``mask`` is set; every env's observation, the others'
        unchanged."""
        assert self.envs is not None and self._obs is not None
        obs = self._obs.copy()  # the step's observations stay as the step returned them
        for i in np.flatnonzero(mask):
            obs[i] = self.envs[i].reset(seed=seeds[i])[0]
        self._obs = obs
        return obs

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One step of every env, in turn."""
        assert self.envs is not None
        # An int array's items go as numpy ints (hybrid pairs as they are): a Discrete
        # space checks a numpy int faster than a Python int.
        if self.num_envs == 1:  # the common single env: no zips, no stack
            obs, rew, term, trunc, _ = self.envs[0].step(actions[0])
            self._obs = np.asarray(obs)[None]
            return self._obs, np.array([rew], np.float64), np.array([term]), np.array([trunc])
        out = [env.step(a) for env, a in zip(self.envs, actions)]
        obs, rew, term, trunc, _ = zip(*out)
        self._obs = np.stack(obs)
        return self._obs, np.array(rew, np.float64), np.array(term), np.array(trunc)

    def close(self) -> None:
        """Close every env."""
        for env in self.envs or ():
            env.close()


def check_engine(cfg: EnvConfig) -> None:
    """A one-line error, before any work, for an engine that cannot serve ``cfg``: envpool
    not installed, an id envpool does not know, or a setting it cannot honour."""
    if cfg.vector != "envpool":
        return
    if importlib.util.find_spec("envpool") is None:
        raise ConfigError(
            "config key 'env.vector': 'envpool' needs the envpool package, which is not "
            "installed (pip install 'shoal[envpool]'), or use 'sync' or 'async'"
        )
    if _envpool_id(cfg) not in _envpool_ids():
        raise EnvError(
            f"env.id {cfg.id!r}: envpool does not know this id (env.vector='envpool'); use "
            "one of envpool.list_all_envs(), e.g. 'CartPole-v1', or env.vector='sync'"
        )
    if cfg.step_cost_us > 0:
        raise ConfigError(
            "config key 'env.step_cost_us': cannot be added to envpool's C++ envs; "
            "use env.vector='sync' or 'async' with a step cost"
        )
    if cfg.frame_stack > 1 and not is_atari(cfg.id):
        raise ConfigError(
            f"config key 'env.frame_stack': {cfg.frame_stack} with env.vector='envpool' is"
            " for Atari ids only; use env.vector='sync'"
        )


def _envpool_id(cfg: EnvConfig) -> str:
    """envpool's name for ``cfg.id`` (its Atari games are ``Pong-v5``, not ``ALE/Pong-v5``)."""
    return envpool_task(cfg.id) if is_atari(cfg.id) else cfg.id


@functools.cache
def _envpool_ids() -> frozenset[str]:
    import envpool

    return frozenset(envpool.list_all_envs())


def make_vector_env(cfg: EnvConfig, num_envs: int, seed: int = 0) -> VectorEnvs:
    """``num_envs`` envs of ``cfg`` on the engine ``cfg.vector``; ``seed`` seeds envpool's
    pool (the gymnasium engines are seeded at every reset instead)."""
    if num_envs <= 0:
        raise ConfigError(f"num_envs: {num_envs} is out of range; allowed: > 0")
    check_engine(cfg)
    if cfg.vector == "envpool":
        return _envpool(cfg, num_envs, seed)
    make = functools.partial(make_env, cfg)
    disabled = gym.vector.AutoresetMode.DISABLED
    if cfg.vector == "async":
        # spawn, not fork: torch is loaded in the parent (DESIGN: CUDA and fork do not mix)
        vec = gym.vector.AsyncVectorEnv(
            [make] * num_envs, context="spawn", autoreset_mode=disabled, copy=True
        )
        return VectorEnvs(vec, num_envs, autoreset=False)
    return EnvList([make() for _ in range(num_envs)])


def _envpool(cfg: EnvConfig, num_envs: int, seed: int) -> VectorEnvs:
    import envpool

    kwargs = envpool_atari(cfg.id, AtariSettings.from_config(cfg)) if is_atari(cfg.id) else {}
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    with warnings.catch_warnings():  # its spaces' float64 bounds, cast to float32
        warnings.simplefilter("ignore")
        # envpool seeds env i with seed + i; keep the sum inside its 32-bit range
        pool = envpool.make(
            _envpool_id(cfg), env_type="gymnasium", num_envs=num_envs, seed=seed % 2**30, **kwargs
        )
        _ = (pool.observation_space, pool.action_space)  # built lazily, warnings and all
    return VectorEnvs(pool, num_envs, autoreset=True)
