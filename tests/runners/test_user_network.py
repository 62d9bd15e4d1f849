"""A user's own Q-network (``dqn.network = "module:factory"``, ``shoal.train(network=...)``)
trains on every runner with no edit under ``shoal/`` (to the bar on every DQN runner:
``test_conformance.py::test_solves_cartpole``, seed 0), is rebuilt by
``shoal eval`` and ``shoal.load_policy`` in a fresh process, and every way to get it wrong
is one line before any work. So do a user's package env and PettingZoo world."""

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import shoal
from shoal.agent.networks import apply_network
from shoal.errors import ConfigError
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir

pytestmark = pytest.mark.timeout(300)

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))  # user_code/ is the user's code, beside shoal, not in it
LAYERNORM = "dqn.network='user_code.qnets:layernorm_mlp'"


from fresh_process import CLI, assert_one_line_exit_2  # noqa: E402
from fresh_process import run_fresh as _fresh  # noqa: E402


def test_shoal_eval_rebuilds_the_network_in_a_fresh_process_elsewhere(tmp_path, tiny):
    run = tmp_path / "r"
    shoal.train("cartpole", overrides=[LAYERNORM, *tiny()], run_dir=run)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = _fresh([CLI, "eval", str(run), "--episodes", "3", "--trust-code"], elsewhere)
    assert out.returncode == 0, out.stderr
    assert "mean" in out.stdout.lower(), out.stdout


def test_agents_runner_stacks_k_copies_of_the_network(tmp_path, harvest):
    result = shoal.train(overrides=[LAYERNORM, *harvest()], run_dir=tmp_path / "r")
    assert result.updates > 0 and np.isfinite(result.eval_return)
    online = load_checkpoint(RunDir(tmp_path / "r").checkpoint)["learner"]["online"]
    assert online["1.weight"].shape == (3, 64)  # three agents, each its own LayerNorm


def test_train_takes_a_factory_object(tmp_path, tiny):
    made = []

    def factory(observation_space, action_space):
        made.append((observation_space.shape, action_space.n))
        return nn.Sequential(nn.Linear(observation_space.shape[0], 16), nn.Tanh(), nn.Linear(16, 2))

    result = shoal.train("cartpole", overrides=tiny(), run_dir=tmp_path / "r", network=factory)
    assert result.updates > 0
    assert made and made[0] == ((4,), 2)
    saved = (tmp_path / "r" / "config.toml").read_text()
    assert "test_user_network:test_train_takes_a_factory_object.<locals>.factory" in saved


@pytest.mark.parametrize("runner", ["processes", "ray"])
def test_a_factory_only_this_process_has_is_refused_where_workers_build_it(runner, tmp_path, tiny):
    def factory(observation_space, action_space):
        return nn.Linear(4, 2)

    with pytest.raises(ConfigError, match="dqn.network.*cannot import.*move the factory"):
        shoal.train(
            "cartpole",
            overrides=[f"run.runner={runner}", *tiny()],
            run_dir=tmp_path / "r",
            network=factory,
        )
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_such_pkg.nets:f", "not importable from here"),
        ("user_code.qnets:missing", "has no attribute 'missing'"),
        ("user_code.qnets:NOT_CALLABLE", "is a int, not a callable"),
        ("user_code.qnets:wrong_shape", r"shape \(2, 1\).*\(batch, n_actions\) = \(2, 2\)"),
        ("user_code.qnets:not_a_module", "returned a str, not a torch.nn.Module"),
        ("not a path", "not a 'package.module:attribute' path"),
    ],
)
def test_bad_factories_are_one_line_before_any_work(path, message, tmp_path, tiny):
    with pytest.raises(ConfigError, match=message) as info:
        shoal.train(
            "cartpole", overrides=[f"dqn.network='{path}'", *tiny()], run_dir=tmp_path / "r"
        )
    assert "\n" not in str(info.value)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("user_code.qnets:wrong_shape", r"returned a Tensor; on hybrid actions it must return"),
        (
            "user_code.qnets:hybrid_flat_actions",
            r"to torch.float32 of shape \(2, 3\); it must give continuous actions of shape "
            r"\(batch, n_actions, action_dim\) = \(2, 3, 1\)",
        ),
    ],
)
def test_a_hybrid_factory_must_give_both_heads(path, message, tmp_path, tiny):
    with pytest.raises(ConfigError, match=message) as info:
        shoal.train("hybrid", overrides=[f"dqn.network='{path}'", *tiny()], run_dir=tmp_path / "r")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "r").exists()


