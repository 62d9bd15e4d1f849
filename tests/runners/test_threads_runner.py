"""The threads runner: the broken design's race, shoal's fix, agreement with the serial
runner, learner errors, a concurrent replay stress test. What every runner must do is in
test_conformance.py."""

import threading

import numpy as np
import pytest
import torch

import shoal
from shoal.agent.learner import DQN, Batch, Learner
from shoal.config import DQNConfig
from shoal.replay import ReplayBuffer
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir
from shoal.runners.threads import LearnerThreadError
from shoal.sync.locked_replay import LockedReplay
from shoal.sync.rwlock import RWLock

pytestmark = pytest.mark.timeout(180)


def batch(seed=0, n=16):
    rng = np.random.default_rng(seed)
    return Batch.from_numpy(
        {
            "obs": rng.normal(size=(n, 4)).astype(np.float32),
            "action": rng.integers(2, size=n),
            "reward": rng.normal(size=n).astype(np.float32),
            "next_obs": rng.normal(size=(n, 4)).astype(np.float32),
            "discount": np.full(n, 0.9, np.float32),
        },
        "cpu",
    )


def run_interleaved(first, second):
    """Run first() and second() in two threads; second() runs between first()'s forward
    and its backward (first() signals `forward_done`, waits for `step_done`)."""
    forward_done, step_done = threading.Event(), threading.Event()
    out = {}

    def a():
        try:
            out["first"] = first(forward_done, step_done)
        except RuntimeError as e:
            out["error"] = str(e)

    def b():
        forward_done.wait(10)
        second()
        step_done.set()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return out


@pytest.mark.parametrize("fused", [False, True])
def test_broken_design_races_autograd_and_shoal_does_not(fused):
    """The user's design: forward under the read lock, backward + step later under the
    write lock. When another thread's optimizer step lands in between (forced here),
    autograd raises; with a fused Adam (which does not bump tensor versions) it raises
    nothing and silently differentiates at the *new* weights. shoal computes forward and
    backward inside the read lock, so the same interleaving gives the right gradient."""
    torch.manual_seed(0)
    dqn = DQN(4, 2, DQNConfig(hidden=[16]), device="cpu")
    opt = torch.optim.Adam(list(dqn.params.values()), lr=1e-2, fused=fused)
    lock = RWLock(timeout=10)
    reference, _ = dqn.gradients(batch(1))  # the gradient at the weights of the forward

    def other_learner():
        with lock.write():
            opt.zero_grad()
            dqn.loss(dqn.params, dqn.target_params, batch(2))[0].backward()
            opt.step()  # modifies the weights in place

    def broken_learner(forward_done, step_done):
        with lock.read():
            loss, _ = dqn.loss(dqn.params, dqn.target_params, batch(1))
        forward_done.set()
        step_done.wait(10)
        with lock.write():
            opt.zero_grad()
            loss.backward()
            return [p.grad.clone() for p in dqn.params.values()]

    out = run_interleaved(broken_learner, other_learner)
    if not fused:
        assert "modified by an inplace operation" in out["error"]
    else:
        assert "error" not in out
        assert not all(torch.allclose(g, r) for g, r in zip(out["first"], reference))

    def shoal_learner(forward_done, step_done):
        with lock.read():
            grads, _ = dqn.gradients(batch(1))
            expected, _ = dqn.gradients(batch(1))
        forward_done.set()
        step_done.wait(10)
        return grads, expected

    out = run_interleaved(shoal_learner, other_learner)
    grads, expected = out["first"]
    assert all(torch.equal(g, e) for g, e in zip(grads, expected))


def threads_overrides(tiny, **extra):
    return tiny(run__runner="threads", **extra)


