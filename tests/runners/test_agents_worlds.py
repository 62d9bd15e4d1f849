"""The agents runner on worlds as the field's benchmarks ship them: gymnasium's per-agent
``Tuple`` form (a fake in ``tests/user_code/tuple_world.py``, and lbforaging itself), the
team reward, ``agents.max_turns`` capping every world, agents of different sizes padded and
masked, and parameter sharing."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import shoal
from shoal.config import load_config
from shoal.envs.parallel import check_padding, make_parallel_env, probe_parallel_env
from shoal.errors import ConfigError, EnvError
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics
from shoal.runners.agents.epochs import (
    agent_config,
    build_player,
    checkpoint_weights,
    play_checkpoint,
)

sys.path.insert(0, str(Path(__file__).parents[1]))  # user_code/: the user's world

pytestmark = pytest.mark.timeout(240)

SIGNALS = "user_code.tuple_world:Signals-v0"


def config(*overrides: str):
    return load_config("harvest", [f"env.id={SIGNALS!r}", "agents.max_turns=1000", *overrides])


def world(kwargs: str = "{}", max_turns: int = 1000):
    """The fake world made from ``env.kwargs`` (a TOML inline table)."""
    return make_parallel_env(config(f"env.kwargs={kwargs}").env, num_agents=2, max_turns=max_turns)


def test_a_tuple_world_is_stepped_as_a_parallel_one_with_named_agents():
    env = world()
    spec = probe_parallel_env(env, SIGNALS)
    assert spec.agents == ("agent_0", "agent_1")
    assert (spec.obs_dim, spec.n_actions, spec.padded) == (2, 2, False)
    obs, infos = env.reset(seed=0)
    assert set(obs) == set(infos) == {"agent_0", "agent_1"}
    _, rewards, term, trunc, _ = env.step({"agent_0": 0, "agent_1": 1})
    assert set(rewards) == {"agent_0", "agent_1"} and sum(rewards.values()) == 1.0
    assert not any(term.values()) and not any(trunc.values())


def test_the_worlds_own_step_limit_is_a_truncation_and_an_earlier_end_a_termination():
    env = world("{limit=4}")
    env.reset(seed=1)
    for _ in range(4):
        assert env.agents
        _, _, term, trunc, _ = env.step({"agent_0": 0, "agent_1": 0})
    assert env.agents == []
    assert all(trunc.values()) and not any(term.values())

    env = world("{limit=50, stop_when_all_right=true}")
    obs, _ = env.reset(seed=2)
    while env.agents:  # name the lights: the first step already ends it, a true end
        act = {a: int(np.argmax(o)) for a, o in obs.items()}
        obs, _, term, trunc, _ = env.step(act)
    assert all(term.values()) and not any(trunc.values())


def test_max_turns_caps_a_tuple_world_and_a_pettingzoo_world_as_truncations():
    env = world("{limit=50}", max_turns=3)
    env.reset(seed=0)
    turns = 0
    while env.agents:
        _, _, term, trunc, _ = env.step({a: 0 for a in env.agents})
        turns += 1
    assert turns == 3 and all(trunc.values()) and not any(term.values())

    cfg = load_config("harvest", ["env.id='pettingzoo:user_code.world'", "env.kwargs={turns=10}"])
    lights = make_parallel_env(cfg.env, num_agents=2, max_turns=4)
    lights.reset(seed=0)
    turns = 0
    while lights.agents:
        _, _, term, trunc, _ = lights.step({a: 0 for a in lights.agents})
        turns += 1
    assert turns == 4 and all(trunc.values())
    lights.reset(seed=1)  # a new episode after the cap
    assert lights.agents


def test_an_epoch_stores_the_team_reward_and_bootstraps_a_truncated_end():
    for reward in ("own", "team"):
        cfg = config(f"agents.reward={reward!r}", "dqn.n_step=1", "env.kwargs={limit=6}")
        env = make_parallel_env(cfg.env, num_agents=2, max_turns=1000)
        played = build_player(cfg, env).play(1.0, 3, store=True)
        own = [t["reward"] for t in played.transitions]  # per turn, per agent
        assert played.turns == 6 and all(len(r) == 6 for r in own)
        if reward == "team":  # every agent learns the sum of both rewards of that turn
            assert np.array_equal(own[0], own[1])
            assert own[0].sum() == played.returns.sum()
        else:
            assert [r.sum() for r in own] == list(played.returns)
        for t in played.transitions:  # the step limit: the last transition bootstraps
            assert t["discount"][-1] > 0


def test_rows_and_shoal_eval_carry_every_agents_own_return_and_their_sum(tmp_path, tiny, capsys):
    from shoal.cli import main

    over = tiny(run__total_steps=300, run__learning_starts=50, run__eval_every=150)
    over += [f"env.id={SIGNALS!r}", "agents.reward='team'", "env.kwargs={limit=10}"]
    shoal.train("harvest", overrides=over, run_dir=tmp_path / "r")
    rows = read_metrics(RunDir(tmp_path / "r").metrics)
    episodes = [r for r in rows if r["kind"] == "episode"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert episodes and evals
    for r in episodes:
        both = float(r["return_agent_0"]) + float(r["return_agent_1"])
        assert float(r["return"]) == pytest.approx(both)
    for r in evals:
        both = float(r["eval_return_agent_0"]) + float(r["eval_return_agent_1"])
        assert float(r["eval_mean"]) == pytest.approx(both)
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "r"), "--episodes", "4", "--trust-code"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 episodes: mean") and "each agent's mean: agent_0" in out


@pytest.mark.parametrize(
    "env_id, expected",
    [
        ("CartPole-v1", "observes Box"),
        ("NoSuchWorld-v0", "gymnasium cannot make this one"),
        ("shoal/GridWorld-v0", "needs a multi-agent world"),
    ],
)
def test_a_world_of_no_form_the_runner_takes_is_one_line_naming_the_forms(env_id, expected):
    with pytest.raises(EnvError, match=expected) as info:
        make_parallel_env(env_id, num_agents=2, max_turns=10)
    assert "\n" not in str(info.value) and "Tuple" in str(info.value)


def test_agents_of_different_sizes_are_padded_with_their_extra_actions_masked():
    cfg = config("env.kwargs={actions=[3, 5], extra=[4, 0]}")
    env = make_parallel_env(cfg.env, num_agents=2, max_turns=1000)
    spec = probe_parallel_env(env, SIGNALS)
    assert (spec.obs_dim, spec.n_actions, spec.masked) == (7 + 5, 5, True)
    assert agent_config(cfg, spec).dqn.action_mask and not cfg.dqn.action_mask
    player = build_player(cfg, env)
    for epsilon in (1.0, 0.0):  # exploring and greedy: agent 0 never takes actions 3 or 4
        played = player.play(epsilon, 5, store=True)
        small = played.transitions[0]
        assert small["action"].max() < 3
        legal = np.tile([1, 1, 1, 0, 0], (len(small["obs"]), 1))
        assert np.array_equal(small["obs"][:, -5:], legal)


def test_padding_a_recipe_cannot_mask_or_over_the_worlds_own_masks_is_one_line():
    cfg = config("env.kwargs={actions=[3, 5]}")
    spec = probe_parallel_env(make_parallel_env(cfg.env, num_agents=2, max_turns=9), SIGNALS)
    with pytest.raises(ConfigError, match="'run.recipe'.*cannot mask actions"):
        check_padding(cfg, spec, recipe_masks=False)
    masked = config("env.kwargs={actions=[3, 5]}", "dqn.action_mask=true")
    with pytest.raises(ConfigError, match="'dqn.action_mask'"):
        check_padding(masked, spec, recipe_masks=True)
    check_padding(cfg, spec, recipe_masks=True)


def test_sharing_trains_one_network_for_every_agent_and_its_checkpoint_plays(tmp_path, tiny):
    over = tiny(run__total_steps=300, run__learning_starts=50, run__eval_every=150)
    over += [f"env.id={SIGNALS!r}", "agents.share=true", "env.kwargs={limit=10}"]
    result = shoal.train("harvest", overrides=over, run_dir=tmp_path / "r")
    assert result.updates > 0
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    online = state["learner"]["online"]
    first = next(iter(online.values()))
    assert state["learner"]["shared_by"] == 2 and first.shape[0] != 2  # one network
    weights = checkpoint_weights(state["learner"])
    assert all(torch.equal(w[0], w[1]) for w in weights.values())
    cfg = load_config("harvest", over)
    played = play_checkpoint(cfg, state["learner"], 2, seed=0)
    assert len(played) == 2 and played[0].turns == 10
    ids = build_player(cfg, make_parallel_env(cfg.env, num_agents=2, max_turns=5))
    rows = ids.actor.params  # every agent acts with the same weights
    assert all(torch.equal(p[0], p[1]) for p in rows.values())


def test_a_padded_world_trains_with_masks_and_the_agents_runner_refuses_a_bad_share(tmp_path, tiny):
    over = tiny(run__total_steps=300, run__learning_starts=50, run__eval_every=150)
    over += [f"env.id={SIGNALS!r}", "env.kwargs={actions=[3, 5], extra=[2, 0], limit=10}"]
    assert shoal.train("harvest", overrides=over, run_dir=tmp_path / "r").updates > 0


def test_lbforaging_as_it_ships_trains_on_the_team_reward(tmp_path, tiny):
    pytest.importorskip("lbforaging")
    over = tiny(run__total_steps=200, run__learning_starts=50, run__eval_every=100)
    over += ["env.id='lbforaging:Foraging-8x8-2p-2f-coop-v3'", "agents.reward='team'"]
    shoal.train("harvest", overrides=over, run_dir=tmp_path / "r")
    rows = [r for r in read_metrics(RunDir(tmp_path / "r").metrics) if r["kind"] == "episode"]
    assert rows and int(rows[0]["length"]) == 50  # the world's own 50-step limit
    assert {"return_agent_0", "return_agent_1"} <= set(rows[0])


def test_mpe2_speaker_listener_trains_padded_and_masked(tmp_path, tiny):
    pytest.importorskip("mpe2")
    over = tiny(run__total_steps=200, run__learning_starts=50, run__eval_every=100)
    shoal.train("mpe-speaker-listener", overrides=over, run_dir=tmp_path / "r")
    cfg = load_config("mpe-speaker-listener")
    env = make_parallel_env(cfg.env, num_agents=2, max_turns=25)
    spec = probe_parallel_env(env, cfg.env.id)
    assert spec.masked and spec.action_counts == (3, 5) and spec.obs_dim == 11 + 5
    speaker = build_player(cfg, env).play(1.0, 0, store=True).transitions[0]
    assert speaker["action"].max() < 3  # exploring, the speaker never takes a listener's move
