"""Social outcome metrics: hand-computed values, the step-by-step accumulator against the
whole-array function, and a harvest episode fed the way a runner would."""

import numpy as np
import pytest

from shoal.envs.social_metrics import EpisodeMetrics, social_outcomes

pytestmark = pytest.mark.timeout(60)


def test_hand_computed_episode():
    # T = 3, N = 2; returns (2, 1)
    r = [[1, 0], [0, 0], [1, 1]]
    o = [[0, 0], [0, 1], [0, 1]]
    m = social_outcomes(r, o)
    assert m["efficiency"] == pytest.approx(3 / 3)
    assert m["equality"] == pytest.approx(1 - (1 + 1) / (2 * 2 * 3))
    assert m["sustainability"] == pytest.approx(((1 + 3) / 2 + 3) / 2)
    assert m["peace"] == pytest.approx((2 * 3 - 2) / 3)
    assert set(m) == {"efficiency", "equality", "sustainability", "peace"}


def test_nothing_happens():
    m = social_outcomes(np.zeros((5, 3)))
    assert m == {"efficiency": 0.0, "equality": 1.0, "sustainability": 0.0, "peace": 3.0}


def test_equality_is_one_minus_gini():
    assert social_outcomes([[1, 1, 1, 1]])["equality"] == pytest.approx(1.0)
    # one of four has everything: sum |Ri - Rj| = 2 * 3 * 4 = 24, 2 N sum R = 32
    assert social_outcomes([[4, 0, 0, 0]])["equality"] == pytest.approx(1 - 24 / 32)
    # returns (1, 2, 3): sum |Ri - Rj| = 2 * (1 + 2 + 1) = 8, 2 N sum R = 36
    assert social_outcomes([[1, 2, 3]])["equality"] == pytest.approx(1 - 8 / 36)
    # a tagging cost makes a return negative: |R| in the denominator keeps G in [0, 1]
    assert social_outcomes([[2, -1]])["equality"] == pytest.approx(1 - 6 / (2 * 2 * 3))


def test_sustainability_leaves_out_agents_that_never_ate():
    r = np.zeros((4, 3))
    r[1, 0] = r[3, 0] = 1  # agent 0 at steps 2 and 4: mean 3
    r[0, 1] = 1  # agent 1 at step 1
    r[2, 2] = -0.5  # agent 2 only paid a tagging cost: never positive, left out
    assert social_outcomes(r)["sustainability"] == pytest.approx((3 + 1) / 2)
    assert social_outcomes(r)["efficiency"] == pytest.approx(2.5 / 4)


def test_peace_counts_agent_steps_out():
    o = np.zeros((2, 3), bool)
    o[0, 1] = o[1, 1] = o[1, 2] = True
    assert social_outcomes(np.zeros((2, 3)), o)["peace"] == pytest.approx((6 - 3) / 2)


def test_shapes_are_checked():
    with pytest.raises(ValueError, match=r"\(T, N\)"):
        social_outcomes([1, 2])
    with pytest.raises(ValueError, match="tagged_out"):
        social_outcomes(np.zeros((2, 2)), np.zeros((2, 3)))
    m = EpisodeMetrics(2)
    with pytest.raises(ValueError, match="expected"):
        m.add([1, 2, 3])
    with pytest.raises(TypeError, match="dict"):
        EpisodeMetrics(["a"]).add({"a": 1.0}, [False])


def test_accumulator_matches_the_whole_array_function():
    rng = np.random.default_rng(0)
    for t, n in ((1, 1), (7, 3), (200, 16)):
        r = rng.choice([0.0, 0.0, 1.0, -0.1], size=(t, n))
        o = rng.random((t, n)) < 0.2
        m = EpisodeMetrics(n)
        for step in range(t):
            m.add(r[step], o[step])
        assert m.steps == t
        got, want = m.result(), social_outcomes(r, o)
        assert got == pytest.approx(want)
    m.reset()
    assert m.steps == 0
    assert m.result() == {"efficiency": 0.0, "equality": 1.0, "sustainability": 0.0, "peace": 16}


def test_dicts_and_absent_agents():
    names = ["x", "y", "z"]
    m = EpisodeMetrics(names)
    m.add({"x": 1.0, "y": 0.0, "z": 0.0}, {"x": False, "y": True, "z": False})
    m.add({"x": 0.0, "z": 1.0}, {"x": False, "z": False, "y": True})  # y left: infos may omit
    m.add({"z": 1.0})
    want = social_outcomes([[1, 0, 0], [0, 0, 1], [0, 0, 1]], [[0, 1, 0], [0, 1, 0], [1, 1, 0]])
    assert m.result() == pytest.approx(want)
    m = EpisodeMetrics(names, absent_is_tagged=False)
    m.add({"x": 1.0})
    assert m.result()["peace"] == 3.0


def test_a_harvest_episode_fed_step_by_step():
    from shoal.envs.harvest import HarvestEnv

    env = HarvestEnv(6, max_turns=400, leave_when_tagged=True, lives=2)
    env.reset(seed=3)
    rng = np.random.default_rng(3)
    metrics = EpisodeMetrics(env.possible_agents)
    rows, outs = [], []
    while env.agents:
        actions = {a: int(rng.integers(6)) for a in env.agents}
        _, rewards, _, _, infos = env.step(actions)
        metrics.add(rewards, {a: info["tagged_out"] for a, info in infos.items()})
        rows.append([rewards.get(a, 0.0) for a in env.possible_agents])
        outs.append([infos[a]["tagged_out"] if a in infos else True for a in env.possible_agents])
    got = metrics.result()
    assert got == pytest.approx(social_outcomes(rows, outs))
    assert 0 < got["efficiency"] and 0 <= got["equality"] <= 1
    assert 1 <= got["sustainability"] <= 400 and got["peace"] < 6
