"""A command's side of the local Prefect server: its address set for Prefect's client before
Prefect is imported, the server waited for before the first flow runs, and restarted on
the same port should it die while the command runs (`flows.localserver` starts and stops
it)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from flows.localserver import (
    GATE_PATH,
    STOPPED_HERE,
    WATCH_EVERY_S,
    ServerFiles,
    ServerInfo,
    ServerStart,
    live_server,
    process_alive,
    start_server,
)
from tasks.errors import JudgelineError
from tasks.gates import GATE_URL_ENV


def _replace_if_gone(files: ServerFiles, info: ServerInfo) -> ServerInfo | None:
    """A server on `info`'s port again if `info`'s process died (another command may have
    restarted it already); None if it could not be restarted there."""
    with files.starting():
        live = live_server(files)
        if live is not None:
            return live if live.port == info.port else None
        try:
            return start_server(files, info.idle_seconds, port=info.port)
        except JudgelineError:
            return None


def _watch(files: ServerFiles, info: ServerInfo) -> None:
    """While this command runs, restart its server if the process dies (killed, OOM): on
    the same port, over the same database, so the Prefect client's retries (up to about a
    minute on a lost connection) carry the flow run over and no record is lost."""
    while True:
        time.sleep(WATCH_EVERY_S)
        if process_alive(info.pid):
            continue
        if files.stopped.is_file() and files.stopped.read_text().strip() == str(info.pid):
            if info.pid in STOPPED_HERE:
                return  # this process stopped it: nothing to say
            print(
                f"judgeline: the local Prefect server (pid {info.pid}) was stopped by "
                "`judgeline server stop`; this command's flow run cannot go on",
                file=sys.stderr,
                flush=True,
            )
            return
        print(
            f"judgeline: the local Prefect server (pid {info.pid}) stopped; restarting it "
            f"on {info.url}",
            file=sys.stderr,
            flush=True,
        )
        restarted = _replace_if_gone(files, info)
        if restarted is None:
            print(
                f"judgeline: could not restart the local Prefect server on {info.url}; "
                f"this command's flow run will fail (its log: {files.log})",
                file=sys.stderr,
                flush=True,
            )
            return
        info = restarted


class LocalServer:
    """This process's use of its home's server: its address at once, the server itself
    once `ready()` (then watched, and restarted should it die while this process runs)."""

    def __init__(self, home: Path) -> None:
        self.start = ServerStart(home)
        os.environ["PREFECT_API_URL"] = self.start.api_url

    def ready(self) -> ServerInfo:
        info = self.start.ready()
        os.environ[GATE_URL_ENV] = f"{info.url}{GATE_PATH}"
        watcher = threading.Thread(
            target=_watch,
            args=(self.start.files, info),
            name="judgeline-server-watch",
            daemon=True,
        )
        watcher.start()
        return info


def use_local_server(home: Path) -> LocalServer | None:
    """Point this process's Prefect client at the home's server (found, or started without
    waiting for it), unless PREFECT_API_URL already names a server. Call before Prefect is
    imported, and `ready()` on the result before the first flow runs."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    return LocalServer(home)
