"""Q-networks: an MLP torso with a plain or a dueling head."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["QNetwork"]


class QNetwork(nn.Module):
    """Maps a batch of flat observations to one Q-value per discrete action.

    The dueling head (Wang et al. 2016) splits the last layer into a state value V(s) and
    advantages A(s, a), combined as ``V + A - mean(A)`` so that the two are identifiable.

    Example:
        >>> net = QNetwork(4, 2, hidden=[32, 32], dueling=True)
        >>> net(torch.zeros(5, 4)).shape
        torch.Size([5, 2])
    """

    def __init__(
        self, obs_dim: int, n_actions: int, *, hidden: Sequence[int], dueling: bool
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.torso = nn.Sequential(*layers)
        self.width = width
        """Size of the torso's output (the features heads read)."""
        self.dueling = dueling
        if dueling:
            self.value = nn.Linear(width, 1)
            self.advantage = nn.Linear(width, n_actions)
        else:
            self.head = nn.Linear(width, n_actions)

    def q_values(self, z: torch.Tensor) -> torch.Tensor:
        """Q-values from torso features ``z`` (shared with heads added by subclasses)."""
        if not self.dueling:
            return self.head(z)
        adv = self.advantage(z)
        return self.value(z) + adv - adv.mean(dim=1, keepdim=True)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values of shape (batch, n_actions)."""
        return self.q_values(self.torso(obs))
