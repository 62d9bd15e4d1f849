"""Error types for bad input: each names what was wrong and what is allowed.

The CLI turns any :class:`ShoalError` into a one-line message and exit code 2, so every
check that guards user input raises one of these rather than a bare ``ValueError``.
"""

from __future__ import annotations

__all__ = ["CheckpointError", "ConfigError", "EnvError", "RunDirError", "ShoalError"]


class ShoalError(Exception):
    """Base class for errors caused by the user's input, not by a bug in shoal."""


class ConfigError(ShoalError, ValueError):
    """A config key, value or file that cannot be used."""


class EnvError(ShoalError, ValueError):
    """An environment id that does not exist or has spaces shoal cannot learn on."""


class CheckpointError(ShoalError):
    """A checkpoint that is missing, truncated or not a shoal checkpoint."""


class RunDirError(ShoalError):
    """A run directory that already exists (would be overwritten) or is not a run."""
