"""The presets shipped with shoal: TOML configs by name (``shoal train cartpole``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["PRESET_DIR", "preset_names"]

PRESET_DIR = Path(__file__).parent.parent / "presets"
"""Where the presets live, one ``NAME.toml`` each."""


def preset_names() -> list[str]:
    """Names of the bundled presets (``shoal train NAME``)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))
