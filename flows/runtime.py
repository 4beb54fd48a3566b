"""Process set-up every entry point runs before Prefect is imported."""

from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from typing import Any

from flows.serverwatch import use_local_server, watch
from tasks.errors import JudgelineError
from tasks.judging.stopping import raise_on_stop_signals
from tasks.store.workdir import WorkDir, check_writable, disk_full

# The loggers on which Prefect reports a failed flow or task run, traceback included.
RUN_LOGGERS = (
    "prefect.flow_runs",
    "prefect.task_runs",
    "prefect.flow_engine",
    "prefect.task_engine",
)
# Prefect's background workers, which warn while they drain their queues at exit, and its
# events clients, which report every failed attempt (a traceback each) once the local server
# went away (`flows.serverwatch` says so once).
WORKER_LOGGERS = (
    "EventsWorker", "APILogWorker", "prefect.events.clients", "prefect.FlowRunCancellingObserver"
)  # fmt: skip


class DropLogs(logging.Filter):
    """Drops every record of the logger it is on (a filter outlives Prefect's logging set-up,
    which resets the levels of the `prefect.*` loggers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


class UserErrorLogFilter(logging.Filter):
    """Drops Prefect's reports of a run that failed with a JudgelineError or a full disk.

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
        if isinstance(exc, JudgelineError) or disk_full(exc):
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


def configure_prefect(*, debug: bool = False) -> None:
    """Without `debug`, runs that fail with a JudgelineError log no traceback and Prefect's
    workers do not warn while they drain at exit (the error stays the last thing printed)."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Prefect's client telemetry, and its notice in every fresh work dir's terminal (each
    # work dir has its own Prefect home); a user's own DO_NOT_TRACK wins.
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    if not debug:
        quiet_user_errors()
        for name in WORKER_LOGGERS:
            logger = logging.getLogger(name)
            if not any(isinstance(f, DropLogs) for f in logger.filters):
                logger.addFilter(DropLogs())
        # Prefect's concurrency services log through loggers that ignore levels and filters
        # ("Service 'EventsWorker' failed ..." while the local server restarts).
        os.environ.setdefault("PREFECT_LOGGING_INTERNAL_LEVEL", "CRITICAL")
        # Logging's own errors (Prefect's API log handler while its server restarts) are
        # not printed as tracebacks.
        logging.raiseExceptions = False


def prefect_home(work: WorkDir | None = None) -> Path:
    """Prefect's home: PREFECT_HOME if set, else the user's own, which every work dir of the
    user's shares (`~/.local/state/judgeline/prefect`): one local server per user, runs told
    apart by their `work-dir:` tag."""
    from tasks.store.usercache import user_state_dir

    chosen = os.environ.get("PREFECT_HOME")
    return Path(chosen).expanduser().resolve() if chosen else user_state_dir() / "prefect"


def start_prefect(work: WorkDir, *modules: str) -> None:
    """Before a job imports its flows: Prefect's home and result storage in the work dir
    (unless the caller chose), and its client pointed at the home's local server, started
    if none runs (`flows.localserver`), unless PREFECT_API_URL names a server; then
    `modules` (the job's flows) are imported while a server that had to start starts, and
    the server is waited for.

    `import prefect` reads its settings once, so this must run first.
    """
    from tasks.store.private import private_home

    home = prefect_home(work)
    private_home(home)  # before `import prefect` makes it with the process's umask
    os.environ["PREFECT_HOME"] = str(home)
    os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(home / "results"))
    check_writable(work)
    server = use_local_server(home)
    raise_on_stop_signals()
    for module in modules:
        importlib.import_module(module)
    RUN_TAGS[:] = [f"work-dir:{work.address}"]
    if server is not None:
        watch(server.ready(), server.files)


def private_temp(home: Path) -> None:
    """This process's temporary folder, and its children's, one only its user can enter
    (`HOME/tmp`): Prefect's runner keeps the flow code it runs under the temporary folder,
    which on a shared machine may hold another user's `runner_storage`."""
    import tempfile

    from tasks.store.private import private_folder, private_home

    private_home(home)
    folder = private_folder(home / "tmp")
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = str(folder)


RUN_TAGS: list[str] = []
"""The tags of this process's flow runs: its work dir's (`work-dir:ADDRESS`), as one server
holds the runs of all of a user's work dirs."""


def _tag_flow_run(flow: Any, flow_run: Any, state: Any) -> None:
    """A flow's `on_running` hook: add this process's RUN_TAGS to its flow run. Its task runs
    carry none: Prefect asks the server for concurrency slots for each tag a task run carries
    (a request per task run, for limits judgeline never sets)."""
    from prefect import get_client

    if RUN_TAGS and not set(RUN_TAGS) <= set(flow_run.tags):
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run.id, tags=sorted({*flow_run.tags, *RUN_TAGS}))


def flow(**options: Any) -> Any:
    """Prefect's `@flow(...)` for judgeline's flows: tagged with the work dir once running,
    and no result persisted (what a run makes is in its work dir)."""
    from prefect import flow as prefect_flow

    options.setdefault("persist_result", False)
    options["on_running"] = [_tag_flow_run, *options.get("on_running", [])]
    return prefect_flow(**options)
