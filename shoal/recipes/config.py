"""The config sections of shoal's recipes beyond DQN (``[iqn]``, ``[r2d2]``, ``[c51]``):
light dataclasses, no torch, read only by runs that train the recipe (``run.recipe``). The
settings a recipe shares with DQN (network, gamma, n-step, lr, batch, target) stay
``[dqn]``'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal.config import param
from shoal.errors import ConfigError

__all__ = ["C51Config", "IQNConfig", "R2D2Config"]


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
    kappa: float = param(1.0, gt=0.0, le=1e6)
    """The quantile Huber loss's threshold (at most 1e6, as dqn.huber_delta)."""
    torso: str = param("", code="path")
    """Your own torso: "package.module:factory", called as factory(observation_space,
    action_space), returning an nn.Module that maps observations (batch, obs_dim) to
    features (batch, width); the fractions multiply its features, then [dqn] hidden
    layers and the head follow. Empty: shoal's torso as [dqn] describes it."""


@dataclass
class R2D2Config:
    """Recurrent DQN (``run.recipe = "r2d2"``, Kapturowski et al. 2019): the memory and the
    sequences it learns from. Gamma, n-step, lr, batch (of sequences), target and the MLP
    before the memory (``hidden``) are ``[dqn]``'s. MAPF's recurrent agents learn from
    sequences cut by the same keys (``length``, ``burn_in``, ``period``, ``eta``)."""

    cell: str = param("lstm", choices=("lstm", "gru"))
    """The recurrent cell."""
    state_dim: int = param(64, gt=0, le=65_536)
    """Its memory's width (an LSTM carries two: h and c)."""
    length: int = param(20, gt=0, le=100_000)
    """Steps of each replayed sequence the loss trains on (R2D2: 80)."""
    burn_in: int = param(10, ge=0, le=100_000)
    """Steps before them that only warm the stored memory up (R2D2: 40)."""
    period: int = param(10, gt=0, le=100_000)
    """Steps between the starts of consecutive sequences of an episode (R2D2: 40; at most
    ``length``)."""
    eta: float = param(0.9, ge=0.0, le=1.0)
    """A sequence's priority: eta * max + (1 - eta) * mean of its |TD errors|."""

    def check(self, cfg: Any) -> None:
        """Sequences that cover every step (only in a run that learns from them)."""
        if cfg.run.recipe in ("r2d2", "mapf") and self.period > self.length:
            raise ConfigError(
                f"config key 'r2d2.period': {self.period} leaves steps no sequence trains on;"
                f" allowed: at most r2d2.length ({self.length})"
            )


@dataclass
class C51Config:
    """Categorical DQN (``run.recipe = "c51"``, Bellemare et al. 2017): the fixed support
    of the return distribution each action's head predicts."""

    n_atoms: int = param(51, ge=2, le=4096)
    """Atoms of the support, evenly spaced from v_min to v_max (C51: 51)."""
    v_min: float = param(-10.0, ge=-1e6, le=1e6)
    """The smallest return the support holds (C51 on Atari's clipped rewards: -10)."""
    v_max: float = param(10.0, ge=-1e6, le=1e6)
    """The largest (C51: 10); returns beyond are projected onto the ends. CartPole's
    discounted returns reach 1 / (1 - gamma): 100 at gamma 0.99."""

    def check(self, cfg: Any) -> None:
        """A support with room in it (only in a run that trains the recipe)."""
        if cfg.run.recipe == "c51" and not self.v_min < self.v_max:
            raise ConfigError(
                f"config key 'c51.v_max': {self.v_max} must be larger than c51.v_min ({self.v_min})"
            )
