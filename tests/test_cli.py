"""CLI smoke tests and bad input: one-line error, exit code 2, nothing overwritten."""

import subprocess
import sys

import pytest

from shoal.cli import main
from shoal.run.directory import RunDir

pytestmark = pytest.mark.timeout(120)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def sets(overrides):
    return [x for o in overrides for x in ("--set", o)]


def test_train_eval_plot(tmp_path, tiny, capsys):
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "train", "cartpole", "--run-dir", str(run), *sets(tiny()))
    assert code == 0, err
    assert "eval return" in out
    code, out, _ = run_cli(capsys, "eval", str(run), "--episodes", "3")
    assert code == 0 and out.startswith("3 episodes: mean")
    RunDir(run).curve.unlink()
    code, out, _ = run_cli(capsys, "plot", str(run))
    assert code == 0 and RunDir(run).curve.is_file()


def test_train_any_gymnasium_env_by_id(tmp_path, tiny, capsys):
    code, _, err = run_cli(
        capsys,
        "train",
        "--env",
        "Acrobot-v1",
        "--run-dir",
        str(tmp_path / "a"),
        *sets(tiny(run__total_steps=200, env__max_episode_steps=50)),
    )
    assert code == 0, err
    assert 'id = "Acrobot-v1"' in RunDir(tmp_path / "a").config.read_text()


