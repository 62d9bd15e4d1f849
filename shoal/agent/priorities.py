"""Initial replay priorities computed where the experience is made (Ape-X's actors).

An actor that sends its n-step transitions to a shared prioritized replay gives each one
its own ``|TD error|`` as the initial priority, instead of the replay's running maximum,
so fresh experience is replayed in proportion to how surprising it is. The TD error is the
one the learner's loss computes, with the actor's network in both roles (it has no target
network) and a max over the next state's actions: ``reward + discount * max_a Q(next_obs,
a) - Q(obs, action)``. ``next_obs`` is the state n steps on (the n-step writer put it
there) and ``discount`` is 0 after termination, so the bootstrap is taken at t + n, never
at t, and never past the end of an episode (the reference DHC code got both wrong; see
docs/ARCHITECTURE.md, Known traps).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from shoal.agent.losses import Batch, DQNLoss
from shoal.agent.networks import Params

__all__ = ["initial_priorities"]


@torch.inference_mode()
def initial_priorities(
    network: torch.nn.Module,
    params: Params,
    transitions: Mapping[str, np.ndarray],
    *,
    action_mask: bool = False,
) -> np.ndarray:
    """``|TD error|`` of each n-step transition (fields stacked, as
    :meth:`~shoal.replay.ReplayBuffer.add_batch` takes them) under ``params``, as float64.

    Example:
        >>> import numpy as np
        >>> from shoal.agent.networks import QNetwork
        >>> net = QNetwork(2, 2, hidden=[4], dueling=False)
        >>> batch = {"obs": np.zeros((3, 2), np.float32), "action": np.array([0, 1, 0]),
        ...          "reward": np.ones(3, np.float32), "next_obs": np.zeros((3, 2), np.float32),
        ...          "discount": np.zeros(3, np.float32)}
        >>> initial_priorities(net, dict(net.named_parameters()), batch).shape
        (3,)
    """
    device = next(iter(params.values())).device
    batch = Batch.from_numpy(transitions, device)
    loss = DQNLoss(network, double=False, action_mask=action_mask)
    _, q_a, target = loss.td_terms(params, params, batch)
    return (target - q_a).abs().double().cpu().numpy()
