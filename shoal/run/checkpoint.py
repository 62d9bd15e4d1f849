"""Checkpoint files: written atomically, read without running code, checked before use.

A checkpoint is one ``torch.save`` file holding everything needed to continue a run
exactly: weights, optimizer, replay buffer, RNG states and counters. It is written with
:func:`~shoal.run.files.atomic_write` (temp file in the same directory, fsync, rename), so
a crash or Ctrl-C mid-write leaves the previous checkpoint intact.

A run directory is something people share, so a checkpoint is untrusted input: it holds
tensors and plain Python data only (:mod:`shoal.run.plain_data`) and is read with
``torch.load(weights_only=True)``, which refuses any other object before building it.
Files of older shoal versions pickled numpy arrays and objects; :func:`upgrade_checkpoint`
converts one the user trusts (``shoal upgrade RUN_DIR --trust``).
"""

from __future__ import annotations

import contextlib
import errno
import pickle
import re
import warnings
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from shoal.errors import CheckpointError, RunDirError, ShoalError
from shoal.run.divergence import first_non_finite
from shoal.run.files import atomic_write, open_no_follow
from shoal.run.plain_data import from_plain, to_plain

__all__ = [
    "FORMAT",
    "checkpoint_fits",
    "load_checkpoint",
    "save_checkpoint",
    "upgrade_checkpoint",
]

FORMAT = "shoal-checkpoint-v3"
"""v3: tensors and plain data only (numpy arrays as tagged tensors), safe to load. v2 (the
run loop's layout) pickled numpy arrays and objects; v1 came before the run loop."""

_SAFE_OLD = ("shoal-checkpoint-v2",)
"""Older formats still read when a file happens to hold only safe data (a v2 ``best.pt``)."""

_LOOP_FIELDS: dict[str, tuple[type, ...]] = {
    "step": (int,),
    "episode": (int,),
    "wall": (int, float),
    "last_eval": (int, float, type(None)),
    "last_eval_step": (int,),
    "best_eval": (int, float, type(None)),
    "best_solved": (bool,),
    "solved_step": (int, type(None)),
    "solved_wall": (int, float, type(None)),
    "confirms": (int,),
    "eval_s": (int, float),
    "next_checkpoint": (int,),
}
"""The run loop's counters and the types each may have: checked before any is used."""

_COUNTS = ("step", "episode", "wall", "solved_step", "solved_wall", "confirms", "eval_s")
"""Counters that are never negative (a score may be; ``last_eval_step`` starts at -1)."""


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (temp file, fsync, rename); the parent
    directory is created if missing. A file system that refuses the write (full, read-only,
    no permission) is a :class:`~shoal.errors.RunDirError` naming the file; the previous
    file is untouched."""
    from shoal.run.preemption import uninterrupted

    plain = to_plain({"format": FORMAT, **state})
    try:
        with uninterrupted():  # a SIGTERM now stops the run once the file is whole
            atomic_write(path, lambda f: torch.save(plain, f))
    except OSError as e:
        raise RunDirError(f"cannot write checkpoint '{path}': {_os_reason(e)}") from None


def load_checkpoint(
    path: Path, map_location: str | torch.device = "cpu", *, best: bool = False
) -> dict[str, Any]:
    """Read a checkpoint without running any code it may hold; check its layout (``best``:
    a ``best.pt``, which also holds the evaluated weights and their score). A missing,
    truncated, foreign, unsafe or malformed file raises CheckpointError naming it."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' does not exist")
    try:  # never through a link: a shared run's latest.pt may point anywhere
        file = open_no_follow(path, "rb")
    except OSError as e:  # permissions and the like: the file itself may be fine
        raise CheckpointError(f"cannot read checkpoint '{path}': {_os_reason(e)}") from None
    try:
        with file, warnings.catch_warnings():  # e.g. a pickle protocol torch does not write
            warnings.simplefilter("ignore")
            state = torch.load(file, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        refused = "GLOBAL" in str(e)  # an object the safe loader would have had to build
        what = "holds objects" if refused else "is corrupt or truncated, or holds objects"
        raise CheckpointError(
            f"checkpoint '{path}' {what} besides tensors and plain data (written by a shoal "
            f"before {FORMAT}, or crafted to run code); it was not opened. If you trust the "
            f"run, convert it once with `shoal upgrade {_run_of(path)} --trust`"
        ) from None
    except Exception as e:  # any other failure to unpickle: a damaged or foreign file
        raise _corrupt(path, e) from None
    _check_layout(state, path, best=best)
    where = first_non_finite(state.get("learner"))
    if where is not None:
        raise CheckpointError(
            f"checkpoint '{path}' holds NaN or inf in the learner's {where} (weights of a run "
            "that diverged); it was not opened"
        )
    return from_plain(state)


@contextlib.contextmanager
def checkpoint_fits(path: Path, what: str = "this run's config") -> Iterator[None]:
    """Turn a failure to load a checkpoint's parts into ``what`` (a changed network shape,
    replay capacity, env or a missing field) into a one-line CheckpointError naming it."""
    try:
        yield
    except ShoalError:
        raise  # already says what is wrong
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError, AttributeError) as e:
        if isinstance(e, KeyError):
            detail = f"missing field {e}"
        else:
            detail = _state_dict_misfit(str(e)) or _first_line(e)
        raise CheckpointError(f"checkpoint '{path}' does not fit {what}: {detail}") from None


