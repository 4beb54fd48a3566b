"""The local Prefect server a user's commands share: found, checked, started, stopped.

With no PREFECT_API_URL, the first command that runs a flow starts `prefect server start` on a
free loopback port for the Prefect home (its database lives there: the user's
`~/.local/state/judgeline/prefect` unless PREFECT_HOME says otherwise), under a small
supervisor (`flows.serverd`) that stops it once no command has used it for its idle period;
later commands, from any work dir or installation of the same Prefect version, find it in
`HOME/judgeline-server.json` and pay no start-up.

Nobody else on the machine may talk to it: the home is a folder only its user can enter (0700,
every file in it 0600); each start makes a new auth string (`judgeline-server.auth`), which
Prefect checks on its API and its UI asks for, so what a process that took a dead server's
port may catch opens nothing; and a client sends it only to a port it has checked is held by
the server's own process (`flows.serveraccess.listens`).

Files under HOME:
- `judgeline-server.lock`: held while a command checks for, replaces or starts the server, and
  by a supervisor from the moment it decides to stop until it exits;
- `clients/PID`: one per command using the server, locked by it for its whole life and naming
  it (a lock dies with its process, so a killed command never keeps a server alive);
- `judgeline-server.json`: the live server's pid, start time, port and Prefect version,
  written by its supervisor once the server answers; `judgeline-server.log`, its output.

Nothing here imports Prefect: a command that only reads runs never pays for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from flows.serveraccess import (
    ServerError,
    check_listeners_visible,
    free_port,
    listens,
    lock_file,
    private_folder,
    private_home,
    read_private,
    server_environment,
    server_process,
    write_private,
)
from tasks.errors import InputError

IDLE_SECONDS = 600.0
"""How long a server with no client waits before it stops (JUDGELINE_SERVER_IDLE_SECONDS).
Ten minutes: a working session's next command finds it; a nightly run's machine is quiet
again soon after the run."""

START_TIMEOUT_S = 120.0
"""A fresh database on a loaded 2-core machine takes 10-30 s; beyond this, something is wrong."""

AUTH_USER = "judgeline"
"""The user part of the auth string (`user:secret`, HTTP basic auth) Prefect's UI asks for."""

KILLED_WHILE_STARTING = 3
"""The supervisor's exit code when its server was killed by a signal before it answered."""

STATE_FORMAT = 2
"""The state file's layout; a file of another layout names no server this code can check."""

_held: list[int] = []
"""Descriptors of the locks this process holds for its whole life (its client file)."""


def prefect_version() -> str:
    return metadata.version("prefect")


def idle_seconds() -> float:
    raw = os.environ.get("JUDGELINE_SERVER_IDLE_SECONDS")
    try:
        return float(raw) if raw else IDLE_SECONDS
    except ValueError:
        raise InputError(
            f"JUDGELINE_SERVER_IDLE_SECONDS must be a number of seconds, got {raw!r}"
        ) from None


