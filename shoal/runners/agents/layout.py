"""How the agents runner's K learners are laid out: stacked into one learner, or kept
apart and stepped one after another (``agents.parallel_training``), or one learner that
all K agents share (``agents.share``).

The first two compute the same thing (``tests/runners/test_agents_runner.py``); the stacked
one does the K agents' updates as one. The shared one is parameter sharing: one network
for every agent, told apart by the id at the front of each observation. The choice is made
once, by :func:`make_layout`, and nothing else in the runner asks which it is: each layout
answers for its learners' update count, weights, training round, state and how its updates
run.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np
import torch

from shoal.agent.learner import DQN
from shoal.agent.stacked import StackedLearner
from shoal.config import Config
from shoal.replay import StackedReplay

__all__ = ["Layout", "PerAgentLayout", "SharedLayout", "StackedLayout", "make_layout"]


class Layout(Protocol):
    """What the agents runner asks of its K learners, however they are laid out."""

    learners: list[DQN]
    """The K agents' own learners (the stacked layout trains copies of their weights)."""

    @property
    def updates(self) -> int:
        """Training rounds taken (every agent steps once per round)."""
        ...

    def weights(self) -> dict[str, torch.Tensor]:
        """All agents' online weights, stacked ``(K, ...)`` by name."""
        ...

    def train_round(self, group: StackedReplay, lock: AbstractContextManager[Any]) -> float:
        """Every agent one update on a batch from its own buffer (``group.buffers[k]``),
        drawing and updating priorities under ``lock``; the mean loss."""
        ...

    def update_sources(self) -> list[Any]:
        """The learners whose updates run as ``run.compile`` says (and whose notes say
        how)."""
        ...

    def set_compile(self, mode: str) -> str:
        """Run the updates as ``mode`` says; the run's first line's words for it."""
        ...

    def state_dict(self) -> Any:
        """A checkpoint's ``learner`` entry."""
        ...

    def load_state_dict(self, state: Any) -> None:
        """Restore what :meth:`state_dict` saved."""
        ...


class StackedLayout:
    """The K learners stacked into one :class:`~shoal.agent.stacked.StackedLearner`: one
    draw of all K batches from the buffers' shared block, one update for all."""

    def __init__(self, learners: Sequence[DQN], batch_size: int) -> None:
        self.learners = list(learners)
        self.stacked = StackedLearner(self.learners)
        self.batch_size = batch_size

    @property
    def updates(self) -> int:
        """Training rounds taken."""
        return self.stacked.updates

    def weights(self) -> dict[str, torch.Tensor]:
        """The stacked learner's online weights."""
        return self.stacked.weights()

    def train_round(self, group: StackedReplay, lock: AbstractContextManager[Any]) -> float:
        """All K batches in one draw, one update; the mean of the K losses."""
        with lock:
            sample = group.sample(self.batch_size)
        info = self.stacked.step(self.stacked.make_batch(sample))
        with lock:
            group.update_priorities(sample["indices"], info.td_errors)
        return float(info.loss.mean())

    def update_sources(self) -> list[Any]:
        """The stacked learner."""
        return [self.stacked]

    def set_compile(self, mode: str) -> str:
        """The stacked update runs as ``mode`` says."""
        return self.stacked.set_compile(mode)

    def state_dict(self) -> dict[str, Any]:
        """The stacked learner's state dict."""
        return self.stacked.state_dict()

    def load_state_dict(self, state: Any) -> None:
        """Restore the stacked learner."""
        self.stacked.load_state_dict(state)


class PerAgentLayout:
    """The K learners apart, stepped agent by agent on the same batches the stacked layout
    draws (the fallback, and the reference it is tested against)."""

    def __init__(self, learners: Sequence[DQN], batch_size: int) -> None:
        self.learners = list(learners)
        self.batch_size = batch_size

    @property
    def updates(self) -> int:
        """Training rounds taken (every learner's count is the same)."""
        return self.learners[0].updates

    def weights(self) -> dict[str, torch.Tensor]:
        """Each learner's online weights, stacked by name."""
        names = self.learners[0].params
        return {n: torch.stack([le.params[n].detach() for le in self.learners]) for n in names}

    def train_round(self, group: StackedReplay, lock: AbstractContextManager[Any]) -> float:
        """Agent by agent, each on a batch from its own buffer; the mean loss."""
        losses = []
        for learner, buffer in zip(self.learners, group.buffers):
            with lock:
                sample = buffer.sample(self.batch_size)
            info = learner.step(learner.make_batch(sample))
            with lock:
                buffer.update_priorities(sample["indices"], info.td_errors)
            losses.append(info.loss)
        return float(np.mean(losses))

    def update_sources(self) -> list[Any]:
        """Every learner."""
        return list(self.learners)

    def set_compile(self, mode: str) -> str:
        """Every learner's updates run as ``mode`` says (one line: they are alike)."""
        return [le.set_compile(mode) for le in self.learners][0]

    def state_dict(self) -> list[dict[str, Any]]:
        """Each learner's state dict, in agent order."""
        return [le.state_dict() for le in self.learners]

    def load_state_dict(self, state: Any) -> None:
        """Restore each learner."""
        for le, s in zip(self.learners, state):
            le.load_state_dict(s)


class SharedLayout:
    """One learner for all K agents (parameter sharing). Each round it trains on a batch
    from every agent's own buffer at once (K x B items, one loss over all of them, as
    EPyMARL's shared agents train on every agent's steps); acting reads its weights as K
    stacked views of one network, so the stacked actor plays them unchanged."""

    def __init__(self, learner: DQN, k: int, batch_size: int) -> None:
        self.learner = learner
        self.learners = [learner]
        self.k = k
        self.batch_size = batch_size

    @property
    def updates(self) -> int:
        """Training rounds taken."""
        return self.learner.updates

    def weights(self) -> dict[str, torch.Tensor]:
        """The one network's weights as K stacked views (no copies)."""
        return {n: p.detach().expand(self.k, *p.shape) for n, p in self.learner.params.items()}

    def train_round(self, group: StackedReplay, lock: AbstractContextManager[Any]) -> float:
        """One update on every agent's batch together; each buffer gets its own items'
        priorities back."""
        with lock:
            sample = group.sample(self.batch_size)
        flat = {n: v.reshape(-1, *v.shape[2:]) for n, v in sample.items() if n != "indices"}
        info = self.learner.step(self.learner.make_batch(flat))
        with lock:
            group.update_priorities(sample["indices"], np.reshape(info.td_errors, (self.k, -1)))
        return float(info.loss)

    def update_sources(self) -> list[Any]:
        """The one learner."""
        return [self.learner]

    def set_compile(self, mode: str) -> str:
        """Its updates run as ``mode`` says."""
        return self.learner.set_compile(mode)

    def state_dict(self) -> dict[str, Any]:
        """The learner's state dict, marked with the number of agents sharing it (so a
        checkpoint's agents can be played without the config)."""
        return {**self.learner.state_dict(), "shared_by": self.k}

    def load_state_dict(self, state: Any) -> None:
        """Restore the learner."""
        self.learner.load_state_dict({n: v for n, v in state.items() if n != "shared_by"})


def make_layout(cfg: Config, learners: Sequence[DQN], k: int) -> Layout:
    """The layout ``agents.share`` and ``agents.parallel_training`` ask for, of ``learners``
    (one when shared, else one per agent) for ``k`` agents."""
    if cfg.agents.share:
        return SharedLayout(learners[0], k, cfg.dqn.batch_size)
    kind = StackedLayout if cfg.agents.parallel_training else PerAgentLayout
    return kind(learners, cfg.dqn.batch_size)
