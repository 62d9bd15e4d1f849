"""The self-play opponent pool and its wiring into the processes runner."""

import numpy as np
import pytest
import torch

import shoal
from shoal.games.selfplay import OpponentPool
from shoal.run.directory import RunDir
from shoal.run.metrics import read_metrics

pytestmark = pytest.mark.timeout(240)


def snap(v):
    return {"w": torch.full((2,), float(v))}


def test_pool_keeps_the_newest_and_copies():
    pool = OpponentPool(size=2, mode="latest")
    assert pool.sample() is None
    state = snap(0)
    a = pool.add(state)
    state["w"].fill_(9)  # the pool holds a copy, not the live tensor
    b, c = pool.add(snap(1)), pool.add(snap(2))
    assert (a, b, c) == (0, 1, 2) and len(pool) == 2
    sid, weights = pool.sample()
    assert sid == 2 and weights["w"].tolist() == [2.0, 2.0]
    pool.record(a, 1.0)  # a was dropped: ignored
    assert 0 not in pool.win_rates()


def test_uniform_and_winrate_sampling():
    pool = OpponentPool(size=3, mode="uniform", seed=0)
    for v in range(3):
        pool.add(snap(v))
    counts = np.bincount([pool.sample()[0] for _ in range(3000)], minlength=3)
    assert (np.abs(counts / 3000 - 1 / 3) < 0.05).all()
    hard = OpponentPool(size=2, mode="winrate", seed=0)
    easy_id, hard_id = hard.add(snap(0)), hard.add(snap(1))
    for _ in range(10):
        hard.record(easy_id, 1.0)  # the learner always beats it
        hard.record(hard_id, -1.0)  # and always loses to this one
    picks = [hard.sample()[0] for _ in range(1000)]
    assert picks.count(hard_id) > 0.9 * len(picks) and picks.count(easy_id) > 0
    assert hard.win_rates() == {easy_id: 1.0, hard_id: 0.0}


def test_state_round_trip():
    pool = OpponentPool(size=3, mode="winrate", seed=1)
    for v in range(3):
        pool.add(snap(v))
    pool.record(1, 1.0)
    again = OpponentPool(size=3, mode="winrate", seed=5)
    again.load_state_dict(pool.state_dict())
    assert [again.sample()[0] for _ in range(20)] == [pool.sample()[0] for _ in range(20)]
    assert again.win_rates() == pool.win_rates()


def test_bad_arguments():
    with pytest.raises(ValueError, match="size"):
        OpponentPool(size=0)
    with pytest.raises(ValueError, match="mode"):
        OpponentPool(size=1, mode="elo")


def test_selfplay_run_on_connect_four(tmp_path):
    """A short self-play run: snapshots enter the pool, workers play them, the learner
    records results and reports win rates against the reference players."""
    result = shoal.train(
        "connect4",
        overrides=[
            "run.total_steps=1500",
            "run.learning_starts=200",
            "run.eval_every=1000",
            "run.eval_episodes=4",
            "run.progress=false",
            "dqn.hidden=[32]",
            "selfplay.snapshot_every=2",
            "selfplay.random_fraction=0.0",
            "processes.episodes_per_batch=2",
        ],
        run_dir=tmp_path / "run",
    )
    assert result.updates > 0
    evals = [r for r in read_metrics(RunDir(tmp_path / "run").metrics) if r["kind"] == "eval"]
    assert evals and float(evals[-1]["pool_size"]) >= 1
    for key in (
        "win_random_first",
        "win_random_second",
        "win_heuristic_first",
        "win_heuristic_second",
    ):
        assert 0.0 <= float(evals[-1][key]) <= 1.0


def test_selfplay_needs_a_two_player_env(tmp_path):
    with pytest.raises(shoal.ShoalError, match="no opponent"):
        shoal.train(
            "cartpole",
            overrides=[
                "run.runner=processes",
                "selfplay.enabled=true",
                "run.progress=false",
                f"run.out='{tmp_path}'",
            ],
        )
