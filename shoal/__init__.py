"""shoal: parallel and distributed reinforcement learning on one algorithm core.

Example:
    >>> import shoal
    >>> shoal.preset_names()
    ['cartpole']
"""

from shoal.config import Config, load_config, preset_names
from shoal.errors import ShoalError
from shoal.runs import TrainResult, evaluate_run, plot, train

__all__ = [
    "Config",
    "ShoalError",
    "TrainResult",
    "evaluate_run",
    "load_config",
    "plot",
    "preset_names",
    "train",
]
__version__ = "0.1.0"
