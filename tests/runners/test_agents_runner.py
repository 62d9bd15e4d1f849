"""The agents runner: stacked and per-agent training and batched and per-agent acting
compute the same thing; async learning surfaces a learning-thread failure; bad input is a
one-line error before any work. What every runner must do is in test_conformance.py."""

import multiprocessing
import os
import signal
import threading
from pathlib import Path

import pytest
import torch

import shoal
from shoal.errors import ConfigError, EnvError
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics
from shoal.runners.agents import AgentsRunner, LearningThreadError
from shoal.runners.agents.collector import CollectorError

pytestmark = pytest.mark.timeout(240)


def stacked_weights(run_dir):
    state = load_checkpoint(RunDir(run_dir).checkpoint)["learner"]
    if isinstance(state, list):  # per-agent learners: stack them as the stacked one does
        return {n: torch.stack([s["online"][n] for s in state]) for n in state[0]["online"]}
    return state["online"]


def test_stacked_per_agent_batched_and_looped_runs_are_the_same_run(tmp_path, tiny, harvest):
    runs = {}
    for training in ("true", "false"):
        for actions in ("true", "false"):
            name = f"t{training}-a{actions}"
            over = harvest(agents__parallel_training=training)
            over.append(f"agents.parallel_actions={actions}")
            shoal.train("cartpole", overrides=over, run_dir=tmp_path / name)
            runs[name] = stacked_weights(tmp_path / name)
    ref = runs.pop("ttrue-atrue")
    for name, weights in runs.items():
        for k, v in ref.items():
            assert float((weights[k] - v).abs().max()) <= 1e-5, (name, k)
    rows = read_metrics(RunDir(tmp_path / "ttrue-atrue").metrics)
    episode = [r for r in rows if r["kind"] == "episode"][0]
    for column in ("return_agent_0", "return_agent_2", "efficiency", "equality", "peace"):
        assert episode[column] != "", column


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_async_learning_runs_and_checkpoints_every_agent(tmp_path, tiny, mode, harvest):
    over = harvest(agents__async_learning="true", agents__copy_on_train="true")
    over.append(f"agents.async_mode={mode!r}")
    result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert result.updates > 0
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    assert len(state["replays"]) == 3
    assert state["learner"]["online"]["torso.0.weight"].shape[0] == 3
    assert not [t for t in threading.enumerate() if t.name.startswith("shoal-")]


def test_a_learning_thread_failure_reaches_the_caller_with_its_cause(
    tmp_path, tiny, monkeypatch, harvest
):
    def failing(self, replays):
        raise ValueError("boom in the learning thread")

    monkeypatch.setattr(AgentsRunner, "train_round", failing)
    over = harvest(agents__async_learning="true", run__total_steps=3000)
    over.append("agents.async_mode='thread'")
    with pytest.raises(Exception, match="boom in the learning thread") as info:
        shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert isinstance(info.value, LearningThreadError)
    assert isinstance(info.value.__cause__, ValueError)
    assert RunDir(tmp_path / "r").error_checkpoint.is_file()
    assert not [t for t in threading.enumerate() if t.name.startswith("shoal-")]


