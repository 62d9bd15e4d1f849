"""Weights through Ray's object store: the weight-store protocol across machines.

The learner ``ray.put`` s a numpy copy of its weights (Ray copies torch tensors on put;
numpy arrays it shares zero-copy with readers on the same node) and hands the reference to
a small :class:`WeightServer` actor; actors ask the server for anything newer than the
version they hold and fetch the arrays from the object store. The server keeps only the
latest reference, so older weights are freed once no actor reads them. Versions only go up.

An actor's store may poll instead of asking and waiting: a question to the server costs
a round trip of a millisecond or two, a tenth of an actor's time at a pull every 100 short
steps. A polling store sends the question and takes the answer at the next pull (weights
arrive one pull period later); while it holds no weights at all it waits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from shoal.sync.weight_server import WeightServer
from shoal.sync.weights import Meta, Versioned, Weights

__all__ = ["RayWeightStore", "WeightServer"]


class RayWeightStore:
    """A :class:`~shoal.sync.weights.WeightStore` over a :class:`WeightServer` actor.

    The learner and every actor hold one (it pickles as the server's handle), so Ray must
    be initialised wherever it is used.

    Args:
        server: the ``WeightServer`` actor handle.
        poll: :meth:`pull` answers from the question sent at the previous pull and never
            waits, except for the first weights (``if_newer_than < 0``).
    """

    def __init__(self, server: Any, *, poll: bool = False) -> None:
        self.server, self.poll = server, poll
        self._version = -1
        self._asked: Any = None
        """The question a polling store sent and has not had answered."""
        self._announced: Any = None
        """The last publish's call to the server."""

    def publish(
        self, state: Weights, meta: Meta | None = None, *, version: int | None = None
    ) -> int:
        """Put a numpy copy of ``state`` in the object store and announce it; returns its
        version (``version`` if given and newer, else the previous + 1)."""
        import ray

        self.flush()  # at most one announcement unanswered
        new = self._version + 1 if version is None else max(version, self._version + 1)
        arrays = {n: t.detach().cpu().numpy().copy() for n, t in state.items()}
        ref = ray.put(arrays)
        # Not waited for: the server keeps the highest version it was told of, so the
        # learner need not pay a round trip per publish.
        self._announced = self.server.publish.remote(new, [ref], dict(meta or {}))
        self._version = new
        return new

    def flush(self) -> None:
        """Wait until the server holds the last publish (before actors first pull)."""
        import ray

        if self._announced is not None:
            self._version = max(self._version, ray.get(self._announced))
            self._announced = None

    def pull(self, if_newer_than: int = -1) -> Versioned | None:
        """The latest weights if newer than ``if_newer_than``, else None."""
        import ray

        if not self.poll or if_newer_than < 0:
            got = ray.get(self.server.get.remote(if_newer_than))
        elif self._asked is None:
            got, self._asked = None, self.server.get.remote(if_newer_than)
        elif ray.wait([self._asked], timeout=0)[0]:
            got, self._asked = ray.get(self._asked), self.server.get.remote(if_newer_than)
        else:
            return None  # still unanswered: one question at a time
        if got is None or got[0] <= if_newer_than:
            return None
        version, (ref,), meta = got
        arrays: dict[str, np.ndarray] = ray.get(ref)
        # Arrays from the object store are read-only views: copy into tensors the actor owns.
        state = {n: torch.from_numpy(np.array(a)) for n, a in arrays.items()}
        return Versioned(version, state, meta)

    def __getstate__(self) -> dict[str, Any]:
        return {"server": self.server, "poll": self.poll}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.server, self.poll = state["server"], state["poll"]
        self._version, self._asked, self._announced = -1, None, None
