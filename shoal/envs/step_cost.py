"""A wrapper that makes every env step cost a set amount of time, for benchmarks.

Real environments differ in what a step costs and whether it holds Python's GIL: a
simulator in C or on another machine waits outside the GIL (``"sleep"``), a pure-Python
env computes inside it (``"spin"``). CartPole's 5 us step is neither typical nor enough to
show when a parallel scheme pays, so benchmarks add a known cost of either kind.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym

__all__ = ["StepCost"]


class StepCost(gym.Wrapper):
    """Adds ``micros`` microseconds to every ``step``: sleeping (GIL released) or spinning
    (GIL held, like Python code).

    Example:
        >>> env = StepCost(gym.make("CartPole-v1"), micros=50, kind="spin")
        >>> _ = env.reset(seed=0)
        >>> _ = env.step(0)
    """

    def __init__(self, env: gym.Env, *, micros: float, kind: str = "sleep") -> None:
        super().__init__(env)
        if micros < 0:
            raise ValueError(f"StepCost micros: {micros!r} is out of range; allowed: >= 0")
        if kind not in ("sleep", "spin"):
            raise ValueError(f"StepCost kind: {kind!r} is not one of 'sleep', 'spin'")
        self.seconds = micros * 1e-6
        self.kind = kind

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """The wrapped step, after spending the configured time."""
        if self.kind == "sleep":
            time.sleep(self.seconds)
        else:
            end = time.perf_counter() + self.seconds
            while time.perf_counter() < end:
                pass
        return self.env.step(action)
