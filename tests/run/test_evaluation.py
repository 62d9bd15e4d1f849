"""Greedy evaluation: episodes side by side, the same returns however many envs play them."""

import gymnasium as gym
import numpy as np
import pytest
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


def test_eval_epsilon_takes_random_actions_reproducibly_however_many_envs_play():
    """``epsilon`` replaces a step's action by a random one with that chance, from each
    episode's own generator: returns differ from greedy ones, repeat for the same seed,
    and do not depend on how many envs play them."""

    def always_left(obs):
        return np.zeros(len(obs), np.int64)

    def returns(n_envs, epsilon, seed=4):
        envs = [gym.make("CartPole-v1") for _ in range(n_envs)]
        return evaluate(always_left, envs, 20, seed=seed, epsilon=epsilon)

    greedy = returns(1, 0.0)
    assert greedy.max() < 15  # pushing left topples the pole at once
    noisy = returns(1, 0.5)
    assert noisy.mean() > greedy.mean() + 2  # half the pushes are random: it lasts longer
    assert returns(1, 1.0).mean() > 15  # all random: CartPole's random play, ~22
    for n in (3, 20):
        np.testing.assert_array_equal(returns(n, 0.5), noisy)
    assert not np.array_equal(returns(1, 0.5, seed=5), noisy)
    np.testing.assert_array_equal(returns(3, 0.0), greedy)


def test_a_runs_evaluations_and_its_checkpoints_play_at_run_eval_epsilon(tmp_path, tiny):
    """At ``run.eval_epsilon = 1`` every evaluation action is random, so the run's
    evaluations and its checkpoint's score are those of any policy at epsilon 1 on the same
    starts: the key reaches both paths. Hybrid actions cannot take it: one line."""
    import shoal
    from shoal.config import load_config
    from shoal.envs import make_env
    from shoal.errors import ConfigError
    from shoal.run.metrics import read_metrics
    from shoal.runners import runner_for

    shoal.train("cartpole", overrides=[*tiny(), "run.eval_epsilon=1.0"], run_dir=tmp_path / "r")
    cfg = load_config("cartpole", overrides=tiny())

    def random_play(episodes, seed):
        envs = [make_env(cfg.env, evaluation=True) for _ in range(2)]
        return evaluate(lambda obs: np.zeros(len(obs), np.int64), envs, episodes, seed, 1.0)

    evals = [
        float(r["eval_mean"])
        for r in read_metrics(tmp_path / "r" / "metrics.csv")
        if r["kind"] == "eval"
    ]
    assert len(evals) >= 2 and set(evals) == {random_play(2, cfg.run.seed).mean()}
    scores = shoal.evaluate_run(tmp_path / "r", 6, seed=11)
    np.testing.assert_array_equal(scores, random_play(6, 11))
    cfg = load_config(None, overrides=["run.eval_epsilon=0.05", "env.id='shoal/HybridTarget-v0'"])
    with pytest.raises(ConfigError, match="'run.eval_epsilon'.*hybrid"):
        runner_for(cfg).check(cfg)
