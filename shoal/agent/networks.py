"""Q-networks: an MLP torso (optionally after a convolutional board encoder) with a plain or
a dueling head."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from shoal.config import DQNConfig

__all__ = ["BoardEncoder", "QNetwork", "make_q_network"]


class BoardEncoder(nn.Module):
    """Convolutions over the first ``H * W * C`` observation entries (a board stored
    height x width x channels), concatenated with the remaining entries (e.g. an action
    mask). Board games have local patterns (lines, threats) that a convolution sees in any
    position, where an MLP must learn each position separately.

    Example:
        >>> enc = BoardEncoder((6, 7, 2), channels=[16], extra=7)
        >>> enc(torch.zeros(3, 6 * 7 * 2 + 7)).shape == (3, enc.width)
        True
    """

    def __init__(self, shape: Sequence[int], *, channels: Sequence[int], extra: int) -> None:
        super().__init__()
        self.shape = tuple(int(x) for x in shape)
        h, w, c = self.shape
        layers: list[nn.Module] = []
        for out in channels:
            layers += [nn.Conv2d(c, out, kernel_size=3, padding=1), nn.ReLU()]
            c = out
        self.conv = nn.Sequential(*layers)
        self.board = h * w * self.shape[2]
        self.width = h * w * c + extra

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Conv features of the board, flattened, followed by the other entries."""
        h, w, c = self.shape
        board = obs[:, : self.board].reshape(-1, h, w, c).permute(0, 3, 1, 2)
        return torch.cat([self.conv(board).flatten(1), obs[:, self.board :]], dim=1)


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
        self,
        obs_dim: int,
        n_actions: int,
        *,
        hidden: Sequence[int],
        dueling: bool,
        board: Sequence[int] = (),
        conv: Sequence[int] = (),
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        if board:
            h, w, c = board
            enc = BoardEncoder(board, channels=conv, extra=obs_dim - h * w * c)
            layers.append(enc)
            width = enc.width
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


def make_q_network(cfg: DQNConfig, obs_dim: int, n_actions: int) -> QNetwork:
    """The Q-network a DQN config describes (the learner's and every actor's copy)."""
    return QNetwork(
        obs_dim,
        n_actions,
        hidden=cfg.hidden,
        dueling=cfg.dueling,
        board=cfg.board,
        conv=cfg.conv,
    )
