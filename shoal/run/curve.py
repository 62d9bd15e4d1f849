"""The learning curve: training episode returns and greedy evaluations vs env steps."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from shoal.run.metrics import read_metrics

__all__ = ["plot_run"]


def plot_run(metrics_csv: Path, out_png: Path, title: str = "") -> Path:
    """Draw ``curve.png`` from a run's metrics (written atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_csv)
    ep = [(int(r["step"]), float(r["return"])) for r in rows if r["kind"] == "episode"]
    ev = [
        (int(r["step"]), float(r["eval_mean"]), float(r["eval_std"] or 0))
        for r in rows
        if r["kind"] == "eval"
    ]
    fig, ax = plt.subplots(figsize=(8, 4.5))
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
    tmp = out_png.with_name(f".{out_png.name}.tmp-{os.getpid()}.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, out_png)
    return out_png
