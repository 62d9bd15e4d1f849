"""The Replay protocol: what it requires, and that ReplayBuffer meets it in every form."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from shoal.replay import Replay, ReplayBuffer, SequenceWriter

METHODS = {
    "__len__",
    "add_batch",
    "sample",
    "update_priorities",
    "state_dict",
    "load_state_dict",
}


def test_protocol_has_exactly_the_replay_methods():
    public = {name for name in vars(Replay) if not name.startswith("_")}
    assert public == METHODS - {"__len__"} and "__len__" in vars(Replay)
    for name in METHODS:
        assert getattr(Replay, name).__doc__, name
    assert inspect.signature(Replay.add_batch).parameters["priorities"].default is None


@pytest.mark.parametrize(
    "buffer",
    [
        ReplayBuffer(8, (2,)),
        ReplayBuffer(8, (2,), prioritized=True),
        ReplayBuffer.from_specs(8, {"x": ((3,), np.float32)}),
        ReplayBuffer.from_specs(4, SequenceWriter(3, burn_in=1).specs((2,), state_shape=(4,))),
    ],
)
def test_every_buffer_is_a_replay(buffer):
    assert isinstance(buffer, Replay)


class MissingPriorities:
    """Has every method but update_priorities: not a Replay."""

    def __len__(self) -> int:
        return 0

    def add_batch(self, batch, priorities=None):
        return 0

    def sample(self, batch_size):
        return {}

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_objects_missing_a_method_are_not_replays():
    assert not isinstance(MissingPriorities(), Replay)
    assert not isinstance({}, Replay)
