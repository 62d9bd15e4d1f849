"""K agents' buffers in one block: still K separate buffers, sampled in one go."""

import numpy as np
import pytest

from shoal.replay import ReplayBuffer, StackedReplay

K, CAP, OBS = 4, 16, 3


def buffers(prioritized: bool) -> list[ReplayBuffer]:
    return [ReplayBuffer(CAP, (OBS,), prioritized=prioritized, seed=10 + k) for k in range(K)]


def fill(bufs: list[ReplayBuffer], rng: np.random.Generator, n: int) -> None:
    for b in bufs:
        for _ in range(int(rng.integers(1, n + 1))):  # a different fill for each agent
            b.add(
                {
                    "obs": rng.normal(size=OBS),
                    "action": int(rng.integers(5)),
                    "reward": float(rng.normal()),
                    "next_obs": rng.normal(size=OBS),
                    "discount": 0.9,
                }
            )


@pytest.mark.parametrize("prioritized", [False, True])
def test_group_draws_what_each_buffer_would_draw_alone(prioritized):
    alone, grouped = buffers(prioritized), buffers(prioritized)
    group = StackedReplay(grouped)
    for round_ in range(30):  # past the ring's wrap-around
        seed = 100 + round_
        fill(alone, np.random.default_rng(seed), 6)
        fill(grouped, np.random.default_rng(seed), 6)
        batch = group.sample(8)
        singles = [b.sample(8) for b in alone]
        for name in ("obs", "action", "reward", "next_obs", "discount", "weights", "indices"):
            np.testing.assert_array_equal(batch[name], np.stack([s[name] for s in singles]))
        td = np.random.default_rng(seed).normal(size=(K, 8))
        group.update_priorities(batch["indices"], td)
        for b, s, t in zip(alone, singles, td):
            b.update_priorities(s["indices"], t)
    assert all(len(b) == CAP for b in grouped)


def test_buffers_stay_separate_and_checkpoints_reach_the_block():
    grouped = buffers(False)
    group = StackedReplay(grouped)
    fill(grouped[:1], np.random.default_rng(0), 3)
    assert [len(b) for b in grouped] == [len(grouped[0]), 0, 0, 0]
    with pytest.raises(ValueError, match="buffer 1 of 4 is empty"):
        group.sample(2)
    fill(grouped, np.random.default_rng(1), 3)
    state = grouped[2].state_dict()
    other = ReplayBuffer(CAP, (OBS,), seed=99)
    fill([other], np.random.default_rng(2), 9)
    grouped[2].load_state_dict(other.state_dict())  # restored in place, into the block
    batch = group.sample(5)
    rows = other.storage.get(batch["indices"][2])
    np.testing.assert_array_equal(batch["obs"][2], rows["obs"])
    grouped[2].load_state_dict(state)
    copied = group.copy()
    for b, c in zip(group.buffers, copied.buffers):  # each in its own group's block
        assert np.shares_memory(c.storage.arrays["obs"], copied.block["obs"])
        assert not np.shares_memory(c.storage.arrays["obs"], group.block["obs"])
        assert len(c) == len(b)
    before = {n: a.copy() for n, a in copied.block.items()}
    np.testing.assert_array_equal(before["obs"], group.block["obs"])
    fill(grouped, np.random.default_rng(3), 3)  # the copy does not see later adds
    assert not np.array_equal(group.block["obs"], before["obs"])
    for name, a in copied.block.items():
        np.testing.assert_array_equal(a, before[name])
    np.testing.assert_array_equal(copied.buffers[2].storage.arrays["obs"], before["obs"][2])


def test_buffers_of_different_layouts_cannot_be_grouped():
    with pytest.raises(ValueError, match="buffer 1 holds 8 items"):
        StackedReplay([ReplayBuffer(CAP, (OBS,)), ReplayBuffer(8, (OBS,))])
    with pytest.raises(ValueError, match="at least one buffer"):
        StackedReplay([])


def test_add_batch_stores_what_add_many_stores():
    rng = np.random.default_rng(5)
    items = [
        {
            "obs": rng.normal(size=OBS),
            "action": int(rng.integers(5)),
            "reward": float(rng.normal()),
            "next_obs": rng.normal(size=OBS),
            "discount": 0.9,
        }
        for _ in range(CAP + 5)  # wraps around
    ]
    one, other = (
        ReplayBuffer(CAP, (OBS,), prioritized=True),
        ReplayBuffer(CAP, (OBS,), prioritized=True),
    )
    priorities = rng.uniform(0.1, 2.0, size=len(items))
    one.add_many(items, priorities=priorities)
    stacked = {name: np.stack([np.asarray(t[name]) for t in items]) for name in items[0]}
    indices = other.add_batch(stacked, priorities=priorities)
    assert indices.tolist() == [i % CAP for i in range(len(items))]
    a, b = one.state_dict(), other.state_dict()
    for name, v in a["storage"]["fields"].items():
        np.testing.assert_array_equal(v, b["storage"]["fields"][name])
    np.testing.assert_array_equal(a["sampler"]["tree"]["values"], b["sampler"]["tree"]["values"])
    with pytest.raises(ValueError, match="priorities"):
        other.add_batch(stacked, priorities=priorities[:-1])
    assert len(other) == CAP
