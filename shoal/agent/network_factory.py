"""A user's own Q-network: ``dqn.network = "package.module:factory"``.

The factory is called with the env's observation and action spaces (the flat observation
space shoal's envs give the networks) and returns an ``nn.Module`` that maps a batch of
observations ``(batch, obs_dim)`` to Q-values ``(batch, n_actions)``. It is used as it is:
learners and actors apply it to explicit weights with ``torch.func.functional_call``
(:func:`~shoal.agent.networks.apply_network`), K stacked copies with ``vmap``, so it needs
nothing of shoal. Every process of a run (spawned workers, Ray actors, ``shoal eval``)
builds it from the same path, which the run's ``config.toml`` records.

It is checked before any work: the path imports, names a callable, the callable returns a
module, and the module gives ``(batch, n_actions)`` floats for a probe batch. Each failure
is one line naming ``dqn.network``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from shoal.envs.gym_env import EnvSpec
from shoal.errors import ConfigError, first_line
from shoal.run.imports import load_object, shown

__all__ = ["KEY", "build_user_network", "check_output"]

KEY = "dqn.network"
"""The config key naming the factory."""

PROBE_BATCH = 2
"""Observations in the probe batch (two: a network that drops the batch axis is caught)."""


def build_user_network(path: str, spec: EnvSpec) -> nn.Module:
    """The module ``path``'s factory returns for ``spec``'s spaces, checked on a probe
    batch."""
    if spec.hybrid:
        raise ConfigError(
            f"config key {KEY!r}: your own network on hybrid (discrete, continuous) actions "
            "is not supported yet; leave dqn.network empty for shoal's hybrid network"
        )
    factory = load_object(path, KEY, "the network factory's")
    if not callable(factory):
        raise ConfigError(
            f"config key {KEY!r}: {shown(path)} is a {type(factory).__name__}, not a callable "
            "factory(observation_space, action_space) -> nn.Module"
        )
    obs_space, act_space = spec.spaces()
    try:
        network = factory(obs_space, act_space)
    except Exception as e:
        raise ConfigError(
            f"config key {KEY!r}: {path}(observation_space, action_space) raised {first_line(e)}"
        ) from e
    if not isinstance(network, nn.Module):
        raise ConfigError(
            f"config key {KEY!r}: {path}(observation_space, action_space) returned a "
            f"{type(network).__name__}, not a torch.nn.Module"
        )
    check_output(path, network, spec)
    return network


def _probe_batch(spec: EnvSpec) -> torch.Tensor:
    """Observations the env can give (a sample of its space), as the networks get them."""
    space = spec.spaces()[0]
    try:
        rows = [np.asarray(space.sample(), np.float32).reshape(-1) for _ in range(PROBE_BATCH)]
        obs = np.stack(rows)
    except Exception:  # a space that cannot sample: zeros of the right size
        obs = np.zeros((PROBE_BATCH, spec.obs_dim), np.float32)
    return torch.as_tensor(np.nan_to_num(obs, posinf=1.0, neginf=-1.0))


def check_output(path: str, network: nn.Module, spec: EnvSpec) -> None:
    """One line unless ``network`` maps a probe batch to ``(batch, n_actions)`` floats."""
    x = _probe_batch(spec)
    try:
        with torch.no_grad():
            out: Any = network(x)
    except Exception as e:
        raise ConfigError(
            f"config key {KEY!r}: the network of {path} failed on a batch of observations "
            f"of shape {tuple(x.shape)}: {first_line(e)}"
        ) from e
    want = (PROBE_BATCH, spec.n_actions)
    if not isinstance(out, torch.Tensor):
        raise ConfigError(
            f"config key {KEY!r}: the network of {path} returned a {type(out).__name__}; "
            f"it must return Q-values, a tensor of shape (batch, n_actions) = {want}"
        )
    if tuple(out.shape) != want or not out.is_floating_point():
        raise ConfigError(
            f"config key {KEY!r}: the network of {path} maps observations of shape "
            f"{tuple(x.shape)} to {out.dtype} of shape {tuple(out.shape)}; it must give "
            f"Q-values of shape (batch, n_actions) = {want}"
        )
