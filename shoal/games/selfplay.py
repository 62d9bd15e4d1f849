"""Self-play opponent pool: snapshots of earlier policies for two-player games.

The learner keeps the pool. Every few batches it adds a snapshot of its online weights
(the oldest is dropped beyond ``size``); before each batch it samples one opponent, which
the workers load and play against. Sampling modes:

* ``latest``: the newest snapshot (classic self-play; can cycle);
* ``uniform``: any snapshot (fictitious-play flavour: keeps old weaknesses covered);
* ``winrate``: snapshots the learner beats least are drawn more, with weight
  ``1 - win_rate + 0.05`` (a floor, so no snapshot is ever starved).

The learner's results against each snapshot (+1, 0, -1 per game) are recorded, which both
feeds ``winrate`` sampling and is reported.

:class:`SelfPlay` is the plug-in the processes runner takes when ``[selfplay]`` is enabled
(the runner itself imports no game): it keeps the pool, publishes the sampled opponent to
the workers through a second weight store, loads it into each worker's env
(:class:`OpponentLoader`) and adds the two-player record to every evaluation.

Example:
    >>> import torch
    >>> pool = OpponentPool(size=2, mode="winrate", seed=0)
    >>> a = pool.add({"w": torch.zeros(1)}); b = pool.add({"w": torch.ones(1)})
    >>> pool.record(a, 1.0); pool.record(b, -1.0)
    >>> sorted(pool.win_rates().items())
    [(0, 1.0), (1, 0.0)]
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.config import MAX_COUNT, MAX_STEPS, param
from shoal.errors import ConfigError
from shoal.run.seeding import SeedStream, derive_seed

if TYPE_CHECKING:  # torch loads with the plug-in's work, not with the config section
    import torch

__all__ = ["SAMPLING_MODES", "OpponentLoader", "OpponentPool", "SelfPlay", "SelfPlayConfig"]

SAMPLING_MODES = ("latest", "uniform", "winrate")
RANDOM, HEURISTIC = -1, -2
"""Opponent ids of the scripted players (pool snapshots have ids >= 0)."""


class OpponentPool:
    """Snapshots of the learner's weights, with per-snapshot game records."""

    def __init__(self, size: int, mode: str = "uniform", seed: int = 0) -> None:
        if size <= 0:
            raise ValueError(f"OpponentPool size: {size!r} is out of range; allowed: > 0")
        if mode not in SAMPLING_MODES:
            raise ValueError(f"OpponentPool mode: {mode!r} is not one of {SAMPLING_MODES}")
        self.size, self.mode = size, mode
        self._rng = np.random.default_rng(seed)
        self._snapshots: OrderedDict[int, dict[str, torch.Tensor]] = OrderedDict()
        self._games: dict[int, list[float]] = {}
        self._next_id = 0

    def __len__(self) -> int:
        return len(self._snapshots)

    def add(self, state: Mapping[str, torch.Tensor]) -> int:
        """Store a copy of ``state``; returns its snapshot id (ids only go up)."""
        sid = self._next_id
        self._next_id += 1
        self._snapshots[sid] = {k: v.detach().cpu().clone() for k, v in state.items()}
        self._games[sid] = [0.0, 0.0]  # [games, summed results]
        while len(self._snapshots) > self.size:
            old, _ = self._snapshots.popitem(last=False)
            self._games.pop(old, None)
        return sid

    def sample(self) -> tuple[int, dict[str, torch.Tensor]] | None:
        """An opponent (id, weights) by the pool's mode; None while the pool is empty."""
        if not self._snapshots:
            return None
        ids = list(self._snapshots)
        if self.mode == "latest":
            sid = ids[-1]
        elif self.mode == "uniform":
            sid = ids[int(self._rng.integers(len(ids)))]
        else:
            rates = self.win_rates()
            weight = np.array([1.0 - rates.get(i, 0.5) + 0.05 for i in ids])
            sid = ids[int(self._rng.choice(len(ids), p=weight / weight.sum()))]
        return sid, self._snapshots[sid]

    def record(self, snapshot: int, result: float) -> None:
        """One game's result for the learner against ``snapshot`` (+1 win, 0 draw, -1 loss);
        results against snapshots already dropped are ignored."""
        if snapshot in self._games:
            self._games[snapshot][0] += 1
            self._games[snapshot][1] += float(result)

    def win_rates(self) -> dict[int, float]:
        """Per snapshot with games: the learner's score rate in [0, 1] (draw = 0.5)."""
        return {
            sid: 0.5 + 0.5 * total / games
            for sid, (games, total) in self._games.items()
            if games > 0
        }

    def state_dict(self) -> dict[str, Any]:
        """Snapshots, records and the sampling RNG (for checkpoints)."""
        return {
            "snapshots": dict(self._snapshots),
            "games": {k: list(v) for k, v in self._games.items()},
            "next_id": self._next_id,
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self._snapshots = OrderedDict(sorted(state["snapshots"].items()))
        self._games = {int(k): list(v) for k, v in state["games"].items()}
        self._next_id = int(state["next_id"])
        self._rng.bit_generator.state = state["rng"]


@dataclass
class SelfPlayConfig:
    """Self-play for two-player envs (processes runner): an opponent pool of snapshots."""

    enabled: bool = False
    """Play against snapshots of earlier policies (the env must accept an opponent)."""
    snapshot_every: int = param(10, gt=0, le=MAX_STEPS)
    """Learner batches between snapshots added to the pool."""
    pool_size: int = param(10, gt=0, le=MAX_COUNT)
    """Snapshots kept; the oldest is dropped beyond this."""
    sampling: str = param("uniform", choices=("latest", "uniform", "winrate"))
    """How each batch's opponent is drawn from the pool."""
    random_fraction: float = param(0.2, ge=0.0, le=1.0)
    """Share of batches played against the random player instead of the pool."""
    heuristic_fraction: float = param(0.0, ge=0.0, le=1.0)
    """Share of batches played against the game's one-step-lookahead heuristic (win if it
    can, else block, else random) instead of the pool: a fixed, sound opponent that a pool
    of the learner's own snapshots may never resemble."""

    def check(self, cfg: Any) -> None:
        """Reject a self-play config that cannot work, before any work starts."""
        if not self.enabled:
            return
        if self.random_fraction + self.heuristic_fraction > 1.0:
            raise ConfigError(
                "config keys 'selfplay.random_fraction' and 'selfplay.heuristic_fraction': "
                f"{self.random_fraction} + {self.heuristic_fraction} is over 1; the two are "
                "shares of the same batches"
            )
        if cfg.run.runner != "processes":
            raise ConfigError(
                f"config key 'selfplay.enabled': needs run.runner = 'processes', "
                f"got {cfg.run.runner!r}"
            )
        if cfg.env.vector != "sync":
            raise ConfigError(
                f"config key 'selfplay.enabled': needs env.vector = 'sync' (the opponent is "
                f"loaded into each env in the worker), got {cfg.env.vector!r}"
            )

    def check_env(self, cfg: Any) -> None:
        """The env has an opponent to replace (made once to see; at the runner's
        preflight, not while the config is checked: reading a config imports nothing),
        and the recipe's network plays one observation at a time, as the pool's
        snapshots are played."""
        if not self.enabled:
            return
        from shoal.envs import make_env
        from shoal.registry import recipe_for

        if recipe_for(cfg).traits.recurrent:
            raise ConfigError(
                f"config key 'selfplay.enabled': the {cfg.run.recipe!r} recipe's network"
                " carries a memory, and the opponent pool plays its snapshots one"
                " observation at a time; self-play takes a memoryless recipe ('dqn',"
                " 'iqn', 'c51')"
            )

        env = make_env(cfg.env)
        try:
            if not hasattr(env.unwrapped, "set_opponent"):
                raise ConfigError(
                    f"config key 'selfplay.enabled': env {cfg.env.id!r} has no opponent to "
                    "replace (two-player envs such as shoal/ConnectFour-v0 do)"
                )
        finally:
            env.close()

    def build(self, cfg: Any, template: Mapping[str, torch.Tensor]) -> SelfPlay:
        """The plug-in for a run of ``cfg``."""
        return SelfPlay(self, template, seed=cfg.run.seed, games=cfg.run.episodes_per_eval())


class SelfPlay:
    """The self-play plug-in of the processes runner (see the module docstring)."""

    def __init__(
        self,
        cfg: SelfPlayConfig,
        template: Mapping[str, torch.Tensor],
        *,
        seed: int,
        games: int = 20,
    ) -> None:
        from shoal.sync.weights import SharedWeightStore

        self.cfg = cfg
        self.pool = OpponentPool(cfg.pool_size, cfg.sampling, seed=seed)
        self.opponents = SharedWeightStore(template, meta_keys=("opponent",))
        self._rng = np.random.default_rng(derive_seed(seed, SeedStream.SELFPLAY))
        self.seed = seed
        self.games = games

    def worker_part(self) -> OpponentLoader:
        """What each rollout worker gets: loads the published opponent into its env."""
        return OpponentLoader(self.opponents)

    def on_episode(self, meta: Mapping[str, float], final_reward: float) -> None:
        """Record the learner's result (the episode's last reward) against the snapshot
        the episode was played with."""
        opponent = int(meta.get("opponent", RANDOM))
        if opponent >= 0:
            self.pool.record(opponent, float(final_reward))

    def on_publish(self, weights: Mapping[str, torch.Tensor], batches: int) -> None:
        """Snapshot every ``snapshot_every`` batches; publish the next batch's opponent."""
        if batches > 0 and batches % self.cfg.snapshot_every == 0:
            self.pool.add(weights)
        # One draw picks the batch's opponent: [0, random) the random player, then the
        # heuristic's share, then the pool (the random player while the pool is empty).
        draw = self._rng.random()
        heuristic_end = self.cfg.random_fraction + self.cfg.heuristic_fraction
        choice = None if draw < heuristic_end else self.pool.sample()
        if choice is None:
            heuristic = self.cfg.random_fraction <= draw < heuristic_end
            self.opponents.publish(weights, {"opponent": HEURISTIC if heuristic else RANDOM})
        else:
            self.opponents.publish(choice[1], {"opponent": choice[0]})

    def eval_metrics(self, actor: Any) -> dict[str, float]:
        """Win rates against the random and the one-step-lookahead player, as first and
        as second player, and the pool size."""
        from shoal.envs.connect_four import heuristic_player, play_match, random_player

        games = self.games
        out: dict[str, float] = {"pool_size": float(len(self.pool))}
        for name, opponent in (("random", random_player), ("heuristic", heuristic_player)):
            for first in (True, False):
                rec = play_match(
                    lambda obs: int(actor.greedy(obs[None])[0]),
                    opponent,
                    games,
                    learner_first=first,
                    seed=self.seed,
                )
                out[f"win_{name}_{'first' if first else 'second'}"] = rec["win"]
        return out

    def state_dict(self) -> dict[str, Any]:
        """The pool (snapshots and records) and the opponent-choice generator."""
        return {"pool": self.pool.state_dict(), "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.pool.load_state_dict(state["pool"])
        self._rng.bit_generator.state = state["rng"]

    def close(self) -> None:
        """Release the opponents' shared memory; safe to call twice."""
        self.opponents.close()


class OpponentLoader:
    """Worker side of :class:`SelfPlay`: before each episode, load the newest published
    opponent (a pool snapshot, greedy over legal moves, the random player or the
    heuristic) into the env's other seat."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.version = -1
        self.opponent = RANDOM
        self.policy: Callable[..., int] | None = None
        self.loaded: dict[int, int] = {}
        """Version of the opponent each env (by id) plays against: a worker's envs begin
        their episodes at different times, each loads the newest when it does."""

    def before_episode(self, env: Any, actor: Any) -> dict[str, float]:
        """Load the newest published opponent into ``env`` if it plays an older one;
        returns the episode's meta (the opponent's snapshot id)."""
        got = self.store.pull(self.version)
        if got is not None:
            self.version, self.opponent = got.version, int(got.meta["opponent"])
            self.policy = self._policy(actor, got.state)
        if self.policy is not None and self.loaded.get(id(env)) != self.version:
            env.unwrapped.set_opponent(self.policy)
            self.loaded[id(env)] = self.version
        return {"opponent": float(self.opponent)}

    def _policy(self, actor: Any, state: Mapping[str, torch.Tensor]) -> Callable[..., int]:
        import torch

        from shoal.agent.losses import mask_illegal
        from shoal.agent.networks import apply_network
        from shoal.envs.connect_four import heuristic_player, random_player

        if self.opponent == HEURISTIC:
            return heuristic_player
        if self.opponent < 0:
            return random_player
        network, params = actor.network, dict(state)

        @torch.inference_mode()
        def play(obs: np.ndarray, rng: np.random.Generator) -> int:
            x = torch.as_tensor(obs[None], dtype=torch.float32)
            return int(mask_illegal(apply_network(network, params, x), x).argmax(dim=-1)[0])

        return play
