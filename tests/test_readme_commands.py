"""The README's set-up and Quick start commands, run as written in a fresh directory with
this venv's ``shoal``: as close as CI comes to a newcomer's first minutes. Training is
cut to a few hundred steps by keys appended to each command (the last value of a key
wins), a resume included (a resume to the README's 100,000 steps took minutes, and failed
its timeout on a loaded machine), placeholder run directories become the first run's, and
``make`` targets are checked without running them (CI's own ``make test`` is this
suite)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SHORT = [
    "--set", "run.total_steps=300", "--set", "run.learning_starts=100",
    "--set", "run.eval_every=300", "--set", "run.eval_episodes=2",
    "--set", "run.stop_return=none", "--no-progress",
]  # fmt: skip
PLACEHOLDER = re.compile(r"runs/[\w-]+-\d{8}-\d{6}")


def first_minutes_commands() -> list[str]:
    """The commands of the bash blocks from "Set-up" to "Which scheme?", comments cut."""
    part = README[README.index("## Set-up") : README.index("## Which scheme?")]
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", part, flags=re.S):
        for line in block.splitlines():
            command = shlex.join(shlex.split(line, comments=True))
            if command:
                lines.append(command)
    return lines


def shoal_argv(command: str, run_dir: str | None) -> list[str]:
    """``command`` (a ``shoal ...`` line) as argv for this venv's shoal, cut short."""
    words = shlex.split(PLACEHOLDER.sub(run_dir or "<no run yet>", command))
    words[0] = str(Path(sys.executable).parent / "shoal")
    action = words[1]
    if action == "train" and "--resume" in words:  # on from the first run's 300 steps
        return [*words, "--set", "run.total_steps=600", "--no-progress"]
    if action == "train":
        extra = ["--steps", "300"] if "--steps" in words else []
        return [*words, *SHORT, *extra]
    if action == "eval":
        return [*words, "--episodes", "2"]
    return words


def test_the_first_minutes_commands_run_as_written(tmp_path):
    commands = first_minutes_commands()
    assert commands[:2] == ["make demo", "make test"]
    assert any(c.startswith("source .venv/bin/activate") for c in commands)
    (tmp_path / "my_config.toml").write_text('extends = "cartpole"\n')
    run_dir = None
    for command in commands:
        if command.startswith("make "):  # the target exists and says what it runs
            target = command.split()[1]
            dry = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True)
            runs = {"demo": b"shoal train", "test": b"pytest"}[target]
            assert dry.returncode == 0 and runs in dry.stdout, (command, dry.stdout)
            continue
        if command.startswith("source "):
            assert (Path(sys.prefix) / "bin" / "activate").is_file()
            continue
        assert command.split()[0] in ("shoal", ".venv/bin/shoal"), command
        argv = shoal_argv(command.replace(".venv/bin/shoal", "shoal"), run_dir)
        out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, f"{command}\n{out.stderr[-2000:]}"
        if run_dir is None and argv[1] == "train":
            run_dir = str(next((tmp_path / "runs").iterdir()))


pytestmark = pytest.mark.timeout(600)


def test_the_extras_the_readme_lists_are_what_make_installs():
    """The set-up paragraph names the extras ``make setup`` installs (``EXTRAS``)."""
    makefile = (ROOT / "Makefile").read_text()
    extras = re.search(r"^EXTRAS \?= (.+)$", makefile, flags=re.M)
    assert extras is not None
    assert f'pip install -e ".[{extras[1].strip()}]"' in README