def weights_misfit(
    saved: Mapping[str, Any], own: Mapping[str, Any], *, optional: Collection[str] = ()
) -> str | None:
    """Why weights ``saved`` (name -> tensor) cannot load into a network whose own are
    ``own``, in one line naming the first parameter and both shapes (or the names one side
    lacks; ``optional``: names of ``own`` that ``saved`` may lack, e.g. buffers); None when
    they fit. A network's loader raises it as a ValueError, which :func:`checkpoint_fits`
    turns into the CheckpointError naming the file."""
    shapes = [
        (k, tuple(saved[k].shape), tuple(v.shape))
        for k, v in own.items()
        if k in saved and hasattr(saved[k], "shape") and hasattr(v, "shape")
    ]
    return _misfit_words(
        [(k, a, b) for k, a, b in shapes if a != b],
        [k for k in own if k not in saved and k not in optional],
        [k for k in saved if k not in own],
    )


_SIZE_MISMATCH = re.compile(
    r"size mismatch for (\S+?): copying a param with shape torch\.Size\(\[([^\]]*)\]\) from "
    r"checkpoint, the shape in current model is torch\.Size\(\[([^\]]*)\]\)"
)
"""One line of torch's ``load_state_dict`` error: a parameter whose shape differs."""


def _state_dict_misfit(message: str) -> str | None:
    """torch's ``load_state_dict`` error (``Error(s) in loading state_dict for ...``, one
    line per problem) in one line naming the first parameter and both shapes, or the names
    one side lacks; None for any other message."""
    if not message.startswith("Error(s) in loading state_dict"):
        return None

    def shape(text: str) -> tuple[int, ...]:
        return tuple(int(n) for n in text.split(",") if n.strip())

    def names(kind: str) -> list[str]:
        line = next((x for x in message.splitlines() if f"{kind} key(s) in state_dict:" in x), "")
        return re.findall(r'"([^"]*)"', line)

    sizes = [(k, shape(a), shape(b)) for k, a, b in _SIZE_MISMATCH.findall(message)]
    return _misfit_words(sizes, names("Missing"), names("Unexpected"))


def _misfit_words(
    sizes: list[tuple[str, tuple[int, ...], tuple[int, ...]]],
    missing: list[str],
    unexpected: list[str],
) -> str | None:
    """The first of these problems in words, with how many more there are: parameters whose
    shape differs (name, the checkpoint's, the network's), names the checkpoint lacks,
    names the network lacks."""
    problems = len(sizes) + len(missing) + len(unexpected)
    if sizes:
        key, saved, own = sizes[0]
        first = f"parameter {key!r} is {saved} in the checkpoint, {own} in the network"
    elif missing:
        first = f"the network's parameter {missing[0]!r} is not in the checkpoint"
    elif unexpected:
        first = f"the checkpoint's parameter {unexpected[0]!r} is not in the network"
    else:
        return None
    more = problems - 1
    if more > 1:
        first += f" ({more} more parameters differ)"
    elif more:
        first += " (1 more parameter differs)"
    return first


