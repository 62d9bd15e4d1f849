"""Actors' initial priorities: the n-step TD error, bootstrapped from max Q at t + n (not at
t) and not past a termination; on truncation the bootstrap stays (docs/ARCHITECTURE.md
trap: the reference DHC code got both wrong)."""

import numpy as np
import pytest
import torch

from shoal.agent.priorities import initial_priorities
from shoal.replay import NStepWriter

GAMMA, N, T = 0.5, 3, 6


class Linear:
    """Q(s) = [s, -s] for a scalar state s: easy to compute by hand."""

    def apply_params(self, params, obs):
        return obs * params["w"]


def episode_transitions(terminated: bool) -> dict[str, np.ndarray]:
    writer, out = NStepWriter(N, GAMMA), []
    for t in range(T):
        end = t == T - 1
        out += writer.append(
            np.array([t + 1.0], np.float32),  # s_t = t + 1
            t % 2,
            float(t + 1),  # r_t = t + 1
            np.array([t + 2.0], np.float32),
            terminated and end,
            (not terminated) and end,
        )
    return {k: np.stack([np.asarray(tr[k]) for tr in out]) for k in out[0]}


def by_hand(terminated: bool) -> np.ndarray:
    q = lambda s, a: s if a == 0 else -s  # noqa: E731
    expected = []
    for t in range(T):
        k = min(N, T - t)  # steps in the window
        ret = sum(GAMMA**i * (t + i + 1) for i in range(k))
        s_next = t + k + 1.0  # the state k steps on: s_{t+k}
        bootstrap = 0.0 if (terminated and t + k == T) else GAMMA**k * s_next  # max_a Q = s
        expected.append(abs(ret + bootstrap - q(t + 1.0, t % 2)))
    return np.array(expected)


@pytest.mark.parametrize("terminated", [True, False])
def test_priorities_bootstrap_at_t_plus_n_and_never_past_termination(terminated):
    params = {"w": torch.tensor([1.0, -1.0])}
    got = initial_priorities(Linear(), params, episode_transitions(terminated))
    np.testing.assert_allclose(got, by_hand(terminated), rtol=1e-6)
    assert got.dtype == np.float64


def test_bootstrapping_at_t_would_give_other_priorities():
    # The check above can fail: the DHC mistake (max Q at t, not t + n) differs here.
    params = {"w": torch.tensor([1.0, -1.0])}
    got = initial_priorities(Linear(), params, episode_transitions(False))
    wrong = [
        abs(
            sum(GAMMA**i * (t + i + 1) for i in range(min(N, T - t)))
            + GAMMA ** min(N, T - t) * (t + 1.0)
            - (t + 1.0 if t % 2 == 0 else -(t + 1.0))
        )
        for t in range(T)
    ]
    assert not np.allclose(got, wrong)
