"""The one rule for settings that need CUDA, asked at three moments: the config's check
(the learner's device named ``cpu``), the machine's before any work (torch sees no CUDA
device) and the learner's once its device is resolved (``auto`` became ``cpu``). Each asks
:func:`cuda_refusal` with what it knows, so the three cannot drift apart. No torch here:
the config is checked without it."""

from __future__ import annotations

__all__ = ["CUDA_SETTINGS", "cuda_refusal", "needs_cuda"]

CUDA_SETTINGS: dict[str, tuple[str, str]] = {
    "run.device": ("puts the learner on a CUDA device", "'auto' or 'cpu'"),
    "run.compile": ("captures the update as a CUDA graph", "'auto', 'off' or 'compile'"),
    "run.acting_device": ("acts on a CUDA copy of the weights", "'auto', 'learner' or 'cpu'"),
}
"""Config key -> (what its CUDA value does, the values that run without CUDA)."""


def needs_cuda(key: str, value: str) -> bool:
    """Whether ``key = value`` runs only where CUDA is (``'cuda'``, ``'cuda:N'``; a captured
    graph)."""
    if key == "run.compile":
        return value == "graph"
    return key in CUDA_SETTINGS and value.startswith("cuda")


def cuda_refusal(
    key: str,
    value: str,
    *,
    learner: str | None = None,
    named: str = "run.device",
    cuda_here: bool = True,
) -> str | None:
    """The one line refusing ``key = value`` (None: it may run): a CUDA-only setting where
    torch sees no CUDA device (``cuda_here`` False), or beside a learner whose device
    (``learner``, as ``named`` calls it) is the CPU."""
    if not needs_cuda(key, value):
        return None
    if not cuda_here:
        why = "torch sees no CUDA device here"
    elif key != "run.device" and learner == "cpu":
        why = f"{named} is 'cpu'"
    else:
        return None
    what, instead = CUDA_SETTINGS[key]
    return f"config key {key!r}: {value!r} {what}, and {why}; use {instead}"