def upgrade_checkpoint(path: Path) -> bool:
    """Rewrite a checkpoint of an older shoal (``shoal-checkpoint-v2``) in the safe format,
    atomically. Unpickling it runs whatever it holds: call this only on a file you trust.
    Returns False if the file was already safe."""
    from shoal.replay.nstep import BatchNStepWriter

    try:
        load_checkpoint(path, best=path.name == "best.pt")
        return False
    except CheckpointError:
        pass
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:
        raise _corrupt(path, e) from None
    if not isinstance(state, dict) or state.get("format") not in (*_SAFE_OLD, FORMAT):
        raise CheckpointError(
            f"checkpoint '{path}' is not a shoal checkpoint that can be upgraded "
            f"(format {state.get('format') if isinstance(state, dict) else None!r}; "
            f"upgradable: {', '.join(_SAFE_OLD)})"
        )
    if isinstance(state.get("nstep"), BatchNStepWriter):  # v2 pickled the serial writer
        state["nstep"] = state["nstep"].state_dict()
    state.pop("format")
    try:
        save_checkpoint(path, state)
    except TypeError as e:
        raise CheckpointError(f"checkpoint '{path}' cannot be upgraded: {e}") from None
    load_checkpoint(path, best=path.name == "best.pt")  # it now passes the safe loader
    return True


def _check_layout(state: Any, path: Path, *, best: bool) -> None:
    """The fields every checkpoint has, with their types, before any is used."""

    def bad(what: str) -> CheckpointError:
        return CheckpointError(f"checkpoint '{path}' is not a valid shoal checkpoint: {what}")

    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint '{path}' is not a shoal checkpoint ({FORMAT})")
    fmt = state.get("format")
    if fmt == "shoal-checkpoint-v1":
        raise CheckpointError(
            f"checkpoint '{path}' was written by an older shoal (shoal-checkpoint-v1, before "
            f"the shared run loop); this version reads {FORMAT}: retrain the run"
        )
    if fmt not in (FORMAT, *_SAFE_OLD):
        raise CheckpointError(f"checkpoint '{path}' is not a shoal checkpoint ({FORMAT})")
    for key in ("config", "loop"):
        if not isinstance(state.get(key), dict):
            raise bad(f"field '{key}' is missing or not a table")
    loop = state["loop"]
    if "step" not in loop:
        raise bad("field 'loop.step' is missing")
    for key, types in _LOOP_FIELDS.items():
        value = loop.get(key)
        if key in loop and (not isinstance(value, types) or (key in _COUNTS and _negative(value))):
            raise bad(f"field 'loop.{key}' is {value!r}")
    if best:
        learner = state.get("learner")
        online = learner.get("online") if isinstance(learner, dict) else None
        if not isinstance(online, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in online.items()
        ):
            raise bad("field 'learner.online' is missing or not a table of tensors")
        if not isinstance(state.get("eval_mean"), (int, float)):
            raise bad("field 'eval_mean' is missing or not a number")


def _negative(value: Any) -> bool:
    return isinstance(value, (int, float)) and value < 0


def _run_of(path: Path) -> Path:
    """The run directory a checkpoint file sits in (``RUN/checkpoints/NAME.pt``)."""
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _corrupt(path: Path, e: BaseException) -> CheckpointError:
    return CheckpointError(f"checkpoint '{path}' is corrupt or truncated ({_first_line(e)})")


def _os_reason(e: OSError) -> str:
    """An OSError as the words a user acts on (no space, read-only, no permission)."""
    if e.errno == errno.ENOSPC:
        return "no space left on the device"
    return e.strerror or str(e)
