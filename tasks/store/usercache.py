"""The user's judgeline cache folder: `$XDG_CACHE_HOME/judgeline`, or `~/.cache/judgeline`.

It holds this machine's copies of object-store work dirs (the default scratch dir) and the
empty Prefect database new Prefect homes start from. The user's state folder
(`$XDG_STATE_HOME/judgeline`, or `~/.local/state/judgeline`) holds the Prefect home that
all of the user's work dirs share. This module imports the standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """The user's judgeline cache folder (it may not exist yet)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "judgeline"


def user_state_dir() -> Path:
    """The user's judgeline state folder (it may not exist yet)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "judgeline"
