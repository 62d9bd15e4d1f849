"""A recurrent Q-network through the Actor interface: the GRU written over explicit
parameters equals torch's GRUCell, and the actor carries the state from step to step."""

import numpy as np
import pytest
import torch

from shoal.agent.actor import Actor
from shoal.agent.networks import RecurrentQNetwork

pytestmark = pytest.mark.timeout(60)


def test_gru_over_explicit_params_equals_torch_gru_cell():
    torch.manual_seed(0)
    net = RecurrentQNetwork(5, 3, hidden=[16], state_dim=8)
    x, h = torch.randn(4, 5), torch.randn(4, 8)
    q, nxt = net(x, h)
    z = torch.relu(net.torso[0](x))
    expected = net.gru(z, h)
    torch.testing.assert_close(nxt, expected)
    torch.testing.assert_close(q, net.head(expected))


def test_actor_carries_the_state_and_steps_it_on_random_actions_too():
    torch.manual_seed(0)
    net = RecurrentQNetwork(4, 2, hidden=[8], state_dim=6)
    actor = Actor(net, n_actions=2, rng=np.random.default_rng(0))
    obs = [np.random.default_rng(i).normal(size=4).astype(np.float32) for i in range(5)]
    for epsilon in (0.0, 1.0):
        actor.epsilon = epsilon
        state = None
        h = net.initial_state(1)
        for o in obs:
            action, state = actor.select_action(o, state)
            with torch.no_grad():
                q, h = net(torch.as_tensor(o[None]), h)
            torch.testing.assert_close(state, h)  # memory moved, whatever the action
            if epsilon == 0.0:
                assert action == int(q.argmax())
    assert actor.initial_state().shape == (1, 6)


def test_a_feed_forward_actor_has_no_state():
    from shoal.agent.networks import QNetwork

    net = QNetwork(4, 2, hidden=[8], dueling=False)
    actor = Actor(net, n_actions=2, rng=np.random.default_rng(0))
    assert actor.initial_state() is None
    assert actor.select_action(np.zeros(4, np.float32))[1] is None
