"""The StepCost wrapper adds a known time per step, sleeping or spinning."""

import time

import gymnasium as gym
import pytest

from shoal.config import EnvConfig
from shoal.envs import make_env
from shoal.envs.step_cost import StepCost


@pytest.mark.parametrize("kind", ["sleep", "spin"])
def test_each_step_costs_at_least_the_set_time(kind):
    env = StepCost(gym.make("CartPole-v1"), micros=2000, kind=kind)
    env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(10):
        _, _, term, trunc, _ = env.step(0)
        if term or trunc:
            env.reset()
    assert time.perf_counter() - t0 >= 10 * 0.002


def test_config_wraps_and_bad_values_are_rejected():
    env = make_env(EnvConfig(step_cost_us=10.0, step_cost_kind="spin"))
    assert isinstance(env, StepCost) and env.kind == "spin"
    with pytest.raises(ValueError, match="micros"):
        StepCost(gym.make("CartPole-v1"), micros=-1)
    with pytest.raises(ValueError, match="kind"):
        StepCost(gym.make("CartPole-v1"), micros=1, kind="nap")
