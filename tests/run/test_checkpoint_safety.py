"""Run artifacts are untrusted input: a checkpoint crafted to run code runs none on any path
that opens one; older checkpoints name the way to convert them; a checkpoint that does not
fit the config is one line; best.pt never gets worse; a failure never replaces latest.pt."""

import io
import os
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import shoal
from shoal.cli import main
from shoal.config import load_config, save_config
from shoal.errors import CheckpointError
from shoal.replay.nstep import BatchNStepWriter
from shoal.run.checkpoint import FORMAT, load_checkpoint, save_checkpoint
from shoal.run.directory import RunDir
from shoal.run.plain_data import from_plain, to_plain

pytestmark = pytest.mark.timeout(300)


class _Payload:
    """Pickles as a call to os.system: unpickling it writes the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _crafted(marker, raw):
    """Bytes of a checkpoint that runs code when unpickled: torch.save's zip form or a raw
    pickle, both looking like a shoal checkpoint around the payload."""
    state = {"format": FORMAT, "config": {}, "loop": {"step": 0}, "eval_mean": 1.0}
    state["learner"] = {"online": {"w": torch.zeros(1)}, "x": _Payload(marker)}
    if raw:
        return pickle.dumps(state)
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _one_error_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("shoal: error: ")


@pytest.mark.parametrize("raw", [False, True], ids=["zip", "raw-pickle"])
@pytest.mark.parametrize("config", ["cartpole", "mapf"])
def test_crafted_checkpoints_run_no_code_anywhere(tmp_path, capsys, raw, config):
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    save_config(load_config(config), run.config)
    marker = tmp_path / "pwned"
    run.checkpoint.parent.mkdir()
    crafted = _crafted(marker, raw)
    for path in (run.best, run.checkpoint):
        path.write_bytes(crafted)
    argvs = [
        ["eval", str(run.path)],
        ["eval", str(run.path), "--checkpoint", "latest"],
        ["train", "--resume", str(run.path), "--no-progress"],
    ]
    if config == "mapf":
        for checkpoint in ("best", "latest"):
            argvs.append(
                ["mapf", "eval", str(run.path), "--agents", "2", "--generate", "--size", "8"]
                + ["--instances", "1", "--checkpoint", checkpoint]
            )
    for argv in argvs:
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and _one_error_line(err), (argv, err)
        assert "shoal upgrade" in err and "--trust" in err, err
    for checkpoint in ("best", "latest"):
        with pytest.raises(CheckpointError, match="not opened"):
            shoal.evaluate_run(run.path, episodes=1, checkpoint=checkpoint)
    assert not marker.exists()
    assert run.checkpoint.read_bytes() == crafted  # nothing overwritten


def test_a_fresh_process_opening_a_crafted_run_runs_nothing(tmp_path):
    """The console entry point as a user runs it, in its own process."""
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    save_config(load_config("cartpole"), run.config)
    marker = tmp_path / "pwned"
    run.best.parent.mkdir()
    run.best.write_bytes(_crafted(marker, raw=False))
    out = subprocess.run(
        [sys.executable, "-m", "shoal.cli", "eval", str(run.path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and _one_error_line(out.stderr), out.stderr
    assert not marker.exists()


def _trained(tmp_path, tiny, capsys, **extra):
    run = tmp_path / "run"
    argv = ["train", "cartpole", "--run-dir", str(run)]
    sets = [x for o in tiny(**extra) for x in ("--set", o)]
    assert main([*argv, *sets]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return RunDir(run)


def test_checkpoints_load_with_the_safe_loader_and_round_trip(tmp_path, tiny, capsys):
    run = _trained(tmp_path, tiny, capsys)
    for path in (run.checkpoint, run.best):
        raw = torch.load(path, weights_only=True)  # no error: tensors and plain data only
        assert raw["format"] == FORMAT
    state = load_checkpoint(run.checkpoint)
    assert isinstance(state["replay"]["storage"]["fields"]["obs"], np.ndarray)
    assert isinstance(state["nstep"], dict)  # the writer's state, not the object


def test_plain_data_round_trips_every_numpy_kind():
    state = {
        "a": np.arange(6, dtype=np.uint32).reshape(2, 3)[:, ::-1],  # negative strides
        "b": np.float32(1.5),
        "c": [np.zeros(0, np.int8), (np.bool_(True), 3, "x", None)],
        "d": np.random.default_rng(0).bit_generator.state,
        "e": np.arange(4.0).astype(">f8"),  # big-endian
    }
    readonly = np.ones(3)
    readonly.flags.writeable = False
    state["f"] = readonly
    buf = io.BytesIO()
    torch.save(to_plain(state), buf)
    buf.seek(0)
    back = from_plain(torch.load(buf, weights_only=True))
    assert back["a"].tolist() == state["a"].tolist() and back["a"].dtype == np.uint32
    assert type(back["b"]) is np.float32 and back["b"] == 1.5
    assert back["c"][0].dtype == np.int8 and back["c"][1] == (True, 3, "x", None)
    assert back["d"] == state["d"]
    assert back["e"].tolist() == [0.0, 1.0, 2.0, 3.0] and back["f"].tolist() == [1.0] * 3
    with pytest.raises(TypeError, match=r"state\['g'\] holds a builtins.object"):
        to_plain({"g": object()})


def _as_v2(path):
    """Rewrite a checkpoint the way shoal-checkpoint-v2 wrote it: numpy arrays and the
    serial runner's n-step writer pickled."""
    state = load_checkpoint(path)
    if "nstep" in state:
        cfg = load_config(None, values=state["config"])
        writer = BatchNStepWriter(cfg.env.num_envs, cfg.dqn.n_step, cfg.dqn.gamma)
        writer.load_state_dict(state["nstep"])
        state["nstep"] = writer
    state["format"] = "shoal-checkpoint-v2"
    torch.save(state, path)


