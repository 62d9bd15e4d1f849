"""A user's own Q-network: ``dqn.network = "package.module:factory"``.

The factory is called with the env's observation and action spaces (the flat observation
space shoal's envs give the networks) and returns an ``nn.Module`` that maps a batch of
observations ``(batch, obs_dim)`` to Q-values ``(batch, n_actions)`` (for hybrid
(discrete, continuous) actions, as shoal's hybrid network does: the Q-values and a
continuous action per discrete one, ``(batch, n_actions, action_dim)``, which acting clips
to the action box). It is used as it is:
learners and actors apply it to explicit weights with ``torch.func.functional_call``
(:func:`~shoal.agent.networks.apply_network`), K stacked copies with ``vmap``, so it needs
nothing of shoal. Every process of a run (spawned workers, Ray actors, ``shoal eval``)
builds it from the same path, which the run's ``config.toml`` records.

It is checked before any work: the path imports, names a callable, the callable returns a
module, and the module gives ``(batch, n_actions)`` floats for a probe batch. Each failure
is one line naming ``dqn.network``.

A recurrent recipe's (R2D2's) network carries a memory: its ``forward(obs, state)``
returns ``(q, next_state)`` and its ``initial_state(batch)`` gives the memory an episode
starts from, one float tensor ``(batch, size)`` (an LSTM's ``(h, c)`` side by side), which
replay stores with each sequence (:func:`build_user_recurrent`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from shoal.envs.gym_env import EnvSpec
from shoal.errors import ConfigError, first_line
from shoal.run.imports import check_factory, load_object

__all__ = [
    "KEY",
    "build_user_network",
    "build_user_recurrent",
    "build_user_torso",
    "check_output",
    "memory_width",
]

KEY = "dqn.network"
"""The config key naming the factory."""

Q_VALUES = "Q-values of shape (batch, n_actions)"
PROBE_BATCH = 2
"""Observations in the probe batch (two: a network that drops the batch axis is caught)."""


def build_user_network(path: str, spec: EnvSpec) -> nn.Module:
    """The module ``path``'s factory returns for ``spec``'s spaces, checked on a probe
    batch."""
    network = _call_factory(path, spec, KEY)
    check_output(path, network, spec)
    return network


RECURRENT = (
    "forward(obs, state) -> (q, next_state) and initial_state(batch) -> state, one float "
    "tensor (batch, size)"
)
"""What a recurrent recipe's network must have, as its errors say."""


def build_user_recurrent(path: str, spec: EnvSpec) -> nn.Module:
    """The module ``path``'s factory returns for ``spec``'s spaces as a recurrent
    Q-network, checked on a probe batch (see the module docstring) and marked
    ``recurrent`` (actors then carry its memory)."""
    network = _call_factory(path, spec, KEY)
    init = getattr(network, "initial_state", None)
    if not callable(init):
        raise ConfigError(
            f"config key {KEY!r}: the network of {path} has no initial_state(batch); the "
            f"'r2d2' recipe's network needs {RECURRENT}"
        )
    state = _probe_state(path, init)
    out, x = _on_probe_batch(network, "network", path, spec, KEY, state)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise ConfigError(
            f"config key {KEY!r}: forward(obs, state) of {path} returned a "
            f"{type(out).__name__}, not (q, next_state); it needs {RECURRENT}"
        )
    shape = tuple(x.shape)
    _check_tensor(path, out[0], shape, (PROBE_BATCH, spec.n_actions), Q_VALUES)
    _check_tensor(path, out[1], shape, tuple(state.shape), "the next state, as initial_state's")
    network.recurrent = True
    return network


def _probe_state(path: str, init: Any) -> torch.Tensor:
    """``init(PROBE_BATCH)``: a float tensor ``(batch, size)``, or one line."""
    try:
        with torch.no_grad():
            state = init(PROBE_BATCH)
    except Exception as e:
        raise ConfigError(
            f"config key {KEY!r}: initial_state({PROBE_BATCH}) of {path} raised {first_line(e)}"
        ) from e
    ok = isinstance(state, torch.Tensor) and state.dim() == 2 and state.is_floating_point()
    if not ok or state.shape[0] != PROBE_BATCH:
        got = type(state).__name__
        if isinstance(state, torch.Tensor):
            got += f" {state.dtype} of shape {tuple(state.shape)}"
        raise ConfigError(
            f"config key {KEY!r}: initial_state({PROBE_BATCH}) of {path} returned a {got}; "
            "it must be one float tensor (batch, size) (an LSTM's (h, c) side by side)"
        )
    return state


def memory_width(network: nn.Module) -> int:
    """The width of the memory a recurrent network carries (what replay stores per
    sequence): shoal's networks say it, a user's gives it from its initial state."""
    own = getattr(network, "state_size", None)
    if isinstance(own, int):
        return own
    with torch.no_grad():
        return int(network.initial_state(1).shape[-1])  # type: ignore[operator]


