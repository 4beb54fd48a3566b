"""A command's side of the local Prefect server: Prefect's client pointed at it before Prefect
is imported, the server checked before the first flow runs, and watched while the command
runs.

Should the server stop under a command (killed, or `judgeline server stop --force`), the
command cannot go on: Prefect's client would retry its calls for a minute and then fail the
run with every reply stored. Within a second the command says so, stops as on SIGTERM (no
judge call starts after that; the replies in flight are kept), and once its run is recorded
`interrupted` it exits 75 with the command that resumes it. It never talks to the dead
server's port again: what a process that took that port meanwhile could catch is an auth
string no server takes any more.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from flows.localserver import ServerFiles, ServerInfo, ServerStart
from flows.serveraccess import read_private, server_process
from tasks.errors import stop_for
from tasks.judging.stopping import GRACE_S

WATCH_EVERY_S = 1.0
"""How often a command checks that its server's process is still alive (no request made)."""
SETTLE_S = GRACE_S + 10.0
"""How long a command whose server went away waits for its runs to be recorded."""

WATCHING: list[bool] = []
"""Non-empty in a `judgeline` command (`flows.entry`), the process the watcher may end."""

_leaving = threading.Event()
"""Set once the watcher is about to print a command's last line and end the process."""


def _say(message: str) -> None:
    print(f"judgeline: {message}", file=sys.stderr, flush=True)


class LocalServer:
    """This process's use of its home's server: its address and auth string at once, the
    server itself once `ready()` has checked it."""

    def __init__(self, home: Path) -> None:
        self.start = ServerStart(home)
        os.environ["PREFECT_API_URL"] = self.start.api_url
        os.environ["PREFECT_API_AUTH_STRING"] = self.start.auth_string
        # The UI's links in Prefect's messages name this server, not Prefect's default port.
        os.environ["PREFECT_UI_URL"] = self.start.api_url.removesuffix("/api")

    def ready(self) -> ServerInfo:
        info = self.start.ready()
        if not WATCHING:
            return info  # Python's own use of judgeline's flows: Prefect reports what fails
        threading.Thread(
            target=_watch, args=(info, self.start.files), name="judgeline-server-watch",
            daemon=True,
        ).start()  # fmt: skip
        return info


def _watch(info: ServerInfo, files: ServerFiles) -> None:
    while server_process(info.pid, info.started):
        time.sleep(WATCH_EVERY_S)
    by_user = (read_private(files.stopped) or "").strip() == str(info.pid)
    how = "was stopped by `judgeline server stop`" if by_user else "stopped"
    cause = f"the local Prefect server (pid {info.pid}) {how}"
    if "--debug" not in sys.argv:
        logging.disable(logging.CRITICAL)  # Prefect's clients report every failed reconnect
    _say(f"{cause}: this command sends nothing more and stops, keeping every reply it stored")
    stop_for(cause)
    os.kill(os.getpid(), signal.SIGTERM)
    _leave_once_recorded(cause)


def _leave_once_recorded(cause: str) -> None:
    """Once every run this process keeps a record of has stopped (or SETTLE_S passed), record
    each `interrupted`, print the command's last line and exit 75: Prefect's client cannot
    report anything any more, and would retry for a minute."""
    from flows.cli.app import resume_line
    from tasks.errors import STOPPED, Interrupted
    from tasks.jobrecord import ACTIVE, SETTLED, record_interrupted

    deadline = time.monotonic() + SETTLE_S
    while set(ACTIVE) - set(STOPPED) and time.monotonic() < deadline:
        time.sleep(0.1)
    _leaving.set()
    ended = list(SETTLED)
    for run_id, (work, record) in list(ACTIVE.items()):
        stopped = STOPPED.get(run_id) or Interrupted(run_id, signal.SIGTERM, record.calls)
        with contextlib.suppress(Exception):  # a record that cannot be written says running
            record_interrupted(work, record, stopped)
        ended.append(record)
    for record in ended:
        said = record.error if record.error else f"run {record.run_id} {record.status}"
        _say(f"{said}; resume with: {resume_line(record.run_id)}")
    if not ended:
        _say(f"stopped: {cause}; run the command again (it reuses everything stored)")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(75)


def last_line() -> None:
    """Called by the command line before it prints a command's last line: where the watcher
    is leaving, it prints that line, and this thread waits for the process to end."""
    while _leaving.is_set():
        time.sleep(1)


def use_local_server(home: Path) -> LocalServer | None:
    """Point this process's Prefect client at the home's server (found, or started without
    waiting for it), unless PREFECT_API_URL already names a server. Call before Prefect is
    imported, and `ready()` on the result before the first flow runs."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    return LocalServer(home)
