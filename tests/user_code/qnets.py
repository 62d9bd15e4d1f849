"""Q-networks as a user writes them: plain ``nn.Module`` s, no shoal import."""

from __future__ import annotations

from typing import Any

import torch
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


class TwoHeads(nn.Module):
    """Q-values and, per discrete action, a continuous action in the box (a sigmoid
    squash), from one shared torso: the hybrid output shoal's own network gives."""

    def __init__(self, n_in: int, n: int, low: Any, high: Any) -> None:
        super().__init__()
        self.n, self.d = n, len(low)
        self.torso = nn.Sequential(nn.Linear(n_in, 64), nn.LayerNorm(64), nn.ReLU())
        self.q = nn.Linear(64, n)
        self.x = nn.Linear(64, n * self.d)
        self.register_buffer("low", torch.as_tensor(low, dtype=torch.float32))
        self.register_buffer("span", torch.as_tensor(high - low, dtype=torch.float32))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.torso(obs)
        x = torch.sigmoid(self.x(z)).view(-1, self.n, self.d)
        return self.q(z), self.low + self.span * x


def hybrid_two_heads(observation_space: Any, action_space: Any) -> nn.Module:
    """For a (Discrete, Box) action space."""
    discrete, box = action_space.spaces
    return TwoHeads(int(observation_space.shape[0]), int(discrete.n), box.low, box.high)


def hybrid_flat_actions(observation_space: Any, action_space: Any) -> nn.Module:
    """Both heads, but one continuous action per observation (not per discrete action)."""
    discrete, box = action_space.spaces
    net = TwoHeads(int(observation_space.shape[0]), int(discrete.n), box.low, box.high)
    net.forward = lambda obs: (net.q(net.torso(obs)), net.x(net.torso(obs)))  # type: ignore[method-assign]
    return net


def wrong_shape(observation_space: Any, action_space: Any) -> nn.Module:
    """Gives one value per observation, not one per action."""
    return nn.Linear(int(observation_space.shape[0]), 1)


def not_a_module(observation_space: Any, action_space: Any) -> Any:
    """Returns something that is not a module."""
    return "a string"


NOT_CALLABLE = 3


def layernorm_torso(observation_space: Any, action_space: Any) -> nn.Module:
    """A torso (observations to 48 features, no head) with a LayerNorm: what IQN's
    ``iqn.torso`` takes."""
    n_in = int(observation_space.shape[0])
    return nn.Sequential(nn.Linear(n_in, 48), nn.LayerNorm(48), nn.ReLU())


class _Summed(nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.sum(-1)


def summed_torso(observation_space: Any, action_space: Any) -> nn.Module:
    """A torso that drops the feature axis: ``(batch,)``, no width (rejected)."""
    return _Summed()


class GRUQ(nn.Module):
    """A recurrent Q-network as a user writes one: an MLP, a GRU cell, a linear head.
    ``forward(obs, state) -> (q, state)``, memory ``(batch, 32)``, zero at an episode's
    start."""

    def __init__(
        self, n_in: int, n_actions: int, width: int = 64, memory: int = 32, layers: int = 1
    ) -> None:
        super().__init__()
        widths = [n_in] + [width] * layers
        self.encode = nn.Sequential(
            *(m for a, b in zip(widths, widths[1:]) for m in (nn.Linear(a, b), nn.ReLU()))
        )
        self.gru = nn.GRUCell(width, memory)
        self.q = nn.Linear(memory, n_actions)
        self.memory = memory

    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(batch, self.memory, device=self.q.weight.device)

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.gru(self.encode(obs), state)
        return self.q(h), h


def gru_q(observation_space: Any, action_space: Any) -> nn.Module:
    """R2D2's ``dqn.network``: the user's own GRU."""
    return GRUQ(int(observation_space.shape[0]), int(action_space.n))


def gru_without_state(observation_space: Any, action_space: Any) -> nn.Module:
    """A feed-forward network given to R2D2: no initial_state, forward(obs) only."""
    return layernorm_mlp(observation_space, action_space)


class _QOnly(GRUQ):
    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.q(self.gru(self.encode(obs), state))


def gru_q_only(observation_space: Any, action_space: Any) -> nn.Module:
    """Returns Q-values alone from forward(obs, state), no next state (rejected)."""
    return _QOnly(int(observation_space.shape[0]), int(action_space.n))


class _NoStateArgument(GRUQ):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.q(self.encode(obs)[:, : self.memory])


def gru_forward_obs_only(observation_space: Any, action_space: Any) -> nn.Module:
    """Has initial_state, but forward(obs) takes no state (rejected)."""
    return _NoStateArgument(int(observation_space.shape[0]), int(action_space.n))


class _TupleState(GRUQ):
    def initial_state(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        zeros = torch.zeros(batch, self.memory)
        return zeros, zeros


def lstm_tuple_state(observation_space: Any, action_space: Any) -> nn.Module:
    """An LSTM-style (h, c) tuple as the state, not one tensor (rejected)."""
    return _TupleState(int(observation_space.shape[0]), int(action_space.n))


def gru_q_wide(observation_space: Any, action_space: Any) -> nn.Module:
    """The user's GRU, wider: 128 features, a memory of 64."""
    return GRUQ(int(observation_space.shape[0]), int(action_space.n), width=128, memory=64)


def gru_q_deep(observation_space: Any, action_space: Any) -> nn.Module:
    """The user's GRU at the ``r2d2`` preset's sizes (its MLP of [128, 128], a memory of
    64), a GRU where the preset has an LSTM."""
    n_in, n = int(observation_space.shape[0]), int(action_space.n)
    return GRUQ(n_in, n, width=128, memory=64, layers=2)
