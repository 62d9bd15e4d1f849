"""Whether a trial learned anything: at a budget too small to learn, the best score can be
an untrained network's, and a tuner that crowns it says nothing. Each trial's run
evaluates its untrained network at step 0, before any update (``evaluate_untrained``),
on the run's own evaluation episodes; its ``metrics.csv`` and its score tell the rest."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from shoal.run.metrics import read_metrics

__all__ = ["Learning", "judge_trial", "shown", "untrained_score"]


@dataclass(frozen=True)
class Learning:
    """What a trial's evaluations say of whether it learned."""

    untrained: float | None = None
    """Its untrained network's score: its evaluation before any update (None: none)."""
    beat_untrained: bool = True
    """Its score is above the untrained network's by more than noise (True where there is
    nothing to compare with: no reason to say otherwise)."""
    doubt: str = ""
    """Why it may not have learned ('': no reason to think so)."""


def judge_trial(
    run_dir: str | Path,
    returns: Sequence[float],
    batch_size: int,
    eval_episodes: int,
) -> Learning:
    """Whether the trial in ``run_dir``, whose best.pt scored ``returns`` on fresh
    episodes, beat its untrained network (an evaluation of ``eval_episodes`` episodes
    before any update), and why it may not have learned:

    - every evaluation, and the score, equal the untrained network's (a spread of 0 is
      no evidence of learning: a task where every policy scores 0.0 says so);
    - its best evaluation came before its first update (best.pt is the untrained network);
    - its score is within two standard errors of the untrained network's;
    - its updates sampled fewer transitions than it collected (not a verdict on the
      untrained network: it may have learned a little).
    """
    evals = _evals(run_dir)
    before = [r for r in evals if int(r["updates"]) == 0]
    if not before:
        return Learning(doubt=_few_transitions(evals, batch_size))
    u_row = before[0]  # the step-0 evaluation (a study's older trials: the first before any)
    untrained = float(u_row["eval_mean"])
    not_beaten = _not_beaten(evals, u_row, returns, eval_episodes)
    if not_beaten:
        return Learning(untrained, False, not_beaten)
    return Learning(untrained, True, _few_transitions(evals, batch_size))


def untrained_score(run_dir: str | Path) -> float | None:
    """The run's untrained network's score: its first evaluation before any update (None:
    it made none, or its metrics cannot be read)."""
    before = [r for r in _evals(run_dir) if int(r["updates"]) == 0]
    return float(before[0]["eval_mean"]) if before else None


def _evals(run_dir: str | Path) -> list[dict[str, str]]:
    """The run's eval rows that say their updates (none where its metrics cannot be
    read)."""
    try:
        rows = read_metrics(Path(run_dir) / "metrics.csv")
    except OSError:
        return []
    return [r for r in rows if r["kind"] == "eval" and r["updates"] != ""]


def _not_beaten(
    evals: list[dict[str, str]],
    u_row: dict[str, str],
    returns: Sequence[float],
    eval_episodes: int,
) -> str:
    """Why the score does not beat the untrained network's (``u_row``), or ''."""
    untrained = float(u_row["eval_mean"])
    n = max(len(returns), 1)
    score = sum(returns) / n
    if score == untrained and all(float(r["eval_mean"]) == untrained for r in evals):
        return f"every evaluation scored {shown(untrained)}, the untrained network's score"
    best = max(evals, key=lambda r: float(r["eval_mean"]))  # the first of equals
    if int(best["updates"]) == 0:
        return "its best evaluation came before its first update: best.pt is untrained"
    score_var = sum((x - score) ** 2 for x in returns) / n
    untrained_var = float(u_row["eval_std"] or 0) ** 2
    noise = 2 * math.sqrt(untrained_var / max(eval_episodes, 1) + score_var / n)
    if score <= untrained + noise:
        return (
            f"it scores {shown(score)}, within noise of its untrained network's "
            f"{shown(untrained)} (two standard errors: {shown(noise)})"
        )
    return ""


def _few_transitions(evals: list[dict[str, str]], batch_size: int) -> str:
    """Its updates sampled fewer transitions than it collected ('' otherwise)."""
    if not evals:
        return ""
    last = evals[-1]
    updates, steps = int(last["updates"]), int(last["step"])
    if updates * batch_size < steps:
        return (
            f"its {updates} updates sampled {updates * batch_size} transitions, fewer than"
            f" the {steps} it collected"
        )
    return ""


def shown(value: float) -> str:
    """A score as the study's lines show it: one decimal where that is exact (0.0, 9.5),
    else two (0.96)."""
    return f"{value:.1f}" if round(value, 1) == value else f"{value:.2f}"
