"""K independent DQN agents trained stacked: one vmapped pure loss, one optimizer.

The check the stacked-agents design relies on: because :class:`~shoal.agent.losses.DQNLoss`
is a pure function of explicit parameters, K agents can be trained as one program:

* their online and target parameters stacked along a new leading axis
  (``torch.func.stack_module_state``),
* the loss ``torch.func.vmap``-ed over (params, target params, batch), and the SUM of the
  K losses differentiated (agent k's loss depends only on agent k's slice, so the gradient
  of the sum is each agent's own gradient; a mean would scale them by 1/K, which changes
  gradient clipping and, through Adam's eps, the steps),
* each agent's gradients clipped by that agent's own global norm (what
  ``torch.nn.utils.clip_grad_norm_`` does to one learner),
* ONE Adam over the stacked tensors (Adam is elementwise, so this is K Adams; the same
  :func:`~shoal.agent.learner.make_adam` as the learners', fused where torch has it, fed
  contiguous gradients: see :meth:`StackedDQN.step`),
* hard target copies at the same period,

and the result equals K separate :class:`~shoal.agent.learner.DQN` learners, each stepping
on its own batches. Everything is float32.
"""

import numpy as np
import pytest
import torch
from torch.func import stack_module_state, vmap

from shoal.agent.learner import DQN, make_adam
from shoal.agent.losses import Batch, DQNLoss
from shoal.agent.networks import QNetwork
from shoal.config import DQNConfig

K = 4
OBS_DIM, N_ACTIONS, BATCH = 4, 3, 32
UPDATES = 50
FIELDS = ("obs", "action", "reward", "next_obs", "discount", "weights")


def make_batches(rng):
    """One batch per agent (different data for each), as numpy arrays."""
    out = []
    for _ in range(K):
        out.append(
            {
                "obs": rng.normal(size=(BATCH, OBS_DIM)).astype(np.float32),
                "action": rng.integers(N_ACTIONS, size=BATCH),
                "reward": rng.normal(size=BATCH).astype(np.float32),
                "next_obs": rng.normal(size=(BATCH, OBS_DIM)).astype(np.float32),
                "discount": np.where(rng.random(BATCH) < 0.2, 0.0, 0.97).astype(np.float32),
                "weights": rng.uniform(0.3, 1.0, size=BATCH).astype(np.float32),
            }
        )
    return out


class StackedDQN:
    """K DQN agents as stacked tensors: the candidate design, written out in full."""

    def __init__(self, learners, cfg):
        self.cfg = cfg
        self.params, _ = stack_module_state([d.online for d in learners])
        self.target_params, _ = stack_module_state([d.target for d in learners])
        self.target_params = {k: v.detach() for k, v in self.target_params.items()}
        # The loss reads only apply_params; a network on the meta device has no weights
        # at all, so nothing but the stacked parameters can enter the result.
        template = QNetwork(OBS_DIM, N_ACTIONS, hidden=cfg.hidden, dueling=cfg.dueling)
        self.loss = DQNLoss(
            template.to("meta"),
            double=cfg.double,
            huber_delta=cfg.huber_delta,
            action_mask=cfg.action_mask,
        )
        self.optimizer = make_adam(list(self.params.values()), cfg)
        self.updates = 0

    def _one(self, params, target_params, *fields):
        return self.loss(params, target_params, Batch(*fields))

    def step(self, batches):
        """One update of all K agents on their own batches; returns the (K,) losses, the
        (K, B) TD errors and the (K,) gradient norms before clipping."""
        fields = [torch.stack([getattr(b, f) for b in batches]) for f in FIELDS]
        losses, td = vmap(self._one)(self.params, self.target_params, *fields)
        plist = list(self.params.values())
        grads = torch.autograd.grad(losses.sum(), plist)
        # Per-agent global norm, as clip_grad_norm_ computes it for one learner.
        per_tensor = torch.stack([g.reshape(K, -1).norm(dim=1) for g in grads], dim=1)
        norms = per_tensor.norm(dim=1)  # (K,)
        coef = (self.cfg.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
        for p, g in zip(plist, grads):
            # contiguous: vmap returns Linear weight gradients with transposed strides,
            # and torch's fused CPU Adam reads a gradient in memory order, not by index
            # (torch 2.13), which silently scrambles the update.
            p.grad = (g * coef.view(K, *[1] * (g.dim() - 1))).contiguous()
        self.optimizer.step()
        for p in plist:
            p.grad = None
        self.updates += 1
        if self.updates % self.cfg.target_period == 0:
            with torch.no_grad():
                for name, t in self.target_params.items():
                    t.copy_(self.params[name])
        return losses.detach(), td, norms


@pytest.fixture
def one_thread():
    """Small nets run fastest on one thread (and do not fight other work for the cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.timeout(120)
def test_stacked_training_equals_separate_learners(one_thread):
    cfg = DQNConfig(
        hidden=[16, 16],
        dueling=True,
        double=True,
        lr=1e-2,
        max_grad_norm=0.15,  # about the median gradient norm here
        target_update="hard",
        target_period=5,
    )
    learners = []
    for seed in range(K):
        torch.manual_seed(seed)
        learners.append(DQN(OBS_DIM, N_ACTIONS, cfg, device="cpu"))
    initial = [d.params["torso.0.weight"].detach().clone() for d in learners]
    assert all(not torch.equal(initial[0], w) for w in initial[1:])  # K different agents
    stacked = StackedDQN(learners, cfg)

    rng = np.random.default_rng(0)
    clipped = unclipped = 0
    loss_diff = td_diff = 0.0
    for _ in range(UPDATES):
        batches = [Batch.from_numpy(b, "cpu") for b in make_batches(rng)]
        infos = [d.step(b) for d, b in zip(learners, batches)]
        losses, td, norms = stacked.step(batches)
        td_diff = max(
            td_diff, max(float(np.abs(i.td_errors - t.numpy()).max()) for i, t in zip(infos, td))
        )
        loss_diff = max(loss_diff, max(abs(i.loss - float(v)) for i, v in zip(infos, losses)))
        clipped += int((norms > cfg.max_grad_norm).sum())
        unclipped += int((norms <= cfg.max_grad_norm).sum())
    # The run exercised both sides of per-agent clipping and several target copies.
    assert clipped > 0 and unclipped > 0, (clipped, unclipped)
    assert stacked.updates == UPDATES and all(d.updates == UPDATES for d in learners)
    (group,) = stacked.optimizer.param_groups  # one optimizer over K-stacked tensors
    assert [p.shape for p in group["params"]] == [
        (K, *p.shape) for p in learners[0].params.values()
    ]

    diff = 0.0
    for k, d in enumerate(learners):
        for name, p in d.params.items():
            diff = max(diff, float((stacked.params[name][k] - p).detach().abs().max()))
        for name, t in d.target_params.items():
            diff = max(diff, float((stacked.target_params[name][k] - t).abs().max()))
    print(
        f"stacked vs separate after {UPDATES} updates: max |param diff| {diff:.3g}, "
        f"loss {loss_diff:.3g}, td {td_diff:.3g}"
    )
    assert diff <= 1e-6
    assert loss_diff <= 1e-5 and td_diff <= 1e-5
    # every agent moved from its start: the comparison is not trivially satisfied
    for k in range(K):
        assert float((stacked.params["torso.0.weight"][k].detach() - initial[k]).abs().max()) > 1e-2
