"""The ray runner (scheme 5): Ape-X on Ray.

:mod:`~shoal.runners.ray.runner` holds the runner and its replay actor;
:mod:`~shoal.runners.ray.actor` one Ape-X actor; :mod:`~shoal.runners.ray.local` the local
Ray a run starts when given no cluster. Importing them imports no Ray: it is an optional
extra, loaded where it is used.
"""

from shoal.runners.ray.local import init_local_ray, local_ray_options
from shoal.runners.ray.runner import RayConfig, RayRunner, ReplayActor

__all__ = ["RayConfig", "RayRunner", "ReplayActor", "init_local_ray", "local_ray_options"]