def test_older_checkpoints_name_the_upgrade_and_it_converts_them(tmp_path, tiny, capsys):
    run = _trained(tmp_path, tiny, capsys)
    before = load_checkpoint(run.checkpoint)
    _as_v2(run.checkpoint)
    code = main(["eval", str(run.path), "--checkpoint", "latest"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err) and f"shoal upgrade {run.path} --trust" in err
    assert main(["upgrade", str(run.path)]) == 2  # not without --trust
    assert "--trust" in capsys.readouterr().err
    assert main(["upgrade", str(run.path), "--trust"]) == 0
    out = capsys.readouterr().out
    assert "latest.pt: upgraded" in out and "best.pt: already safe" in out
    after = load_checkpoint(run.checkpoint)
    assert after["loop"] == before["loop"]
    for a, b in zip(
        after["replay"]["storage"]["fields"].values(),
        before["replay"]["storage"]["fields"].values(),
    ):
        assert np.array_equal(a, b)
    assert main(["eval", str(run.path), "--checkpoint", "latest", "--episodes", "2"]) == 0
    result = shoal.train(resume=run.path, overrides=["run.total_steps=800"])
    assert result.env_steps >= 800


@pytest.mark.parametrize(
    "change, match",
    [
        ("dqn.hidden=[7]", "does not fit"),
        ("replay.capacity=777", "does not fit"),
        ("env.id='Acrobot-v1'", "env.id"),
    ],
)
def test_resume_with_a_changed_config_is_one_line_and_overwrites_nothing(
    tmp_path, tiny, capsys, change, match
):
    run = _trained(tmp_path, tiny, capsys)
    latest, config = run.checkpoint.read_bytes(), run.config.read_bytes()
    argv = ["train", "--resume", str(run.path), "--set", "run.total_steps=900", "--set", change]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err) and match in err, err
    assert run.checkpoint.read_bytes() == latest and run.config.read_bytes() == config
    assert not run.error_checkpoint.exists()


