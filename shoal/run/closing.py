"""Things that hold a resource until closed, usable in a ``with`` block."""

from __future__ import annotations

from types import TracebackType
from typing import Any

__all__ = ["Closing"]


class Closing:
    """A ``with`` block closes it on the way out, whatever ends the block (the subclass's
    ``close`` must be safe to call twice)."""

    def close(self) -> None:  # pragma: no cover - each subclass has its own
        """Release what it holds."""
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
