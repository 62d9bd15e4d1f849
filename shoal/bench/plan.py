"""What a bench runs besides the parts, decided before it starts: the size each parallel
scheme is weighed at (the same for all, from the cores, unless the config chose), the
overrides that make each window that scheme, and how long the start-ups will take.

``--seconds`` is the measuring; every runner's start-up (spawning workers or Ray, filling
replay to the first update, a short warm-up after it) comes on top, and a slow env's
start-up is most of it: 256 steps of a 20 ms env are 5 s a window. So the bench times a
few env steps first and says, before anything else, about how long the start-ups will add.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from shoal.config import Config

if TYPE_CHECKING:
    from shoal.bench.parts import Parts

__all__ = [
    "CALL_S",
    "Sizes",
    "StartupEstimate",
    "estimate_startup",
    "scheme_overrides",
    "scheme_sizes",
    "time_env_step",
]

SPAWN_S = {"serial": 0.5, "threads": 0.7, "processes": 2.0, "ray": 8.0}
"""Seconds to build and start each runner before its first env step on this 2-core VM
(RESULTS: serial 0.5 s, processes 1.5-2.5 s with one worker, Ray 7-10 s): a local Ray
starts its own processes, a rollout worker is a spawned interpreter that imports torch."""
PER_PROCESS_S = {"processes": 0.8, "ray": 1.5}
"""Seconds more for each worker or actor (its interpreter and imports share the cores)."""
STEP_OVERHEAD_S = 0.5e-3
"""What acting adds to an env's own step while replay fills (random actions: writing,
resets, bookkeeping; no forward)."""
WARM_S = 2.0
"""The most a window runs after its first update before its clock starts
(:func:`~shoal.bench.timing.warm_up`)."""
CALL_S = 0.5
"""The longest a Ray actor's call may take in a bench: ``ray.steps_per_call`` is cut so a
call of a slow env fits (a 20 ms env's 250 steps a call were 5 s, longer than a short
window: the window ran on until the call came back)."""
MARGIN = 1.3
"""The estimate's allowance for a loaded machine."""


@dataclass(frozen=True)
class Sizes:
    """The size each parallel scheme is weighed at."""

    workers: int
    """The processes scheme's rollout workers."""
    actors: int
    """The ray scheme's actors."""
    how: str
    """Why these sizes, for the report."""

    def line(self) -> str:
        """The sizes as the report says them."""
        w, a = self.workers, self.actors
        return (
            f"  sizes: processes {w} worker{'s' * (w != 1)}, ray {a} actor{'s' * (a != 1)}"
            f" ({self.how})"
        )


def scheme_sizes(cfg: Config) -> Sizes:
    """The parallel schemes' sizes: equal, from the cores (``cpu_count() - 2``, at least
    1, as the processes runner's default), unless the config sets ``processes.workers`` or
    ``ray.actors`` (one set: both take it; both: each its own, said)."""
    from shoal.runners.processes import default_workers
    from shoal.runners.sections import RayConfig

    workers = cfg.processes.workers or None
    default_actors = next(f.default for f in fields(RayConfig) if f.name == "actors")
    actors = cfg.ray.actors if cfg.ray.actors != default_actors else None
    if workers is None and actors is None:
        n = default_workers()
        return Sizes(n, n, "equal, from the cores: cpu_count() - 2, at least 1")
    if workers is None or actors is None:
        n = workers or actors
        assert n is not None
        return Sizes(n, n, "equal, as the config sets")
    how = "equal, as the config sets" if workers == actors else "each as the config sets"
    return Sizes(workers, actors, how)


def scheme_overrides(cfg: Config, scheme: str, sizes: Sizes | None, parts: Parts) -> list[str]:
    """The overrides that give ``scheme`` the bench's size (none for a world's schemes:
    ``sizes`` None); a Ray actor's call cut to about :data:`CALL_S` of acting (a slow
    env's whole call would outlast a short window)."""
    if sizes is None:
        return []
    if scheme == "processes":
        return [f"processes.workers={sizes.workers}"]
    if scheme == "ray":
        call = cfg.env.num_envs * max(parts.acting, 1e-9)
        steps = max(1, min(cfg.ray.steps_per_call, int(CALL_S / call)))
        return [f"ray.actors={sizes.actors}", f"ray.steps_per_call={steps}"]
    return []


def time_env_step(cfg: Config, seconds: float = 0.3, most: int = 50) -> float:
    """Seconds one env step takes with random actions: a few steps of one env (at least
    3, at most ``most``, for about ``seconds``), before anything else is started."""
    from shoal.envs import make_env

    env = make_env(cfg.env)
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        steps, t0 = 0, time.perf_counter()
        while steps < 3 or (steps < most and time.perf_counter() - t0 < seconds):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            steps += 1
            if terminated or truncated:
                env.reset()
        return (time.perf_counter() - t0) / steps
    finally:
        env.close()


@dataclass(frozen=True)
class StartupEstimate:
    """The seconds a bench will take beyond ``--seconds``, before it starts."""

    seconds: float
    """In all (with :data:`MARGIN`)."""
    env_step: float
    """One env step as timed first (s)."""
    fill: float
    """Of it, replay's fill to the first update, over every runner (s)."""

    def line(self, budget: float) -> str:
        """The estimate as the bench says it before it starts."""
        return (
            f"shoal bench: --seconds {budget:g} of measuring, plus about {self.seconds:.0f} s "
            f"of start-ups (workers and Ray starting, replay filling to the first update at "
            f"{self.env_step * 1e3:.2f} ms an env step: {self.fill:.0f} s of it)"
        )


def estimate_startup(
    cfg: Config, schemes: list[str], sizes: Sizes, env_step: float
) -> StartupEstimate:
    """The start-ups of the parts' runners (serial, and threads where weighed), of a
    window of each of ``schemes``, and of the second windows of the first scheme and of
    the two costliest others (the close calls the bench repeats, at worst), each filling
    replay to the first update with ``env_step`` s steps, split over its workers."""
    from shoal.bench.parts import bench_starts

    fill_one = bench_starts(cfg) * (env_step + STEP_OVERHEAD_S)
    parallel = {"processes": sizes.workers, "ray": sizes.actors}

    def cost(scheme: str) -> tuple[float, float]:
        n = parallel.get(scheme, 1)
        start = SPAWN_S.get(scheme, 1.0) + PER_PROCESS_S.get(scheme, 0.0) * n
        return start + fill_one / n, fill_one / n

    parts = ["serial", "threads"] if "threads" in schemes else ["serial"]
    repeats = schemes[:1] + sorted(schemes[1:], key=lambda s: cost(s)[0])[-2:]
    windows = schemes + (repeats if len(schemes) > 1 else [])
    total = sum(cost(s)[0] for s in parts + windows) + WARM_S * len(windows)
    fill = sum(cost(s)[1] for s in parts + windows)
    return StartupEstimate(total * MARGIN, env_step, fill)
