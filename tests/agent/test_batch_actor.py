"""BatchActor: one batched forward per step for an actor's envs, episodes kept apart on
every engine (gymnasium's with seeded resets, and an engine that resets by itself like
envpool), mid-episode checkpoints re-played exactly, and the engines' bad input."""

from __future__ import annotations

import random

import gymnasium as gym
import numpy as np
import pytest

from shoal.agent.actor import Actor
from shoal.agent.batch_actor import BatchActor
from shoal.agent.networks import QNetwork
from shoal.config import EnvConfig
from shoal.envs.tally import ENV_ID, episode_length, terminates, transition_errors
from shoal.envs.vector import VectorEnvs, check_engine, make_vector_env
from shoal.errors import ConfigError, EnvError
from shoal.replay.nstep import BatchNStepWriter

pytestmark = pytest.mark.timeout(120)
GAMMA = 0.9


class SelfResettingEnvs(VectorEnvs):
    """A hand-written engine that resets a finished env on its next step by itself, as
    envpool does: that step ignores the action, returns the new episode's first
    observation with reward 0 and no done flags."""

    def __init__(self, n: int) -> None:
        self.subenvs = [gym.make(ENV_ID) for _ in range(n)]
        super().__init__(None, n, autoreset=True)
        self.pending = np.zeros(n, bool)
        self.count = 0

    def reset(self, seeds=None):
        self.pending[:] = False
        return np.stack([env.reset(seed=100 + i)[0] for i, env in enumerate(self.subenvs)])

    def step(self, actions):
        out = []
        for i, env in enumerate(self.subenvs):
            if self.pending[i]:
                out.append((env.reset()[0], 0.0, False, False))
                self.pending[i] = False
                continue
            obs, r, term, trunc, _ = env.step(int(actions[i]))
            self.pending[i] = term or trunc
            out.append((obs, r, term, trunc))
        obs, rew, term, trunc = zip(*out)
        return np.stack(obs), np.array(rew), np.array(term), np.array(trunc)

    def close(self):
        pass


def make_actor(seed: int = 0) -> Actor:
    net = QNetwork(4, 2, hidden=[8], dueling=False)
    return Actor(net, n_actions=2, rng=np.random.default_rng(seed))


def play(acting: BatchActor, steps: int, n_step: int = 3):
    writer = BatchNStepWriter(acting.num_envs, n_step, GAMMA)
    items, finished, count = [], [], 0
    for _ in range(steps):
        got = acting.step()
        out = got.write(writer)
        items += [{k: v[i] for k, v in out.items()} for i in range(len(out.get("reward", [])))]
        finished += got.finished
        count += got.count
    return items, finished, count


def stacked(items):
    return {k: np.array([t[k] for t in items]) for k in ("obs", "next_obs", "discount")}


@pytest.mark.parametrize("engine", ["sync", "self-resetting"])
def test_no_transition_spans_a_reset_and_only_truncation_bootstraps(engine):
    n = 5
    envs = make_vector_env(EnvConfig(id=ENV_ID), n) if engine == "sync" else SelfResettingEnvs(n)
    acting = BatchActor(make_actor(), envs, (7,))
    acting.epsilons[:] = 0.5
    items, finished, count = play(acting, 200)
    assert transition_errors(stacked(items), GAMMA) == []
    ends = {bool(terminates(t["obs"][0])) for t in items if t["next_obs"][1] == 3}
    assert ends == {True, False}  # both kinds of ending were stored
    # each finished episode has its tag's length; every env step is in one episode
    assert len(finished) > 2 * n
    assert count == sum(f.length for f in finished) + acting.lengths.sum()
    in_finished = sum(f.length for f in finished)
    assert len(items) <= in_finished + acting.lengths.sum()
    if engine == "self-resetting":  # the reset steps are not transitions
        assert count < 200 * n


def test_episode_lengths_follow_their_tags_and_keep_their_last_reward():
    acting = BatchActor(make_actor(), make_vector_env(EnvConfig(id=ENV_ID), 3), (1,))
    seen = []
    for _ in range(60):
        obs = acting.obs
        got = acting.step()
        for f in got.finished:
            seen.append((f.length, episode_length(got.next_obs[f.env][0])))
            assert f.final_reward == got.rewards[f.env]  # self-play's result of the game
        assert obs is None or (got.obs == obs).all()
    assert seen and all(a == b for a, b in seen)


def test_starts_do_not_depend_on_the_batch_size():
    """Episode k of env i starts from a seed of (seeds, k, i): env 0 and env 1 of a 4-env
    actor see the starts a 2-env actor's envs see."""

    def starts(n):
        acting = BatchActor(make_actor(), make_vector_env(EnvConfig(id=ENV_ID), n), (3,))
        first = []
        for _ in range(40):
            got = acting.step()
            first += [(i, got.obs[i][0]) for i in got.rows() if got.obs[i][1] == 0 and i < 2]
        return first

    assert starts(2) == [s for s in starts(4)]


