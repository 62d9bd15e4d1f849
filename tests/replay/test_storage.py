"""RingStorage: wrap-around, batch writes, validation, and state round trips."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.replay import RingStorage

SPECS = {"obs": ((2,), np.float32), "action": ((), np.int64)}


def item(i: int) -> dict:
    return {"obs": np.array([i, -i], dtype=np.float32), "action": i}


def batch(start: int, stop: int) -> dict:
    ids = np.arange(start, stop)
    return {"obs": np.stack([ids, -ids], axis=1).astype(np.float32), "action": ids}


def test_preallocates_one_array_per_field():
    storage = RingStorage(4, SPECS)
    assert storage.capacity == 4 and len(storage) == 0 and storage.cursor == 0
    state = storage.state_dict()
    assert state["fields"]["obs"].shape == (0, 2) and state["fields"]["obs"].dtype == np.float32


def test_add_wraps_around_and_overwrites_oldest():
    storage = RingStorage(3, SPECS)
    assert [storage.add(item(i)) for i in range(5)] == [0, 1, 2, 0, 1]
    assert len(storage) == 3 and storage.cursor == 2
    got = storage.get(np.array([0, 1, 2]))
    np.testing.assert_array_equal(got["action"], [3, 4, 2])
    np.testing.assert_array_equal(got["obs"][:, 1], [-3, -4, -2])


def test_add_batch_wraps_around():
    storage = RingStorage(5, SPECS)
    np.testing.assert_array_equal(storage.add_batch(batch(0, 3)), [0, 1, 2])
    indices = storage.add_batch(batch(3, 7))
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, [3, 4, 0, 1])
    assert len(storage) == 5 and storage.cursor == 2
    np.testing.assert_array_equal(storage.get(np.arange(5))["action"], [5, 6, 2, 3, 4])


@pytest.mark.parametrize(("capacity", "start", "count"), [(3, 0, 7), (4, 1, 9), (5, 2, 5)])
def test_add_batch_equals_adding_one_by_one(capacity, start, count):
    one_by_one, batched = RingStorage(capacity, SPECS), RingStorage(capacity, SPECS)
    for i in range(start):
        one_by_one.add(item(i))
        batched.add(item(i))
    singles = [one_by_one.add(item(i)) for i in range(start, start + count)]
    np.testing.assert_array_equal(batched.add_batch(batch(start, start + count)), singles)
    assert (len(batched), batched.cursor) == (len(one_by_one), one_by_one.cursor)
    everything = np.arange(capacity)
    for name in SPECS:
        np.testing.assert_array_equal(
            batched.get(everything)[name], one_by_one.get(everything)[name]
        )


def test_missing_and_unknown_keys_are_named():
    storage = RingStorage(3, SPECS)
    with pytest.raises(KeyError, match=r"missing \['action'\]"):
        storage.add({"obs": np.zeros(2)})
    with pytest.raises(KeyError, match=r"unknown \['reward'\]"):
        storage.add({**item(0), "reward": 1.0})
    with pytest.raises(KeyError, match=r"missing \['obs'\]"):
        storage.add_batch({"action": np.arange(2)})
    assert len(storage) == 0


def test_wrong_shapes_are_rejected_before_anything_is_written():
    storage = RingStorage(3, SPECS)
    with pytest.raises(ValueError, match="'obs' must have shape"):
        storage.add({"obs": np.zeros(3), "action": 1})
    with pytest.raises(ValueError, match="same leading batch dimension"):
        storage.add_batch({"obs": np.zeros((2, 2)), "action": np.arange(3)})
    with pytest.raises(ValueError, match="'obs' must have shape"):
        storage.add_batch({"obs": np.zeros((2, 3)), "action": np.arange(2)})
    assert len(storage) == 0 and storage.cursor == 0


def test_get_returns_copies_and_rejects_invalid_indices():
    storage = RingStorage(4, SPECS)
    storage.add(item(1))
    storage.add(item(2))
    got = storage.get(np.array([0, 0, 1]))
    np.testing.assert_array_equal(got["action"], [1, 1, 2])
    got["action"][:] = 99
    np.testing.assert_array_equal(storage.get(np.array([0, 1]))["action"], [1, 2])
    with pytest.raises(IndexError, match=r"\[0, 2\)"):
        storage.get(np.array([2]))  # allocated but never written
    with pytest.raises(IndexError):
        storage.get(np.array([-1]))


@pytest.mark.parametrize("capacity", [0, -1])
def test_non_positive_capacity_is_rejected(capacity):
    with pytest.raises(ValueError, match=rf"capacity must be a positive integer .*got {capacity}"):
        RingStorage(capacity, SPECS)


@pytest.mark.parametrize("count", [0, 2, 4, 6])
def test_state_dict_round_trip(count):
    storage = RingStorage(4, SPECS)
    for i in range(count):
        storage.add(item(i))
    state = storage.state_dict()
    assert state["size"] == len(storage) and state["cursor"] == storage.cursor
    assert all(a.shape[0] == len(storage) for a in state["fields"].values())  # valid part only
    restored = RingStorage(4, SPECS)
    restored.add(item(42))  # stale content that the load must replace
    restored.load_state_dict(state)
    assert (len(restored), restored.cursor) == (len(storage), storage.cursor)
    for name, a in restored.state_dict()["fields"].items():
        np.testing.assert_array_equal(a, state["fields"][name])
    # Both continue writing at the same place.
    assert restored.add(item(7)) == storage.add(item(7))


def test_state_dict_is_a_snapshot():
    storage = RingStorage(2, SPECS)
    storage.add(item(1))
    state = storage.state_dict()
    storage.add(item(2))
    storage.add(item(3))
    np.testing.assert_array_equal(state["fields"]["action"], [1])


def test_load_state_dict_reports_mismatches():
    storage = RingStorage(4, SPECS)
    storage.add(item(1))
    state = storage.state_dict()
    with pytest.raises(ValueError, match="capacity 4 does not match .* capacity 5"):
        RingStorage(5, SPECS).load_state_dict(state)
    with pytest.raises(ValueError, match="fields"):
        RingStorage(4, {"obs": ((2,), np.float32)}).load_state_dict(state)
    with pytest.raises(ValueError, match=r"'obs' has shape \(1, 2\), expected \(1, 3\)"):
        RingStorage(4, {**SPECS, "obs": ((3,), np.float32)}).load_state_dict(state)
    with pytest.raises(ValueError, match="'action' has dtype int64, expected int32"):
        RingStorage(4, {**SPECS, "action": ((), np.int32)}).load_state_dict(state)
    with pytest.raises(ValueError, match="cursor 3 must equal size 1"):
        RingStorage(4, SPECS).load_state_dict({**state, "cursor": 3})
    target = RingStorage(4, SPECS)
    target.add(item(9))
    with pytest.raises(ValueError):
        target.load_state_dict({**state, "size": 2})
    # A rejected state leaves the storage as it was.
    np.testing.assert_array_equal(target.get(np.array([0]))["action"], [9])