def test_help_lists_config_keys():
    out = subprocess.run(
        [sys.executable, "-m", "shoal.cli", "train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "dqn.lr" in out and "Adam learning rate" in out and "--resume" in out
    # runners, their own sections and their help come from the registry
    assert "serial, threads, processes" in out
    assert "threads [threads]: One acting thread and K learner threads" in out
    assert "threads.learner_threads" in out and "processes.workers" in out
    assert "selfplay.enabled" in out
    for cmd in ("eval", "plot"):
        assert (
            subprocess.run(
                [sys.executable, "-m", "shoal.cli", cmd, "--help"], capture_output=True
            ).returncode
            == 0
        )


def test_console_script_exit_code_on_bad_input(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "shoal.cli",
            "train",
            "--env",
            "NoSuchEnv-v0",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shoal: error:") and "NoSuchEnv-v0" in lines[0]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--env", "NoSuchEnv-v0"], "NoSuchEnv-v0"),
        (["--env", "Pendulum-v1"], "Discrete"),
        (["cartpole", "--set", "dqn.batch_size=0"], "dqn.batch_size"),
        (["cartpole", "--set", "replay.capacity=-1"], "replay.capacity"),
        (["cartpole", "--set", "run.total_steps=0"], "run.total_steps"),
        (["cartpole", "--set", "dqn.hidden=[0]"], "dqn.hidden"),
        (["cartpole", "--set", "dqn.nope=1"], "dqn.nope"),
        (["cartpole", "--set", "dqn.lr=fast"], "dqn.lr"),
        (["no-such-preset"], "no-such-preset"),
        (["cartpole", "--set", "env.num_envs=0"], "env.num_envs"),
        (["cartpole", "--set", "env.num_envs=-3"], "env.num_envs"),
        (["cartpole", "--set", "env.vector=gpu"], "env.vector"),
        (["cartpole", "--set", "env.vector=envpool", "--env", "shoal/Tally-v0"], "envpool"),
        (["cartpole", "--set", "run.replay_ratio=0"], "run.replay_ratio"),
        (["cartpole", "--set", "run.replay_ratio=-0.5"], "run.replay_ratio"),
        (["harvest", "--set", "env.num_envs=4"], "env.num_envs"),
        (["minatar-breakout", "--set", "env.frame_stack=4"], "env.frame_stack"),
        (["harvest", "--set", "env.frame_stack=4"], "env.frame_stack"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, args, needle):
    out_dir = tmp_path / "runs"
    code, out, err = run_cli(capsys, "train", *args, "--out", str(out_dir))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert not out_dir.exists()


def test_missing_envpool_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "envpool" else real(name, *a)
    )
    out_dir = tmp_path / "runs"
    code, _, err = run_cli(
        capsys, "train", "cartpole", "--set", "env.vector=envpool", "--out", str(out_dir)
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not installed" in err
    assert not out_dir.exists()


def test_atari_without_ale_py_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # import ale_py raises ImportError
    out_dir = tmp_path / "runs"
    code, _, err = run_cli(capsys, "train", "atari", "--env", "ALE/Pong-v5", "--out", str(out_dir))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "ale-py" in err
    assert not out_dir.exists()


def test_argparse_rejects_nonpositive_steps(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "cartpole", "--steps", "-5"])
    assert e.value.code == 2


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["eval", "{run}", "--episodes", "1e12"], "argument --episodes: '1e12' is out of range"),
        (["tune", "cartpole", "--trials", "1e12"], "argument --trials: '1e12' is out of range"),
        (["tune", "cartpole", "--eval-episodes", "1e12"], "--eval-episodes: '1e12' is out of"),
        (["tune", "cartpole", "--hours", "nan"], "argument --hours: expected a finite number"),
        (["tune", "cartpole", "--parallel", "0"], "argument --parallel: '0' is out of range"),
        (["sudoku", "train", "--generate", "1e12"], "--generate: '1e12' is out of range"),
        (["train", "cartpole", "--steps", "1e12"], "'run.total_steps': 1000000000000 is out"),
    ],
)
def test_a_count_past_its_bound_is_one_line_exit_2_and_nothing_is_written(
    tmp_path, capsys, argv, needle
):
    """``shoal eval --episodes 1e12`` ended in a MemoryError; every count a flag takes is
    bounded, and a bad flag is one ``shoal:`` line like a bad key (argparse's usage
    lines are left to --help)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text("")
    before = sorted(tmp_path.rglob("*"))
    argv = [a.format(run=run) for a in argv]
    with pytest.raises(SystemExit) as e:
        code = main([*argv, *(["--out", str(tmp_path / "runs")] if argv[0] == "train" else [])])
        raise SystemExit(code)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("shoal: error: ") and needle in err[0], err
    assert sorted(tmp_path.rglob("*")) == before


def test_malformed_toml(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[dqn]\nlr = = 3\n")
    code, _, err = run_cli(capsys, "train", str(bad), "--out", str(tmp_path / "runs"))
    assert code == 2 and "not valid TOML" in err
    assert not (tmp_path / "runs").exists()


def test_existing_run_dir_is_not_overwritten(tmp_path, tiny, capsys):
    run = tmp_path / "run"
    run.mkdir()
    keep = run / "precious.txt"
    keep.write_text("data")
    code, _, err = run_cli(capsys, "train", "cartpole", "--run-dir", str(run), *sets(tiny()))
    assert code == 2 and "already exists" in err
    assert keep.read_text() == "data" and sorted(p.name for p in run.iterdir()) == ["precious.txt"]


def test_missing_and_corrupt_checkpoints(tmp_path, tiny, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", "cartpole", "--run-dir", str(run), *sets(tiny()))[0] == 0
    ckpt = RunDir(run).checkpoint
    good = ckpt.read_bytes()
    # truncated
    ckpt.write_bytes(good[: len(good) // 2])
    latest = ["eval", str(run), "--checkpoint", "latest"]
    for argv in (latest, ["train", "--resume", str(run), "--no-progress"]):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2 and "corrupt or truncated" in err, err
    assert ckpt.read_bytes() == good[: len(good) // 2]  # nothing overwritten
    # garbage and a foreign pickle
    ckpt.write_bytes(b"not a checkpoint at all")
    assert run_cli(capsys, *latest)[0] == 2
    import torch

    torch.save({"hello": 1}, ckpt)
    code, _, err = run_cli(capsys, *latest)
    assert code == 2 and "not a shoal checkpoint" in err
    # missing
    ckpt.unlink()
    code, _, err = run_cli(capsys, *latest)
    assert code == 2 and "does not exist" in err
    # the best checkpoint is checked the same way, and is what eval reads by default
    best = RunDir(run).best
    assert run_cli(capsys, "eval", str(run))[0] == 0
    best.write_bytes(b"garbage")
    code, _, err = run_cli(capsys, "eval", str(run))
    assert code == 2 and "best.pt" in err and "corrupt or truncated" in err
    # not a run directory at all
    code, _, err = run_cli(capsys, "eval", str(tmp_path / "nowhere"))
    assert code == 2 and "does not exist" in err


def test_resume_rejects_config_with_it(tmp_path, capsys):
    code, _, err = run_cli(capsys, "train", "cartpole", "--resume", str(tmp_path))
    assert code == 2 and "--resume" in err


def test_resume_refuses_another_runner_and_old_checkpoints(tmp_path, tiny, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", "cartpole", "--run-dir", str(run), *sets(tiny()))[0] == 0
    config_before = (run / "config.toml").read_text()
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--runner", "threads")
    assert code == 2 and "cannot resume a run trained by 'serial'" in err
    assert (run / "config.toml").read_text() == config_before  # nothing changed on failure
    import torch

    ckpt = RunDir(run).checkpoint
    torch.save({"format": "shoal-checkpoint-v1", "dqn": {}}, ckpt)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--no-progress")
    assert code == 2 and "older shoal" in err


@pytest.mark.parametrize(
    ("toml", "flags", "expected"),
    [
        ('[run]\nrunner = "ray"\n', [], "ray.actors=3"),
        ('[run]\nrunner = "processes"\n', [], "processes.workers=3"),
        ("", ["--runner", "ray"], "ray.actors=3"),
        ('[run]\nrunner = "processes"\n', ["--set", "run.runner=ray"], "ray.actors=3"),
    ],
)
def test_workers_sets_the_key_of_the_runner_the_run_resolves_to(tmp_path, toml, flags, expected):
    from shoal.cli import _parser, _workers_override

    path = tmp_path / "c.toml"
    path.write_text(toml)
    args = _parser().parse_args(["train", str(path), "--workers", "3", *flags])
    overrides = [f"run.runner={args.runner}"] if args.runner else []
    assert _workers_override(args, [*overrides, *args.overrides]) == expected


def test_workers_for_a_runner_without_workers_is_a_one_line_error(capsys):
    assert main(["train", "cartpole", "--workers", "2", "--steps", "10"]) == 2
    err = capsys.readouterr().err
    assert "--workers: run.runner 'serial' has no workers" in err and len(err.splitlines()) == 1


def test_end_line_shows_the_best_evaluation_beside_the_last(tmp_path, tiny, capsys, monkeypatch):
    from shoal.run.metrics import read_metrics

    run = tmp_path / "run"
    code, out, err = run_cli(
        capsys, "train", "cartpole", "--run-dir", str(run), *sets(tiny(run__eval_every=100))
    )
    assert code == 0, err
    evals = [
        float(r["eval_mean"]) for r in read_metrics(run / "metrics.csv") if r["kind"] == "eval"
    ]
    from shoal.cli import _shown

    if max(evals) != evals[-1]:
        assert f"eval return {_shown(evals[-1])} (best {_shown(max(evals))}, in best.pt)" in out
    else:
        assert f"eval return {_shown(evals[-1])}," in out

    # Whatever this run's evaluations did, both forms of the line.
    from shoal import api
    from shoal.run.loop import TrainResult

    def fake(last: float, best: float | None) -> TrainResult:
        return TrainResult(str(run), last, 5, 1.0, 3, None, None, best)

    for last, best, expected in (
        (10.0, 42.0, "eval return 10.0 (best 42.0, in best.pt), 5 env steps"),
        (10.0, 10.0, "eval return 10.0, 5 env steps"),
        (10.0, None, "eval return 10.0, 5 env steps"),
        (0.87, 0.9, "eval return 0.87 (best 0.90, in best.pt), 5 env steps"),  # not 0.9
    ):
        result = fake(last, best)
        monkeypatch.setattr(api, "train", lambda *a, result=result, **k: result)
        code, out, _ = run_cli(capsys, "train", "cartpole")
        assert code == 0 and expected in out, out


def test_eval_plays_on_the_runs_torch_threads(tmp_path, tiny, capsys, monkeypatch):
    """shoal eval uses the run's run.torch_threads (1 for shoal's small networks), not
    torch's default of every core, and gives the caller's setting back."""
    import torch

    from shoal.runners.serial import SerialRunner

    run = tmp_path / "run"
    assert run_cli(capsys, "train", "cartpole", "--run-dir", str(run), *sets(tiny()))[0] == 0
    seen = []
    real = SerialRunner.evaluate_checkpoint.__func__

    def spy(cls, *args):
        seen.append(torch.get_num_threads())
        return real(cls, *args)

    monkeypatch.setattr(SerialRunner, "evaluate_checkpoint", classmethod(spy))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        code, out, _ = run_cli(capsys, "eval", str(run), "--episodes", "2")
        assert code == 0 and out.startswith("2 episodes")
        assert seen == [1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_an_unknown_namespace_suggests_importing_its_package(capsys):
    code, _, err = run_cli(capsys, "train", "--env", "my_pkg/Mine-v0", "--steps", "10")
    assert code == 2
    assert "Namespace my_pkg not found" in err and "--import my_pkg" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "train", "--env", "NoSuchEnv-v0", "--steps", "10")
    assert code == 2 and "--import" not in err  # a missing id is not a missing package
