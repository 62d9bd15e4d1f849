"""One MAPF episode as a picture: an animated GIF, or a PNG strip of a few frames side by side
(for places that show no animation, such as a README or a paper).

Frames are the env's ``render()`` images (``render_mode="rgb_array"``, 8 pixels per cell),
scaled up by whole pixels (nearest neighbour, so cells stay crisp) until the longer side is
at least :data:`MIN_SIDE` pixels: a 10 x 10 map would otherwise be a thumbnail.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from shoal.errors import ConfigError

__all__ = [
    "FRAME_MS",
    "MIN_SIDE",
    "STRIP_FRAMES",
    "check_animation_path",
    "save_animation",
    "upscale",
]

MIN_SIDE = 320
"""Pixels the longer side of a frame is scaled up to, at least (when ``scale`` is None)."""
FRAME_MS = 200
"""Milliseconds per GIF frame: 5 steps a second, the env's ``render_fps``."""
LAST_FRAME_HOLD = 5
"""The last GIF frame is shown this many frames long, so the final state can be seen
before the loop starts over."""
STRIP_FRAMES = 8
"""Most frames in a PNG strip."""
STRIP_GAP = 6
"""Pixels between the frames of a PNG strip."""
STRIP_GAP_GREY = 140
"""Grey level of the gap: neither the light floor nor the dark obstacles, so frame edges
show whatever lies there."""
SUFFIXES = (".gif", ".png")


def upscale(frame: np.ndarray, scale: int) -> np.ndarray:
    """``frame`` (``(H, W, 3)`` uint8) with every pixel repeated ``scale`` times along
    both axes."""
    return np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1)


def _auto_scale(frame: np.ndarray) -> int:
    return max(1, math.ceil(MIN_SIDE / max(frame.shape[:2])))


def save_animation(
    frames: Sequence[np.ndarray],
    path: str | os.PathLike,
    *,
    scale: int | None = None,
    frame_ms: int = FRAME_MS,
    strip_frames: int = STRIP_FRAMES,
) -> Path:
    """Write an episode's frames (uint8 ``(H, W, 3)`` each, all one size, the first the
    start) to ``path``: an animated GIF looping for ever for ``.gif``, or for ``.png`` a
    strip of at most ``strip_frames`` evenly spaced frames side by side, the first and the
    last always in it. ``scale``: whole-pixel magnification (None: the smallest that makes
    the longer side at least :data:`MIN_SIDE`). Returns the path written.

    The GIF holds one frame per step, except that Pillow merges a frame identical to the
    one before it into that one (summing their durations), so an episode in which nobody
    moves for a while has fewer frames than steps, playing just as long."""
    path = Path(path)
    check_animation_path(path)
    if not frames:
        raise ValueError("save_animation: no frames")
    if scale is None:
        scale = _auto_scale(frames[0])
    if path.suffix.lower() == ".gif":
        _write_gif([upscale(f, scale) for f in frames], path, frame_ms)
    else:
        _write_strip(frames, path, scale, strip_frames)
    return path


def check_animation_path(path: str | os.PathLike) -> None:
    """Raise :class:`~shoal.errors.ConfigError` unless ``path`` names a ``.gif`` or ``.png``
    file in an existing directory (checked before an evaluation, so a typo costs nothing)."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ConfigError(f"animation file '{path}': expected a .gif or a .png file name")
    if not path.parent.is_dir():
        raise ConfigError(f"animation file '{path}': directory '{path.parent}' does not exist")


def _write_gif(frames: list[np.ndarray], path: Path, frame_ms: int) -> None:
    images = [Image.fromarray(f) for f in frames]
    durations = [frame_ms] * len(images)
    durations[-1] = frame_ms * LAST_FRAME_HOLD
    images[0].save(
        path,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=durations,
        loop=0,  # 0: loop for ever
    )


def _write_strip(frames: Sequence[np.ndarray], path: Path, scale: int, most: int) -> None:
    if most < 1:
        raise ValueError(f"save_animation strip_frames: {most} is not >= 1")
    # rounding evenly spaced positions keeps the first and the last frame
    picked = np.unique(np.linspace(0, len(frames) - 1, min(most, len(frames))).round())
    tiles = [upscale(frames[int(i)], scale) for i in picked]
    h, w = tiles[0].shape[:2]
    strip = np.full((h, len(tiles) * (w + STRIP_GAP) - STRIP_GAP, 3), STRIP_GAP_GREY, np.uint8)
    for n, tile in enumerate(tiles):
        strip[:, n * (w + STRIP_GAP) : n * (w + STRIP_GAP) + w] = tile
    Image.fromarray(strip).save(path, format="PNG")
