"""IQN: the quantile network, the quantile Huber loss, the learner's fractions, the recipe."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import shoal
from shoal.agent.networks import ImageEncoder
from shoal.agent.quantile import IQNLearner, QuantileNetwork, quantile_huber
from shoal.config import DQNConfig, load_config
from shoal.errors import ConfigError
from shoal.runners import runner_for

pytestmark = pytest.mark.timeout(120)
sys.path.insert(0, str(Path(__file__).parents[1]))  # user_code/: a torso from outside shoal/


def sample(n=16, obs_dim=3, n_actions=2, seed=0, discount=0.9):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "action": rng.integers(n_actions, size=n),
        "reward": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "discount": np.where(rng.random(n) < 0.3, 0.0, discount).astype(np.float32),
        "weights": rng.uniform(0.2, 1.0, size=n).astype(np.float32),
    }


def make_learner(seed=0, **kw):
    torch.manual_seed(0)
    net = QuantileNetwork(3, 2, hidden=[16, 16], dueling=True, n_cos=8, n_policy=4)
    cfg = DQNConfig(hidden=[16, 16], **kw)
    return IQNLearner(net, cfg, n_quantiles=5, n_target_quantiles=7, seed=seed, device="cpu")


def test_quantile_huber_matches_the_papers_sum_written_out():
    g = torch.Generator().manual_seed(1)
    pred, target = torch.randn(3, 4, generator=g), torch.randn(3, 5, generator=g) * 3
    taus = torch.rand(3, 4, generator=g)
    kappa = 1.5
    want = torch.zeros(3)
    for b in range(3):
        for i in range(4):
            for j in range(5):
                u = float(target[b, j] - pred[b, i])
                huber = 0.5 * u * u if abs(u) <= kappa else kappa * (abs(u) - 0.5 * kappa)
                want[b] += abs(float(taus[b, i]) - (u < 0)) * huber / kappa / 5
    assert torch.allclose(quantile_huber(pred, target, taus, kappa), want, atol=1e-5)


@pytest.mark.parametrize("hidden", [[], [16], [16, 8]])
@pytest.mark.parametrize("dueling", [False, True])
def test_q_values_are_the_mean_quantile_at_the_policy_midpoints(hidden, dueling):
    net = QuantileNetwork(3, 4, hidden=hidden, dueling=dueling, n_cos=8, n_policy=6)
    params = dict(net.named_parameters())
    obs = torch.randn(5, 3)
    mid = (torch.arange(6) + 0.5) / 6
    z = net.quantiles(params, obs, mid.expand(5, 6))
    assert z.shape == (5, 6, 4)
    assert torch.allclose(net(obs), z.mean(1))
    # the fractions matter: other fractions give other quantiles
    assert not torch.allclose(net.quantiles(params, obs, torch.full((5, 6), 0.9)), z)


def test_image_observations_go_through_the_encoder_as_bytes():
    image = ImageEncoder((4, 10, 10), kind="minatar")
    net = QuantileNetwork(400, 3, hidden=[32], dueling=True, n_cos=8, n_policy=4, image=image)
    obs = torch.randint(0, 2, (2, 400), dtype=torch.uint8)
    assert net.quantiles(dict(net.named_parameters()), obs, torch.rand(2, 5)).shape == (2, 5, 3)


def test_the_loss_learns_a_two_point_return_distribution():
    """One state, one action, rewards 0 or 1 with equal odds, no bootstrap: the quantiles
    below the median go to 0 and those above to 1 (a mean-only learner would say 0.5). A
    small kappa: with kappa = 1 these 0/1 errors fall in the Huber loss's quadratic part,
    whose fixed points are expectiles (0.2 and 0.8 here), not quantiles."""
    torch.manual_seed(0)
    net = QuantileNetwork(1, 1, hidden=[32], dueling=False, n_cos=16, n_policy=8)
    learner = IQNLearner(
        net,
        DQNConfig(hidden=[32], lr=3e-3),
        n_quantiles=16,
        n_target_quantiles=16,
        kappa=0.05,
        seed=0,
        device="cpu",
    )
    rng = np.random.default_rng(0)
    for _ in range(600):
        n = 64
        learner.step(
            learner.make_batch(
                {
                    "obs": np.ones((n, 1), np.float32),
                    "action": np.zeros(n, np.int64),
                    "reward": rng.integers(0, 2, n).astype(np.float32),
                    "next_obs": np.ones((n, 1), np.float32),
                    "discount": np.zeros(n, np.float32),
                }
            )
        )
    with torch.no_grad():
        z = net.quantiles(learner.params, torch.ones(1, 1), torch.tensor([[0.2, 0.8]]))[0, :, 0]
    assert float(z[0]) < 0.1 and float(z[1]) > 0.9, z


@pytest.mark.parametrize("double", [False, True])
def test_the_target_bootstraps_from_the_chosen_actions_target_quantiles(double):
    learner = make_learner(double=double)
    with torch.no_grad():
        for p in learner.target.parameters():
            p.add_(0.3)
    batch = learner.make_batch(sample())
    loss, td = learner.loss(learner.params, learner.target_params, batch)
    net = learner.online
    with torch.no_grad():
        picker = learner.params if double else learner.target_params
        z_next = net.quantiles(learner.target_params, batch.next_obs, batch.target_taus)
        a = net.quantiles(picker, batch.next_obs, batch.target_taus).mean(1).argmax(-1)
        target = batch.reward[:, None] + batch.discount[:, None] * z_next[torch.arange(16), :, a]
        z = net.quantiles(learner.params, batch.obs, batch.taus)
        pred = z[torch.arange(16), :, batch.action]
        want = (batch.weights * quantile_huber(pred, target, batch.taus, 1.0)).mean()
    assert torch.allclose(loss, want)
    assert torch.allclose(td, target.mean(1) - pred.mean(1))
    grads, info = learner.gradients(batch)
    assert all(torch.isfinite(g).all() for g in grads)
    assert info.td_errors.shape == (16,)


def test_the_fractions_follow_the_seed_and_resume_from_the_checkpoint():
    a, b = make_learner(seed=3), make_learner(seed=3)
    assert torch.equal(a.make_batch(sample()).taus, b.make_batch(sample()).taus)
    other = make_learner(seed=4).make_batch(sample()).taus
    assert not torch.equal(a.make_batch(sample()).taus, other)
    a.step(a.make_batch(sample()))
    state = a.state_dict()
    nxt = a.make_batch(sample())
    c = make_learner(seed=99)
    c.load_state_dict(state)
    again = c.make_batch(sample())
    assert torch.equal(again.taus, nxt.taus) and torch.equal(again.target_taus, nxt.target_taus)
    assert again.taus.shape == (16, 5) and again.target_taus.shape == (16, 7)


def test_iqn_trains_on_the_serial_runner_and_its_checkpoint_evaluates(tmp_path, tiny):
    result = shoal.train(
        "cartpole", overrides=[*tiny(), "run.recipe='iqn'"], run_dir=tmp_path / "r"
    )
    assert result.updates > 0 and np.isfinite(result.eval_return)
    scores = shoal.evaluate_run(tmp_path / "r", 3)
    assert scores.shape == (3,)


def test_bad_iqn_settings_are_one_line_errors_before_any_work(tmp_path, tiny):
    with pytest.raises(ConfigError, match="'iqn.n_quantiles'"):
        load_config("cartpole", overrides=[*tiny(), "run.recipe='iqn'", "iqn.n_quantiles=0"])
    cfg = load_config(None, overrides=["env.id='shoal/HybridTarget-v0'", "run.recipe='iqn'"])
    with pytest.raises(ConfigError, match="continuous part"):
        runner_for(cfg).check(cfg)
    cfg = load_config(
        "cartpole", overrides=["run.recipe='iqn'", "dqn.network='user_code.nets:make'"]
    )
    with pytest.raises(ConfigError, match="'dqn.network'.*iqn.torso"):
        runner_for(cfg).check(cfg)
    for torso, what in [
        ("user_code.qnets:missing", "has no attribute 'missing'"),
        ("user_code.qnets:NOT_CALLABLE", "not a callable"),
        ("user_code.qnets:layernorm_mlp", "features of shape"),  # a whole Q-network is fine
    ]:
        cfg = load_config("cartpole", overrides=["run.recipe='iqn'", f"iqn.torso='{torso}'"])
        try:
            runner_for(cfg).check(cfg)
        except ConfigError as e:
            assert "'iqn.torso'" in str(e) and what in str(e), e
        else:
            assert torso.endswith("layernorm_mlp")  # (batch, 2) features: a valid torso
    cfg = load_config(
        "cartpole", overrides=["run.recipe='iqn'", "iqn.torso='user_code.qnets:summed_torso'"]
    )
    with pytest.raises(ConfigError, match=r"'iqn.torso'.*shape \(2,\).*\(batch, width\)"):
        runner_for(cfg).check(cfg)


def test_a_users_torso_carries_the_quantile_network(tmp_path, tiny):
    """``iqn.torso``: the user's module maps observations to features; the fractions
    multiply them, then [dqn] hidden and the head; it trains and resumes exactly."""
    from shoal.envs import probe_env
    from shoal.recipes.iqn import make_quantile_network

    over = [*tiny(), "run.recipe='iqn'", "iqn.torso='user_code.qnets:layernorm_torso'"]
    cfg = load_config("cartpole", overrides=over)
    net = make_quantile_network(cfg, probe_env(cfg.env))
    names = [n for n, _ in net.named_parameters()]
    assert "torso.0.1.weight" in names and net.embed.out_features == 48  # the LayerNorm
    params = {n: p.detach() + 0.01 for n, p in net.named_parameters()}
    z = net.quantiles(params, torch.zeros(5, 4), torch.rand(5, 3))
    assert z.shape == (5, 3, 2)
    # the explicit weights are used, not the module's own
    assert not torch.allclose(
        z, net.quantiles(dict(net.named_parameters()), torch.zeros(5, 4), torch.rand(5, 3))
    )
    full = shoal.train("cartpole", overrides=[*over, "run.total_steps=800"], run_dir=tmp_path / "f")
    shoal.train("cartpole", overrides=[*over, "run.total_steps=400"], run_dir=tmp_path / "h")
    resumed = shoal.train(resume=tmp_path / "h", overrides=["run.total_steps=800"], trust_code=True)
    assert resumed.updates == full.updates > 0
    from shoal.run.checkpoint import load_checkpoint
    from shoal.run.directory import RunDir

    a = load_checkpoint(RunDir(tmp_path / "f").checkpoint)["learner"]["online"]
    b = load_checkpoint(RunDir(tmp_path / "h").checkpoint)["learner"]["online"]
    assert all(torch.equal(a[n], b[n]) for n in a)


@pytest.mark.parametrize("stackable", [True, False], ids=["batched-matmuls", "vmap"])
def test_stacked_iqn_agents_equal_separate_ones_each_drawing_its_own_fractions(stackable):
    """K IQN learners stacked (an MLP's batched matmuls, or a vmapped loss for other
    torsos) step as the K alone do, each agent's fractions drawn from its own generator;
    the stacked state round-trips them; stacked acting picks each agent's own action."""
    from shoal.agent.stacked import StackedActor, StackedLearner

    def agents():
        out = []
        for k in range(3):
            torch.manual_seed(k)
            net = QuantileNetwork(3, 2, hidden=[16, 16], dueling=True, n_cos=8, n_policy=4)
            net.stackable = stackable
            cfg = DQNConfig(hidden=[16, 16], lr=1e-2, target_period=5)
            out.append(
                IQNLearner(net, cfg, n_quantiles=5, n_target_quantiles=6, seed=k, device="cpu")
            )
        return out

    alone, stacked = agents(), StackedLearner(agents())
    for step in range(30):
        samples = [sample(seed=100 * step + k) for k in range(3)]
        for le, s in zip(alone, samples):
            le.step(le.make_batch(s))
        batch = stacked.make_batch({n: np.stack([s[n] for s in samples]) for n in samples[0]})
        assert batch.taus.shape == (3, 16, 5) and not torch.equal(batch.taus[0], batch.taus[1])
        stacked.step(batch)
    for k, le in enumerate(alone):
        for name, p in le.params.items():
            assert torch.allclose(stacked.params[name][k], p, atol=1e-5), name
    state = stacked.state_dict()
    again = StackedLearner(agents())
    again.load_state_dict(state)
    s = {n: np.stack([v] * 3) for n, v in sample().items()}
    assert torch.equal(again.make_batch(s).taus, stacked.make_batch(s).taus)
    obs = np.random.default_rng(0).normal(size=(3, 50, 3)).astype(np.float32)
    net, weights = alone[0].online, stacked.weights()
    rngs = [np.random.default_rng(k) for k in range(3)]
    actor = StackedActor(net, weights, n_actions=2, rngs=rngs)
    with torch.no_grad():
        each = [
            net.apply_params({n: w[k] for n, w in weights.items()}, torch.as_tensor(obs[k]))
            for k in range(3)
        ]
    assert (actor.greedy_worlds(obs) == np.stack([q.argmax(-1).numpy() for q in each])).all()
