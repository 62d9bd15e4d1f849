"""Hybrid DQN: discrete Q-values plus a continuous action per discrete action.

For action spaces like ``Tuple(Discrete(K), Box(low, high, (d,)))``, where an agent picks
one of K discrete actions and a continuous parameter for it (a P-DQN-style head, learned
without a critic over the continuous part). One network gives

* Q-values ``Q(s, k)`` for the K discrete actions, learned exactly as
  :class:`~shoal.agent.learner.DQN` learns them (the same loss code: double-DQN n-step
  Huber loss with importance weights, action mask). ``Q(s, k)`` is the value of choosing
  ``k`` with the continuous values the behaviour policy used;
* a continuous action ``mu(s, k)`` for each k, squashed by tanh into ``[low, high]``,
  learned by advantage-weighted regression onto the continuous actions that were taken.

:class:`HybridDQN` is a :class:`~shoal.agent.learner.Learner` with its own network and
:class:`HybridLoss`, an extension of :class:`~shoal.agent.losses.DQNLoss`; it inherits
side-effect-free ``gradients``, ``apply``, ``step``, target updates and checkpoints.
:class:`HybridActor` acts with both parts of the action.

Example:
    >>> import numpy as np
    >>> from shoal.config import DQNConfig
    >>> agent = HybridDQN(4, 3, 1, DQNConfig(hidden=[16]), low=-1.0, high=1.0, device="cpu")
    >>> batch = HybridBatch.from_numpy({
    ...     "obs": np.zeros((8, 4), np.float32), "action": np.zeros(8, np.int64),
    ...     "action_cont": np.zeros((8, 1), np.float32), "reward": np.ones(8, np.float32),
    ...     "next_obs": np.zeros((8, 4), np.float32),
    ...     "discount": np.full(8, 0.99, np.float32)}, "cpu")
    >>> info = agent.step(batch)
    >>> info.td_errors.shape
    (8,)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from shoal.agent.actor import Actor
from shoal.agent.device import to_device
from shoal.agent.learner import Learner
from shoal.agent.losses import Batch, DQNLoss, LossValue, mask_illegal
from shoal.agent.networks import Params, QNetwork, apply_network
from shoal.config import DQNConfig

__all__ = [
    "HybridActor",
    "HybridBatch",
    "HybridDQN",
    "HybridLoss",
    "HybridQNetwork",
    "make_hybrid_network",
]

ArrayLike = float | Sequence[float] | np.ndarray


class HybridQNetwork(QNetwork):
    """An MLP torso with two heads: Q-values per discrete action and one continuous action
    per discrete action, squashed into ``[low, high]``.

    The continuous head is ``low + (tanh(z) + 1) / 2 * (high - low)``, so its outputs are
    always valid actions and its gradients vanish smoothly at the bounds. ``dueling``
    splits the Q head into value and advantage streams as in
    :class:`~shoal.agent.networks.QNetwork`.

    Example:
        >>> net = HybridQNetwork(4, 3, 2, hidden=[32], low=-1.0, high=[1.0, 2.0])
        >>> q, cont = net(torch.zeros(5, 4))
        >>> q.shape, cont.shape
        (torch.Size([5, 3]), torch.Size([5, 3, 2]))
    """

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        action_dim: int,
        *,
        hidden: Sequence[int],
        low: ArrayLike,
        high: ArrayLike,
        dueling: bool = False,
        board: Sequence[int] = (),
        conv: Sequence[int] = (),
    ) -> None:
        super().__init__(obs_dim, n_actions, hidden=hidden, dueling=dueling, board=board, conv=conv)
        lo, hi = _bounds(low, high, action_dim)
        self.n_actions = n_actions
        self.action_dim = action_dim
        self.stackable = False  # the continuous head is written for one network
        self.cont = nn.Linear(self.width, n_actions * action_dim)
        # Buffers so that .to(device) moves them; not persistent, so that state_dict holds
        # only learned weights (the bounds come from the constructor, like the sizes).
        self.register_buffer("act_mid", torch.as_tensor((hi + lo) / 2), persistent=False)
        self.register_buffer("act_half", torch.as_tensor((hi - lo) / 2), persistent=False)

    def apply_params(self, params: Params, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Q-values ``(batch, n_actions)`` and continuous actions
        ``(batch, n_actions, action_dim)`` under explicit ``params``."""
        z = self.features(params, obs)
        raw = F.linear(z, params["cont.weight"], params["cont.bias"])
        raw = raw.view(*raw.shape[:-1], self.n_actions, self.action_dim)
        # The bounds follow the parameters: an actor's CPU copy of the network may act on a
        # CUDA learner's live parameters (the threads runner).
        mid, half = self.act_mid.to(raw.device), self.act_half.to(raw.device)
        return self.q_values(params, z), mid + half * torch.tanh(raw)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        """Q-values and continuous actions under the module's own parameters."""
        return self.apply_params(dict(self.named_parameters()), obs)


