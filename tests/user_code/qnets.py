"""Q-networks as a user writes them: plain ``nn.Module`` s, no shoal import."""

from __future__ import annotations

from typing import Any

from torch import nn


def layernorm_mlp(observation_space: Any, action_space: Any) -> nn.Module:
    """An MLP with a LayerNorm after each hidden layer (a shape shoal's config cannot
    describe)."""
    n_in = int(observation_space.shape[0])
    return nn.Sequential(
        nn.Linear(n_in, 64),
        nn.LayerNorm(64),
        nn.ReLU(),
        nn.Linear(64, 64),
        nn.LayerNorm(64),
        nn.ReLU(),
        nn.Linear(64, int(action_space.n)),
    )


def wrong_shape(observation_space: Any, action_space: Any) -> nn.Module:
    """Gives one value per observation, not one per action."""
    return nn.Linear(int(observation_space.shape[0]), 1)


def not_a_module(observation_space: Any, action_space: Any) -> Any:
    """Returns something that is not a module."""
    return "a string"


NOT_CALLABLE = 3
