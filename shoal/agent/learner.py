"""The learner: owns the online and target parameters and the optimizer, and steps them
with a pure loss.

Gradients and the optimizer step are separate calls so that learner threads can compute
gradients in parallel while the weights are held steady and apply them one at a time:

* :meth:`Learner.gradients` returns gradients via ``torch.autograd.grad`` and never touches
  ``.grad``, so it has no side effects on the shared network;
* :meth:`Learner.apply` clips, steps the optimizer and moves the target network;
* :meth:`Learner.step` is both in one call, for the serial loop.

Example:
    >>> import numpy as np
    >>> from shoal.config import DQNConfig
    >>> learner = DQN(4, 2, DQNConfig(hidden=[16]), device="cpu")
    >>> batch = Batch.from_numpy({
    ...     "obs": np.zeros((8, 4), np.float32), "action": np.zeros(8, np.int64),
    ...     "reward": np.ones(8, np.float32), "next_obs": np.zeros((8, 4), np.float32),
    ...     "discount": np.full(8, 0.99, np.float32)}, "cpu")
    >>> info = learner.step(batch)
    >>> info.td_errors.shape, learner.updates
    ((8,), 1)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from shoal.agent.augment import Augment
from shoal.agent.losses import Batch, DQNLoss
from shoal.agent.networks import make_q_network
from shoal.agent.noisy import NoiseSource, noise_shapes
from shoal.agent.update_steps import Loss, LossInfo, Noise, Pending, UpdateSteps
from shoal.config import DQNConfig

__all__ = ["DQN", "Batch", "Learner", "LossInfo", "Pending", "make_adam", "resolve_device"]


def resolve_device(device: str | torch.device | None) -> torch.device:
    """'auto' or None picks CUDA when present, else CPU."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def make_adam(params: Sequence[torch.Tensor], cfg: DQNConfig) -> Any:
    """Adam on torch's fused kernel where the device has one (CPU, CUDA): on small nets the
    optimizer step is per-tensor overhead, and the fused kernel cuts it about 3x on CPU
    (150 -> 45 us). :class:`~shoal.agent.fused_adam.FusedAdam` calls it without
    ``torch.optim``'s wrappers, which import ``torch._dynamo`` on first use (1.1-1.3 s of a
    short run's start-up); updates and state dicts are ``torch.optim.Adam(fused=True)``'s."""
    if all(p.device.type in ("cpu", "cuda") for p in params):
        from shoal.agent.fused_adam import FusedAdam

        return FusedAdam(params, lr=cfg.lr, eps=cfg.adam_eps)
    return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.adam_eps)


def set_adam_hyperparameters(optimizer: Any, cfg: DQNConfig) -> None:
    """Apply the config's learning rate and eps to a restored optimizer: its state dict
    carries the values it was saved with, and a resumed run with ``--set dqn.lr=...``
    means the new one."""
    if hasattr(optimizer, "lr"):
        optimizer.lr, optimizer.eps = cfg.lr, cfg.adam_eps
    else:
        for group in optimizer.param_groups:
            group["lr"], group["eps"] = cfg.lr, cfg.adam_eps


