"""Process set-up every entry point runs before Prefect is imported."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
from pathlib import Path
from types import FrameType

from flows.prefecttls import share_tls_contexts, shared_while_importing
from flows.serverwatch import use_local_server
from tasks.errors import InputError, JudgelineError, StoreError
from tasks.workdir import WorkDir, disk_full

# The loggers on which Prefect reports a failed flow or task run, traceback included.
RUN_LOGGERS = (
    "prefect.flow_runs",
    "prefect.task_runs",
    "prefect.flow_engine",
    "prefect.task_engine",
)
# Prefect's background workers, which warn while they drain their queues at exit, and its
# events client, which reports every failed attempt while the local server is being
# restarted (`flows.localserver` says so once).
WORKER_LOGGERS = ("EventsWorker", "APILogWorker", "prefect.events.clients")


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


class StopSignal(BaseException):
    """SIGTERM outside the judge stage, raised where the main thread is (as KeyboardInterrupt
    is for SIGINT); `tasks.jobrecord.recorded_run` records the run `interrupted`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal = signum


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise StopSignal(signum)


def raise_on_stop_signals() -> None:
    """SIGINT and SIGTERM raise in the main thread at once, wherever it is.

    Without this, `asyncio.run` turns Ctrl-C into a cancellation that waits for the next
    await (a stage running synchronously ran to its end first) and SIGTERM kills the process
    with its record still `running`. The judge stage routes both to its own clean stop
    (`tasks.judging.stopping`) while it sends."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_stop)


def open_work_dir(address: str | None) -> WorkDir:
    """The work dir a command names (`WorkDir.at`), or an InputError saying why an object
    store URL cannot be opened (an unknown scheme option, a malformed URL)."""
    try:
        return WorkDir.at(address)
    except StoreError as exc:
        raise InputError(f"cannot open work dir {address}: {exc}") from None


def check_work_dir(work: WorkDir) -> None:
    """Refuse a work dir that is a file or lies under one (every command checks this first;
    a missing work dir is made by the commands that write). An object store is checked
    when a command first writes to it (`start_prefect`)."""
    if work.url is not None:
        return
    path = work.root
    while not path.exists() and path.parent != path:
        path = path.parent
    if not path.is_dir():
        raise InputError(f"not usable as a work dir ({path} is not a folder)", file=str(work.root))


def check_store_access(work: WorkDir) -> None:
    """Write, read and delete a probe object in the work dir's store, or an InputError
    naming the store and the store's own reason (credentials, a missing bucket)."""
    from tasks.store.objects import ObjectStore

    assert isinstance(work.store, ObjectStore)
    try:
        work.store.check_access()
    except StoreError as exc:
        raise InputError(
            f"work dir {work.url} cannot be written: {exc}. Credentials come from the "
            "environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL and "
            "AWS_ALLOW_HTTP=true for an http endpoint; GOOGLE_APPLICATION_CREDENTIALS; "
            "AZURE_STORAGE_ACCOUNT_NAME and a key or token), a task role or web identity, or "
            "with JUDGELINE_INSTANCE_CREDENTIALS=true the machine's own role"
        ) from None


def prefect_home(work: WorkDir | None = None) -> Path:
    """Prefect's home: PREFECT_HOME if set, else the user's own, which every work dir of the
    user's shares (`~/.local/state/judgeline/prefect`): one local server, one secret and one
    warm gate runner per user, runs told apart by their `work-dir:` tag."""
    from tasks.usercache import user_state_dir

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
    from flows.localserver import private_home

    home = prefect_home(work)
    private_home(home)  # before `import prefect` makes it with the process's umask
    os.environ["PREFECT_HOME"] = str(home)
    os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(home / "results"))
    if work.url is not None:
        check_store_access(work)
    try:
        work.root.mkdir(parents=True, exist_ok=True)
        probe = work.root / f".judgeline-write-check.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(
            f"not usable as a work dir: it cannot be written ({exc.strerror})",
            file=str(work.root),
        ) from None
    server = use_local_server(home)
    raise_on_stop_signals()
    with shared_while_importing():
        for module in modules:
            importlib.import_module(module)
    share_tls_contexts()
    tag_runs(work)
    if server is not None:
        server.ready()


def tag_runs(work: WorkDir) -> None:
    """Tag every flow run of this process with its work dir (`work-dir:ADDRESS`): one Prefect
    server holds the runs of all of a user's work dirs. (A flow's task runs carry no tags:
    `flows.flowkind`; a subflow run is tagged by `subflow_tags`.)"""
    import prefect

    RUN_TAGS[:] = [f"work-dir:{work.address}"]
    context = prefect.tags(*RUN_TAGS)
    context.__enter__()
    _entered.append(context)  # kept: a collected generator would leave the context


RUN_TAGS: list[str] = []
_entered: list[object] = []


def subflow_tags() -> contextlib.AbstractContextManager[set[str]]:
    """Inside a flow, where no tags are in context: the tags of this process's flow runs,
    for a subflow run started there."""
    import prefect

    return prefect.tags(*RUN_TAGS)