def test_one_env_draws_what_the_single_env_actor_draws():
    a, b = make_actor(3), make_actor(3)
    b.network, b.params = a.network, a.params
    for eps in (0.0, 0.3, 1.0):
        a.epsilon = eps
        for _ in range(50):
            obs = np.random.default_rng(0).normal(size=4).astype(np.float32)
            single, _ = a.select_action(obs)
            assert b.act(obs[None], np.array([eps]))[0] == single


def test_a_checkpoint_mid_episode_is_replayed_exactly():
    def actor_and_envs():
        return make_actor(5), make_vector_env(EnvConfig(id=ENV_ID), 3)

    actor, envs = actor_and_envs()
    first = BatchActor(actor, envs, (9,))
    first.epsilons[:] = 1.0
    play(first, 17)
    assert first.mid_episode
    state, rng = first.state_dict(), actor.rng.bit_generator.state
    expected, _, _ = play(first, 30)
    actor2, envs2 = actor_and_envs()
    actor2.rng.bit_generator.state = rng
    second = BatchActor(actor2, envs2, (9,))
    second.epsilons[:] = 1.0
    assert second.load_state_dict(state)
    got, _, _ = play(second, 30)
    # the open n-step windows were not re-played into these writers: compare the steps
    later = [(t["obs"].tolist(), t["action"], t["next_obs"].tolist()) for t in got]
    assert all(
        x in [(t["obs"].tolist(), t["action"], t["next_obs"].tolist()) for t in expected]
        for x in later
    )
    assert (second.lengths == first.lengths).all() and (second.obs == first.obs).all()


class Unrepeatable(gym.Env):
    """Draws from the global generator, not from its reset seed."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.full(4, random.random(), np.float32), {}

    def step(self, action):
        return np.full(4, random.random(), np.float32), 1.0, False, False, {}


def test_an_env_that_does_not_repeat_itself_gets_fresh_episodes(capsys):
    if "shoal-test/Unrepeatable-v0" not in gym.registry:
        gym.register("shoal-test/Unrepeatable-v0", entry_point=Unrepeatable)
    cfg = EnvConfig(id="shoal-test/Unrepeatable-v0")
    first = BatchActor(make_actor(), make_vector_env(cfg, 2), (1,))
    play(first, 5)
    second = BatchActor(make_actor(), make_vector_env(cfg, 2), (1,))
    assert not second.load_state_dict(first.state_dict())
    assert "did not repeat" in capsys.readouterr().err
    assert second.obs is None and (second.episodes == first.episodes + 1).all()


def test_hybrid_actions_step_a_vector_env():
    from shoal.agent.hybrid import HybridActor, HybridDQN
    from shoal.config import DQNConfig

    agent = HybridDQN(4, 3, 1, DQNConfig(hidden=[8]), low=-1.0, high=1.0, device="cpu")
    actor = HybridActor(
        agent.online, params=agent.params, n_actions=3, rng=np.random.default_rng(0)
    )
    envs = make_vector_env(EnvConfig(id="shoal/HybridTarget-v0"), 3)
    acting = BatchActor(actor, envs, (0,))
    acting.epsilons[:] = [0.0, 0.5, 1.0]
    got = acting.step()
    assert len(got.actions) == 3 and all(0 <= a < 3 and x.shape == (1,) for a, x in got.actions)


def test_engines_bad_input_is_one_clear_error(monkeypatch):
    with pytest.raises(EnvError, match="envpool does not know"):
        check_engine(EnvConfig(id=ENV_ID, vector="envpool"))
    with pytest.raises(ConfigError, match="step_cost_us"):
        check_engine(EnvConfig(vector="envpool", step_cost_us=5.0))
    with pytest.raises(ConfigError, match="num_envs"):
        make_vector_env(EnvConfig(), 0)
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "envpool" else real(name, *a)
    )
    with pytest.raises(ConfigError, match="envpool package, which is not installed"):
        check_engine(EnvConfig(vector="envpool"))


def test_envpool_and_async_engines_keep_episodes_apart():
    """envpool's own CartPole and the async engine: every finished episode is whole
    (CartPole's reward is 1 per step: return == length), and counts add up."""
    for vector in ("envpool", "async"):
        envs = make_vector_env(EnvConfig(vector=vector), 4, seed=1)
        acting = BatchActor(make_actor(), envs, (2,))
        try:
            _, finished, count = play(acting, 150)
        finally:
            acting.close()
        assert finished and all(f.ret == f.length for f in finished), vector
        assert count == sum(f.length for f in finished) + acting.lengths.sum(), vector
