"""LockedReplay: the same Replay protocol as the buffer it wraps, priorities included."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

from shoal.replay import Replay, ReplayBuffer, SequenceWriter
from shoal.sync.locked_replay import LockedReplay


def transition(i: int) -> dict:
    return {
        "obs": np.full(3, i, dtype=np.float32),
        "action": i % 4,
        "reward": float(i),
        "next_obs": np.full(3, i + 1, dtype=np.float32),
        "discount": 0.99,
    }


def make(kind: str, prioritized: bool) -> Replay:
    buffer = ReplayBuffer(32, (3,), prioritized=prioritized, alpha=1.0, eps=1e-6, seed=3)
    return LockedReplay(buffer) if kind == "locked" else buffer


def exercise(replay: Replay) -> list[dict]:
    """Use every protocol method the way actors and a learner do; return what was sampled."""
    assert len(replay) == 0
    assert replay.add(transition(0)) == 0
    assert replay.add(transition(1), priority=2.0) == 1
    replay.add_many([transition(i) for i in range(2, 6)])
    replay.add_many([transition(i) for i in range(6, 10)], priorities=[0.5, 1.0, 1.5, 3.0])
    replay.add_many([], priorities=[])
    assert len(replay) == 10
    batches = []
    for step in range(4):
        batch = replay.sample(8)
        batches.append(batch)
        replay.update_priorities(batch["indices"], batch["reward"] - step)
    state = pickle.loads(pickle.dumps(replay.state_dict()))
    batches.append(replay.sample(8))
    replay.load_state_dict(state)
    batches.append(replay.sample(8))  # the same draw again, from the restored state
    for key in batches[-1]:
        np.testing.assert_array_equal(batches[-1][key], batches[-2][key], err_msg=key)
    with pytest.raises(ValueError, match=r"priority must be finite and non-negative .*-1\.0"):
        replay.add(transition(99), priority=-1.0)
    with pytest.raises(ValueError, match=r"one value per transition \(2\)"):
        replay.add_many([transition(98), transition(99)], priorities=[1.0])
    assert len(replay) == 10
    return batches


@pytest.mark.parametrize("kind", ["plain", "locked"])
def test_both_are_replays(kind):
    assert isinstance(make(kind, prioritized=True), Replay)
    assert isinstance(make(kind, prioritized=False), Replay)


@pytest.mark.parametrize("prioritized", [False, True])
def test_locked_replay_behaves_exactly_like_the_buffer(prioritized):
    plain = exercise(make("plain", prioritized))
    locked_replay = make("locked", prioritized)
    locked = exercise(locked_replay)
    for a, b in zip(plain, locked, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    if prioritized:
        values = locked_replay.buffer.sampler.state_dict()["tree"]["values"][:10]
        assert values[1] > 0 and values[6] > 0  # initial priorities went through the lock


def test_locked_replay_holds_sequences():
    writer = SequenceWriter(3, burn_in=2, period=2)
    specs = writer.specs((1,), state_shape=(2,))
    replay = LockedReplay(ReplayBuffer.from_specs(16, specs, prioritized=True, seed=0))
    items = []
    for t in range(6):
        items += writer.append([float(t)], t, 1.0, t == 5, False, np.full(2, float(t)))
    replay.add(items[0], priority=1.0)
    replay.add_many(items[1:], priorities=np.full(len(items) - 1, 0.5))
    assert len(replay) == len(items) == 3
    assert replay.sample(4)["obs"].shape == (4, 6, 1)


@pytest.mark.timeout(60)
def test_concurrent_adds_with_priorities_sampling_and_reprioritizing():
    replay = LockedReplay(ReplayBuffer(64, (3,), prioritized=True, alpha=1.0, seed=0))
    replay.add_many([transition(i) for i in range(8)], priorities=np.ones(8))
    errors: list[BaseException] = []

    def actor(offset: int) -> None:
        try:
            rng = np.random.default_rng(offset)
            for i in range(300):
                if i % 3:
                    replay.add(transition(offset + i), priority=float(rng.random() * 4))
                else:
                    batch = [transition(offset + i + k) for k in range(4)]
                    replay.add_many(batch, priorities=rng.random(4) * 4)
        except BaseException as err:  # surfaced by the main thread's assert
            errors.append(err)

    def learner() -> None:
        try:
            for _ in range(300):
                batch = replay.sample(16)
                replay.update_priorities(batch["indices"], batch["reward"] % 5.0)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=actor, args=(k * 10_000,)) for k in range(3)]
    threads.append(threading.Thread(target=learner))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=50)
    assert not errors and not any(thread.is_alive() for thread in threads)
    assert len(replay) == 64
    # Every slot holds a valid priority: no lost or torn update.
    values = replay.buffer.sampler.state_dict()["tree"]["values"]
    assert np.all(values > 0) and np.isfinite(values).all()
    batch = replay.sample(64)
    assert np.all((batch["weights"] > 0) & (batch["weights"] <= 1))
