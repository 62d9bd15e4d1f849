"""Whether a study's best trial learned anything: at a budget too small to learn, the best
score can be an untrained network's (its best evaluation before its first update), and a
tuner that crowns it says nothing. The trial's own ``metrics.csv`` tells."""

from __future__ import annotations

import math
from pathlib import Path

from shoal.run.metrics import read_metrics

__all__ = ["untrained_warning"]


def untrained_warning(run_dir: str | Path, score: float, batch_size: int) -> str:
    """Why the trial in ``run_dir`` that scored ``score`` may not have learned ('': no
    reason): its best evaluation came before any update (best.pt is the untrained
    network); or it scores within two standard errors of its evaluations before any
    update; or its updates sampled fewer transitions than it collected."""
    try:
        rows = read_metrics(Path(run_dir) / "metrics.csv")
    except OSError:
        return ""
    evals = [r for r in rows if r["kind"] == "eval" and r["updates"] != ""]
    if not evals:
        return ""
    best = max(evals, key=lambda r: float(r["eval_mean"]))
    if int(best["updates"]) == 0:
        return "its best evaluation came before its first update: best.pt is untrained"
    before = [r for r in evals if int(r["updates"]) == 0]
    if before:
        mean = sum(float(r["eval_mean"]) for r in before) / len(before)
        spread = max(float(r["eval_std"] or 0) for r in before) / math.sqrt(len(before))
        if score <= mean + 2 * spread:
            return f"it scores {score:.2f}, within noise of its untrained network's {mean:.2f}"
    last = evals[-1]
    updates, steps = int(last["updates"]), int(last["step"])
    if updates * batch_size < steps:
        return (
            f"its {updates} updates sampled {updates * batch_size} transitions, fewer than"
            f" the {steps} it collected"
        )
    return ""
