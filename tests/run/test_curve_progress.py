"""The learning curve draws from any metrics.csv without pyplot; the progress bar is a
no-op when disabled; neither module (nor the metrics writer) loads its backend early."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from shoal.run.curve import plot_run
from shoal.run.metrics import MetricsWriter
from shoal.run.progress import TrainProgress


def write_metrics(path, episodes: int = 30) -> None:
    with MetricsWriter(path) as m:
        for i in range(episodes):
            m.log("episode", 10 * (i + 1), episode=i, agent3_return=1.0, **{"return": float(i)})
            if i % 10 == 9:
                m.log("eval", 10 * (i + 1), eval_mean=float(i), eval_std=1.0, efficiency=0.5)


@pytest.mark.parametrize("episodes", [0, 3, 30])
def test_plot_run_writes_a_png_from_metrics_with_extra_columns(tmp_path, episodes):
    metrics = tmp_path / "metrics.csv"
    write_metrics(metrics, episodes)
    out = plot_run(metrics, tmp_path / "curve.png", title="t")
    assert out == tmp_path / "curve.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.png", "metrics.csv"]


def test_plot_run_failure_leaves_no_temp_file_and_keeps_the_old_png(tmp_path, monkeypatch):
    metrics = tmp_path / "metrics.csv"
    write_metrics(metrics)
    png = tmp_path / "curve.png"
    png.write_bytes(b"old")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        plot_run(metrics, png)
    assert png.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.png", "metrics.csv"]


def test_disabled_progress_does_nothing():
    with TrainProgress(100, enabled=False, description="x") as bar:
        bar.update(10)
        bar.update(20, loss=0.5, eval="-")
    assert bar.enabled is False


def test_enabled_progress_updates(capsys):
    with TrainProgress(100, enabled=True, description="x") as bar:
        bar.update(10)
        bar.update(100, loss=0.5, sps=1000, eval="-")
    assert bar.enabled is True


def test_backends_load_only_when_used(tmp_path):
    """Importing the run modules, a disabled bar and a metrics writer with a TensorBoard
    directory load none of torch, TensorBoard, matplotlib, rich, pettingzoo; drawing a
    curve loads matplotlib but not pyplot."""
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        import shoal, shoal.envs, shoal.run.curve, shoal.run.metrics, shoal.run.progress
        from shoal.run.metrics import MetricsWriter
        from shoal.run.progress import TrainProgress
        heavy = ("torch", "tensorboard", "matplotlib", "rich", "pettingzoo", "pygame",
                 "google.protobuf")
        with TrainProgress(10, enabled=False) as bar:
            bar.update(5, loss=1.0)
        d = Path({str(tmp_path)!r})
        with MetricsWriter(d / "metrics.csv", d / "tb") as m:
            m.log("episode", 1, episode=0, **{{"return": 1.0}})
        print(sorted(m for m in heavy if m in sys.modules))
        shoal.run.curve.plot_run(d / "metrics.csv", d / "curve.png")
        print("matplotlib.pyplot" in sys.modules, "matplotlib" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["[]", "False True"]


def test_multi_agent_curve_has_agent_and_social_panels(tmp_path):
    from matplotlib.image import imread

    csv = tmp_path / "metrics.csv"
    with MetricsWriter(csv) as m:
        for i in range(30):
            social = {"efficiency": 0.1 * i, "equality": 0.5, "sustainability": 40.0}
            agents = {f"return_agent_{k}": float(i + k) for k in range(3)}
            m.log("episode", 100 * (i + 1), length=100, **{"return": 3.0 * i}, **agents, **social)
    height = imread(plot_run(csv, tmp_path / "curve.png", title="harvest")).shape[0]
    assert height > 800  # three stacked panels (one panel is 4.5 in * 110 dpi = 495 px)