@pytest.mark.parametrize("drop", ["loop", "replay", "learner", "format"])
def test_a_checkpoint_missing_fields_is_one_line(tmp_path, tiny, capsys, drop):
    run = _trained(tmp_path, tiny, capsys)
    state = torch.load(run.checkpoint, weights_only=True)
    del state[drop]
    torch.save(state, run.checkpoint)
    code = main(["train", "--resume", str(run.path), "--set", "run.total_steps=900"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err), err


def test_resuming_a_finished_run_says_so(tmp_path, tiny, capsys):
    run = _trained(tmp_path, tiny, capsys)
    latest = run.checkpoint.read_bytes()
    code = main(["train", "--resume", str(run.path)])
    err = capsys.readouterr().err
    assert code == 2 and "already reached run.total_steps = 600" in err and "MORE" in err
    assert run.checkpoint.read_bytes() == latest


def test_best_pt_keeps_its_own_score_across_a_resume(tmp_path, tiny, capsys):
    """A run stopped after an evaluation wrote best.pt and before latest.pt caught up:
    latest.pt's best_eval is older than best.pt's. Resumed, best.pt must not be replaced
    by a worse evaluation."""
    run = _trained(tmp_path, tiny, capsys, run__total_steps=300)
    best = load_checkpoint(run.best, best=True)
    best["eval_mean"] = 1e6  # an evaluation better than anything to come
    best.pop("format")
    save_checkpoint(run.best, best)
    shoal.train(resume=run.path, overrides=["run.total_steps=900"])
    assert load_checkpoint(run.best, best=True)["eval_mean"] == 1e6


def test_a_failure_writes_beside_latest_and_keeps_it(tmp_path, tiny, monkeypatch):
    from shoal.runners.serial import SerialRunner

    original = SerialRunner.learn

    def failing(self, step, new_steps):
        if step >= 450:
            raise RuntimeError("the env broke")
        return original(self, step, new_steps)

    monkeypatch.setattr(SerialRunner, "learn", failing)
    with pytest.raises(RuntimeError, match="the env broke"):
        shoal.train("cartpole", overrides=tiny(), run_dir=tmp_path / "r")
    run = RunDir(tmp_path / "r")
    latest = load_checkpoint(run.checkpoint)["loop"]["step"]
    error = load_checkpoint(run.error_checkpoint)["loop"]["step"]
    assert latest % 200 == 0 or latest < 450  # the periodic one, untouched
    assert error >= 450 > latest
    run.checkpoint.unlink()
    with pytest.raises(CheckpointError, match="only error.pt.*rename it to latest.pt"):
        shoal.train(resume=run.path, overrides=["run.total_steps=900"])


def test_a_full_disk_at_a_checkpoint_is_one_line_and_keeps_the_last_one(
    tmp_path, tiny, capsys, monkeypatch
):
    import errno

    import shoal.run.checkpoint as checkpoint

    run = _trained(tmp_path, tiny, capsys)
    latest = run.checkpoint.read_bytes()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint.torch, "save", full)
    code = main(["train", "--resume", str(run.path), "--set", "run.total_steps=1000"])
    err = capsys.readouterr().err
    assert code == 2 and "no space left" in err and _one_error_line(err), err
    assert run.checkpoint.read_bytes() == latest
    assert not list(run.checkpoint.parent.glob("*.tmp"))


def _set_in_config(run, section, key, value):
    """Edit one key of a run's saved config.toml, as a user would."""
    import tomli_w

    from shoal.config import read_toml

    data = read_toml(run.config)
    data[section][key] = value
    run.config.write_text(tomli_w.dumps(data))


def _misfit_errors(run, capsys):
    """The one-line errors of `shoal eval RUN` and `shoal train --resume RUN`."""
    errors = []
    for argv in (
        ["eval", str(run.path), "--episodes", "2"],
        ["train", "--resume", str(run.path), "--set", "run.total_steps=1200", "--no-progress"],
    ):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and _one_error_line(err), (argv, err)
        errors.append(err)
    return errors


