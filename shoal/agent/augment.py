"""Data augmentation of replayed batches (``dqn.augment``): each sampled transition is
changed by a transformation the task is known to be invariant to, so the learner sees
more distinct inputs than the env gave it.

- ``'shift'``: image observations moved by up to 4 pixels each way (the border's pixels
  repeated), ``obs`` and ``next_obs`` independently: DrQ's random shifts (Kostrikov et al.
  2021), which took data-efficient DQN past data-efficient Rainbow on Atari 100k
  (Agarwal et al. 2021's DrQ(eps)).
- ``'mirror'``: half the transitions of a board game whose action is a column, mirrored
  left to right: the board at the start of the observation (``dqn.board``) flipped along
  its width, the action ``a`` read as ``width - 1 - a`` and the legal-action mask at the
  end of the observation (``dqn.action_mask``) reversed. Connect Four's rules are
  symmetric that way, so a pattern learned on one side is learned on the other.

Augmentation runs on the host, on the sample before it becomes tensors, so a captured
CUDA graph update is unchanged; its generator is seeded from the run seed and saved in
the learner's checkpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shoal.config.schema import AUGMENTS
from shoal.errors import ConfigError

__all__ = ["Augment", "SHIFT_PAD", "shift"]

SHIFT_PAD = 4
"""Pixels a ``'shift'`` moves an image by at most, each way (DrQ's for 84 x 84 frames)."""


class Augment:
    """One kind of augmentation for a learner's batches, with its own generator.

    Args:
        kind: ``'shift'`` or ``'mirror'`` (see the module docstring).
        seed: the generator's seed.
        image: the observations' ``(C, H, W)`` when they are images (needed by 'shift').
        board: ``[height, width, channels]`` at the start of flat observations (needed by
            'mirror'), with ``n_actions`` equal to its width.
        n_actions: the env's actions.
        action_mask: the observations end with a mask of ``n_actions`` legal actions.
    """

    def __init__(
        self,
        kind: str,
        seed: int,
        *,
        image: Sequence[int] | None = None,
        board: Sequence[int] = (),
        n_actions: int = 0,
        action_mask: bool = False,
    ) -> None:
        if kind not in AUGMENTS[1:]:
            raise ConfigError(f"config key 'dqn.augment': {kind!r} is not 'shift' or 'mirror'")
        if kind == "shift" and not image:
            raise ConfigError(
                "config key 'dqn.augment': 'shift' moves images, and this env's observations"
                " are not images (use 'none', or 'mirror' for a board)"
            )
        if kind == "mirror":
            _check_mirror(board, n_actions)
        self.kind = kind
        self.image = tuple(image or ())
        self.board = tuple(board)
        self.n_actions = n_actions
        self.action_mask = action_mask
        self.rng = np.random.default_rng(seed)
        self._lock = threading.Lock()  # learner threads make batches side by side

    def __call__(self, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``sample`` with its observations (and, for 'mirror', actions) augmented; the
        other fields (rewards, discounts, indices, weights) as they were."""
        out = dict(sample)
        with self._lock:
            if self.kind == "shift":
                out["obs"] = self._shift_obs(np.asarray(sample["obs"]))
                out["next_obs"] = self._shift_obs(np.asarray(sample["next_obs"]))
            else:
                flip = self.rng.random(len(sample["action"])) < 0.5
                out["obs"] = self._mirror_obs(np.asarray(sample["obs"]), flip)
                out["next_obs"] = self._mirror_obs(np.asarray(sample["next_obs"]), flip)
                action = np.array(sample["action"], copy=True)
                action[flip] = self.n_actions - 1 - action[flip]
                out["action"] = action
        return out

    def _shift_obs(self, obs: np.ndarray) -> np.ndarray:
        """Flat image observations (as replay keeps them) shifted, flat again; the entries
        after the image (a Dict observation's others) as they were."""
        pixels = int(np.prod(self.image))
        image = shift(obs[:, :pixels].reshape(len(obs), *self.image), self.rng)
        image = image.reshape(len(obs), pixels)
        return image if obs.shape[1] == pixels else np.concatenate([image, obs[:, pixels:]], 1)

    def _mirror_obs(self, obs: np.ndarray, flip: np.ndarray) -> np.ndarray:
        """Rows of ``obs`` where ``flip`` is set, mirrored (board columns and mask)."""
        out = np.array(obs, copy=True)
        h, w, c = self.board
        cells = h * w * c
        rows = out[flip]
        board = rows[:, :cells].reshape(-1, h, w, c)
        rows[:, :cells] = board[:, :, ::-1, :].reshape(-1, cells)
        if self.action_mask:
            rows[:, -self.n_actions :] = rows[:, -self.n_actions :][:, ::-1]
        out[flip] = rows
        return out

    def state_dict(self) -> dict[str, Any]:
        """The generator's state, for a checkpoint."""
        return dict(self.rng.bit_generator.state)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.rng.bit_generator.state = dict(state)


def shift(images: np.ndarray, rng: np.random.Generator, pad: int = SHIFT_PAD) -> np.ndarray:
    """Each image of ``images`` ``(B, C, H, W)`` moved by up to ``pad`` pixels each way at
    random, the border's pixels repeated into the space it leaves."""
    b, _, h, w = images.shape
    padded = np.pad(images, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="edge")
    dy, dx = rng.integers(0, 2 * pad + 1, (2, b))
    out = np.empty_like(images)
    for i in range(b):  # slices, not fancy indexing: a copy per image is the cheap way
        out[i] = padded[i, :, dy[i] : dy[i] + h, dx[i] : dx[i] + w]
    return out


def _check_mirror(board: Sequence[int], n_actions: int) -> None:
    """A mirror needs a board whose columns are the actions."""
    if not board:
        raise ConfigError(
            "config key 'dqn.augment': 'mirror' flips the board at the start of each "
            "observation; set dqn.board = [height, width, channels]"
        )
    if n_actions != board[1]:
        raise ConfigError(
            f"config key 'dqn.augment': 'mirror' reads action a as column a of the board, "
            f"and this env has {n_actions} actions where the board (dqn.board or the env's "
            f"board_shape) is {board[1]} wide"
        )
