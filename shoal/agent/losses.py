"""The double-DQN n-step loss, a pure function of explicit parameters.

``DQNLoss(network, ...)(params, target_params, batch) -> (loss, td_errors)`` touches no
module state: the learner passes its own parameters, K stacked learners pass stacked ones
under ``torch.func.vmap``, and a recurrent learner passes a flattened sequence batch. The
hybrid (discrete + continuous) loss extends it and so shares the TD target, the double-Q
bootstrap and the action mask.

Example:
    >>> import numpy as np
    >>> from shoal.agent.networks import QNetwork
    >>> net = QNetwork(4, 2, hidden=[16], dueling=False)
    >>> loss = DQNLoss(net)
    >>> batch = Batch.from_numpy({
    ...     "obs": np.zeros((8, 4), np.float32), "action": np.zeros(8, np.int64),
    ...     "reward": np.ones(8, np.float32), "next_obs": np.zeros((8, 4), np.float32),
    ...     "discount": np.zeros(8, np.float32)}, "cpu")
    >>> params = dict(net.named_parameters())
    >>> value, td = loss(params, params, batch)
    >>> value.shape, td.shape
    (torch.Size([]), torch.Size([8]))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from shoal.agent.device import to_device
from shoal.agent.networks import Params, apply_network
from shoal.agent.targets import td_target

__all__ = [
    "Batch",
    "DQNLoss",
    "LossValue",
    "batch_tensors",
    "bootstrap_values",
    "mask_illegal",
]

LossValue = tuple[torch.Tensor, torch.Tensor]
"""What every loss returns: the importance-weighted loss (a scalar, or one per stacked
agent) and each sample's TD error, detached, for its replay priority."""


@dataclass
class Batch:
    """A batch of n-step transitions as tensors on the learner's device.

    ``reward`` is the discounted n-step return and ``discount`` is gamma**k when the target
    bootstraps from ``next_obs`` (k steps later) or 0 when the episode terminated.
    ``weights`` are importance-sampling weights (ones for uniform replay).
    """

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    discount: torch.Tensor
    weights: torch.Tensor

    @classmethod
    def from_numpy(cls, data: Mapping[str, np.ndarray], device: str | torch.device) -> Batch:
        """Convert a replay sample (numpy arrays) to tensors; weights default to ones.
        Observations keep their dtype (image bytes cross to the device as bytes)."""
        f32 = torch.float32
        obs = None if np.asarray(data["obs"]).dtype == np.uint8 else f32
        dtypes = {"obs": obs, "action": torch.int64, "reward": f32, "next_obs": obs}
        return cls(**batch_tensors(data, device, {**dtypes, "discount": f32}))


def batch_tensors(
    data: Mapping[str, np.ndarray],
    device: str | torch.device,
    dtypes: Mapping[str, torch.dtype | None],
) -> dict[str, torch.Tensor]:
    """The fields of a replay sample that ``dtypes`` names, as tensors of those dtypes on
    ``device`` (None: the array's own), and its importance ``weights`` (ones for a
    sample that has none, as a uniform sampler's)."""
    weights = data.get("weights")
    if weights is None:
        weights = np.ones(len(data["action"]), np.float32)
    out = {name: torch.as_tensor(data[name], dtype=dtype) for name, dtype in dtypes.items()}
    out["weights"] = torch.as_tensor(weights, dtype=torch.float32)
    return {name: to_device(t, device) for name, t in out.items()}


