"""K independent learners as one program: stacked parameters, the one pure loss over them
(batched matmuls for plain MLPs, ``torch.func.vmap`` for other networks), one optimizer,
per-agent gradient clipping.

Each agent keeps its own weights, target network, Adam moments and (outside this module)
replay buffer; nothing is shared or averaged. Stacking only batches the arithmetic: agent
k's slice of every tensor is agent k's parameters, the loss of agent k reads only that slice,
so the gradient of the SUM of the K losses is each agent's own gradient (a mean would scale
it by 1/K and change clipping and Adam's eps), each agent's gradients are clipped by its
own global norm, and Adam is elementwise, so one Adam over the stacked tensors is K Adams.
Every agent steps every round: zeroing an agent's gradient would not freeze its Adam
slice. The result equals K separate :class:`~shoal.agent.learner.Learner` s, each stepping
on its own batches (``tests/agent/test_stacked.py``: within 1.2e-7 after 100 updates).

:class:`StackedActor` picks all K agents' actions with one batched forward.

Example:
    >>> import numpy as np
    >>> from shoal.agent.learner import DQN
    >>> from shoal.config import DQNConfig
    >>> agents = [DQN(4, 2, DQNConfig(hidden=[8]), device="cpu") for _ in range(3)]
    >>> stacked = StackedLearner(agents)
    >>> stacked.k, stacked.params["advantage.weight"].shape
    (3, torch.Size([3, 2, 8]))
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch.func import stack_module_state, vmap

from shoal.agent.learner import Learner, make_adam, set_adam_hyperparameters
from shoal.agent.losses import Batch, mask_illegal
from shoal.agent.networks import Params, apply_network
from shoal.agent.noisy import draw_noise_np, noise_shapes
from shoal.agent.update_steps import Noise, Pending, UpdateSteps

__all__ = ["StackedActor", "StackedLearner", "StackedLossInfo", "stack_batches"]


@dataclass
class StackedLossInfo:
    """Per-agent losses ``(K,)`` and TD errors ``(K, B)``, detached, as numpy."""

    loss: np.ndarray
    td_errors: np.ndarray


def stack_batches(batches: Sequence[Batch]) -> Batch:
    """K batches (one per agent, same size and kind) as one batch with a leading agent
    axis."""
    kind = type(batches[0])
    return kind(
        **{f.name: torch.stack([getattr(b, f.name) for b in batches]) for f in fields(kind)}
    )


class StackedLearner(UpdateSteps):
    """K learners of one kind (same network shape, loss and config) trained as one.

    Built from K ordinary learners, so each agent starts from its own initialisation; their
    weights, targets and optimizer state are copied into the stack (the learners' own are
    not used afterwards: only their batch extras, such as IQN's fractions, are still drawn
    from each, so agent k draws what it would alone). :meth:`agent_state_dict` gives agent
    k back in a learner's format.

    Args:
        learners: the K agents (each a :class:`~shoal.agent.learner.Learner`).
    """

    def __init__(self, learners: Sequence[Learner]) -> None:
        first = learners[0]
        self.k = len(learners)
        self.cfg = first.cfg
        self.device = first.device
        params, _ = stack_module_state([a.online for a in learners])
        targets, _ = stack_module_state([a.target for a in learners])
        self.params: dict[str, torch.Tensor] = params
        """Online parameters by name, each ``(K, *shape)`` (leaves the optimizer steps)."""
        self.target_params = {n: t.detach() for n, t in targets.items()}
        # The loss reads the network only through apply_network; this copy's own weights
        # never enter a result.
        self.loss = copy.copy(first.loss)
        self.loss.network = copy.deepcopy(first.online).requires_grad_(False)
        self._param_list = list(self.params.values())
        self.optimizer = make_adam(self._param_list, self.cfg)
        self.updates = first.updates
        self.learners = list(learners)
        """The K agents, for their :meth:`~shoal.agent.learner.Learner.batch_extras`."""
        self.batch_type = first.batch_type
        self._vloss = vmap(self._one)
        self.init_updates(self._stacked_loss)

    def _one(self, params: Params, target_params: Params, *batch: torch.Tensor) -> Any:
        return self.loss(params, target_params, self.batch_type(*batch))

    def draw_noise(self) -> Noise | None:
        """Each agent's fresh noise, stacked (None: no noisy layers)."""
        if self.learners[0].noise is None:
            return None
        draws = [le.noise.draw(self.device) for le in self.learners]  # type: ignore[union-attr]
        online = {n: torch.stack([d[0][n] for d in draws]) for n in draws[0][0]}
        target = {n: torch.stack([d[1][n] for d in draws]) for n in draws[0][1]}
        return online, target

    def make_batch(self, sample: Mapping[str, np.ndarray]) -> Batch:
        """A stacked ``(K, B, ...)`` replay sample as tensors on the device, with each
        agent's own batch extras."""
        if "weights" not in sample:  # uniform replay: ones per agent and sample
            sample = {**sample, "weights": np.ones(np.shape(sample["action"])[:2], np.float32)}
        base = vars(Batch.from_numpy(sample, self.device))
        b = len(sample["action"][0])
        extras = [le.batch_extras(b) for le in self.learners]
        stacked = {n: torch.stack([e[n] for e in extras]) for n in extras[0]}
        return self.batch_type(**base, **stacked)

    def gradients(self, batch: Batch) -> tuple[list[torch.Tensor], StackedLossInfo]:
        """Each agent's gradients (stacked) from a ``(K, B, ...)`` batch; ``.grad`` is
        left alone."""
        losses, td, grads = self._loss_and_gradients(batch)
        return grads, self.read(Pending(losses.detach(), td.detach()))

    def _loss_and_gradients(
        self, batch: Batch, noise: Noise | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        losses, td = self._loss_fn(*self.loss_params(noise), batch)
        grads = torch.autograd.grad(losses.sum(), self._param_list)
        return losses, td, list(grads)

    def _stacked_loss(self, params: Params, target_params: Params, batch: Batch) -> Any:
        """The K losses ``(K,)`` and TD errors ``(K, B)`` of a stacked batch."""
        if getattr(self.loss.network, "stackable", False):  # batched matmuls, no vmap
            return self.loss(params, target_params, batch)
        values = [getattr(batch, f.name) for f in fields(self.batch_type)]
        return self._vloss(params, target_params, *values)

    def apply(self, grads: Sequence[torch.Tensor]) -> np.ndarray:
        """Clip each agent's gradients by its own global norm, step every agent, move the
        targets; returns the ``(K,)`` norms before clipping."""
        norms = self._step_weights(grads)
        self._count_update()
        return norms.detach().cpu().numpy()

    def _step_weights(self, grads: Sequence[torch.Tensor]) -> torch.Tensor:
        k = self.k
        per_tensor = torch.stack([g.reshape(k, -1).norm(dim=1) for g in grads], dim=1)
        norms = per_tensor.norm(dim=1)
        # What clip_grad_norm_ does for one learner, per agent.
        coef = (self.cfg.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
        for p, g in zip(self._param_list, grads):
            # In place: the gradients are this step's own fresh tensors.
            p.grad = g.mul_(coef.view(k, *[1] * (g.dim() - 1))).contiguous()
        self.optimizer.step()
        for p in self._param_list:
            p.grad = None
        if self.cfg.target_update == "soft":
            self.soft_update(self.cfg.tau)
        return norms

    def read(self, pending: Pending) -> StackedLossInfo:
        """The K losses and TD errors read back (waits for the update)."""
        return StackedLossInfo(pending.loss.cpu().numpy(), pending.td_errors.cpu().numpy())

    def weights(self) -> dict[str, torch.Tensor]:
        """The stacked online weights by name (live: a weight store copies them)."""
        return {n: p.detach() for n, p in self.params.items()}

    def agent_state_dict(self, k: int) -> dict[str, Any]:
        """Agent ``k`` as a :meth:`Learner.state_dict <shoal.agent.learner.Learner.state_dict>`
        (online, target, its slice of the optimizer state, updates)."""
        opt = self.optimizer.state_dict()
        state = {
            i: {n: (v[k] if v.dim() > 0 else v).clone() for n, v in s.items()}
            for i, s in opt["state"].items()
        }
        return {
            "online": {n: p[k].detach().clone() for n, p in self.params.items()},
            "target": {n: t[k].clone() for n, t in self.target_params.items()},
            "optimizer": {"state": state, "param_groups": opt["param_groups"]},
            "updates": self.updates,
            **self.learners[k].extra_state(),
        }

    def state_dict(self) -> dict[str, Any]:
        """Stacked weights, targets, optimizer state, the update counter and each agent's
        extra state."""
        return {
            "online": {n: p.detach().clone() for n, p in self.params.items()},
            "target": {n: t.clone() for n, t in self.target_params.items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "updates": self.updates,
            "agents": [le.extra_state() for le in self.learners],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (copies: nothing is shared with it).
        Weights of another shape (a changed network or number of agents) are a one-line
        ValueError naming the first parameter and both shapes, before any is copied."""
        from shoal.run.checkpoint import weights_misfit

        for part, own in (("online", self.params), ("target", self.target_params)):
            misfit = weights_misfit(state[part], own)
            if misfit is not None:
                raise ValueError(misfit)
        with torch.no_grad():
            for n, p in self.params.items():
                p.copy_(state["online"][n])
            for n, t in self.target_params.items():
                t.copy_(state["target"][n])
        self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
        set_adam_hyperparameters(self.optimizer, self.cfg)
        self.updates = int(state["updates"])
        for le, extra in zip(self.learners, state.get("agents", [{}] * self.k)):
            le.load_extra_state(extra)


class StackedActor:
    """Epsilon-greedy actions for K agents from their stacked weights: one batched
    forward (``batched=True``) or one forward per agent (the fallback), the same actions
    either way. Agent k explores with its own generator ``rngs[k]``.

    Args:
        network: the network template (applied to explicit weights only).
        params: stacked weights ``(K, ...)`` by name (e.g. a published snapshot).
        n_actions: discrete actions per agent.
        rngs: one generator per agent.
        action_mask: observations end with a mask of legal actions.
        batched: one forward for all agents.
    """

    def __init__(
        self,
        network: Any,
        params: Params,
        *,
        n_actions: int,
        rngs: Sequence[np.random.Generator],
        action_mask: bool = False,
        batched: bool = True,
        device: str | torch.device = "cpu",
    ) -> None:
        self.network = network
        self.params = params
        self.n_actions = n_actions
        self.rngs = list(rngs)
        self.action_mask = action_mask
        self.batched = batched
        self.device = torch.device(device)
        self.version = -1
        """Version of the weights in use, when they come from a weight store."""
        self._vq = vmap(functools.partial(apply_network, network))
        self._noise_shapes = noise_shapes(dict(network.named_parameters()))
        """Its noisy layers: acting draws each agent's own noise at every turn."""

    def rng_states(self) -> list[dict[str, Any]]:
        """The agents' exploration generators' states (a checkpoint keeps them; a collector
        process acts on from them)."""
        return [g.bit_generator.state for g in self.rngs]

    def set_rng_states(self, states: Sequence[dict[str, Any]]) -> None:
        """Explore on from :meth:`rng_states`."""
        for g, state in zip(self.rngs, states):
            g.bit_generator.state = state

    def greedy(self, obs: np.ndarray, noisy: bool = False) -> np.ndarray:
        """Each agent's greedy action for its own observation; ``obs`` is ``(K, obs_dim)``;
        ``noisy``: under fresh noise, agent k's from ``rngs[k]`` (acting)."""
        return self.greedy_worlds(obs[:, None], noisy)[:, 0]

    @torch.inference_mode()
    def greedy_worlds(self, obs: np.ndarray, noisy: bool = False) -> np.ndarray:
        """Each agent's greedy actions ``(K, W)`` in W worlds at once; ``obs`` is ``(K, W,
        obs_dim)`` (one forward for all of them, as for one world); ``noisy``: under fresh
        noise for a network with noisy layers."""
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        params = self.params
        if noisy and self._noise_shapes:
            draws = [draw_noise_np(self._noise_shapes, rng, self.device) for rng in self.rngs]
            params = {**params, **{n: torch.stack([d[n] for d in draws]) for n in draws[0]}}
        if self.batched and getattr(self.network, "stackable", False):
            q = self.network.apply_params(params, x)  # batched matmuls
        elif self.batched:
            q = self._vq(params, x)
        else:
            q = torch.stack(
                [
                    apply_network(self.network, {n: p[k] for n, p in params.items()}, x[k])
                    for k in range(len(x))
                ]
            )
        if self.action_mask:
            q = mask_illegal(q, x)
        return q.argmax(dim=-1).cpu().numpy()

    def select_actions(self, obs: np.ndarray, epsilon: float) -> np.ndarray:
        """Epsilon-greedy actions ``(K,)``: agent k draws from ``rngs[k]`` exactly as a
        single :class:`~shoal.agent.actor.Actor` would (one uniform, then a random action
        when it is below epsilon), so batched and per-agent acting agree action for action."""
        explore = np.array([rng.random() < epsilon for rng in self.rngs])
        actions = np.zeros(len(self.rngs), np.int64)
        if not explore.all():
            actions[:] = self.greedy(obs, noisy=True)
        for k in np.flatnonzero(explore):
            if self.action_mask:
                legal = np.flatnonzero(obs[k, -self.n_actions :] > 0.5)
                actions[k] = self.rngs[k].choice(legal)
            else:
                actions[k] = self.rngs[k].integers(self.n_actions)
        return actions
