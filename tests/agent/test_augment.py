"""Batch augmentation (``dqn.augment``): random shifts of images, mirrored Connect Four
transitions, the generator in checkpoints, and the configs that cannot take it."""

import numpy as np
import pytest
import torch

import shoal
from shoal.agent.augment import SHIFT_PAD, Augment, shift
from shoal.agent.learner import DQN
from shoal.config import DQNConfig
from shoal.envs.connect_four import COLS, ConnectFourEnv
from shoal.errors import ConfigError

pytestmark = pytest.mark.timeout(300)


def test_a_shift_is_a_window_of_the_edge_padded_image_and_each_image_draws_its_own():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (64, 2, 12, 12), dtype=np.uint8)
    out = shift(images, np.random.default_rng(1))
    assert out.dtype == images.dtype and out.shape == images.shape
    pad = SHIFT_PAD
    padded = np.pad(images, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="edge")
    offsets = set()
    for i in range(len(images)):
        found = [
            (dy, dx)
            for dy in range(2 * pad + 1)
            for dx in range(2 * pad + 1)
            if np.array_equal(out[i], padded[i, :, dy : dy + 12, dx : dx + 12])
        ]
        assert found, f"image {i} is no window of its padded self"
        offsets.add(found[0])
    assert len(offsets) > 20  # 81 offsets, drawn per image


def test_shift_moves_flat_obs_and_next_obs_independently_and_keeps_the_rest():
    aug = Augment("shift", 0, image=(2, 12, 12))
    rng = np.random.default_rng(3)
    obs = rng.integers(0, 255, (32, 2 * 12 * 12), dtype=np.uint8)
    sample = {"obs": obs, "next_obs": obs.copy(), "action": np.arange(32), "weights": obs[:, 0]}
    out = aug(sample)
    assert out["obs"].shape == obs.shape and out["obs"].dtype == np.uint8
    assert not np.array_equal(out["obs"], out["next_obs"])  # two draws
    assert out["action"] is sample["action"] and out["weights"] is sample["weights"]
    assert np.array_equal(sample["obs"], sample["next_obs"])  # the sample is left alone


def scripted(columns):
    """An opponent that plays ``columns`` in turn."""
    moves = iter(columns)
    return lambda obs, rng: next(moves)


def test_mirror_matches_the_mirrored_game_board_mask_and_column():
    """Play a game and its mirror image: the augmentation of one's observation is the
    other's, so the board axis, the mask and the column order are the env's."""
    mine, theirs = [0, 0, 0, 6, 1], [0, 0, 0, 5, 2]  # column 0 fills, no four
    a = ConnectFourEnv(opponent=scripted(theirs), learner_first=True)
    b = ConnectFourEnv(opponent=scripted([COLS - 1 - c for c in theirs]), learner_first=True)
    obs_a, _ = a.reset(seed=0)
    obs_b, _ = b.reset(seed=0)
    aug = Augment("mirror", 0, board=a.board_shape, n_actions=COLS, action_mask=True)
    everything = np.ones(1, bool)
    for col in mine:
        obs_a, *_ = a.step(col)
        obs_b, *_ = b.step(COLS - 1 - col)
        assert np.array_equal(aug._mirror_obs(obs_a[None], everything)[0], obs_b)
    assert not np.array_equal(obs_a, obs_b)  # an asymmetric position
    assert obs_a[-COLS:].sum() < COLS  # a full column: the mask is read too


def test_mirror_flips_about_half_the_transitions_whole():
    aug = Augment("mirror", 0, board=(6, 7, 2), n_actions=7, action_mask=True)
    rng = np.random.default_rng(0)
    obs = rng.random((400, 91)).astype(np.float32)
    nxt = rng.random((400, 91)).astype(np.float32)
    action = rng.integers(0, 7, 400)
    out = aug({"obs": obs, "next_obs": nxt, "action": action})
    flipped = out["action"] != action
    same = action == 3  # the middle column is its own mirror
    assert 150 < int(flipped.sum()) + int(same.sum()) // 2 < 250
    every = np.ones(400, bool)
    mirrored = aug._mirror_obs(obs, every)
    mirrored_next = aug._mirror_obs(nxt, every)
    for i in np.flatnonzero(flipped):
        assert out["action"][i] == 6 - action[i]
        assert np.array_equal(out["obs"][i], mirrored[i])
        assert np.array_equal(out["next_obs"][i], mirrored_next[i])
    for i in np.flatnonzero(~flipped & ~same):
        assert np.array_equal(out["obs"][i], obs[i])
    assert np.array_equal(aug._mirror_obs(mirrored, every), obs)  # its own inverse


def test_the_generator_is_in_the_learner_checkpoint():
    def learner():
        torch.manual_seed(0)
        dqn = DQN(2 * 8 * 8, 3, DQNConfig(hidden=[8], encoder="mlp"), device="cpu")
        dqn.augment = Augment("shift", 5, image=(2, 8, 8))
        return dqn

    a, b = learner(), learner()
    obs = np.random.default_rng(0).integers(0, 255, (16, 128), dtype=np.uint8)
    sample = {"obs": obs, "next_obs": obs, "action": np.zeros(16, np.int64)}
    sample |= {"reward": np.zeros(16, np.float32), "discount": np.ones(16, np.float32)}
    a.make_batch(sample)
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.make_batch(sample).obs, b.make_batch(sample).obs)


@pytest.mark.parametrize(
    ("config", "overrides", "message"),
    [
        ("cartpole", ["dqn.augment=shift"], "are not images"),
        ("cartpole", ["dqn.augment=mirror"], "set dqn.board"),
        ("cartpole", ["dqn.augment=mirror", "dqn.board=[1,4,1]"], "2 actions where"),
        ("cartpole", ["dqn.augment=mirror", "run.runner=agents"], "agents runner"),
        ("r2d2", ["dqn.augment=shift"], "makes its own batches"),
    ],
)
def test_configs_that_cannot_augment_are_refused(tmp_path, config, overrides, message):
    with pytest.raises(ConfigError, match=message):
        shoal.train(
            config,
            overrides=[*overrides, "run.total_steps=10", "run.progress=false"],
            run_dir=tmp_path / "run",
        )


def test_a_shifted_run_trains_on_minatar(tmp_path):
    result = shoal.train(
        "minatar-breakout",
        overrides=[
            "dqn.augment=shift",
            "run.total_steps=400",
            "run.learning_starts=100",
            "run.eval_every=400",
            "run.eval_episodes=1",
            "run.progress=false",
        ],
        run_dir=tmp_path / "run",
    )
    assert result.updates > 0