def build_user_torso(path: str, spec: EnvSpec, key: str) -> tuple[nn.Module, int]:
    """The module ``path``'s factory returns for ``spec``'s spaces as a torso (a recipe's
    network reads its features: IQN's fractions multiply them), and the width of its
    features; one line naming ``key`` unless it maps a probe batch to ``(batch, width)``
    floats."""
    torso = _call_factory(path, spec, key)
    out, x = _on_probe_batch(torso, "torso", path, spec, key)
    ok = isinstance(out, torch.Tensor) and out.dim() == 2 and out.is_floating_point()
    if not ok or out.shape[0] != PROBE_BATCH or out.shape[1] < 1:
        got = (
            f"{out.dtype} of shape {tuple(out.shape)}"
            if isinstance(out, torch.Tensor)
            else (f"a {type(out).__name__}")
        )
        raise ConfigError(
            f"config key {key!r}: the torso of {path} maps observations of shape "
            f"{tuple(x.shape)} to {got}; it must give features of shape (batch, width)"
        )
    return torso, int(out.shape[1])


def _call_factory(path: str, spec: EnvSpec, key: str) -> nn.Module:
    """What ``path``'s ``factory(observation_space, action_space)`` returns: a module, or
    one line naming ``key``."""
    factory = load_object(path, key, "the network factory's")
    check_factory(factory, path, key, "(observation_space, action_space) -> nn.Module")
    obs_space, act_space = spec.spaces()
    try:
        network = factory(obs_space, act_space)
    except Exception as e:
        raise ConfigError(
            f"config key {key!r}: {path}(observation_space, action_space) raised {first_line(e)}"
        ) from e
    if not isinstance(network, nn.Module):
        raise ConfigError(
            f"config key {key!r}: {path}(observation_space, action_space) returned a "
            f"{type(network).__name__}, not a torch.nn.Module"
        )
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


def _on_probe_batch(
    module: nn.Module, role: str, path: str, spec: EnvSpec, key: str, *rest: Any
) -> tuple[Any, torch.Tensor]:
    """What ``module`` (the user's ``role``) gives for a probe batch (and ``rest``: a
    recurrent network's state), and the batch; one line naming ``key`` if it fails."""
    x = _probe_batch(spec)
    try:
        with torch.no_grad():
            return module(x, *rest), x
    except Exception as e:
        raise ConfigError(
            f"config key {key!r}: the {role} of {path} failed on a batch of observations "
            f"of shape {tuple(x.shape)}{_and_state(rest)}: {first_line(e)}"
        ) from e


def _and_state(rest: tuple[Any, ...]) -> str:
    """How a probe call's state is said (none: feed-forward)."""
    if not rest:
        return ""
    return f" and a state of shape {tuple(rest[0].shape)} (it needs {RECURRENT})"


def check_output(path: str, network: nn.Module, spec: EnvSpec) -> None:
    """One line unless ``network`` maps a probe batch to ``(batch, n_actions)`` floats."""
    out, x = _on_probe_batch(network, "network", path, spec, KEY)
    if spec.hybrid:
        _check_hybrid(path, out, tuple(x.shape), spec)
    else:
        _check_tensor(path, out, tuple(x.shape), (PROBE_BATCH, spec.n_actions), Q_VALUES)


def _check_hybrid(path: str, out: Any, shape: tuple[int, ...], spec: EnvSpec) -> None:
    """A hybrid network's output: (Q-values, continuous actions per discrete action)."""
    want = (PROBE_BATCH, spec.n_actions, spec.action_dim)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise ConfigError(
            f"config key {KEY!r}: the network of {path} returned a {type(out).__name__}; on "
            "hybrid actions it must return (Q-values of shape (batch, n_actions), continuous "
            f"actions of shape (batch, n_actions, action_dim) = {want})"
        )
    _check_tensor(path, out[0], shape, want[:2], Q_VALUES)
    cont = "continuous actions of shape (batch, n_actions, action_dim)"
    _check_tensor(path, out[1], shape, want, cont)


def _check_tensor(
    path: str, out: Any, shape: tuple[int, ...], want: tuple[int, ...], what: str
) -> None:
    """One line unless ``out`` is a float tensor of shape ``want``."""
    if not isinstance(out, torch.Tensor):
        raise ConfigError(
            f"config key {KEY!r}: the network of {path} returned a {type(out).__name__}; "
            f"it must return a tensor: {what} = {want}"
        )
    if tuple(out.shape) != want or not out.is_floating_point():
        raise ConfigError(
            f"config key {KEY!r}: the network of {path} maps observations of shape "
            f"{shape} to {out.dtype} of shape {tuple(out.shape)}; it must give "
            f"{what} = {want}"
        )
