"""A trained policy back in the user's own code: :func:`load_policy` reads a run's
checkpoint and returns its network (the user's own module, for ``dqn.network`` runs) with
the trained weights, and a greedy ``act``.

It plays what ``shoal eval`` plays: the same network, weights and greedy rule (legal
actions only where ``dqn.action_mask`` is set), on observations as shoal's envs give them
(:meth:`Policy.make_env` makes such an env: flattened, images channels first) or, for an
env whose observations are Dicts, as the env itself gives them (MiniGrid's
``gymnasium.make(id).reset()[0]``): :meth:`Policy.act` flattens them as training did. An
observation with NaN or inf is refused (:class:`~shoal.errors.ObservationError`). A recurrent
run's policy (``run.recipe = "r2d2"``) carries its memory from one :meth:`Policy.act` to the
next, one per row of a batch, as evaluation does: call :meth:`Policy.reset` as each
episode begins.

Example:
    >>> import shoal  # doctest: +SKIP
    >>> policy = shoal.load_policy("runs/cartpole-20261125-120000")  # doctest: +SKIP
    >>> env = policy.make_env()  # doctest: +SKIP
    >>> obs, _ = env.reset(seed=0)  # doctest: +SKIP
    >>> policy.reset()  # doctest: +SKIP
    >>> action = policy.act(obs)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from torch import nn

from shoal.errors import ConfigError, ObservationError

if TYPE_CHECKING:
    from shoal.envs.dict_obs import DictLayout

__all__ = ["Policy", "load_policy"]


@dataclass
class Policy:
    """A trained network and its greedy actions."""

    network: nn.Module
    """The trained network, weights loaded, in eval mode, gradients off (for a
    ``dqn.network`` run: the module the user's factory made)."""
    config: Any
    """The run's :class:`~shoal.config.Config`."""
    actor: Any
    """The actor that picks greedy actions with the network (shoal eval's)."""
    memory: Any = field(default=None, repr=False)
    """A recurrent run's greedy policy with one memory per row (None: not recurrent, or
    no action since :meth:`reset`)."""
    obs_dim: int | None = None
    """The size of one flat observation, as the run's env gives it (None: unchecked)."""
    dict_layout: DictLayout | None = field(default=None, repr=False)
    """How the env's own Dict observations become flat ones, as in training (None: the
    env's observations are not Dicts)."""

    @property
    def recurrent(self) -> bool:
        """Whether actions depend on the episode so far (call :meth:`reset` as each
        episode begins)."""
        return bool(getattr(self.network, "recurrent", False))

    def reset(self) -> None:
        """Forget the episode so far: a recurrent policy's memory starts fresh at the next
        :meth:`act` (nothing to forget for others)."""
        self.memory = None

    def act(self, obs: Any) -> Any:
        """The greedy action for one observation, or an array of them for a batch; a
        recurrent policy steps its memory (one per row) on them. An observation is flat,
        as :meth:`make_env`'s env gives it (a batch: ``(batch, obs_dim)``), or, for an env
        whose observations are Dicts, the env's own dict (a batch: a list of them). An
        :class:`~shoal.errors.ObservationError` for one of another shape, a dict that does
        not fit, or NaN or inf."""
        batch, single = self._rows(obs)
        if self.recurrent:
            actions = self._recurrent_act(batch)
        else:
            actions = self.actor.greedy(batch)
        return actions[0] if single else actions

    def _rows(self, obs: Any) -> tuple[np.ndarray, bool]:
        """``obs`` as a batch of flat float rows, and whether it was one observation."""
        dicts = isinstance(obs, Mapping) or (
            isinstance(obs, (list, tuple)) and len(obs) > 0 and isinstance(obs[0], Mapping)
        )
        if dicts:
            single = isinstance(obs, Mapping)
            batch = self._flatten([obs] if single else obs)
        else:
            try:
                x = np.asarray(obs, np.float32)
            except (TypeError, ValueError) as e:
                raise ObservationError(f"Policy.act: the observation is not numbers: {e}") from None
            single = x.ndim == 1
            batch = x[None] if single else x
        # an image left unflattened, (channels, height, width), would otherwise read as a
        # batch of rows
        if self.obs_dim is not None and (batch.ndim != 2 or batch.shape[1] != self.obs_dim):
            shape = np.shape(obs) if not dicts else batch.shape
            raise ObservationError(
                f"Policy.act takes one flat observation of {self.obs_dim} values or a batch"
                f" (batch, {self.obs_dim}), as the run's env gives them (Policy.make_env);"
                f" got shape {shape}"
            )
        self._check_finite(batch, single)
        return batch, single

    def _flatten(self, dicts: Any) -> np.ndarray:
        """The env's own Dict observations as flat float rows, as training read them."""
        if self.dict_layout is None:
            raise ObservationError(
                f"Policy.act: got a dict, and env.id {self.config.env.id!r} observes flat"
                " vectors; pass them as Policy.make_env's env gives them"
            )
        try:
            return np.stack([self.dict_layout.flatten(o) for o in dicts]).astype(np.float32)
        except ObservationError as e:
            raise ObservationError(f"Policy.act: {e}") from None

    def _check_finite(self, batch: np.ndarray, single: bool) -> None:
        """NaN or inf is refused with where it is, not passed to the network."""
        bad = np.argwhere(~np.isfinite(batch))
        if not len(bad):
            return
        row, entry = (int(i) for i in bad[0])
        where = "" if single else f"row {row}, "
        key = "" if self.dict_layout is None else f" (key {self.dict_layout.key_at(entry)!r})"
        raise ObservationError(
            f"Policy.act: observation {where}entry {entry}{key} is {batch[row, entry]};"
            " observations must be finite numbers (no NaN or inf)"
        )

    def _recurrent_act(self, batch: np.ndarray) -> np.ndarray:
        from shoal.registry import recipe_for

        if self.memory is None:
            self.memory = recipe_for(self.config).eval_policy(self.actor, len(batch))
        elif self.memory.n != len(batch):
            raise ValueError(
                f"this recurrent policy holds memories for {self.memory.n} rows, got a"
                f" batch of {len(batch)}: call reset() as new episodes begin"
            )
        return self.memory(batch, range(len(batch)))

    def make_env(self, **kwargs: Any) -> Any:
        """An evaluation env of the run, observations as the network reads them."""
        from shoal.envs import make_env

        return make_env(self.config.env, evaluation=True, **kwargs)


def load_policy(
    run_dir: str | Path, checkpoint: str = "best", *, device: str = "cpu", trust_code: bool = False
) -> Policy:
    """The trained policy of a single-agent DQN run: its ``best`` (default) or ``latest``
    checkpoint's network on ``device`` (``'cpu'``, or ``'cuda'`` / ``'cuda:N'`` where
    CUDA is; anything else is a :class:`~shoal.errors.ConfigError` before anything is
    read). A run whose config names code (its own network factory, env modules, a recipe)
    opens only with ``trust_code=True``, and that code must import here, as for ``shoal
    eval`` (:mod:`shoal.run.consent`)."""
    from shoal.api import open_run_checkpoint

    _check_device(device)
    with open_run_checkpoint(run_dir, 1, checkpoint, trust_code=trust_code) as opened:
        return _policy(run_dir, *opened, device)


def _check_device(device: Any) -> None:
    """``device`` is one this machine has: ``'cpu'``, or a CUDA device where torch sees
    one; else one :class:`~shoal.errors.ConfigError` line naming it and what is allowed."""
    import torch

    allowed = "'cpu', or 'cuda' / 'cuda:N' on a machine with CUDA"
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ConfigError(
            f"load_policy device {device!r}: not a device torch knows; use {allowed}"
        ) from None
    if parsed.type == "cpu":
        return
    if parsed.type != "cuda":
        raise ConfigError(f"load_policy device {device!r}: shoal runs on {allowed}")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ConfigError(
            f"load_policy device {device!r}: this machine has no CUDA device"
            " (torch.cuda.is_available() is False); use 'cpu'"
        )
    if parsed.index is not None and parsed.index >= count:
        raise ConfigError(
            f"load_policy device {device!r}: this machine has {count} CUDA device(s),"
            f" 'cuda:0' to 'cuda:{count - 1}'; use one of them or 'cpu'"
        )


def _policy(
    run_dir: str | Path, cfg: Any, state: dict[str, Any], path: Path, device: str
) -> Policy:
    """The policy of a run's checkpoint, once its config is allowed to load."""
    import torch

    from shoal.agent.networks import load_weights
    from shoal.recipes.contract import ActorWeights
    from shoal.registry import recipe_for
    from shoal.run.checkpoint import checkpoint_fits
    from shoal.runners import runner_for

    if runner_for(cfg).multi_agent:
        raise ConfigError(
            f"run '{run_dir}' (run.runner {cfg.run.runner!r}): load_policy reads single-agent "
            "DQN runs; play a multi-agent run's agents with shoal.play_run"
        )
    recipe = recipe_for(cfg)
    if not recipe.traits.batches_envs:
        raise ConfigError(
            f"run '{run_dir}' (run.recipe {cfg.run.recipe!r}) plays worlds of its own, not one"
            f" env; evaluate it with its own tool (a MAPF run: `shoal mapf eval {run_dir}`)"
        )
    spec = recipe.probe(cfg)
    with torch.random.fork_rng():  # the weights come from the checkpoint
        network = recipe.make_network(cfg, spec)
    with checkpoint_fits(path, "the run's config"):
        load_weights(network, state["learner"]["online"])
    network = network.to(device).eval().requires_grad_(False)
    weights = ActorWeights(network=network, device=device)
    actor = recipe.make_actor(cfg, spec, np.random.default_rng(0), weights)
    return Policy(network, cfg, actor, obs_dim=spec.obs_dim, dict_layout=spec.dict_layout)