@pytest.mark.parametrize(
    ("override", "error", "needle"),
    [
        ("agents.agents=0", ConfigError, "agents.agents"),
        ("agents.train_interval=0", ConfigError, "agents.train_interval"),
        ("run.eval_epsilon=0.05", ConfigError, "'run.eval_epsilon'.*greedily"),
        ("env.id='CartPole-v1'", EnvError, "multi-agent world"),
        ("env.id='pettingzoo:no.such.module'", EnvError, "cannot import"),
    ],
)
def test_bad_input_is_rejected_before_any_work(tmp_path, tiny, override, error, needle, harvest):
    with pytest.raises(error, match=needle):
        shoal.train("cartpole", overrides=[*harvest(), override], run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


# --- async learning with a collector process -----------------------------------------------


def with_collector(over):
    return [*over, "agents.async_learning=true", "agents.async_mode='process'"]


def test_a_killed_collector_process_is_replaced_and_the_run_completes(
    tmp_path, tiny, monkeypatch, harvest
):
    original, killed = AgentsRunner.collect, []

    def collect(self, step):
        if self.epochs == 3 and not killed:  # it is playing epoch 3 now
            killed.append(self.learning.collector.worker.proc.pid)
            os.kill(killed[0], signal.SIGKILL)
        return original(self, step)

    monkeypatch.setattr(AgentsRunner, "collect", collect)
    over = with_collector(harvest())
    result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert killed and result.env_steps == 600 and result.updates > 0
    rows = read_metrics(RunDir(tmp_path / "r").metrics)
    restarts = [float(r["collector_restarts"]) for r in rows if r.get("collector_restarts")]
    assert restarts and max(restarts) == 1
    episodes = [r for r in rows if r["kind"] == "episode"]
    assert [int(r["step"]) for r in episodes] == list(range(60, 601, 60))  # epoch 3 replayed
    assert not multiprocessing.active_children()


def test_a_world_failing_in_the_collector_fails_the_run_with_its_traceback(
    tmp_path, tiny, monkeypatch
):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    over = with_collector(
        [
            "run.runner=agents",
            "env.id='pettingzoo:failing_world'",
            *tiny(run__total_steps=160, run__learning_starts=8),
        ]
    )
    with pytest.raises(CollectorError, match="the world broke in turn 2") as info:
        shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert (
        "Traceback" in str(info.value) and not info.value.lost
    )  # not restarted: it would fail again
    assert load_checkpoint(RunDir(tmp_path / "r").error_checkpoint)["loop"]["step"] == 16
    assert not multiprocessing.active_children()


def test_ctrl_c_with_a_collector_process_stops_it_checkpoints_and_resumes(
    tmp_path, tiny, monkeypatch, harvest
):
    original, fired = AgentsRunner.learn, []

    def learn(self, step, new_steps):
        if self.epochs == 4 and not fired:  # while the collector plays epoch 4
            fired.append(step)
            raise KeyboardInterrupt
        return original(self, step, new_steps)

    monkeypatch.setattr(AgentsRunner, "learn", learn)
    over = with_collector(harvest(run__checkpoint_every=100000))
    with pytest.raises(KeyboardInterrupt):
        shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert fired == [240] and not multiprocessing.active_children()
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    assert state["loop"]["step"] == 240 and state["epochs"] == 4
    monkeypatch.undo()
    result = shoal.train(resume=tmp_path / "r")
    assert result.env_steps == 600
    episodes = [r for r in read_metrics(RunDir(tmp_path / "r").metrics) if r["kind"] == "episode"]
    assert [int(r["episode"]) for r in episodes] == list(range(10))  # none lost, none twice
    assert not multiprocessing.active_children()


def test_a_multi_agent_run_plays_and_evaluates_through_the_public_api(tmp_path, tiny, harvest):
    shoal.train("cartpole", overrides=harvest(), run_dir=tmp_path / "r")
    played = shoal.play_run(tmp_path / "r", 3, seed=5, checkpoint="latest")
    assert len(played) == 3 and all(r.returns.shape == (3,) and r.turns == 60 for r in played)
    assert {"efficiency", "equality", "sustainability", "peace"} <= set(played[0].social)
    again = shoal.evaluate_run(tmp_path / "r", 3, seed=5, checkpoint="latest")
    assert again.tolist() == [float(r.returns.sum()) for r in played]  # same worlds, greedy
    random = shoal.play_run(tmp_path / "r", 3, seed=5, checkpoint="latest", epsilon=1.0)
    assert [r.returns.tolist() for r in random] != [r.returns.tolist() for r in played]
    shoal.train("cartpole", overrides=tiny(), run_dir=tmp_path / "single")
    with pytest.raises(ConfigError, match="multi-agent run"):
        shoal.play_run(tmp_path / "single", 2)


def test_evaluation_plays_its_worlds_side_by_side_with_the_one_by_one_returns(harvest):
    """Greedy evaluation plays its episodes in worlds side by side (fewer worlds than
    episodes: each takes the next seed when it ends), with exactly the returns of playing
    the same seeds one after another, for trained-looking (random) and initial weights."""
    from shoal.config import load_config
    from shoal.envs.parallel import make_parallel_env
    from shoal.run.seeding import SeedStream, derive_seed
    from shoal.runners.agents.epochs import EpochPlayer, greedy_returns

    cfg = load_config(None, [*harvest(), "agents.max_turns=40", "run.eval_episodes=7"])
    runner = AgentsRunner(cfg)
    try:
        torch.manual_seed(1)  # on every device: the draw, and so the behaviour, is fixed
        with torch.no_grad():  # weights far from the initial ones: varied behaviour
            for p in runner.actor.params.values():
                p.add_(torch.randn_like(p))
        seeds = [derive_seed(3, SeedStream.EVAL, k) for k in range(7)]
        env = make_parallel_env(cfg.env.id, num_agents=3, max_turns=40)
        player = EpochPlayer(cfg, env, runner.ma, runner.actor)
        one_by_one = [player.play(0.0, s, store=False).returns.sum() for s in seeds]
        worlds = [make_parallel_env(cfg.env.id, num_agents=3, max_turns=40) for _ in range(3)]
        side_by_side = greedy_returns(cfg, worlds, runner.ma, runner.actor, seeds)
        assert side_by_side.tolist() == one_by_one
        assert len(set(one_by_one)) > 1  # the seeds gave different episodes
        returns, _ = runner.evaluate(seed=3)
        assert returns.tolist() == one_by_one
    finally:
        runner.stop()
        runner.close()


@pytest.mark.parametrize(
    "agents, setting, episodes", [(3, None, 7), (8, None, 3), (30, None, 2), (8, 5, 5)]
)
def test_an_evaluation_plays_twenty_returns_worth_of_episodes_unless_told(
    agents, setting, episodes
):
    """Each episode gives every agent a return: by default an evaluation plays
    ceil(20 / agents) of them, at least 2, so long episodes do not make it as long as
    minutes of training; ``run.eval_episodes`` overrides."""
    from shoal.config import load_config

    over = ["run.runner=agents", "env.id='shoal/Harvest-v0'", f"agents.agents={agents}"]
    over += ["agents.max_turns=5", *([f"run.eval_episodes={setting}"] if setting else [])]
    runner = AgentsRunner(load_config(None, over))
    try:
        returns, _ = runner.evaluate(seed=1)
        assert len(returns) == episodes
    finally:
        runner.stop()
        runner.close()


# --- the runner as components ----------------------------------------------------------------


@pytest.mark.parametrize("training", ["true", "false"])
def test_a_player_of_initial_weights_acts_on_the_runners_initial_agents(harvest, training):
    """The K initial weights are drawn by one rule (``drawn_per_agent``): a player built
    without weights (the collector's, ``shoal.play_run`` of an untrained run) acts on
    exactly the runner's agents, in either learner layout."""
    from shoal.config import load_config
    from shoal.envs.parallel import make_parallel_env
    from shoal.runners.agents.epochs import build_player

    cfg = load_config(None, harvest(agents__parallel_training=training))
    runner = AgentsRunner(cfg)
    env = make_parallel_env(cfg.env, num_agents=3, max_turns=60)
    try:
        drawn = build_player(cfg, env).actor.params
        own = runner.layout.weights()
        assert drawn.keys() == own.keys()
        assert all(torch.equal(drawn[n], own[n]) for n in own)
    finally:
        env.close()
        runner.close()


@pytest.mark.parametrize(
    ("overrides", "kind"),
    [
        (["agents.async_learning=false"], "InlineLearning"),
        (["agents.async_learning=true", "agents.async_mode='thread'"], "ThreadLearning"),
        (["agents.async_learning=true", "agents.async_mode='process'"], "CollectorLearning"),
    ],
)
def test_the_learning_mode_is_chosen_once_and_the_runner_never_asks_again(harvest, overrides, kind):
    """The learning component and the learner layout are chosen once, from the config;
    the runner's own code names neither mode nor layout (``learning.py`` and
    ``layout.py`` own them)."""
    import inspect

    from shoal.config import load_config
    from shoal.runners.agents.learning import learning_kind

    cfg = load_config(None, [*harvest(), *overrides])
    assert learning_kind(cfg).__name__ == kind
    assert AgentsRunner.spawns(cfg) == (kind == "CollectorLearning")
    source = inspect.getsource(AgentsRunner)
    for name in ("async_learning", "async_mode", "parallel_training", "_thread", "_collector"):
        assert name not in source, name
    assert "stacked is" not in source and "StackedLearner" not in source