def make_hybrid_network(
    cfg: DQNConfig,
    obs_dim: int,
    n_actions: int,
    action_dim: int,
    low: ArrayLike,
    high: ArrayLike,
) -> HybridQNetwork:
    """The hybrid network a DQN config describes (the learner's and every actor's copy)."""
    return HybridQNetwork(
        obs_dim,
        n_actions,
        action_dim,
        hidden=cfg.hidden,
        low=low,
        high=high,
        dueling=cfg.dueling,
        board=cfg.board,
        conv=cfg.conv,
    )


def _bounds(low: ArrayLike, high: ArrayLike, action_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``low`` and ``high`` broadcast to ``(action_dim,)`` float32, checked finite and
    ordered (a tanh squash needs a bounded box)."""
    lo = np.broadcast_to(np.asarray(low, np.float32), (action_dim,)).copy()
    hi = np.broadcast_to(np.asarray(high, np.float32), (action_dim,)).copy()
    if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < hi).all()):
        raise ValueError(
            f"continuous action bounds must be finite with low < high, got low={lo.tolist()}, "
            f"high={hi.tolist()}"
        )
    return lo, hi


@dataclass
class HybridBatch(Batch):
    """A batch of n-step transitions with hybrid actions, as tensors on the learner's device.

    As :class:`~shoal.agent.losses.Batch`, plus ``action_cont``: the continuous part of the
    first action, ``(B, action_dim)`` float32, next to its discrete part ``action``.
    """

    action_cont: torch.Tensor

    @classmethod
    def from_numpy(cls, data: Mapping[str, np.ndarray], device: str | torch.device) -> HybridBatch:
        """Convert a replay sample (numpy arrays) to tensors; weights default to ones and a
        1-D ``action_cont`` is read as ``(B, 1)``."""
        base = Batch.from_numpy(data, device)
        cont = np.asarray(data["action_cont"]).reshape(len(data["action"]), -1)
        return cls(
            **vars(base),
            action_cont=to_device(torch.as_tensor(cont, dtype=torch.float32), device),
        )


class HybridLoss(DQNLoss):
    """:class:`~shoal.agent.losses.DQNLoss` on the discrete part plus advantage-weighted
    regression on the continuous part (see :class:`HybridDQN`), over explicit parameters.
    """

    def __init__(
        self,
        network: nn.Module,
        *,
        half: ArrayLike,
        cont_weight: float,
        beta: float,
        max_weight: float,
        **dqn: Any,
    ) -> None:
        super().__init__(network, **dqn)
        self.half = torch.as_tensor(np.asarray(half, np.float32))
        """Half the box's width per continuous dimension: the regression's scale."""
        self.cont_weight = cont_weight
        self.beta = beta
        self.max_weight = max_weight

    def __call__(self, params: Params, target_params: Params, batch: HybridBatch) -> LossValue:
        """Huber TD loss plus the weighted continuous regression, and the per-sample TD
        errors (detached) for replay priorities."""
        (_, mu_tm1), q_a, target = self.td_terms(params, target_params, batch)
        td = (target - q_a).detach()
        huber = F.huber_loss(q_a, target, reduction="none", delta=self.huber_delta)
        discrete = (batch.weights * huber).mean()
        b = q_a.shape[0]
        mu_a = mu_tm1[torch.arange(b, device=mu_tm1.device), batch.action]  # (B, d)
        if self.half.device != mu_a.device:  # once, to the learner's device
            self.half = self.half.to(mu_a.device)
        mse = (((mu_a - batch.action_cont) / self.half) ** 2).mean(dim=-1)
        adv_w = torch.exp(self.beta * td).clamp(max=self.max_weight)
        continuous = (batch.weights * adv_w * mse).mean()
        return discrete + self.cont_weight * continuous, td


class HybridDQN(Learner):
    """Double-DQN on the discrete part, advantage-weighted regression on the continuous part.

    The loss of a batch is

        ``huber(td) + cont_weight * mean(is_weight * w * mse)``

    where the first term is :class:`~shoal.agent.losses.DQNLoss`'s loss, unchanged (the same
    TD target, double-Q bootstrap and action mask), and
    ``mse = mean_j ((mu_j(s, a) - x_j) / half_range_j) ** 2`` compares the head's continuous
    action for the *taken* discrete action ``a`` with the taken continuous action ``x``, in
    units of the box's half-range so that ``cont_weight`` does not depend on the bounds.

    The per-sample weight is ``w = min(exp(beta * td), max_weight)`` with ``td = target -
    Q(s, a)`` detached: advantage-weighted regression (Peng et al. 2019) onto the actions
    that did better than expected. The baseline is ``Q(s, a)``, the value of the *taken*
    discrete action under the behaviour's continuous values, rather than ``max_k Q(s, k)``:
    ``td`` then measures how good the continuous value was for that choice alone, so each
    discrete action's head learns from its own samples, and choosing the discrete action is
    left to the Q-values. Plain regression (``beta = 0``) would only copy the behaviour
    policy; the exponent tilts it towards better values, and the cap keeps one lucky
    sample (or an early, badly wrong Q) from dominating a batch.

    Args:
        obs_dim: size of the flat observation.
        n_actions: number of discrete actions ``K``.
        action_dim: size of the continuous action ``d``.
        cfg: network, loss and optimizer settings, shared with DQN.
        low, high: bounds of the continuous action (scalars or ``(d,)``), finite.
        cont_weight: weight of the continuous loss term.
        beta: inverse temperature of the advantage weights, per unit of return; the
            default suits rewards of order 1 per step (scale it inversely with the rewards).
            On HybridTarget, beta = 1 reaches about 7 of 10, 5 about 9.5, and 0 (plain
            regression onto the behaviour) stays at the 5 of ignoring the continuous part.
        max_weight: cap on the advantage weights.
        device: 'auto', 'cpu', 'cuda' or a torch device.

    Example:
        >>> agent = HybridDQN(4, 3, 1, DQNConfig(hidden=[16]), low=-1.0, high=1.0,
        ...                   device="cpu")
        >>> batch = HybridBatch.from_numpy({
        ...     "obs": np.zeros((8, 4), np.float32), "action": np.zeros(8, np.int64),
        ...     "action_cont": np.zeros((8, 1), np.float32), "reward": np.ones(8, np.float32),
        ...     "next_obs": np.zeros((8, 4), np.float32),
        ...     "discount": np.full(8, 0.99, np.float32)}, "cpu")
        >>> agent.step(batch).td_errors.shape
        (8,)
    """

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        action_dim: int,
        cfg: DQNConfig,
        *,
        low: ArrayLike,
        high: ArrayLike,
        cont_weight: float = 1.0,
        beta: float = 5.0,
        max_weight: float = 20.0,
        device: str | torch.device | None = "auto",
        network: nn.Module | None = None,
    ) -> None:
        for name, value in (("cont_weight", cont_weight), ("beta", beta)):
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if not max_weight > 0:
            raise ValueError(f"max_weight must be > 0, got {max_weight!r}")
        self.n_actions = n_actions
        self.action_dim = action_dim
        self.low, self.high = _bounds(low, high, action_dim)
        if network is None:  # shoal's, as cfg describes it (else the user's, dqn.network)
            network = make_hybrid_network(cfg, obs_dim, n_actions, action_dim, self.low, self.high)
        loss = HybridLoss(
            network,
            half=(self.high - self.low) / 2,
            cont_weight=cont_weight,
            beta=beta,
            max_weight=max_weight,
            double=cfg.double,
            huber_delta=cfg.huber_delta,
            action_mask=cfg.action_mask,
        )
        super().__init__(network, loss, cfg, device=device)

    def make_batch(self, sample: Mapping[str, np.ndarray]) -> HybridBatch:
        """A replay sample (with ``action_cont``) as tensors on this learner's device."""
        return HybridBatch.from_numpy(sample, self.device)


