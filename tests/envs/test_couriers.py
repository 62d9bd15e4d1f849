"""Couriers (benchmarks/couriers.py), the long-episode world of benchmarks/long_episodes.py:
PettingZoo's parallel API, deliveries as documented, seeded resets, and a ``pettingzoo:``
id that names a module in the working directory."""

from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def couriers(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import couriers

    return couriers


def test_couriers_passes_pettingzoos_parallel_api_test(couriers):
    parallel_api_test(couriers.parallel_env(max_turns=40), num_cycles=100)


def test_walking_to_the_target_delivers_and_a_new_target_appears(couriers):
    env = couriers.parallel_env(num_agents=1, max_turns=500)
    obs, _ = env.reset(seed=3)
    delivered = 0
    for _ in range(60):
        dr, dc = np.rint(obs["courier_0"][-2:] * env.size).astype(int)
        action = (1 if dr < 0 else 2) if dr else (3 if dc < 0 else 4)
        obs, rewards, *_ = env.step({"courier_0": action})
        delivered += rewards["courier_0"]
        assert 0 <= env._pos[0].min() and env._pos[0].max() < env.size
    assert delivered >= 5  # a target is at most 16 moves away on a 9 x 9 grid


def test_episodes_last_max_turns_and_a_seed_replays_them(couriers):
    def episode(seed):
        env = couriers.parallel_env(num_agents=4, max_turns=30)
        env.reset(seed=seed)
        rng, turns, total = np.random.default_rng(0), 0, 0.0
        while env.agents:
            _, rewards, _, truncations, _ = env.step({a: int(rng.integers(5)) for a in env.agents})
            turns, total = turns + 1, total + sum(rewards.values())
        assert all(truncations.values())
        return turns, total, env._pos.tolist()

    assert episode(5) == episode(5)
    assert episode(5)[0] == 30


def test_a_pettingzoo_world_in_the_working_directory_is_found(tmp_path, monkeypatch):
    from shoal.envs.parallel import make_parallel_env

    (tmp_path / "my_world_here.py").write_text(
        f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r})\nfrom couriers import parallel_env\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", ".")])
    env = make_parallel_env("pettingzoo:my_world_here", num_agents=8, max_turns=500)
    assert len(env.possible_agents) == 8
