"""Greedy evaluation: episodes side by side, the same returns however many envs play them."""

import gymnasium as gym
import numpy as np
import torch

from shoal.agent.networks import QNetwork
from shoal.run.evaluation import evaluate


def test_returns_do_not_depend_on_how_many_envs_play_them():
    torch.manual_seed(1)
    net = QNetwork(4, 2, hidden=[16], dueling=False)

    @torch.inference_mode()
    def policy(obs):
        return net(torch.as_tensor(obs)).argmax(dim=1).numpy()

    def returns(n_envs):
        envs = [gym.make("CartPole-v1") for _ in range(n_envs)]
        return evaluate(policy, envs, 20, seed=4)

    one_by_one = returns(1)
    assert len(set(one_by_one.tolist())) > 3  # the starts made different episodes
    for n in (3, 20):
        np.testing.assert_array_equal(returns(n), one_by_one)
