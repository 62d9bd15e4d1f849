"""Every Python example in the README runs as a script (main guard included), each in a
fresh interpreter in its own directory. Training calls are cut to a few hundred steps by a
prelude that wraps ``shoal.api.train``: this checks that the examples run as written, not
what they learn (the learning tests do that)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)

PRELUDE = """
import shoal.api as _api

_train = _api.train


def _short(*args, overrides=(), **kwargs):
    cut = ["run.total_steps=300", "run.learning_starts=100", "run.eval_every=300",
           "run.eval_episodes=2", "run.progress=false", "run.stop_return=none",
           "processes.workers=1"]
    return _train(*args, overrides=[*overrides, *cut], **kwargs)


_api.train = _short
"""


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 6


@pytest.mark.timeout(300)
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs_as_a_script(index, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(PRELUDE + "\n" + BLOCKS[index])
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert out.returncode == 0, f"example {index}:\n{BLOCKS[index]}\n{out.stderr[-3000:]}"
