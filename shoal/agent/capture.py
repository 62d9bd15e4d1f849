"""How a learner's update runs: eagerly, with its loss compiled by ``torch.compile``, or
captured once as a CUDA graph and replayed.

On a GPU an eager update is a few hundred small kernel launches, each waiting on Python;
the same update replayed from a CUDA graph is one launch. :class:`GraphedUpdate` captures
a learner's whole update body (target forward, loss, gradients, clip, the optimizer step,
a soft target update) once, on static input buffers each batch is copied into, and
replays it. It checks the first replay against the eager update of the same batch and
falls back to eager, with one line saying why, when capture fails or the two differ: a
network with data-dependent control flow (a ``.any()`` in Python, a ``nonzero``) cannot be
captured, and is never replayed wrong.

The owner of the update (:class:`~shoal.agent.learner.Learner`, the stacked learner)
supplies the :class:`Updatable` members; nothing here knows what the loss is.

Example:
    >>> resolve_compile("auto", torch.device("cpu"))[0]
    'off'
    >>> resolve_compile("graph", torch.device("cpu"))
    Traceback (most recent call last):
    ...
    shoal.errors.ConfigError: config key 'run.compile': 'graph' captures the update as ...
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Protocol

import torch

from shoal.config import COMPILE_MODES
from shoal.config.devices import cuda_refusal
from shoal.errors import ConfigError

__all__ = [
    "GraphedUpdate",
    "Updatable",
    "compile_loss",
    "cuda_capture",
    "resolve_compile",
]


SHOWN = {"off": "eager", "compile": "compiled loss", "graph": "CUDA graph"}
"""How the run's first line names each mode."""


def resolve_compile(mode: str, device: torch.device) -> tuple[str, str]:
    """The update mode ``run.compile = mode`` means on ``device``, and 'auto' where it was
    picked, not asked for. 'graph' on a device without CUDA is a one-line
    :class:`~shoal.errors.ConfigError`."""
    if mode not in COMPILE_MODES:
        allowed = ", ".join(repr(m) for m in COMPILE_MODES)
        raise ConfigError(f"config key 'run.compile': {mode!r} is not one of {allowed}")
    here = torch.cuda.is_available()
    refusal = cuda_refusal(
        "run.compile", mode, learner=device.type, named="the learner's device", cuda_here=here
    )
    if refusal:
        raise ConfigError(refusal)
    if mode == "auto":
        # On 2 CPU cores torch.compile measured 0.84-1.08x eager (benchmarks/RESULTS.md),
        # and costs 10-20 s of compiling: not worth picking for anyone.
        return ("graph" if device.type == "cuda" else "off"), "auto"
    return mode, ""


