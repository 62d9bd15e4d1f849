"""Adam on torch's fused kernel without torch.optim.Optimizer, whose wrappers import
torch._dynamo (1.1-1.3 s) on first use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["FusedAdam"]


class FusedAdam:
    """``torch.optim.Adam(params, lr, eps=eps, fused=True)`` (no weight decay, no amsgrad),
    one fused kernel call per step, without torch.optim's machinery.

    ``Optimizer.__init__``, ``step``, ``zero_grad`` and ``state_dict`` go through wrappers
    (``torch._disable_dynamo``, ``_use_grad_for_differentiable``) that import
    ``torch._dynamo`` on first call: 1.1-1.3 s on 2 cores, most of a short run's start-up.
    shoal never compiles, so this calls the same kernel directly: updates are bit-identical
    to torch's fused Adam, a step costs about 5x less Python (23 vs 120 us on a 2-layer MLP),
    and :meth:`state_dict` has ``torch.optim.Adam``'s format, so checkpoints load either way.
    The kernel exists for CPU and CUDA tensors.
    """

    def __init__(
        self,
        params: Sequence[torch.Tensor],
        lr: float,
        eps: float = 1e-8,
        betas: tuple[float, float] = (0.9, 0.999),
    ) -> None:
        self.params = list(params)
        self.lr, self.eps, self.betas = lr, eps, betas
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]
        self._stepped = False  # torch.optim.Adam's state is empty until the first step

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The one parameter group, as ``torch.optim.Adam.param_groups`` shows it."""
        return [{**self._hyper(), "params": self.params}]

    def _hyper(self) -> dict[str, Any]:
        return {
            "lr": self.lr,
            "betas": self.betas,
            "eps": self.eps,
            "weight_decay": 0,
            "amsgrad": False,
            "maximize": False,
            "foreach": None,
            "capturable": False,
            "differentiable": False,
            "fused": True,
            "decoupled_weight_decay": False,
        }

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step from each parameter's ``.grad`` (made contiguous: the fused CPU
        kernel reads memory order)."""
        grads = [p.grad.contiguous() for p in self.params]
        torch._foreach_add_(self.steps, 1)
        torch._fused_adam_(
            self.params,
            grads,
            self.exp_avg,
            self.exp_avg_sq,
            [],
            self.steps,
            lr=self.lr,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=0.0,
            eps=self.eps,
            amsgrad=False,
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )
        self._stepped = True

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop the gradients."""
        for p in self.params:
            p.grad = None

    def state_dict(self) -> dict[str, Any]:
        """Moments and step counts in ``torch.optim.Adam.state_dict()``'s format."""
        state: dict[int, dict[str, torch.Tensor]] = {}
        if self._stepped:
            for i, (s, m, v) in enumerate(zip(self.steps, self.exp_avg, self.exp_avg_sq)):
                state[i] = {"step": s, "exp_avg": m, "exp_avg_sq": v}
        group = {**self._hyper(), "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` or from a ``torch.optim.Adam`` state dict."""
        (group,) = state_dict["param_groups"]
        self.lr, self.eps, self.betas = group["lr"], group["eps"], tuple(group["betas"])
        with torch.no_grad():
            for i, st in state_dict["state"].items():
                self.steps[i].copy_(st["step"])
                self.exp_avg[i].copy_(st["exp_avg"])
                self.exp_avg_sq[i].copy_(st["exp_avg_sq"])
                self._stepped = True
