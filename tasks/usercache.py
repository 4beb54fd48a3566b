"""The user's judgeline cache folder: `$XDG_CACHE_HOME/judgeline`, or `~/.cache/judgeline`.

It holds this machine's copies of object-store work dirs (the default scratch dir), the
empty Prefect database new work dirs start from, and the warm worker's log and home. This
module imports the standard library only: the console script reads it before anything else.
"""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """The user's judgeline cache folder (it may not exist yet)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "judgeline"
