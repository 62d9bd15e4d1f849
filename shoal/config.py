"""Run configuration: dataclasses whose field docstrings are the ``--help`` text.

One :class:`Config` feeds every runner. It is built from defaults, a named preset or a
TOML file, then ``--set section.key=value`` overrides, and validated as a whole before any
work starts: an unknown key, a wrong type or an out-of-range value raises
:class:`~shoal.errors.ConfigError` naming the key, the value and what is allowed.

Example:
    >>> from shoal.config import load_config
    >>> cfg = load_config("cartpole", overrides=["dqn.lr=5e-4"])
    >>> cfg.dqn.lr
    0.0005
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import reprlib
import sys
import textwrap
import types
import typing
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

from shoal.errors import ConfigError
from shoal.run.files import read_text
from shoal.run.imports import LOCAL_OBJECTS, check_path_syntax

__all__ = [
    "CONFIG_VERSION",
    "Config",
    "DQNConfig",
    "EnvConfig",
    "ExploreConfig",
    "ReplayConfig",
    "RunConfig",
    "config_to_dict",
    "describe_config",
    "load_config",
    "load_run_config",
    "preset_names",
    "param",
    "parse_value",
    "save_config",
    "validate_fields",
]

PRESET_DIR = Path(__file__).parent / "presets"


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""Every integer key is also held to the int64 range, whatever its own rules say: the
values reach numpy and torch (array sizes, seeds, counters), where a larger one overflows
with a traceback deep in a run instead of a message naming the key."""

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
    max_episode_steps: int | None = param(None, gt=0)
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
    target_period: int = param(500, gt=0)
    """Updates between hard target copies."""
    tau: float = param(0.005, gt=0.0, le=1.0)
    """Soft target update rate."""


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
    beta_steps: int = param(50_000, gt=0)
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
    eps_decay_steps: int = param(10_000, gt=0)
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
    None: 7 (Ape-X's) on the ray runner and over MAPF's worlds, 0 elsewhere. At most 100,
    where the last envs' epsilon is 0 in all but name. (Before config_version 3:
    processes.eps_spread, ray.eps_alpha and mapf.eps_alpha.)"""

    def spread_for(self, cfg: Any) -> float:
        """The spread a run of ``cfg`` explores with (:attr:`spread` resolved)."""
        if self.spread is not None:
            return self.spread
        return APEX_SPREAD if cfg.run.runner == "ray" or cfg.run.recipe == "mapf" else 0.0

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
    """The agent every runner trains: a registered recipe ('dqn', 'iqn', 'r2d2', 'mapf'),
    a 'module:Class' path to your own (a subclass of shoal.recipes.dqn.DQNRecipe, say, with
    its own loss), or 'auto': the env's own recipe (shoal/Mapf-v0: 'mapf'), else 'dqn'."""
    total_steps: int = param(50_000, gt=0)
    """Env steps to train for (the last episode is finished, so a run may go a bit over)."""
    max_minutes: float | None = param(None, gt=0.0, le=1e7)
    """Also stop after this many minutes of training, wall clock, across resumes (None: no
    time limit); for runs measured against a time budget. At most 1e7 (19 years)."""
    learning_starts: int = param(1_000, ge=0)
    """Env steps collected before the first gradient step."""
    train_freq: int = param(1, gt=0)
    """Env steps between learning phases. One update per env step by default: the replay
    ratio that took the defaults to the presets' level on LunarLander and Acrobot (every 4
    steps left them at 20.8 and -93.2, three seeds' mean); a slow learner on a cheap env
    may want 4."""
    gradient_steps: int = param(1, gt=0)
    """Gradient steps per learning phase."""
    replay_ratio: float | None = param(None, gt=0.0, le=1024.0)
    """Gradient updates per env step, replacing train_freq and gradient_steps (none: those
    two). Every runner keeps it; the asynchronous ones (processes, ray) hold it by letting
    whichever side runs ahead wait, so faster actors do not change what the learner learns.
    At most 1024 (the most sample-efficient agents use 2 to 128)."""
    eval_every: int = param(2_000, gt=0)
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
    checkpoint_every: int = param(10_000, gt=0)
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
    acting_refresh: int = param(32, gt=0)
    """Updates between refreshes of an acting copy of the weights (run.acting_device)."""
    torch_threads: int = param(1, ge=0, le=4096)
    """torch intra-op threads (0: torch's default); small nets run fastest on 1."""
    out: str = "runs"
    """Directory under which run directories are created."""
    name: str = ""
    """Run name (default: the env id); the run directory is OUT/NAME-TIME."""
    log_every: int = param(1_000, gt=0)
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
    from shoal.runners import config_sections

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

    def validate(self) -> Config:
        """Check every field's type and range; raise ConfigError naming the first bad one.

        It imports none of the code the config names: a received run's config is read
        with it before the user has said they trust the run (:mod:`shoal.run.consent`). A
        section's checks that need the env go in its ``check_env(cfg)``, which the
        runner's preflight calls."""
        from shoal.runners import runner_names

        for name, section in self.sections():
            validate_fields(section, f"{name}.")
        if self.run.runner not in runner_names():  # checked here to cut a long name short
            allowed = ", ".join(_show(n) for n in runner_names())
            raise ConfigError(
                f"config key 'run.runner': {_show(self.run.runner)} is not one of {allowed}"
            )
        from shoal.recipes import resolve_recipe

        # A name or path other processes (workers, shoal eval) can load.
        self.run.recipe = resolve_recipe(self.run.recipe, self.env.id)
        for i, module in enumerate(self.env.imports):
            if not all(part.isidentifier() for part in module.split(".")):
                raise ConfigError(
                    f"config key 'env.imports[{i}]': {_show(module)} is not a module name "
                    "(e.g. 'my_pkg.envs')"
                )
        if self.dqn.network and self.dqn.network not in LOCAL_OBJECTS:
            check_path_syntax("dqn.network", self.dqn.network)
        if self.dqn.board and len(self.dqn.board) != 3:
            raise ConfigError(
                f"config key 'dqn.board': {_show(self.dqn.board)} must be "
                "[height, width, channels] or empty"
            )
        if self.run.compile == "graph" and self.run.device == "cpu":
            raise ConfigError(
                "config key 'run.compile': 'graph' captures the update as a CUDA graph, and "
                "run.device is 'cpu'; use 'auto', 'off' or 'compile'"
            )
        if self.run.acting_device == "cuda" and self.run.device == "cpu":
            raise ConfigError(
                "config key 'run.acting_device': 'cuda' acts on a CUDA copy of the weights, "
                "and run.device is 'cpu'; use 'auto', 'learner' or 'cpu'"
            )
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


