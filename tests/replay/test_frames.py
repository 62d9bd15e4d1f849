"""FrameStorage keeps each frame once and gives back exactly the stacks a whole-stack
storage would: random episodes of interleaved envs, terminations, truncations, n-step
windows, wrap-around, checkpoints and prioritized sampling."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from shoal.agent.builder import transition_fields
from shoal.envs.gym_env import EnvSpec
from shoal.replay import NStepWriter, ReplayBuffer, RingStorage
from shoal.replay.frames import FrameStorage

STACK, SIDE = 4, 6
FRAME = SIDE * SIDE


class RandomFrames(gym.Env):
    """Random grey frames with few distinct values (repeats happen), random episode ends."""

    observation_space = gym.spaces.Box(0, 255, (SIDE, SIDE), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return self._frame(), {}

    def step(self, action: int) -> tuple:
        roll = self.np_random.random()
        return self._frame(), float(action), roll < 0.06, 0.06 <= roll < 0.09, {}

    def _frame(self) -> np.ndarray:
        return self.np_random.integers(0, 3, (SIDE, SIDE), dtype=np.uint8)


def _specs() -> dict:
    """The replay fields of a frame-stacked image env, as the builder makes them."""
    return transition_fields(EnvSpec(STACK * FRAME, 3, image=(STACK, SIDE, SIDE)))


def _stream(seed: int, envs: int, steps: int, n: int):
    """Batches of n-step transitions of ``envs`` frame-stacked envs stepped in turn."""
    rng = np.random.default_rng(seed)
    made = [gym.wrappers.FrameStackObservation(RandomFrames(), STACK) for _ in range(envs)]
    writers = [NStepWriter(n, 0.9) for _ in range(envs)]
    obs = [env.reset(seed=seed * 100 + i)[0].reshape(-1) for i, env in enumerate(made)]
    pending: list[dict] = []
    for _ in range(steps):
        for i, env in enumerate(made):
            action = int(rng.integers(3))
            nxt, r, term, trunc, _ = env.step(action)
            nxt = nxt.reshape(-1)
            pending += writers[i].append(obs[i], action, r, nxt, term, trunc)
            obs[i] = env.reset()[0].reshape(-1) if term or trunc else nxt
        if pending and rng.random() < 0.5:  # batches of random size, envs interleaved
            yield {k: np.stack([t[k] for t in pending]) for k in pending[0]}
            pending = []


def _assert_same(frames: FrameStorage, whole: RingStorage) -> None:
    assert len(frames) == len(whole) and frames.cursor == whole.cursor
    every = np.arange(len(whole))
    got, want = frames.get(every), whole.get(every)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    # the pool holds exactly the distinct frames the items use, each once
    distinct = np.unique(np.concatenate([want["obs"], want["next_obs"]]).reshape(-1, FRAME), axis=0)
    assert frames.frames_held == len(distinct)


@pytest.mark.parametrize("seed,capacity,n", [(0, 50, 3), (1, 7, 1), (2, 200, 5), (3, 3, 3)])
def test_same_items_as_whole_stacks(seed: int, capacity: int, n: int) -> None:
    frames = FrameStorage(capacity, _specs(), STACK)
    whole = RingStorage(capacity, _specs())
    for batch in _stream(seed, envs=3, steps=150, n=n):
        assert np.array_equal(frames.add_batch(batch), whole.add_batch(batch))
        _assert_same(frames, whole)
    assert len(whole) == capacity  # the ring wrapped


def test_frames_are_shared_within_episodes() -> None:
    frames = FrameStorage(1000, _specs(), STACK)
    for batch in _stream(5, envs=2, steps=200, n=3):
        frames.add_batch(batch)
    # about one frame per item (plus episode ends), not 2 x 4 per item
    assert frames.frames_held < 1.3 * len(frames)


def test_batch_larger_than_capacity_and_single_adds() -> None:
    batches = list(_stream(7, envs=4, steps=60, n=2))
    big = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    frames, whole = FrameStorage(10, _specs(), STACK), RingStorage(10, _specs())
    frames.add({k: v[0] for k, v in big.items()})
    whole.add({k: v[0] for k, v in big.items()})
    frames.add_batch(big)
    whole.add_batch(big)
    _assert_same(frames, whole)


def test_state_dict_round_trip_is_compact_and_exact() -> None:
    frames = FrameStorage(40, _specs(), STACK)
    for batch in _stream(11, envs=3, steps=80, n=3):
        frames.add_batch(batch)
    state = frames.state_dict()
    restored = FrameStorage(40, _specs(), STACK)
    restored.load_state_dict(state)
    every = np.arange(len(frames))
    for k, v in frames.get(every).items():
        np.testing.assert_array_equal(restored.get(every)[k], v)
    assert restored.frames_held == frames.frames_held
    # the restored storage goes on like the original
    for batch in _stream(12, envs=2, steps=40, n=3):
        frames.add_batch(batch)
        restored.add_batch(batch)
    for k, v in frames.get(np.arange(len(frames))).items():
        np.testing.assert_array_equal(restored.get(np.arange(len(frames)))[k], v)


def test_rejected_batch_changes_nothing() -> None:
    frames = FrameStorage(5, _specs(), STACK)
    batch = next(_stream(13, envs=2, steps=30, n=1))
    frames.add_batch(batch)
    before = frames.get(np.arange(len(frames)))
    bad = dict(batch, reward=np.zeros((len(batch["obs"]), 2), np.float32))
    with pytest.raises(ValueError, match="'reward'"):
        frames.add_batch(bad)
    with pytest.raises(KeyError, match="missing"):
        frames.add_batch({k: v for k, v in batch.items() if k != "action"})
    after = frames.get(np.arange(len(frames)))
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])


def test_prioritized_buffer_samples_the_same() -> None:
    kw = {"prioritized": True, "seed": 3}
    stacked = ReplayBuffer.from_specs(30, _specs(), frame_stack=STACK, **kw)
    plain = ReplayBuffer.from_specs(30, _specs(), **kw)
    for batch in _stream(17, envs=3, steps=60, n=3):
        stacked.add_batch(batch)
        plain.add_batch(batch)
        a, b = stacked.sample(8), plain.sample(8)
        for k in b:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        td = np.random.default_rng(len(stacked)).random(8)
        stacked.update_priorities(a["indices"], td)
        plain.update_priorities(b["indices"], td)


def test_bad_layout_is_named() -> None:
    with pytest.raises(ValueError, match="'obs' must be flat uint8 of 4 frames"):
        FrameStorage(5, dict(_specs(), obs=((10,), np.uint8)), STACK)


def test_pool_grows_when_items_hold_more_frames_than_headroom() -> None:
    # one-step episodes: every item holds two frames of its own (the reset frame, padded,
    # and the last), past the pool's initial capacity + a quarter
    rng = np.random.default_rng(0)
    first = rng.integers(0, 256, (300, FRAME), dtype=np.uint8)
    last = rng.integers(0, 256, (300, FRAME), dtype=np.uint8)
    batch = {
        "obs": np.tile(first, STACK),
        "action": np.zeros(300, np.int64),
        "reward": np.zeros(300, np.float32),
        "next_obs": np.concatenate([np.tile(first, STACK - 1), last], axis=1),
        "discount": np.zeros(300, np.float32),
    }
    frames, whole = FrameStorage(250, _specs(), STACK), RingStorage(250, _specs())
    for part in (slice(0, 120), slice(120, 300)):
        chunk = {k: v[part] for k, v in batch.items()}
        frames.add_batch(chunk)
        whole.add_batch(chunk)
        _assert_same(frames, whole)
    assert frames.frames_held == 500


def test_a_million_atari_stacks_allocate_no_whole_stacks() -> None:
    # whole stacks would be 2 x 28 GB; frames once: pages are touched only as frames arrive
    atari = ((STACK * 84 * 84,), np.uint8)
    specs = dict(_specs(), obs=atari, next_obs=atari)
    buffer = ReplayBuffer.from_specs(1_000_000, specs, frame_stack=STACK)
    assert isinstance(buffer.storage, FrameStorage) and len(buffer) == 0
