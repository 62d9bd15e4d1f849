"""Tabular Q-learning tables: a plain in-process one (the serial oracle) and a shared-memory
one for many processes."""

from shoal.tabular.keys import pair_keys, state_key
from shoal.tabular.local_table import LocalQTable
from shoal.tabular.shared_qtable import (
    LOCK_MODES,
    SharedQTable,
    TableFileError,
    TableFullError,
    TableHandle,
)

__all__ = [
    "LOCK_MODES",
    "LocalQTable",
    "SharedQTable",
    "TableFileError",
    "TableFullError",
    "TableHandle",
    "pair_keys",
    "state_key",
]