def _section_items(cfg: Any) -> list[tuple[str, Any]]:
    """(name, section) pairs of a :class:`Config` or of any dataclass of sections."""
    if isinstance(cfg, Config):
        return cfg.sections()
    return [(f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg)]


def validate_fields(obj: Any, prefix: str = "") -> None:
    """Check (and losslessly convert, e.g. int -> float, 1e5 -> 100000) every field of a
    config dataclass against its type and ``param`` rules; ConfigError names
    ``prefix + field``, the bad value and what is allowed."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        key = f"{prefix}{f.name}"
        setattr(obj, f.name, _check_value(key, getattr(obj, f.name), hints[f.name], f.metadata))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


class _ShortRepr(reprlib.Repr):
    """repr() cut short, so that a huge or deeply nested value gives a one-line message
    (reprlib also keeps repr's escapes: a newline in a value never splits the line)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict = 3, 8, 8, 6
        self.maxstring, self.maxother, self.maxlong = 80, 80, 60

    def repr_int(self, x: int, level: int) -> str:
        # Python refuses to print an int of more than 4300 digits (ValueError).
        if x.bit_length() > 14_000:
            return f"<an integer of about {int(x.bit_length() * math.log10(2)) + 1} digits>"
        return super().repr_int(x, level)


_short_repr = _ShortRepr()


def _show(value: Any) -> str:
    """``value`` as a message shows it: its repr, cut short."""
    return _short_repr.repr(value)


_SINGULAR = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
_PLURAL = {int: "integers", float: "numbers", bool: "true/false values", str: "strings"}


def _type_name(tp: Any, rules: Mapping[str, Any] | None = None) -> str:
    """What a value of type ``tp`` must be, in words (with a key's choices, if any)."""
    origin = typing.get_origin(tp)
    if origin is dict:
        return "a table of names to values (e.g. {size = 8})"
    if origin is list:
        inner = typing.get_args(tp)[0]
        return f"a list of {_PLURAL.get(inner) or _type_name(inner)}"
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return " or ".join(_type_name(a, rules) for a in args) + " or none"
    if rules and "choices" in rules:
        return "one of " + ", ".join(_show(c) for c in rules["choices"])
    return _SINGULAR.get(tp) or f"a {getattr(tp, '__name__', tp)}"


def _check_value(key: str, value: Any, tp: Any, rules: Mapping[str, Any]) -> Any:
    """``value`` checked against type ``tp`` and ``rules`` and converted where lossless;
    ConfigError names the key, the value and what is allowed."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise ConfigError(f"config key '{key}': expected {_type_name(tp)}, got {_show(value)}")
        return dict(value)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key '{key}': expected {_type_name(tp)}, got {_show(value)}")
        if not value and not rules.get("allow_empty", False):
            raise ConfigError(
                f"config key '{key}': must not be empty; allowed: {_type_name(tp)}, at least one"
            )
        return [_check_value(f"{key}[{i}]", v, args[0], rules) for i, v in enumerate(value)]
    if type(None) in args:
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        inner = next(a for a in args if a is not type(None))
        converted = _convert(key, value, inner, rules, or_none=True)
        _check_bounds(key, converted, value, rules)
        return converted
    converted = _convert(key, value, tp, rules)
    _check_bounds(key, converted, value, rules)
    return converted


def _convert(
    key: str, value: Any, tp: Any, rules: Mapping[str, Any], *, or_none: bool = False
) -> Any:
    """``value`` as a scalar of type ``tp`` where that is lossless, else ConfigError
    (saying that none would do too, for an optional key)."""

    def wrong(what: str = "") -> ConfigError:
        expected = (what or _type_name(tp, rules)) + (" or none" if or_none else "")
        return ConfigError(f"config key '{key}': expected {expected}, got {_show(value)}")

    if tp is bool:
        if not isinstance(value, bool):
            raise wrong()
        return value
    if tp is int:
        # bool is an int subclass, but `true` for a count is a slip, not a number.
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float):
            # 1e5 and 100000.0 are written as floats but name an integer exactly; 1.5,
            # inf and nan name none.
            if math.isfinite(value) and value.is_integer():
                return int(value)
            raise wrong("an integer (a whole number, e.g. 1000 or 1e3)")
        raise wrong()
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise wrong()
        try:
            number = float(value)
        except OverflowError:  # an int beyond float's range (~1.8e308)
            number = math.inf
        if not math.isfinite(number):
            raise wrong("a finite number")
        return number
    if tp is str:
        if not isinstance(value, str):
            raise wrong()
        # A NUL, a newline or an escape sequence in a name or path breaks the run
        # directory and the logs, and a lone surrogate (undecodable command-line bytes)
        # cannot even be written out as UTF-8.
        bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cs")), None)
        if bad is not None:
            raise ConfigError(
                f"config key '{key}': {_show(value)} holds the character {bad!r}; "
                "allowed: UTF-8 text without control characters"
            )
        return value
    if isinstance(tp, type) and isinstance(value, tp):  # a field type without rules here
        return value
    raise wrong()


_OPS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _bounds(value: Any, rules: Mapping[str, Any]) -> tuple[Any, str | None, Any, str | None]:
    """(lower, "gt"/"ge", upper, "lt"/"le") in force for ``value``: the tightest of the
    declared ones, and for an integer the int64 range too (None where there is none)."""
    lower: tuple[Any, str | None] = (None, None)
    upper: tuple[Any, str | None] = (None, None)
    if isinstance(value, int) and not isinstance(value, bool):
        lower, upper = (INT64_MIN, "ge"), (INT64_MAX, "le")
    for op in ("ge", "gt"):
        if op in rules:
            b = rules[op]
            # A higher bound is tighter; at the same bound, "gt" (open) is tighter.
            if lower[0] is None or b > lower[0] or (b == lower[0] and op == "gt"):
                lower = (b, op)
    for op in ("le", "lt"):
        if op in rules:
            b = rules[op]
            if upper[0] is None or b < upper[0] or (b == upper[0] and op == "lt"):
                upper = (b, op)
    return lower[0], lower[1], upper[0], upper[1]


def _allowed_range(lo: Any, lo_op: str | None, hi: Any, hi_op: str | None) -> str:
    """Bounds in words: ``0.0 <= value <= 1.0``, ``> 0`` or ``< 1``."""
    if lo_op and hi_op:
        return f"{lo} {'<' if lo_op == 'gt' else '<='} value {_OPS[hi_op]} {hi}"
    if lo_op:
        return f"{_OPS[lo_op]} {lo}"
    if hi_op:
        return f"{_OPS[hi_op]} {hi}"
    return "any value"


def _check_bounds(key: str, value: Any, shown: Any, rules: Mapping[str, Any]) -> None:
    """ConfigError unless ``value`` (shown as the ``shown`` the user gave) is within the
    bounds and choices of ``rules``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, lo_op, hi, hi_op = _bounds(value, rules)
        ok = (lo_op is None or (value > lo if lo_op == "gt" else value >= lo)) and (
            hi_op is None or (value < hi if hi_op == "lt" else value <= hi)
        )
        if not ok:
            raise ConfigError(
                f"config key '{key}': {_show(shown)} is out of range; "
                f"allowed: {_allowed_range(lo, lo_op, hi, hi_op)}"
            )
    if "choices" in rules and value not in rules["choices"]:
        allowed = ", ".join(_show(c) for c in rules["choices"])
        raise ConfigError(f"config key '{key}': {_show(shown)} is not one of {allowed}")


def config_to_dict(cfg: Config) -> dict[str, dict[str, Any]]:
    """The config as nested plain dicts (TOML has no null: None values are left out)."""
    out: dict[str, dict[str, Any]] = {}
    for name, obj in _section_items(cfg):
        out[name] = {
            f.name: getattr(obj, f.name)
            for f in dataclasses.fields(obj)
            if getattr(obj, f.name) is not None
        }
    return out


def _apply(cfg: Config, data: Mapping[str, Any], source: str) -> None:
    """Set ``data``'s ``{section: {key: value}}`` on ``cfg`` as given (checked later, by
    validation); ConfigError for an unknown section or key, naming ``source``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a table of sections, got {_show(data)}")
    sections = {name for name, _ in _section_items(cfg)}
    for name, values in data.items():
        if name not in sections:
            raise ConfigError(
                f"{source}: unknown config section {_show(name)}; "
                f"allowed: {', '.join(sorted(sections))}"
            )
        if not isinstance(values, Mapping):
            raise ConfigError(
                f"{source}: {_show(name)} must be a table of keys, got {_show(values)}"
            )
        obj = getattr(cfg, name)
        keys = {f.name for f in dataclasses.fields(obj)}
        for key, value in values.items():
            if f"{name}.{key}" in RENAMED_KEYS:
                raise ConfigError(
                    f"{source}: config key {_show(f'{name}.{key}')} is now "
                    f"{RENAMED_KEYS[f'{name}.{key}']!r} (one key for every runner and recipe)"
                )
            if key not in keys:
                raise ConfigError(
                    f"{source}: unknown config key {_show(f'{name}.{key}')}; keys of [{name}]: "
                    f"{', '.join(sorted(keys))}"
                )
            setattr(obj, key, value)


def _apply_file(cfg: Config, path: Path, source: str, chain: tuple[Path, ...]) -> None:
    """Apply the TOML file at ``path``, after the config its top-level ``extends`` names (a
    preset, or a TOML file relative to this one), so a variant of a preset states only what
    it changes. ``chain`` holds the files that extend this one (a cycle is an error)."""
    data = read_toml(path)
    version = data.pop("config_version", CONFIG_VERSION)  # a saved run's: load_run_config
    if type(version) is not int or not 1 <= version <= CONFIG_VERSION:
        raise ConfigError(
            f"{source}: 'config_version' is {_show(version)}; allowed: 1 to {CONFIG_VERSION} "
            "(a config saved by a newer shoal?)"
        )
    if version < 3:
        _move_renamed(data)
    base = data.pop("extends", None)
    if base is not None:
        if not isinstance(base, str) or not base:
            raise ConfigError(
                f"{source}: 'extends' must name a preset ({', '.join(preset_names())}) or a "
                f"TOML file, got {_show(base)}"
            )
        named = f"{source}: 'extends' = {_show(base)}"
        if base in preset_names():
            base_path, base_source = PRESET_DIR / f"{base}.toml", f"preset '{base}'"
        else:
            base_path = path.parent / base
            base_source = f"config file {str(base_path)!r}"
        try:
            here, there = path.resolve(), base_path.resolve()
            found = base_path.is_file()
        except (OSError, ValueError, RuntimeError) as e:  # a NUL, a loop of links
            raise ConfigError(f"{named}: not a path ({_one_line(str(e))})") from None
        if not found:
            raise ConfigError(
                f"{named}: no such preset ({', '.join(preset_names())}) or file {str(there)!r}"
            )
        if there in (*chain, here):
            raise ConfigError(f"{named} makes a cycle")
        _apply_file(cfg, base_path, base_source, (*chain, here))
        borrowed = (cfg.env.id, cfg.run.name) if base in preset_names() else None
    else:
        borrowed = None
    _apply(cfg, data, source)
    # A file extending a preset for another env (naming no run) names its runs after the
    # env, as a preset borrowed with --env does.
    if borrowed is not None and cfg.env.id != borrowed[0] and cfg.run.name == borrowed[1]:
        cfg.run.name = ""


def _apply_override(holder: Any, text: str, source: str) -> None:
    """Apply one ``SECTION.KEY=VALUE`` override to ``holder``, a :class:`Config` or a
    dataclass of sections; errors name ``source``."""
    section, key, raw = _parse_override(text)
    value = parse_value(raw)
    if not isinstance(value, str) and _is_text_key(holder, section, key):
        # `--set run.name=2024` names a run "2024": TOML alone would read an integer (or a
        # date, nan, true), which a text key then rejects.
        value = raw.strip()
    _apply(holder, {section: {key: value}}, source)


def _is_text_key(holder: Any, section: str, key: str) -> bool:
    """Whether ``section.key`` exists in ``holder`` and holds text (``str`` or ``str | None``)."""
    obj = dict(_section_items(holder)).get(section)
    if obj is None or key not in {f.name for f in dataclasses.fields(obj)}:
        return False
    tp = _hints(type(obj))[key]
    return tp is str or (
        typing.get_origin(tp) in (typing.Union, types.UnionType)
        and set(typing.get_args(tp)) == {str, type(None)}
    )


def _parse_override(text: str) -> tuple[str, str, str]:
    """``SECTION.KEY=VALUE`` as (section, key, the value's text)."""
    if not isinstance(text, str):
        raise ConfigError(f"override {_show(text)}: expected a string SECTION.KEY=VALUE")
    if "=" not in text:
        raise ConfigError(f"override {_show(text)}: expected SECTION.KEY=VALUE, e.g. dqn.lr=1e-3")
    path, raw = text.split("=", 1)
    parts = [p.strip() for p in path.split(".")]
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"override {_show(text)}: the key must be SECTION.KEY, e.g. dqn.lr")
    return parts[0], parts[1], raw


def parse_value(raw: str) -> Any:
    """A command-line value parsed as TOML; a bare word (`soft`, `CartPole-v1`) is a string.

    Text that is not one TOML value stays a string, for validation to reject where a
    string does not belong: a second key smuggled in after a newline (``1\\nx = 2``, which
    TOML would read as 1 and drop the rest), an integer of more than 4300 digits (Python
    refuses to read one) and nesting deeper than the parser's recursion.
    """
    raw = raw.strip()
    try:
        doc = tomllib.loads(f"v = {raw}")
    except (ValueError, RecursionError):  # TOMLDecodeError is a ValueError
        return raw
    return doc["v"] if doc.keys() == {"v"} else raw


def preset_names() -> list[str]:
    """Names of the bundled presets (``shoal train NAME``)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML document in ``path``; ConfigError naming the file for one that is missing,
    unreadable, not UTF-8 or not TOML."""
    text = read_text(path, "config file", ConfigError, allowed="a TOML file in UTF-8")
    where = f"config file {str(path)!r}"  # repr: a newline in a name stays one line
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where} is not valid TOML: {_one_line(str(e))}") from None
    except RecursionError:
        raise ConfigError(f"{where} is not valid TOML: its values nest too deeply") from None
    except ValueError:  # Python will not read an integer of more than 4300 digits
        raise ConfigError(f"{where} is not valid TOML: it holds a number too long") from None


