"""Sudoku as a gymnasium env: place one digit per step, with an action mask and candidates.

The puzzle tools (parsing, candidates, solving, generating, bundled sets) live in
:mod:`shoal.envs.sudoku_puzzles`; this module only adds the episode logic and the spaces.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from shoal.envs.sudoku_puzzles import SIZES, SudokuError, _candidates_flat, as_board, solve

__all__ = ["SudokuEnv"]


class SudokuEnv(gym.Env):
    """Fill a 9x9 (or 4x4) sudoku one digit at a time.

    **Actions** are ``Discrete(N**3)``: ``action = cell * N + (digit - 1)`` with
    ``cell = row * N + col`` (0-based). **Observations** are the board flattened row by row,
    ``int8`` in ``0..N`` (0 = blank), a ``Box(0, N, (N*N,), int8)``.

    ``info`` (from ``reset`` and ``step``) holds ``"action_mask"``, a bool ``(N**3,)`` array
    that is True for every (blank cell, digit) pair, conflicting digits included, since
    avoiding conflicts is what the agent must learn; and ``"candidates"``, the bool
    ``(N*N, N)`` array of :func:`~shoal.envs.sudoku_puzzles.candidates` for the current
    board, so an agent need not recompute it. ``step``'s ``info["solved"]`` is True on the
    placement that completes the board.

    Rewards (all configurable) and episode ends:

    =====================================================  ===================  ==========
    the placed digit ...                                   reward               terminated
    =====================================================  ===================  ==========
    conflicts with none of its row, column and box         ``reward_valid``     no
    already occurs in its row, column or box (conflict)    ``reward_conflict``  yes
    is valid but leaves a blank with no candidate          ``reward_dead_end``  yes
    is valid but leaves the puzzle unsolvable (see below)  ``reward_dead_end``  yes
    is valid and fills the last blank (solved)             ``reward_solved``    yes
    =====================================================  ===================  ==========

    A valid digit need not be the puzzle's solution digit: a valid but wrong digit is
    rewarded like any valid one and leads, sooner or later, to a dead end or a conflict.
    Only blanks with no candidate at all count as dead ends (a digit that fits no cell of a
    row, column or box is not detected). A conflicting digit is still written to the board
    (the final observation shows the mistake). With ``end_on_wrong`` the env ends the
    episode at the first valid digit after which the board has no solution (the solution's
    digit when the puzzle has one solution, found once per puzzle; a search after each
    placement when it has several): the blame for a wrong guess lands on the guess, not on
    the forced placement that finds it out many steps later (``info["wrong"]`` says so).
    That is a training signal only: it reads the answer. Episodes never truncate: every step fills a
    blank or ends the episode, so one lasts at most ``N*N`` steps.

    Placing a digit in a cell that is not blank (a given, or filled earlier) is not a move
    the agent can make: it raises :class:`~shoal.envs.sudoku_puzzles.SudokuError` naming
    the cell. Agents sample from ``info["action_mask"]``. So do not run an unmasked random
    policy on it, as gymnasium's ``check_env`` does (it passes on an all-blank board).

    Args:
        puzzle: the puzzle (board array or string, see
            :func:`~shoal.envs.sudoku_puzzles.parse_puzzle`) that ``reset()`` restarts.
            Without one, every ``reset`` must pass ``options={"puzzle": ...}``.
        size: 9 or 4. Defaults to the puzzle's size, or 9 without a puzzle; fixes the
            spaces, so every puzzle given to ``reset`` must have this size.
        reward_valid: reward for a placement that conflicts with nothing.
        reward_conflict: reward for a conflicting placement (ends the episode).
        reward_dead_end: reward for a valid placement that leaves a blank with no
            candidate (ends the episode).
        reward_solved: reward for the placement that completes the board (ends the
            episode), instead of ``reward_valid``.
        end_on_wrong: end the episode, as a dead end, at the first valid placement that
            leaves the puzzle unsolvable (see above).
        render_mode: None or ``"ansi"`` (``render()`` returns the board as text).

    Example:
        >>> env = SudokuEnv("12.." "34.." "...." "....", size=4)
        >>> obs, info = env.reset(seed=0)
        >>> action = int(np.flatnonzero(info["candidates"].reshape(-1))[0])
        >>> obs, reward, terminated, truncated, info = env.step(action)
        >>> obs[:4].tolist(), reward, terminated
        ([1, 2, 3, 0], 0.1, False)
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        puzzle: np.ndarray | str | None = None,
        *,
        size: int | None = None,
        reward_valid: float = 0.1,
        reward_conflict: float = -1.0,
        reward_dead_end: float = -1.0,
        reward_solved: float = 1.0,
        end_on_wrong: bool = False,
        render_mode: str | None = None,
    ) -> None:
        board = None if puzzle is None else as_board(puzzle)
        if size is None:
            size = 9 if board is None else board.shape[0]
        if size not in SIZES:
            raise SudokuError(f"size must be 9 or 4, got {size!r}")
        if board is not None and board.shape[0] != size:
            raise SudokuError(
                f"puzzle is {board.shape[0]}x{board.shape[0]} but size={size}; "
                f"pass size={board.shape[0]} or a {size}x{size} puzzle"
            )
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise SudokuError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self._n = size
        self._default_puzzle = board
        self.reward_valid = float(reward_valid)
        self.reward_conflict = float(reward_conflict)
        self.reward_dead_end = float(reward_dead_end)
        self.reward_solved = float(reward_solved)
        self.end_on_wrong = bool(end_on_wrong)
        # (puzzle bytes, its flat solution, or None when it has several)
        self._solution: tuple[bytes, np.ndarray | None] | None = None
        self.render_mode = render_mode
        n = size
        self.action_space = gym.spaces.Discrete(n**3)
        self.observation_space = gym.spaces.Box(0, n, (n * n,), np.int8)
        # Episode state: the flat board, its candidates (reused by step to test a conflict
        # with one lookup), the number of blanks, and whether the episode has ended.
        self._puzzle: np.ndarray | None = None
        self._board: np.ndarray | None = None
        self._cand: np.ndarray | None = None
        self._blanks = 0
        self._done = False

    @property
    def size(self) -> int:
        """N: the board is N x N (9 or 4)."""
        return self._n

    @property
    def puzzle(self) -> np.ndarray | None:
        """A copy of this episode's puzzle, ``(N, N)`` int8 (before the first reset: the
        constructor's puzzle, or None)."""
        p = self._default_puzzle if self._puzzle is None else self._puzzle
        return None if p is None else p.copy()

    @property
    def board(self) -> np.ndarray:
        """A copy of the current board, ``(N, N)`` int8, 0 = blank."""
        if self._board is None:
            raise SudokuError("no board yet: call reset() first")
        return self._board.reshape(self._n, self._n).copy()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode on ``options["puzzle"]`` if given, else on the constructor's.

        The options puzzle is for this episode only: a later plain ``reset()`` goes back to
        the constructor's puzzle. The env is deterministic, so ``seed`` only seeds
        ``np_random`` (for wrappers and subclasses).
        """
        super().reset(seed=seed)
        puzzle = (options or {}).get("puzzle")
        if puzzle is not None:
            board = as_board(puzzle)
            if board.shape[0] != self._n:
                m = board.shape[0]
                raise SudokuError(
                    f'options["puzzle"] is {m}x{m} but this env is {self._n}x{self._n}'
                )
        elif self._default_puzzle is not None:
            board = self._default_puzzle
        else:
            raise SudokuError(
                "no puzzle: pass one to SudokuEnv(puzzle) or to reset(options={'puzzle': ...})"
            )
        if not (board == 0).any():
            raise SudokuError("the puzzle has no blank cell, so no action is possible")
        self._puzzle = board
        self._board = board.reshape(-1).copy()
        self._cand = _candidates_flat(self._board, self._n)
        self._blanks = int(np.count_nonzero(self._board == 0))
        self._done = False
        if self.end_on_wrong:
            self._solve(board)
        return self._board.copy(), self._info()

    def _solve(self, board: np.ndarray) -> None:
        """Keep the puzzle's solution for ``end_on_wrong`` (once per puzzle: a training
        worker plays one puzzle many times in a row)."""
        key = board.tobytes()
        if self._solution is not None and self._solution[0] == key:
            return
        count, solution = solve(board)
        if count == 0 or solution is None:
            raise SudokuError("end_on_wrong: the puzzle has no solution, so every digit is wrong")
        self._solution = (key, solution.reshape(-1) if count == 1 else None)

    def _wrong(self, cell: int, digit: int) -> bool:
        """Whether a valid ``digit`` just placed in ``cell`` leaves the puzzle unsolvable."""
        if self._solution is None:
            return False
        solution = self._solution[1]
        if solution is not None:
            return bool(solution[cell] != digit)
        return self._blanks > 0 and solve(self._board.reshape(self._n, self._n), limit=1)[0] == 0

    def step(
        self, action: int | np.integer
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Place digit ``action % N + 1`` in cell ``action // N``; see the class docstring."""
        if self._board is None:
            raise SudokuError("call reset() before step()")
        if self._done:
            raise SudokuError("the episode has ended; call reset() before step()")
        n = self._n
        a = int(action)
        if not 0 <= a < n**3:
            raise SudokuError(f"action {a} is outside 0..{n**3 - 1}")
        cell, d = divmod(a, n)
        board = self._board
        if board[cell]:
            r, c = divmod(cell, n)
            raise SudokuError(
                f"action {a} places digit {d + 1} in r{r + 1}c{c + 1}, which already holds "
                f"{board[cell]}; only blank cells can be filled (see info['action_mask'])"
            )
        # A blank cell's candidates are exactly the digits that conflict with nothing.
        valid = bool(self._cand[cell, d])
        board[cell] = d + 1
        self._blanks -= 1
        cand = self._cand = _candidates_flat(board, n)
        terminated = True
        wrong = valid and self.end_on_wrong and self._wrong(cell, d + 1)
        if not valid:
            reward = self.reward_conflict
        elif wrong:
            reward = self.reward_dead_end
        elif self._blanks == 0:
            reward = self.reward_solved
        elif np.count_nonzero(cand.any(axis=1)) < self._blanks:
            # Only blanks have candidates, so fewer cells with one than blanks = a dead end.
            reward = self.reward_dead_end
        else:
            reward = self.reward_valid
            terminated = False
        self._done = terminated
        info = self._info()
        info["solved"] = valid and self._blanks == 0
        if self.end_on_wrong:
            info["wrong"] = wrong
        return board.copy(), reward, self._done, False, info

    def _info(self) -> dict[str, Any]:
        # Fresh arrays every call: callers may keep (or modify) what they are given.
        return {
            "action_mask": np.repeat(self._board == 0, self._n),
            "candidates": self._cand.copy(),
        }

    def render(self) -> str | None:
        """The board as a text grid (render_mode ``"ansi"``), ``.`` for blanks."""
        if self.render_mode is None:
            gym.logger.warn("render() called with render_mode=None; pass render_mode='ansi'")
            return None
        n, b = self._n, SIZES[self._n]
        grid = self.board if self._board is not None else self.puzzle
        if grid is None:
            raise SudokuError("nothing to render: no puzzle yet")
        # "+" under each "|": outer boxes are 2b wide, inner ones 2b + 1 (a space each side).
        inner = ["-" * (2 * b + 1)] * (b - 2)
        rule = "+".join(["-" * (2 * b), *inner, "-" * (2 * b)])
        lines = []
        for r in range(n):
            if r and r % b == 0:
                lines.append(rule)
            cells = [str(v) if v else "." for v in grid[r].tolist()]
            lines.append(" | ".join(" ".join(cells[i : i + b]) for i in range(0, n, b)))
        return "\n".join(lines) + "\n"
