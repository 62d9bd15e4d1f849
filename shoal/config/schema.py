"""The config's schema: its sections as dataclasses, whose field docstrings are the
``--help`` text, each field's rules (:func:`param`), and :class:`Config`, the whole, with
its cross-field checks (:meth:`Config.validate`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from shoal.config.devices import cuda_refusal
from shoal.config.values import INT64_MAX, show, validate_fields
from shoal.errors import ConfigError
from shoal.run.imports import LOCAL_OBJECTS, check_path_syntax

__all__ = [
    "APEX_SPREAD",
    "COMPILE_MODES",
    "ENCODERS",
    "MAX_BATCH",
    "MAX_COUNT",
    "MAX_STEPS",
    "VECTOR_ENGINES",
    "Config",
    "DQNConfig",
    "EnvConfig",
    "ExploreConfig",
    "ReplayConfig",
    "RunConfig",
    "param",
    "config_to_dict",
    "section_items",
]

SEED_MAX = INT64_MAX
"""Largest ``run.seed``: torch.manual_seed takes < 2**64 but numpy and C paths that store
a seed as a signed 64-bit integer need < 2**63."""
MAX_WIDTH = 2**20
"""Largest layer width or channel count: far beyond any net that fits in memory, and small
enough that torch's size products (batch x width) stay far from int64 overflow."""
COMPILE_MODES = ("auto", "off", "compile", "graph")
"""What ``run.compile`` takes (:mod:`shoal.agent.capture` says what each does)."""
EVAL_RETURNS = 20
"""Returns a greedy evaluation collects by default (``run.eval_episodes`` unset)."""

MAX_BATCH = 2**24
"""Largest batch of transitions (or of evaluation episodes): ~16M, beyond real use, and
small enough that batch x observation size cannot overflow an array's byte count."""
FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32: a bound for keys that compare with the networks' float32 values
(no larger value means anything more; configs that wrote 1e10 for "never" stay valid)."""
MAX_CAPACITY = 2**40
"""Largest replay capacity: ~1.1e12 transitions, 1000x the largest replays in the
literature; more overflows numpy's array byte count for image observations."""
MAX_STEPS = 10**11
"""Largest count of env steps, updates or episodes a key may name (a budget, a schedule,
a cadence): 100 billion, several times the longest runs published (Ape-X's 22.8 billion
frames). A larger value is a slip (``1e12`` for ``12``) that would silently mean never."""
MAX_COUNT = 2**16
"""Largest count of things that each cost a process, a thread, a buffer or a batch in
flight (workers, actors, agents, queue depths): 65,536, beyond any one run's machines."""