def _one_line(text: str) -> str:
    """``text`` with its lines joined, so a message is always one line."""
    return " ".join(text.split())


def _is_path(src: str) -> bool:
    """Whether ``src`` names an existing file, or one whose existence cannot be checked
    (a path too long, behind a directory that cannot be read, holding a NUL): reading it
    then says what is wrong with it."""
    try:
        return Path(src).exists()
    except (OSError, ValueError):
        return True


def load_config(
    source: str | Path | None = None,
    overrides: typing.Sequence[str] = (),
    values: typing.Mapping[str, typing.Mapping[str, Any]] | None = None,
) -> Config:
    """Build and validate a config.

    Every bad input (a missing, unreadable or malformed file, an unknown section or key, a
    value of the wrong type or out of range) raises a one-line
    :class:`~shoal.errors.ConfigError` naming the key or the file, the value and what is
    allowed.

    Args:
        source: a preset name (see :func:`preset_names`), a path to a TOML file, or None
            for the defaults.
        overrides: ``SECTION.KEY=VALUE`` strings; values are parsed as TOML (bare words
            are strings), applied after the source.
        values: nested ``{section: {key: value}}`` applied after the source and before the
            overrides.
    """
    if isinstance(overrides, str):  # a lone string would be applied character by character
        raise ConfigError(
            f"overrides {_show(overrides)}: expected a list of SECTION.KEY=VALUE strings"
        )
    cfg = Config()
    borrowed: tuple[str, str] | None = None
    if source is not None:
        src = str(source)
        if src in preset_names():
            _apply_file(cfg, PRESET_DIR / f"{src}.toml", f"preset '{src}'", ())
            borrowed = (cfg.env.id, cfg.run.name)
        elif src.endswith(".toml") or _is_path(src):
            _apply_file(cfg, Path(src), f"config file {src!r}", ())
        else:
            raise ConfigError(
                f"{src!r} is neither a preset ({', '.join(preset_names())}) nor a TOML file"
            )
    if values:
        _apply(cfg, values, "config")
    for text in overrides:
        _apply_override(cfg, text, f"override {_show(text)}")
    named = bool(values and "name" in values.get("run", {})) or any(
        _parse_override(text)[:2] == ("run", "name") for text in overrides
    )
    if borrowed is not None and cfg.env.id != borrowed[0] and not named:
        # A preset borrowed for another env (`shoal train atari --env ALE/Pong-v5`): the
        # preset's run name would call Pong's runs "atari"; the env's id names them.
        cfg.run.name = ""
    return cfg.validate()


