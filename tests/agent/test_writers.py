"""The writers an acting is built with: both keep the Writer contract, and fed the same
steps they give the same transitions of the episodes that ended, with the same episodes
and env steps; the stream gives a running episode's too, as its windows close."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.agent.acting import WRITERS, make_writer
from shoal.agent.actor import Actor
from shoal.agent.batch_actor import BatchActor
from shoal.agent.networks import QNetwork
from shoal.agent.writers import Taken, Writer
from shoal.config import EnvConfig
from shoal.envs.tally import ENV_ID
from shoal.envs.vector import make_vector_env

pytestmark = pytest.mark.timeout(120)


def rows(items: dict[str, np.ndarray]) -> list[tuple]:
    """Each transition as one hashable row, to compare writers that order them apart."""
    names = ("obs", "action", "reward", "next_obs", "discount")
    return sorted(
        tuple(np.concatenate([np.ravel(items[k][i]) for k in names]))
        for i in range(len(items["reward"]))
    )


def test_every_writer_keeps_the_contract_and_an_unknown_one_is_refused():
    for name in WRITERS:
        assert isinstance(make_writer(name, 2, 3, 0.9, False), Writer), name
    with pytest.raises(ValueError, match="not one of"):
        make_writer("tape", 2, 3, 0.9, False)


def test_both_writers_give_the_ended_episodes_transitions_alike():
    actor = Actor(
        QNetwork(4, 2, hidden=[8], dueling=False), n_actions=2, rng=np.random.default_rng(0)
    )
    batch = BatchActor(actor, make_vector_env(EnvConfig(id=ENV_ID), 3), (5,))
    batch.epsilons[:] = 0.5
    stream, recorder = (
        make_writer("stream", 3, 3, 0.9, False),
        make_writer("episodes", 3, 3, 0.9, False),
    )
    streamed, played = [], 0
    for _ in range(80):
        got = batch.step()
        played += got.count
        stream.write(got)
        recorder.write(got)
        streamed.append(stream.take())
    whole = recorder.take()
    assert isinstance(whole, Taken) and whole.priorities is None and len(whole.ended) > 3
    assert [e for t in streamed for e in t.ended] == list(whole.ended)
    assert sum(t.steps for t in streamed) == whole.steps == sum(e.length for e in whole.ended)
    every = [r for t in streamed if t.items for r in rows(t.items)]
    assert set(rows(whole.items)) <= set(every) and len(rows(whole.items)) == whole.steps
    # cut here: the stream's open windows close as truncations, the recorder drops them
    closing, dropped = stream.flush(), recorder.flush()
    assert len(every) + len(closing.items["reward"]) == played
    assert dropped.items == {} and recorder.ended == 0