def param(default: Any, **rules: Any) -> Any:
    """A dataclass field carrying validation rules as metadata: bounds ``ge``, ``gt``,
    ``le``, ``lt`` (combined: ``ge=0.0, le=1.0`` allows 0.0 <= value <= 1.0), ``choices``,
    and for lists ``allow_empty`` (the bounds then apply to each element). ``code`` marks
    a key that names code to import (:mod:`shoal.run.consent` lists them before a received
    run is opened): ``"modules"`` (module names), ``"path"`` (a ``module:attribute``),
    ``"recipe"`` (a registered name or a path), ``"env"`` (an env id, ``module:Id`` or
    ``pettingzoo:module``)."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=rules)
    return field(default=default, metadata=rules)


VECTOR_ENGINES = ("sync", "async", "envpool")
"""Values of ``env.vector`` (the engines of :mod:`shoal.envs.vector`)."""


@dataclass
class EnvConfig:
    """The environment to learn on."""

    id: str = param("CartPole-v1", code="env")
    """Gymnasium environment id ('module:Id' imports the module first); its action space must
    be Discrete, or Tuple(Discrete, Box) with a bounded 1-D Box (hybrid actions). The agents
    runner takes a world: 'shoal/Harvest-v0' or 'pettingzoo:package.module'."""
    imports: list[str] = param([], allow_empty=True, code="modules")
    """Modules imported before the env is made, in this process and in every worker and Ray
    actor: a package that registers its envs on import (shoal train --import MODULE)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the env's constructor (gym.make's, or a PettingZoo module's
    parallel_env's), e.g. {size = 8}."""
    obs_keys: list[str] = param([], allow_empty=True)
    """Keys of a Dict observation to learn from, e.g. ['image', 'direction'] (an image goes
    to the conv encoder, the rest is flattened beside it); empty: every key that holds
    numbers, the others (text such as MiniGrid's mission) left out with one line."""
    max_episode_steps: int | None = param(None, gt=0, le=MAX_STEPS)
    """Override the env's time limit (episodes are truncated, not terminated, there)."""
    step_cost_us: float = param(0.0, ge=0.0, le=1e9)
    """Extra microseconds per env step (benchmarks: models a costlier env); at most 1e9, i.e.
    1000 s a step (far larger values overflow time.sleep)."""
    step_cost_kind: str = param("sleep", choices=("sleep", "spin"))
    """How the extra cost is spent: 'sleep' (GIL released, like a simulator in C) or
    'spin' (GIL held, like a pure-Python env)."""
    num_envs: int = param(1, gt=0, le=65_536)
    """Envs each actor steps side by side, with one batched forward for all of them (the
    serial runner, the threads runner's acting thread, each rollout worker, each Ray actor)."""
    vector: str = param("sync", choices=VECTOR_ENGINES)
    """How an actor's envs are stepped: 'sync' (in turn, in the actor's process), 'async'
    (gymnasium's AsyncVectorEnv, a process per env) or 'envpool' (envpool's C++ pool,
    outside the GIL; an optional extra, for the ids envpool knows)."""
    frame_stack: int = param(1, gt=0, le=1024)
    """Observations are the last K frames stacked: 2-D byte frames (Atari's grey screens,
    where 4 is the standard; replay then keeps each frame once) or flat vectors (the last
    K side by side, the first repeated at an episode's start: a feed-forward agent's
    short memory on a partially observed env)."""
    sticky_actions: float | None = param(None, ge=0.0, le=1.0)
    """Atari: the chance the previous action is repeated instead (none: the id's own, 0.25
    for ALE/*-v5 and 0 for *NoFrameskip-v4)."""
    episodic_life: bool = True
    """Atari, training only: a lost life ends the learner's episode (the game goes on)."""
    clip_rewards: bool = True
    """Atari, training only: rewards clipped to [-1, 1] (evaluation reports raw scores)."""


ENCODERS = ("auto", "mlp", "minatar", "nature", "der")
"""``dqn.encoder``'s values (:mod:`shoal.agent.networks` holds the layers of each image
encoder)."""

AUGMENTS = ("none", "shift", "mirror")
"""``dqn.augment``'s values (:mod:`shoal.agent.augment` holds what each does)."""


