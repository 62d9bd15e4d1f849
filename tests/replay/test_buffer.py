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


# ------------------------------------------------------------- initial priorities on add


def stored_priorities(buffer: ReplayBuffer, count: int) -> np.ndarray:
    return buffer.sampler.state_dict()["tree"]["values"][:count]


def test_add_with_priority_equals_add_then_update_priorities():
    given = make_buffer(True, alpha=0.7, eps=1e-3, seed=4)
    updated = make_buffer(True, alpha=0.7, eps=1e-3, seed=4)
    priorities = [0.0, 2.5, 0.25, 7.0, 1.0]
    for i, p in enumerate(priorities):
        assert given.add(transition(i), priority=p) == i
        updated.update_priorities(np.array([updated.add(transition(i))]), np.array([p]))
    np.testing.assert_allclose(stored_priorities(given, 5), (np.array(priorities) + 1e-3) ** 0.7)
    assert given.sampler.max_priority == updated.sampler.max_priority == 7.0 + 1e-3
    for _ in range(3):
        a, b = given.sample(8), updated.sample(8)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_add_many_with_priorities_equals_add_many_then_update_priorities():
    given = make_buffer(True, alpha=1.0, seed=2)
    updated = make_buffer(True, alpha=1.0, seed=2)
    items = [transition(i) for i in range(40)]  # wraps the capacity-32 ring
    priorities = np.linspace(0.0, 3.9, 40)
    given.add_many(items, priorities=priorities)
    updated.add_many(items)
    # Slots 0-7 were overwritten by items 32-39, whose priorities win.
    order = np.r_[32:40, 8:32]
    updated.update_priorities(np.arange(32), priorities[order])
    np.testing.assert_array_equal(stored_priorities(given, 32), stored_priorities(updated, 32))
    np.testing.assert_allclose(stored_priorities(given, 32), priorities[order] + 1e-6)
    a, b = given.sample(16), updated.sample(16)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_items_without_priority_still_get_the_max_so_far():
    buffer = make_buffer(True, alpha=1.0, seed=0)
    buffer.add(transition(0), priority=5.0)
    buffer.add(transition(1))  # max priority so far, raised by the given one
    buffer.add_many([transition(2), transition(3)], priorities=None)
    np.testing.assert_allclose(stored_priorities(buffer, 4), 5.0 + 1e-6)


@pytest.mark.parametrize("prioritized", [False, True])
def test_priority_none_changes_nothing(prioritized):
    # The default path must sample bit-identically to a buffer that never saw the argument.
    plain, explicit = make_buffer(prioritized, seed=11), make_buffer(prioritized, seed=11)
    for i in range(20):
        plain.add(transition(i))
        explicit.add(transition(i), priority=None)
    plain.add_many([transition(i) for i in range(20, 30)])
    explicit.add_many([transition(i) for i in range(20, 30)], priorities=None)
    a, b = run_ops(plain, 10, start=50), run_ops(explicit, 10, start=50)
    for x, y in zip(a, b, strict=True):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)


def test_uniform_buffer_accepts_and_ignores_priorities():
    plain, given = make_buffer(False, seed=8), make_buffer(False, seed=8)
    items = [transition(i) for i in range(10)]
    plain.add_many(items)
    given.add_many(items[:9], priorities=np.full(9, 1e6))
    given.add(items[9], priority=0.0)
    a, b = plain.sample(16), given.sample(16)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize(
    ("priority", "message"),
    [
        (-0.5, r"priority must be finite and non-negative .*got -0\.5"),
        (float("nan"), r"priority must be finite and non-negative .*got nan"),
        (np.inf, r"priority must be finite and non-negative .*got inf"),
        ([1.0, 2.0], r"priority must be a single number .*got \[1\.0, 2\.0\]"),
        ("high", r"priority must be a single number .*got 'high'"),
        (object(), r"priority must be a number .*got <object"),
    ],
)
def test_add_rejects_bad_priority_before_storing(prioritized, priority, message):
    buffer = make_buffer(prioritized)
    with pytest.raises(ValueError, match=message):
        buffer.add(transition(0), priority=priority)
    assert len(buffer) == 0


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize(
    ("priorities", "message"),
    [
        ([1.0, 2.0], r"one value per transition \(3\), got shape \(2,\)"),
        ([[1.0, 2.0, 3.0]], r"one value per transition \(3\), got shape \(1, 3\)"),
        (5.0, r"one value per transition \(3\), got shape \(\)"),
        ([1.0, -2.0, 3.0], r"priorities\[1\] must be finite and non-negative .*got -2\.0"),
        ([1.0, 2.0, np.nan], r"priorities\[2\] must be finite and non-negative .*got nan"),
        ([np.inf, 2.0, 3.0], r"priorities\[0\] must be finite and non-negative .*got inf"),
        (["a", "b", "c"], r"priorities must be numbers"),
    ],
)
def test_add_many_rejects_bad_priorities_before_storing(prioritized, priorities, message):
    buffer = make_buffer(prioritized)
    with pytest.raises(ValueError, match=message):
        buffer.add_many([transition(i) for i in range(3)], priorities=priorities)
    assert len(buffer) == 0
    with pytest.raises(ValueError, match=r"one value per transition \(0\), got shape \(1,\)"):
        buffer.add_many([], priorities=[1.0])


