"""The processes runner and the shared-memory weight store: exactly-once episodes, worker
SIGKILL, no orphans or leftovers, torn-read freedom, and learning."""

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

import shoal
from shoal.config import load_config
from shoal.errors import ShoalError
from shoal.run.directory import RunDir
from shoal.run.loop import RunLoop
from shoal.run.metrics import read_metrics
from shoal.run.schedule import UpdateSchedule
from shoal.runners.processes import ProcessesRunner
from shoal.sync.weights import SharedWeightStore

pytestmark = pytest.mark.timeout(240)


def make_runner(tmp_path, tiny, **extra):
    cfg = load_config("cartpole", tiny(run__runner="processes", processes__workers=2, **extra))
    return ProcessesRunner(cfg)


def run(runner, tmp_path):
    """Drive ``runner`` through the run loop, as ``shoal.train`` does."""
    loop = RunLoop(runner, RunDir.create(tmp_path, "p", tmp_path / "run"))
    try:
        return loop.run()
    finally:
        runner.stop()
        runner.close()


def test_every_episode_reaches_the_learner_exactly_once(tmp_path, tiny):
    runner = make_runner(tmp_path, tiny, run__total_steps=1500)
    result = run(runner, tmp_path)
    rows = read_metrics(RunDir(tmp_path / "run").metrics)
    # the learner took each worker's episodes in order (else it stops the run): none lost,
    # none twice, and every one has its row
    assert sum(runner.received.values()) == sum(r["kind"] == "episode" for r in rows)
    assert runner.received[(0, 0)] > 0 and runner.received[(1, 0)] > 0
    # each env step became exactly one transition: no partial or repeated episodes
    assert len(runner.replay) == result.env_steps
    assert mp.active_children() == []
    # tick rows say how old the weights behind the episodes taken in were
    lags = [float(r["policy_lag"]) for r in rows if r["kind"] == "tick" and r["policy_lag"]]
    assert lags and all(0 <= lag <= result.updates for lag in lags)


def test_episodes_out_of_a_workers_order_stop_the_run(tmp_path, tiny):
    from shoal.agent.batch_actor import Finished
    from shoal.runners.processes import Block

    runner = make_runner(tmp_path, tiny)

    def block(first, k):
        return Block(0, 0, first, {}, None, [Finished(0, 0.0, 1)] * k, k, 0)

    try:
        runner._check(block(0, 3))
        runner._check(block(3, 2))
        assert runner.received == {(0, 0): 5}
        with pytest.raises(ShoalError, match="from 3 on, after 5: an episode arrived twice"):
            runner._check(block(3, 2))
        with pytest.raises(ShoalError, match="from 7 on, after 5"):
            runner._check(block(7, 1))
    finally:
        runner.stop()
        runner.close()


@pytest.mark.parametrize("per_batch,publish_every", [(1, 0), (8, 0), (8, 1), (4, 3)])
def test_updates_equal_the_serial_schedule_over_a_whole_run(
    tmp_path, tiny, per_batch, publish_every
):
    # Small batches (one short episode a worker) once trained more than owed: at least one
    # update per batch, rounded per batch. Publishing and taking in episodes between updates
    # must not change what is owed.
    runner = make_runner(
        tmp_path,
        tiny,
        run__train_freq=8,
        processes__episodes_per_batch=per_batch,
        processes__publish_every=publish_every,
    )
    result = run(runner, tmp_path)
    due = UpdateSchedule.from_config(runner.cfg.run).due(result.env_steps)
    assert result.updates == due > 0
    assert len(runner.replay) == result.env_steps


def test_learning_publishes_every_k_updates_and_takes_in_episodes_bounded(tmp_path, tiny):
    # Weights reach the workers every publish_every updates, not once a batch; what the
    # workers send meanwhile is taken in (they do not wait out the batch), but never more
    # than the next batch's share plus one message a worker (the schedule's ratio holds).
    runner = make_runner(
        tmp_path,
        tiny,
        run__total_steps=3000,
        run__train_freq=1,
        run__gradient_steps=2,
        processes__episodes_per_batch=2,
        processes__publish_every=5,
    )
    publishes, drained, most, learning = [], [], [0], [False]
    publish, receive, drain = runner._publish_weights, runner._receive, runner._drain

    def counted_publish():
        publishes.append(runner.updates)
        return publish()

    def counted_receive(worker):
        receive(worker)
        if learning[0]:
            drained.append(worker)
        pending = max((sum(b.episodes for b in bs) for bs in runner._pending.values()), default=0)
        most[0] = max(most[0], pending)

    def flagged_drain():
        learning[0] = True
        drain()
        learning[0] = False

    runner._publish_weights, runner._receive = counted_publish, counted_receive
    runner._drain = flagged_drain
    result = run(runner, tmp_path)
    assert result.updates > 100
    # the workers' weights are never more than 5 updates behind the learner's
    assert max(np.diff(publishes)) <= 5 and publishes[-1] == result.updates
    assert set(drained) == {0, 1}  # both workers' episodes came in between updates
    # one env a worker: a message is one episode, so a worker's pending episodes stop at
    # the next batch's share
    assert runner.cfg.env.num_envs == 1
    assert 0 < most[0] <= runner._per_worker()


