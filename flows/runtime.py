"""Process set-up every entry point runs before Prefect is imported."""

from __future__ import annotations

import os

from tasks.workdir import WorkDir


def configure_prefect(work: WorkDir) -> None:
    """Point Prefect's home and result storage into the work dir, unless the caller chose.

    `import prefect` creates PREFECT_HOME at import time, so this must run first.
    """
    home = work.root / ".prefect"
    os.environ.setdefault("PREFECT_HOME", str(home))
    os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(home / "results"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # Prefect's 20 s default is too short for a fresh database on a busy 2-core machine.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # Prefect creates its home at import but not the home's parents (a new work dir).
    home.mkdir(parents=True, exist_ok=True)