def mask_illegal(q: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
    """Q-values with illegal actions (mask entries at the end of ``obs``) set to -inf."""
    legal = obs[..., -q.shape[-1] :] > 0.5
    return q.masked_fill(~legal, float("-inf"))


def bootstrap_values(
    q_next_online: torch.Tensor,
    q_next_target: torch.Tensor,
    next_obs: torch.Tensor,
    *,
    double: bool = True,
    action_mask: bool = False,
) -> torch.Tensor:
    """The value of each next state: double DQN picks the action with the online net and
    values it with the target net; plain DQN takes the target's max. Only legal actions
    count when ``action_mask``; a next state with none (terminal, discount 0) is worth 0."""
    if action_mask:
        q_next_online = mask_illegal(q_next_online, next_obs)
        q_next_target = mask_illegal(q_next_target, next_obs)
    if double:
        a_t = q_next_online.argmax(dim=-1, keepdim=True)
        value = q_next_target.gather(-1, a_t).squeeze(-1)
    else:
        value = q_next_target.max(dim=-1).values
    return torch.nan_to_num(value, neginf=0.0)


def has_convolutions(network: Any) -> bool:
    """Whether ``network`` (a module, or anything else: no) holds a convolution."""
    modules = network.modules() if isinstance(network, torch.nn.Module) else ()
    return any(isinstance(m, _CONVOLUTIONS) for m in modules)


_CONVOLUTIONS = tuple(
    getattr(torch.nn, f"Conv{kind}{d}d") for kind in ("", "Transpose") for d in (1, 2, 3)
)


def _q_part(out: Any) -> torch.Tensor:
    """The Q-values of a network's output (a hybrid network also returns its continuous
    head)."""
    return out[0] if isinstance(out, tuple) else out


class DQNLoss:
    """Importance-weighted Huber loss on double-DQN n-step TD errors, over explicit
    parameters; returns the loss and the per-sample TD errors (detached, for priorities).

    ``network`` is used only through :func:`~shoal.agent.networks.apply_network`; its own
    weights are never read.
    """

    def __init__(
        self,
        network: Any,
        *,
        double: bool = True,
        huber_delta: float = 1.0,
        action_mask: bool = False,
    ) -> None:
        self.network = network
        self.double = double
        self.huber_delta = huber_delta
        self.action_mask = action_mask
        self.merge_next = not has_convolutions(network)
        """Double DQN's online forward over ``obs`` and ``next_obs`` as one batch: one
        learner's MLP is launch-bound, and one forward halves the launches (cart-pole's
        update 1.0-1.2x faster); a convolution is compute-bound, and the merged forward doubles
        its weight gradient's work (zeros flow back through the ``next_obs`` half): split,
        the update of Atari's DER network measured 1.6x faster, the Nature network's 1.4x,
        MinAtar's 1.0-1.2x (``benchmarks/learner_update.py``)."""

    def td_terms(
        self, params: Params, target_params: Params, batch: Batch
    ) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """The online output at ``obs`` (with gradients), Q of the taken actions, and the
        TD targets (without gradients)."""
        # Batch dimension -2: one agent's (B, ...) or K stacked agents' (K, B, ...).
        b = batch.obs.shape[-2]
        if self.double and self.merge_next and batch.obs.dim() == 2:
            # Why one forward, and when not: see merge_next. K stacked learners (3-D obs)
            # are compute-bound like a convolution: split, 1.5x faster at K = 128.
            x = torch.cat([batch.obs, batch.next_obs], dim=-2)
            out = apply_network(self.network, params, x)
            q_all = _q_part(out)
            out_tm1 = tuple(o[:b] for o in out) if isinstance(out, tuple) else out[..., :b, :]
            q_next_online = q_all[..., b:, :].detach()
        else:
            out_tm1 = apply_network(self.network, params, batch.obs)
            q_next_online = None
            if self.double:
                with torch.no_grad():
                    q_next_online = _q_part(apply_network(self.network, params, batch.next_obs))
        with torch.no_grad():
            q_next_target = _q_part(apply_network(self.network, target_params, batch.next_obs))
            value = bootstrap_values(
                q_next_target if q_next_online is None else q_next_online,
                q_next_target,
                batch.next_obs,
                double=self.double,
                action_mask=self.action_mask,
            )
            target = td_target(batch.reward, batch.discount, value)
        q_a = _q_part(out_tm1).gather(-1, batch.action.unsqueeze(-1)).squeeze(-1)
        return out_tm1, q_a, target

    def __call__(self, params: Params, target_params: Params, batch: Batch) -> LossValue:
        """``(loss, td_errors)`` for one batch."""
        _, q_a, target = self.td_terms(params, target_params, batch)
        per_sample = F.huber_loss(q_a, target, reduction="none", delta=self.huber_delta)
        # mean(-1): one loss per agent when K are stacked (their sum is differentiated).
        return (batch.weights * per_sample).mean(-1), (target - q_a).detach()
