"""Noisy linear layers (Fortunato et al. 2018), factorised Gaussian: exploration by learned
weight noise instead of epsilon (``explore.noisy``).

A noisy layer keeps its mean weights under the usual names (``weight``, ``bias``) and adds
``weight_sigma`` and ``bias_sigma``; its weights are ``weight + weight_sigma * (f(e_out)
f(e_in)^T)`` and ``bias + bias_sigma * f(e_out)`` with ``f(x) = sign(x) sqrt(|x|)``. The
noise is not a parameter: whoever applies the network passes it beside the weights, as
params entries ``<layer>.noise_in`` and ``<layer>.noise_out`` (already through ``f``), so
the network stays a pure function (:func:`shoal.agent.networks.dense` applies a layer
with or without them). Without them a noisy layer is its mean: greedy
evaluation and Ape-X's initial priorities read the mean network; acting and every loss
term draw fresh noise (the learner from a generator it checkpoints, an actor from its
exploration generator).

Example:
    >>> layer = torch.nn.Linear(3, 2)
    >>> add_noise_parameters(layer, 0.5)
    >>> params = {f"l.{n}": p for n, p in layer.named_parameters()}
    >>> noise = draw_noise(noise_shapes(params), torch.Generator().manual_seed(0))
    >>> sorted(noise)
    ['l.noise_in', 'l.noise_out']
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from shoal.agent.device import to_device

__all__ = [
    "NoiseSource",
    "add_noise_parameters",
    "draw_noise",
    "draw_noise_np",
    "noise_shapes",
]

SIGMA = "weight_sigma"


def add_noise_parameters(layer: nn.Linear, sigma0: float) -> None:
    """Make ``layer`` noisy: ``weight_sigma`` and ``bias_sigma`` at ``sigma0 /
    sqrt(in_features)``, the paper's start for factorised noise."""
    value = sigma0 / math.sqrt(layer.in_features)
    layer.weight_sigma = nn.Parameter(torch.full_like(layer.weight, value))
    layer.bias_sigma = nn.Parameter(torch.full_like(layer.bias, value))


def noise_shapes(params: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, int]]:
    """The noisy layers among ``params`` (one network's, or K stacked): prefix ->
    (in_features, out_features)."""
    return {
        name[: -len(SIGMA)]: (int(p.shape[-1]), int(p.shape[-2]))
        for name, p in params.items()
        if name.endswith(SIGMA)
    }


def _f(x: torch.Tensor) -> torch.Tensor:
    return x.sign() * x.abs().sqrt()


def draw_noise(
    shapes: Mapping[str, tuple[int, int]],
    generator: torch.Generator,
    device: str | torch.device = "cpu",
) -> dict[str, torch.Tensor]:
    """Fresh factorised noise for every noisy layer, as params entries."""
    return _draw(shapes, generator, device, 1)[0]


def _draw(
    shapes: Mapping[str, tuple[int, int]],
    generator: torch.Generator,
    device: str | torch.device,
    copies: int,
) -> list[dict[str, torch.Tensor]]:
    """``copies`` independent draws of :func:`draw_noise` from one host draw and one copy
    to ``device``: per-layer draws cost a GPU learner a dozen small host ops and
    host-to-device copies an update, more than its whole captured update (issue 56)."""
    names = [prefix + side for prefix in shapes for side in ("noise_in", "noise_out")]
    sizes = [n for n_in, n_out in shapes.values() for n in (n_in, n_out)] * copies
    flat = to_device(_f(torch.randn(sum(sizes), generator=generator)), device)
    parts = flat.split(sizes)
    k = len(names)
    return [dict(zip(names, parts[i * k : (i + 1) * k], strict=True)) for i in range(copies)]


def draw_noise_np(
    shapes: Mapping[str, tuple[int, int]],
    rng: np.random.Generator,
    device: str | torch.device = "cpu",
) -> dict[str, torch.Tensor]:
    """:func:`draw_noise` from a numpy generator (an actor's exploration generator, which
    its checkpoint keeps)."""
    out = {}
    for prefix, (n_in, n_out) in shapes.items():
        for name, n in (("noise_in", n_in), ("noise_out", n_out)):
            e = torch.as_tensor(rng.standard_normal(n), dtype=torch.float32)
            out[prefix + name] = _f(e).to(device)
    return out


class NoiseSource:
    """A learner's noise: a seeded generator (kept in its checkpoint) drawing fresh noise
    for the online and the target weights of each loss evaluation; thread-safe (learner
    threads evaluate losses side by side)."""

    def __init__(self, shapes: Mapping[str, tuple[int, int]], seed: int) -> None:
        self.shapes = dict(shapes)
        self.generator = torch.Generator().manual_seed(seed)
        self._lock = threading.Lock()

    def draw(self, device: torch.device) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Noise for the online weights and independent noise for the target's."""
        with self._lock:
            online, target = _draw(self.shapes, self.generator, device, 2)
        return online, target

    def state_dict(self) -> Any:
        """The generator's state."""
        return self.generator.get_state()

    def load_state_dict(self, state: Any) -> None:
        """Restore the generator."""
        self.generator.set_state(state)
