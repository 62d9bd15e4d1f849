"""Dict observations train with no wrapper: numeric keys flattened in a fixed order, the
image read by the conv encoder beside them, text left out in one line (or the keys chosen
with ``env.obs_keys``), on every runner; a trained policy acts on the env's own dicts and
refuses NaN; ``load_policy`` checks its device first. MiniGrid trains from the CLI."""

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import shoal
from shoal.agent.builder import transition_fields
from shoal.agent.networks import ImageEncoder
from shoal.cli import main
from shoal.config import EnvConfig
from shoal.envs import dict_obs, make_env, probe_env
from shoal.errors import ConfigError, EnvError, ObservationError
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir

pytestmark = pytest.mark.timeout(300)

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))  # user_code/ is the user's code, beside shoal, not in it

import user_code.dict_env  # noqa: E402, F401  (registers UserCode/DictWorld-v0)

WORLD = "UserCode/DictWorld-v0"
ENV = [f"env.id='{WORLD}'", "env.imports=['user_code.dict_env']"]


def world(**kwargs: object) -> EnvConfig:
    return EnvConfig(id=WORLD, imports=["user_code.dict_env"], **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def told(monkeypatch):
    """A process that has told no env's left-out keys yet."""
    monkeypatch.setattr(dict_obs, "_told", set())


def test_numeric_keys_are_flattened_image_first_in_a_fixed_order(told):
    spec = probe_env(world())
    assert spec.dict_layout.keys == ("image", "direction", "position")  # mission: text
    assert (spec.image, spec.image_high, spec.obs_dim) == ((3, 5, 5), 255.0, 75 + 4 + 2)
    env, raw = make_env(world()), gym.make(WORLD)
    obs, _ = env.reset(seed=4)
    want, _ = raw.reset(seed=4)
    image = np.moveaxis(want["image"], -1, 0).ravel()  # channels first, as the encoder reads
    direction = np.eye(4)[want["direction"]]
    np.testing.assert_allclose(obs, np.concatenate([image, direction, want["position"]]))
    # a float box beside the image: floats in replay, the image's bytes kept exact
    assert obs.dtype == np.float32 and spec.obs_dtype is np.float32
    assert transition_fields(spec)["obs"] == ((81,), np.float32)


def test_all_bytes_stay_bytes_in_replay(told):
    spec = probe_env(world(kwargs={"box_dtype": "uint8"}))
    assert spec.observation_space.dtype == np.uint8 and spec.obs_dtype is np.uint8
    assert transition_fields(spec)["obs"] == ((81,), np.uint8)


def test_text_is_left_out_in_one_line_once(told, capsys):
    probe_env(world())
    probe_env(world())  # a run probes more than once
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("shoal: ") and "'mission' (Text)" in err[0] and WORLD in err[0]


def test_obs_keys_choose_the_keys_and_their_order(told, capsys):
    spec = probe_env(world(obs_keys=["position", "direction"]))
    assert spec.dict_layout.keys == ("position", "direction") and spec.image is None
    assert spec.obs_dim == 6
    spec = probe_env(world(obs_keys=["direction", "image"]))
    assert spec.dict_layout.keys == ("image", "direction") and spec.image == (3, 5, 5)
    assert capsys.readouterr().err == ""  # nothing left out unsaid: the user chose


@pytest.mark.parametrize(
    "keys, needle",
    [
        (["colour"], r"'env.obs_keys\[0\]': 'colour' is not a key of env.id 'UserCode/"),
        (["image", "mission"], r"'env.obs_keys\[1\]': 'mission' is Text, which holds no num"),
        (["image", "image"], r"'env.obs_keys\[1\]': 'image' is listed twice"),
    ],
)
def test_a_wrong_obs_key_is_one_line_naming_it_and_what_is_allowed(keys, needle):
    with pytest.raises(EnvError, match=needle) as e:
        probe_env(world(obs_keys=keys))
    assert "'direction', 'image', 'position'" in str(e.value)  # what is allowed
    assert len(str(e.value).splitlines()) == 1


def test_obs_keys_on_an_env_without_dicts_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "runs"
    code = main(["train", "cartpole", "--set", "env.obs_keys=['image']", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "env.obs_keys" in err[0] and "['image']" in err[0] and "leave it empty" in err[0]
    assert not out.exists()


def test_the_image_encoder_reads_the_image_and_passes_the_rest_unscaled():
    enc = ImageEncoder((3, 5, 5), kind="minatar", high=255.0, extra=6)
    assert enc.width == 16 * 3 * 3 + 6
    image = torch.randint(0, 11, (2, 75), dtype=torch.uint8)
    rest = torch.rand(2, 6)
    out = enc(torch.cat([image.float(), rest], 1))
    torch.testing.assert_close(out[:, -6:], rest)  # 1/high on the image part only
    scaled = ImageEncoder((3, 5, 5), kind="minatar", high=1.0)
    scaled.load_state_dict(enc.state_dict())
    torch.testing.assert_close(out[:, :-6], scaled(image.float() / 255))


RUNNERS = {
    "serial": [],
    "serial/num_envs": ["env.num_envs=2"],
    "serial/shift": ["dqn.augment='shift'"],  # moves the image, not what follows it
    "threads": ["run.runner=threads"],
    "processes": ["run.runner=processes", "processes.workers=2"],
    "ray": ["run.runner=ray", "ray.actors=2", "ray.node_ip_address='127.0.0.2'"],
}


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_dict_env_trains_on_each_runner(runner, tmp_path, tiny):
    overrides = [*ENV, *RUNNERS[runner], *tiny(run__total_steps=400, dqn__batch_size=16)]
    result = shoal.train(overrides=overrides, run_dir=tmp_path / "r")
    assert result.updates > 0 and np.isfinite(result.eval_return)
    online = load_checkpoint(RunDir(tmp_path / "r").checkpoint)["learner"]["online"]
    # conv features of the 5 x 5 image (MinAtar's 3 x 3 conv of 16), then 4 + 2 entries
    assert online["torso.1.weight"].shape == (32, 16 * 3 * 3 + 6)


def test_a_users_network_is_given_the_flat_box(tmp_path, tiny):
    given = []

    def factory(observation_space, action_space):
        given.append(observation_space)
        return nn.Sequential(nn.Linear(observation_space.shape[0], 16), nn.Linear(16, 2))

    shoal.train(
        overrides=[*ENV, *tiny(run__total_steps=300)], run_dir=tmp_path / "r", network=factory
    )
    assert isinstance(given[0], gym.spaces.Box) and given[0].shape == (81,)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A short run on the Dict world: its directory."""
    run = tmp_path_factory.mktemp("dict_run") / "r"
    short = ["run.total_steps=300", "run.learning_starts=100", "run.eval_every=300",
             "run.eval_episodes=2", "dqn.batch_size=16", "dqn.hidden=[32]",
             "run.progress=false", "run.torch_threads=1"]  # fmt: skip
    shoal.train(overrides=[*ENV, *short], run_dir=run)
    return run


def test_policy_acts_on_the_envs_own_dict_as_training_did(trained):
    policy = shoal.load_policy(trained, trust_code=True)
    env, raw = policy.make_env(), gym.make(WORLD)
    for seed in range(5):
        flat, _ = env.reset(seed=seed)
        own, _ = raw.reset(seed=seed)
        assert policy.act(own) == policy.act(flat)
    dicts = [raw.reset(seed=s)[0] for s in range(3)]
    np.testing.assert_array_equal(policy.act(dicts), [policy.act(d) for d in dicts])
    with pytest.raises(ObservationError, match="no key 'direction'"):
        policy.act({k: v for k, v in own.items() if k != "direction"})


def test_policy_refuses_nan_and_inf_in_one_line(trained):
    policy = shoal.load_policy(trained, trust_code=True)
    own, _ = gym.make(WORLD).reset(seed=0)
    own["position"] = np.array([0.5, np.nan], np.float32)
    with pytest.raises(ObservationError, match=r"entry 80 \(key 'position'\) is nan"):
        policy.act(own)
    flat, _ = policy.make_env().reset(seed=0)
    batch = np.stack([flat, flat])
    batch[1, 3] = np.inf
    with pytest.raises(ObservationError, match=r"observation row 1, entry 3 .* is inf; .* finite"):
        policy.act(batch)


def test_policy_on_a_flat_env_refuses_nan_and_dicts(tmp_path, tiny):
    result = shoal.train("cartpole", overrides=tiny(run__total_steps=300), run_dir=tmp_path / "r")
    policy = shoal.load_policy(result.run_dir)
    with pytest.raises(ObservationError, match=r"observation entry 2 is nan; .* \(no NaN or inf\)"):
        policy.act([0.0, 0.0, float("nan"), 0.0])
    with pytest.raises(ObservationError, match="got a dict, and env.id 'CartPole-v1' observes"):
        policy.act({"x": 1})


@pytest.mark.parametrize(
    "device, needle",
    [
        ("gpu0", "load_policy device 'gpu0': not a device torch knows; use 'cpu', or 'cuda'"),
        ("meta", "load_policy device 'meta': shoal runs on 'cpu', or 'cuda'"),
        ("cuda", "load_policy device 'cuda': this machine has no CUDA device"),
        ("cuda:7", "load_policy device 'cuda:7': this machine has"),
    ],
)
def test_load_policy_checks_its_device_before_reading_anything(tmp_path, device, needle):
    if device.startswith("cuda") and torch.cuda.device_count() > (7 if ":" in device else 0):
        pytest.skip("this machine has that CUDA device")
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")) as e:
        shoal.load_policy(tmp_path / "no-such-run", device=device)  # refused before it is read
    assert len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize("env_id", ["MiniGrid-Empty-Random-6x6-v0", "MiniGrid-DoorKey-5x5-v0"])
def test_minigrid_trains_from_the_cli_with_no_wrapper(env_id, tmp_path, capsys):
    minigrid = pytest.importorskip("minigrid")
    out = tmp_path / "runs"
    argv = ["train", "--import", "minigrid", "--env", env_id]
    short = ["run.learning_starts=100", "run.eval_every=300", "run.eval_episodes=2",
             "dqn.batch_size=16", "run.torch_threads=1"]  # fmt: skip
    sets = [x for s in short for x in ("--set", s)]
    assert main([*argv, "--steps", "300", *sets, "--no-progress", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "'mission' (MissionSpace)" in err and "Traceback" not in err
    (run,) = out.iterdir()
    assert {"config.toml", "metrics.csv", "checkpoints"} <= {p.name for p in run.iterdir()}
    online = load_checkpoint(RunDir(run).checkpoint)["learner"]["online"]
    # MinAtar's conv over MiniGrid's 7 x 7 view, then its direction one-hot
    assert online["torso.1.weight"].shape[1] == 16 * 5 * 5 + 4
    # the trained policy acts on the env's own observations, mission text and all
    raw, _ = gym.make(env_id).reset(seed=0)
    assert minigrid is not None and set(raw) == {"image", "direction", "mission"}
    assert shoal.load_policy(run, trust_code=True).act(raw) in range(7)
