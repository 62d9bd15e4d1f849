"""The MAPF recipe: multi-agent path finding as an agent every runner it allows takes.

A MAPF run (``env.id = "shoal/Mapf-v0"``, chosen by its env) trains DHC's recurrent,
communicating agents: one shared network scores every agent of a world from packed joint
observations, the learner trains on stored sequences with burn-in (R2D2's loss and
priorities), and the curriculum over agent counts and map sizes lives with the learner.
What a runner needs of it:

- its acting (:class:`MapfActing`): ``mapf.envs`` worlds stepped with one batched forward,
  their sequences with the memories held before each step, and their initial priorities;
- its tasks (:class:`CurriculumTasks`): the stages open now (what every acting's next
  episodes are drawn from), counting each finished episode towards its stage, and the
  episode rows' columns;
- its evaluation (:class:`HeldOutEvaluator`): greedy success on held-out generated
  instances per ``mapf.eval_agents`` / ``mapf.eval_sizes`` target, through the shield the
  run's config names.

One "env step" of a MAPF run is one step of one world (all its agents move).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from shoal.agent.acting import ActingRequest, Pulling, Taken, spread_epsilons
from shoal.agent.actor import Actor
from shoal.agent.learner import Learner
from shoal.config import APEX_SPREAD, Config
from shoal.envs.gym_env import EnvSpec
from shoal.envs.mapf import ACTIONS, MapfEnv
from shoal.errors import ConfigError
from shoal.mapf.config import MAPF_ID, mapf_of
from shoal.mapf.curriculum import Curriculum
from shoal.mapf.network import JointLayout
from shoal.mapf.player import (
    Episode,
    MapfPlayer,
    build_learner,
    build_network,
    make_world,
    play_greedy,
    sequence_specs,
)
from shoal.recipes.base import ActionValueRecipe
from shoal.recipes.contract import RecipeTraits
from shoal.replay.items import stack_items
from shoal.run.runner import Collected
from shoal.run.seeding import SeedStream, derive_seed

__all__ = ["CurriculumTasks", "HeldOutEvaluator", "MapfActing", "MapfRecipe", "Stepped"]


@dataclass(frozen=True)
class Stepped:
    """One step of an acting's worlds: the world steps taken and the episodes finished."""

    count: int
    finished: list[Episode]


class MapfRecipe(ActionValueRecipe):
    """Builds a MAPF agent's parts (see the module docstring); its actor is the shared
    one (an inference copy of the network and its weights), the rest its own."""

    traits = RecipeTraits(
        runners=("serial", "processes", "ray"),
        batches_envs=False,
        serves_after="batch",
        flush_on_finish=True,
        recurrent=True,
        spread=APEX_SPREAD,
    )
    """The runners its acting reaches (the curriculum's stages travel with each Ray call
    and through each rollout worker's pipe; the threads runner does not carry them yet);
    ``mapf.envs`` worlds stepped its own way (env.num_envs stays 1); a batch of sequences
    before the first update (no burst on the first few); a finished run's open sequences
    go to replay (the next run starts new episodes); a memory per agent."""

    def search_space(self, cfg: Config) -> dict[str, dict[str, Any]]:
        """What ``shoal tune`` searches for MAPF by default: the learner's rate,
        discount and batch, the ``[mapf]`` network's width and the sequence replay's
        exploration; never ``dqn.hidden``, which its network does not read."""
        steps = cfg.run.total_steps
        return {
            "dqn.lr": {"low": 1e-5, "high": 1e-3, "log": True},
            "dqn.gamma": {"choices": [0.95, 0.98, 0.99]},
            "dqn.batch_size": {"choices": [32, 64, 128]},
            "dqn.target_period": {"low": 100, "high": max(200, min(10_000, steps)), "log": True},
            "mapf.hidden": {"choices": [32, 64, 128]},
            "mapf.channels": {"choices": [8, 16, 32]},
            "explore.eps_end": {"low": 0.1, "high": 0.5},
            "explore.spread": {"low": 0.0, "high": 10.0},
        }

    def user_factories(self, cfg: Config) -> dict[str, str]:
        """None: its network is ``[mapf]``'s, whatever ``dqn.network`` says."""
        return {}

    def check(self, cfg: Config, spec: EnvSpec) -> None:
        """A MAPF config (its env, its section's rules)."""
        if cfg.run.eval_epsilon > 0:
            raise ConfigError(
                f"config key 'run.eval_epsilon': {cfg.run.eval_epsilon}; the mapf recipe"
                " evaluates on held-out instances without random moves (leave it 0)"
            )

    def probe(self, cfg: Config) -> EnvSpec:
        """The packed joint observation's bytes and the five moves."""
        if cfg.env.id != MAPF_ID:
            raise ConfigError(f"config key 'env.id': the mapf recipe needs {MAPF_ID!r}")
        m = mapf_of(cfg)
        return EnvSpec(obs_dim=JointLayout(m.max_agents, m.fov).size, n_actions=len(ACTIONS))

    def make_learner(self, cfg: Config, spec: EnvSpec) -> Learner:
        """The sequence learner on the ``[mapf]`` network."""
        return build_learner(cfg)

    def make_network(self, cfg: Config, spec: EnvSpec) -> nn.Module:
        """An inference-only copy of the ``[mapf]`` network."""
        return build_network(mapf_of(cfg)).requires_grad_(False)

    def replay_fields(self, cfg: Config, spec: EnvSpec) -> dict[str, Any]:
        """Sequences of packed joint observations, with stored recurrent states."""
        return dict(sequence_specs(cfg))

    def make_acting(
        self, cfg: Config, spec: EnvSpec, actor: Actor, request: ActingRequest
    ) -> MapfActing:
        """The worlds of one acting (the serial runner's, a rollout worker's, a Ray
        actor's); their sequences go as they complete with either writer. Its worlds have
        no episode start to hook (self-play is refused: its network has memory)."""
        if request.on_reset is not None:
            raise ConfigError("the mapf recipe's worlds take no reset hook (self-play)")
        return MapfActing(cfg, actor, request)

    def make_tasks(self, cfg: Config) -> CurriculumTasks:
        """The curriculum."""
        return CurriculumTasks(cfg)

    def make_evaluator(self, cfg: Config) -> HeldOutEvaluator:
        """Greedy success on held-out instances."""
        return HeldOutEvaluator(cfg)

    def evaluate_checkpoint(
        self, cfg: Config, state: dict[str, Any], episodes: int, seed: int, run_dir: Path
    ) -> np.ndarray:
        """MAPF runs are evaluated against their baselines, not by returns."""
        raise ConfigError(
            f"run '{run_dir}' is a MAPF run: evaluate it against its baselines with "
            f"`shoal mapf eval {run_dir} --generate --agents N --size S`"
        )


