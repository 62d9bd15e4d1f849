"""Runs made elsewhere open here: a run saved by a shoal from before ``config_version``
(``data/v1_cartpole``, trained by shoal at commit 339a7a7) and one made on a GPU
(``data/cuda_cartpole``: ``run.device = "cuda"``, its checkpoints' tensors tagged
``cuda:0`` as a GPU run writes them) evaluate, export, plot, load and resume on a CPU; a
study saved before ``config_version`` resumes; a received ray run's node address and Ray
directory are not kept, and a node address that is not this machine's is one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tomli_w
import tomllib
import torch

import shoal
from shoal.cli import main
from shoal.config import CONFIG_VERSION, load_config, load_run_config
from shoal.errors import ConfigError, ShoalError

pytestmark = pytest.mark.timeout(180)

DATA = Path(__file__).parent / "data"
FIXTURES = ["v1_cartpole", "cuda_cartpole"]


def _copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(DATA / name, tmp_path / name))


def _set_config(run: Path, **keys: object) -> None:
    data = tomllib.loads((run / "config.toml").read_text())
    for name, value in keys.items():
        section, key = name.split("__")
        data.setdefault(section, {})[key] = value
    (run / "config.toml").write_text(tomli_w.dumps(data))


def test_the_fixtures_are_what_they_stand_for():
    """The old run has no config_version and keys renamed since; the GPU run's checkpoint
    does not load on this CPU without mapping its tensors."""
    old = tomllib.loads((DATA / "v1_cartpole" / "config.toml").read_text())
    assert "config_version" not in old and "eps_spread" in old["processes"]
    gpu = tomllib.loads((DATA / "cuda_cartpole" / "config.toml").read_text())
    assert gpu["run"]["device"] == "cuda"
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(DATA / "cuda_cartpole" / "checkpoints" / "best.pt", weights_only=True)


@pytest.mark.parametrize("name", FIXTURES)
def test_a_run_made_elsewhere_evaluates_exports_plots_and_resumes(name, tmp_path, capsys):
    run = _copy(name, tmp_path)
    gpu_line = "was made on a GPU (run.device = 'cuda'); this machine has no CUDA device"
    on_cpu = name == "cuda_cartpole" and not torch.cuda.is_available()
    commands = [
        ["eval", str(run), "--episodes", "2"],
        ["export", str(run), "--out", str(tmp_path / "p.pt")],
        ["plot", str(run)],
        ["train", "--resume", str(run), "--set", "run.total_steps=500", "--no-progress"],
    ]
    for argv in commands:
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        err = capsys.readouterr().err
        if on_cpu and argv[0] != "plot":
            assert err.count(gpu_line) == 1, err
        else:
            assert "error" not in err, err
    assert (tmp_path / "p.pt").is_file() and (run / "curve.png").is_file()
    policy = shoal.load_policy(run)
    obs, _ = policy.make_env().reset(seed=0)
    assert policy.act(obs) in (0, 1)


def test_an_old_config_reads_as_version_1(tmp_path):
    """A saved config without config_version is version 1: its renamed keys move, its
    unread ones go (a file the user writes is today's: the same key is an error there)."""
    run = _copy("v1_cartpole", tmp_path)
    _set_config(run, ray__eps_alpha=3.0, run__runner="ray")
    cfg = load_run_config(run / "config.toml")
    assert cfg.explore.spread == 3.0
    with pytest.raises(ConfigError, match="is now 'explore.spread'"):
        load_config(run / "config.toml")


def test_a_study_saved_before_config_version_resumes(tmp_path):
    from shoal.tune import SearchSpace, TuneSettings
    from shoal.tune.study import _read_study, _write_study_file

    study = tmp_path / "study"
    base = load_config("cartpole")
    space = SearchSpace.build(base, {"space": {"dqn": {"lr": {"low": 1e-4, "high": 1e-2}}}})
    study.mkdir()
    _write_study_file(study, base, space, TuneSettings(trials=1))
    data = tomllib.loads((study / "study.toml").read_text())
    assert data["config"].pop("config_version") == CONFIG_VERSION
    data["config"]["processes"]["eps_spread"] = 0.0  # as a study of that time wrote it
    (study / "study.toml").write_text(tomli_w.dumps(data))
    got, _, _ = _read_study(study)
    assert got.explore.spread is None and got.dqn.lr == base.dqn.lr


def test_extends_in_a_saved_config_is_refused_and_nothing_is_copied(tmp_path, capsys):
    """A received run's config.toml may not extend another file (it could name any file
    on disk, and a resume would copy its keys into the run)."""
    run = _copy("v1_cartpole", tmp_path)
    (tmp_path / "elsewhere.toml").write_text('[run]\nname = "copied"\n')
    data = tomllib.loads((run / "config.toml").read_text())
    data = {"extends": "../elsewhere.toml", **data}
    (run / "config.toml").write_text(tomli_w.dumps(data))
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    argv = ["train", "--resume", str(run), "--set", "run.total_steps=500", "--no-progress"]
    for command in (argv, ["eval", str(run), "--episodes", "2"], ["plot", str(run)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "'extends'" in err[0] and "saved config" in err[0], err
    assert before == {p: p.read_bytes() for p in before}  # (the run's lock file is new)


def test_a_received_ray_run_keeps_neither_node_address_nor_ray_directory(
    tmp_path, capsys, monkeypatch
):
    """Resumed, a ray run drops the node address and the Ray directory its config names
    (another machine's), said in one line; given again with --set, a node address that is
    not this machine's is one line before Ray starts."""
    from shoal.runners.ray.runner import RayRunner

    run = _copy("v1_cartpole", tmp_path)
    _set_config(run, run__runner="ray", ray__node_ip_address="10.255.255.1", ray__temp_dir="/tmp/x")
    used = []
    check = RayRunner.check

    def record(cfg):
        used.append((cfg.ray.node_ip_address, cfg.ray.temp_dir))
        check(cfg)
        raise ShoalError("stopped by the test")

    monkeypatch.setattr(RayRunner, "check", staticmethod(record))
    argv = ["train", "--resume", str(run), "--set", "run.total_steps=500", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "ray.node_ip_address = '10.255.255.1' and ray.temp_dir = '/tmp/x'" in err, err
    assert used == [(None, None)]
    assert main([*argv, "--set", "ray.node_ip_address='10.255.255.1'"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "'ray.node_ip_address': '10.255.255.1' is not an address of this machine" in err[-1]
    assert len(used) == 2 and used[-1][0] == "10.255.255.1"


def test_a_node_address_of_this_machine_passes():
    from shoal.runners.ray.address import check_node_address

    check_node_address("127.0.0.1")
    check_node_address(None)
    with pytest.raises(ConfigError, match="not an address of this machine"):
        check_node_address("no-such-host.invalid")