CONFIG_VERSION = 3
"""The defaults a saved run config was written under (its top-level ``config_version``;
none: 1). A run's config holds every key, so a default changed since reads there like a
choice; a section lists such changes in ``CHANGED_DEFAULTS`` and :func:`load_run_config`
reads an older run's old default as today's. 2: ``mapf.shield_guide`` 0 -> 3. 3: the Ape-X
spread's three keys are one, ``explore.spread``, and MAPF's sequences are ``[r2d2]``'s
(:data:`RENAMED_KEYS`)."""

RENAMED_KEYS = {
    "processes.eps_spread": "explore.spread",
    "ray.eps_alpha": "explore.spread",
    "mapf.eps_alpha": "explore.spread",
    "mapf.length": "r2d2.length",
    "mapf.burn_in": "r2d2.burn_in",
    "mapf.period": "r2d2.period",
    "mapf.eta": "r2d2.eta",
}
"""Keys gone in config_version 3 -> the key that holds their value now."""

_OLD_SPREADS = {"processes.eps_spread": 0.0, "ray.eps_alpha": 7.0, "mapf.eps_alpha": 7.0}
"""The old spread keys' defaults, which read as ``explore.spread``'s None today."""


def _move_renamed(data: dict[str, Any]) -> None:
    """A config written before version 3: each old key the run read (a ``[mapf]`` key in
    a MAPF run, a runner's spread in its runner's run) moves to its new key, unless it is
    an old spread at its default (``explore.spread``'s None resolves to the same); the keys
    it did not read had no effect and are dropped."""
    run = data.get("run") if isinstance(data.get("run"), Mapping) else {}
    env = data.get("env") if isinstance(data.get("env"), Mapping) else {}
    recipe = run.get("recipe", "auto")
    mapf = recipe == "mapf" or (recipe == "auto" and env.get("id") == "shoal/Mapf-v0")
    for old, new in RENAMED_KEYS.items():
        section, key = old.split(".")
        values = data.get(section)
        if not isinstance(values, dict) or key not in values:
            continue
        value = values.pop(key)
        read = mapf if section == "mapf" else (not mapf and run.get("runner") == section)
        if read and value != _OLD_SPREADS.get(old, object()):
            new_section, new_key = new.split(".")
            data.setdefault(new_section, {})[new_key] = value


