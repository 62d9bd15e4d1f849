"""Error types for bad input: each names what was wrong and what is allowed.

The CLI turns any :class:`ShoalError` into a one-line message and exit code 2 (its
``exit_code``, where a class says otherwise), so every check that guards user input raises
one of these rather than a bare ``ValueError``.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "ConfigError",
    "DivergedError",
    "EnvError",
    "MachineryError",
    "ObservationError",
    "RunDirError",
    "RunInUseError",
    "ShoalError",
    "UntrustedCodeError",
    "first_line",
]


def first_line(error: BaseException) -> str:
    """``error`` as one line of a message: its type and the first line of its text, at
    most 200 characters (a user's code may raise with pages of text; the message that
    quotes it stays one short line)."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."


class ShoalError(Exception):
    """Base class for errors caused by the user's input, not by a bug in shoal."""

    exit_code = 2
    """The CLI's exit code after the error's one line."""


class ConfigError(ShoalError, ValueError):
    """A config key, value or file that cannot be used."""


class EnvError(ShoalError, ValueError):
    """An environment id that does not exist or has spaces shoal cannot learn on."""


class ObservationError(ShoalError, ValueError):
    """An observation that cannot be read: not finite, of the wrong shape, or a dict that
    does not fit the env's observation space."""


class CheckpointError(ShoalError):
    """A checkpoint that is missing, truncated or not a shoal checkpoint."""


class RunDirError(ShoalError):
    """A run directory that already exists (would be overwritten) or is not a run."""


class UntrustedCodeError(ConfigError):
    """A run someone made (a run or study directory being opened) names code of its own,
    and the user has not said they trust it (``--trust-code``, ``trust_code=True``)."""


class RunInUseError(RunDirError):
    """Another process holds the run (or study) directory: one writer per directory."""


class MachineryError(ShoalError):
    """The machinery under a run failed (the local Ray did not start, or its node died):
    not the input's fault, so the CLI exits 1, after one line, not a traceback."""

    exit_code = 1


class DivergedError(ShoalError):
    """Training diverged: the learner's weights hold NaN or inf (a learning rate too high
    for the rewards' scale, observations that were not numbers: the config's or the env's
    doing, so the CLI exits 2 after one line). Nothing non-finite is checkpointed, so the
    run's last checkpoint is its last finite state."""
