"""The runner contract: what :class:`~shoal.run.loop.RunLoop` asks of every runner.

A runner supplies how experience is collected (:meth:`Runner.collect`), how learning is
scheduled (:meth:`Runner.learn`, usually by asking :attr:`Runner.schedule`) and how its
policy is evaluated (:meth:`Runner.evaluate`); every other hook has a do-nothing default
that a runner overrides where its transport or domain needs it. Nothing here builds a
learner or a replay buffer: the DQN runners share a base for that
(:class:`~shoal.runners.dqn.DQNRunner`), and a runner with other parts (several agents
in one world, say) supplies its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from shoal.errors import ConfigError
from shoal.run.schedule import UpdateSchedule

__all__ = ["Collected", "Runner", "torch_threads"]


@dataclass(frozen=True)
class Collected:
    """What one :meth:`collect` call did: env steps taken and the episodes it finished,
    each as ``(return, length)``."""

    steps: int
    episodes: Sequence[tuple[float, int]] = ()
    extras: Sequence[dict[str, float]] = ()
    """Extra columns of each episode's row, in the same order (e.g. every agent's return
    and social outcomes in a multi-agent world); empty when there are none."""
    side_by_side: bool = False
    """The episodes ran in worlds stepped side by side (not back to back): each row's step
    is the step they were collected at."""


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads set to a run's ``run.torch_threads`` (0: left as they are)
    while the block runs, then restored: a run's small networks act fastest on the threads
    it trained with, and torch's default (every core) contends with whatever else the
    machine runs."""
    import torch

    before = torch.get_num_threads()
    if threads > 0:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _check_importable(cls: Any, cfg: Any) -> None:
    """A network or torso handed over in Python that other processes cannot import by its
    name (a factory in ``__main__``) fails now, on a runner that needs them to, with the
    fix."""
    from shoal.registry import recipe_for
    from shoal.run.imports import importable_elsewhere

    if not cls.spawns(cfg):
        return
    for key, path in recipe_for(cfg).user_factories(cfg).items():
        if path and not importable_elsewhere(path):
            raise ConfigError(
                f"config key {key!r}: {path!r} is defined in the main script (or inside a "
                f"function), which the {cfg.run.runner!r} runner's worker processes cannot "
                "import; move the factory into a module (e.g. my_nets.py beside the script) "
                f"and pass it from there, or set {key} = 'my_nets:factory'"
            )