class MapfActing(Pulling):
    """``mapf.envs`` worlds played by one :class:`~shoal.mapf.player.MapfPlayer` with an
    actor's network and weights; the acting contract of :class:`~shoal.agent.acting.Acting`
    (explore, pull, configure, step, take, flush, state)."""

    def __init__(self, cfg: Config, actor: Actor, request: ActingRequest) -> None:
        self.m = mapf_of(cfg)
        self.actor = actor
        self.player = MapfPlayer(cfg, actor.network, seeds=request.seeds, rng=request.rng)
        place = request.place
        self.first, self.total = place[0] * self.m.envs, place[1] * self.m.envs
        self.spread = request.spread
        self.epsilons = np.ones(self.m.envs)
        self.stages: list[tuple[int, int]] = [(self.m.agents, self.m.size)]
        self.weights: list[float] | None = None
        self.since_pull = 0
        self._items: list[dict[str, np.ndarray]] = []
        self._priorities: list[np.ndarray] = []
        self._ended: list[Episode] = []
        self._played = 0

    @property
    def num_envs(self) -> int:
        """Worlds stepped side by side."""
        return self.m.envs

    def explore(self, base: float) -> None:
        """Ape-X's spread of ``base`` over this acting's worlds among the run's."""
        self.epsilons = spread_epsilons(base, self.first, self.total, self.spread, self.m.envs)

    def configure(self, stages: list[tuple[int, int]], weights: list[float] | None) -> None:
        """The stages new episodes are drawn from, with their shares."""
        self.stages, self.weights = list(stages), weights

    def step(self) -> Stepped:
        """One step of every world; completed sequences wait for :meth:`take`."""
        got = self._play(1)
        return Stepped(got.steps, got.episodes)

    def play(self, steps: int, pull_every: int = 0) -> int:
        """About ``steps`` world steps (every world at least once), with the newest weights:
        a call plays more steps than ``ray.pull_every``, so it pulls once, first. Finished
        episodes wait for :meth:`take`."""
        self.pull()
        got = self._play(max(1, steps // self.m.envs))
        self._ended += got.episodes
        self._played += got.steps
        return got.steps

    def _play(self, rounds: int) -> Any:
        got = self.player.play(
            rounds,
            self.actor.params,
            epsilon=self.epsilons,
            stages=self.stages,
            weights=self.weights,
        )
        if got.items:
            self._items += got.items
            self._priorities.append(got.priorities)
        self.since_pull += got.steps
        return got

    def take(self) -> Taken:
        """The sequences completed since the last take (one array per field), their
        initial priorities, and what :meth:`play` finished since then: the episodes and
        the world steps played (:meth:`step`, the serial runner's, counts neither)."""
        items, self._items = self._items, []
        priorities, self._priorities = self._priorities, []
        ended, self._ended = self._ended, []
        played, self._played = self._played, 0
        if not items:
            return Taken({}, None, ended, played)
        return Taken(stack_items(items), np.concatenate(priorities), ended, played)

    @property
    def ended(self) -> int:
        """Episodes finished and not yet taken (:meth:`take`)."""
        return len(self._ended)

    @property
    def in_progress(self) -> int:
        """World steps of the episodes still running."""
        return sum(
            w.env.steps for w in self.player.worlds if w.env is not None and w.obs is not None
        )

    def flush(self) -> Taken:
        """Every world's open sequences, ended as truncations, with their priorities."""
        items = self.player.flush()
        if items:
            self._items += items
            self._priorities.append(self.player.priorities(self.actor.params, items))
        return self.take()

    def close(self) -> None:
        """Nothing to release (the worlds are plain numpy)."""

    def state_dict(self) -> dict[str, Any]:
        """The worlds' episode counters (their running episodes are not re-created)."""
        return {"world_episodes": [w.episodes for w in self.player.worlds]}

    def load_state_dict(self, state: dict[str, Any]) -> Taken:
        """Restore; the cut episodes are not replayed (nothing to add)."""
        for world, episodes in zip(self.player.worlds, state["world_episodes"]):
            world.episodes = int(episodes) + 1
        return Taken({})


class CurriculumTasks:
    """The curriculum on the learner's side: what every acting's next episodes are drawn
    from, and each finished episode counted towards its stage."""

    key = "curriculum"
    """Where a checkpoint keeps its state."""

    def __init__(self, cfg: Config) -> None:
        self.curriculum = Curriculum(mapf_of(cfg))

    def acting_args(self) -> tuple[Any, ...]:
        """The stages open now and their shares."""
        return (list(self.curriculum.stages), self.curriculum.weights())

    def collected(
        self, episodes: list[Episode], steps: int, side_by_side: bool = True
    ) -> Collected:
        """Count episodes towards their stages; the loop's rows for them (worlds are played
        side by side wherever they run)."""
        rows, extras = [], []
        for ep in episodes:
            self.curriculum.record(ep.stage, success=ep.success)
            rows.append((ep.mean_return, ep.steps))
            extras.append(
                {
                    "success": float(ep.success),
                    "agents": float(ep.stage[0]),
                    "size": float(ep.stage[1]),
                    "stages": float(len(self.curriculum.stages)),
                }
            )
        return Collected(steps, rows, extras, side_by_side=True)

    def tick_metrics(self, replay_size: int) -> dict[str, float]:
        """Replay's size and the stages open."""
        return {"replay": float(replay_size), "stages": float(len(self.curriculum.stages))}

    def metrics(self) -> dict[str, float]:
        """The curriculum's reach."""
        agents, size = self.curriculum.hardest
        return {
            "stages": float(len(self.curriculum.stages)),
            "max_agents": float(agents),
            "max_size": float(size),
        }

    def state_dict(self) -> dict[str, Any]:
        """The curriculum's state."""
        return self.curriculum.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.curriculum.load_state_dict(state)


class HeldOutEvaluator:
    """Greedy success on ``run.eval_episodes`` held-out generated instances per target."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._worlds: list[tuple[tuple[int, int], list[MapfEnv]]] | None = None
        self.last: dict[str, float] = {}
        """Success per target at the last evaluation (``success_AxS``)."""

    def evaluate(self, actor: Actor, seed: int) -> np.ndarray:
        """One success (0 or 1) per instance, every target's."""
        m, r = mapf_of(self.cfg), self.cfg.run
        if self._worlds is None:
            self._worlds = []
            for agents, size in zip(m.eval_agents, m.eval_sizes):
                # each instance's density is drawn at every evaluation
                worlds = [make_world(m, (agents, size)) for _ in range(r.episodes_per_eval())]
                self._worlds.append(((agents, size), worlds))
        rng = np.random.default_rng(derive_seed(seed, SeedStream.EVAL, 1))
        lo, hi = m.eval_density
        successes, self.last = [], {}
        for (agents, size), worlds in self._worlds:
            for env in worlds:
                env.density = float(rng.uniform(lo, hi))
            seeds = [
                derive_seed(seed, SeedStream.EVAL, agents, size, k) for k in range(len(worlds))
            ]
            played = play_greedy(
                actor.network,
                actor.params,
                worlds,
                seeds,
                shield=m.shield,
                guide=m.shield_guide,
            )
            ok = [float(ep.success) for ep in played]
            self.last[f"success_{agents}x{size}"] = float(np.mean(ok))
            successes += ok
        return np.array(successes)

    def metrics(self) -> dict[str, float]:
        """Success per evaluation target."""
        return dict(self.last)

    def close(self) -> None:
        """Release the evaluation worlds."""
        self._worlds = None