@dataclass(frozen=True)
class ServerInfo:
    """What `judgeline-server.json` says of the live server."""

    pid: int
    """The `prefect server start` process, which listens on `port`."""
    started: float
    """Its start time (psutil's create time): a pid reused by another process is not it."""
    port: int
    prefect_version: str
    supervisor: int
    """The judgeline process that started it and stops it once idle (`flows.serverd`)."""
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
    """The lock, state, secret and log files of one Prefect home's server."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.state = home / "judgeline-server.json"
        self.start_lock = home / "judgeline-server.lock"
        self.clients = home / "clients"
        self.log = home / "judgeline-server.log"
        self.auth = home / "judgeline-server.auth"
        """`judgeline:SECRET`, made anew for each server start: Prefect's auth string."""
        self.stopped = home / "judgeline-server.stopped"
        """Names the pid `judgeline server stop` stopped, for the commands that used it."""

    def read(self) -> ServerInfo | None:
        """The state file's server, or None (absent, unreadable, another layout)."""
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
        text = read_private(self.auth)
        return text.strip() if text and text.strip() else None

    def hold_client(self) -> None:
        """Register this process as a client until it exits: `clients/PID`, locked and
        naming the command."""
        private_folder(self.clients)
        fd = lock_file(self.clients / str(os.getpid()), fcntl.LOCK_EX)
        if fd is not None:
            _held.append(fd)

    def active_clients(self) -> list[str]:
        """The commands using the server now (`pid N (command)`); the files of commands
        that ended are removed."""
        from flows.serveraccess import lock_holder

        found = []
        with contextlib.suppress(FileNotFoundError):
            for entry in sorted(self.clients.iterdir()):
                if entry.name == str(os.getpid()):
                    continue
                try:
                    fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW)
                except OSError:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    entry.unlink(missing_ok=True)  # nobody holds it: its command ended
                except BlockingIOError:
                    found.append(lock_holder(fd))
                finally:
                    os.close(fd)
        return found

    def retire(self, pid: int) -> bool:
        """Called by the supervisor of the idle server `pid`: unless a command is starting
        or using it, remove the state file and keep the start lock until this process exits,
        so the next command waits for it to be gone and starts a new one."""
        start = lock_file(self.start_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if start is None:
            return False
        if self.active_clients():
            os.close(start)
            return False
        self.clear(pid)
        _held.append(start)  # released when the process exits
        return True


def healthy(port: int, *, timeout: float = 5.0) -> bool:
    """Whether Prefect's API on `port` answers its health check (a route that needs no
    auth string: nothing secret is sent)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/api/health", timeout=timeout) as reply:
            return bool(reply.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def live_server(files: ServerFiles) -> ServerInfo | None:
    """The server the state file names, if its own process holds its port and answers."""
    info = files.read()
    if info is None or not listens(info.pid, info.started, info.port):
        return None
    # A busy machine can be slow to answer: a live server is never given up on one miss.
    for _ in range(3):
        if healthy(info.port):
            return info
        time.sleep(0.2)
    return None


def terminate(pid: int, started: float, timeout: float = 15.0) -> None:
    """SIGTERM the process `pid` (if it is still the one started at `started`), SIGKILL it
    after `timeout`."""
    if not server_process(pid, started):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while server_process(pid, started) and time.monotonic() < deadline:
        time.sleep(0.1)
    if server_process(pid, started):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _check_home(home: Path) -> None:
    """Refuse at once, naming the folder, a Prefect home this process cannot write (or that
    is not the user's own); make it private (`private_home`)."""
    try:
        private_home(home)
        probe = home / f".judgeline-write-check.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(
            f"Prefect's home (its database and the local server's files) cannot be written "
            f"there ({exc.strerror}); give a writable --work-dir, or set PREFECT_HOME or "
            "PREFECT_API_URL",
            file=str(home),
        ) from None


def _log_tail(path: Path, lines: int = 12) -> str:
    text = (read_private(path) or "").strip().splitlines()
    return "\n".join(text[-lines:])


def new_auth_string() -> str:
    import secrets

    return f"{AUTH_USER}:{secrets.token_urlsafe(32)}"


def _spawn(files: ServerFiles, idle_s: float, port: int, auth: str) -> subprocess.Popen[bytes]:
    """Start a supervisor and its server for this home on `port` with `auth` (returns at
    once): isolated from the command's Python settings and folder (`-I`, cwd `/`), with only
    the environment it needs and a umask that keeps what it writes private; it writes no
    bytecode (`-B`): the installation's files stay readable by every user of it."""
    write_private(files.auth, auth + "\n")
    fd = os.open(files.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "ab") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-B",
                "-m",
                "flows.serverd",
                str(files.home),
                str(idle_s),
                str(port),
            ],  # fmt: skip
            env=server_environment(files.home, auth, port, dict(os.environ)),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C never reaches it
            cwd="/",
            umask=0o077,
        )
    return proc