class Runner:
    """The loop's side of a runner: collection, learning, evaluation and hooks.

    Subclasses set :attr:`section` to own a config section; the first line of their
    docstring is their ``--help`` text.
    """

    section: ClassVar[tuple[str, type] | None] = None
    """(name, dataclass) of the runner's own config section, or None."""
    multi_agent: ClassVar[bool] = False
    """Whether the runner trains several agents in a multi-agent world."""
    workers_key: ClassVar[str | None] = None
    """The config key ``shoal train --workers`` sets for this runner (None: it has none)."""
    spread: ClassVar[float] = 0.0
    """Ape-X's exploration spread over every env of the run when ``explore.spread`` is not
    set (the ray runner's actors: 7); the larger of this and the recipe's is taken."""
    env_batches: ClassVar[bool] = True
    """Whether its actors step ``env.num_envs`` envs on the ``env.vector`` engine (a runner
    whose worlds batch their own way, over agents or maps, does not)."""

    @classmethod
    def preflight(cls, cfg: Any) -> Any:
        """Everything checked before any work starts: a recipe the runner cannot carry, the
        env batch settings the runner or the recipe cannot honour, then :meth:`check`;
        gives what :meth:`check` probed, for the caller to build the runner with."""
        from shoal.registry import recipe_for

        traits = recipe_for(cfg).traits
        if traits.runners is not None and cfg.run.runner not in traits.runners:
            allowed = ", ".join(repr(n) for n in traits.runners)
            raise ConfigError(
                f"config key 'run.runner': the {cfg.run.recipe!r} recipe trains with "
                f"{allowed}, not {cfg.run.runner!r}"
            )
        batches = cls.env_batches and traits.batches_envs
        if not batches and (cfg.env.num_envs != 1 or cfg.env.vector != "sync"):
            raise ConfigError(
                f"config key 'env.num_envs': the {cfg.run.runner!r} runner on {cfg.env.id!r} "
                "batches its own worlds; leave env.num_envs = 1 and env.vector = 'sync'"
            )
        if not batches and cfg.env.frame_stack != 1:
            raise ConfigError(
                f"config key 'env.frame_stack': the {cfg.run.runner!r} runner on {cfg.env.id!r}"
                " makes its own worlds, which stack no frames; leave env.frame_stack = 1"
            )
        probed = cls.check(cfg)
        for _, section in cfg.sections():  # a plug-in's checks that need the env
            check_env = getattr(section, "check_env", None)
            if callable(check_env):
                check_env(cfg)
        _check_importable(cls, cfg)
        return probed

    @classmethod
    def spawns(cls, cfg: Any) -> bool:
        """Whether the runner builds networks in processes it starts (spawned workers, Ray
        actors), which import the user's code by its name."""
        return False

    @classmethod
    def check(cls, cfg: Any) -> Any:
        """Validate what the config alone cannot (the env) before any work starts; what it
        learnt of the env (None: nothing), which the runner is built with (``cls(cfg,
        probed)``) so the env is made once."""

    def compile_mode(self) -> str:
        """How this runner's learners run their updates (``run.compile``; a runner whose
        learners cannot capture one whole update says otherwise)."""
        return self.cfg.run.compile

    @classmethod
    def evaluate_checkpoint(
        cls, cfg: Any, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> np.ndarray:
        """Greedy returns of ``episodes`` episodes played with a checkpoint's weights
        (``state``, of a run of this runner in ``run_dir``), starts drawn from ``seed``."""
        raise ConfigError(
            f"run '{run_dir}' (run.runner {cfg.run.runner!r}) cannot be evaluated from a checkpoint"
        )

    @classmethod
    def evaluate_checkpoint_agents(
        cls, cfg: Any, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> tuple[np.ndarray, dict[str, float]]:
        """:meth:`evaluate_checkpoint` 's returns and each agent's mean return by name (a
        multi-agent runner's; none here), from the same episodes."""
        return cls.evaluate_checkpoint(cfg, state, episodes, seed, run_dir), {}

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        if cfg.run.torch_threads > 0:
            import torch

            torch.set_num_threads(cfg.run.torch_threads)
        self.loss = float("nan")
        self.update_line = ""
        """How the learner runs its updates, for the run's first line ('' where none)."""
        self.schedule = UpdateSchedule.from_config(cfg.run)
        """The updates owed for the env steps taken (the serial rule)."""

    @property
    def updates(self) -> int:
        """Updates taken so far."""
        return 0

    @property
    def loss(self) -> float:
        """The latest training loss (NaN before the first update); a learner on a GPU
        leaves it on the device, and it is read back here, at log ticks."""
        return float(self._loss)

    @loss.setter
    def loss(self, value: Any) -> None:
        self._loss = value

    def update_notes(self) -> list[str]:
        """Lines about how the learner runs its updates that appeared since the last call
        (a capture that fell back to eager, and why)."""
        shown = self.__dict__.setdefault("_notes_shown", set())
        new = []
        for i, learner in enumerate(self.update_sources()):
            for j, note in enumerate(getattr(learner, "notes", [])):
                if (i, j) not in shown:
                    shown.add((i, j))
                    new.append(note)
        return new

    def update_sources(self) -> list[Any]:
        """The learners whose :attr:`notes` say how their updates run (none by default)."""
        return []

    def epsilon(self, step: int) -> float:
        """Exploration at env step ``step`` (logged in every row)."""
        return 0.0

    # --- what a runner supplies -----------------------------------------------------------
    def collect(self, step: int) -> Collected:
        """Take some env steps (``step`` were taken before) and store what they produced."""
        raise NotImplementedError

    def learn(self, step: int, new_steps: int) -> None:
        """Run the learning due now that ``step`` env steps were taken (``new_steps`` of
        them by the last collect); set :attr:`loss`."""
        raise NotImplementedError

    def evaluate(self, seed: int | None = None) -> tuple[np.ndarray, Any]:
        """Greedy returns of ``run.eval_episodes`` episodes (``seed``: their starts,
        default ``run.seed``) and the weights that played them (for ``best.pt``)."""
        raise NotImplementedError

    # --- hooks with do-nothing defaults -----------------------------------------------------
    def start(self) -> None:
        """Start threads or processes (called once, before the first collect)."""

    def at_boundary(self) -> bool:
        """Whether the run may stop or checkpoint here (serial: between episodes)."""
        return True

    def done(self, episodes: int) -> bool:
        """A runner's own reason to stop, given the episodes finished so far."""
        return False

    def finish(self) -> None:
        """The run ends normally: complete scheduled learning, flush partial episodes."""

    def interrupt(self) -> None:
        """The run is cut by Ctrl-C or an error: keep what can be kept (partial episode)."""

    def stop(self) -> None:
        """Stop and join threads or processes; called at every end, safe to call twice."""

    def close(self) -> None:
        """Release what outlives :meth:`stop` (evaluation envs); safe to call twice."""

    def eval_metrics(self) -> dict[str, float]:
        """Extra columns of each eval row."""
        return {}

    def tick_metrics(self, updates_per_s: float) -> dict[str, float]:
        """Extra columns of each tick row."""
        return {}

    def bar_stats(self, tick: dict[str, float]) -> dict[str, Any]:
        """Extra figures for the progress bar."""
        return {}

    def checkpoint_guard(self) -> contextlib.AbstractContextManager[Any]:
        """Held while a checkpoint is taken (threads: the write lock)."""
        return contextlib.nullcontext()

    # --- state --------------------------------------------------------------------------------
    def checkpoint_bytes(self) -> int:
        """About how large a checkpoint of this run can grow (checked against the free disk
        before training; 0: unknown)."""
        return 0

    def state_is_whole(self) -> bool:
        """Whether :meth:`state_dict` can return all of the run's state now (False once a
        part is lost, e.g. a replay actor: a checkpoint then goes beside ``latest.pt``)."""
        return True

    def state_dict(self) -> dict[str, Any]:
        """Everything of the runner a checkpoint holds (here: the update schedule)."""
        return {"schedule": self.schedule.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved. A checkpoint written before the update
        schedule was checkpointed resumes owing what the rule owes from its step on."""
        if "schedule" in state:
            self.schedule.load_state_dict(state["schedule"])
        else:
            self.schedule.granted = self.schedule.due(state["loop"]["step"])