@pytest.mark.parametrize("ahead", [1, 3])
def test_a_worker_runs_at_most_max_ahead_messages_ahead_of_the_learner(tmp_path, tiny, ahead):
    # A learner that takes nothing in: each worker sends max_ahead messages, then waits for
    # a credit (a pipe's buffer alone held thousands of CartPole steps, played with weights
    # ~1,500 updates older than the learner's), and one credit lets one more through.
    runner = make_runner(tmp_path, tiny, processes__max_ahead=ahead)
    runner.start()
    try:
        for slot in runner._slots:
            conn, firsts = slot.worker.conn, []
            for _ in range(ahead):
                assert conn.poll(60), "a worker sent fewer messages than it may"
                firsts.append(conn.recv().first)
            assert not conn.poll(2.0), "a worker ran past max_ahead"
            conn.send(1)
            assert conn.poll(60), "a credit did not let the worker go on"
            firsts.append(conn.recv().first)
            assert not conn.poll(1.0)
            assert firsts == sorted(firsts) and firsts[0] == 0
    finally:
        runner.stop()
        runner.close()


def test_a_failure_between_updates_gives_the_rest_back(tmp_path, tiny):
    # A worker failure found while taking in episodes between updates stops learning
    # there: the updates not taken stay owed (the checkpoint after the cut keeps them).
    runner = make_runner(tmp_path, tiny, processes__publish_every=2)
    runner.replay.add_batch(
        {
            "obs": np.zeros((64, 4), np.float32),
            "action": np.zeros(64, np.int64),
            "reward": np.zeros(64, np.float32),
            "next_obs": np.zeros((64, 4), np.float32),
            "discount": np.ones(64, np.float32),
        }
    )
    calls = []

    def failing_drain():
        calls.append(runner.updates)
        if len(calls) == 2:
            raise ShoalError("rollout worker 0 failed")

    runner._drain = failing_drain
    try:
        owed = runner.schedule.owe(runner.cfg.run.learning_starts + 40)
        with pytest.raises(ShoalError):
            runner.learn_steps(owed)
        assert runner.updates == 4  # drains before updates 3 and 5; the second failed
        assert runner.schedule.granted == 4
    finally:
        runner.stop()
        runner.close()


def test_learner_threads_sets_the_learners_torch_threads(tmp_path, tiny):
    before = torch.get_num_threads()
    runner = make_runner(tmp_path, tiny, processes__learner_threads=2)
    try:
        assert torch.get_num_threads() == 2
    finally:
        runner.stop()
        runner.close()
        torch.set_num_threads(before)


def test_sigkill_of_a_worker_is_survived(tmp_path, tiny, shm_names):
    before = shm_names()
    runner = make_runner(tmp_path, tiny, run__total_steps=4000, processes__episodes_per_batch=2)
    killed = []

    def killer():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(runner.received.values()) < 20:
            time.sleep(0.01)
        slots = list(runner._slots)
        if slots:
            os.kill(slots[0].worker.proc.pid, signal.SIGKILL)
            killed.append(slots[0].worker.proc.pid)

    t = threading.Thread(target=killer)
    t.start()
    result = run(runner, tmp_path)
    t.join()
    assert killed and runner.restarts >= 1
    assert runner.received.get((0, 1), 0) > 0
    assert len(runner.replay) == result.env_steps  # the killed worker's partial episode is gone
    assert mp.active_children() == []
    assert shm_names() - before == set()


READER = r"""
import json, sys
import numpy as np
from shoal.sync.weights import SharedWeightStore, SharedWeightsHandle
h = json.loads(sys.argv[1])
spec = tuple((k, tuple(s)) for k, s in h["spec"])
store = SharedWeightStore.attach(SharedWeightsHandle(h["name"], spec, tuple(h["meta"])))
torn = reads = 0
last = 0
while reads < h["until"]:
    got = store.pull(last)
    if got is None:
        continue
    version, w, meta = got.version, got.state, got.meta
    values = np.concatenate([t.numpy().ravel() for t in w.values()])
    if not (values == values[0]).all() or meta["v"] != values[0]:
        torn += 1
    reads += 1
    last = version
print(json.dumps({"torn": torn, "reads": reads}))
"""


