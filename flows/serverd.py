"""The supervisor of a user's local Prefect server: it runs `prefect server start` on the port
it is given, publishes the server once it answers, and stops it once idle.

Run as `python -m flows.serverd HOME IDLE_SECONDS PORT` by `flows.localserver` (never by hand),
with the environment `flows.localserver.server_environment` made: Prefect's own settings
(its home, its auth string, its UI's API address and static folder) and nothing secret of the
user's. The server is idle once, for IDLE_SECONDS, no judgeline command has held a client
file and no connection to it was open (a browser on the UI, a `prefect` command pointed at
it). SIGTERM stops it, and this process, as it stops `prefect server start`.

Nothing here imports Prefect.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from flows.localserver import (
    KILLED_WHILE_STARTING,
    START_TIMEOUT_S,
    ServerFiles,
    ServerInfo,
    healthy,
    prefect_version,
)
from tasks.store.private import private_home
from tasks.store.processes import listens, start_time

CHECK_EVERY_S = 2.0


def server_command(port: int) -> list[str]:
    """`prefect server start` on loopback `port`, from this interpreter's installation."""
    script = Path(sys.executable).with_name("prefect")
    head = [str(script)] if os.access(script, os.X_OK) else [sys.executable, "-m", "prefect"]
    return [*head, "server", "start", "--host", "127.0.0.1", "--port", str(port)]


def _connected(pid: int, port: int) -> bool:
    """Whether anyone has a connection open to the server (a browser on its UI, a client)."""
    import psutil

    try:
        sockets = psutil.Process(pid).net_connections("tcp")
    except psutil.Error:
        return False
    return any(
        s.status == psutil.CONN_ESTABLISHED and s.laddr and s.laddr[1] == port for s in sockets
    )


class Supervisor:
    def __init__(self, home: Path, idle_s: float, port: int) -> None:
        self.files = ServerFiles(home)
        self.idle_s = idle_s
        self.port = port
        self.stopping = False
        self.server: subprocess.Popen[bytes] | None = None

    def stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self.stop)
        self.server = subprocess.Popen(server_command(self.port), stdin=subprocess.DEVNULL)
        try:
            info = self._wait_answering(self.server)
            if info is None:
                return self._code()
            self.files.publish(info)
            print(f"judgeline: Prefect server pid {info.pid} serving on {info.url}", flush=True)
            self._watch(info)
            return self._code()
        finally:
            self._end()

    def _code(self) -> int:
        """This process's exit code: the server's, and KILLED_WHILE_STARTING for a server a
        signal killed before it answered."""
        assert self.server is not None
        code = self.server.poll()
        if code is None or self.stopping:
            return 0
        return KILLED_WHILE_STARTING if code < 0 else code or 1

    def _wait_answering(self, server: subprocess.Popen[bytes]) -> ServerInfo | None:
        started, me = start_time(server.pid), start_time(os.getpid())
        if started is None or me is None:
            return None  # the server is gone already
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.stopping and server.poll() is None and time.monotonic() < deadline:
            if healthy(self.port, timeout=2.0) and listens(server.pid, started, self.port):
                return ServerInfo(
                    pid=server.pid, started=started, port=self.port,
                    prefect_version=prefect_version(), supervisor=os.getpid(),
                    supervisor_started=me, idle_seconds=self.idle_s, started_at=time.time(),
                )  # fmt: skip
            time.sleep(0.1)
        return None

    def _watch(self, info: ServerInfo) -> None:
        """Until stopped, the server gone, its home deleted or replaced, or idle."""
        assert self.server is not None
        free_since: float | None = None
        while not self.stopping and self.server.poll() is None:
            time.sleep(CHECK_EVERY_S)
            try:
                named = self.files.read()
                if named is None or named.pid != info.pid:
                    return  # deleted, or replaced: no command can reach this one any more
                now = time.monotonic()
                if _connected(info.pid, info.port) or self.files.active_clients():
                    free_since = None
                    continue
                free_since = free_since or now
                if now - free_since >= self.idle_s and self.files.retire(info.pid):
                    return
            except OSError:  # the home is gone or unusable
                return

    def _end(self) -> None:
        """Stop the server as `prefect server start` is stopped (SIGTERM; SIGKILL after 15 s)
        and withdraw its state file."""
        server = self.server
        if server is not None and server.poll() is None:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        if server is not None:
            with contextlib.suppress(OSError):
                self.files.clear(server.pid)


def main(home: Path, idle_s: float, port: int) -> int:
    os.umask(0o077)
    private_home(home)
    if not os.environ.get("PREFECT_SERVER_API_AUTH_STRING"):
        print("the local server needs its auth string (PREFECT_SERVER_API_AUTH_STRING)")
        return 2
    return Supervisor(home, idle_s, port).run()


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])))
