"""The ray runner's faults: a killed actor is restarted by Ray and the run completes; a
lost replay actor stops the run with a clear error after a checkpoint. What every runner
must do (artifacts, Ctrl-C + resume, bad config, CartPole) is in test_conformance.py."""

import os
import signal
import time

import pytest
import torch

import shoal
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics
from shoal.run.schedule import UpdateSchedule

pytestmark = pytest.mark.timeout(300)
apex = pytest.importorskip("shoal.runners.ray.runner")


def new_pid(ray, actor, old: int) -> int:
    """The actor's process id once Ray has restarted it (calls fail while it is down)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            pid = ray.get(actor.pid.remote(), timeout=10)
            if pid != old:
                return pid
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            time.sleep(0.2)
    raise AssertionError("Ray did not restart the killed actor within 120 s")


def ray_run(tiny, **extra):
    return ["run.runner=ray", "ray.actors=2", *tiny(**{"run__total_steps": 1500, **extra})]


def test_a_killed_actor_is_restarted_and_the_run_completes(
    tmp_path, tiny, monkeypatch, ray_session, capfd
):
    original, killed = apex.RayRunner.collect, []

    def collect(self, step):
        if step >= 300 and not killed:
            killed.append(ray_session.get(self.actors[0].pid.remote()))
            os.kill(killed[0], signal.SIGKILL)
            # Ray restarts it (a new process, torch imported anew: seconds); this call
            # waits for that, so the short run cannot end before the new actor answers.
            killed.append(new_pid(ray_session, self.actors[0], killed[0]))
        return original(self, step)

    monkeypatch.setattr(apex.RayRunner, "collect", collect)
    over = ray_run(tiny, run__total_steps=3000)  # time for the new actor to answer
    result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    assert len(killed) == 2 and killed[0] != killed[1]
    assert result.env_steps >= 3000 and result.updates > 0
    assert "shoal: ray actor 0 died and Ray restarted it (restarts in the run: 1" in (
        capfd.readouterr().err
    )
    rows = read_metrics(RunDir(tmp_path / "r").metrics)
    assert max(float(r["restarts"]) for r in rows if r.get("restarts")) >= 1
    ticks = [r for r in rows if r["kind"] == "tick"]
    assert all(0 <= float(r["learner_idle"]) <= 1 for r in ticks)
    assert max(float(r["replay_cpu"]) for r in ticks) > 0  # the replay actor's load, in cores
    # The final checkpoint, taken after the actors and the replay stopped, holds replay.
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    assert state["replay"]["buffer"]["storage"]["size"] > 1000


def test_a_lost_replay_actor_stops_the_run_with_a_checkpoint_beside_the_last_good_one(
    tmp_path, tiny, monkeypatch, ray_session
):
    original, killed = apex.RayRunner.learn, []

    def learn(self, step, new_steps):
        # Killed once the learner has trained (sends are asynchronous: on a loaded machine
        # replay can still hold less than a batch at any fixed step).
        if self.learner.updates > 0 and not killed:
            killed.append(step)
            ray_session.kill(self.replay_actor)
        return original(self, step, new_steps)

    monkeypatch.setattr(apex.RayRunner, "learn", learn)
    with pytest.raises(apex.ReplayLostError, match="replay actor died"):
        shoal.train("cartpole", overrides=ray_run(tiny), run_dir=tmp_path / "r")
    run = RunDir(tmp_path / "r")
    state = load_checkpoint(run.error_checkpoint)  # the learner, without the lost replay
    assert killed and state["loop"]["step"] >= killed[0] and state["replay"] is None
    assert state["learner"]["updates"] > 0
    if run.checkpoint.is_file():  # the last periodic checkpoint keeps its replay
        assert load_checkpoint(run.checkpoint)["replay"] is not None
    else:  # none yet: the error-time one is what there is to continue from
        run.error_checkpoint.rename(run.checkpoint)
    result = shoal.train(resume=tmp_path / "r")
    assert result.env_steps >= 1500


def test_only_whole_episodes_reach_replay_and_a_killed_actor_adds_nothing(ray_session):
    from shoal.agent.builder import transition_fields
    from shoal.config import load_config
    from shoal.envs import probe_env
    from shoal.recipes.dqn import DQNRecipe
    from shoal.sync.ray_weights import RayWeightStore
    from shoal.sync.weight_server import WeightServer

    cfg = load_config("cartpole", ["run.runner=ray", "dqn.hidden=[16]"])
    spec = probe_env(cfg.env)
    tag = f"test-{time.monotonic_ns()}"
    remote = ray_session.remote
    replay = remote(num_cpus=0)(apex.ReplayActor).options(name=f"shoal-replay-{tag}")
    replay = replay.remote(cfg, spec, transition_fields(spec))
    server = remote(num_cpus=0)(WeightServer).options(name=f"shoal-weights-{tag}").remote()
    store = RayWeightStore(server)
    store.publish(DQNRecipe().make_learner(cfg, spec).weights(), {"epsilon": 1.0})
    store.flush()
    actor = remote(num_cpus=0)(apex.RolloutActor).remote(cfg, 0, 1, tag, 1)
    assert cfg.run.recipe == "dqn"
    try:
        played = finished = 0
        got = {"in_progress": 0}
        while played < 300 or got["in_progress"] == 0:  # stop mid-episode
            got = ray_session.get(actor.rollout.remote(37))
            played += 37
            finished += got["steps"]  # the env steps of the episodes the call finished
        ray_session.get(actor.flush.remote())
        assert finished + got["in_progress"] == played and finished > 0
        # actors yield the CPU to the learner and the replay (ray.actor_nice), other
        # workers of a local Ray as shoal starts it keep niceness 0
        assert os.getpriority(os.PRIO_PROCESS, ray_session.get(actor.pid.remote())) == 19
        assert ray_session.get(ray_session.remote(num_cpus=0)(lambda: os.nice(0)).remote()) == 0
        # n-step transitions: one per step of each finished episode, none of the partial one
        assert ray_session.get(replay.size.remote()) == finished
        ray_session.kill(actor)
        time.sleep(0.5)
        assert ray_session.get(replay.size.remote()) == finished
    finally:
        for handle in (actor, replay, server):
            ray_session.kill(handle)


def test_a_polling_weight_store_never_waits_and_sees_every_newer_version(ray_session):
    from shoal.sync.ray_weights import RayWeightStore
    from shoal.sync.weight_server import WeightServer

    tag = f"test-{time.monotonic_ns()}"
    server = ray_session.remote(num_cpus=0)(WeightServer).options(name=f"shoal-weights-{tag}")
    server = server.remote()
    learner = RayWeightStore(server)
    actor = RayWeightStore(server, poll=True)
    try:
        state = {"w": torch.zeros(3)}
        learner.publish(state, {"epsilon": 0.5})
        first = actor.pull(-1)  # holding nothing, it waits for the first weights
        assert first is not None and first.version == 0 and first.meta == {"epsilon": 0.5}
        assert actor.pull(0) is None  # the question goes out; the answer comes at a later pull
        seen = []
        for version in (1, 2, 3):
            state["w"] += 1
            learner.publish(state)
            deadline = time.monotonic() + 30
            while (not seen or seen[-1][0] < version) and time.monotonic() < deadline:
                got = actor.pull(seen[-1][0] if seen else 0)
                if got is not None:
                    seen.append((got.version, float(got.state["w"][0])))
                time.sleep(0.01)
        assert seen[-1] == (3, 3.0)
        assert [v for v, _ in seen] == sorted({v for v, _ in seen})  # only ever newer
        assert all(w == v for v, w in seen)  # each version with its own weights
    finally:
        ray_session.kill(server)


def test_a_run_whose_first_call_covers_it_takes_the_updates_it_owes(tmp_path, tiny, ray_session):
    # One call plays 200 steps of each of 4 envs, past the whole 600-step run: the run ends
    # on its first answer, whose sends to replay may not have landed yet.
    over = [
        "run.runner=ray",
        "ray.actors=1",
        "ray.steps_per_call=200",
        "env.num_envs=4",
        *tiny(),
    ]
    result = shoal.train("cartpole", overrides=over, run_dir=tmp_path / "r")
    cfg = shoal.load_config("cartpole", over)
    owed = UpdateSchedule.from_config(cfg.run).due(result.env_steps)
    assert result.env_steps >= 600 and owed > 0
    assert result.updates == owed


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _is_ray(pid: int) -> bool:
    """Whether ``pid`` is one of Ray's processes (its daemons run from the ray package; its
    workers rename themselves ``ray::...``), not another test's child."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().decode(errors="replace")
    except OSError:
        return False
    return cmd.startswith("ray::") or f"{os.sep}ray{os.sep}" in cmd


