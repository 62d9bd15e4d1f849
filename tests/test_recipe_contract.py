"""The recipe contract in use: each recipe refuses, in one line naming the key, what it
cannot train on whichever runner asks (the agents runner included); each tunes its own
keys; the Ape-X spread is one key, and configs written before it still load."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import shoal
from shoal.config import load_config, load_run_config
from shoal.errors import ConfigError
from shoal.registry import recipe_for
from shoal.tune.space import SearchSpace

sys.path.insert(0, str(Path(__file__).parent))  # user_code/

pytestmark = pytest.mark.timeout(120)

AGENTS = ["run.runner=agents", "env.id='shoal/Harvest-v0'", "agents.agents=2"]


def refused(tmp_path, overrides, source="cartpole"):
    """The one-line error a run of ``overrides`` stops with, before any work."""
    with pytest.raises(ConfigError) as e:
        shoal.train(source, overrides=overrides, run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()
    message = str(e.value)
    assert "\n" not in message
    return message


def test_iqn_refuses_on_the_agents_runner_what_it_refuses_elsewhere(tmp_path, tiny):
    network = "dqn.network='user_code.qnets:layernorm_mlp'"
    for runner in (["run.runner=serial"], AGENTS):
        message = refused(tmp_path, [*tiny(), *runner, "run.recipe='iqn'", network])
        assert "'dqn.network'" in message and "iqn.torso" in message, message
    torso = "iqn.torso='user_code.qnets:summed_torso'"
    message = refused(tmp_path, [*tiny(), *AGENTS, "run.recipe='iqn'", torso])
    assert "'iqn.torso'" in message, message


def test_r2d2_with_a_self_play_pool_is_refused_in_one_line(tmp_path, tiny):
    overrides = [
        *tiny(),
        "env.id='shoal/ConnectFour-v0'",
        "run.runner=processes",
        "selfplay.enabled=true",
        "run.recipe='r2d2'",
    ]
    message = refused(tmp_path, overrides)
    assert "'selfplay.enabled'" in message and "'r2d2'" in message and "memory" in message


def test_recipes_refuse_runners_and_actions_they_do_not_train(tmp_path, tiny):
    hybrid = "env.id='shoal/HybridTarget-v0'"
    for recipe in ("dqn", "iqn", "c51", "r2d2"):
        message = refused(tmp_path, [*tiny(), hybrid, f"run.recipe='{recipe}'"])
        assert "'run.recipe'" in message and "'hybrid'" in message, message
    message = refused(tmp_path, [*tiny(), "run.recipe='hybrid'"])
    assert "Discrete" in message, message
    message = refused(tmp_path, [*tiny(), hybrid, "run.runner=ray"], source="hybrid")
    assert "'run.runner'" in message and "'ray'" in message, message
    assert load_config("hybrid").run.recipe == "hybrid"  # the env's own recipe


def test_each_recipe_tunes_the_keys_it_reads():
    mapf = load_config("mapf")
    keys = set(SearchSpace.build(mapf).dimensions)
    assert "dqn.hidden" not in keys and "dqn.n_step" not in keys  # MAPF reads neither
    assert {"mapf.hidden", "explore.spread"} <= keys
    r2d2 = set(SearchSpace.build(load_config("cartpole", ["run.recipe='r2d2'"])).dimensions)
    assert {"r2d2.state_dim", "dqn.hidden"} <= r2d2
    c51 = set(SearchSpace.build(load_config("cartpole", ["run.recipe='c51'"])).dimensions)
    assert "c51.v_max" in c51
    assert "c51.v_max" not in SearchSpace.build(load_config("cartpole")).dimensions


def test_one_spread_key_and_configs_written_before_it(tmp_path):
    cfg = load_config("cartpole", ["run.runner=ray"])
    assert cfg.explore.spread is None and cfg.explore.spread_for(cfg) == 7.0
    assert load_config("cartpole").explore.spread_for(load_config("cartpole")) == 0.0
    mapf = load_config("mapf", ["run.runner=serial"])
    assert mapf.explore.spread_for(mapf) == 7.0
    with pytest.raises(ConfigError, match="'ray.eps_alpha' is now 'explore.spread'"):
        load_config("cartpole", ["ray.eps_alpha=3"])
    # A run saved under config_version 2: the key its runner read moves, others drop.
    old = tmp_path / "config.toml"
    for runner, table, chosen in [("processes", "processes", 5.0), ("ray", "ray", 3.0)]:
        old.write_text(
            "config_version = 2\n"
            f'[run]\nrunner = "{runner}"\nrecipe = "dqn"\n'
            f"[processes]\neps_spread = {chosen if table == 'processes' else 0.0}\n"
            f"[ray]\neps_alpha = {chosen if table == 'ray' else 7.0}\n"
        )
        cfg = load_run_config(old)
        assert cfg.explore.spread == chosen and cfg.explore.spread_for(cfg) == chosen
    old.write_text('config_version = 2\n[run]\nrunner = "ray"\n[ray]\neps_alpha = 7.0\n')
    cfg = load_run_config(old)
    assert cfg.explore.spread is None and cfg.explore.spread_for(cfg) == 7.0


def test_the_c51_recipe_builds_a_distribution_per_action():
    cfg = load_config("cartpole", ["run.recipe='c51'", "c51.n_atoms=11"])
    recipe = recipe_for(cfg)
    spec = recipe.probe(cfg)
    learner = recipe.make_learner(cfg, spec)
    assert learner.online.n_actions == 2 and learner.online.n_atoms == 11
    with pytest.raises(ConfigError, match="'c51.v_max'"):
        load_config("cartpole", ["run.recipe='c51'", "c51.v_min=5", "c51.v_max=5"])


def test_mapf_cuts_its_sequences_with_r2d2s_keys(tmp_path):
    cfg = load_config("mapf")
    assert (cfg.r2d2.length, cfg.r2d2.burn_in, cfg.r2d2.period) == (16, 8, 16)
    with pytest.raises(ConfigError, match="'mapf.length' is now 'r2d2.length'"):
        load_config("mapf", ["mapf.length=8"])
    with pytest.raises(ConfigError, match="'r2d2.period'"):
        load_config("mapf", ["r2d2.period=20"])
    # A MAPF run saved under config_version 2 keeps the sequences it trained on.
    old = tmp_path / "config.toml"
    old.write_text(
        'config_version = 2\n[env]\nid = "shoal/Mapf-v0"\n[run]\nrecipe = "mapf"\n'
        "[mapf]\nlength = 12\nburn_in = 4\nperiod = 6\neta = 0.5\n"
        "[r2d2]\nlength = 20\nburn_in = 10\nperiod = 10\neta = 0.9\n"
    )
    r = load_run_config(old).r2d2
    assert (r.length, r.burn_in, r.period, r.eta) == (12, 4, 6, 0.5)