# -------------------------------------------------------------------- explicit field specs

SPECS = {
    "frames": ((2, 3), np.uint8),
    "label": ((), np.int64),
    "hidden": ((4,), np.float32),
    "done": ((5,), np.bool_),
}


def spec_item(i: int) -> dict:
    return {
        "frames": np.full((2, 3), i % 256),
        "label": i,
        "hidden": np.full(4, i / 2),
        "done": np.arange(5) < i % 6,
    }


def test_default_constructor_specs_are_the_transition_fields():
    buffer = ReplayBuffer(4, (3,), obs_dtype=np.uint8, action_shape=(2,))
    assert buffer.specs == {
        "obs": ((3,), np.dtype(np.uint8)),
        "action": ((2,), np.dtype(np.int64)),
        "reward": ((), np.dtype(np.float32)),
        "next_obs": ((3,), np.dtype(np.uint8)),
        "discount": ((), np.dtype(np.float32)),
    }


@pytest.mark.parametrize("prioritized", [False, True])
def test_from_specs_stores_and_samples_any_fields(prioritized):
    buffer = ReplayBuffer.from_specs(16, SPECS, prioritized=prioritized, seed=0)
    assert buffer.prioritized is prioritized and buffer.capacity == 16
    assert buffer.specs == {k: (s, np.dtype(d)) for k, (s, d) in SPECS.items()}
    buffer.add_many([spec_item(i) for i in range(10)])
    assert buffer.add(spec_item(10), priority=1.0) == 10
    batch = buffer.sample(32)
    assert set(batch) == set(SPECS) | {"weights", "indices"}
    for key, (shape, dtype) in SPECS.items():
        assert batch[key].shape == (32, *shape) and batch[key].dtype == dtype, key
    for row, index in enumerate(batch["indices"]):
        for key, value in spec_item(int(index)).items():
            np.testing.assert_array_equal(batch[key][row], value, err_msg=key)
    with pytest.raises(KeyError, match=r"missing \['done'\]"):
        buffer.add({k: v for k, v in spec_item(0).items() if k != "done"})


@pytest.mark.parametrize("prioritized", [False, True])
def test_from_specs_state_round_trip(prioritized):
    original = ReplayBuffer.from_specs(16, SPECS, prioritized=prioritized, seed=1)
    original.add_many([spec_item(i) for i in range(20)], priorities=np.arange(20) / 4)
    original.update_priorities(original.sample(4)["indices"], np.ones(4))
    state = pickle.loads(pickle.dumps(original.state_dict()))
    restored = ReplayBuffer.from_specs(16, SPECS, prioritized=prioritized, seed=2)
    restored.load_state_dict(state)
    for _ in range(3):
        a, b = original.sample(8), restored.sample(8)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    other_specs = {**SPECS, "hidden": ((5,), np.float32)}
    other = ReplayBuffer.from_specs(16, other_specs, prioritized=prioritized)
    with pytest.raises(ValueError, match="hidden"):
        other.load_state_dict(state)


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ({}, r"specs must map at least one field"),
        ([("obs", ((3,), np.float32))], r"specs must map at least one field"),
        ({"weights": ((), np.float32)}, r"field name 'weights' is reserved"),
        ({"indices": ((), np.int64)}, r"field name 'indices' is reserved"),
        ({"": ((), np.int64)}, r"field names must be non-empty strings, got ''"),
        ({"obs": (3,)}, r"specs\['obs'\] must be a \(shape, dtype\) pair, got \(3,\)"),
        ({"obs": (3, np.float32)}, r"specs\['obs'\] shape must be a tuple .*got 3"),
        ({"obs": ((3, -1), np.float32)}, r"specs\['obs'\] shape must be a tuple .*got \(3, -1\)"),
        ({"obs": ((2.0,), np.float32)}, r"specs\['obs'\] shape must be a tuple .*got \(2\.0,\)"),
        ({"obs": ((3,), "float77")}, r"specs\['obs'\] dtype 'float77' is not a numpy dtype"),
        ({"obs": ((3,), object)}, r"specs\['obs'\] dtype must be a fixed-size numpy dtype"),
    ],
)
def test_from_specs_names_the_bad_spec(specs, message):
    with pytest.raises(ValueError, match=message):
        ReplayBuffer.from_specs(8, specs)
