"""n-step targets on hand-written episodes, with the expected numbers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.replay import NStepWriter

GAMMA = 0.9
REWARDS = [1.0, 2.0, 3.0, 4.0, 5.0]  # a 5-step episode: obs "o0" .. "o4", final obs "o5"


def run_episode(writer, *, terminated, truncated, rewards=REWARDS, prefix="o"):
    """Feed one episode step by step; return (emitted transitions, step index of each emit)."""
    emitted, emit_steps = [], []
    for t, r in enumerate(rewards):
        last = t == len(rewards) - 1
        out = writer.append(
            f"{prefix}{t}",
            f"a{t}",
            r,
            f"{prefix}{t + 1}",
            terminated=terminated and last,
            truncated=truncated and last,
        )
        emitted += out
        emit_steps += [t] * len(out)
    return emitted, emit_steps


def as_tuples(transitions):
    return [(t["obs"], t["action"], t["next_obs"]) for t in transitions]


# By hand, n=3, gamma=0.9:
#   from o0: 1 + 0.9*2 + 0.81*3 = 5.23     from o1: 2 + 0.9*3 + 0.81*4 = 7.94
#   from o2: 3 + 0.9*4 + 0.81*5 = 10.65    from o3: 4 + 0.9*5 = 8.5     from o4: 5
EXPECTED_RETURNS = [5.23, 7.94, 10.65, 8.5, 5.0]
EXPECTED_LINKS = [
    ("o0", "a0", "o3"),
    ("o1", "a1", "o4"),
    ("o2", "a2", "o5"),
    ("o3", "a3", "o5"),
    ("o4", "a4", "o5"),
]


def test_three_step_episode_ending_in_termination():
    writer = NStepWriter(n=3, gamma=GAMMA)
    out, steps = run_episode(writer, terminated=True, truncated=False)
    assert as_tuples(out) == EXPECTED_LINKS
    assert [t["reward"] for t in out] == pytest.approx(EXPECTED_RETURNS)
    # Full windows bootstrap with gamma^3; the three windows that reach the terminal state
    # must not bootstrap at all.
    assert [t["discount"] for t in out] == pytest.approx([0.729, 0.729, 0.0, 0.0, 0.0])
    assert steps == [2, 3, 4, 4, 4]  # nothing is emitted before a window is complete
    assert len(writer) == 0


def test_three_step_episode_ending_in_truncation_bootstraps_shorter_windows():
    writer = NStepWriter(n=3, gamma=GAMMA)
    out, steps = run_episode(writer, terminated=False, truncated=True)
    assert as_tuples(out) == EXPECTED_LINKS
    assert [t["reward"] for t in out] == pytest.approx(EXPECTED_RETURNS)
    # k = 3, 3, 3, 2, 1 steps to the final observation, which is bootstrapped from.
    assert [t["discount"] for t in out] == pytest.approx([0.729, 0.729, 0.729, 0.81, 0.9])
    assert steps == [2, 3, 4, 4, 4]
    assert len(writer) == 0


def test_termination_wins_over_truncation():
    writer = NStepWriter(n=3, gamma=GAMMA)
    out, _ = run_episode(writer, terminated=True, truncated=True)
    assert [t["discount"] for t in out] == pytest.approx([0.729, 0.729, 0.0, 0.0, 0.0])
    assert [t["reward"] for t in out] == pytest.approx(EXPECTED_RETURNS)


@pytest.mark.parametrize(("terminated", "last_discount"), [(True, 0.0), (False, GAMMA)])
def test_one_step_gives_ordinary_transitions(terminated, last_discount):
    writer = NStepWriter(n=1, gamma=GAMMA)
    out, steps = run_episode(writer, terminated=terminated, truncated=not terminated)
    assert steps == [0, 1, 2, 3, 4]  # one transition per step, emitted immediately
    assert as_tuples(out) == [(f"o{t}", f"a{t}", f"o{t + 1}") for t in range(5)]
    assert [t["reward"] for t in out] == REWARDS
    assert [t["discount"] for t in out] == pytest.approx([GAMMA] * 4 + [last_discount])


def test_episode_shorter_than_n_terminates_cleanly():
    writer = NStepWriter(n=5, gamma=0.5)
    out, steps = run_episode(writer, terminated=True, truncated=False, rewards=[1.0, 2.0])
    assert steps == [1, 1]
    assert as_tuples(out) == [("o0", "a0", "o2"), ("o1", "a1", "o2")]
    assert [t["reward"] for t in out] == pytest.approx([2.0, 2.0])
    assert [t["discount"] for t in out] == [0.0, 0.0]


def test_flush_mid_episode_acts_like_truncation():
    writer = NStepWriter(n=3, gamma=GAMMA)
    for t, r in enumerate(REWARDS):
        writer.append(f"o{t}", f"a{t}", r, f"o{t + 1}", terminated=False, truncated=False)
    assert len(writer) == 2  # o3 and o4 still wait for more steps
    out = writer.flush()
    assert as_tuples(out) == EXPECTED_LINKS[3:]
    assert [t["reward"] for t in out] == pytest.approx([8.5, 5.0])
    assert [t["discount"] for t in out] == pytest.approx([0.81, 0.9])
    assert len(writer) == 0
    assert writer.flush() == []


def test_episodes_do_not_leak_into_each_other():
    writer = NStepWriter(n=3, gamma=GAMMA)
    run_episode(writer, terminated=True, truncated=False, prefix="x")
    out, _ = run_episode(writer, terminated=True, truncated=False, prefix="y")
    assert [t["obs"] for t in out] == [f"y{t}" for t in range(5)]
    assert all(t["next_obs"].startswith("y") for t in out)
    assert [t["reward"] for t in out] == pytest.approx(EXPECTED_RETURNS)


def test_emitted_transitions_carry_exactly_the_buffer_keys():
    writer = NStepWriter(n=1, gamma=0.99)
    (t,) = writer.append(0, 1, 2, 3, terminated=False, truncated=False)
    assert set(t) == {"obs", "action", "reward", "next_obs", "discount"}
    assert isinstance(t["reward"], float) and isinstance(t["discount"], float)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0, "gamma": 0.9}, "n must be an integer >= 1, got 0"),
        ({"n": 2.0, "gamma": 0.9}, "n must be an integer"),
        ({"n": 1, "gamma": 1.1}, r"gamma must lie in \[0, 1\], got 1.1"),
        ({"n": 1, "gamma": -0.1}, r"gamma must lie in \[0, 1\]"),
    ],
)
def test_constructor_validates_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NStepWriter(**kwargs)


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=5),
    n=st.integers(1, 6),
    gamma=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_whole_episodes_at_once_are_what_the_writer_emits(lengths, n, gamma, seed):
    """Episodes back to back, each terminated or truncated: the writer's transitions, in its
    order, bit for bit."""
    from shoal.replay.nstep import nstep_episodes

    rng = np.random.default_rng(seed)
    terminated = rng.random(len(lengths)) < 0.5
    obs_parts, actions, rewards, expected = [], [], [], []
    for steps, term in zip(lengths, terminated):
        obs = rng.normal(size=(steps + 1, 3)).astype(np.float32)
        act = rng.integers(0, 4, size=steps)
        rew = rng.normal(size=steps).astype(np.float32)
        writer = NStepWriter(n, gamma)
        for t in range(steps):
            last = t == steps - 1
            expected += writer.append(
                obs[t], int(act[t]), float(rew[t]), obs[t + 1], term and last, (not term) and last
            )
        obs_parts.append(obs)
        actions.append(act)
        rewards.append(rew)
    got = nstep_episodes(
        np.concatenate(obs_parts),
        {"action": np.concatenate(actions)},
        np.concatenate(rewards),
        np.array(lengths),
        terminated,
        n=n,
        gamma=gamma,
    )
    assert len(expected) == len(got["reward"]) == sum(lengths)
    for name in ("obs", "action", "reward", "next_obs", "discount"):
        want = np.array([np.asarray(e[name]) for e in expected])
        assert np.array_equal(got[name], want), name  # bit for bit


@settings(max_examples=150, deadline=None)
@given(
    envs=st.integers(1, 5),
    n=st.integers(1, 5),
    gamma=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
    flush_at=st.integers(0, 40),
)
def test_the_batch_writer_emits_what_a_writer_per_env_emits(envs, n, gamma, seed, flush_at):
    """Random episode ends (terminated, truncated), rows that are not steps (an engine's
    reset step) and a flush: env by env, the same transitions bit for bit."""
    from shoal.replay.nstep import BatchNStepWriter

    rng = np.random.default_rng(seed)
    batch = BatchNStepWriter(envs, n, gamma)
    single = [NStepWriter(n, gamma) for _ in range(envs)]
    got, want = [], []
    ended = np.zeros(envs, bool)
    for t in range(40):
        obs = rng.normal(size=(envs, 2)).astype(np.float32)
        nxt = rng.normal(size=(envs, 2)).astype(np.float32)
        act = rng.integers(0, 3, size=envs)
        rew = rng.normal(size=envs).astype(np.float32)
        term, trunc = rng.random(envs) < 0.1, rng.random(envs) < 0.1
        live = ~(ended & (rng.random(envs) < 0.5))  # an engine's reset step, after an end
        ended = live & (term | trunc)
        out = batch.append(obs, {"action": act}, rew, nxt, term, trunc, live)
        got += [{k: v[i] for k, v in out.items()} for i in range(len(out.get("reward", [])))]
        for i in np.flatnonzero(live):
            want += single[i].append(obs[i], act[i], float(rew[i]), nxt[i], term[i], trunc[i])
        if t == flush_at:
            out = batch.flush()
            got += [{k: v[i] for k, v in out.items()} for i in range(len(out.get("reward", [])))]
            for w in single:
                want += w.flush()
            ended[:] = False

    def key(tr):  # the batch writer orders envs by index within a step; compare as sets
        return (
            tr["obs"].tobytes(),
            tr["next_obs"].tobytes(),
            float(tr["reward"]),
            float(tr["discount"]),
            int(tr["action"]),
        )

    assert sorted(map(key, got)) == sorted(map(key, want))
