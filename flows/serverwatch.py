"""A command's side of the local Prefect server: Prefect's client pointed at it before Prefect
is imported, and the server watched while the command runs.

Should the server stop under a command (killed, or `judgeline server stop --force`), the
command cannot go on: Prefect's client would retry its calls for a minute and then fail the
run with every reply stored. Within a second the command says so and stops as on SIGTERM (no
judge call starts after that; the replies in flight are kept); once its runs are recorded
`interrupted` it exits 75 with the command that resumes each. It never talks to the dead
server's port again, and the auth string a process that took that port could catch opens no
server.
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

from flows.localserver import LocalServer, ServerFiles, ServerInfo
from tasks.errors import stop_for
from tasks.judging.stopping import GRACE_S
from tasks.store.private import read_private
from tasks.store.processes import same_process

WATCH_EVERY_S = 1.0
SETTLE_S = GRACE_S + 10.0
"""How long a command whose server went away waits for its runs to stop."""
WATCHING: list[bool] = []
"""Non-empty in a `judgeline` command (`flows.entry`): the process the watcher may end."""
_leaving = threading.Event()


def _say(message: str) -> None:
    print(f"judgeline: {message}", file=sys.stderr, flush=True)


def use_local_server(home: Path) -> LocalServer | None:
    """Point this process's Prefect client at the home's server (found, or started without
    waiting for it), unless PREFECT_API_URL names one. Call before Prefect is imported, and
    `watch` the result's `ready()` before the first flow runs."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    server = LocalServer(home)
    os.environ["PREFECT_API_URL"] = server.api_url
    os.environ["PREFECT_API_AUTH_STRING"] = server.auth_string
    # The UI's links in Prefect's messages name this server, not Prefect's default port.
    os.environ["PREFECT_UI_URL"] = server.api_url.removesuffix("/api")
    return server


def watch(info: ServerInfo, files: ServerFiles) -> None:
    """In a `judgeline` command, stop it should its server stop (no one else's process)."""
    if WATCHING:
        threading.Thread(target=_watch, args=(info, files), daemon=True).start()


def _watch(info: ServerInfo, files: ServerFiles) -> None:
    while same_process(info.pid, info.started):
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
    each `interrupted`, print how each ended and exit 75: Prefect's client can report nothing
    any more."""
    from tasks.errors import STOPPED, Interrupted
    from tasks.runs.jobs import ACTIVE, SETTLED, record_interrupted, resume_command

    deadline = time.monotonic() + SETTLE_S
    while set(ACTIVE) - set(STOPPED) and time.monotonic() < deadline:
        time.sleep(0.1)
    _leaving.set()
    ended = list(SETTLED)
    for run_id, (work, record) in list(ACTIVE.items()):
        stopped = STOPPED.get(run_id) or Interrupted(run_id, signal.SIGTERM, record.calls)
        with contextlib.suppress(Exception):  # a record that cannot be written says running
            record_interrupted(work, record, stopped)
        ended.append((work, record))
    for work, record in ended:
        said = record.error or f"run {record.run_id} {record.status}"
        _say(f"{said}; resume with: {resume_command(record.run_id, work)}")
    if not ended:
        _say(f"stopped: {cause}; run the command again (it reuses everything stored)")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(75)


def last_line() -> None:
    """Before the command line prints a command's last line: where the watcher is leaving,
    it prints that line, and this thread waits for the process to end."""
    while _leaving.is_set():
        time.sleep(1)
