"""Implicit quantile networks (IQN, Dabney et al. 2018): a network that maps a state and
sampled quantile fractions ``tau`` to the return's quantiles per action, and its loss.

The fractions enter through a cosine embedding, ``relu(W cos(pi i tau) + b)`` for
``i = 1..n_cos``, multiplied into the torso's features before the last hidden layer, as in
the paper. :meth:`QuantileNetwork.apply_params` is the network as a Q-network: the mean of
the quantiles at ``K`` fixed, evenly spaced fractions (the midpoints of ``K`` equal
intervals, a quadrature of the mean). Acting, evaluation and Ape-X's initial priorities
read it like any Q-network, and stay pure functions of the weights: the paper samples the
``K`` fractions at every step, which would make acting draw random numbers that a
resumed run must replay; the midpoints estimate the same mean with less noise.

The loss draws no random numbers either: the batch carries its fractions
(:class:`QuantileBatch`), drawn by the learner from a generator it checkpoints, so a
resumed run draws the same ones.

Example:
    >>> net = QuantileNetwork(4, 2, hidden=[16], dueling=True, n_cos=8, n_policy=4)
    >>> net.quantiles(dict(net.named_parameters()), torch.zeros(3, 4), torch.rand(3, 5)).shape
    torch.Size([3, 5, 2])
    >>> net(torch.zeros(3, 4)).shape
    torch.Size([3, 2])
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from shoal.agent.device import to_device
from shoal.agent.learner import Learner
from shoal.agent.losses import Batch, LossValue, mask_illegal
from shoal.agent.networks import (
    BoardEncoder,
    ImageEncoder,
    Params,
    QNetwork,
    apply_network,
    dense,
    linear,
)
from shoal.config import DQNConfig

__all__ = ["IQNLearner", "QuantileBatch", "QuantileLoss", "QuantileNetwork", "quantile_huber"]


class QuantileNetwork(QNetwork):
    """A :class:`~shoal.agent.networks.QNetwork` whose features before the last hidden
    layer are multiplied by an embedding of quantile fractions: quantiles
    ``(batch, fractions, actions)`` for any fractions, and Q-values (their mean at
    ``n_policy`` fixed fractions) as a Q-network's output.

    With ``features`` (a user's torso, an ``nn.Module`` mapping observations to
    ``(batch, features_width)``), the fractions multiply its features, and the ``hidden``
    layers and the head follow."""

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        *,
        n_cos: int = 64,
        n_policy: int = 32,
        features: nn.Module | None = None,
        features_width: int = 0,
        **network: Any,
    ) -> None:
        # network: QNetwork's arguments (hidden, dueling, encoders, noise)
        # self.merge: the torso layer the embedded fractions are multiplied in before
        if features is None:
            super().__init__(obs_dim, n_actions, **network)
            linears = [i for i, layer in enumerate(self.torso) if isinstance(layer, nn.Linear)]
            self.merge = linears[-1] if linears else len(self.torso)
            width = self.torso[self.merge].in_features if linears else self.width
        else:  # the user's torso in place of shoal's encoders
            mine = {k: v for k, v in network.items() if k not in ("board", "conv", "image")}
            super().__init__(features_width, n_actions, **mine)
            self.torso = nn.Sequential(features, *self.torso)
            self.merge, width = 1, features_width
            self.stackable = False  # a user's torso runs under vmap
        self.embed = nn.Linear(n_cos, width)
        self.n_cos = n_cos
        self.n_policy = n_policy

    def _layers(self, params: Params, x: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        for i in range(start, stop):
            layer, prefix = self.torso[i], f"torso.{i}."
            if isinstance(layer, (BoardEncoder, ImageEncoder)):
                x = layer.apply_params(params, prefix, x)
            elif isinstance(layer, nn.Linear):
                x = dense(params, prefix, x).relu_()
            elif not isinstance(layer, nn.ReLU):  # a user's torso, applied to its own weights
                own = {n[len(prefix) :]: p for n, p in params.items() if n.startswith(prefix)}
                x = apply_network(layer, own, x)
        return x

    def quantiles(self, params: Params, obs: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        """The return's quantiles at fractions ``taus`` (``(batch, N)``, in [0, 1]) for every
        action: ``(batch, N, n_actions)``. A stackable network also takes K stacked
        parameter sets with ``(K, batch, obs)`` and ``(K, batch, N)``: ``(K, batch, N,
        n_actions)``."""
        reads_bytes = len(self.torso) > 0 and isinstance(self.torso[0], ImageEncoder)
        x = obs if obs.is_floating_point() or reads_bytes else obs.float()
        z = self._layers(params, x, 0, self.merge)
        i = torch.arange(1, self.n_cos + 1, device=taus.device, dtype=z.dtype)
        cos = torch.cos(math.pi * taus.to(z.dtype).unsqueeze(-1) * i)
        # Rows of (sample, fraction) pairs flattened into one batch axis: K stacked layers
        # are batched matmuls over (K, rows, in).
        pairs = taus.shape[-2:]
        phi = linear(cos.flatten(-3, -2), params["embed.weight"], params["embed.bias"]).relu()
        h = (z.unsqueeze(-2) * phi.unflatten(-2, pairs)).flatten(-3, -2)
        h = self._layers(params, h, self.merge, len(self.torso))
        return self.q_values(params, h).unflatten(-2, pairs)

    def policy_fractions(self, batch: Sequence[int], device: torch.device) -> torch.Tensor:
        """The ``n_policy`` midpoints of equal intervals of [0, 1], for states of leading
        shape ``batch``: ``(*batch, n_policy)``."""
        k = self.n_policy
        mid = (torch.arange(k, device=device, dtype=torch.float32) + 0.5) / k
        return mid.expand(*batch, k)

    def apply_params(self, params: Params, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``(batch, n_actions)``: the mean quantile at the policy fractions (a
        stackable network also takes K stacked parameter sets and ``(K, batch, obs)``)."""
        # observations are flat rows, whatever the encoder
        taus = self.policy_fractions(obs.shape[:-1], obs.device)
        return self.quantiles(params, obs, taus).mean(dim=-2)


