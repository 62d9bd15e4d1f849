"""MAPF runs on the serial, processes and ray runners: rows and columns, checkpoints and
resume, the curriculum's stages reaching every rollout worker, the policy loaded back for
evaluation, and clear errors for runners MAPF does not train on."""

from __future__ import annotations

import numpy as np
import pytest

import shoal
from shoal.errors import ConfigError
from shoal.mapf.policy import load_policy
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics

pytestmark = pytest.mark.timeout(240)


def mapf_run(tiny, **extra: object) -> list[str]:
    """A MAPF run of a few seconds: 2 worlds of up to 3 agents on 6x6 maps."""
    values = {
        "run__total_steps": 400,
        "run__learning_starts": 100,
        "run__eval_every": 200,
        "run__checkpoint_every": 200,
        "run__train_freq": 16,
        "mapf__envs": 2,
        "mapf__agents": 2,
        "mapf__max_agents": 3,
        "mapf__size": 6,
        "mapf__max_size": 6,
        "mapf__max_steps": 24,
        "mapf__channels": 4,
        "mapf__hidden": 8,
        "mapf__heads": 2,
        "r2d2__length": 4,
        "r2d2__burn_in": 2,
        "r2d2__period": 4,
        "mapf__eval_agents": "[2]",
        "mapf__eval_sizes": "[6]",
        "dqn__batch_size": 4,
        "replay__capacity": 500,
        "ray__actors": 1,
        "ray__steps_per_call": 32,
        "ray__timeout": 60,
        **extra,
    }
    return tiny(**values)


