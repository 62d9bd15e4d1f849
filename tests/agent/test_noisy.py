"""Noisy layers: the factorised noise, where it is drawn (acting, every loss evaluation),
where it is not (greedy evaluation), its generators in checkpoints, the config's rules."""

import numpy as np
import pytest
import torch

import shoal
from shoal.agent.actor import Actor
from shoal.agent.learner import DQN
from shoal.agent.networks import QNetwork, dense
from shoal.agent.noisy import add_noise_parameters, draw_noise, draw_noise_np, noise_shapes
from shoal.agent.stacked import StackedActor, StackedLearner
from shoal.config import DQNConfig, load_config
from shoal.errors import ConfigError
from shoal.runners import runner_for

pytestmark = pytest.mark.timeout(120)
NOISY = ["explore.noisy=true", "explore.eps_start=0", "explore.eps_end=0"]


def sample(n=16, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, 3)).astype(np.float32),
        "action": rng.integers(2, size=n),
        "reward": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.normal(size=(n, 3)).astype(np.float32),
        "discount": np.full(n, 0.9, np.float32),
    }


def noisy_dqn(seed=0):
    torch.manual_seed(seed)
    net = QNetwork(3, 2, hidden=[16, 16], dueling=True, noisy=True)
    return DQN(
        3, 2, DQNConfig(hidden=[16, 16], lr=1e-2, target_period=5), network=net, device="cpu"
    )


def test_a_noisy_layer_is_its_mean_without_noise_and_factorised_noise_with_it():
    layer = torch.nn.Linear(3, 2)
    add_noise_parameters(layer, 0.5)
    assert torch.allclose(layer.weight_sigma, torch.full((2, 3), 0.5 / 3**0.5))
    params = {f"l.{n}": p.detach() for n, p in layer.named_parameters()}
    x = torch.randn(4, 3)
    assert torch.allclose(dense(params, "l.", x), layer(x))
    noise = draw_noise(noise_shapes(params), torch.Generator().manual_seed(1))
    e_in, e_out = noise["l.noise_in"], noise["l.noise_out"]
    w = layer.weight + layer.weight_sigma * torch.outer(e_out, e_in)
    b = layer.bias + layer.bias_sigma * e_out
    assert torch.allclose(dense({**params, **noise}, "l.", x), x @ w.T + b)
    # f(e) = sign(e) sqrt(|e|): the same normal draws, transformed
    raw = torch.randn(3, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(e_in, raw.sign() * raw.abs().sqrt())


def test_the_last_hidden_layer_and_the_heads_are_noisy():
    net = QNetwork(3, 2, hidden=[8, 8], dueling=True, noisy=True)
    assert set(noise_shapes(dict(net.named_parameters()))) == {"torso.2.", "value.", "advantage."}
    plain = QNetwork(3, 2, hidden=[8, 8], dueling=False, noisy=True)
    assert set(noise_shapes(dict(plain.named_parameters()))) == {"torso.2.", "head."}


def test_every_loss_evaluation_draws_fresh_noise_and_a_resume_draws_the_same():
    a, b = noisy_dqn(), noisy_dqn()
    batch = a.make_batch(sample())
    first = a.loss(*a.loss_params(), batch)[0]
    assert not torch.equal(first, a.loss(*a.loss_params(), batch)[0])  # fresh noise
    assert torch.equal(first, b.loss(*b.loss_params(), batch)[0])  # same seed, same noise
    for _ in range(3):
        a.step(a.make_batch(sample()))
    c = noisy_dqn(seed=5)
    c.load_state_dict(a.state_dict())
    assert torch.equal(a.loss(*a.loss_params(), batch)[0], c.loss(*c.loss_params(), batch)[0])
    assert all(torch.equal(p, c.params[n]) for n, p in a.params.items())
    assert (
        float(a.params["value.weight_sigma"].detach().sub(0.5 / 16**0.5).abs().max()) > 0
    )  # learned


def test_acting_draws_noise_from_the_exploration_generator_and_evaluation_reads_the_mean():
    learner = noisy_dqn()
    obs = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)

    def actor(seed):
        return Actor(learner.online, n_actions=2, rng=np.random.default_rng(seed))

    greedy = actor(0).greedy(obs)
    with torch.no_grad():
        mean = learner.online(torch.as_tensor(obs)).argmax(1).numpy()
    assert np.array_equal(greedy, mean)
    with torch.no_grad():  # large noise: acting's choices move
        learner.online.value.weight_sigma.fill_(5.0)
        learner.online.advantage.weight_sigma.fill_(5.0)
    a, b = actor(1), actor(1)
    acted = [a.act(obs, np.zeros(64)) for _ in range(3)]
    assert not all(np.array_equal(acted[0], x) for x in acted[1:])
    assert all(np.array_equal(x, b.act(obs, np.zeros(64))) for x in acted)  # same generator


def test_stacked_noisy_agents_equal_separate_ones_each_with_its_own_noise():
    alone, stacked = (
        [noisy_dqn(k) for k in range(3)],
        StackedLearner([noisy_dqn(k) for k in range(3)]),
    )
    for step in range(20):
        samples = [sample(seed=10 * step + k) for k in range(3)]
        for le, s in zip(alone, samples):
            le.step(le.make_batch(s))
        stacked.step(stacked.make_batch({n: np.stack([s[n] for s in samples]) for n in samples[0]}))
    for k, le in enumerate(alone):
        for name, p in le.params.items():
            assert torch.allclose(stacked.params[name][k], p, atol=1e-5), name
    state = stacked.state_dict()
    again = StackedLearner([noisy_dqn(k) for k in range(3)])
    again.load_state_dict(state)
    assert all(
        torch.equal(x, y)
        for x, y in zip(again.loss_params()[0].values(), stacked.loss_params()[0].values())
    )
    # acting: agent k's noise from its own generator, batched or agent by agent alike
    net = alone[0].online
    weights = stacked.weights()
    obs = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)
    one = StackedActor(net, weights, n_actions=2, rngs=[np.random.default_rng(k) for k in range(3)])
    other = StackedActor(
        net, weights, n_actions=2, rngs=[np.random.default_rng(k) for k in range(3)], batched=False
    )
    assert np.array_equal(one.select_actions(obs, 0.0), other.select_actions(obs, 0.0))


def test_draws_from_numpy_follow_the_generator():
    shapes = {"a.": (3, 2)}
    x, y = (
        draw_noise_np(shapes, np.random.default_rng(4)),
        draw_noise_np(shapes, np.random.default_rng(4)),
    )
    assert all(torch.equal(x[n], y[n]) for n in x) and x["a.noise_in"].shape == (3,)


def test_noisy_runs_train_and_bad_settings_are_one_line_errors(tmp_path, tiny):
    for recipe in ("dqn", "iqn"):
        result = shoal.train(
            "cartpole",
            overrides=[*tiny(), *NOISY, f"run.recipe='{recipe}'"],
            run_dir=tmp_path / recipe,
        )
        assert result.updates > 0
    with pytest.raises(ConfigError, match="'explore.noisy'.*eps_start = 0"):
        load_config("cartpole", overrides=["explore.noisy=true"])
    with pytest.raises(ConfigError, match="'explore.noisy'.*dqn.network"):
        load_config("cartpole", overrides=[*NOISY, "dqn.network='my:net'"])
    cfg = load_config(None, overrides=[*NOISY, "env.id='shoal/HybridTarget-v0'"])
    with pytest.raises(ConfigError, match="'explore.noisy'.*hybrid"):
        runner_for(cfg).check(cfg)
