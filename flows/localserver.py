"""The local Prefect server a user's commands share: found, checked, started, stopped.

With no PREFECT_API_URL, the first command that runs a flow starts `prefect server start` on a
free loopback port for the Prefect home (`~/.local/state/judgeline/prefect`, or PREFECT_HOME)
under a supervisor (`flows.serverd`), which publishes it in `HOME/judgeline-server.json` once
it answers and stops it once idle. Later commands, from any work dir or installation of the
same Prefect version, use it. Only its user can: the home is 0700 (its files 0600); each start
makes a new auth string (`judgeline-server.auth`) that Prefect checks and its UI asks for; and
a client sends it only to a port psutil shows the server's own process holds (`listens`).
`judgeline-server.lock` serialises starts; `clients/PID` names each command using the server.

Nothing here imports Prefect: a command that only reads runs never pays for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from tasks.errors import InputError, JudgelineError
from tasks.store.private import (
    hold_until_exit,
    lock_file,
    private_home,
    read_private,
    register,
    registered,
    write_private,
)
from tasks.store.processes import (
    check_listeners_visible,
    listens,
    same_process,
)

IDLE_SECONDS = 600.0
"""How long a server nobody uses waits before it stops (JUDGELINE_SERVER_IDLE_SECONDS)."""
START_TIMEOUT_S = 120.0
"""A fresh database on a loaded 2-core machine takes 10-30 s; beyond this, something is wrong."""
KILLED_WHILE_STARTING = 3
"""The supervisor's exit code when its server was killed by a signal before it answered."""
STATE_FORMAT = 2
"""The state file's layout; a file of another layout names no server this code can check."""

SERVER_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
              "XDG_CACHE_HOME", "XDG_STATE_HOME", "SQLITE_TMPDIR", "LD_LIBRARY_PATH")  # fmt: skip
"""What the server keeps of the starting command's environment, besides `LC_*`, Prefect's
settings and judgeline's own: never a judge's key, a store's credentials or another token."""


class ServerError(JudgelineError):
    """The local Prefect server could not be started, checked or reached: not the input's
    fault, so the command exits 75 (try again later), not 2."""

    exit_code = 75


def prefect_version() -> str:
    return metadata.version("prefect")


@dataclass(frozen=True)
class ServerInfo:
    """What `judgeline-server.json` says of the live server: the `prefect server start`
    process `pid` listening on `port`, and its `supervisor`; each with its start time
    (psutil's), so that a pid the system reused for another process is not taken for it."""

    pid: int
    started: float
    port: int
    prefect_version: str
    supervisor: int
    supervisor_started: float
    idle_seconds: float
    started_at: float
    format: int = STATE_FORMAT

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"


