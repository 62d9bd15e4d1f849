"""How a learner's updates run, shared by the single learner and the K stacked agents:
an update without waiting for the device, the hard target period, and ``run.compile``'s
choice of eager, compiled loss or captured CUDA graph (:mod:`shoal.agent.capture`).

A learner supplies ``_loss_and_gradients`` and ``_step_weights`` (its loss, its clip);
everything here is the same for both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from shoal.agent.capture import SHOWN, GraphedUpdate, compile_loss, resolve_compile
from shoal.agent.networks import Params

__all__ = ["Loss", "LossInfo", "Noise", "Pending", "UpdateInput", "UpdateSteps"]

Loss = Callable[[Params, Params, Any], tuple[torch.Tensor, torch.Tensor]]
"""A pure loss: ``(params, target_params, batch) -> (loss, td_errors)``."""
Noise = tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]
"""Noisy layers' noise for one loss evaluation: the online weights', the target's."""


@dataclass(slots=True)
class UpdateInput:
    """What one update reads besides the learner's own state: the batch and the noise
    drawn for it on the host (a captured update's inputs, copied in before each replay)."""

    batch: Any
    noise: Noise | None = None


@dataclass
class LossInfo:
    """What one loss evaluation reports: the scalar loss and per-sample TD errors
    (for replay priorities), both detached."""

    loss: float
    td_errors: np.ndarray


@dataclass(slots=True)
class Pending:
    """One update's loss and TD errors, still on the device: reading them waits for the
    update, so a runner reads the loss at log ticks and copies TD errors out without
    blocking (:class:`~shoal.agent.late_priorities.LatePriorities`)."""

    loss: torch.Tensor
    td_errors: torch.Tensor

    def info(self) -> LossInfo:
        """Both read back (waits for the update)."""
        return LossInfo(float(self.loss), self.td_errors.cpu().numpy())


class UpdateSteps:
    """The update loop of a learner with ``params``, ``target_params``, ``optimizer``,
    ``cfg``, ``device`` and ``updates``."""

    cfg: Any
    device: torch.device
    updates: int
    optimizer: Any
    params: dict[str, torch.Tensor]
    target_params: dict[str, torch.Tensor]
    _param_list: list[torch.Tensor]

    def init_updates(self, loss: Loss) -> None:
        """Eager updates on ``loss`` until :meth:`set_compile` says otherwise."""
        self.notes: list[str] = []
        """Lines for the run's output about how updates run (a fallback to eager, why)."""
        self.compile_mode = "off"
        """How :meth:`update` runs: 'off' (eager), 'compile' or 'graph'."""
        self.update_line = "update eager"
        """How updates run, as the run's first line says it (:meth:`set_compile`)."""
        self._eager_loss = loss
        self._loss_fn: Loss = loss
        self._run_update: Callable[[Any], tuple[torch.Tensor, torch.Tensor]] = self.update_body

    # --- what each learner supplies -----------------------------------------------------------
    def _loss_and_gradients(
        self, batch: Any, noise: Noise | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
        raise NotImplementedError

    def _step_weights(self, grads: Sequence[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def draw_noise(self) -> Noise | None:
        """Fresh noise for a loss evaluation (None: no noisy layers)."""
        raise NotImplementedError

    def read(self, pending: Pending) -> Any:
        """An update's results read back (waits for the update)."""
        raise NotImplementedError

    def loss_params(self, noise: Noise | None = None) -> tuple[Params, Params]:
        """The online and target weights a loss evaluation reads: with ``noise`` (default:
        fresh noise) when the network has noisy layers."""
        noise = noise or self.draw_noise()
        if noise is None:
            return self.params, self.target_params
        online, target = noise
        return {**self.params, **online}, {**self.target_params, **target}

    # --- the update -------------------------------------------------------------------------
    def update_body(self, inputs: UpdateInput) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradients, clip, optimizer step and a soft target update, nothing read back:
        the loss and TD errors as device tensors. What ``run.compile = 'graph'`` captures."""
        loss, td, grads = self._loss_and_gradients(inputs.batch, inputs.noise)
        self._step_weights(grads)
        return loss.detach(), td.detach()

    def update(self, batch: Any) -> Pending:
        """One learning step without waiting for the device (as :attr:`compile_mode` runs
        it): its loss and TD errors stay on the device until read."""
        loss, td = self._run_update(UpdateInput(batch, self.draw_noise()))
        self._count_update()
        return Pending(loss, td)

    def step(self, batch: Any) -> Any:
        """One full learning step (gradients, then apply), its results read back."""
        return self.read(self.update(batch))

    def _count_update(self) -> None:
        """Count an update; copy the target when the hard period says so."""
        self.updates += 1
        if self.cfg.target_update != "soft" and self.updates % self.cfg.target_period == 0:
            self.sync_target()

    @torch.no_grad()
    def sync_target(self) -> None:
        """Hard update: copy the online weights into the target network."""
        torch._foreach_copy_(list(self.target_params.values()), self._param_list)

    @torch.no_grad()
    def soft_update(self, tau: float) -> None:
        """Polyak update: target <- tau * online + (1 - tau) * target."""
        torch._foreach_lerp_(list(self.target_params.values()), self._param_list, tau)

    # --- how updates run --------------------------------------------------------------------
    def set_compile(self, mode: str) -> str:
        """Run :meth:`update` as ``run.compile = mode`` says (see
        :func:`~shoal.agent.capture.resolve_compile`); returns the words the run's first
        line shows. Fallbacks to eager are added to :attr:`notes` as they happen."""
        resolved, why = resolve_compile(mode, self.device)
        graphed = GraphedUpdate(self, measure=mode == "auto") if resolved == "graph" else None
        return self._run_updates(resolved, why, graphed)

    def capture_with(self, capture: Any) -> str:
        """Run :meth:`update` as a graph recorded by ``capture`` instead of CUDA's (what
        :class:`~shoal.agent.capture.GraphedUpdate` takes): a recording that replays on a
        CPU is how the captured update's checks are tested without a GPU."""
        graphed = GraphedUpdate(self, capture=capture, measure=False)
        return self._run_updates("graph", "a stand-in recording", graphed)

    def _run_updates(self, resolved: str, why: str, graphed: GraphedUpdate | None) -> str:
        self.compile_mode = resolved
        self._loss_fn, self._run_update = self._eager_loss, self.update_body
        if resolved == "compile":
            self._loss_fn = compile_loss(self._loss_fn, self.notes)
        elif graphed is not None:
            self.notes.extend(graphed.notes)
            graphed.notes = self.notes
            self._run_update = graphed
        self.update_line = f"update {SHOWN[resolved]}" + (f", {why}" if why else "")
        return self.update_line

    def state_tensors(self) -> list[torch.Tensor]:
        """Every tensor an update writes: weights, targets and the optimizer's state."""
        opt = self.optimizer
        moments = [*opt.exp_avg, *opt.exp_avg_sq, *opt.steps] if hasattr(opt, "steps") else []
        return [*self._param_list, *self.target_params.values(), *moments]

    def baked(self) -> tuple[Any, ...]:
        """The host numbers a captured update holds as constants: each parameter group's
        learning rate, betas and eps, the clip norm and tau (checked before each replay)."""
        groups = tuple((g["lr"], tuple(g["betas"]), g["eps"]) for g in self.optimizer.param_groups)
        return groups, self.cfg.max_grad_norm, self.cfg.tau

    def capture_blocker(self) -> str | None:
        """Why this learner's update cannot be captured as a CUDA graph, or None."""
        if not hasattr(self.optimizer, "steps"):
            return "the optimizer has no step count on the device"
        return None