class Learner(UpdateSteps):
    """Online and target networks, an optimizer and a pure loss: gradients / apply / step
    and its state for checkpoints.

    Args:
        network: the online network (its deep copy becomes the target network).
        loss: a pure loss over explicit parameters (e.g. :class:`~shoal.agent.losses.DQNLoss`).
        cfg: optimizer, clipping and target-update settings.
        device: 'auto', 'cpu', 'cuda' or a torch device.
    """

    def __init__(
        self,
        network: nn.Module,
        loss: Loss,
        cfg: DQNConfig,
        *,
        device: str | torch.device | None = "auto",
    ) -> None:
        self.cfg = cfg
        self.device = resolve_device(device)
        self.online = network.to(self.device)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.loss = loss
        self.params: dict[str, torch.Tensor] = dict(self.online.named_parameters())
        """The online parameters by name (live: the optimizer steps them in place)."""
        self.target_params: dict[str, torch.Tensor] = dict(self.target.named_parameters())
        self._param_list = list(self.params.values())
        self.optimizer = make_adam(self._param_list, cfg)
        self.updates = 0
        """Optimizer steps taken; drives the hard target period."""
        self.noise: NoiseSource | None = None
        """Noisy layers' noise for each loss evaluation (None: the network has none); its
        seed is drawn from torch's generator after the weights (the caller seeds it)."""
        shapes = noise_shapes(self.params)
        if shapes:
            self.noise = NoiseSource(shapes, int(torch.randint(2**62, ())))
        self.augment: Augment | None = None
        """What changes each sampled batch before it becomes tensors (``dqn.augment``;
        None: nothing), set by whoever builds the learner for a run."""
        self.init_updates(loss)

    def draw_noise(self) -> Noise | None:
        """Fresh noise for the online and the target weights (None: no noisy layers)."""
        return None if self.noise is None else self.noise.draw(self.device)

    def gradients(self, batch: Any) -> tuple[list[torch.Tensor], LossInfo]:
        """Gradients of the loss w.r.t. the online parameters; ``.grad`` is left alone."""
        loss, td, grads = self._loss_and_gradients(batch)
        return grads, LossInfo(float(loss.detach()), td.detach().cpu().numpy())

    def _loss_and_gradients(
        self, batch: Any, noise: Noise | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        loss, td = self._loss_fn(*self.loss_params(noise), batch)
        # Zeros for parameters a batch does not reach (a communication block in a batch
        # where no agent meets another).
        grads = torch.autograd.grad(loss, self._param_list, materialize_grads=True)
        return loss, td, list(grads)

    def apply(self, grads: Sequence[torch.Tensor]) -> float:
        """Clip ``grads`` by global norm, take an optimizer step, move the target network.

        Returns the gradient norm before clipping.
        """
        norm = self._step_weights(grads)
        self._count_update()
        return float(norm)

    def _step_weights(self, grads: Sequence[torch.Tensor]) -> torch.Tensor:
        """Clip, optimizer step and a soft target update: device work only (capturable)."""
        for p, g in zip(self._param_list, grads):
            p.grad = g  # FusedAdam makes it contiguous (the fused kernel reads memory order)
        norm = torch.nn.utils.clip_grad_norm_(self._param_list, self.cfg.max_grad_norm)
        self.optimizer.step()
        for p in self._param_list:
            p.grad = None
        if self.cfg.target_update == "soft":
            self.soft_update(self.cfg.tau)
        return norm

    batch_type: type[Batch] = Batch
    """The batch its loss reads: a replay sample's fields and :meth:`batch_extras`."""

    def make_batch(self, sample: Mapping[str, np.ndarray]) -> Batch:
        """A replay sample as tensors on this learner's device, with its extras (and
        augmented first when :attr:`augment` is set)."""
        if self.augment is not None:
            sample = self.augment(sample)
        base = vars(Batch.from_numpy(sample, self.device))
        return self.batch_type(**base, **self.batch_extras(len(sample["action"])))

    def batch_extras(self, n: int) -> dict[str, torch.Tensor]:
        """What a loss reads besides the replay's fields for a batch of ``n`` (IQN's
        quantile fractions), drawn from state the learner checkpoints: nothing for DQN."""
        return {}

    def extra_state(self) -> dict[str, Any]:
        """State beyond weights, optimizer and counter that a resume needs (the generators
        of the noise, of :meth:`batch_extras` and of the augmentation): nothing for
        plain DQN."""
        state: dict[str, Any] = {}
        if self.noise is not None:
            state["noise"] = self.noise.state_dict()
        if self.augment is not None:
            state["augment"] = self.augment.state_dict()
        return state

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`extra_state` saved (``state`` is the learner's whole state)."""
        if self.noise is not None:
            self.noise.load_state_dict(state["noise"])
        if self.augment is not None and "augment" in state:  # absent: saved without one
            self.augment.load_state_dict(state["augment"])

    def read(self, pending: Pending) -> LossInfo:
        """An update's loss and TD errors read back (waits for the update)."""
        return pending.info()

    # --- weights and checkpoints ----------------------------------------------------------
    def weights(self) -> dict[str, torch.Tensor]:
        """The online weights by name (live tensors: a weight store copies them)."""
        return self.online.state_dict()

    def state_dict(self) -> dict[str, Any]:
        """Online and target weights, optimizer state, the update counter and any
        :meth:`extra_state`."""
        return {
            "online": self.online.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            **self.extra_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        # Optimizer.load_state_dict keeps the given tensors when no cast is needed: without
        # the copy, two learners loaded from one in-memory state would share Adam moments.
        self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
        set_adam_hyperparameters(self.optimizer, self.cfg)
        self.updates = int(state["updates"])
        self.load_extra_state(state)


class DQN(Learner):
    """Double-DQN learner with n-step targets, Huber loss and importance weights, on the
    Q-network a :class:`~shoal.config.DQNConfig` describes (or ``network``)."""

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        cfg: DQNConfig,
        *,
        device: str | torch.device | None = "auto",
        network: nn.Module | None = None,
    ) -> None:
        self.n_actions = n_actions
        network = make_q_network(cfg, obs_dim, n_actions) if network is None else network
        loss = DQNLoss(
            network, double=cfg.double, huber_delta=cfg.huber_delta, action_mask=cfg.action_mask
        )
        super().__init__(network, loss, cfg, device=device)
