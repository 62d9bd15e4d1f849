"""The learning curve: training episode returns and greedy evaluations vs env steps.

matplotlib is imported when a curve is drawn, not with this module, and only its object
API (``Figure`` on the Agg canvas): ``matplotlib.pyplot`` would add about 0.15 s of import,
select a backend for the whole process and keep global figure state, none of which
writing a PNG needs. The image is the same as pyplot's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from shoal.run.files import atomic_write
from shoal.run.metrics import read_metrics

__all__ = ["plot_run"]


SOCIAL = ("efficiency", "equality", "sustainability", "peace")
"""Social outcome columns a multi-agent runner writes (drawn in a panel of their own)."""


def plot_run(metrics_csv: Path, out_png: Path, title: str = "") -> Path:
    """Draw ``curve.png`` from a run's metrics (written atomically) and return its path.

    Episode returns are drawn faintly with their running mean over the last 20 episodes;
    greedy evaluations as points with +-1 std bars. A multi-agent run (episode rows with
    ``return_<agent>`` columns) gets a panel of every agent's running mean, and one of the
    social outcomes, each as a fraction of its largest value in the run. Works for any
    ``metrics.csv``: rows of other kinds and other columns are ignored.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = read_metrics(metrics_csv)
    episodes = [r for r in rows if r["kind"] == "episode"]
    agents = [c for c in (episodes[0] if episodes else {}) if c.startswith("return_")]
    social = [c for c in SOCIAL if episodes and episodes[0].get(c, "") != ""]
    panels = 1 + bool(agents) + bool(social)
    fig = Figure(figsize=(8, 4.5 + 2.5 * (panels - 1)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(panels, 1, sharex=True, squeeze=False)[:, 0]
    _returns(axes[0], rows, episodes)
    axes[0].set_title(title)
    if agents:
        _series(axes[1], episodes, agents, "return per agent", scale=False)
    if social:
        _series(axes[-1], episodes, social, "social outcome / its max", scale=True)
    axes[-1].set_xlabel("env steps")
    fig.tight_layout()
    return atomic_write(out_png, lambda f: fig.savefig(f, format="png", dpi=110))


def _smooth(values: np.ndarray) -> tuple[int, np.ndarray]:
    """A running mean over up to 20 episodes (fewer in short runs, so a line shows)."""
    k = max(1, min(20, len(values) // 4))
    return k, np.convolve(values, np.ones(k) / k, mode="valid")


def _returns(ax: Any, rows: list[dict[str, str]], episodes: list[dict[str, str]]) -> None:
    """Episode returns with their running mean, and greedy evaluations."""
    ev = [
        (int(r["step"]), float(r["eval_mean"]), float(r["eval_std"] or 0))
        for r in rows
        if r["kind"] == "eval"
    ]
    if episodes:
        steps = np.asarray([int(r["step"]) for r in episodes])
        rets = np.asarray([float(r["return"]) for r in episodes])
        ax.plot(steps, rets, color="tab:blue", alpha=0.25, lw=0.8, label="episode return")
        k, smooth = _smooth(rets)
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
    ax.set_ylabel("return")
    ax.grid(alpha=0.3)
    if episodes or ev:
        ax.legend(loc="best")


def _series(
    ax: Any, episodes: list[dict[str, str]], columns: list[str], label: str, *, scale: bool
) -> None:
    """Running means of some episode columns, one line each (scaled by their max)."""
    steps = np.asarray([int(r["step"]) for r in episodes])
    for column in columns:
        values = np.asarray([float(r[column] or "nan") for r in episodes])
        if scale and np.nanmax(np.abs(values)) > 0:
            values = values / np.nanmax(np.abs(values))
        k, smooth = _smooth(values)
        name = column.removeprefix("return_")
        ax.plot(steps[k - 1 :], smooth, lw=1.0, label=name if len(columns) <= 8 else None)
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    if len(columns) <= 8:
        ax.legend(loc="best", fontsize="small", ncol=2)
