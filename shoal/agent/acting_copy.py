"""Serial acting beside a learner on a GPU: the actor's own copy of the weights.

An actor reading a GPU learner's live weights runs its forward on the GPU's one stream,
behind the update the learner just queued, and its ``.cpu()`` of the actions waits for that
update: every env step stalls for an update. With a copy, acting does not wait: on the CPU
(small nets, few envs: a forward there costs less than a launch and a copy back) or on the
GPU in a stream of its own (many envs, a convolutional net). The copy is refreshed every
``run.acting_refresh`` updates, as the processes runner's workers pull published weights;
acting plays weights up to that many updates old.

'auto' times one batched forward of ``env.num_envs`` observations each way at start-up and
keeps the faster; a learner on a CPU acts on its live weights (the serial oracle).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from shoal.agent.networks import Params, apply_network
from shoal.config.devices import cuda_refusal
from shoal.errors import ConfigError

__all__ = ["ActingCopy", "pick_acting_device"]


class ActingCopy:
    """An actor's copy of ``source`` (the learner's live weights) on ``device``,
    refreshed every ``every`` updates; on CUDA it is read and refreshed in its own stream.
    """

    def __init__(self, source: Params, device: str | torch.device, every: int) -> None:
        self.source = source
        self.device = torch.device(device)
        self.every = every
        self.params: Params = {n: t.detach().to(self.device).clone() for n, t in source.items()}
        """The weights the actor reads (refreshed in place)."""
        self.stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        if self.stream is not None:  # the clones above were queued on the current stream
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
        self.refreshed_at = 0
        """The learner's update count at the last refresh."""

    def due(self, updates: int) -> bool:
        """Whether ``updates`` learner updates call for a refresh."""
        return updates - self.refreshed_at >= self.every

    @torch.no_grad()
    def refresh(self, updates: int) -> None:
        """Copy the learner's weights in (after the updates queued so far)."""
        dst, src = list(self.params.values()), [t.detach() for t in self.source.values()]
        if self.stream is None:
            torch._foreach_copy_(dst, src)
        else:
            # the copy waits for the updates queued so far, and the next update (and an
            # evaluation reading the copy on the current stream) waits for the copy
            main = torch.cuda.current_stream(self.device)
            self.stream.wait_stream(main)
            with torch.cuda.stream(self.stream):
                torch._foreach_copy_(dst, src)
            main.wait_stream(self.stream)
        self.refreshed_at = updates

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """Where the actor's forwards go: its own stream on CUDA."""
        if self.stream is None:
            yield
            return
        with torch.cuda.stream(self.stream):
            yield


def pick_acting_device(
    asked: str, learner_device: torch.device, network: Any, params: Params, obs: np.ndarray
) -> tuple[str, str]:
    """Where serial acting runs (``run.acting_device = asked``) beside a learner on
    ``learner_device``: 'learner' (its live weights), 'cpu' or 'cuda' (a copy), and a few
    words on why. 'auto' beside a GPU times ``network`` on ``obs`` both ways."""
    refusal = cuda_refusal("run.acting_device", asked, cuda_here=torch.cuda.is_available())
    if refusal:
        raise ConfigError(refusal)
    if asked != "auto":
        return asked, f"run.acting_device = {asked!r}"
    if learner_device.type != "cuda":
        return "learner", "the learner's live weights"
    try:
        cpu = _forward_seconds(network, params, obs, torch.device("cpu"))
        gpu = _forward_seconds(network, params, obs, learner_device)
    except Exception as e:  # a recurrent or two-headed net: not a plain Q forward
        return "learner", f"its forward could not be timed ({type(e).__name__})"
    where = "cpu" if cpu <= gpu else "cuda"
    return where, f"a batched forward {cpu * 1e6:.0f} us on the CPU, {gpu * 1e6:.0f} us on CUDA"


@torch.inference_mode()
def _forward_seconds(network: Any, params: Params, obs: np.ndarray, device: torch.device) -> float:
    """Median seconds of one greedy forward on ``obs`` with a copy of ``params`` on
    ``device`` (actions back on the host), in a stream of its own on CUDA."""
    import copy

    net = copy.deepcopy(network).to(device)
    mine = {n: t.detach().to(device) for n, t in params.items()}
    copy_ = ActingCopy(mine, device, 1)
    times = []
    with copy_.acting():
        for i in range(25):
            t0 = time.perf_counter()
            x = torch.as_tensor(obs, dtype=torch.float32, device=device)
            apply_network(net, copy_.params, x).argmax(dim=-1).cpu()
            if i >= 5:
                times.append(time.perf_counter() - t0)
    return float(np.median(times))