@dataclass
class DQNConfig:
    """The DQN learner: network, loss and optimizer."""

    network: str = param("", code="path")
    """Your own Q-network: 'package.module:factory', a function called with the env's
    observation and action spaces that returns a torch.nn.Module mapping observations
    (batch, obs_dim) to Q-values (batch, n_actions); every runner and shoal eval build it
    by this path (empty: shoal's network from hidden, dueling, board and encoder)."""
    hidden: list[int] = param([128, 128], gt=0, le=MAX_WIDTH)
    """Hidden layer widths of the Q-network MLP."""
    dueling: bool = True
    """Use a dueling head (separate value and advantage streams)."""
    board: list[int] = param([], gt=0, le=2**16, allow_empty=True)
    """[height, width, channels] of a board at the start of each observation (stored
    height x width x channels) to read with convolutions; empty: a plain MLP."""
    conv: list[int] = param([64, 64], gt=0, le=MAX_WIDTH)
    """Channels of the 3x3 convolutions over ``board`` (used only when board is set)."""
    encoder: str = param("auto", choices=ENCODERS)
    """How image observations are read: 'minatar' (one 3x3 conv of 16, MinAtar's), 'nature'
    (the Nature DQN's three convs, images of 36 x 36 and up), 'der' (data-efficient
    Rainbow's two 5x5 convs of stride 5, images of 25 x 25 and up), 'auto' (nature from 36
    pixels a side, minatar below; an MLP for flat observations) or 'mlp' (flattened
    pixels)."""
    double: bool = True
    """Double DQN: pick the next action with the online net, value it with the target net."""
    gamma: float = param(0.99, ge=0.0, le=1.0)
    """Discount factor."""
    n_step: int = param(3, ge=1, le=2**16)
    """Steps of real reward before bootstrapping (n-step returns)."""
    lr: float = param(1e-3, gt=0.0, le=1.0)
    """Adam learning rate (at most 1: Adam moves every weight by about lr per update, and a
    step as large as the weights themselves never trains; DQNs use 1e-5 to 1e-2)."""
    adam_eps: float = param(1e-8, gt=0.0, le=1.0)
    """Adam epsilon (at most 1: it only keeps the step's denominator off zero; 1e-8 to
    1.5e-4 in practice, and a larger one turns Adam into plain SGD)."""
    batch_size: int = param(64, gt=0, le=MAX_BATCH)
    """Transitions per gradient step."""
    huber_delta: float = param(1.0, gt=0.0, le=FLOAT32_MAX)
    """Huber loss threshold between the quadratic and linear parts (a huge one, e.g. 1e10,
    makes it plain squared error; at most float32's largest, past which nothing compares)."""
    max_grad_norm: float = param(10.0, gt=0.0, le=FLOAT32_MAX)
    """Clip the global gradient norm to this value (a huge one, e.g. 1e10, never clips; at
    most float32's largest, which no float32 norm exceeds)."""
    action_mask: bool = False
    """Observations end with a mask of legal actions (1 = legal, one entry per action):
    exploration, greedy choices and bootstrap targets use legal actions only."""
    target_update: str = param("hard", choices=("hard", "soft"))
    """How the target network follows the online one: 'hard' copies every target_period
    updates, 'soft' moves it by tau every update."""
    target_period: int = param(500, gt=0, le=MAX_STEPS)
    """Updates between hard target copies."""
    tau: float = param(0.005, gt=0.0, le=1.0)
    """Soft target update rate."""
    augment: str = param("none", choices=AUGMENTS)
    """Augment replayed batches: 'shift' moves image observations by up to 4 pixels
    (DrQ's random shifts, for pixels), 'mirror' mirrors half the transitions of a board
    game whose actions are its columns (the board from dqn.board or the env's
    board_shape: Connect Four), 'none' leaves them as sampled. For the learners that
    sample single transitions: the dqn, iqn and c51 recipes, not on the agents runner."""

    def check(self, cfg: Any) -> None:
        """The agents runner stacks its K agents' batches, which augmentation does not
        reach (a recipe whose learner makes its own batches is refused when built)."""
        if self.augment == "none":
            return
        if cfg.run.runner == "agents":
            raise ConfigError(
                f"config key 'dqn.augment': {self.augment!r} is not on the agents runner "
                "(its K agents' batches are stacked); use 'none'"
            )


@dataclass
class ReplayConfig:
    """The replay buffer and how it is sampled."""

    capacity: int = param(100_000, gt=0, le=MAX_CAPACITY)
    """Transitions kept; the oldest are overwritten."""
    prioritized: bool = False
    """Sample by TD-error priority (proportional PER) instead of uniformly."""
    alpha: float = param(0.6, ge=0.0, le=10.0)
    """Priority exponent: 0 is uniform, 1 fully proportional (at most 10: priorities are
    raised to it, and a larger one overflows them to inf or underflows them to 0)."""
    beta: float = param(0.4, ge=0.0, le=1.0)
    """Initial importance-sampling exponent, annealed to beta_final."""
    beta_final: float = param(1.0, ge=0.0, le=1.0)
    """Importance-sampling exponent at the end of annealing."""
    beta_steps: int = param(50_000, gt=0, le=MAX_STEPS)
    """Sampling calls over which beta anneals."""


APEX_SPREAD = 7.0
"""Ape-X's exploration spread exponent (Horgan et al. 2018)."""


