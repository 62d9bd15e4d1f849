"""Environments and adapters (gymnasium single-agent envs for now)."""

from shoal.envs.gym_env import EnvSpec, make_env, probe_env

__all__ = ["EnvSpec", "make_env", "probe_env"]
