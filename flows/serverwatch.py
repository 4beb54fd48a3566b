"""A command's side of the local Prefect server: its address and secret set for Prefect's
client before Prefect is imported, the server waited for before the first flow runs, and
replaced, on a port of its own, should it die while the command runs (`flows.localserver`
starts and stops it).

The command's Prefect client (its API calls, event and log streams, the gate requests, and
those of the processes it starts, such as Dask workers) never connects to the server's port
itself: it connects to a relay this process listens on (`flows.relay`), which carries each
connection to the live server once it has checked that the socket listening on the server's
port is the server process's own. A server that died is replaced on a new port and the relay
follows it; a port another process took in the meantime is never sent a byte.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from flows.localserver import (
    GATE_PATH,
    STOPPED_HERE,
    ServerFiles,
    ServerInfo,
    ServerStart,
    live_server,
    process_alive,
    serves_port,
    start_server,
)
from flows.relay import Relay
from tasks.errors import JudgelineError
from tasks.gates import GATE_AUTH_ENV, GATE_URL_ENV

READY_WAIT_S = 180.0
"""How long a connection made before the server answered waits for it."""


def _say(message: str) -> None:
    print(f"judgeline: {message}", file=sys.stderr, flush=True)


class LocalServer:
    """This process's use of its home's server: a relay's address at once, the server itself
    once `ready()`; each connection through the relay goes to the live server, replaced
    should it die while this process runs."""

    def __init__(self, home: Path) -> None:
        self.start = ServerStart(home)
        self.files: ServerFiles = self.start.files
        self.info: ServerInfo | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._gone: int | None = None  # a server stopped by `server stop`: not replaced
        os.environ[GATE_AUTH_ENV] = self.files.auth_string()
        self.relay = Relay(self.upstream)
        os.environ["PREFECT_API_URL"] = f"{self.relay.url}/api"
        # The server runs this installation's Prefect (a server of another version or code
        # is replaced): each client's version handshake is a request for nothing, and so is
        # its CSRF token while the server asks for none.
        os.environ.setdefault("PREFECT_CLIENT_SERVER_VERSION_CHECK_ENABLED", "false")
        csrf = os.environ.get("PREFECT_SERVER_API_CSRF_PROTECTION_ENABLED", "")
        if csrf.strip().lower() not in ("1", "true", "yes", "on"):
            os.environ.setdefault("PREFECT_CLIENT_CSRF_SUPPORT_ENABLED", "false")

    def ready(self) -> ServerInfo:
        info = self.start.ready()
        self.info = info
        os.environ[GATE_URL_ENV] = f"{self.relay.url}{GATE_PATH}"
        self._ready.set()
        return info

    def upstream(self, refused: ServerInfo | None = None) -> ServerInfo | None:
        """The live server a new connection goes to: the one this process uses while its
        process lives (and, if the relay just `refused` it, holds its port), else the one
        another command started since, else a new one (None if it was stopped on purpose or
        cannot be started). The relay checks every connection's port after connecting, so a
        live server's port is checked here only after that check failed."""
        if not self._ready.wait(READY_WAIT_S):
            return None
        with self._lock:
            info = self.info
            assert info is not None
            held = info != refused or serves_port(info.pid, info.port)
            if process_alive(info.pid) and held:
                return info
            if self._gone == info.pid:
                return None
            if self.files.stopped.is_file() and self.files.stopped.read_text().strip() == str(
                info.pid
            ):
                self._gone = info.pid
                if info.pid not in STOPPED_HERE:
                    _say(
                        f"the local Prefect server (pid {info.pid}) was stopped by "
                        "`judgeline server stop`; this command's flow run cannot go on"
                    )
                return None
            with self.files.starting():
                live = live_server(self.files)
                if live is None:
                    _say(f"the local Prefect server (pid {info.pid}) stopped; starting another")
                    try:
                        live = start_server(self.files, info.idle_seconds)
                    except JudgelineError as exc:
                        self._gone = info.pid
                        _say(f"could not start another local Prefect server: {exc}")
                        return None
            self.info = live
            return live


def use_local_server(home: Path) -> LocalServer | None:
    """Point this process's Prefect client at the home's server (found, or started without
    waiting for it) through a relay of this process, unless PREFECT_API_URL already names a
    server. Call before Prefect is imported, and `ready()` on the result before the first
    flow runs."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    return LocalServer(home)
