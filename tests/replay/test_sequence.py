"""SequenceWriter: exact items on hand-written episodes, streaming vs. a whole-episode
reference, validation, and the round trip through a prioritized ReplayBuffer."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from shoal.replay import ReplayBuffer, SequenceWriter

F, T = False, True


def obs(t: int) -> np.ndarray:
    return np.array([10.0 + t], dtype=np.float32)


def state(t: int) -> np.ndarray:
    """The recurrent state held before acting at step t: distinct per step, never zero."""
    return np.array([t + 0.5, -t - 0.5], dtype=np.float32)


def run_episode(writer, steps, *, end="terminated", final_obs=None, offset=0, keep_next=False):
    """Append steps 0..steps-1 (obs 10+t, action t, reward 100+t); return [(t, item), ...].

    ``end`` is how the last step ends: "terminated", "truncated" or "none" (mid-episode).
    ``keep_next`` gives every step its next_obs, as a gymnasium actor loop would.
    """
    emitted = []
    for t in range(steps):
        last = t == steps - 1
        next_obs = None
        if keep_next:
            next_obs = obs(offset + t + 1)
        if last and final_obs is not None:
            next_obs = final_obs
        out = writer.append(
            obs(offset + t),
            offset + t,
            100.0 + offset + t,
            terminated=last and end == "terminated",
            truncated=last and end == "truncated",
            state=state(offset + t),
            next_obs=next_obs,
        )
        emitted += [(t, item) for item in out]
    return emitted


def check_item(item, *, obs_, action, reward, discount, mask, burn_in, state_step):
    """Compare every field of an item with hand-written values."""
    assert set(item) == {"obs", "action", "reward", "discount", "mask", "burn_in", "state"}
    np.testing.assert_array_equal(item["obs"], np.array(obs_, dtype=np.float32)[:, None])
    np.testing.assert_array_equal(item["action"], action)
    np.testing.assert_array_equal(item["reward"], np.array(reward, dtype=np.float32))
    np.testing.assert_array_equal(item["discount"], np.array(discount, dtype=np.float32))
    np.testing.assert_array_equal(item["mask"], np.array(mask, dtype=bool))
    assert item["burn_in"].shape == () and int(item["burn_in"]) == burn_in
    np.testing.assert_array_equal(item["state"], state(state_step))
    assert item["obs"].dtype == np.float32 and item["action"].dtype == np.int64
    assert item["reward"].dtype == item["discount"].dtype == np.float32
    assert item["mask"].dtype == np.bool_ and item["burn_in"].dtype == np.int64
    assert item["state"].dtype == np.float32


def writer_3_2_2() -> SequenceWriter:
    return SequenceWriter(3, burn_in=2, period=2)


# Every test below uses length=3, burn_in=2, period=2: items hold 5 step slots, slots 0-1 are
# the burn-in prefix and slots 2-4 the training part; obs has a sixth entry to bootstrap from.


def test_terminated_episode_of_five_steps():
    emitted = run_episode(writer_3_2_2(), 5, end="terminated")
    assert [t for t, _ in emitted] == [3, 4]  # item 0 needs obs_3 to bootstrap from
    # Training steps 0-2; no earlier context, so the burn-in prefix is all padding.
    check_item(
        emitted[0][1],
        obs_=[0, 0, 10, 11, 12, 13],
        action=[0, 0, 0, 1, 2],
        reward=[0, 0, 100, 101, 102],
        discount=[0, 0, 1, 1, 1],
        mask=[F, F, T, T, T],
        burn_in=0,
        state_step=0,
    )
    # Training steps 2-4 after burn-in steps 0-1; step 4 terminated: discount 0 and nothing
    # to bootstrap from (no next_obs given: zeros). An item starting at step 4 would train
    # only on step 4, already covered here, so none is emitted.
    check_item(
        emitted[1][1],
        obs_=[10, 11, 12, 13, 14, 0],
        action=[0, 1, 2, 3, 4],
        reward=[100, 101, 102, 103, 104],
        discount=[1, 1, 1, 1, 0],
        mask=[T, T, T, T, T],
        burn_in=2,
        state_step=0,
    )


def test_terminated_episode_of_six_steps_pads_the_end():
    emitted = run_episode(writer_3_2_2(), 6, end="terminated", final_obs=np.array([99.0]))
    assert [t for t, _ in emitted] == [3, 5, 5]
    check_item(
        emitted[0][1],
        obs_=[0, 0, 10, 11, 12, 13],
        action=[0, 0, 0, 1, 2],
        reward=[0, 0, 100, 101, 102],
        discount=[0, 0, 1, 1, 1],
        mask=[F, F, T, T, T],
        burn_in=0,
        state_step=0,
    )
    # Training steps 2-4, bootstrapping from obs_5 (the terminal step is not in it).
    check_item(
        emitted[1][1],
        obs_=[10, 11, 12, 13, 14, 15],
        action=[0, 1, 2, 3, 4],
        reward=[100, 101, 102, 103, 104],
        discount=[1, 1, 1, 1, 1],
        mask=[T, T, T, T, T],
        burn_in=2,
        state_step=0,
    )
    # Burn-in steps 2-3, training steps 4-5 then one padded slot; the state is step 2's.
    # The given final observation is stored after step 5, but discount 0 means it is never
    # bootstrapped from.
    check_item(
        emitted[2][1],
        obs_=[12, 13, 14, 15, 99, 0],
        action=[2, 3, 4, 5, 0],
        reward=[102, 103, 104, 105, 0],
        discount=[1, 1, 1, 0, 0],
        mask=[T, T, T, T, F],
        burn_in=2,
        state_step=2,
    )


def test_truncated_episode_of_seven_steps_bootstraps_from_the_final_obs():
    emitted = run_episode(writer_3_2_2(), 7, end="truncated", final_obs=obs(7))
    assert [t for t, _ in emitted] == [3, 5, 6]
    check_item(
        emitted[0][1],
        obs_=[0, 0, 10, 11, 12, 13],
        action=[0, 0, 0, 1, 2],
        reward=[0, 0, 100, 101, 102],
        discount=[0, 0, 1, 1, 1],
        mask=[F, F, T, T, T],
        burn_in=0,
        state_step=0,
    )
    check_item(
        emitted[1][1],
        obs_=[10, 11, 12, 13, 14, 15],
        action=[0, 1, 2, 3, 4],
        reward=[100, 101, 102, 103, 104],
        discount=[1, 1, 1, 1, 1],
        mask=[T, T, T, T, T],
        burn_in=2,
        state_step=0,
    )
    # Truncation: the last step keeps discount 1 and obs_7 is there to bootstrap from.
    check_item(
        emitted[2][1],
        obs_=[12, 13, 14, 15, 16, 17],
        action=[2, 3, 4, 5, 6],
        reward=[102, 103, 104, 105, 106],
        discount=[1, 1, 1, 1, 1],
        mask=[T, T, T, T, T],
        burn_in=2,
        state_step=2,
    )


def test_truncated_episode_shorter_than_one_item():
    emitted = run_episode(writer_3_2_2(), 2, end="truncated", final_obs=obs(2))
    assert [t for t, _ in emitted] == [1]
    check_item(
        emitted[0][1],
        obs_=[0, 0, 10, 11, 12, 0],
        action=[0, 0, 0, 1, 0],
        reward=[0, 0, 100, 101, 0],
        discount=[0, 0, 1, 1, 0],
        mask=[F, F, T, T, F],
        burn_in=0,
        state_step=0,
    )


def test_terminated_episode_of_one_step():
    emitted = run_episode(writer_3_2_2(), 1, end="terminated")
    assert [t for t, _ in emitted] == [0]
    check_item(
        emitted[0][1],
        obs_=[0, 0, 10, 0, 0, 0],
        action=[0, 0, 0, 0, 0],
        reward=[0, 0, 100, 0, 0],
        discount=[0, 0, 0, 0, 0],  # the one valid step terminated; the mask tells it apart
        mask=[F, F, T, F, F],
        burn_in=0,
        state_step=0,
    )


def test_flush_mid_episode_ends_it_as_a_truncation():
    writer = writer_3_2_2()
    emitted = run_episode(writer, 4, end="none", keep_next=True)
    assert [t for t, _ in emitted] == [3]
    # The last append's next_obs (obs_4) is what the cut episode bootstraps from.
    (item,) = writer.flush()
    check_item(
        item,
        obs_=[10, 11, 12, 13, 14, 0],
        action=[0, 1, 2, 3, 0],
        reward=[100, 101, 102, 103, 0],
        discount=[1, 1, 1, 1, 0],
        mask=[T, T, T, T, F],
        burn_in=2,
        state_step=0,
    )
    assert writer.flush() == []  # nothing pending any more


def test_flush_with_explicit_next_obs_and_without_one():
    writer = writer_3_2_2()
    run_episode(writer, 2, end="none")  # no next_obs given to append
    with pytest.raises(ValueError, match="flush.*next_obs"):
        writer.flush()
    # The failed flush changed nothing: an explicit observation completes it.
    (item,) = writer.flush(np.array([42.0]))
    check_item(
        item,
        obs_=[0, 0, 10, 11, 42, 0],
        action=[0, 0, 0, 1, 0],
        reward=[0, 0, 100, 101, 0],
        discount=[0, 0, 1, 1, 0],
        mask=[F, F, T, T, F],
        burn_in=0,
        state_step=0,
    )
    assert SequenceWriter(2).flush() == []  # a fresh writer has nothing to flush


def test_next_episode_starts_without_context_and_with_its_own_states():
    writer = writer_3_2_2()
    run_episode(writer, 3, end="terminated")
    emitted = run_episode(writer, 4, end="terminated", offset=20)
    # The new episode's first item has no burn-in from the old one; its state is the new
    # episode's first state, not a leftover.
    check_item(
        emitted[0][1],
        obs_=[0, 0, 30, 31, 32, 33],
        action=[0, 0, 20, 21, 22],
        reward=[0, 0, 120, 121, 122],
        discount=[0, 0, 1, 1, 1],
        mask=[F, F, T, T, T],
        burn_in=0,
        state_step=20,
    )
    check_item(
        emitted[1][1],
        obs_=[30, 31, 32, 33, 0, 0],
        action=[20, 21, 22, 23, 0],
        reward=[120, 121, 122, 123, 0],
        discount=[1, 1, 1, 0, 0],
        mask=[T, T, T, T, F],
        burn_in=2,
        state_step=20,
    )


def test_terminated_wins_over_truncated():
    writer = writer_3_2_2()
    writer.append(obs(0), 0, 1.0, False, False, state(0))
    (item,) = writer.append(obs(1), 1, 1.0, terminated=True, truncated=True, state=state(1))
    np.testing.assert_array_equal(item["discount"], [0, 0, 1, 0, 0])


def test_scalar_observations_and_vector_actions():
    writer = SequenceWriter(2, burn_in=1)
    items = []
    for t in range(3):
        action = np.array([t, -t], dtype=np.float32)
        items += writer.append(float(t), action, 0.0, t == 2, False, np.zeros((2, 4)))
    assert [it["obs"].shape for it in items] == [(4,), (4,)]
    assert [it["action"].shape for it in items] == [(3, 2), (3, 2)]
    assert [it["state"].shape for it in items] == [(2, 4), (2, 4)]
    np.testing.assert_array_equal(items[1]["action"][:, 0], [1, 2, 0])


def test_vector_rewards_one_per_agent():
    writer = SequenceWriter(2, burn_in=1)
    items = []
    for t in range(3):
        reward = np.array([t, 10.0 + t, -t], dtype=np.float32)
        items += writer.append(np.zeros(1), t, reward, t == 2, False, np.zeros(2))
    assert [it["reward"].shape for it in items] == [(3, 3), (3, 3)]
    np.testing.assert_array_equal(items[1]["reward"], [[1, 11, -1], [2, 12, -2], [0, 0, 0]])
    assert writer.specs((1,), state_shape=(2,), reward_shape=(3,))["reward"][0] == (3, 3)
    with pytest.raises(ValueError, match="reward must have shape"):
        writer.append(np.zeros(1), 0, np.zeros(2), False, False, np.zeros(2))


# ---------------------------------------------------------------- streaming vs. reference


def reference_items(episode, length, burn_in, period, *, terminated, final_obs):
    """The documented items of a whole episode, computed with the episode known in advance."""
    n, slots = len(episode["action"]), burn_in + length
    starts = [0]
    while starts[-1] + length < n:  # the previous item stops short of the episode's end
        starts.append(starts[-1] + period)
    items = []
    for s in starts:
        b = min(burn_in, s)
        steps = list(range(s - b, min(s + length, n)))
        lo = burn_in - b
        item = {
            "obs": np.zeros((slots + 1, *episode["obs"].shape[1:]), np.float32),
            "action": np.zeros(slots, np.int64),
            "reward": np.zeros(slots, np.float32),
            "discount": np.zeros(slots, np.float32),
            "mask": np.zeros(slots, bool),
            "burn_in": np.array(b),
            "state": episode["state"][s - b],
        }
        for slot, t in enumerate(steps, start=lo):
            item["obs"][slot] = episode["obs"][t]
            item["action"][slot] = episode["action"][t]
            item["reward"][slot] = episode["reward"][t]
            item["discount"][slot] = 0.0 if terminated and t == n - 1 else 1.0
            item["mask"][slot] = True
        after = steps[-1] + 1
        item["obs"][lo + len(steps)] = episode["obs"][after] if after < n else final_obs
        items.append(item)
    return items


@pytest.mark.parametrize(
    ("length", "burn_in", "period"),
    [(3, 2, 2), (1, 0, 1), (4, 0, 4), (2, 5, 1), (5, 3, 2), (4, 4, 3)],
)
def test_streaming_matches_the_whole_episode_reference(length, burn_in, period):
    rng = np.random.default_rng(length * 100 + burn_in * 10 + period)
    writer = SequenceWriter(length, burn_in=burn_in, period=period)
    for episode_index in range(12):
        n = int(rng.integers(1, 15))
        episode = {
            "obs": rng.normal(size=(n, 2)).astype(np.float32),
            "action": rng.integers(0, 5, size=n),
            "reward": rng.normal(size=n).astype(np.float32),
            "state": rng.normal(size=(n, 3)).astype(np.float32),
        }
        final_obs = rng.normal(size=2).astype(np.float32)
        ending = ["terminated", "truncated", "flush"][episode_index % 3]
        got = []
        for t in range(n):
            last = t == n - 1
            got += writer.append(
                episode["obs"][t],
                episode["action"][t],
                episode["reward"][t],
                terminated=last and ending == "terminated",
                truncated=last and ending == "truncated",
                state=episode["state"][t],
                next_obs=final_obs if last else None,
            )
            if not (last and ending != "flush"):
                # Mid-episode, an item is out as soon as the obs after its last step is in.
                assert all(item["mask"][burn_in:].all() for item in got)
        if ending == "flush":
            got += writer.flush()
        want = reference_items(
            episode,
            length,
            burn_in,
            period,
            terminated=ending == "terminated",
            final_obs=final_obs,  # stored even after a termination, never bootstrapped
        )
        assert len(got) == len(want), (n, ending)
        for g, w in zip(got, want, strict=True):
            for key in w:
                np.testing.assert_array_equal(g[key], w[key], err_msg=f"{key} n={n} {ending}")
        # Every step of the episode is trained on, once or (with overlap) more.
        trained = set()
        for g, s in zip(got, range(0, n, period)):
            trained |= {s + i for i in range(length) if g["mask"][burn_in + i]}
        assert trained == set(range(n))


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"length": 0}, r"length must be an integer >= 1, got 0"),
        ({"length": -2}, r"length must be an integer >= 1, got -2"),
        ({"length": 2.5}, r"length must be an integer >= 1, got 2\.5"),
        ({"length": True}, r"length must be an integer >= 1, got True"),
        ({"length": "3"}, r"length must be an integer >= 1, got '3'"),
        ({"length": 3, "burn_in": -1}, r"burn_in must be an integer >= 0, got -1"),
        ({"length": 3, "burn_in": None}, r"burn_in must be an integer >= 0, got None"),
        ({"length": 3, "period": 0}, r"period must be an integer >= 1, got 0"),
        ({"length": 3, "period": 4}, r"period must lie in \[1, length=3\], got 4"),
    ],
)
def test_constructor_names_the_bad_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SequenceWriter(**kwargs)


def test_defaults_and_properties():
    writer = SequenceWriter(80, burn_in=40, period=40)
    assert (writer.length, writer.burn_in, writer.period) == (80, 40, 40)
    assert SequenceWriter(5).period == 5 and SequenceWriter(5).burn_in == 0


def test_append_rejects_changed_shapes_and_missing_truncation_obs_without_recording():
    writer = writer_3_2_2()
    writer.append(obs(0), 0, 1.0, False, False, state(0))
    with pytest.raises(ValueError, match=r"obs must have shape \(1,\).*got \(2,\)"):
        writer.append(np.zeros(2), 1, 1.0, False, False, state(1))
    with pytest.raises(ValueError, match=r"state must have shape \(2,\).*got \(3,\)"):
        writer.append(obs(1), 1, 1.0, False, False, np.zeros(3))
    with pytest.raises(ValueError, match=r"action must have shape \(\).*got \(2,\)"):
        writer.append(obs(1), [1, 2], 1.0, False, False, state(1))
    with pytest.raises(ValueError, match=r"next_obs must have shape \(1,\)"):
        writer.append(obs(1), 1, 1.0, False, True, state(1), next_obs=np.zeros(3))
    with pytest.raises(ValueError, match="next_obs is required when truncated"):
        writer.append(obs(1), 1, 1.0, False, True, state(1))
    with pytest.raises(ValueError, match="state must be a numeric array"):
        SequenceWriter(2).append(obs(0), 0, 1.0, False, False, None)
    # None of the rejected calls was recorded: the episode continues from step 1.
    (item,) = writer.append(obs(1), 1, 101.0, False, True, state(1), next_obs=obs(2))
    np.testing.assert_array_equal(item["action"], [0, 0, 0, 1, 0])
    np.testing.assert_array_equal(item["obs"][:, 0], [0, 0, 10, 11, 12, 0])


def test_appended_arrays_are_copied():
    writer = writer_3_2_2()
    o, s = obs(0), state(0)
    writer.append(o, 0, 1.0, False, False, s)
    o[:] = -1.0
    s[:] = -1.0
    (item,) = writer.append(obs(1), 1, 1.0, True, False, state(1))
    np.testing.assert_array_equal(item["obs"][2], obs(0))
    np.testing.assert_array_equal(item["state"], state(0))


# ------------------------------------------------------------------- through ReplayBuffer


def many_items(writer: SequenceWriter) -> list[dict]:
    items = []
    for n, end in [(5, "terminated"), (7, "truncated"), (2, "truncated"), (6, "terminated")]:
        items += [item for _, item in run_episode(writer, n, end=end, final_obs=obs(n))]
    return items


def test_specs_describe_the_items_exactly():
    writer = writer_3_2_2()
    specs = writer.specs((1,), state_shape=(2,))
    for item in many_items(writer):
        assert set(item) == set(specs)
        for key, (shape, dtype) in specs.items():
            assert item[key].shape == shape and item[key].dtype == dtype, key
    wide = SequenceWriter(80, burn_in=40, period=40).specs(
        (4, 84, 84), state_shape=(2, 512), obs_dtype=np.uint8, action_shape=(3,)
    )
    assert wide["obs"] == ((121, 4, 84, 84), np.dtype(np.uint8))
    assert wide["action"] == ((120, 3), np.dtype(np.int64))
    assert wide["mask"] == ((120,), np.dtype(bool))
    assert wide["state"] == ((2, 512), np.dtype(np.float32))


def sequence_buffer(writer: SequenceWriter, seed: int) -> ReplayBuffer:
    specs = writer.specs((1,), state_shape=(2,))
    return ReplayBuffer.from_specs(64, specs, prioritized=True, alpha=1.0, eps=1e-6, seed=seed)


def test_round_trip_through_a_prioritized_buffer():
    writer = writer_3_2_2()
    items = many_items(writer)
    buffer = sequence_buffer(writer, seed=0)
    priorities = np.arange(len(items), dtype=np.float64) * 0.5
    buffer.add_many(items[:-1], priorities=priorities[:-1])
    assert buffer.add(items[-1], priority=priorities[-1]) == len(items) - 1
    values = buffer.sampler.state_dict()["tree"]["values"][: len(items)]
    np.testing.assert_allclose(values, priorities + 1e-6)
    batch = buffer.sample(32)
    assert not np.any(batch["indices"] == 0)  # priority 0 (+eps) is practically never drawn
    for row, index in enumerate(batch["indices"]):
        for key, value in items[index].items():
            np.testing.assert_array_equal(batch[key][row], value, err_msg=key)


def test_sequence_buffer_state_round_trip():
    writer = writer_3_2_2()
    items = many_items(writer)
    original = sequence_buffer(writer, seed=5)
    original.add_many(items, priorities=np.linspace(0.1, 2.0, len(items)))
    original.update_priorities(original.sample(4)["indices"], np.array([3.0, -1.0, 0.5, 2.0]))
    state = pickle.loads(pickle.dumps(original.state_dict()))
    restored = sequence_buffer(writer, seed=99)
    restored.load_state_dict(state)
    assert len(restored) == len(original) == len(items)
    for _ in range(3):
        a, b = original.sample(8), restored.sample(8)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    transitions = ReplayBuffer(64, (1,), prioritized=True, alpha=1.0, eps=1e-6)
    with pytest.raises(ValueError, match="fields"):
        transitions.load_state_dict(state)
