"""Commands run as a user runs them: a fresh interpreter, the ``shoal`` console script of
this venv, the user's code (``tests/``, where ``user_code`` lives) importable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLI = str(Path(sys.executable).parent / "shoal")


def run_fresh(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``args`` in a fresh process in ``cwd``, ``tests/`` on its path; output captured."""
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def assert_one_line_exit_2(out: subprocess.CompletedProcess[str], key: str) -> None:
    """The command stopped on bad input as shoal promises: exit 2, one line naming
    ``key``."""
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert key in out.stderr, out.stderr