@dataclass
class ExploreConfig:
    """Epsilon-greedy exploration."""

    eps_start: float = param(1.0, ge=0.0, le=1.0)
    """Epsilon at step 0."""
    eps_end: float = param(0.05, ge=0.0, le=1.0)
    """Epsilon after the decay."""
    eps_decay_steps: int = param(10_000, gt=0, le=MAX_STEPS)
    """Env steps over which epsilon decays linearly."""
    noisy: bool = False
    """Explore with noisy layers (factorised Gaussian, Fortunato et al. 2018) instead of
    epsilon: the last hidden layer and the head of shoal's networks learn their own noise,
    drawn afresh at every acting step and loss evaluation (greedy evaluation reads the
    mean weights). Needs eps_start = eps_end = 0."""
    noisy_sigma: float = param(0.5, gt=0.0, le=10.0)
    """The noise's initial scale, sigma0 (each layer starts at sigma0 / sqrt(inputs))."""
    spread: float | None = param(None, ge=0.0, le=100.0)
    """Ape-X's exploration spread over every env of the run (every worker's, actor's or
    world's): env i of N explores at eps ** (1 + spread * i / (N - 1)); 0: all at eps.
    None: the runner's or the recipe's own, the larger (7, Ape-X's, on the ray runner and
    over MAPF's worlds; 0 elsewhere). At most 100, where the last envs' epsilon is 0 in
    all but name. (Before config_version 3:
    processes.eps_spread, ray.eps_alpha and mapf.eps_alpha.)"""

    def spread_for(self, cfg: Any) -> float:
        """The spread a run of ``cfg`` explores with (:attr:`spread` resolved)."""
        if self.spread is not None:
            return self.spread
        from shoal.registry import load_recipe, runner_class

        runner = getattr(runner_class(cfg.run.runner), "spread", 0.0)
        return max(runner, load_recipe(cfg.run.recipe).traits.spread)

    def check(self, cfg: Any) -> None:
        """Noisy layers explore in place of epsilon, on shoal's own networks."""
        if not self.noisy:
            return
        if self.eps_start != 0 or self.eps_end != 0:
            raise ConfigError(
                "config key 'explore.noisy': noisy layers explore in place of epsilon; set "
                f"explore.eps_start = 0 and explore.eps_end = 0 (they are {self.eps_start} and "
                f"{self.eps_end})"
            )
        if cfg.dqn.network:
            raise ConfigError(
                f"config key 'explore.noisy': noisy layers are shoal's network's; "
                f"dqn.network {cfg.dqn.network!r} is your own (add noise in it, or leave "
                "explore.noisy = false)"
            )
        if cfg.run.recipe == "mapf":
            raise ConfigError(
                "config key 'explore.noisy': the 'mapf' recipe's network has no noisy layers"
                " (the 'dqn' and 'iqn' recipes' have)"
            )