def test_a_changed_network_names_the_parameter_and_both_shapes(tmp_path, tiny, capsys):
    """The message kept only torch's first line ("Error(s) in loading state_dict for
    QNetwork:"), losing the key and the shapes; eval and resume both name them now."""
    run = _trained(tmp_path, tiny, capsys)  # dqn.hidden = [32]
    latest = run.checkpoint.read_bytes()
    _set_in_config(run, "dqn", "hidden", [16])
    eval_err, resume_err = _misfit_errors(run, capsys)
    shapes = "parameter 'torso.0.weight' is (32, 4) in the checkpoint, (16, 4) in the network"
    assert f"checkpoint '{run.best}' does not fit the run's config: {shapes}" in eval_err
    assert f"checkpoint '{run.checkpoint}' does not fit this run's config: {shapes}" in resume_err
    assert run.checkpoint.read_bytes() == latest


def test_a_changed_network_of_stacked_agents_names_the_parameter(tmp_path, tiny, capsys):
    """The agents runner's stacked weights (K, ...): resume copied them with torch's
    broadcast error (no key), eval played them whatever the config said."""
    run = RunDir(tmp_path / "agents")
    over = tiny(
        run__runner="'agents'",
        agents__agents=2,
        agents__max_turns=20,
        dqn__hidden="[16]",
        run__total_steps=400,
        run__eval_every=200,
    )
    over = [o for o in over if not o.startswith("env.max_episode_steps")]
    argv = ["train", "harvest", "--run-dir", str(run.path)]
    assert main([*argv, *[x for o in over for x in ("--set", o)]]) == 0, capsys.readouterr().err
    capsys.readouterr()
    _set_in_config(run, "dqn", "hidden", [8])
    for err in _misfit_errors(run, capsys):
        assert re.search(
            r"does not fit (the|this) run's config: parameter 'torso\.0\.weight' is "
            r"\(2, 16, \d+\) in the checkpoint, \(2, 8, \d+\) in the network",
            err,
        ), err
    _set_in_config(run, "dqn", "hidden", [16])
    _set_in_config(run, "agents", "agents", 3)
    for err in _misfit_errors(run, capsys):
        assert re.search(r"parameter '\S+' is \(2, .*\) in the checkpoint, \(3, .*\) in the", err)


def test_a_changed_mapf_network_names_the_parameter(tmp_path, capsys):
    import shutil
    from pathlib import Path

    run = RunDir(tmp_path / "mapf")
    shutil.copytree(Path(__file__).parents[1] / "mapf" / "data" / "mapf_run", run.path)
    _set_in_config(run, "mapf", "channels", 8)
    argv = ["mapf", "eval", str(run.path), "--agents", "2", "--generate", "--size", "8"]
    code = main([*argv, "--instances", "1"])
    err = capsys.readouterr().err
    assert code == 2 and _one_error_line(err), err
    assert (
        "does not fit the run's MAPF network: parameter 'encoder.0.weight' is (16, 6, 3, 3) in "
        "the checkpoint, (8, 6, 3, 3) in the network (6 more parameters differ)"
    ) in err


def test_weights_of_other_names_say_which_side_lacks_which():
    from torch import nn

    from shoal.agent.networks import load_weights
    from shoal.run.checkpoint import checkpoint_fits

    two = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    three = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2), nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"^the checkpoint's parameter '2.weight' is not in the"):
        load_weights(two, three.state_dict())
    with pytest.raises(ValueError, match=r"^the network's parameter '2.weight' is not in the "):
        load_weights(three, two.state_dict())
    # torch's own error, from a network loaded by load_state_dict, reads the same.
    for net, saved, detail in [
        (three, two, "the network's parameter '2.weight' is not in the checkpoint"),
        (two, nn.Sequential(nn.Linear(4, 5), nn.Linear(5, 2)), "parameter '0.weight' is (5, 4)"),
    ]:
        with pytest.raises(CheckpointError) as e, checkpoint_fits("c.pt", "the run's config"):
            net.load_state_dict(saved.state_dict())
        message = str(e.value)
        assert message.startswith(f"checkpoint 'c.pt' does not fit the run's config: {detail}")
        assert "\n" not in message and "more parameter" in message
