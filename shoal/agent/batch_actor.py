"""An actor's batch of envs: one batched forward and one vector step for all of them.

Every runner acts through this: the serial runner, the threads runner's acting thread,
each rollout worker process and each Ray actor. Each env keeps its own episode (return,
length, seed) and its episodes never mix: the step after a done is a reset (on engines that
reset by themselves it is not a transition), a finished env's ``next_obs`` is its final
observation (so a truncated episode bootstraps from it), and the caller keeps one n-step
writer per env.

Episode k of env i starts from a seed derived from the actor's seed path and (k, i), so
the starts are the same whatever the batch size, and env 0 of a one-env actor sees the
seeds a single env saw before batching. On the sync engine a checkpoint mid-episode is
resumed exactly: the state holds each env's actions since its episode began, and loading
re-plays them from the seeded reset (and checks the observation it reaches).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shoal.agent.actor import Actor
from shoal.envs.vector import VectorEnvs
from shoal.run.seeding import derive_seeds

__all__ = ["BatchActor", "Finished", "Steps"]

SEED_BLOCK = 256
"""Episode seeds are derived this many at a time per env (one ``SeedSequence`` each would
cost more than the reset it seeds)."""


@dataclass(frozen=True)
class Finished:
    """An episode that ended in a step."""

    env: int
    ret: float
    length: int
    meta: dict[str, float] = field(default_factory=dict)
    """What the reset hook returned when the episode began (self-play: the opponent)."""
    final_reward: float = 0.0
    """The episode's last reward (self-play: the game's result)."""


@dataclass(slots=True)
class Steps:
    """One step of every env of the batch (row i: env i)."""

    obs: np.ndarray
    actions: Any
    """Actions taken: an int array, or a list of ``(discrete, continuous)`` pairs."""
    rewards: np.ndarray
    next_obs: np.ndarray
    """The observations after the step; a finished env's final observation, not a reset's."""
    terminated: np.ndarray
    truncated: np.ndarray
    live: np.ndarray
    """Rows that are transitions (False: the engine reset that env in this step)."""
    finished: list[Finished]

    @property
    def count(self) -> int:
        """Env steps taken (transitions)."""
        return int(self.live.sum())

    def rows(self) -> list[int]:
        """The env indices whose rows are transitions."""
        return np.flatnonzero(self.live).tolist()

    def action_fields(self) -> dict[str, np.ndarray]:
        """The actions as replay fields: ``action``, and ``action_cont`` for hybrid
        ``(discrete, continuous)`` pairs."""
        if isinstance(self.actions, list):
            return {
                "action": np.array([a for a, _ in self.actions], np.int64),
                "action_cont": np.stack([x for _, x in self.actions]),
            }
        return {"action": self.actions}

    def write(self, writer: Any) -> dict[str, np.ndarray]:
        """Feed this step to a :class:`~shoal.replay.nstep.BatchNStepWriter`; the
        transitions it completes, one array per field."""
        return writer.append(
            self.obs,
            self.action_fields(),
            self.rewards,
            self.next_obs,
            self.terminated,
            self.truncated,
            self.live,
        )


ResetHook = Callable[[int, Any], dict[str, float]]
"""Called with (env index, env) before an env's episode begins (sync engine only)."""


