"""In every single-agent runner, with batches of envs: no stored transition spans a reset,
a truncated episode bootstraps from its final observation and a terminated one does not.

The runs play ``shoal/Tally-v0``, whose observations name their episode and step, so each
item of the replay in the final checkpoint can be checked on its own
(:func:`~shoal.envs.tally.transition_errors`)."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest

import shoal
from shoal.envs.tally import transition_errors
from shoal.run.checkpoint import load_checkpoint
from shoal.run.directory import RunDir

pytestmark = pytest.mark.timeout(300)

RUNNERS = {
    "serial": [],
    "threads": ["threads.learner_threads=2"],
    "processes": ["processes.workers=2"],
    "ray": ["ray.actors=2", "ray.node_ip_address='127.0.0.2'"],
}


CASES = [(name, n) for name in RUNNERS for n in (1, 4) if (name, n) != ("ray", 1)]
"""Ray at 4 envs only (a Ray run costs seconds more than the others)."""


@pytest.mark.parametrize(("runner", "num_envs"), CASES)
def test_no_transition_crosses_an_episode_boundary(runner, num_envs, tmp_path, tiny):
    overrides = [
        *tiny(run__total_steps=800, env__num_envs=num_envs),
        "env.id='shoal/Tally-v0'",
        "env.max_episode_steps=none",
        f"run.runner={runner}",
        *RUNNERS[runner],
    ]
    shoal.train("cartpole", overrides=overrides, run_dir=tmp_path / "r")
    state = load_checkpoint(RunDir(tmp_path / "r").checkpoint)
    replay = state["replay"]
    items = replay.get("buffer", replay)["storage"]["fields"]  # ray: the replay actor's
    assert len(items["obs"]) >= 700
    assert transition_errors(items, gamma=state["config"]["dqn"]["gamma"]) == []
    # both endings were stored, each with the discount it needs
    ends = items["next_obs"][:, 1] == 3 + items["obs"][:, 0].astype(int) % 5
    assert (items["discount"][ends] == 0).any() and (items["discount"][ends] > 0).any()
    assert np.isin(items["action"], [0, 1]).all()
    assert mp.active_children() == []
