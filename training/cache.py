"""Where smct keeps what it computes once and reads again (ablation artifacts, the competitions'
peer forecasts, layer-normalised training windows): $XDG_CACHE_HOME/smct/<name>, by default
~/.cache/smct/<name>."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(name: str) -> Path:
    """The cache folder `name` (not created)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "smct" / name