def test_weight_store_never_returns_torn_weights():
    """A reader process pulls while the writer publishes 1M-parameter states back to back
    (each state all one value, a short pause between publishes so that the reader can also
    finish a copy); any mix of two publishes would show. A seqlock starves readers under
    publishes with no gap at all; the learner publishes once per batch."""
    template = {"a": torch.zeros(500_000), "b": torch.zeros(1000, 500)}
    store = SharedWeightStore(template, meta_keys=("v",))
    handle = {
        "name": store.handle.name,
        "spec": [[k, list(s)] for k, s in store.handle.spec],
        "meta": ["v"],
        "until": 100,
    }
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, json.dumps(handle)], stdout=subprocess.PIPE, text=True
    )
    try:
        v, deadline = 0, time.monotonic() + 90
        while reader.poll() is None and time.monotonic() < deadline:
            v += 1
            value = float(v)
            store.publish(
                {"a": torch.full((500_000,), value), "b": torch.full((1000, 500), value)},
                {"v": value},
            )
            time.sleep(0.0005)
        out, _ = reader.communicate(timeout=30)
    finally:
        if reader.poll() is None:
            reader.kill()
        store.close()
    result = json.loads(out)
    assert result["torn"] == 0 and result["reads"] == 100


def test_weight_store_versions_only_go_up_and_pull_if_newer():
    store = SharedWeightStore({"w": torch.zeros(2)})
    try:
        assert store.version == 0 and store.pull(0) is None
        assert store.publish({"w": torch.ones(2)}) == 1
        assert store.publish({"w": torch.ones(2) * 2}) == 2
        got = store.pull(0)
        assert got.version == 2 and got.state["w"].tolist() == [2.0, 2.0]
        assert store.pull(2) is None
    finally:
        store.close()


def test_train_dqn_api(tmp_path):
    from shoal.runners.processes import default_workers

    assert default_workers() == max(1, (os.cpu_count() or 1) - 2)
    result = shoal.train_dqn(
        30,
        num_workers=2,
        episodes_per_batch=3,
        batch_size=32,
        overrides=["run.progress=false", "run.learning_starts=50", "run.eval_episodes=2"],
        run_dir=tmp_path / "run",
    )
    assert result.updates > 0 and result.updates % 6 == 0  # whole batches of 2 x 3
    rows = shoal.run.metrics.read_metrics(RunDir(tmp_path / "run").metrics)
    assert sum(r["kind"] == "episode" for r in rows) == 30
    cfg = (tmp_path / "run" / "config.toml").read_text()
    assert "learning_steps_per_batch = 6" in cfg and "max_episodes = 30" in cfg
    assert np.isfinite(result.eval_return)


@pytest.mark.slow
def test_sigkill_of_the_learner_then_resume_and_eval(tmp_path):
    """kill -9 of the learner after its first checkpoint: its workers exit by themselves,
    --resume finishes the run, and `shoal eval` of it is near the bar of 475."""
    run_dir = tmp_path / "r"
    # an early first checkpoint: the run is still going (workers alive) when it is killed
    args = ["--runner", "processes", "--workers", "2", "--no-progress"]
    args += ["--set", "run.checkpoint_every=1000"]
    cmd = [sys.executable, "-m", "shoal.cli", "train", "cartpole", *args, "--run-dir", str(run_dir)]
    learner = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = RunDir(run_dir).checkpoint
    deadline = time.monotonic() + 120
    while not ckpt.is_file() and time.monotonic() < deadline and learner.poll() is None:
        time.sleep(0.1)
    assert ckpt.is_file() and learner.poll() is None
    workers = children_of(learner.pid)  # 2 workers and the shared-memory resource tracker
    assert len(workers) >= 2
    learner.kill()
    learner.wait(10)
    deadline = time.monotonic() + 60
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in workers), "workers outlived their learner"
    done = subprocess.run(
        [sys.executable, "-m", "shoal.cli", "train", "--resume", str(run_dir), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    ev = subprocess.run(
        [sys.executable, "-m", "shoal.cli", "eval", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ev.returncode == 0, ev.stderr
    # The run stops at its first confirmed solve, and a held-out check at the bar of a
    # policy that just reached it is close to a coin flip (docs/ARCHITECTURE.md): 463.5 once in a
    # full-suite run. 450 still tells a trained policy from a broken resume (random: ~22).
    assert float(ev.stdout.split("mean ")[1].split(",")[0]) >= 450, ev.stdout


def children_of(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def alive(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_resume_publishes_the_resumed_epsilon_and_new_worker_seeds(tmp_path, tiny):
    runner = make_runner(tmp_path, tiny)
    try:
        state = {**runner.state_dict(), "loop": {"step": 50_000}, "generation": 1}
        runner.load_state_dict(state)
        runner._publish()
        got = runner.store.pull(-1)
        assert got.meta["epsilon"] == pytest.approx(runner.epsilon(50_000))
        assert got.meta["epsilon"] < 0.1  # not eps_start
        assert runner.generation == 1  # start() makes it 2: seeds the first start never used
    finally:
        runner.stop()
        runner.close()


def test_episode_rows_carry_their_own_end_step(tmp_path, tiny):
    result = run(make_runner(tmp_path, tiny, run__total_steps=800), tmp_path)
    rows = [r for r in read_metrics(RunDir(tmp_path / "run").metrics) if r["kind"] == "episode"]
    steps = [int(r["step"]) for r in rows]
    lengths = [int(r["length"]) for r in rows]
    assert steps == list(np.cumsum(lengths)) and steps[-1] == result.env_steps
