"""Categorical DQN (C51, Bellemare et al. 2017): a network that predicts, for every action,
a distribution of the return over a fixed support of atoms, and its loss.

:meth:`CategoricalNetwork.apply_params` is the network as a Q-network (each action's
expected return under its distribution), so acting, evaluation and every transport read it
as they read DQN's. The loss projects the n-step target distribution, ``reward + discount
* z`` under the target network's (double-Q: the online network picks the next action),
back onto the support and takes its cross-entropy with the online distribution of the
taken action. The projection is written as a triangular kernel, ``clamp(1 - |Tz_j - z_i| /
dz, 0, 1)``, rather than with floor/ceil scatters: no data-dependent indexing, so it runs
under ``torch.func.vmap`` (K stacked agents) and inside a captured CUDA graph.

Example:
    >>> net = CategoricalNetwork(4, 2, n_atoms=11, v_min=-1.0, v_max=1.0, hidden=[16], dueling=True)
    >>> params = dict(net.named_parameters())
    >>> net.log_probs(params, torch.zeros(3, 4)).shape
    torch.Size([3, 2, 11])
    >>> net(torch.zeros(3, 4)).shape
    torch.Size([3, 2])
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from shoal.agent.losses import Batch, LossValue, mask_illegal
from shoal.agent.networks import Params, QNetwork, dense

__all__ = ["CategoricalLoss", "CategoricalNetwork", "project"]


class CategoricalNetwork(QNetwork):
    """A :class:`~shoal.agent.networks.QNetwork` whose head gives ``n_atoms`` logits per
    action (with a dueling head, a value distribution plus advantages, per atom); as a
    Q-network, each action's expected return over the support."""

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        *,
        n_atoms: int,
        v_min: float,
        v_max: float,
        **network: Any,
    ) -> None:
        # QNetwork's arguments (hidden, dueling, encoders, noise); the noise goes on once
        # the heads have their shapes
        noisy, sigma0 = network.pop("noisy", False), network.pop("sigma0", 0.5)
        super().__init__(obs_dim, n_actions * n_atoms, **network)
        self.n_actions, self.n_atoms = n_actions, n_atoms
        self.v_min, self.v_max = float(v_min), float(v_max)
        if self.dueling:  # the value stream gives a distribution too: one logit per atom
            self.value = nn.Linear(self.width, n_atoms)
        self.noisy = noisy
        if noisy:
            self.make_noisy(sigma0)

    def support(self, like: torch.Tensor) -> torch.Tensor:
        """The atoms' returns, ``(n_atoms,)``, on ``like``'s device and dtype."""
        return torch.linspace(
            self.v_min, self.v_max, self.n_atoms, device=like.device, dtype=like.dtype
        )

    def logits(self, params: Params, z: torch.Tensor) -> torch.Tensor:
        """Logits ``(..., n_actions, n_atoms)`` from torso features ``z``."""
        shape = (self.n_actions, self.n_atoms)
        if not self.dueling:
            return dense(params, "head.", z).unflatten(-1, shape)
        adv = dense(params, "advantage.", z).unflatten(-1, shape)
        value = dense(params, "value.", z).unsqueeze(-2)
        return value + adv - adv.mean(dim=-2, keepdim=True)

    def log_probs(self, params: Params, obs: torch.Tensor) -> torch.Tensor:
        """Each action's log-distribution over the atoms: ``(..., n_actions, n_atoms)``."""
        return self.logits(params, self.features(params, obs)).log_softmax(dim=-1)

    def q_values(self, params: Params, z: torch.Tensor) -> torch.Tensor:
        """Each action's expected return under its distribution (acting reads these)."""
        logits = self.logits(params, z)
        return (logits.softmax(dim=-1) * self.support(logits)).sum(dim=-1)


def project(probs: torch.Tensor, returns: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """The distribution putting ``probs[..., j]`` at ``returns[..., j]``, projected onto
    the evenly spaced ``support`` (returns beyond its ends land on them): each mass split
    between its two nearest atoms in proportion to nearness. ``(..., n_atoms)``."""
    dz = support[1] - support[0]
    returns = returns.clamp(support[0], support[-1])
    weight = (1 - (returns.unsqueeze(-2) - support.unsqueeze(-1)).abs() / dz).clamp(min=0)
    return (weight * probs.unsqueeze(-2)).sum(dim=-1)


class CategoricalLoss:
    """C51's loss over explicit parameters: the cross-entropy between the projected n-step
    target distribution and the online distribution of the taken action, importance
    weighted; each sample's cross-entropy is also its priority (Rainbow's)."""

    def __init__(
        self, network: CategoricalNetwork, *, double: bool = True, action_mask: bool = False
    ) -> None:
        self.network = network
        self.double = double
        self.action_mask = action_mask

    def __call__(self, params: Params, target_params: Params, batch: Batch) -> LossValue:
        """``(loss, per-sample cross-entropy)`` for one batch."""
        net = self.network
        with torch.no_grad():
            target_probs = net.log_probs(target_params, batch.next_obs).exp()
            support = net.support(target_probs)
            q_pick = (
                net.apply_params(params, batch.next_obs)
                if self.double
                else (target_probs * support).sum(dim=-1)
            )
            if self.action_mask:
                q_pick = mask_illegal(q_pick, batch.next_obs)
            next_probs = _taken(target_probs, q_pick.argmax(dim=-1))
            returns = batch.reward.unsqueeze(-1) + batch.discount.unsqueeze(-1) * support
            target = project(next_probs, returns, support)
        log_p = _taken(net.log_probs(params, batch.obs), batch.action)
        cross_entropy = -(target * log_p).sum(dim=-1)
        return (batch.weights * cross_entropy).mean(-1), cross_entropy.detach()


def _taken(dist: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """The rows ``(..., B, n_atoms)`` of ``dist`` ``(..., B, n_actions, n_atoms)`` at
    ``action`` ``(..., B)``."""
    index = action[..., None, None].expand(*action.shape, 1, dist.shape[-1])
    return dist.gather(-2, index).squeeze(-2)