def test_lockstep_one_learner_equals_serial(tmp_path, tiny):
    """max_lag=0, one learner, sync every update: the same updates on the same batches as
    the serial runner, so bit-identical parameters and optimizer state."""
    common = dict(run__total_steps=1500, dqn__batch_size=32)
    shoal.train("cartpole", overrides=tiny(**common), run_dir=tmp_path / "serial")
    shoal.train(
        "cartpole",
        overrides=threads_overrides(
            tiny,
            threads__learner_threads=1,
            threads__max_lag=0,
            threads__sync_every=1,
            **common,
        ),
        run_dir=tmp_path / "threads",
    )
    a = load_checkpoint(RunDir(tmp_path / "serial").checkpoint)
    b = load_checkpoint(RunDir(tmp_path / "threads").checkpoint)
    assert a["loop"]["step"] == b["loop"]["step"]
    assert a["learner"]["updates"] == b["learner"]["updates"] > 0
    for k, v in a["learner"]["online"].items():
        assert torch.equal(v, b["learner"]["online"][k]), k
    for k, v in a["learner"]["target"].items():
        assert torch.equal(v, b["learner"]["target"][k]), k


def test_four_learner_threads_four_thousand_updates(tmp_path, tiny):
    result = shoal.train(
        "cartpole",
        overrides=threads_overrides(
            tiny,
            threads__learner_threads=4,
            run__total_steps=1100,
            run__learning_starts=100,
            run__train_freq=1,
            run__gradient_steps=4,
            threads__max_lag=16,
            run__eval_every=100000,
        ),
        run_dir=tmp_path / "r",
    )
    assert result.updates >= 4_000
    rows = [
        r
        for r in shoal.run.metrics.read_metrics(RunDir(tmp_path / "r").metrics)
        if r["kind"] == "tick" and r["staleness_mean"]
    ]
    assert rows and all(float(r["read_wait_ms"]) >= 0 for r in rows)
    assert max(float(r["staleness_max"]) for r in rows) >= 1  # learners really overlapped
    assert threading.active_count() == 1 or all(
        not t.name.startswith("shoal-learner") for t in threading.enumerate()
    )


def test_grad_accumulation_and_prioritized_replay_run(tmp_path, tiny):
    result = shoal.train(
        "cartpole",
        overrides=threads_overrides(
            tiny,
            threads__grad_accum_steps=3,
            replay__prioritized="true",
            threads__sync_every=5,
        ),
        run_dir=tmp_path / "r",
    )
    assert result.updates > 0


def test_learner_error_surfaces_after_final_checkpoint(tmp_path, tiny, monkeypatch):
    calls = {"n": 0}
    original = Learner.apply

    def failing(self, grads):
        calls["n"] += 1
        # Late enough that acting has passed the step-200 checkpoint whatever the learners'
        # lag: a failure writes error.pt, and latest.pt is the periodic one (at the 20th
        # update, ~180 steps, a fast learner failed before it once in a whole-suite run).
        if calls["n"] == 60:
            raise ValueError("boom in a learner")
        return original(self, grads)

    monkeypatch.setattr(Learner, "apply", failing)
    with pytest.raises(LearnerThreadError, match="boom in a learner") as e:
        shoal.train(
            "cartpole",
            overrides=threads_overrides(tiny, run__total_steps=3000),
            run_dir=tmp_path / "r",
        )
    assert isinstance(e.value.__cause__, ValueError)
    assert RunDir(tmp_path / "r").checkpoint.is_file()
    assert not [t for t in threading.enumerate() if t.name.startswith("shoal-learner")]


def test_locked_replay_under_concurrent_add_sample_reprioritize():
    buf = LockedReplay(ReplayBuffer(500, (3,), prioritized=True, seed=0))
    for _ in range(64):
        buf.add(
            {
                "obs": np.zeros(3),
                "action": 0,
                "reward": 0.0,
                "next_obs": np.zeros(3),
                "discount": 0.9,
            }
        )
    errors, stop = [], threading.Event()

    def adder():
        rng = np.random.default_rng(1)
        while not stop.is_set():
            buf.add(
                {
                    "obs": rng.normal(size=3),
                    "action": 1,
                    "reward": 1.0,
                    "next_obs": rng.normal(size=3),
                    "discount": 0.9,
                }
            )

    def learner(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(1500):
                s = buf.sample(16)
                assert (s["weights"] > 0).all() and (s["weights"] <= 1).all()
                assert (s["indices"] < len(buf)).all()
                buf.update_priorities(s["indices"], rng.random(16))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=adder)] + [
        threading.Thread(target=learner, args=(s,)) for s in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads[1:]:
        t.join(60)
    stop.set()
    threads[0].join(10)
    assert not errors
    assert len(buf) == 500
    assert buf.state_dict()["storage"]["size"] == 500