def save_config(cfg: Any, path: Path, *, section: str | None = None) -> None:
    """Write a resolved config as TOML, atomically (temp file, fsync, rename), so a crash
    never leaves a run directory with half a config.

    ``cfg`` is a :class:`Config` (written with its :data:`CONFIG_VERSION`); with
    ``section``, it is one section dataclass written as the ``[section]`` table (read it
    back with :func:`load_section`).
    """
    import tomli_w

    from shoal.run.files import atomic_write_text

    if section is not None:
        data: dict[str, Any] = config_to_dict(_sections(section, cfg))
    else:
        data = {"config_version": CONFIG_VERSION, **config_to_dict(cfg)}
    atomic_write_text(path, tomli_w.dumps(data))


def load_run_config(path: Path, overrides: typing.Sequence[str] = ()) -> Config:
    """A run directory's saved config (``overrides`` on top): where it was written under
    an older :data:`CONFIG_VERSION`, a key still at the default of its time that has
    changed since (a section's ``CHANGED_DEFAULTS``) takes today's, as if the run had
    been made today; a value the run chose stays. A link is refused, not followed (a run
    directory is shared data)."""
    from shoal.run.files import link_refused
    from shoal.run.imports import reading_imports_nothing

    if Path(path).is_symlink():
        raise ConfigError(link_refused(path))
    version = read_toml(path).get("config_version", 1)
    with reading_imports_nothing(f"config '{path}'"):
        cfg = load_config(path)
    for _, section in cfg.sections():
        changed = getattr(type(section), "CHANGED_DEFAULTS", {})
        defaults = {f.name: f for f in dataclasses.fields(section)}
        for key, (since, old) in changed.items():
            if version < since and getattr(section, key) == old:
                f = defaults[key]
                fresh = f.default_factory() if f.default is dataclasses.MISSING else f.default
                setattr(section, key, fresh)
    if not overrides:
        return cfg
    with reading_imports_nothing(f"config '{path}'"):
        return load_config(None, overrides, values=config_to_dict(cfg))


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal right below it in the class body)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def describe_config(cfg: Config | None = None) -> str:
    """Every config key with its type, current value and docstring, for ``--help``."""
    cfg = cfg or Config()
    lines = []
    for name, obj in _section_items(cfg):
        lines.append(f"[{name}] {inspect.getdoc(type(obj))}")
        docs = field_docs(type(obj))
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            lines.append(f"  {name}.{f.name} = {value!r}")
            lines.append(f"      {docs.get(f.name, '')}{_registered(name, f.name)}")
    return "\n".join(lines)


