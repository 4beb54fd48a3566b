"""Shared fixtures: an isolated Prefect home, the shared data folder, a temporary work dir,
and one Prefect test database. Shared test code that is not a fixture lives in support.py."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Prefect creates its home at import time: isolate it before anything imports prefect.
_PREFECT_HOME = Path(tempfile.mkdtemp(prefix="judgeline-prefect-"))
os.environ["PREFECT_HOME"] = str(_PREFECT_HOME)
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(_PREFECT_HOME / "results")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
# Prefect's test server copies its UI here, not into the installation (as the local server does).
os.environ["PREFECT_UI_STATIC_DIRECTORY"] = str(_PREFECT_HOME / "ui")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# Output width is what each test asks for (COLUMNS, terminal_width), never the caller's:
# pytest-xdist starts its workers with COLUMNS=80 LINES=24, which overrides a CliRunner's
# terminal_width and wraps the lines tests read.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
# The commands tests start share one local Prefect server for this home (flows.localserver),
# stopped when the session ends; should the session die, it stops itself soon after.
os.environ.setdefault("JUDGELINE_SERVER_IDLE_SECONDS", "120")
# The user's cache (token buckets, an object store's scratch copies) is the session's own.
os.environ["XDG_CACHE_HOME"] = str(_PREFECT_HOME / "xdg-cache")
# A command run without PREFECT_HOME uses the user's Prefect home in the state folder.
os.environ["XDG_STATE_HOME"] = str(_PREFECT_HOME / "xdg-state")

from support import SHARED_DATA  # noqa: E402

from tasks.store.workdir import WorkDir  # noqa: E402


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real benchmark files; tests skip with a clear message only if absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is absent")
    return SHARED_DATA


@pytest.fixture
def work(tmp_path: Path) -> WorkDir:
    """A fresh, empty work directory."""
    return WorkDir(tmp_path / "work")


@pytest.fixture(scope="session")
def prefect_harness():  # type: ignore[no-untyped-def]
    """One Prefect test database for the whole session (entering it costs ~11 s)."""
    from prefect.testing.utilities import prefect_test_harness

    # A loaded 2-core machine can need more than the default 30 s to start the server.
    with prefect_test_harness(server_startup_timeout=120):
        yield


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the local Prefect server the session's commands shared, if one started."""
    from flows.localserver import stop_server

    stop_server(_PREFECT_HOME)
    stop_server(_PREFECT_HOME / "xdg-state" / "judgeline" / "prefect")
