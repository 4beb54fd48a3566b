"""Process set-up every entry point runs before Prefect is imported."""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
import types
from typing import Any

from tasks.errors import InputError, JudgelineError
from tasks.workdir import WorkDir

# The loggers on which Prefect reports a failed flow or task run, traceback included.
RUN_LOGGERS = (
    "prefect.flow_runs",
    "prefect.task_runs",
    "prefect.flow_engine",
    "prefect.task_engine",
)
# Prefect's background workers, which warn while they drain their queues at exit.
WORKER_LOGGERS = ("EventsWorker", "APILogWorker")


class UserErrorLogFilter(logging.Filter):
    """Drops Prefect's reports of a run that failed with a JudgelineError.

    The error still propagates to the command line, which prints it as one paragraph; the
    run's own report (a traceback, then "Finished in state Failed(...)") would come first.
    Once a run failed that way, its later error records go too (they repeat the message).
    """

    def __init__(self) -> None:
        super().__init__()
        self._failed_runs: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        run_id = str(getattr(record, "task_run_id", None) or getattr(record, "flow_run_id", ""))
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, JudgelineError):
            if run_id:
                self._failed_runs.add(run_id)
            return False
        return not (record.levelno >= logging.ERROR and run_id in self._failed_runs)


def quiet_user_errors() -> None:
    """Install UserErrorLogFilter on Prefect's run loggers (once per process).

    Filters on a logger survive Prefect's own logging set-up, which replaces handlers only.
    """
    for name in RUN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, UserErrorLogFilter) for f in logger.filters):
            logger.addFilter(UserErrorLogFilter())


def configure_prefect(work: WorkDir, *, debug: bool = False) -> None:
    """Point Prefect's home and result storage into the work dir, unless the caller chose;
    without `debug`, runs that fail with a JudgelineError log no traceback and Prefect's
    workers do not warn while they drain at exit (the error stays the last thing printed).

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
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"not usable as a work dir ({exc.strerror})", file=str(work.root)
        ) from None
    if not debug:
        quiet_user_errors()
        for name in WORKER_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)


_PR_SET_PDEATHSIG = 1


class _OwnGroupSubprocess(types.ModuleType):
    """`subprocess` for Prefect's server module: its embedded server starts in a process
    group of its own (a terminal's Ctrl-C reaches this process only, which then stops its
    judge stage cleanly while the server keeps answering) and, on Linux, gets SIGTERM when
    this process dies, however it dies."""

    def __init__(self) -> None:
        super().__init__("subprocess")
        self._prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    def _in_child(self) -> None:
        if self._prctl is not None:
            self._prctl(_PR_SET_PDEATHSIG, 15)

    def Popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[Any]:  # noqa: N802
        return subprocess.Popen(*args, process_group=0, preexec_fn=self._in_child, **kwargs)  # type: ignore[call-overload]


def detach_embedded_server() -> None:
    """Make Prefect start its embedded server outside this process's group (see
    `_OwnGroupSubprocess`); a no-op when PREFECT_API_URL names a server."""
    if os.environ.get("PREFECT_API_URL"):
        return
    from prefect.server.api import server

    if not isinstance(server.subprocess, _OwnGroupSubprocess):
        server.subprocess = _OwnGroupSubprocess()  # type: ignore[assignment]
