"""Priorities one update late: held to the serial oracle within that lag.

With ``lag = 1`` the replay's priorities after update k are exactly the oracle's (applied at
once) after update k - 1, and a flush makes them equal; a runner hands over what is waiting
before a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shoal.agent.late_priorities import LatePriorities
from shoal.config import load_config
from shoal.replay.buffer import ReplayBuffer
from shoal.runners import runner_for

pytestmark = pytest.mark.timeout(120)


def filled(seed: int = 0) -> ReplayBuffer:
    buffer = ReplayBuffer(64, (2,), prioritized=True, seed=seed)
    rng = np.random.default_rng(1)
    for _ in range(64):
        buffer.add(
            {
                "obs": rng.normal(size=2).astype(np.float32),
                "action": 0,
                "reward": 0.0,
                "next_obs": rng.normal(size=2).astype(np.float32),
                "discount": 0.9,
            }
        )
    return buffer


def leaves(buffer: ReplayBuffer) -> np.ndarray:
    return buffer.state_dict()["sampler"]["tree"]["values"]


def test_late_priorities_are_the_oracles_one_update_behind_and_equal_after_a_flush():
    oracle, late_buffer = filled(), filled()
    late = LatePriorities(late_buffer.update_priorities, lag=1)
    rng = np.random.default_rng(2)
    history = [leaves(oracle)]
    for k in range(20):
        indices = rng.choice(64, size=8, replace=False)
        td = torch.as_tensor(rng.normal(size=8).astype(np.float32))
        oracle.update_priorities(indices, td.numpy())
        late.push(indices, td)
        history.append(leaves(oracle))
        np.testing.assert_array_equal(leaves(late_buffer), history[k])  # one behind
        assert len(late) == 1
    late.flush()
    np.testing.assert_array_equal(leaves(late_buffer), history[-1])
    assert len(late) == 0


def test_lag_zero_hands_over_at_once():
    got = []
    late = LatePriorities(lambda key, td: got.append((key, td.tolist())), lag=0)
    late.push("a", torch.tensor([1.0, -2.0]))
    assert got == [("a", [1.0, -2.0])] and len(late) == 0
    assert LatePriorities.for_device(print, "cpu").lag == 0
    assert LatePriorities.for_device(print, "cuda").lag == 1


def test_a_runner_with_late_priorities_and_prefetch_learns_and_flushes_before_a_checkpoint():
    """What a learner on a GPU does, forced on a CPU: the loss stays a tensor until read,
    the next batch is sampled before this update's priorities reach replay."""
    cfg = load_config(
        "cartpole",
        [
            "run.device='cpu'",
            "run.learning_starts=100",
            "replay.prioritized=true",
            "run.progress=false",
            "dqn.batch_size=16",
        ],
    )
    runner = runner_for(cfg)(cfg)
    try:
        runner.priorities.lag, runner._prefetch = 1, True
        step = 0
        while step < 200:
            step += runner.collect(step).steps
        loss = runner.learn_steps(10)
        assert isinstance(loss, torch.Tensor) and np.isfinite(float(loss))
        assert len(runner.priorities) == 1 and runner._next is not None
        runner.state_dict()
        assert len(runner.priorities) == 0
        assert runner.learn_steps(1) is not None and runner.learner.updates == 11
    finally:
        runner.stop()
        runner.close()
