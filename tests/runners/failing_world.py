"""``env.id='pettingzoo:failing_world'``: the leaving world, failing after its first epoch
(a module of its own, so that a collector process can import it by name)."""

from leaving_world import failing_env as parallel_env

__all__ = ["parallel_env"]
