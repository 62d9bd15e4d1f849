"""The self-play opponent pool and its wiring into the processes runner."""

import io

import numpy as np
import pytest
import torch

import shoal
from shoal.agent.actor import Actor
from shoal.agent.networks import QNetwork
from shoal.envs.connect_four import heuristic_player, random_player
from shoal.errors import ConfigError
from shoal.games.selfplay import OpponentLoader, OpponentPool, SelfPlay, SelfPlayConfig
from shoal.run.checkpoint import load_checkpoint
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


# --- the plug-in ----------------------------------------------------------------------------


def plugin(seed=0, **kw):
    cfg = SelfPlayConfig(enabled=True, **{"snapshot_every": 1, "pool_size": 3, **kw})
    return SelfPlay(cfg, snap(0), seed=seed, games=2)


def published(sp):
    got = sp.opponents.pull(-1)
    return int(got.meta["opponent"]), got.state["w"].tolist()


def test_plugin_snapshots_publishes_and_records(no_shm_leak):
    sp = plugin(snapshot_every=2, random_fraction=0.0, sampling="latest")
    try:
        sp.on_publish(snap(7), 0)  # batch 0: no snapshot yet, the pool is empty
        assert len(sp.pool) == 0 and published(sp) == (-1, [7.0, 7.0])
        sp.on_publish(snap(1), 1)
        assert len(sp.pool) == 0
        sp.on_publish(snap(2), 2)  # every 2nd batch: a snapshot, played from now on
        assert len(sp.pool) == 1 and published(sp) == (0, [2.0, 2.0])
        sp.on_episode({"opponent": 0.0}, 1.0)
        sp.on_episode({"opponent": 0.0}, -1.0)
        sp.on_episode({"opponent": -1.0}, 1.0)  # the random player
        sp.on_episode({}, 1.0)
        assert sp.pool.win_rates() == {0: 0.5}
    finally:
        sp.close()
        sp.close()  # safe twice


def test_plugin_state_round_trip(no_shm_leak):
    """A restored plug-in (pool, records, opponent-choice generator) makes the same
    choices from then on as the one it was saved from, also through torch.save."""
    a = plugin(seed=0, sampling="winrate", random_fraction=0.3)
    b = plugin(seed=99, sampling="winrate", random_fraction=0.3)
    try:
        for batch in range(6):
            a.on_publish(snap(batch), batch)
            opponent, _ = published(a)
            a.on_episode({"opponent": float(opponent)}, 1.0 if batch % 2 else -1.0)
        buf = io.BytesIO()
        torch.save(a.state_dict(), buf)
        buf.seek(0)
        b.load_state_dict(torch.load(buf, weights_only=False))
        assert b.pool.win_rates() == a.pool.win_rates() and len(b.pool) == len(a.pool)
        choices_a, choices_b = [], []
        for batch in range(6, 30):
            for sp, out in ((a, choices_a), (b, choices_b)):
                sp.on_publish(snap(batch), batch)
                out.append(published(sp))
        assert choices_a == choices_b
        assert len({c[0] for c in choices_a}) > 2  # several opponents, the random one too
        assert any(c[0] == -1 for c in choices_a)
    finally:
        a.close()
        b.close()


def test_plugin_plays_the_heuristic_for_its_share_of_batches(no_shm_leak):
    """One draw a batch: the random player's share, then the heuristic's, then the pool;
    the shares come out as configured and the heuristic's games feed no snapshot record."""
    sp = plugin(seed=1, random_fraction=0.2, heuristic_fraction=0.3, sampling="uniform")
    try:
        seen = []
        for batch in range(2000):
            sp.on_publish(snap(batch), batch)
            seen.append(published(sp)[0])
            sp.on_episode({"opponent": float(seen[-1])}, 1.0)
        seen = np.array(seen[5:])  # the pool is full from batch 3 on
        assert abs((seen == -1).mean() - 0.2) < 0.03
        assert abs((seen == -2).mean() - 0.3) < 0.03
        assert abs((seen >= 0).mean() - 0.5) < 0.03
        assert set(sp.pool.win_rates()) <= set(range(2000))
    finally:
        sp.close()


def test_heuristic_and_random_shares_over_one_are_refused():
    cfg = SelfPlayConfig(enabled=True, random_fraction=0.6, heuristic_fraction=0.5)
    with pytest.raises(ConfigError, match="selfplay.heuristic_fraction"):
        cfg.check(None)