class ServerFiles:
    """The files of one Prefect home's server."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.state = home / "judgeline-server.json"
        self.start_lock = home / "judgeline-server.lock"
        self.clients = home / "clients"
        self.log = home / "judgeline-server.log"
        self.auth = home / "judgeline-server.auth"
        self.stopped = home / "judgeline-server.stopped"
        """Names the server `judgeline server stop` stopped, for the commands that used it."""

    def read(self) -> ServerInfo | None:
        try:
            info = ServerInfo(**json.loads(read_private(self.state) or ""))
        except (ValueError, TypeError):
            return None
        return info if info.format == STATE_FORMAT else None

    def publish(self, info: ServerInfo) -> None:
        write_private(self.state, json.dumps(asdict(info)))

    def clear(self, pid: int | None = None) -> None:
        """Remove the state file (only if it names `pid`, when given)."""
        info = self.read()
        if pid is None or (info is not None and info.pid == pid):
            self.state.unlink(missing_ok=True)

    def auth_string(self) -> str | None:
        return (read_private(self.auth) or "").strip() or None

    def active_clients(self) -> list[str]:
        """The commands using the server now, as `pid N (command)`."""
        return registered(self.clients)

    def retire(self, pid: int) -> bool:
        """The idle server `pid`'s supervisor: unless a command is starting or using it,
        withdraw the state file and keep the start lock until this process exits (the next
        command waits for it to be gone and starts another)."""
        start = lock_file(self.start_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if start is None:
            return False
        if self.active_clients():
            os.close(start)
            return False
        self.clear(pid)
        hold_until_exit(start)
        return True


def healthy(port: int, *, timeout: float = 5.0) -> bool:
    """Whether Prefect's API on `port` answers its health check (no auth string sent)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/api/health", timeout=timeout) as reply:
            return bool(reply.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def live_server(files: ServerFiles) -> ServerInfo | None:
    """The server the state file names, if its own process holds its port and answers (a
    busy machine can be slow: it is given three tries)."""
    info = files.read()
    if info is None or not listens(info.pid, info.started, info.port):
        return None
    for _ in range(3):
        if healthy(info.port):
            return info
        time.sleep(0.2)
    return None


def terminate(pid: int, started: float, timeout: float = 15.0) -> None:
    """SIGTERM process `pid` if it is still the one started at `started`; SIGKILL it after
    `timeout`."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if not same_process(pid, started):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
        deadline = time.monotonic() + timeout
        while same_process(pid, started) and time.monotonic() < deadline:
            time.sleep(0.1)


def server_environment(home: Path, auth: str, port: int) -> dict[str, str]:
    """The server's environment (SERVER_ENV), with its auth string, its UI told its own
    address (else the UI would send the auth string to Prefect's default port) and given a
    folder of the home for its files (never the installation), and no bytecode written (its
    umask is 077: a shared installation's bytecode would be the installer's alone)."""
    keep = {
        name: value
        for name, value in os.environ.items()
        if name in SERVER_ENV or name.startswith(("LC_", "JUDGELINE_SERVER_"))
        or (name.startswith("PREFECT_") and not name.startswith("PREFECT_API_"))
    }  # fmt: skip
    keep.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    return keep | {
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_API_AUTH_STRING": auth,
        "PREFECT_UI_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_UI_STATIC_DIRECTORY": str(home / "ui" / prefect_version()),
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


class LocalServer:
    """The home's server, found or started without waiting for it: its address and auth
    string are known at once, so the caller imports its flows meanwhile; `ready()` waits
    until it answers and checks it before anything is sent. The start lock is held between
    the two, so two commands starting at once start one server."""

    def __init__(self, home: Path, *, idle_s: float | None = None) -> None:
        try:
            private_home(home)
            self._lock = lock_file(home / "judgeline-server.lock", fcntl.LOCK_EX)
        except OSError as exc:
            raise InputError(
                f"Prefect's home (its database and the local server's files) cannot be "
                f"written there ({exc.strerror}); give a writable --work-dir, or set "
                "PREFECT_HOME or PREFECT_API_URL",
                file=str(home),
            ) from None
        self.files = ServerFiles(home)
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            check_listeners_visible()
            raw = os.environ.get("JUDGELINE_SERVER_IDLE_SECONDS")
            try:
                self._idle = idle_s or float(raw or IDLE_SECONDS)
            except ValueError:
                raise InputError(
                    f"JUDGELINE_SERVER_IDLE_SECONDS is not a number: {raw!r}"
                ) from None
            self.info = live_server(self.files)
            if self.info is not None and self.info.prefect_version != prefect_version():
                self._replace(self.info)
                self.info = None
            if self.info is None:
                self._start()
            else:
                self.port, self.auth_string = self.info.port, self.files.auth_string() or ""
        except BaseException:
            self._release()
            raise

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def _replace(self, info: ServerInfo) -> None:
        """A server of another Prefect version (another installation's) is replaced only
        while no command uses it."""
        using = self.files.active_clients()
        if using:
            raise ServerError(
                f"the local Prefect server for {self.files.home} runs Prefect "
                f"{info.prefect_version} (another installation's) and this judgeline has "
                f"Prefect {prefect_version()}; it is in use by {'; '.join(using)}. Once they "
                "end, this command replaces it; or set PREFECT_HOME to give this installation "
                "a home of its own"
            )
        stop_processes(info)

    def _start(self) -> None:
        import secrets

        stale = self.files.read()
        if stale is not None:
            stop_processes(stale)
        self.files.clear()
        with socket.socket() as probe:  # a free port, which the server binds a moment later
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.auth_string = f"judgeline:{secrets.token_urlsafe(32)}"
        write_private(self.files.auth, self.auth_string + "\n")
        self._spawn()

    def _spawn(self) -> None:
        """The supervisor (returns at once): isolated from the command's Python settings and
        folder (`-I`, cwd `/`), its files private (umask 077), no bytecode written (`-B`)."""
        fd = os.open(self.files.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-m", "flows.serverd", str(self.files.home),
                 str(self._idle), str(self.port)],
                env=server_environment(self.files.home, self.auth_string, self.port),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd="/",
                start_new_session=True,  # a terminal's Ctrl-C never reaches it
                umask=0o077,
            )  # fmt: skip

    def _wait_started(self) -> ServerInfo:
        """The server the supervisor published (it checked the server holds its port)."""
        assert self._proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self._proc.poll() is None:
            info = self.files.read()
            if info is not None and info.supervisor == self._proc.pid:
                return info
            time.sleep(0.1)
        if self._proc.poll() is None:
            self._proc.terminate()  # the supervisor stops its server
        tail = "\n".join((read_private(self.files.log) or "").strip().splitlines()[-12:])
        code = self._proc.wait()
        raise ServerError(
            f"the local Prefect server for {self.files.home} did not start (exit code {code}); "
            f"the end of {self.files.log}:\n{tail}"
        )

    def ready(self) -> ServerInfo:
        """The live server, checked; this process holds it as a client until it exits. A
        server killed while it started is started once more, on the same port with the
        same auth string (nothing was sent there; it is checked again before anything is)."""
        try:
            if self.info is None:
                try:
                    self.info = self._wait_started()
                except ServerError:
                    if self._proc is None or self._proc.returncode != KILLED_WHILE_STARTING:
                        raise
                    self._spawn()
                    self.info = self._wait_started()
            if not listens(self.info.pid, self.info.started, self.port):
                raise ServerError(f"the local Prefect server for {self.files.home} went away")
            register(self.files.clients)
        finally:
            self._release()
        return self.info

    def _release(self) -> None:
        if getattr(self, "_lock", None) is not None:
            os.close(self._lock)  # type: ignore[arg-type]
            self._lock = None


def ensure_server(home: Path, *, idle_s: float | None = None) -> ServerInfo:
    """The home's live server, started if none runs; this process holds it as a client."""
    return LocalServer(home, idle_s=idle_s).ready()


def stop_processes(info: ServerInfo) -> None:
    terminate(info.supervisor, info.supervisor_started)
    terminate(info.pid, info.started)


def stop_server(home: Path, *, force: bool = True) -> ServerInfo | None:
    """Stop the home's server; the one stopped, if any. Without `force`, refused (naming
    them) while commands use it."""
    files = ServerFiles(home)
    if not files.state.exists():
        return None
    fd = lock_file(files.start_lock, fcntl.LOCK_EX)
    try:
        info = files.read()
        using = files.active_clients() if info is not None else []
        if using and not force:
            raise InputError(
                f"the local Prefect server is in use by {'; '.join(using)}; stopping it stops "
                "them (each keeps every reply it stored and can be resumed): wait until they "
                "end, or give --force"
            )
        if info is not None:
            write_private(files.stopped, str(info.pid))
            stop_processes(info)
            files.clear()
    finally:
        if fd is not None:
            os.close(fd)
    return info