class BatchActor:
    """Plays ``actor`` on ``envs``: one batched epsilon-greedy forward and one vector step
    per :meth:`step`.

    Args:
        actor: picks the actions (:meth:`~shoal.agent.actor.Actor.act`).
        envs: the batch of envs.
        seeds: the seed path of this actor's episodes (e.g. (run seed, stream, worker)).
        on_reset: called before each episode begins, with the env (plug-ins such as
            self-play set the episode up); needs the sync engine.
    """

    def __init__(
        self,
        actor: Actor,
        envs: VectorEnvs,
        seeds: tuple[int, ...],
        *,
        on_reset: ResetHook | None = None,
    ) -> None:
        n = envs.num_envs
        self.actor, self.envs, self.seeds, self.on_reset = actor, envs, seeds, on_reset
        self.epsilons = np.ones(n)
        """Each env's exploration epsilon (the runner sets it)."""
        self.episodes = np.zeros(n, np.int64)
        """Episodes begun per env: env i's next reset is seeded from (seeds, episodes[i], i)."""
        self.returns, self.lengths = np.zeros(n), np.zeros(n, np.int64)
        self.obs: np.ndarray | None = None
        self._resetting = np.zeros(n, bool)  # autoreset engines: reset on the next step
        self._every = np.ones(n, bool)  # engines that reset when told: every row is a step
        self._meta: list[dict[str, float]] = [{} for _ in range(n)]
        self._history: list[list[Any]] | None = (
            None if envs.envs is None else [[] for _ in range(n)]
        )
        self._seed_blocks: dict[int, tuple[int, list[int]]] = {}  # env -> (block, seeds)

    @property
    def num_envs(self) -> int:
        """Envs in the batch."""
        return self.envs.num_envs

    def seed(self, env: int, episode: int) -> int:
        """The reset seed of episode ``episode`` of env ``env`` (env 0's path has no env
        index: a one-env actor resets from the seeds the unbatched actor used)."""
        block, at = divmod(episode, SEED_BLOCK)
        cached = self._seed_blocks.get(env)
        if cached is None or cached[0] != block:
            ks = np.arange(block * SEED_BLOCK, (block + 1) * SEED_BLOCK)
            path = (*self.seeds, ks, env) if env else (*self.seeds, ks)
            cached = (block, derive_seeds(*path).tolist())
            self._seed_blocks[env] = cached
        return cached[1][at]

    def _begin(self, mask: np.ndarray) -> None:
        """Reset the envs in ``mask`` into their next episodes."""
        ids = np.flatnonzero(mask).tolist()
        begin = getattr(self.actor, "begin", None)
        if begin is not None:  # a recurrent actor: fresh memory for these envs
            begin(ids, self.num_envs)
        for i in ids:
            if self.on_reset is not None:
                assert self.envs.envs is not None, "a reset hook needs the sync engine"
                self._meta[i] = self.on_reset(i, self.envs.envs[i])
            if self._history is not None:
                self._history[i] = []
        self.returns[ids], self.lengths[ids] = 0.0, 0
        if self.envs.autoreset:  # one seed for the pool; it resets finished envs itself
            self.obs = self.envs.reset() if self.obs is None else self.obs
            return
        seeds: list[int | None] = [None] * self.num_envs
        for i in ids:
            seeds[i] = self.seed(i, int(self.episodes[i]))
        if len(ids) == self.num_envs:
            self.obs = self.envs.reset(seeds)  # type: ignore[arg-type]
        else:
            self.obs = self.envs.reset_some(mask, seeds)

    def step(self) -> Steps:
        """One batched forward and one step of every env."""
        if self.obs is None:
            self._begin(np.ones(self.num_envs, bool))
        obs = self.obs
        assert obs is not None
        actions = self.actor.act(obs, self.epsilons)
        nxt, rew, term, trunc = self.envs.step(actions)
        done = term | trunc
        if self.envs.autoreset:  # a row that reset its env is no step
            live = ~self._resetting
            self.returns[live] += rew[live]
            self.lengths[live] += 1
            done &= live
            self._resetting = done
        else:
            live = self._every
            self.returns += rew
            self.lengths += 1
        if self._history is not None:  # sync engine: every row is a step
            for history, action in zip(self._history, actions):
                history.append(action)
        self.obs = nxt
        if not done.any():
            return Steps(obs, actions, rew, nxt, term, trunc, live, [])
        finished = [
            Finished(i, float(self.returns[i]), int(self.lengths[i]), self._meta[i], float(rew[i]))
            for i in np.flatnonzero(done).tolist()
        ]
        self.episodes[done] += 1
        self._begin(done)
        return Steps(obs, actions, rew, nxt, term, trunc, live, finished)

    def cut(self) -> list[int]:
        """End every env's episode here (a run cut mid-episode); the next step begins new
        episodes from the next seeds. Returns the envs that were mid-episode."""
        mid = np.flatnonzero(self.lengths > 0).tolist() if self.obs is not None else []
        self.episodes[mid] += 1
        self.obs = None
        self._resetting[:] = False
        self.returns[:], self.lengths[:] = 0.0, 0
        return mid

    @property
    def mid_episode(self) -> bool:
        """Whether some env is inside an episode."""
        return self.obs is not None and bool((self.lengths > 0).any())

    def close(self) -> None:
        """Close the envs."""
        self.envs.close()

    # --- state -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Episode counters and, on the sync engine, what re-plays the running episodes."""
        return {
            "episodes": self.episodes.copy(),
            "returns": self.returns.copy(),
            "lengths": self.lengths.copy(),
            "obs": None if self.obs is None else self.obs.copy(),
            "history": None if self._history is None else [list(h) for h in self._history],
            "resetting": self._resetting.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore; running episodes are re-played on the sync engine. Returns False when
        they could not be (another engine, or an env that does not repeat itself from its
        seed): the episodes are then cut (:meth:`cut`) and the caller flushes its writers."""
        self.episodes = np.asarray(state["episodes"], np.int64).copy()
        self.obs = None
        if state["obs"] is None:
            return True
        if state["history"] is not None and self._history is not None and self._replay(state):
            self.returns = np.asarray(state["returns"], float).copy()
            self.lengths = np.asarray(state["lengths"], np.int64).copy()
            self._resetting = np.asarray(state["resetting"], bool).copy()
            self.obs = np.asarray(state["obs"]).copy()
            return True
        self.lengths = np.asarray(state["lengths"], np.int64).copy()
        self.obs = np.asarray(state["obs"])
        self.cut()
        return False

    def _replay(self, state: dict[str, Any]) -> bool:
        """Re-create every env's running episode from its seed and its actions."""
        assert self.envs.envs is not None and self._history is not None
        for i, env in enumerate(self.envs.envs):
            if self.on_reset is not None:
                self._meta[i] = self.on_reset(i, env)
            obs, _ = env.reset(seed=self.seed(i, int(self.episodes[i])))
            for action in state["history"][i]:
                obs = env.step(action)[0]
            if not np.array_equal(np.asarray(obs), state["obs"][i]):
                print(
                    f"shoal: env {i} did not repeat its episode from its seed; resuming "
                    "with fresh episodes",
                    file=sys.stderr,
                )
                return False
            self._history[i] = list(state["history"][i])
        return True