def _wait_started(files: ServerFiles, proc: subprocess.Popen[bytes]) -> ServerInfo:
    """Wait until the supervisor `proc` has published its server, checked to listen on its
    port and answering."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(
                f"the local Prefect server for {files.home} exited with code "
                f"{proc.returncode} while starting; the end of {files.log}:\n"
                + _log_tail(files.log)
            )
        info = files.read()
        if info is not None and info.supervisor == proc.pid:  # noqa: SIM102
            if listens(info.pid, info.started, info.port) and healthy(info.port, timeout=2):
                return info
        time.sleep(0.1)
    proc.terminate()  # the supervisor stops its server
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
    raise ServerError(
        f"the local Prefect server for {files.home} did not answer within "
        f"{START_TIMEOUT_S:.0f} s; the end of {files.log}:\n" + _log_tail(files.log)
    )


class ServerStart:
    """The home's server found, or started without waiting for it; `ready()` waits until it
    answers. `api_url` and `auth_string` are known at once, so the caller imports its flows
    meanwhile (the server's start and Prefect's import use a core each); nothing is sent to
    the server before `ready()` has checked it. Between the two the start lock is held, so
    two commands starting at once start one server."""

    def __init__(self, home: Path, *, idle_s: float | None = None) -> None:
        _check_home(home)
        check_listeners_visible()
        self.files = ServerFiles(home)
        self._idle = idle_seconds() if idle_s is None else idle_s
        self._lock = lock_file(self.files.start_lock, fcntl.LOCK_EX)
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            self.info = live_server(self.files)
            if self.info is not None and self.info.prefect_version != prefect_version():
                self._replace_other_version(self.info)
                self.info = None
            if self.info is None:
                self._start()
            else:
                self.port, self.auth_string = self.info.port, self._auth()
        except BaseException:
            self._release()
            raise

    def _auth(self) -> str:
        auth = self.files.auth_string()
        if auth is None:
            raise ServerError(
                f"the local Prefect server's auth string is missing: {self.files.auth}"
            )
        return auth

    def _start(self) -> None:
        stale = self.files.read()
        if stale is not None:
            terminate(stale.supervisor, stale.supervisor_started)
            terminate(stale.pid, stale.started)
        self.files.clear()
        self.port, self.auth_string = free_port(), new_auth_string()
        self._proc = _spawn(self.files, self._idle, self.port, self.auth_string)

    def _replace_other_version(self, info: ServerInfo) -> None:
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
        terminate(info.supervisor, info.supervisor_started)
        terminate(info.pid, info.started)

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def ready(self) -> ServerInfo:
        """The live server, once it answers; this process holds it as a client. A server
        killed while it started is started once more."""
        try:
            if self.info is None:
                assert self._proc is not None
                try:
                    self.info = _wait_started(self.files, self._proc)
                except ServerError:
                    if self._proc.returncode != KILLED_WHILE_STARTING:
                        raise
                    # Killed by a signal while starting: once more, on the same port with
                    # the same auth string (this process's client has them; nothing was sent
                    # to that port, which is checked again before anything is).
                    self._proc = _spawn(self.files, self._idle, self.port, self.auth_string)
                    self.info = _wait_started(self.files, self._proc)
            self.files.hold_client()
        finally:
            self._release()
        return self.info


def ensure_server(home: Path, *, idle_s: float | None = None) -> ServerInfo:
    """The home's live server, started if none runs; this process holds it as a client."""
    return ServerStart(home, idle_s=idle_s).ready()


def stop_server(home: Path, *, force: bool = True) -> ServerInfo | None:
    """Stop the home's server (SIGTERM to its supervisor and to it, SIGKILL after 15 s); the
    one stopped, if any. Without `force`, refused (ServerError naming them) while commands
    use it."""
    files = ServerFiles(home)
    if not files.state.exists():
        return None
    fd = lock_file(files.start_lock, fcntl.LOCK_EX)
    try:
        info = files.read()
        if info is None:
            return None
        using = files.active_clients()
        if using and not force:
            raise InputError(
                f"the local Prefect server is in use by {'; '.join(using)}; stopping it stops "
                "them (each keeps every reply it stored and can be resumed): wait until they "
                "end, or give --force"
            )
        write_private(files.stopped, str(info.pid))
        terminate(info.supervisor, info.supervisor_started)
        terminate(info.pid, info.started)
        files.clear()
    finally:
        if fd is not None:
            os.close(fd)
    return info