def _registered(section: str, key: str) -> str:
    """What the registry allows for a key whose values are registered, not fixed."""
    if (section, key) != ("run", "runner"):
        return ""
    from shoal.runners import runner_names

    return f" Registered: {', '.join(runner_names())}."


@functools.cache
def _sections_class(name: str, cls: type) -> type:
    return dataclasses.make_dataclass(
        f"{cls.__name__}Sections", [(name, cls, field(default_factory=cls))]
    )


def _sections(name: str, obj: Any) -> Any:
    """``obj`` as the one section ``name`` of a config, so that the machinery written for
    :class:`Config` (``_apply``, :func:`config_to_dict`, :func:`describe_config`) serves a
    section that lives on its own, with the same rules and messages."""
    return _sections_class(name, type(obj))(obj)


_Section = typing.TypeVar("_Section")


def load_section(
    cls: type[_Section],
    name: str,
    source: str | Path | None = None,
    overrides: typing.Sequence[str] = (),
    values: typing.Mapping[str, Any] | None = None,
) -> _Section:
    """Build and validate one config section that lives on its own (e.g. ``[sudoku]``).

    The same machinery as :func:`load_config`, so one config system with one set of rules
    and messages: ``source`` is a TOML file holding only the ``[name]`` table; ``values``
    (``{key: value}``) come next; ``overrides`` (``KEY=VALUE`` or ``NAME.KEY=VALUE``, the
    value parsed as TOML) come last. Unknown sections and keys, wrong types and out-of-range
    values raise ConfigError naming the key, the value and what is allowed. The section is
    checked by its own ``validate()`` when it has one, else by :func:`validate_fields`.

    Example:
        >>> @dataclass
        ... class Demo:
        ...     lr: float = param(0.1, gt=0.0)
        >>> load_section(Demo, "demo", overrides=["lr=0.5"]).lr
        0.5
        >>> load_section(Demo, "demo", overrides=["demo.lr=-1"])
        Traceback (most recent call last):
        ...
        shoal.errors.ConfigError: config key 'demo.lr': -1 is out of range; allowed: > 0.0
        >>> load_section(Demo, "demo", overrides=["run.seed=1"])
        Traceback (most recent call last):
        ...
        shoal.errors.ConfigError: override 'run.seed=1': unknown config section 'run'; allowed: demo
    """
    if isinstance(overrides, str):  # a lone string would be applied character by character
        raise ConfigError(f"overrides {_show(overrides)}: expected a list of KEY=VALUE strings")
    holder = _sections(name, cls())
    if source is not None:
        _apply(holder, read_toml(Path(source)), f"config file {str(source)!r}")
    if values:
        _apply(holder, {name: values}, "config")
    for text in overrides:
        qualified = text
        if isinstance(text, str):
            key, eq, _ = text.partition("=")
            qualified = text if "." in key or not eq else f"{name}.{text.lstrip()}"
        _apply_override(holder, qualified, f"override {_show(text)}")
    obj = getattr(holder, name)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate()
    else:
        validate_fields(obj, f"{name}.")
    return obj


def describe_section(obj: Any, name: str) -> str:
    """Every key of one section on its own, as :func:`describe_config` lists a config's,
    for ``--help``."""
    return describe_config(_sections(name, obj))


__all__ += ["describe_section", "load_section", "read_toml"]
