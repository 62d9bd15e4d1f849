"""The ray runner (scheme 5): Ape-X on Ray.

:mod:`~shoal.runners.ray.runner` holds the runner, its replay actor and the local Ray's
options; :mod:`~shoal.runners.ray.actor` one Ape-X actor. Importing them imports no Ray:
it is an optional extra, loaded where it is used.
"""

from shoal.runners.ray.runner import RayConfig, RayRunner, ReplayActor, local_ray_options

__all__ = ["RayConfig", "RayRunner", "ReplayActor", "local_ray_options"]
