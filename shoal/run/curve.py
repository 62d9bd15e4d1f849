"""The learning curve: training episode returns and greedy evaluations vs env steps.

matplotlib is imported when a curve is drawn, not with this module, and only its object
API (``Figure`` on the Agg canvas): ``matplotlib.pyplot`` would add about 0.15 s of import,
select a backend for the whole process and keep global figure state, none of which
writing a PNG needs. The image is the same as pyplot's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shoal.run.files import atomic_write
from shoal.run.metrics import read_metrics

__all__ = ["plot_run"]


def plot_run(metrics_csv: Path, out_png: Path, title: str = "") -> Path:
    """Draw ``curve.png`` from a run's metrics (written atomically) and return its path.

    Episode returns are drawn faintly with their running mean over the last 20 episodes;
    greedy evaluations as points with +-1 std bars. Works for any ``metrics.csv``: rows of
    other kinds and columns are ignored.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = read_metrics(metrics_csv)
    ep = [(int(r["step"]), float(r["return"])) for r in rows if r["kind"] == "episode"]
    ev = [
        (int(r["step"]), float(r["eval_mean"]), float(r["eval_std"] or 0))
        for r in rows
        if r["kind"] == "eval"
    ]
    fig = Figure(figsize=(8, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    if ep:
        steps, rets = map(np.asarray, zip(*ep))
        ax.plot(steps, rets, color="tab:blue", alpha=0.25, lw=0.8, label="episode return")
        k = min(20, len(rets))
        smooth = np.convolve(rets, np.ones(k) / k, mode="valid")
        ax.plot(steps[k - 1 :], smooth, color="tab:blue", lw=1.5, label=f"mean of last {k}")
    if ev:
        s, m, sd = map(np.asarray, zip(*ev))
        ax.errorbar(
            s,
            m,
            yerr=sd,
            color="tab:red",
            marker="o",
            ms=3,
            lw=1.2,
            capsize=2,
            label="greedy eval (mean ± std)",
        )
    ax.set_xlabel("env steps")
    ax.set_ylabel("return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ep or ev:
        ax.legend(loc="best")
    fig.tight_layout()
    return atomic_write(out_png, lambda f: fig.savefig(f, format="png", dpi=110))
