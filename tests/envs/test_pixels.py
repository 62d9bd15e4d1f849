"""Image observations: MinAtar through gymnasium channels first, the image encoders, and
one-line errors for what cannot work."""

import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import shoal
from shoal.agent.networks import ImageEncoder, image_encoder, make_q_network
from shoal.config import DQNConfig, EnvConfig
from shoal.envs import make_env, probe_env
from shoal.errors import ConfigError, EnvError

BREAKOUT = "MinAtar/Breakout-v1"


def test_minatar_frames_come_channels_first_as_bytes():
    spec = probe_env(EnvConfig(id=BREAKOUT))
    assert (spec.image, spec.image_high, spec.obs_dim, spec.n_actions) == ((4, 10, 10), 1.0, 400, 3)
    env, raw = make_env(EnvConfig(id=BREAKOUT)), gym.make(BREAKOUT)
    obs, _ = env.reset(seed=3)
    want, _ = raw.reset(seed=3)
    for action in [0, 1, 2, 2, 1, 0, 0, 2]:
        assert obs.dtype == np.uint8
        np.testing.assert_array_equal(obs.reshape(4, 10, 10), np.moveaxis(want, -1, 0))
        obs, *_ = env.step(action)
        want, *_ = raw.step(action)


def test_flat_observations_are_no_image():
    assert probe_env(EnvConfig(id="CartPole-v1")).image is None


def test_a_minatar_id_without_the_package_is_a_one_line_error(monkeypatch):
    monkeypatch.delitem(gym.registry, "MinAtar/Asterix-v1", raising=False)
    monkeypatch.setitem(sys.modules, "minatar.gym", None)  # import fails
    with pytest.raises(EnvError, match=r"'MinAtar/Asterix-v1': MinAtar's games need the minatar"):
        make_env(EnvConfig(id="MinAtar/Asterix-v1"))


@pytest.mark.parametrize(
    "kind, shape, width",
    [
        ("minatar", (4, 10, 10), 16 * 8 * 8),
        ("nature", (4, 84, 84), 64 * 7 * 7),
        ("der", (4, 84, 84), 64 * 3 * 3),
    ],
)
def test_the_encoders_have_their_papers_shapes(kind, shape, width):
    enc = ImageEncoder(shape, kind=kind, high=255.0)
    assert enc.width == width
    frames = torch.randint(0, 256, (2, int(np.prod(shape))), dtype=torch.uint8)
    # bytes in, scaled on the device: the same as the [0, 1] floats
    scaled = ImageEncoder(shape, kind=kind, high=1.0)
    scaled.load_state_dict(enc.state_dict())
    torch.testing.assert_close(enc(frames), scaled(frames.float() / 255))


def test_every_image_encoder_the_config_allows_has_layers():
    from shoal.config import ENCODERS

    for kind in set(ENCODERS) - {"auto", "mlp"}:
        assert ImageEncoder((4, 84, 84), kind=kind).width > 0


def test_the_encoder_follows_the_observations():
    assert image_encoder("auto", None) is None
    assert image_encoder("auto", (4, 10, 10)) == "minatar"
    assert image_encoder("auto", (4, 84, 84)) == "nature"
    assert image_encoder("mlp", (4, 84, 84)) is None
    with pytest.raises(ConfigError, match=r"'nature' needs images at least 36 x 36; .* 10 x 10"):
        image_encoder("nature", (4, 10, 10))
    assert image_encoder("der", (4, 25, 25)) == "der"
    with pytest.raises(ConfigError, match=r"'der' needs images at least 25 x 25; .* 24 x 24"):
        image_encoder("der", (4, 24, 24))
    with pytest.raises(ConfigError, match=r"'minatar' reads images, .* flat vectors"):
        image_encoder("minatar", None)


def test_a_q_network_on_frames_reads_them_with_convolutions():
    net = make_q_network(DQNConfig(hidden=[32]), 400, 3, image=(4, 10, 10))
    assert any(isinstance(m, ImageEncoder) for m in net.torso)
    assert not net.stackable
    assert net(torch.zeros(5, 400, dtype=torch.uint8)).shape == (5, 3)


def test_the_cli_rejects_an_encoder_the_frames_cannot_take(tmp_path, capsys):
    from shoal.cli import main

    argv = ["train", "minatar-breakout", "--set", "dqn.encoder='nature'", "--out", tmp_path]
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'nature' needs images at least 36 x 36" in err
    assert list(tmp_path.iterdir()) == []  # rejected before any work


def test_replay_keeps_frames_as_bytes_and_the_learner_takes_them():
    from shoal.agent.builder import build_replay, transition_fields
    from shoal.agent.losses import Batch
    from shoal.config import load_config
    from shoal.recipes.dqn import DQNRecipe

    cfg = load_config("minatar-breakout", overrides=["replay.capacity=64", "dqn.batch_size=8"])
    spec = probe_env(cfg.env)
    assert transition_fields(spec)["obs"] == ((400,), np.uint8)
    replay, learner = build_replay(cfg, spec), DQNRecipe().make_learner(cfg, spec)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 2, (16, 400), dtype=np.uint8)
    replay.add_batch(
        {
            "obs": frames,
            "action": rng.integers(0, 3, 16),
            "reward": np.ones(16),
            "next_obs": frames[::-1],
            "discount": np.full(16, 0.9),
        }
    )
    batch = Batch.from_numpy(replay.sample(8), "cpu")
    assert batch.obs.dtype == torch.uint8
    assert np.isfinite(learner.step(batch).loss)


@pytest.mark.timeout(120)
def test_the_asterix_preset_trains_a_short_run(tmp_path):
    """minatar-asterix's own learning rule (one env, 1-step, an update per frame) through
    the serial runner: updates happen and the run ends with its checkpoints."""
    steps = ["run.total_steps=400", "run.learning_starts=100", "run.eval_every=400"]
    overrides = [*steps, "run.eval_episodes=1", "run.progress=false"]
    result = shoal.train("minatar-asterix", overrides=overrides, run_dir=tmp_path / "run")
    assert (tmp_path / "run" / "checkpoints" / "best.pt").is_file()
    assert result.updates >= 300
