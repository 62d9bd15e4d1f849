"""Package-level rules for shoal.replay: its exports, examples and imports."""

from __future__ import annotations

import ast
import doctest
import importlib
import pathlib

import pytest

import shoal.replay

MODULES = [
    "buffer",
    "nstep",
    "protocol",
    "samplers",
    "sequence",
    "service",
    "stacked",
    "storage",
    "sum_tree",
]
FORBIDDEN = {"threading", "multiprocessing", "concurrent", "ray", "torch"}


def test_exports():
    assert sorted(shoal.replay.__all__) == [
        "NStepWriter",
        "PrioritizedSampler",
        "Replay",
        "ReplayBuffer",
        "ReplayService",
        "RingStorage",
        "SequenceWriter",
        "StackedReplay",
        "SumTree",
        "UniformSampler",
    ]
    for name in shoal.replay.__all__:
        assert getattr(shoal.replay, name).__doc__


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_run(module):
    mod = importlib.import_module(f"shoal.replay.{module}")
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0, f"{module} has no runnable example"


def test_replay_imports_no_concurrency_or_torch():
    # Replay stays a plain single-threaded numpy object; runners own all concurrency.
    package_dir = pathlib.Path(shoal.replay.__file__).parent
    for path in package_dir.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