def quantile_huber(
    pred: torch.Tensor, target: torch.Tensor, taus: torch.Tensor, kappa: float
) -> torch.Tensor:
    """The quantile Huber loss of each sample: ``pred`` ``(B, N)`` at fractions ``taus``
    against ``target`` ``(B, N')``; every pair's Huber loss weighted by
    ``|tau - 1{u < 0}|`` (``u`` = target - pred), summed over the N fractions and averaged
    over the N' targets (Dabney et al. 2018, eq. 3): ``(B,)``."""
    u = target.unsqueeze(-2) - pred.unsqueeze(-1)  # (B, N, N')
    huber = torch.nn.functional.huber_loss(u, torch.zeros_like(u), reduction="none", delta=kappa)
    weight = (taus.unsqueeze(-1) - (u.detach() < 0).to(u.dtype)).abs()
    return (weight * huber / kappa).sum(dim=-2).mean(dim=-1)


@dataclass
class QuantileBatch(Batch):
    """A batch of n-step transitions with the fractions its loss reads: ``taus``
    ``(B, N)`` for the online quantiles, ``target_taus`` ``(B, N')`` for the target's."""

    taus: torch.Tensor
    target_taus: torch.Tensor


class QuantileLoss:
    """IQN's loss over explicit parameters: the quantile Huber loss between the online
    quantiles of the taken actions and the n-step targets' quantiles, the next action
    picked by the online network's mean over the target fractions (double Q) or the
    target's; returns the
    importance-weighted loss and, for priorities, each sample's TD error of the means."""

    def __init__(
        self,
        network: QuantileNetwork,
        *,
        double: bool = True,
        kappa: float = 1.0,
        action_mask: bool = False,
    ) -> None:
        self.network = network
        self.double = double
        self.kappa = kappa
        self.action_mask = action_mask

    def __call__(self, params: Params, target_params: Params, batch: QuantileBatch) -> LossValue:
        """``(loss, td_errors)`` for one batch."""
        net = self.network
        with torch.no_grad():
            z_next = net.quantiles(target_params, batch.next_obs, batch.target_taus)
            # The next action by the mean over the target's N' fractions: the policy's K
            # fixed ones would cost K / N' times the rows (4x at the defaults), for a mean
            # that N' samples already estimate.
            z_pick = (
                net.quantiles(params, batch.next_obs, batch.target_taus) if self.double else z_next
            )
            q_pick = z_pick.mean(dim=-2)
            if self.action_mask:
                q_pick = mask_illegal(q_pick, batch.next_obs)
            a_next = q_pick.argmax(dim=-1)
            z_a = z_next.gather(-1, _index(a_next, z_next.shape[-2])).squeeze(-1)
            target = batch.reward.unsqueeze(-1) + batch.discount.unsqueeze(-1) * z_a
        z = net.quantiles(params, batch.obs, batch.taus)
        pred = z.gather(-1, _index(batch.action, z.shape[-2])).squeeze(-1)
        per_sample = quantile_huber(pred, target, batch.taus, self.kappa)
        td = (target.mean(dim=-1) - pred.mean(dim=-1)).detach()
        return (batch.weights * per_sample).mean(-1), td


def _index(action: torch.Tensor, n: int) -> torch.Tensor:
    """Actions ``(..., B)`` as a gather index over ``(..., B, n, n_actions)``."""
    return action[..., None, None].expand(*action.shape, n, 1)


class IQNLearner(Learner):
    """The learner of a :class:`QuantileNetwork` and its :class:`QuantileLoss`; it draws
    each batch's fractions (uniform in [0, 1]) from a generator seeded with ``seed`` and
    kept in its checkpoint, so a resumed run draws what the uninterrupted one would."""

    def __init__(
        self,
        network: QuantileNetwork,
        cfg: DQNConfig,
        *,
        n_quantiles: int,
        n_target_quantiles: int,
        kappa: float = 1.0,
        seed: int = 0,
        device: str | torch.device | None = "auto",
    ) -> None:
        loss = QuantileLoss(network, double=cfg.double, kappa=kappa, action_mask=cfg.action_mask)
        super().__init__(network, loss, cfg, device=device)
        self.n_quantiles = n_quantiles
        self.n_target_quantiles = n_target_quantiles
        self.fractions = torch.Generator().manual_seed(seed)
        self._fractions_lock = threading.Lock()  # learner threads make batches side by side

    batch_type = QuantileBatch

    def batch_extras(self, n: int) -> dict[str, torch.Tensor]:
        """Fresh fractions for a batch of ``n``: ``taus`` ``(n, N)``, ``target_taus``
        ``(n, N')``."""
        with self._fractions_lock:
            taus = torch.rand(n, self.n_quantiles, generator=self.fractions)
            target_taus = torch.rand(n, self.n_target_quantiles, generator=self.fractions)
        return {
            "taus": to_device(taus, self.device),
            "target_taus": to_device(target_taus, self.device),
        }

    def extra_state(self) -> dict[str, Any]:
        """The fraction generator's state (and the noise's)."""
        return {**super().extra_state(), "fractions": self.fractions.get_state()}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore the fraction generator (and the noise's)."""
        super().load_extra_state(state)
        self.fractions.set_state(state["fractions"])
