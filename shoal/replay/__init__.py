"""Experience replay: storage × sampler, plus the n-step writer that feeds it.

No module here imports threading, multiprocessing or ray: the runners decide how a buffer
is shared, and the buffer itself stays a plain single-threaded object.
"""

from __future__ import annotations

from shoal.replay.buffer import ReplayBuffer
from shoal.replay.nstep import NStepWriter
from shoal.replay.samplers import PrioritizedSampler, UniformSampler
from shoal.replay.storage import RingStorage
from shoal.replay.sum_tree import SumTree

__all__ = [
    "NStepWriter",
    "PrioritizedSampler",
    "ReplayBuffer",
    "RingStorage",
    "SumTree",
    "UniformSampler",
]