class HybridActor(Actor):
    """Acting with a hybrid network: ``select_action`` returns ``(discrete, continuous)``.

    With probability ``epsilon`` a uniformly random action from the whole space (both
    parts), as DQN's random action, so ``epsilon = 1`` is the uniform random policy;
    otherwise the greedy action with Gaussian noise (std ``noise_std`` times the half-range)
    on the continuous part, clipped to the box. The noise does not decay with epsilon: the
    regression can only move the head towards values that were tried, so it needs some
    local exploration throughout.

    Example:
        >>> agent = HybridDQN(4, 3, 1, DQNConfig(hidden=[16]), low=-1.0, high=1.0,
        ...                   device="cpu")
        >>> actor = HybridActor(agent.online, params=agent.params, n_actions=3,
        ...                     rng=np.random.default_rng(0))
        >>> (a, x), _ = actor.select_action(np.zeros(4, np.float32))
        >>> 0 <= a < 3, x.shape, bool(-1.0 <= x[0] <= 1.0)
        (True, (1,), True)
    """

    def __init__(
        self,
        network: nn.Module,
        *,
        noise_std: float = 0.2,
        low: ArrayLike | None = None,
        high: ArrayLike | None = None,
        **kw: Any,
    ) -> None:
        if not noise_std >= 0:
            raise ValueError(f"noise_std must be >= 0, got {noise_std!r}")
        super().__init__(network, **kw)
        self.noise_std = noise_std
        if low is None or high is None:  # shoal's network knows its box
            low = (network.act_mid - network.act_half).cpu().numpy()
            high = (network.act_mid + network.act_half).cpu().numpy()
        self.low, self.high = _bounds(low, high, max(np.size(low), np.size(high)))

    @torch.inference_mode()
    def greedy_both(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Greedy discrete actions ``(B,)`` (legal ones, if masked; first max on ties) and
        the head's continuous actions for them ``(B, action_dim)``."""
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        q, mu = apply_network(self.network, self.params, x)
        if self.action_mask:
            q = mask_illegal(q, x)
        a = q.argmax(dim=1)
        mu = mu[torch.arange(len(a), device=mu.device), a].cpu().numpy()
        return a.cpu().numpy(), np.clip(mu, self.low, self.high)  # a user's head may leave the box

    def greedy(self, obs: np.ndarray) -> list[tuple[int, np.ndarray]]:  # type: ignore[override]
        """Greedy ``(discrete, continuous)`` actions for a batch of observations."""
        a, x = self.greedy_both(obs)
        return [(int(ai), xi) for ai, xi in zip(a, x)]

    def act(self, obs: np.ndarray, epsilons: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Exploring ``(discrete, continuous)`` actions for a batch of observations, one
        forward pass for the rows that do not explore (one row draws what
        :meth:`select_action` draws)."""
        rng = self.rng
        explore = rng.random(len(obs)) < epsilons
        greedy = iter(zip(*self.greedy_both(obs[~explore]))) if not explore.all() else None
        out = []
        for i, random in enumerate(explore):
            if random:
                x = rng.uniform(self.low, self.high).astype(np.float32)
                out.append((self._random_action(obs[i]), x))
                continue
            assert greedy is not None
            a, x = next(greedy)
            if self.noise_std > 0:
                x = x + rng.normal(0.0, self.noise_std, len(x)) * (self.high - self.low) / 2
            out.append((int(a), np.clip(x, self.low, self.high).astype(np.float32)))
        return out

    def select_action(self, obs: np.ndarray, state: Any = None) -> tuple[Any, Any]:
        """An exploring ``(discrete, continuous)`` action for one observation."""
        rng = self.rng
        if rng.random() < self.epsilon:
            x = rng.uniform(self.low, self.high).astype(np.float32)
            if self.action_mask:
                return (int(rng.choice(np.flatnonzero(obs[-self.n_actions :] > 0.5))), x), state
            return (int(rng.integers(self.n_actions)), x), state
        a, mu = self.greedy_both(obs[None])
        x = mu[0]
        if self.noise_std > 0:
            x = x + rng.normal(0.0, self.noise_std, len(x)) * (self.high - self.low) / 2
        return (int(a[0]), np.clip(x, self.low, self.high).astype(np.float32)), state