class FakeEnv:
    def __init__(self):
        self.unwrapped = self
        self.opponent = None
        self.sets = 0

    def set_opponent(self, opponent):
        self.opponent = opponent
        self.sets += 1


def latest_snapshot_selfplay():
    """An actor on a small masked network, its weights, and self-play publishing the latest
    snapshot at every batch."""
    torch.manual_seed(0)
    net = QNetwork(2 + 3, 3, hidden=[8], dueling=False).requires_grad_(False)
    actor = Actor(net, n_actions=3, action_mask=True, rng=np.random.default_rng(0))
    template = {k: v.clone() for k, v in net.state_dict().items()}
    cfg = SelfPlayConfig(enabled=True, snapshot_every=1, random_fraction=0.0, sampling="latest")
    return actor, template, SelfPlay(cfg, template, seed=0)


def test_opponent_loader_plays_the_published_snapshot(no_shm_leak):
    actor, template, sp = latest_snapshot_selfplay()
    try:
        loader = sp.worker_part()
        assert isinstance(loader, OpponentLoader)
        env = FakeEnv()
        sp.on_publish(template, 0)  # empty pool: the random player
        assert loader.before_episode(env, actor) == {"opponent": -1.0}
        assert env.opponent is random_player
        # a snapshot whose greedy action (always the last legal column) the actor's own
        # weights would not pick
        snapshot = {k: torch.zeros_like(v) for k, v in template.items()}
        snapshot["head.bias"] = torch.tensor([0.0, 1.0, 2.0])
        sp.on_publish(snapshot, 1)
        assert loader.before_episode(env, actor) == {"opponent": 0.0}
        assert env.sets == 2
        rng = np.random.default_rng(0)
        obs = np.array([0.3, -0.2, 1.0, 1.0, 1.0], np.float32)
        assert env.opponent(obs, rng) == 2
        obs[-1] = 0.0  # column 2 full: the next best legal one
        assert env.opponent(obs, rng) == 1
        assert loader.before_episode(env, actor) == {"opponent": 0.0}
        assert env.sets == 2  # nothing newer: the env keeps its opponent
        sp.cfg.random_fraction, sp.cfg.heuristic_fraction = 0.0, 1.0
        sp.on_publish(snapshot, 2)
        assert loader.before_episode(env, actor) == {"opponent": -2.0}
        assert env.opponent is heuristic_player
    finally:
        sp.close()


def test_each_env_of_a_worker_loads_the_newest_opponent_when_its_episode_begins(no_shm_leak):
    """A worker's envs begin episodes at different times: an env that begins after a new
    snapshot was published plays it, even when another env pulled it first."""
    actor, template, sp = latest_snapshot_selfplay()
    try:
        loader = sp.worker_part()
        first, second = FakeEnv(), FakeEnv()
        sp.on_publish(template, 0)
        loader.before_episode(first, actor)
        loader.before_episode(second, actor)
        sp.on_publish(template, 1)  # snapshot 0 enters the pool
        assert loader.before_episode(first, actor) == {"opponent": 0.0}
        assert loader.before_episode(second, actor) == {"opponent": 0.0}
        assert first.sets == second.sets == 2  # both now play snapshot 0
        assert first.opponent is not random_player and second.opponent is not random_player
    finally:
        sp.close()


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
            "dqn.augment=mirror",  # the preset's: the env's board_shape, on the processes runner
            "selfplay.snapshot_every=2",
            "selfplay.random_fraction=0.0",
            "processes.episodes_per_batch=2",
            "env.num_envs=3",  # a worker's envs each load the newest opponent
        ],
        run_dir=tmp_path / "run",
    )
    assert result.updates > 0
    run = RunDir(tmp_path / "run")
    latest = load_checkpoint(run.checkpoint)
    (saved,) = latest["plugins"]  # the plug-in's pool and generator go into checkpoints
    assert saved["pool"]["next_id"] >= 1 and "rng" in saved
    assert set(latest["learner"]) >= {"online", "target", "optimizer", "updates"}
    assert set(load_checkpoint(run.best)["learner"]["online"]) == set(latest["learner"]["online"])
    evals = [r for r in read_metrics(run.metrics) if r["kind"] == "eval"]
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
