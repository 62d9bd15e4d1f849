"""Run configuration: dataclasses whose field docstrings are the ``--help`` text, in parts:
the schema (:mod:`~shoal.config.schema`, its values' checks in :mod:`~shoal.config.values`),
loading (:mod:`~shoal.config.loading`: files, ``extends``, overrides, versions), the
presets (:mod:`~shoal.config.presets`) and the help text (:mod:`~shoal.config.help`).

One :class:`Config` feeds every runner. It is built from defaults, a named preset or a
TOML file, then ``--set section.key=value`` overrides, and validated as a whole before any
work starts: an unknown key, a wrong type or an out-of-range value raises
:class:`~shoal.errors.ConfigError` naming the key, the value and what is allowed.

Example:
    >>> from shoal.config import load_config
    >>> cfg = load_config("cartpole", overrides=["dqn.lr=5e-4"])
    >>> cfg.dqn.lr
    0.0005
"""

from __future__ import annotations

from shoal.config import help, loading, presets, schema, values
from shoal.config.help import *  # noqa: F403 - the package's names are its parts'
from shoal.config.loading import *  # noqa: F403
from shoal.config.presets import *  # noqa: F403
from shoal.config.schema import *  # noqa: F403
from shoal.config.values import *  # noqa: F403

__all__ = [*help.__all__, *loading.__all__, *presets.__all__, *schema.__all__, *values.__all__]
