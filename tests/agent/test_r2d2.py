"""R2D2 as a recipe: the LSTM cell, memories per env, sequences with the memory they start
from, evaluation with memory, the writer's checkpoint, the config's rules."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import shoal
from shoal.agent.acting import ActingRequest
from shoal.agent.networks import RecurrentQNetwork
from shoal.agent.sequence_acting import RecurrentActor, RecurrentPolicy, SequenceActing
from shoal.agent.sequence_loss import unroll
from shoal.config import load_config
from shoal.envs.vector import make_vector_env
from shoal.errors import ConfigError
from shoal.replay.sequence import SequenceWriter
from shoal.run.evaluation import evaluate
from shoal.runners import runner_for

pytestmark = pytest.mark.timeout(120)
R2D2 = ["run.recipe='r2d2'", "r2d2.length=8", "r2d2.burn_in=4", "r2d2.period=4"]


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_the_cells_are_torchs(cell):
    torch.manual_seed(0)
    net = RecurrentQNetwork(4, 2, hidden=[16], state_dim=8, cell=cell)
    x, state = torch.randn(3, 4), torch.randn(3, net.state_size)
    q, nxt = net(x, state)
    z = torch.relu(net.torso[0](x))
    if cell == "lstm":
        h, c = net.gru(z, (state[:, :8], state[:, 8:]))
        want = torch.cat([h, c], -1)
    else:
        h = want = net.gru(z, state)
    assert torch.allclose(nxt, want, atol=1e-6) and torch.allclose(q, net.head(h), atol=1e-6)


class Stepwise:
    """A recurrent network seen only through ``apply_params``: the generic unroll steps it
    slot by slot."""

    def __init__(self, net):
        self.apply_params = net.apply_params


@pytest.mark.parametrize("burn_in", [0, 4])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_the_batched_unroll_is_the_step_by_step_one_values_and_gradients(cell, burn_in):
    """Gradients equal too: none reaches through the burn-in in either."""
    torch.manual_seed(0)
    net = RecurrentQNetwork(4, 3, hidden=[16, 16], state_dim=8, cell=cell)
    obs, state = torch.randn(5, 9, 4), torch.randn(5, net.state_size)
    mask = torch.ones(5, 9, dtype=torch.bool)
    mask[0, : max(burn_in - 1, 0)] = False  # an episode that begins inside the burn-in
    mask[1, 6:] = False  # one that ends inside the training part
    qs, grads = [], []
    for network in (net, Stepwise(net)):
        params = {k: v.detach().clone().requires_grad_() for k, v in net.named_parameters()}
        q = unroll(network, params, obs, state, mask, burn_in=burn_in)
        (q[:, burn_in:] * mask[:, burn_in:, None]).square().sum().backward()
        qs.append(q.detach())
        grads.append({k: v.grad for k, v in params.items()})
    # every slot a loss reads: the valid ones and the bootstrap after the last
    read = mask | torch.cat([torch.zeros(5, 1, dtype=torch.bool), mask[:, :-1]], 1)
    assert torch.allclose(qs[0][read], qs[1][read], atol=1e-5)
    for k in grads[0]:
        assert torch.allclose(grads[0][k], grads[1][k], atol=1e-5), k


def make_actor(seed=0, cell="lstm"):
    torch.manual_seed(seed)
    net = RecurrentQNetwork(4, 2, hidden=[16], state_dim=8, cell=cell).requires_grad_(False)
    return RecurrentActor(net, n_actions=2, rng=np.random.default_rng(seed))


def test_each_env_has_its_own_memory_fresh_at_its_episode_start():
    actor = make_actor()
    obs = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    actor.act(obs, np.zeros(3))
    assert np.array_equal(actor.held, np.zeros((3, 16)))
    first = actor.memories()
    actor.act(obs, np.zeros(3))
    assert np.array_equal(actor.held, first)
    actor.begin([1], 3)
    m = actor.memories()
    assert np.array_equal(m[1], np.zeros(16)) and not np.array_equal(m[0], actor.held[0])


def test_sequences_store_the_memory_held_before_their_first_step(tiny):
    cfg = load_config("cartpole", overrides=[*tiny(), *R2D2, "env.num_envs=2"])
    actor = make_actor()
    envs = make_vector_env(cfg.env, 2, 0)
    request = ActingRequest((0, 0), 0, np.random.default_rng(0))
    acting = SequenceActing(actor, envs, request, length=8, burn_in=4, period=4)
    acting.explore(0.5)
    held = [np.zeros(16)]  # every memory the actor held before a step
    items = []
    for _ in range(60):
        got = acting.step()
        held += [actor.held[i].copy() for i in got.rows()]
        batch = acting.take().items
        if batch:
            items.append(batch)
    states = np.concatenate([b["state"] for b in items])
    # an item's stored memory is one the actor held before a step of its episode (zeros
    # for an item that starts the episode); items starting mid-episode store a real one
    assert all(any(np.array_equal(s, h) for h in held) for s in states)
    assert np.abs(states).sum(1).max() > 0
    acting.close()


def test_evaluation_keeps_a_memory_per_env_and_matches_one_env_at_a_time():
    actor = make_actor(3)

    def envs(n):
        return [gym.make("CartPole-v1") for _ in range(n)]

    side_by_side = evaluate(RecurrentPolicy(actor, 4), envs(4), 6, seed=1)
    one_by_one = evaluate(RecurrentPolicy(actor, 1), envs(1), 6, seed=1)
    assert np.array_equal(side_by_side, one_by_one)


def test_a_resumed_writer_emits_what_the_uninterrupted_one_does():
    def steps():
        for t in range(13):
            yield np.array([float(t)]), t % 2, 1.0, t == 12, False, np.full(2, float(t))

    whole, first, items_whole, items_split = (
        SequenceWriter(4, burn_in=2, period=2),
        SequenceWriter(4, burn_in=2, period=2),
        [],
        [],
    )
    for t, s in enumerate(steps()):
        items_whole += whole.append(*s, next_obs=s[0] + 1)
        if t < 6:
            items_split += first.append(*s, next_obs=s[0] + 1)
        if t == 5:
            second = SequenceWriter(4, burn_in=2, period=2)
            second.load_state_dict(first.state_dict())
        if t > 5:
            items_split += second.append(*s, next_obs=s[0] + 1)
    assert len(items_whole) == len(items_split) > 2
    for a, b in zip(items_whole, items_split):
        assert all(np.array_equal(a[k], b[k]) for k in a)


def test_r2d2_trains_and_evaluates_with_memory_and_bad_settings_are_one_line_errors(tmp_path, tiny):
    env = ["env.id='shoal/CartPoleNoVelocity-v0'"]
    result = shoal.train(None, overrides=[*tiny(), *R2D2, *env], run_dir=tmp_path / "r")
    assert result.updates > 0 and np.isfinite(result.eval_return)
    assert shoal.evaluate_run(tmp_path / "r", 3).shape == (3,)
    policy = shoal.load_policy(tmp_path / "r")
    policy_carries_memory_until_reset(policy)
    with pytest.raises(ValueError, match=r"flat observation of 2 values.*got shape \(2, 1\)"):
        policy.act(np.zeros((2, 1)))  # not flat: one value per row
    with pytest.raises(ConfigError, match="'r2d2.period'.*at most r2d2.length"):
        load_config("cartpole", overrides=[*R2D2, "r2d2.period=9"])
    with pytest.raises(ConfigError, match="'run.runner'"):
        shoal.train(
            None,
            overrides=[*tiny(), *R2D2, "run.runner='agents'", "env.id='shoal/Harvest-v0'"],
        )
    for over, key in [
        (["env.id='shoal/HybridTarget-v0'"], "'run.recipe'"),
        (["explore.noisy=true", "explore.eps_start=0", "explore.eps_end=0"], "'explore.noisy'"),
        (["env.vector='envpool'"], "'env.vector'"),
    ]:
        cfg = load_config("cartpole", overrides=[*R2D2, *over])
        with pytest.raises(ConfigError, match=key):
            runner_for(cfg).check(cfg)


def policy_carries_memory_until_reset(policy):
    """A loaded recurrent policy's actions are its network's, stepped with one memory per
    row from a fresh memory after each reset."""
    assert policy.recurrent
    net = policy.network
    rng = np.random.default_rng(0)
    episode = rng.normal(size=(6, 2, 2)).astype(np.float32)  # 6 steps of a batch of 2
    for _ in range(2):  # the second time after a reset: the same actions
        policy.reset()
        state = net.initial_state(2)
        for obs in episode:
            q, state = net(torch.as_tensor(obs), state)
            assert (policy.act(obs) == q.argmax(-1).numpy()).all()
    with pytest.raises(ValueError, match="memories for 2 rows, got a batch of 1"):
        policy.act(episode[0, 0])
    policy.reset()
    assert policy.act(episode[0, 0]) in (0, 1)
