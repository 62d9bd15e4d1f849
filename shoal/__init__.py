"""shoal: parallel and distributed reinforcement learning on one algorithm core.

The training API is imported on first use, so that worker processes which only need a
table or an env (``shoal.tabular``, ``shoal.envs``) start without loading torch.

Example:
    >>> import shoal
    >>> 'cartpole' in shoal.preset_names()
    True
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Config",
    "ShoalError",
    "TrainResult",
    "evaluate_run",
    "evaluate_run_agents",
    "load_config",
    "load_policy",
    "play_run",
    "plot",
    "preset_names",
    "train",
    "train_dqn",
]
__version__ = "0.1.0"

_LAZY = {
    "Config": "shoal.config",
    "load_config": "shoal.config",
    "preset_names": "shoal.config",
    "ShoalError": "shoal.errors",
    "TrainResult": "shoal.api",
    "evaluate_run": "shoal.api",
    "evaluate_run_agents": "shoal.api",
    "load_policy": "shoal.policy",
    "play_run": "shoal.api",
    "plot": "shoal.api",
    "train": "shoal.api",
    "train_dqn": "shoal.api",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'shoal' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
