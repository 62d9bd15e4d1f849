"""``shoal tune``: hyperparameter search for a user's env and runner (Optuna's TPE sampler,
pruning on each run's own evaluations, trials side by side here or on a Ray cluster),
written as a TOML file ``shoal train`` takes. Optuna is an optional extra:
``pip install 'shoal[tune]'``."""

from shoal.tune.space import SearchSpace, read_space_file
from shoal.tune.study import TuneResult, TuneSettings, resume_study, tune

__all__ = ["SearchSpace", "TuneResult", "TuneSettings", "read_space_file", "resume_study", "tune"]
