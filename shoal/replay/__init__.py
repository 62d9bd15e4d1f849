"""Experience replay: storage × sampler × writer, behind one :class:`Replay` protocol.

Storage (:class:`RingStorage`) holds fixed-shape items, a sampler (:class:`UniformSampler`,
:class:`PrioritizedSampler`) picks them, :class:`ReplayBuffer` joins the two, and writers
turn an environment stream into items: :class:`NStepWriter` for n-step transitions,
:class:`SequenceWriter` for recurrent (R2D2-style) sequences.

No module here imports threading, multiprocessing or ray: the runners decide how a buffer
is shared, and the buffer itself stays a plain single-threaded object.
"""

from __future__ import annotations

from shoal.replay.buffer import ReplayBuffer
from shoal.replay.nstep import NStepWriter
from shoal.replay.protocol import Replay
from shoal.replay.samplers import PrioritizedSampler, UniformSampler
from shoal.replay.sequence import SequenceWriter
from shoal.replay.service import ReplayService
from shoal.replay.stacked import StackedReplay
from shoal.replay.storage import RingStorage
from shoal.replay.sum_tree import SumTree

__all__ = [
    "NStepWriter",
    "PrioritizedSampler",
    "Replay",
    "ReplayBuffer",
    "ReplayService",
    "RingStorage",
    "SequenceWriter",
    "StackedReplay",
    "SumTree",
    "UniformSampler",
]
