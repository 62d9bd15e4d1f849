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
  contiguous gradients: see :meth:`~shoal.agent.stacked.StackedLearner.apply`),
* hard target copies at the same period,

and the result equals K separate :class:`~shoal.agent.learner.DQN` learners, each stepping
on its own batches. Everything is float32.
"""

import copy

import numpy as np
import pytest
import torch

from shoal.agent.learner import DQN
from shoal.agent.losses import Batch
from shoal.agent.stacked import StackedActor, StackedLearner, stack_batches
from shoal.config import DQNConfig

K = 4
OBS_DIM, N_ACTIONS, BATCH = 4, 3, 32
UPDATES = 100


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
    stacked = StackedLearner(learners)

    rng = np.random.default_rng(0)
    clipped = unclipped = 0
    loss_diff = td_diff = 0.0
    for _ in range(UPDATES):
        batches = [Batch.from_numpy(b, "cpu") for b in make_batches(rng)]
        infos = [d.step(b) for d, b in zip(learners, batches)]
        grads, info = stacked.gradients(stack_batches(batches))
        norms = stacked.apply(grads)
        td_diff = max(
            td_diff,
            max(float(np.abs(i.td_errors - t).max()) for i, t in zip(infos, info.td_errors)),
        )
        loss_diff = max(loss_diff, max(abs(i.loss - float(v)) for i, v in zip(infos, info.loss)))
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


@pytest.mark.timeout(120)
def test_one_agent_of_k_equals_that_agent_trained_alone_and_state_round_trips(one_thread):
    """Agent 2 of 4, trained stacked for 100 updates, is exactly a plain DQN trained alone
    on agent 2's batches: weights, target and Adam state (as a learner's state dict)."""
    cfg = DQNConfig(hidden=[16], lr=3e-3, max_grad_norm=1.0, target_period=7)
    learners = []
    for seed in range(K):
        torch.manual_seed(seed)
        learners.append(DQN(OBS_DIM, N_ACTIONS, cfg, device="cpu"))
    torch.manual_seed(2)
    alone = DQN(OBS_DIM, N_ACTIONS, cfg, device="cpu")
    stacked = StackedLearner(learners)
    rng = np.random.default_rng(1)
    for _ in range(100):
        batches = [Batch.from_numpy(b, "cpu") for b in make_batches(rng)]
        stacked.step(stack_batches(batches))
        alone.step(batches[2])
    mine, theirs = stacked.agent_state_dict(2), alone.state_dict()
    for part in ("online", "target"):
        for name, v in theirs[part].items():
            assert float((mine[part][name] - v).abs().max()) <= 1e-6, (part, name)
    for i, s in theirs["optimizer"]["state"].items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert float((mine["optimizer"]["state"][i][key] - s[key]).abs().max()) <= 1e-6
    # a learner loads agent 2's state and carries on exactly as the stack does
    clone = DQN(OBS_DIM, N_ACTIONS, cfg, device="cpu")
    clone.load_state_dict(mine)
    again = StackedLearner(learners)
    again.load_state_dict(stacked.state_dict())
    batches = [Batch.from_numpy(b, "cpu") for b in make_batches(rng)]
    again.step(stack_batches(batches))
    clone.step(batches[2])
    for name, p in clone.params.items():
        assert float((again.params[name][2] - p).detach().abs().max()) <= 1e-6


def test_batched_and_per_agent_acting_choose_identical_actions():
    cfg = DQNConfig(hidden=[16])
    learners = []
    for seed in range(K):
        torch.manual_seed(seed)
        learners.append(DQN(OBS_DIM, N_ACTIONS, cfg, device="cpu"))
    stacked = StackedLearner(learners)
    actors = [
        StackedActor(
            stacked.loss.network,
            stacked.weights(),
            n_actions=N_ACTIONS,
            rngs=[np.random.default_rng(100 + k) for k in range(K)],
            batched=batched,
        )
        for batched in (True, False)
    ]
    rng = np.random.default_rng(0)
    for step in range(200):  # an epoch of 200 turns, epsilon decaying
        obs = rng.normal(size=(K, OBS_DIM)).astype(np.float32)
        eps = max(0.05, 1 - step / 100)
        a, b = (actor.select_actions(obs, eps) for actor in actors)
        assert a.tolist() == b.tolist()
    # greedy actions are each agent's own network's choice
    obs = rng.normal(size=(K, OBS_DIM)).astype(np.float32)
    for k, learner in enumerate(learners):
        with torch.no_grad():
            expected = int(learner.online(torch.as_tensor(obs[k : k + 1])).argmax())
        assert actors[0].greedy(obs)[k] == expected


@pytest.mark.timeout(120)
def test_a_board_network_stacked_through_vmap_equals_separate_learners(one_thread):
    """Networks that are not plain MLPs (here a conv board encoder) take the vmap path."""
    cfg = DQNConfig(hidden=[16], board=[3, 3, 2], conv=[4], target_period=3)
    dim = 3 * 3 * 2 + 2
    learners = []
    for seed in range(3):
        torch.manual_seed(seed)
        learners.append(DQN(dim, 2, cfg, device="cpu"))
    stacked = StackedLearner([copy.deepcopy(d) for d in learners])
    assert not stacked.loss.network.stackable
    rng = np.random.default_rng(0)
    for _ in range(20):
        batches = []
        for _ in learners:
            sample = {
                "obs": rng.normal(size=(8, dim)).astype(np.float32),
                "action": rng.integers(2, size=8),
                "reward": rng.normal(size=8).astype(np.float32),
                "next_obs": rng.normal(size=(8, dim)).astype(np.float32),
                "discount": np.full(8, 0.9, np.float32),
            }
            batches.append(Batch.from_numpy(sample, "cpu"))
        for d, b in zip(learners, batches):
            d.step(b)
        stacked.step(stack_batches(batches))
    for k, d in enumerate(learners):
        for name, p in d.params.items():
            assert float((stacked.params[name][k] - p).detach().abs().max()) <= 1e-6, name
