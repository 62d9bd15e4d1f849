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

from shoal.config.help import describe_config, describe_section, field_docs
from shoal.config.loading import (
    CONFIG_VERSION,
    RENAMED_KEYS,
    config_to_dict,
    load_config,
    load_run_config,
    load_section,
    parse_override,
    parse_value,
    read_toml,
    save_config,
)
from shoal.config.presets import PRESET_DIR, preset_names
from shoal.config.schema import (
    APEX_SPREAD,
    COMPILE_MODES,
    ENCODERS,
    MAX_BATCH,
    VECTOR_ENGINES,
    Config,
    DQNConfig,
    EnvConfig,
    ExploreConfig,
    ReplayConfig,
    RunConfig,
    param,
)
from shoal.config.values import INT64_MAX, INT64_MIN, validate_fields

__all__ = [
    "APEX_SPREAD",
    "COMPILE_MODES",
    "CONFIG_VERSION",
    "ENCODERS",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_BATCH",
    "PRESET_DIR",
    "RENAMED_KEYS",
    "VECTOR_ENGINES",
    "Config",
    "DQNConfig",
    "EnvConfig",
    "ExploreConfig",
    "ReplayConfig",
    "RunConfig",
    "config_to_dict",
    "describe_config",
    "describe_section",
    "field_docs",
    "load_config",
    "load_run_config",
    "load_section",
    "param",
    "parse_override",
    "parse_value",
    "preset_names",
    "read_toml",
    "save_config",
    "validate_fields",
]
