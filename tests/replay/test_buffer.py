"""ReplayBuffer: the storage × sampler wiring, n-step input, and exact resume from state."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from shoal.replay import NStepWriter, ReplayBuffer

OBS_SHAPE = (3,)


def transition(i: int) -> dict:
    return {
        "obs": np.full(OBS_SHAPE, i, dtype=np.float32),
        "action": i % 4,
        "reward": float(i),
        "next_obs": np.full(OBS_SHAPE, i + 1, dtype=np.float32),
        "discount": 0.99,
    }


def make_buffer(prioritized: bool, **kwargs) -> ReplayBuffer:
    return ReplayBuffer(32, OBS_SHAPE, prioritized=prioritized, beta_steps=20, **kwargs)


@pytest.mark.parametrize("prioritized", [False, True])
def test_sample_returns_all_fields_with_expected_dtypes(prioritized):
    buffer = make_buffer(prioritized, seed=0)
    assert buffer.prioritized is prioritized
    for i in range(10):
        assert buffer.add(transition(i)) == i
    assert len(buffer) == 10
    batch = buffer.sample(64)  # larger than the buffer: sampling is with replacement
    assert set(batch) == {"obs", "action", "reward", "next_obs", "discount", "weights", "indices"}
    dtypes = {k: v.dtype for k, v in batch.items()}
    assert dtypes == {
        "obs": np.float32,
        "action": np.int64,
        "reward": np.float32,
        "next_obs": np.float32,
        "discount": np.float32,
        "weights": np.float32,
        "indices": np.int64,
    }
    assert batch["obs"].shape == (64, *OBS_SHAPE)
    # Every field of a row comes from the same stored transition.
    np.testing.assert_array_equal(batch["obs"][:, 0], batch["indices"])
    np.testing.assert_array_equal(batch["reward"], batch["indices"])
    np.testing.assert_array_equal(batch["next_obs"][:, 0], batch["indices"] + 1)
    assert np.all((batch["weights"] > 0) & (batch["weights"] <= 1))


@pytest.mark.parametrize("prioritized", [False, True])
def test_sample_rejects_empty_buffer_and_bad_batch_size(prioritized):
    buffer = make_buffer(prioritized)
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(4)
    buffer.add(transition(0))
    for bad in (0, -2):
        with pytest.raises(ValueError, match=f"batch_size .*got {bad}"):
            buffer.sample(bad)


@pytest.mark.parametrize("prioritized", [False, True])
def test_add_many_matches_add(prioritized):
    one, many = make_buffer(prioritized, seed=3), make_buffer(prioritized, seed=3)
    items = [transition(i) for i in range(40)]  # wraps the capacity-32 ring
    for t in items:
        one.add(t)
    many.add_many(items[:5])
    many.add_many([])
    many.add_many(items[5:])
    assert len(one) == len(many) == 32
    for _ in range(3):
        a, b = one.sample(16), many.sample(16)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


def test_add_many_names_the_bad_transition():
    buffer = make_buffer(False)
    bad = dict(transition(1))
    del bad["discount"]
    with pytest.raises(KeyError, match=r"transition 1 .*missing \['discount'\]"):
        buffer.add_many([transition(0), bad])
    assert len(buffer) == 0


def test_update_priorities_uses_absolute_td_errors():
    buffer = make_buffer(True, alpha=1.0, beta=1.0, beta_final=1.0, eps=1e-6, seed=0)
    buffer.add_many([transition(i) for i in range(4)])
    buffer.update_priorities(np.array([0, 1, 2, 3]), np.array([-3.0, 1.0, -1.0, 1.0]))
    values = buffer.sampler.state_dict()["tree"]["values"][:4]
    np.testing.assert_allclose(values, np.array([3.0, 1.0, 1.0, 1.0]) + 1e-6)
    batch = buffer.sample(6)
    # Item 0 holds half the total priority, so stratified sampling gives it half the batch.
    assert np.count_nonzero(batch["indices"] == 0) == 3


def test_uniform_update_priorities_is_a_no_op():
    buffer = make_buffer(False, seed=0)
    buffer.add_many([transition(i) for i in range(8)])
    buffer.update_priorities(np.arange(8), np.full(8, np.nan))  # ignored, not validated
    np.testing.assert_array_equal(buffer.sample(5)["weights"], 1.0)


def test_nstep_writer_output_goes_straight_into_the_buffer():
    writer, buffer = NStepWriter(n=3, gamma=0.9), make_buffer(False, seed=0)
    for t in range(6):
        obs, next_obs = np.full(OBS_SHAPE, t), np.full(OBS_SHAPE, t + 1)
        buffer.add_many(writer.append(obs, 1, 1.0, next_obs, terminated=t == 5, truncated=False))
    assert len(buffer) == 6
    batch = buffer.sample(64)
    starts = batch["obs"][:, 0].astype(int)
    np.testing.assert_array_equal(batch["next_obs"][:, 0], np.minimum(starts + 3, 6))
    expected_discount = np.where(starts + 3 < 6, np.float32(0.9**3), 0.0)
    np.testing.assert_allclose(batch["discount"], expected_discount, rtol=1e-6)


def run_ops(buffer: ReplayBuffer, steps: int, start: int) -> list[dict]:
    """Interleave sampling, priority updates and adds, as a training loop does."""
    samples = []
    for step in range(steps):
        batch = buffer.sample(8)
        samples.append(batch)
        td = batch["reward"] - 0.5 * batch["indices"] + step  # deterministic, sample-dependent
        buffer.update_priorities(batch["indices"], td)
        buffer.add(transition(start + step))
    return samples


@pytest.mark.parametrize("prioritized", [False, True])
def test_state_round_trip_gives_identical_future_samples(prioritized):
    original = make_buffer(prioritized, seed=123)
    original.add_many([transition(i) for i in range(20)])
    run_ops(original, 5, start=100)  # move the rng, priorities and beta off their defaults

    # Through pickle: the state must be plain data that survives a checkpoint file.
    state = pickle.loads(pickle.dumps(original.state_dict()))
    restored = make_buffer(prioritized, seed=999)  # a different seed must not matter
    restored.add_many([transition(-i) for i in range(3)])  # nor stale content
    restored.load_state_dict(state)
    assert len(restored) == len(original)

    # 30 more steps wrap the ring, so overwrites are covered too.
    expected, actual = run_ops(original, 30, start=200), run_ops(restored, 30, start=200)
    for a, b in zip(expected, actual, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("prioritized", [False, True])
def test_state_of_the_other_kind_is_rejected_and_buffer_unchanged(prioritized):
    source = make_buffer(not prioritized, seed=0)
    source.add_many([transition(i) for i in range(5)])
    target = make_buffer(prioritized, seed=0)
    target.add(transition(7))
    with pytest.raises(ValueError, match="sampler state"):
        target.load_state_dict(source.state_dict())
    assert len(target) == 1


def test_rejected_storage_state_leaves_sampler_unchanged():
    source = make_buffer(True, seed=0)
    source.add_many([transition(i) for i in range(5)])
    source.update_priorities(np.arange(5), np.full(5, 50.0))
    state = source.state_dict()
    state["storage"]["fields"]["obs"] = state["storage"]["fields"]["obs"].astype(np.float64)
    target = make_buffer(True, seed=0)
    before = target.sampler.state_dict()
    with pytest.raises(ValueError, match="dtype"):
        target.load_state_dict(state)
    after = target.sampler.state_dict()
    assert after["max_priority"] == before["max_priority"] == 1.0
    np.testing.assert_array_equal(after["tree"]["values"], before["tree"]["values"])