def check_rows(run_dir, agents: frozenset[float] = frozenset({2.0})) -> list[dict[str, str]]:
    rows = read_metrics(RunDir(run_dir).metrics)
    episodes = [r for r in rows if r["kind"] == "episode"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert episodes and evals
    assert {r["success"] for r in episodes} <= {"0", "1"}
    assert {float(r["agents"]) for r in episodes} <= agents
    assert all(float(r["size"]) == 6 for r in episodes)
    steps = [int(r["step"]) for r in episodes]
    assert steps == sorted(steps)  # worlds side by side: rows at the steps they ended
    assert all(0.0 <= float(r["success_2x6"]) <= 1.0 for r in evals)
    return episodes


def test_a_serial_mapf_run_resumed_mid_debt_owes_what_the_uninterrupted_run_owes(tmp_path, tiny):
    # 410 world steps is 25 training points and 10 steps towards the next: a resume there
    # must neither drop nor repeat that part (a float debt outside the checkpoint did).
    over = ["run.runner=serial", *mapf_run(tiny, run__eval_every=10_000)]
    whole = shoal.train("mapf", overrides=[*over, "run.total_steps=600"], run_dir=tmp_path / "a")
    cut = shoal.train("mapf", overrides=[*over, "run.total_steps=410"], run_dir=tmp_path / "b")
    assert cut.env_steps == 410 and 0 < cut.updates < whole.updates
    resumed = shoal.train(resume=tmp_path / "b", overrides=["run.total_steps=600"])
    assert resumed.env_steps == whole.env_steps == 600
    assert resumed.updates == whole.updates


def test_a_serial_mapf_run_trains_checkpoints_resumes_and_loads_as_a_policy(tmp_path, tiny):
    over = ["run.runner=serial", *mapf_run(tiny)]
    result = shoal.train("mapf", overrides=over, run_dir=tmp_path / "r")
    assert result.env_steps >= 400 and result.updates > 0
    check_rows(tmp_path / "r")
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    assert state["curriculum"]["stages"] == [[2, 6]]
    assert state["replay"]["storage"]["size"] > 0
    resumed = shoal.train(resume=tmp_path / "r", overrides=["run.total_steps=600"])
    assert resumed.env_steps >= 600 and resumed.updates > result.updates
    policy = load_policy(tmp_path / "r")
    from shoal.envs.mapf import MapfEnv

    env = MapfEnv(5, size=8, density=0.1)  # more agents than training saw: same weights
    env.reset(seed=0)
    policy.reset(env)
    actions = policy.act(env)
    assert actions.shape == (5,) and set(actions.tolist()) <= set(range(5))
    assert load_policy(tmp_path / "r", comm=False).name != policy.name
    latest = load_policy(tmp_path / "r", checkpoint="latest")
    latest.reset(env)
    assert latest.act(env).shape == (5,)
    with pytest.raises(ConfigError, match="'newest'.*'best' or 'latest'"):
        load_policy(tmp_path / "r", checkpoint="newest")
    with pytest.raises(ConfigError, match="shoal mapf eval"):
        shoal.evaluate_run(tmp_path / "r")


def test_a_ray_mapf_run_trains_through_the_replay_actor(tmp_path, tiny, ray_session):
    result = shoal.train("mapf", overrides=mapf_run(tiny), run_dir=tmp_path / "r")
    assert result.env_steps >= 400 and result.updates > 0
    check_rows(tmp_path / "r")
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    assert state["replay"]["buffer"]["storage"]["size"] > 0
    weights = state["learner"]["online"]
    assert all(np.isfinite(v.numpy()).all() for v in weights.values())


def test_a_processes_mapf_run_sends_the_curriculums_stages_to_its_workers(tmp_path, tiny):
    # A stage's first success promotes it: the 3-agent stage opens early in the run, and
    # the workers (told through their pipes) play it. Random play makes that first success
    # the same episode however the workers and the learner interleave (a learned policy's
    # came as late as step 768 of 1000 when workers pulled newer weights), and one message
    # ahead at most lets the stage reach the learner's intake a few episodes later.
    promote = {
        "mapf__promote_episodes": 1,
        "run__total_steps": 1000,
        "explore__eps_start": 1.0,
        "explore__eps_end": 1.0,
        "processes__episodes_per_batch": 1,
        "processes__max_ahead": 1,
    }
    over = ["run.runner=processes", "processes.workers=2", *mapf_run(tiny, **promote)]
    result = shoal.train("mapf", overrides=over, run_dir=tmp_path / "r")
    assert result.env_steps >= 1000 and result.updates > 0
    episodes = check_rows(tmp_path / "r", agents={2.0, 3.0})
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    assert [3, 6] in state["curriculum"]["stages"]
    assert {float(r["agents"]) for r in episodes} == {2.0, 3.0}
    assert state["replay"]["storage"]["size"] > 0  # (Ctrl-C and resume: test_conformance's)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["run.runner=threads"], "trains with 'serial', 'processes', 'ray', not 'threads'"),
        (["r2d2.period=20"], "r2d2.period"),
        (["mapf.hidden=10", "mapf.heads=4"], "mapf.hidden"),
        (["mapf.max_agents=1", "mapf.agents=2"], "mapf.max_agents"),
        (["run.eval_epsilon=0.05"], "'run.eval_epsilon'.*held-out"),
    ],
)
def test_bad_mapf_configs_fail_before_any_work(tmp_path, tiny, overrides, message):
    with pytest.raises(ConfigError, match=message):
        shoal.train("mapf", overrides=[*mapf_run(tiny), *overrides], run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_a_policy_is_evaluated_under_the_view_and_communication_it_was_trained_with(tmp_path, tiny):
    from shoal.mapf.baselines import ShortestPathPolicy
    from shoal.mapf.evaluate import evaluate, generated_instances
    from shoal.mapf.lacam import LacamShield
    from shoal.mapf.pibt import PibtShield

    over = ["run.runner=serial", *mapf_run(tiny, mapf__fov=7, mapf__k_comm=2)]
    over = [o for o in over if not o.startswith("run.total_steps")] + ["run.total_steps=200"]
    shoal.train("mapf", overrides=over, run_dir=tmp_path / "r")
    policy = load_policy(tmp_path / "r")
    assert policy.env_rules == {"fov": 7, "k_comm": 2}
    instances = generated_instances(2, 6, 3, seed=0)
    shields = [PibtShield(policy), LacamShield(policy, time_limit=1.0)]
    report = evaluate([policy, *shields, ShortestPathPolicy()], instances, max_steps=20)
    assert [s.instances for s in report.summaries] == [3, 3, 3, 3]
    names = [s.name for s in report.summaries[1:3]]
    assert names == [f"{policy.name}+pibt", f"{policy.name}+lacam"]
    # the shields leave no conflict to the env, planned or not (an untrained policy's
    # rankings can keep LaCAM's search past its time: the PIBT shield plays then)
    assert report.summaries[1].collisions == report.summaries[2].collisions == 0
    env = instances[0].env(max_steps=20, **policy.env_rules)
    env.reset(seed=0)
    policy.reset(env)
    scores = policy.scores(env)  # Q-values: the greedy action is their first best
    assert scores.shape == (2, 5)
    policy.reset(env)
    assert policy.act(env).tolist() == scores.argmax(axis=1).tolist()


def test_a_serial_mapf_run_trains_and_evaluates_through_the_shield(tmp_path, tiny):
    over = ["run.runner=serial", *mapf_run(tiny, mapf__shield="pibt")]
    result = shoal.train("mapf", overrides=over, run_dir=tmp_path / "r")
    assert result.env_steps >= 400 and result.updates > 0
    check_rows(tmp_path / "r")
