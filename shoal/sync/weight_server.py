"""The Ray actor that holds the latest published weights' reference (see
:mod:`shoal.sync.ray_weights`). A module of its own, free of torch: its Ray worker imports
only this, and starts in a fraction of the time a worker importing torch takes."""

from __future__ import annotations

from typing import Any

__all__ = ["WeightServer"]


class WeightServer:
    """The latest published weights: a version, the object reference (wrapped in a list so
    Ray passes the reference, not the arrays) and the metadata. Run it as a Ray actor."""

    def __init__(self) -> None:
        self._latest: tuple[int, list[Any], dict[str, float]] | None = None

    def publish(self, version: int, ref: list[Any], meta: dict[str, float]) -> int:
        """Keep ``ref`` if ``version`` is newer than the one held; returns the version held."""
        if self._latest is None or version > self._latest[0]:
            self._latest = (version, ref, meta)
        return self._latest[0]

    def get(self, if_newer_than: int) -> tuple[int, list[Any], dict[str, float]] | None:
        """The latest ``(version, [ref], meta)`` if newer than ``if_newer_than``."""
        if self._latest is None or self._latest[0] <= if_newer_than:
            return None
        return self._latest
