"""State-action encoders for tabular Sudoku: what the Q-table is keyed by.

Each encoder maps a board (and its candidate array) to the legal actions (every digit in
every blank) and one table key per action. The choice decides whether anything can
transfer between puzzles:

* ``exact``: the key is (hash of the whole board, action). A board never repeats across
  puzzles, so a table keyed this way learns each puzzle from scratch: no transfer.
* ``local``: the key is a small feature code of the chosen cell and digit: how many
  candidates the cell has, whether the digit is one of them, and in how many of the cell's
  row, column and box the cell is the only place left for the digit (a "hidden single").
  Every puzzle shares these ~80 codes, so what one puzzle teaches applies to the next.

Example:
    >>> import numpy as np
    >>> from shoal.envs.sudoku_puzzles import candidates, parse_puzzle
    >>> board = parse_puzzle("12.." "34.." "...." "....")
    >>> actions, keys = LocalEncoder().encode(board.reshape(-1), candidates(board))
    >>> len(actions) == 12 * 4 and keys.dtype == np.uint64
    True
"""

from __future__ import annotations

import functools

import numpy as np

from shoal.envs.sudoku_puzzles import unit_tables
from shoal.tabular.keys import pair_keys, state_key

__all__ = ["ENCODERS", "ExactEncoder", "LocalEncoder", "make_encoder"]

_LOCAL_STATE = np.uint64(0x10CA1)
"""State part of every local key (the features live in the action part)."""


class ExactEncoder:
    """Keys (whole board, action): exact, and so unable to transfer between puzzles."""

    name = "exact"

    def encode(self, flat: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Legal actions (cell * N + digit - 1 for blank cells) and their keys."""
        actions = _legal_actions(flat, cand.shape[1])
        return actions, pair_keys(state_key(flat.tobytes()), actions)


class LocalEncoder:
    """Keys from local constraint features of (cell, digit): generalises across puzzles."""

    name = "local"

    def encode(self, flat: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Legal actions (cell * N + digit - 1 for blank cells) and their keys."""
        n = cand.shape[1]
        blanks = np.flatnonzero(flat == 0)
        _, cell_units = unit_tables(n)
        units, _ = unit_tables(n)
        # Per unit and digit: in how many cells of the unit the digit is still a candidate.
        per_unit = cand[units].sum(axis=1)  # (3n, n)
        hidden = ((per_unit == 1)[cell_units[blanks]].sum(axis=1)) * cand[blanks]  # (b, n)
        count = cand[blanks].sum(axis=1, keepdims=True)  # (b, 1)
        code = (count * 2 + cand[blanks]) * 4 + hidden  # < (n + 1) * 8
        actions = (blanks[:, None] * n + np.arange(n)).reshape(-1)
        return actions, _local_keys(n)[code.reshape(-1)]


@functools.cache
def _local_keys(n: int) -> np.ndarray:
    keys = pair_keys(_LOCAL_STATE, np.arange((n + 1) * 8))
    keys.setflags(write=False)
    return keys


def _legal_actions(flat: np.ndarray, n: int) -> np.ndarray:
    blanks = np.flatnonzero(flat == 0)
    return (blanks[:, None] * n + np.arange(n)).reshape(-1)


ENCODERS = {"exact": ExactEncoder, "local": LocalEncoder}
"""Encoders by name."""


def make_encoder(name: str) -> ExactEncoder | LocalEncoder:
    """An encoder by name ('exact' or 'local')."""
    if name not in ENCODERS:
        raise ValueError(f"encoder {name!r}: allowed {', '.join(ENCODERS)}")
    return ENCODERS[name]()
