"""The actor: picks actions with a Q-network whose weights come from a weight source.

``select_action(obs, state) -> (action, state)`` carries an optional recurrent state
(``None`` for feed-forward networks), so recurrent agents use the same interface. The actor
holds no optimizer: its weights are either the learner's own (serial runs), or the latest
copy pulled from a weight store (:meth:`Actor.update`), which is how threads, processes and
Ray actors see a learner's progress.

Example:
    >>> import numpy as np
    >>> from shoal.agent.networks import QNetwork
    >>> net = QNetwork(4, 2, hidden=[8], dueling=False)
    >>> actor = Actor(net, params=dict(net.named_parameters()), n_actions=2,
    ...               rng=np.random.default_rng(0))
    >>> actor.epsilon = 0.0
    >>> action, state = actor.select_action(np.zeros(4, np.float32))
    >>> action in (0, 1), state is None
    (True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from shoal.agent.losses import mask_illegal
from shoal.agent.networks import Params, apply_network, recurrent_q
from shoal.agent.noisy import draw_noise_np, noise_shapes

__all__ = ["Actor", "WeightSource", "epsilon_greedy_action"]


class WeightSource(Protocol):
    """Anything an actor can pull newer weights from (the weight stores of
    :mod:`shoal.sync.weights`): ``pull(if_newer_than)`` returns an object with ``version``,
    ``state`` and ``meta``, or None when nothing newer exists."""

    def pull(self, if_newer_than: int = -1) -> Any: ...


def epsilon_greedy_action(
    greedy: Callable[[np.ndarray], np.ndarray],
    obs: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    n_actions: int,
    masked: bool = False,
) -> int:
    """A random (legal, if ``masked``) action with probability epsilon, else ``greedy``'s.
    Skips the forward pass on a random action (most of them early on)."""
    if rng.random() < epsilon:
        if masked:
            return int(rng.choice(np.flatnonzero(obs[-n_actions:] > 0.5)))
        return int(rng.integers(n_actions))
    return int(greedy(obs[None])[0])


class Actor:
    """Epsilon-greedy acting over a network applied to explicit weights
    (:func:`~shoal.agent.networks.apply_network`).

    Args:
        network: the network template (its own weights are not used when ``params`` or a
            ``source`` is given).
        params: weights to act with (e.g. the learner's live parameters); default the
            network's own.
        source: a weight source; :meth:`update` pulls newer weights from it.
        n_actions: number of discrete actions.
        action_mask: observations end with a mask of legal actions.
        device: where the forward pass runs (default: where the weights are; it follows
            the weights pulled from ``source``).
        rng: the generator of exploration draws.
    """

    def __init__(
        self,
        network: nn.Module,
        *,
        params: Params | None = None,
        source: WeightSource | None = None,
        n_actions: int,
        action_mask: bool = False,
        device: str | torch.device | None = None,
        rng: np.random.Generator,
    ) -> None:
        self.network = network
        self.params: Params = dict(network.named_parameters()) if params is None else params
        self.source = source
        self.n_actions = n_actions
        self.action_mask = action_mask
        if device is None:
            first = next(iter(self.params.values()), None)
            device = "cpu" if first is None else first.device
        self.device = torch.device(device)
        self._recurrent = bool(getattr(network, "recurrent", False))
        self._noise_shapes = noise_shapes(dict(network.named_parameters()))
        """Its noisy layers: acting draws fresh noise for them at every step."""
        self.rng = rng
        self.epsilon = 1.0
        """Probability of a random action; the runner sets it (schedule or published)."""
        self.version = -1
        """Version of the weights in use (-1: none pulled yet)."""
        self.meta: dict[str, float] = {}
        """Metadata published with those weights (e.g. epsilon, opponent id)."""

    def update(self) -> bool:
        """Pull newer weights from the source, if any; True when they changed."""
        if self.source is None:
            return False
        got = self.source.pull(self.version)
        if got is None:
            return False
        self.version, self.params, self.meta = got.version, got.state, dict(got.meta)
        first = next(iter(self.params.values()), None)
        if first is not None:
            self.device = first.device  # the learner's device (a CUDA learner's copy)
        return True

    @property
    def recurrent(self) -> bool:
        """Whether the network carries a state from step to step."""
        return self._recurrent

    def initial_state(self) -> Any:
        """The recurrent state at an episode's start (None: feed-forward)."""
        if not self.recurrent:
            return None
        return self.network.initial_state(1)

    @torch.inference_mode()
    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """Greedy (legal, if masked) actions for a batch of observations (first max on
        ties)."""
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        q = apply_network(self.network, self.params, x)
        if self.action_mask:
            q = mask_illegal(q, x)
        return q.argmax(dim=1).cpu().numpy()

    @torch.inference_mode()
    def explore_greedy(self, obs: np.ndarray) -> np.ndarray:
        """The actions acting takes before epsilon: :meth:`greedy`'s, under fresh noise
        (drawn from the exploration generator) when the network has noisy layers."""
        if not self._noise_shapes:
            return self.greedy(obs)
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        noise = draw_noise_np(self._noise_shapes, self.rng, self.device)
        q = apply_network(self.network, {**self.params, **noise}, x)
        if self.action_mask:
            q = mask_illegal(q, x)
        return q.argmax(dim=1).cpu().numpy()

    def act(self, obs: np.ndarray, epsilons: np.ndarray) -> Any:
        """Epsilon-greedy actions for a batch of observations, row i exploring with
        ``epsilons[i]``, with one forward pass for the whole batch (none when every row
        explores). For one row it draws exactly what :meth:`select_action` draws, so a run
        with one env repeats the single-env actor's choices."""
        explore = self.rng.random(len(obs)) < epsilons
        k = int(np.count_nonzero(explore))
        if k == 0:  # the common case late in a run
            return self.explore_greedy(obs)
        # Exploring rows ride along in the forward: selecting the others would cost more
        # (copies) than the rows save on a network an actor steps every env step with.
        actions = self.explore_greedy(obs) if k < len(obs) else np.empty(len(obs), np.int64)
        if self.action_mask:
            for i in np.flatnonzero(explore):
                actions[i] = self._random_action(obs[i])
        else:  # one draw for all (one row: the same draw as select_action's)
            actions[explore] = self.rng.integers(self.n_actions, size=k)
        return actions

    def _random_action(self, obs: np.ndarray) -> int:
        """A uniformly random (legal, if masked) action."""
        if self.action_mask:
            return int(self.rng.choice(np.flatnonzero(obs[-self.n_actions :] > 0.5)))
        return int(self.rng.integers(self.n_actions))

    @torch.inference_mode()
    def q_values(self, obs: np.ndarray, state: Any = None) -> tuple[torch.Tensor, Any]:
        """A recurrent network's Q-values for one observation (illegal actions at -inf
        where masked) and its next state (``None`` in: :meth:`initial_state`); its
        ``obs_dtype`` says how observations reach it (packed bits stay uint8)."""
        if state is None:
            state = self.initial_state()
        q, state = recurrent_q(self.network, self.params, obs[None], state, self.device)
        if self.action_mask:
            q = mask_illegal(q, torch.as_tensor(obs[None], device=q.device))
        return q, state

    def select_action(self, obs: np.ndarray, state: Any = None) -> tuple[Any, Any]:
        """An epsilon-greedy action for one observation, and the next recurrent state
        (``None`` in, at an episode's start, means :meth:`initial_state`). A recurrent
        network steps its memory on every observation, random actions included. A network
        that scores every agent of a joint observation (Q ``(1, N, A)``, e.g. MAPF's shared
        network) gets an int array of N actions, each agent exploring on its own; its
        ``obs_dtype`` says how observations reach it (packed bits stay uint8)."""
        if not self._recurrent:
            action = epsilon_greedy_action(
                self.explore_greedy, obs, self.epsilon, self.rng, self.n_actions, self.action_mask
            )
            return action, state
        q, state = self.q_values(obs, state)
        best = q.argmax(dim=-1).cpu().numpy()
        if q.dim() == 3:  # one Q row per agent of a joint observation: one action each
            explore = self.rng.random(best.shape[1]) < self.epsilon
            actions = best[0].copy()
            actions[explore] = self.rng.integers(self.n_actions, size=int(explore.sum()))
            return actions, state
        action = epsilon_greedy_action(
            lambda _: best, obs, self.epsilon, self.rng, self.n_actions, self.action_mask
        )
        return action, state