@dataclass
class RunConfig:
    """How long to train, when to evaluate and checkpoint, where to write."""

    runner: str = "serial"
    """Training scheme: one of the registered runners (``shoal train --help`` lists them,
    each with its own config section)."""
    recipe: str = param("auto", code="recipe")
    """The agent every runner trains: a registered recipe ('dqn', 'iqn', 'r2d2', 'c51',
    'hybrid', 'mapf'), a 'module:Class' path to your own (a subclass of
    shoal.recipes.dqn.DQNRecipe with its own loss, say, or of
    shoal.recipes.base.ActionValueRecipe), or 'auto': the env's own recipe
    (shoal/Mapf-v0: 'mapf', shoal/HybridTarget-v0: 'hybrid'), else 'dqn'."""
    total_steps: int = param(50_000, gt=0, le=MAX_STEPS)
    """Env steps to train for (the last episode is finished, so a run may go a bit over)."""
    max_minutes: float | None = param(None, gt=0.0, le=1e7)
    """Also stop after this many minutes of training, wall clock, across resumes (None: no
    time limit); for runs measured against a time budget. At most 1e7 (19 years)."""
    learning_starts: int = param(1_000, ge=0, le=MAX_STEPS)
    """Env steps collected before the first gradient step."""
    train_freq: int = param(1, gt=0, le=MAX_STEPS)
    """Env steps between learning phases. One update per env step by default: the replay
    ratio that took the defaults to the presets' level on LunarLander and Acrobot (every 4
    steps left them at 20.8 and -93.2, three seeds' mean); a slow learner on a cheap env
    may want 4."""
    gradient_steps: int = param(1, gt=0, le=MAX_COUNT)
    """Gradient steps per learning phase."""
    replay_ratio: float | None = param(None, gt=0.0, le=1024.0)
    """Gradient updates per env step, replacing train_freq and gradient_steps (none: those
    two). Every runner keeps it; the asynchronous ones (processes, ray) hold it by letting
    whichever side runs ahead wait, so faster actors do not change what the learner learns.
    At most 1024 (the most sample-efficient agents use 2 to 128)."""
    eval_every: int = param(2_000, gt=0, le=MAX_STEPS)
    """Env steps between greedy evaluations."""
    eval_max_share: float = param(0.1, gt=0.0, le=1.0)
    """Most of the run's wall time evaluations may take: an evaluation due by eval_every
    waits while those so far took more than this share (1: never wait). A world with long
    episodes otherwise spends most of its run evaluating."""
    eval_epsilon: float = param(0.0, ge=0.0, le=1.0)
    """Epsilon of evaluation episodes: 0 plays greedily; Atari's protocols play at 0.05
    (Mnih et al. 2015) or 0.001 (Atari 100k), which also frees a greedy policy that never
    presses FIRE to relaunch Breakout's ball. Single-agent envs only."""
    eval_episodes: int | None = param(None, gt=0, le=MAX_BATCH)
    """Episodes per greedy evaluation, played side by side (one batched forward per step);
    none: 20 returns' worth, i.e. 20 episodes of a single-agent env and ceil(20 / agents),
    at least 2, of a multi-agent world, where every episode gives each agent a return (with
    500-turn episodes, 20 of them made each evaluation as long as minutes of training)."""
    stop_return: float | None = param(None, ge=-1e15, le=1e15)
    """Stop once a greedy evaluation's mean return reaches this (None: never stop early);
    -1e15 to 1e15, beyond any env's returns (a float stops counting rewards of 1 at 9e15)."""
    confirm_solve: bool = True
    """Count an evaluation that reaches stop_return as a solve only if as many fresh
    episodes, on starts no evaluation has seen, reach it too (the first evaluation past the
    bar is picked on the noise of its fixed starts)."""
    checkpoint_every: int = param(10_000, gt=0, le=MAX_STEPS)
    """Env steps between checkpoints (taken at the next episode boundary)."""
    seed: int = param(0, ge=0, le=SEED_MAX)
    """Seed for the network, exploration, replay sampling and env resets (0 to 2**63 - 1)."""
    device: str = param("auto", choices=("auto", "cpu", "cuda"))
    """'auto' uses CUDA when present, CPU otherwise."""
    compile: str = param("auto", choices=COMPILE_MODES)
    """How the learner runs an update: 'graph' captures the whole update (loss, gradients,
    clip, optimizer step) once as a CUDA graph and replays it, one launch instead of a few
    hundred (CUDA only); 'compile' puts the loss through torch.compile; 'off' runs it
    eagerly; 'auto' is 'graph' on a GPU and 'off' on a CPU, where compiling measured no
    faster. A network that cannot be captured runs eagerly, with a line saying why."""
    acting_device: str = param("auto", choices=("auto", "learner", "cpu", "cuda"))
    """Where the serial runner acts beside its learner: 'learner' reads the learner's live
    weights on its device (beside a GPU learner each forward waits for the update queued
    before it); 'cpu' or 'cuda' act on a copy refreshed every run.acting_refresh updates
    (on CUDA in a stream of its own: no wait for the update); 'auto' acts on the live
    weights beside a CPU learner and, beside a GPU one, times a batched forward of
    env.num_envs observations on both devices at start-up and takes the faster."""
    acting_refresh: int = param(32, gt=0, le=MAX_STEPS)
    """Updates between refreshes of an acting copy of the weights (run.acting_device)."""
    torch_threads: int = param(1, ge=0, le=4096)
    """torch intra-op threads (0: torch's default); small nets run fastest on 1."""
    out: str = "runs"
    """Directory under which run directories are created."""
    name: str = ""
    """Run name (default: the env id); the run directory is OUT/NAME-TIME."""
    log_every: int = param(1_000, gt=0, le=MAX_STEPS)
    """Env steps between progress-bar refreshes and steps/s rows in metrics.csv."""
    progress: bool = True
    """Show a progress bar."""

    def episodes_per_eval(self, agents: int = 1) -> int:
        """``eval_episodes``, or its default for a world of ``agents`` agents."""
        if self.eval_episodes is not None:
            return self.eval_episodes
        return EVAL_RETURNS if agents <= 1 else max(2, math.ceil(EVAL_RETURNS / agents))


