"""The config sections of shoal's recipes beyond DQN (``[iqn]``): light dataclasses, no
torch, read only by runs that train the recipe (``run.recipe``). The settings a recipe
shares with DQN (network, gamma, n-step, lr, batch, target) stay ``[dqn]``'s."""

from __future__ import annotations

from dataclasses import dataclass

from shoal.config import param

__all__ = ["IQNConfig"]


@dataclass
class IQNConfig:
    """Implicit quantile networks (``run.recipe = "iqn"``): how many quantile fractions
    each part of the agent reads."""

    n_quantiles: int = param(8, gt=0, le=1024)
    """N: fractions drawn per sample for the online quantiles of the loss (Dabney et al.
    2018 found 8 as good as 64 for N and N')."""
    n_target_quantiles: int = param(8, gt=0, le=1024)
    """N': fractions drawn per sample for the target's quantiles."""
    n_policy_quantiles: int = param(32, gt=0, le=1024)
    """K: fixed, evenly spaced fractions whose mean quantile is the Q-value acting and
    evaluation read (the loss picks the next action by the mean over its N' fractions)."""
    n_cos: int = param(64, gt=0, le=4096)
    """Cosines in the fractions' embedding."""
    kappa: float = param(1.0, gt=0.0)
    """The quantile Huber loss's threshold."""
    torso: str = ""
    """Your own torso: "package.module:factory", called as factory(observation_space,
    action_space), returning an nn.Module that maps observations (batch, obs_dim) to
    features (batch, width); the fractions multiply its features, then [dqn] hidden
    layers and the head follow. Empty: shoal's torso as [dqn] describes it."""
