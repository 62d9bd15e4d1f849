"""What each scheme can reach, from the parts' times (:class:`~shoal.bench.parts.Parts`).

Every runner holds the config's updates per env step (the replay ratio), so a run moves at
the pace of its slowest side: per env step, the acting side takes its acting time and the
learning side ``ratio`` updates, and a scheme's gain is how much of the two it overlaps,
less what its transport costs and what the sides take from each other (the GIL in one
process, the cores across processes). Each prediction is the slowest of its limits, named
in ``bound``:

- serial: acting, writing and updates one after another.
- threads: the threads runner's own loop, timed as serial's is; without it, the GIL each
  side holds taken as serial (see :func:`threads`).
- processes, W workers: each worker acts, writes n-step transitions, pickles them and
  pulls weights; the learner unpickles, adds them to replay in one write and updates
  (timed beside busy processes when the workers leave it no core of its own); all of it
  within the machine's cores.
- ray, A actors: its own runner's loop, timed as threads' is, with the actors alone and
  the learner alone saying which side bounds it (:mod:`shoal.bench.ray_modes`); before
  they are timed, the processes bound with A actors stands for it (an upper bound: Ray's
  replay actor, object store and initial priorities take what that bound counts as free).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from shoal.bench.parts import Parts

__all__ = ["Prediction", "pays_at", "predict", "predict_world", "ray_from_modes"]


@dataclass(frozen=True)
class Prediction:
    """A scheme's predicted pace and what limits it."""

    scheme: str
    """The runner (``serial``, ``threads``, ``processes``, ``ray``)."""
    workers: int
    """Worker processes (processes), actors (ray), learner threads (threads); 0 for serial."""
    steps_per_s: float
    """Env steps per second the scheme can reach at the config's replay ratio."""
    bound: str
    """What limits it: ``acting``, ``learner``, ``cores`` or ``gil`` (threads: the two
    sides slow each other down)."""


def _limits(limits: dict[str, float]) -> tuple[float, str]:
    """The slowest of the per-env-step times (s) and its name: (steps/s, bound)."""
    bound = max(limits, key=lambda k: limits[k])
    return 1.0 / max(limits[bound], 1e-12), bound


def serial(p: Parts) -> Prediction:
    """Acting, writing and updates one after another."""
    learner = p.ratio * p.update
    rate = 1.0 / max(p.serial_step, 1e-12)
    return Prediction("serial", 0, rate, "learner" if learner >= p.serial_acting else "acting")


def threads(p: Parts, learner_threads: int) -> Prediction:
    """An acting thread and learner threads in one process.

    With the threads runner's own loop timed (:attr:`Parts.threads_step`), that is its
    pace: bound by the GIL where it is below serial's, else by the learner. Without it,
    from the serial parts: the GIL each side holds is serial (the update's share ``g`` of
    the GIL solves ``a / a' + g u / u' = 1``, acting taken to hold it throughout), so a run
    needs ``a + ratio g u`` an env step; this overrates threads where their own update
    path costs more than serial's."""
    if p.threads_step > 0:
        rate = 1.0 / p.threads_step
        bound = "gil" if rate < serial(p).steps_per_s else "learner"
        return Prediction("threads", learner_threads, rate, bound)
    a = p.acting + p.write
    u, a_beside = p.update, p.acting_beside_update + p.add
    gil = min(1.0, max(0.0, (1.0 - a / a_beside) * p.update_beside_acting / u))
    limits = {"acting": a, "learner": p.ratio * u, "gil": a + p.ratio * gil * u}
    rate, bound = _limits(limits)
    return Prediction("threads", learner_threads, rate, bound)


def ray_from_modes(modes: list[tuple[float, float]], ratio: float, actors: int) -> Prediction:
    """The ray scheme from its own timed modes, [actors alone, learner alone, its own
    loop] (each ``(env steps/s, updates/s)``): its loop's pace, with its updates done;
    bound by the learner where the learner alone keeps up with fewer env steps than the
    actors alone take."""
    steps, updates = modes[2]
    rate = min(steps, updates / ratio) if ratio > 0 else steps
    bound = "learner" if modes[1][1] / max(ratio, 1e-12) < modes[0][0] else "acting"
    return Prediction("ray", actors, rate, bound)


def processes(
    p: Parts,
    workers: int,
    publish_every: float,
    pull_every: int = 1,
    name: str = "processes",
) -> Prediction:
    """``workers`` worker processes acting, one learner process updating, within the
    machine's cores. Every worker pulls every weight version, at most once per
    ``pull_every`` of its env steps."""
    versions = p.ratio / max(publish_every, 1)  # per env step of the run
    pulls = min(versions * workers, 1.0 / pull_every)  # per env step of a worker
    acting = p.acting + p.write + p.message / 2 + pulls * p.pull
    # beside busy processes: no core of the learner's own is spared from the workers
    crowded = workers >= p.cores - 1
    update = p.update_beside_processes if crowded else p.update
    learner = p.message / 2 + p.add + p.ratio * update + versions * p.publish
    limits = {
        "acting": acting / workers,
        "learner": learner,
        "cores": (acting + learner) / p.cores,
    }
    rate, bound = _limits(limits)
    return Prediction(name, workers, rate, bound)


def predict(
    p: Parts,
    *,
    learner_threads: int,
    workers: int,
    publish_every: int,
    actors: int,
    ray_publish_every: int,
    ray_pull_every: int,
    schemes: tuple[str, ...],
) -> list[Prediction]:
    """Each of ``schemes``' prediction, in that order."""
    made = {
        "serial": lambda: serial(p),
        "threads": lambda: threads(p, learner_threads),
        "processes": lambda: processes(p, workers, publish_every),
        "ray": lambda: processes(p, actors, ray_publish_every, ray_pull_every, name="ray"),
    }
    return [made[s]() for s in schemes if s in made]


def predict_world(p: Parts, epoch_turns: float, schemes: tuple[str, ...]) -> list[Prediction]:
    """A multi-agent world's schemes (:data:`~shoal.bench.worlds.WORLD_SCHEMES`), bounded
    as their single-agent kin: learning in the acting thread as serial, in a thread of its
    own as threads, beside a collector process as processes with one worker that gets the
    K agents' weights once an epoch."""
    made = {
        "agents": lambda: serial(p),
        "agents-thread": lambda: threads(p, 1),
        "agents-process": lambda: processes(p, 1, p.ratio * epoch_turns, int(epoch_turns)),
    }
    return [dataclasses.replace(made[s](), scheme=s) for s in schemes if s in made]


def pays_at(p: Parts, publish_every: int, gain: float = 1.1, most: int = 256) -> int | None:
    """The fewest cores at which processes (cores - 1 workers, the learner on its own core)
    would reach ``gain`` times serial, from these parts; None if no number of cores would
    (the learner alone is the limit)."""
    target = gain * serial(p).steps_per_s
    for c in range(2, most + 1):
        more = dataclasses.replace(p, cores=c)
        if processes(more, c - 1, publish_every).steps_per_s >= target:
            return c
    return None


def learner_share(p: Parts) -> float:
    """The updates' share of a serial env step."""
    return p.ratio * p.update / max(p.serial_step, 1e-12)