def _registered_sections() -> dict[str, Any]:
    """Default sections of the runners and plug-ins in the registry (each owns its own)."""
    from shoal.registry import config_sections

    return {name: cls() for name, cls in config_sections().items()}


@dataclass
class Config:
    """Everything a run needs; one config feeds every runner.

    The core sections are fields; each runner and plug-in owns its own section (e.g.
    ``[threads]``, ``[processes]``, ``[selfplay]``), kept in ``extra`` and read as an
    attribute like the others (``cfg.threads.learner_threads``).
    """

    env: EnvConfig = field(default_factory=EnvConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    explore: ExploreConfig = field(default_factory=ExploreConfig)
    run: RunConfig = field(default_factory=RunConfig)
    extra: dict[str, Any] = field(default_factory=_registered_sections, repr=False)

    def __getattr__(self, name: str) -> Any:
        extra = self.__dict__.get("extra")
        if extra is not None and name in extra:
            return extra[name]
        raise AttributeError(f"config has no section {name!r}")

    def sections(self) -> list[tuple[str, Any]]:
        """Every section as (name, dataclass), core sections first."""
        core = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)]
        return [(n, s) for n, s in core if n != "extra"] + list(self.extra.items())

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The config as nested plain dicts, as a run's ``config.toml`` and checkpoints keep
        it (:func:`config_to_dict`)."""
        return config_to_dict(self)

    def validate(self) -> Config:
        """Check every field's type and range; raise ConfigError naming the first bad one.

        It rewrites nothing (loading resolves ``run.recipe``) and imports none of the
        code the config names: a received run's config is read
        with it before the user has said they trust the run (:mod:`shoal.run.consent`). A
        section's checks that need the env go in its ``check_env(cfg)``, which the
        runner's preflight calls."""
        from shoal.registry import runner_names

        for name, section in self.sections():
            validate_fields(section, f"{name}.")
        if self.run.runner not in runner_names():  # checked here to cut a long name short
            allowed = ", ".join(show(n) for n in runner_names())
            raise ConfigError(
                f"config key 'run.runner': {show(self.run.runner)} is not one of {allowed}"
            )
        for i, module in enumerate(self.env.imports):
            if not all(part.isidentifier() for part in module.split(".")):
                raise ConfigError(
                    f"config key 'env.imports[{i}]': {show(module)} is not a module name "
                    "(e.g. 'my_pkg.envs')"
                )
        if self.dqn.network and self.dqn.network not in LOCAL_OBJECTS:
            check_path_syntax("dqn.network", self.dqn.network)
        if self.dqn.board and len(self.dqn.board) != 3:
            raise ConfigError(
                f"config key 'dqn.board': {show(self.dqn.board)} must be "
                "[height, width, channels] or empty"
            )
        r = self.run
        for key, value in (("run.compile", r.compile), ("run.acting_device", r.acting_device)):
            refusal = cuda_refusal(key, value, learner=r.device)
            if refusal:
                raise ConfigError(refusal)
        if self.explore.eps_end > self.explore.eps_start:
            raise ConfigError(
                f"config key 'explore.eps_end': {self.explore.eps_end} is larger than "
                f"explore.eps_start={self.explore.eps_start}; epsilon may only decay"
            )
        for _, section in self.sections():
            check = getattr(section, "check", None)
            if callable(check):  # a section's own cross-field rules, given the whole config
                check(self)  # reading only: a check that needs the env is check_env
        return self


def config_to_dict(cfg: Any) -> dict[str, dict[str, Any]]:
    """A config, or any object of sections (a domain's own, as :func:`section_items` reads
    it), as nested plain dicts (TOML has no null: None values are left out)."""
    return {
        name: {
            f.name: getattr(obj, f.name)
            for f in dataclasses.fields(obj)
            if getattr(obj, f.name) is not None
        }
        for name, obj in section_items(cfg)
    }


def section_items(cfg: Any) -> list[tuple[str, Any]]:
    """(name, section) pairs of a :class:`Config` or of any dataclass of sections."""
    if isinstance(cfg, Config):
        return cfg.sections()
    return [(f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg)]
