"""Environments and adapters. Importing this package registers shoal's own gymnasium ids
(``shoal/ConnectFour-v0``, ``shoal/HybridTarget-v0``, ``shoal/Tally-v0``,
``shoal/CartPoleNoVelocity-v0``); the heavy game packages load only when such an env is
made."""

from shoal.envs import connect_four, hybrid_target, masked_cartpole, tally  # noqa: F401
from shoal.envs.gym_env import EnvSpec, make_env, probe_env

__all__ = ["EnvSpec", "make_env", "probe_env"]