def test_a_local_rays_daemons_are_out_of_the_drivers_process_group(ray_session):
    """A SIGTERM to the run's process group (a scheduler's or supervisor's stop) reaches the
    driver alone, which checkpoints and then stops its Ray: the daemons (GCS, raylet and the
    workers it starts) lead groups of their own. They stay in the driver's session, where
    the conformance tests look for leftovers."""
    ray_session.get(ray_session.remote(num_cpus=0)(lambda: 0).remote())  # a worker is up
    daemons = [pid for pid in _children(os.getpid()) if _is_ray(pid)]
    assert len(daemons) >= 3, daemons  # GCS, raylet, a worker at least
    for pid in daemons:
        assert os.getpgid(pid) != os.getpgrp(), pid
        assert os.getsid(pid) == os.getsid(0), pid
    from ray._private import services

    assert services.ConsolePopen.__name__ == "ConsolePopen"  # Ray's own, put back


@pytest.mark.parametrize("began", [False, True], ids=["before-training", "after-training"])
def test_a_node_lost_under_the_run_is_one_line_exit_1(
    tmp_path, tiny, monkeypatch, capsys, ray_session, began
):
    """A dead local node looks like dead actors to Python; the runner tells them apart
    (its node's raylet is gone) and stops in one line, exit 1: no run directory before
    the first collection came back, error.pt (without the lost replay) after. Here the
    node's death is its actors', and the runner is told its raylet is gone."""
    from shoal.cli import main

    original, lost = apex.RayRunner.collect, []

    def collect(self, step):
        if not lost and (not began or self.learner.updates > 0):
            lost.append(step)
            for actor in [*self.actors, self.replay_actor, self.server]:
                ray_session.kill(actor)  # what the node took with it
        return original(self, step)

    monkeypatch.setattr(apex.RayRunner, "collect", collect)
    monkeypatch.setattr(apex.RayRunner, "_node_lost", lambda self: bool(lost))
    over = ray_run(tiny, run__total_steps=100_000)
    run = tmp_path / "r"
    code = main(["train", "cartpole", *[f"--set={o}" for o in over], "--run-dir", str(run)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and "node died under the run" in lines[0], err
    if not began:
        assert not run.exists()
        return
    state = load_checkpoint(RunDir(run).error_checkpoint)
    assert state["replay"] is None and state["learner"]["updates"] > 0