class Updatable(Protocol):
    """What a learner gives :class:`GraphedUpdate`: its update body and the tensors the
    body changes."""

    def update_body(self, inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss, gradients, clip, optimizer step (and a soft target update) on ``inputs``
        (a batch and its noise): the loss and the TD errors as device tensors, nothing read
        back to the host."""
        ...

    def state_tensors(self) -> list[torch.Tensor]:
        """Every tensor the body writes (weights, targets, optimizer moments and steps)."""
        ...

    def capture_blocker(self) -> str | None:
        """Why the body cannot be captured at all (an optimizer without a device-side
        step), or None."""
        ...

    def baked(self) -> tuple[Any, ...]:
        """The host numbers a recording holds as constants (the optimizer's learning rate,
        betas and eps, the clip norm, tau): a change to any of them needs a new capture."""
        ...


def compile_loss(loss: Callable[..., Any], notes: list[str]) -> Callable[..., Any]:
    """``loss`` through ``torch.compile`` (forward and backward compiled), falling back to
    ``loss`` itself, with a line in ``notes``, when compiling fails at the first call."""
    compiled = torch.compile(loss, dynamic=False)
    state = {"fn": compiled}

    def call(*args: Any) -> Any:
        try:
            return state["fn"](*args)
        except Exception as e:  # dynamo / inductor failures surface at the first call
            if state["fn"] is loss:
                raise
            state["fn"] = loss
            notes.append(f"update: eager, torch.compile failed ({_first_line(e)})")
            return loss(*args)

    return call


def input_tensors(inputs: Any) -> list[torch.Tensor]:
    """The tensors an update reads, in a fixed order: a dataclass's fields, a dict's
    values by key, a tuple's items, recursively (None and other values skipped)."""
    if isinstance(inputs, torch.Tensor):
        return [inputs]
    if is_dataclass(inputs):
        parts: Any = [getattr(inputs, f.name) for f in fields(inputs)]
    elif isinstance(inputs, dict):
        parts = [inputs[k] for k in sorted(inputs)]
    elif isinstance(inputs, (tuple, list)):
        parts = inputs
    else:
        return []
    return [t for part in parts for t in input_tensors(part)]


def _used_here(out: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs made on a side stream, marked as used on the current one too (so that their
    memory is not handed out again before this stream is done with them)."""
    for t in out:
        if t.is_cuda:
            t.record_stream(torch.cuda.current_stream(t.device))
    return out


def _clone(inputs: Any) -> Any:
    """A copy of ``inputs`` with every tensor cloned (the capture's static inputs)."""
    if isinstance(inputs, torch.Tensor):
        return inputs.clone()
    if is_dataclass(inputs):
        return type(inputs)(**{f.name: _clone(getattr(inputs, f.name)) for f in fields(inputs)})
    if isinstance(inputs, dict):
        return {k: _clone(v) for k, v in inputs.items()}
    if isinstance(inputs, tuple):
        return tuple(_clone(v) for v in inputs)
    return inputs


@dataclass
class _Capture:
    """One captured update: its replay, static inputs and outputs."""

    replay: Callable[[], None]
    static: Any
    inputs: list[torch.Tensor]
    out: tuple[torch.Tensor, torch.Tensor]
    baked: tuple[Any, ...]
    """The owner's :meth:`Updatable.baked` numbers when it was recorded."""


class GraphedUpdate:
    """An owner's update body, run eagerly for ``warmup`` updates, then captured once and
    replayed on static inputs.

    The warm-up updates are real updates (CUDA needs a few on a side stream before capture,
    for cuBLAS workspaces and the optimizer's state). The capture's first replay is checked
    against the eager update of the same batch from the same state; any difference beyond
    float tolerance, or a capture that fails, falls back to eager for good with a line in
    :attr:`notes`. Batches of another shape than the captured one run eagerly.

    ``capture`` records a function and returns its replay and its outputs
    (:func:`cuda_capture` by default); tests on a CPU pass a stand-in that runs the body on
    the static inputs at each replay, which checks everything here but the recording.
    """

    def __init__(
        self,
        owner: Updatable,
        *,
        warmup: int = 3,
        capture: Callable[[Callable[[], Any]], tuple[Callable[[], None], Any]] | None = None,
        measure: bool = False,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.owner = owner
        self.warmup = warmup
        self._record = capture or cuda_capture
        self._clock = clock or _synced_clock
        self._times: dict[str, list[float]] | None = (
            {"eager": [], "replay": []} if measure else None
        )
        """With ``measure`` ('auto'): the warm-ups' and the first replays' seconds, to keep
        the graph only where it measured faster."""
        self._seen = 0
        self._capture: _Capture | None = None
        self.failed: str | None = owner.capture_blocker()
        """Why this update runs eagerly (None while it is or will be captured)."""
        self.notes: list[str] = []
        """Lines for the run's output: a fallback and its reason."""
        if self.failed:
            self.notes.append(f"update: eager, not captured ({self.failed})")

    @property
    def captured(self) -> bool:
        """Whether updates replay a captured graph now."""
        return self._capture is not None and self.failed is None

    def __call__(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if self.failed is not None:
            return self.owner.update_body(batch)
        if self._seen < self.warmup:
            self._seen += 1
            with _side_stream():
                out = self._timed("eager", lambda: self.owner.update_body(batch))
            return _used_here(out)
        if self._capture is None:
            return self._capture_and_check(batch)
        if self.owner.baked() != self._capture.baked:  # lr set by a schedule, say
            self._capture = None
            self.notes.append("update: captured again (a learning rate, eps, clip or tau changed)")
            return self._capture_and_check(batch)
        inputs = input_tensors(batch)
        if [t.shape for t in inputs] != [t.shape for t in self._capture.inputs]:
            return self.owner.update_body(batch)  # a short last batch, say
        out = self._timed("replay", lambda: self._replay(inputs))
        self._keep_if_faster()
        return out

    def _replay(self, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        assert self._capture is not None
        torch._foreach_copy_(self._capture.inputs, inputs)
        self._capture.replay()
        loss, td = self._capture.out  # the next replay overwrites them: copies go out
        return loss.clone(), td.clone()

    def _timed(self, kind: str, fn: Callable[[], Any]) -> Any:
        """``fn()``, its seconds kept while 'auto' is still weighing (3 of each kind)."""
        if self._times is None or len(self._times[kind]) >= 3:
            return fn()
        t0 = self._clock()
        out = fn()
        self._times[kind].append(self._clock() - t0)
        return out

    def _keep_if_faster(self) -> None:
        """Once three replays are timed: eager from now on unless the replay was faster
        than the warm-up updates (the first of those aside: cuBLAS starts in it)."""
        times = self._times
        if times is None or len(times["replay"]) < 3 or len(times["eager"]) < 2:
            return
        eager, replay = min(times["eager"][1:]), min(times["replay"])
        self._times = None
        if replay >= eager:
            self._drop(
                f"eager measured faster: {eager * 1e3:.3f} ms an update against "
                f"{replay * 1e3:.3f} ms a replay"
            )

    def _capture_and_check(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Capture on a copy of ``batch``, replay it once, and keep it only if it matches
        the eager update from the same state; either way this update is done once."""
        state = self.owner.state_tensors()
        before = [t.detach().clone() for t in state]
        static, baked = _clone(batch), self.owner.baked()
        try:
            replay, out = self._record(lambda: self.owner.update_body(static))
            cap = _Capture(replay, static, input_tensors(static), out, baked)
            _restore(state, before)  # a recording runs nothing on CUDA; a stand-in may
            cap.replay()
            replayed = [t.detach().clone() for t in state]
        except Exception as e:
            _restore(state, before)
            return self._fall_back(f"capture failed: {_first_line(e)}", batch)
        _restore(state, before)
        eager = self.owner.update_body(static)
        bad = _mismatch(state, replayed, before)
        if bad is not None:
            return self._fall_back(f"the replay differs from eager ({bad})", None, eager)
        self._capture = cap
        return eager

    def _fall_back(
        self, why: str, batch: Any, done: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Eager from now on; this update's result (``done``, or ``batch`` run eagerly)."""
        self._drop(why)
        return done if done is not None else self.owner.update_body(batch)

    def _drop(self, why: str) -> None:
        self.failed = why
        self._capture = None
        self.notes.append(f"update: eager, not captured ({why})")


def _synced_clock() -> float:
    """Seconds, once the GPU's queued work is done (the time of what was queued)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter()


def cuda_capture(fn: Callable[[], Any]) -> tuple[Callable[[], None], Any]:
    """``fn`` recorded as one CUDA graph: its replay, and its outputs (static tensors that
    each replay overwrites). A recording that fails raises what ``fn`` raised (not the
    capture's own follow-on error) with the stream it was called on current again."""
    graph = torch.cuda.CUDAGraph()
    before = torch.cuda.current_stream()
    try:
        with torch.cuda.graph(graph):
            out = fn()
    except Exception as e:
        # torch.cuda.graph's exit ends the capture first; when that raises, its own
        # stream context is never left
        torch.cuda.set_stream(before)
        torch.cuda.synchronize()
        raise (e.__context__ if isinstance(e.__context__, Exception) else e) from None
    return graph.replay, out


@contextlib.contextmanager
def _side_stream() -> Iterator[None]:
    """CUDA's warm-up before capture runs on a side stream; elsewhere nothing."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        yield
        return
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        yield
    torch.cuda.current_stream().wait_stream(stream)


@torch.no_grad()
def _restore(state: Sequence[torch.Tensor], saved: Sequence[torch.Tensor]) -> None:
    torch._foreach_copy_(list(state), list(saved))


@torch.no_grad()
def _mismatch(
    eager: Sequence[torch.Tensor], replayed: Sequence[torch.Tensor], before: Sequence[torch.Tensor]
) -> str | None:
    """Where a replayed update moved a tensor differently from eager, beyond 1% of eager's
    own move (float reordering stays far below; a stale capture does not), or None."""
    for i, (e, r, b) in enumerate(zip(eager, replayed, before)):
        if not e.is_floating_point():
            if not torch.equal(e, r):
                return f"tensor {i} of the learner's state"
            continue
        err = float((e - r).abs().max()) if e.numel() else 0.0
        move = float((e - b).abs().max()) if e.numel() else 0.0
        if not err <= 1e-2 * move + 1e-6:
            return f"tensor {i} of the learner's state off by {err:.3g}, eager moved it {move:.3g}"
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:200]
