"""Atari through gymnasium and ale-py, with the preprocessing DQN papers train on.

The standard (Mnih et al. 2015, as Machado et al. 2018 and the reference libraries apply
it): up to 30 no-op steps at reset, the action repeated 4 frames with the last two frames
max-pooled, the screen as 84 x 84 grey bytes, the last 4 screens stacked; for training
only, a lost life ends the episode (the game goes on) and rewards are clipped to their sign.
Evaluation plays whole games and reports raw scores. gymnasium's ``AtariPreprocessing``,
``ClipReward`` and ``FrameStackObservation`` do the work; :class:`EpisodicLife` is the one
wrapper gymnasium lacks (its ``terminal_on_life_loss`` restarts the game at the next reset).

envpool's Atari pool does the same in C++ threads: :func:`envpool_atari` gives it the same
settings (its defaults differ: fire at reset, no sticky actions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from shoal.config import EnvConfig
from shoal.errors import EnvError

__all__ = [
    "AtariSettings",
    "EpisodicLife",
    "atari_env",
    "check_frame_stack",
    "envpool_atari",
    "envpool_task",
    "is_atari",
    "register_atari",
]

NOOP_MAX = 30
FRAME_SKIP = 4
SCREEN = 84


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` names an ALE game: ``ALE/<Game>-v5`` or ``<Game>NoFrameskip-v4``."""
    return env_id.startswith("ALE/") or env_id.endswith("NoFrameskip-v4")


def register_atari(env_id: str) -> None:
    """Make the ALE ids known to gymnasium; an :class:`~shoal.errors.EnvError` naming the
    package when ale-py is not installed."""
    try:
        import ale_py
    except ImportError:
        raise EnvError(
            f"env.id {env_id!r}: Atari games need the ale-py package (pip install 'shoal[pixels]')"
        ) from None
    gym.register_envs(ale_py)


class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode for the learner, but the game goes on: the next reset
    plays one no-op step instead of restarting, unless the game itself is over (the bootstrap
    then stops at every death, which speeds up learning in games with lives)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """One step; terminated also when a life was lost."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """A new game after a game over, else one no-op step into the next life."""
        if self._game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op ended the game: start a new one
                obs, info = self.env.reset(**kwargs)
        self._game_over = False
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info


@dataclass(frozen=True)
class AtariSettings:
    """How a game is preprocessed beyond the standard: the stack depth, sticky actions
    (None: the id's own, 0.25 for v5, 0 for NoFrameskip-v4), and the training-only parts
    (off when ``evaluation``)."""

    frame_stack: int = 4
    sticky: float | None = None
    episodic_life: bool = True
    clip_rewards: bool = True
    evaluation: bool = False

    @classmethod
    def from_config(cls, cfg: EnvConfig, *, evaluation: bool = False) -> AtariSettings:
        """The settings ``cfg``'s ``env.*`` keys give."""
        return cls(
            cfg.frame_stack, cfg.sticky_actions, cfg.episodic_life, cfg.clip_rewards, evaluation
        )

    @property
    def life_ends_episode(self) -> bool:
        """Whether a lost life ends the learner's episode."""
        return self.episodic_life and not self.evaluation

    @property
    def clipped(self) -> bool:
        """Whether rewards are clipped to [-1, 1]."""
        return self.clip_rewards and not self.evaluation


def atari_env(env_id: str, settings: AtariSettings, **kwargs: Any) -> gym.Env:
    """The ALE game ``env_id`` preprocessed as above; observations ``(frame_stack, 84, 84)``
    uint8 (``kwargs`` go to ``gym.make``)."""
    register_atari(env_id)
    if settings.sticky is not None:
        kwargs["repeat_action_probability"] = settings.sticky
    env = gym.make(env_id, frameskip=1, disable_env_checker=True, **kwargs)
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=NOOP_MAX, frame_skip=FRAME_SKIP, screen_size=SCREEN
    )
    if settings.life_ends_episode:
        env = EpisodicLife(env)
    if settings.clipped:
        env = gym.wrappers.ClipReward(env, -1.0, 1.0)
    return gym.wrappers.FrameStackObservation(env, settings.frame_stack)


def envpool_task(env_id: str) -> str:
    """envpool's name for an ALE id (``Pong-v5`` for ``ALE/Pong-v5`` and ``PongNoFrameskip-v4``)."""
    return env_id.removeprefix("ALE/").replace("NoFrameskip-v4", "-v5")


def envpool_atari(env_id: str, settings: AtariSettings) -> dict[str, Any]:
    """envpool's settings for the game, preprocessed as :func:`atari_env` does (no fire at
    reset; sticky actions as the gymnasium id has them)."""
    v4 = env_id.endswith("NoFrameskip-v4")
    sticky = settings.sticky if settings.sticky is not None else (0.0 if v4 else 0.25)
    return {
        "stack_num": settings.frame_stack,
        "frame_skip": FRAME_SKIP,
        "noop_max": NOOP_MAX,
        "img_height": SCREEN,
        "img_width": SCREEN,
        "use_fire_reset": False,
        "repeat_action_probability": sticky,
        "episodic_life": settings.life_ends_episode,
        "reward_clip": settings.clipped,
    }


def check_frame_stack(env_id: str, frame_stack: int, space: gym.Space) -> None:
    """A one-line error for a frame stack on anything but 2-D byte frames (grey screens)
    or flat vectors (the last K observations side by side: a feed-forward agent's memory
    on a partially observed env)."""
    if frame_stack == 1:
        return
    shape = getattr(space, "shape", None)
    box = isinstance(space, gym.spaces.Box) and shape is not None
    if box and len(shape) == 1:  # type: ignore[arg-type]
        return
    if not (box and len(shape) == 2):  # type: ignore[arg-type]
        raise EnvError(
            f"config key 'env.frame_stack': {frame_stack} needs 2-D frames (grey screens) or"
            f" flat vectors, but env.id {env_id!r} observes shape {shape}; use"
            " env.frame_stack=1"
        )
    if space.dtype != np.uint8:
        raise EnvError(
            f"config key 'env.frame_stack': {frame_stack} needs byte frames (uint8), but"
            f" env.id {env_id!r} observes {space.dtype}; use env.frame_stack=1"
        )
