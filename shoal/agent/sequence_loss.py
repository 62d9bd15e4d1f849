"""The double-DQN n-step loss over recurrent sequences (R2D2), a pure function of explicit
parameters like :class:`~shoal.agent.losses.DQNLoss`.

A batch is :class:`~shoal.replay.sequence.SequenceWriter` items: ``S = burn_in + length``
step slots and the observation after them, the recurrent state stored at the first valid
slot, a validity mask. Online and target networks both unroll from the stored state; the
burn-in slots only warm the state up (no gradients), and every valid slot of the training
part gets an n-step target that bootstraps, by double DQN, at the slot n steps on (fewer at
the item's end, from the observation after its last valid step), never past a
termination. A network whose Q-values have agent dimensions (``(B, T, N, A)``, one Q per
agent of a multi-agent world, rewards ``(B, S, N)``) is trained on every real agent's
step; its ``agent_mask(obs)`` says which rows are real.

An item's priority is R2D2's mix of its TD errors, ``eta * max + (1 - eta) * mean`` of
``|delta|`` over its valid steps and agents: the mean alone would drown a rare large error
in a long sequence.

Example:
    >>> import numpy as np
    >>> from shoal.agent.networks import RecurrentQNetwork
    >>> net = RecurrentQNetwork(3, 2, hidden=[8], state_dim=4)
    >>> loss = SequenceDQNLoss(net, burn_in=1, n_step=2, gamma=0.9)
    >>> batch = SequenceBatch.from_numpy({
    ...     "obs": np.zeros((5, 4, 3), np.float32), "action": np.zeros((5, 3), np.int64),
    ...     "reward": np.ones((5, 3), np.float32), "discount": np.ones((5, 3), np.float32),
    ...     "mask": np.ones((5, 3), bool), "state": np.zeros((5, 4), np.float32)}, "cpu")
    >>> params = dict(net.named_parameters())
    >>> value, priorities = loss(params, params, batch)
    >>> value.shape, priorities.shape
    (torch.Size([]), torch.Size([5]))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from shoal.agent.learner import Learner
from shoal.agent.losses import LossValue, batch_tensors
from shoal.agent.networks import Params, apply_network
from shoal.config import DQNConfig

__all__ = ["SequenceBatch", "SequenceDQN", "SequenceDQNLoss", "nstep_targets", "unroll"]


@dataclass
class SequenceBatch:
    """Sequence items as tensors on the learner's device (fields as the sequence writer
    stores them; ``weights`` are importance weights, ones for uniform replay)."""

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    discount: torch.Tensor
    mask: torch.Tensor
    state: torch.Tensor
    weights: torch.Tensor

    @classmethod
    def from_numpy(
        cls, data: Mapping[str, np.ndarray], device: str | torch.device
    ) -> SequenceBatch:
        """Convert a replay sample (numpy arrays) to tensors; observations keep their dtype
        (the network decides how to read packed ones)."""
        f32 = torch.float32
        dtypes = {"obs": None, "action": torch.int64, "reward": f32, "discount": f32}
        return cls(**batch_tensors(data, device, {**dtypes, "mask": torch.bool, "state": f32}))


def nstep_targets(
    reward: torch.Tensor,
    discount: torch.Tensor,
    mask: torch.Tensor,
    value: torch.Tensor,
    *,
    start: int,
    n_step: int,
    gamma: float,
) -> torch.Tensor:
    """n-step TD targets of slots ``start .. S-1``.

    ``reward`` ``(B, S, *agents)``, ``discount`` and ``mask`` ``(B, S)`` as the sequence
    writer stores them, ``value`` ``(B, S + 1, *agents)`` the bootstrap value of each
    slot's observation. The target of slot ``i`` sums ``gamma^k r_{i+k}`` over the next
    ``m <= n_step`` valid steps (fewer at the end of the valid slots), each weighted by the
    discounts of the steps before it, and adds ``gamma^m prod d * value[i + m]``: after a
    termination (``d = 0``) nothing more. Targets of invalid slots are meaningless (the
    loss masks them).
    """
    b, s = mask.shape
    extra = (1,) * (reward.dim() - 2)
    slots = torch.arange(start, s, device=mask.device)
    # Pad by n_step invalid slots so that i + k never indexes past the end.
    pad = torch.zeros(b, n_step, dtype=mask.dtype, device=mask.device)
    mask_p = torch.cat([mask, pad], 1)
    disc_p = torch.cat([discount, pad.float()], 1)
    rew_p = torch.cat([reward, reward.new_zeros(b, n_step, *reward.shape[2:])], 1)
    ret = reward.new_zeros(b, len(slots), *reward.shape[2:])
    scale = torch.ones(b, len(slots), device=mask.device)
    boot = slots.expand(b, -1).clone()
    for k in range(n_step):
        at = slots + k
        valid = mask_p[:, at]
        ret = ret + (scale * valid).view(b, -1, *extra) * rew_p[:, at]
        boot = torch.where(valid, at + 1, boot)
        scale = torch.where(valid, scale * gamma * disc_p[:, at], scale)
    index = boot.view(b, -1, *extra).expand(b, -1, *value.shape[2:])
    return ret + scale.view(b, -1, *extra) * value.gather(1, index)


def unroll(
    network: Any,
    params: Params,
    obs: torch.Tensor,
    state: Any,
    mask: torch.Tensor,
    burn_in: int,
) -> torch.Tensor:
    """Q-values ``(B, T, ...)`` of a recurrent network over ``obs`` ``(B, T, ...)`` from
    ``state``: the state passes unchanged over slots where ``mask`` ``(B, T)`` is False,
    and the first ``burn_in`` slots run without gradients. A network with its own
    ``unroll(params, obs, state, mask, burn_in)`` (one that batches the per-step work, say)
    does it itself, and owes only the Q-values a loss reads: those of valid slots and of
    the slot after an item's last valid one (its bootstrap); any other network is stepped
    slot by slot (:func:`~shoal.agent.networks.apply_network`: its ``apply_params``, or a
    user's module called on explicit weights)."""
    own = getattr(network, "unroll", None)
    if own is not None:
        return own(params, obs, state, mask, burn_in)
    qs = []
    for t in range(obs.shape[1]):
        with torch.set_grad_enabled(t >= burn_in and torch.is_grad_enabled()):
            if t == burn_in:
                state = state.detach()
            q, nxt = apply_network(network, params, obs[:, t], state)
            keep = mask[:, t].view(-1, *(1,) * (state.dim() - 1))
            state = torch.where(keep, nxt, state)
        qs.append(q)
    return torch.stack(qs, 1)


class SequenceDQNLoss:
    """Importance-weighted Huber loss on double-DQN n-step TD errors over sequences; returns
    the loss and each item's priority (detached).

    ``network`` is used only through :func:`unroll` (its pure ``apply_params(params, obs,
    state) -> (q, state)``, or its own ``unroll``); its own weights are never read.

    Args:
        network: the recurrent network.
        burn_in: slots before the training part (the writer's ``burn_in``).
        n_step: steps of the TD target.
        gamma: discount per step.
        double: double DQN (the online network picks the bootstrap action).
        huber_delta: the Huber loss's threshold.
        eta: weight of the max in each item's priority (R2D2: 0.9).
    """

    def __init__(
        self,
        network: Any,
        *,
        burn_in: int,
        n_step: int,
        gamma: float,
        double: bool = True,
        huber_delta: float = 1.0,
        eta: float = 0.9,
    ) -> None:
        self.network = network
        self.burn_in, self.n_step, self.gamma = burn_in, n_step, gamma
        self.double, self.huber_delta, self.eta = double, huber_delta, eta

    @classmethod
    def from_config(
        cls, network: Any, cfg: DQNConfig, *, burn_in: int, eta: float = 0.9
    ) -> SequenceDQNLoss:
        """The loss a DQN config describes (n-step, gamma, double, Huber): one place, so a
        learner's loss and its actors' priorities agree."""
        return cls(
            network,
            burn_in=burn_in,
            n_step=cfg.n_step,
            gamma=cfg.gamma,
            double=cfg.double,
            huber_delta=cfg.huber_delta,
            eta=eta,
        )

    def td_errors(
        self, params: Params, target_params: Params, batch: SequenceBatch
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """TD errors ``(B, length, *agents)`` of the training slots (with gradients through
        the online Q) and the weights of their valid entries (1 valid, 0 not)."""
        # The bootstrap observation after the last slot is always part of the unroll.
        b = batch.mask.shape[0]
        unroll_mask = torch.cat([batch.mask, batch.mask.new_ones(b, 1)], 1)
        net, obs, state = self.network, batch.obs, batch.state
        q = unroll(net, params, obs, state, unroll_mask, self.burn_in)
        with torch.no_grad():
            if target_params is params:  # one network in both roles (an actor's priorities)
                q_target = q.detach()
            else:
                q_target = unroll(net, target_params, obs, state, unroll_mask, self.burn_in)
            pick = q.detach() if self.double else q_target
            a_next = pick.argmax(-1, keepdim=True)
            value = q_target.gather(-1, a_next).squeeze(-1)  # (B, S + 1, *agents)
            target = nstep_targets(
                batch.reward,
                batch.discount,
                batch.mask,
                value,
                start=self.burn_in,
                n_step=self.n_step,
                gamma=self.gamma,
            )
        train = slice(self.burn_in, batch.mask.shape[1])
        q_a = q[:, train].gather(-1, batch.action[:, train].unsqueeze(-1)).squeeze(-1)
        valid = batch.mask[:, train].float()
        valid = valid.view(*valid.shape, *(1,) * (q_a.dim() - 2)).expand_as(q_a)
        agent_mask = getattr(self.network, "agent_mask", None)
        if agent_mask is not None:  # padding rows of a multi-agent observation
            rows = agent_mask(batch.obs[:, train]).float()
            valid = valid * rows
        return target - q_a, valid

    def __call__(self, params: Params, target_params: Params, batch: SequenceBatch) -> LossValue:
        """``(loss, priorities)`` for one batch: the loss averages every item's valid
        steps (and agents), weighted by the item's importance weight."""
        delta, valid = self.td_errors(params, target_params, batch)
        zero = torch.zeros_like(delta)
        per = F.huber_loss(delta, zero, reduction="none", delta=self.huber_delta) * valid
        dims = tuple(range(1, delta.dim()))
        count = valid.sum(dims).clamp(min=1.0)
        loss = (batch.weights * per.sum(dims) / count).mean()
        with torch.no_grad():
            size = delta.abs() * valid
            priority = self.eta * size.amax(dims) + (1 - self.eta) * size.sum(dims) / count
        return loss, priority


class SequenceDQN(Learner):
    """Double-DQN n-step learner on recurrent sequences (R2D2 without the value rescaling):
    a :class:`~shoal.agent.learner.Learner` with :class:`SequenceDQNLoss` and sequence
    batches; the TD errors it reports are the items' new priorities.

    Args:
        network: the recurrent network (its deep copy becomes the target).
        cfg: optimizer, gamma, n-step, double, Huber and target settings.
        burn_in: slots before each item's training part.
        eta: weight of the max in an item's priority.
        device: 'auto', 'cpu', 'cuda' or a torch device.
    """

    def __init__(
        self,
        network: nn.Module,
        cfg: DQNConfig,
        *,
        burn_in: int,
        eta: float = 0.9,
        device: str | torch.device | None = "auto",
    ) -> None:
        loss = SequenceDQNLoss.from_config(network, cfg, burn_in=burn_in, eta=eta)
        super().__init__(network, loss, cfg, device=device)

    def make_batch(self, sample: Mapping[str, np.ndarray]) -> SequenceBatch:  # type: ignore[override]
        """A replay sample of sequence items as tensors on this learner's device."""
        return SequenceBatch.from_numpy(sample, self.device)