def test_cli_bad_factory_exits_2_with_one_line(tmp_path):
    out = subprocess.run(
        [
            CLI,
            "train",
            "cartpole",
            "--set",
            "dqn.network='user_code.qnets:wrong_shape'",
            "--set",
            f"run.out='{tmp_path}'",
        ],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_exit_2(out, "dqn.network")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(60)
def test_threads_applying_one_module_each_get_their_own_weights():
    """functional_call swaps tensors into the module it runs: threads sharing one module
    must not see each other's weights (a learner thread beside another one, or beside
    the acting thread)."""
    net = nn.Sequential(nn.Linear(3, 8), nn.LayerNorm(8), nn.Linear(8, 2))
    sets = [{n: torch.randn_like(p) for n, p in net.named_parameters()} for _ in range(4)]
    x = torch.randn(5, 3)
    want = [torch.func.functional_call(net, p, (x,)) for p in sets]
    errors = []

    def work(k):
        rng = np.random.default_rng(k)
        for _ in range(300):
            i = int(rng.integers(len(sets)))
            got = apply_network(net, sets[i], x)
            if not torch.allclose(got, want[i]):
                errors.append(i)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


PACKAGE_ENV = [
    "env.id='UserCode/Guess-v0'",
    "env.imports=['user_code.envs']",
    "env.kwargs={sides = 3, length = 10}",
]
PACKAGE_RUNNERS = {
    "serial": [],
    "processes": ["processes.workers=2"],
    "ray": ["ray.actors=2", "ray.node_ip_address='127.0.0.2'"],
}


@pytest.mark.parametrize("runner", list(PACKAGE_RUNNERS))
def test_a_package_env_with_constructor_arguments_trains_on_each_runner(runner, tmp_path, tiny):
    overrides = [
        *PACKAGE_ENV,
        f"run.runner={runner}",
        *PACKAGE_RUNNERS[runner],
        *tiny(run__total_steps=3000, run__learning_starts=200, run__eval_every=1000),
        "explore.eps_decay_steps=1000",
    ]
    result = shoal.train(overrides=overrides, run_dir=tmp_path / "r")
    # Random play earns 10/3 an episode; the light is in the observation.
    assert result.best_eval_return >= 8, result


def test_an_env_registered_only_here_fails_in_a_worker_with_its_own_message(tmp_path, tiny):
    import gymnasium as gym

    gym.register("ParentOnly-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
    with pytest.raises(shoal.errors.ShoalError, match="EnvError.*ParentOnly-v0"):
        shoal.train(
            overrides=["env.id='ParentOnly-v0'", "run.runner=processes", *tiny()],
            run_dir=tmp_path / "r",
        )


def test_a_pettingzoo_world_with_constructor_arguments_trains_on_the_agents_runner(tmp_path, tiny):
    overrides = [
        "run.runner=agents",
        "env.id='pettingzoo:user_code.world'",
        "env.kwargs={agents = 3, turns = 20}",
        "agents.agents=3",
        *tiny(run__total_steps=400, run__learning_starts=100),
    ]
    shoal.train(overrides=overrides, run_dir=tmp_path / "r")
    online = load_checkpoint(RunDir(tmp_path / "r").checkpoint)["learner"]["online"]
    assert next(iter(online.values())).shape[0] == 3  # the world's three agents


def test_bad_env_kwargs_are_one_line(tmp_path, tiny):
    with pytest.raises(shoal.errors.EnvError, match="env.kwargs.*colour"):
        shoal.train(
            overrides=[*PACKAGE_ENV[:2], "env.kwargs={colour = 1}", *tiny()],
            run_dir=tmp_path / "r",
        )
    assert not (tmp_path / "r").exists()


LOAD_POLICY = """
import sys, numpy as np, shoal
from shoal.run.evaluation import evaluate
policy = shoal.load_policy(sys.argv[1], trust_code=True)
assert type(policy.network).__name__ == "Sequential", type(policy.network)
envs = [policy.make_env() for _ in range(4)]
obs, _ = envs[0].reset(seed=0)
assert int(policy.act(obs)) in (0, 1)
print(evaluate(policy.act, envs, 4, 7).tolist())
"""


def test_load_policy_acts_in_a_fresh_process_as_shoal_eval_plays(tmp_path, tiny):
    run = tmp_path / "r"
    shoal.train("cartpole", overrides=[LAYERNORM, *tiny()], run_dir=run)
    out = _fresh([sys.executable, "-c", LOAD_POLICY, str(run)], tmp_path)
    assert out.returncode == 0, out.stderr
    played = eval(out.stdout.strip().splitlines()[-1])
    assert played == shoal.evaluate_run(run, episodes=4, seed=7, trust_code=True).tolist()


def test_shoal_export_writes_weights_the_users_network_loads(tmp_path, tiny):
    import gymnasium as gym
    from user_code.qnets import layernorm_mlp

    run = tmp_path / "r"
    shoal.train("cartpole", overrides=[LAYERNORM, *tiny()], run_dir=run)
    out = _fresh(
        [CLI, "export", str(run), "--out", str(tmp_path / "policy.pt"), "--trust-code"], tmp_path
    )
    assert out.returncode == 0, out.stderr
    net = layernorm_mlp(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))
    net.load_state_dict(torch.load(tmp_path / "policy.pt", weights_only=True))
    best = load_checkpoint(RunDir(run).best, best=True)["learner"]["online"]
    assert torch.equal(net.state_dict()["6.bias"], best["6.bias"])
