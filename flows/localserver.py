"""The local Prefect server a user's commands share: found, started, reused, stopped.

With no PREFECT_API_URL, the first command that runs a flow starts one Prefect server for
the Prefect home (its database lives there: the user's `~/.local/state/judgeline/prefect`
unless PREFECT_HOME says otherwise) as a detached process in a session of its own
(`flows.serverd`), and points itself at it; later commands, in any work dir, find it in
`HOME/judgeline-server.json` and pay no start-up. It stops once no command has used it for
its idle period.

Nobody else on the machine may talk to it: the home is a folder only its user can enter
(0700, every file in it 0600); the server and every client share a random secret kept there
(`judgeline-server.secret`), which Prefect checks as its API's auth string and the gate
route checks the same way; and a client trusts a port only once the listening socket on it
is found among the server process's own descriptors (`serves_port`), so a port another
process took after the server died is never sent a byte.

Three files keep starters and the server honest with each other, all under HOME:
- `judgeline-server.lock`: held while a command checks for, replaces or starts the server,
  and by a server from the moment it decides to stop until it exits, so two commands
  starting at once start one, and none picks a server that is going away;
- `judgeline-clients.lock`: every command using the server holds it shared for its whole
  life; the server counts itself idle only while nobody does (a lock dies with its process,
  so a killed command never keeps a server alive);
- `judgeline-server.json`: pid, port and Prefect version of the live server, written by the
  server once its API answers.

Nothing here imports Prefect: a command that only reads runs never pays for it.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from flows.serveraccess import (
    ServerError,
    authorized,
    basic_auth,
    code_stamp,
    lock_file,
    private_home,
    read_or_make_secret,
    server_environment,
    serves_port,
)
from tasks.errors import InputError

__all__ = [
    "ServerError", "authorized", "basic_auth", "code_stamp", "private_home", "serves_port",
]  # fmt: skip

IDLE_SECONDS = 600.0
"""How long a server with no client waits before it stops (JUDGELINE_SERVER_IDLE_SECONDS).
Ten minutes: a working session's next command finds it; a nightly run's machine is quiet
again soon after the run."""

GATE_PATH = "/judgeline/gate"
"""Where the server runs commands' great-expectations gates (`tasks.gates.answer_gate`): it
imported the library once; each command would import it again (seconds of CPU)."""

WATCH_EVERY_S = 1.0
"""How often a command checks that its server's process is still alive (no request made)."""

START_TIMEOUT_S = 120.0
"""A fresh database on a loaded 2-core machine takes 10-30 s; beyond this, something is wrong."""


AUTH_USER = "judgeline"
"""The user part of the auth string (`user:secret`, HTTP basic auth) Prefect's UI asks for."""

_held: list[int] = []
"""Descriptors of the clients' lock this process holds (for its whole life)."""
STOPPED_HERE: set[int] = set()
"""Servers this process stopped (its own watcher says nothing of them)."""


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
    port: int
    prefect_version: str
    idle_seconds: float
    started_at: float
    code: str = ""
    """`code_stamp()` when the server started: a server whose code changed since (an upgrade,
    an edit) is replaced, not kept answering with the old gate route until it idles out."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not: a server this process started and that died
    stays one until this process exits)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


class ServerFiles:
    """The lock, state and log files of one Prefect home's server."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.state = home / "judgeline-server.json"
        self.start_lock = home / "judgeline-server.lock"
        self.clients_lock = home / "judgeline-clients.lock"
        self.log = home / "judgeline-server.log"
        self.stopped = home / "judgeline-server.stopped"
        """Names the pid `stop_server` stopped: a command using it does not restart it."""
        self.secret = home / "judgeline-server.secret"
        """The random secret the server and its clients share (HTTP basic auth's password)."""

    def auth_string(self) -> str:
        """`judgeline:SECRET`, the secret made once (0600) and kept for the home's life."""
        return f"{AUTH_USER}:{read_or_make_secret(self.secret)}"

    def read(self) -> ServerInfo | None:
        """The state file's server, or None (absent or unreadable: no server to trust)."""
        try:
            return ServerInfo(**json.loads(self.state.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def publish(self, info: ServerInfo) -> None:
        tmp = self.state.with_name(f".{self.state.name}.{info.pid}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(asdict(info)))
        os.replace(tmp, self.state)

    def clear(self, pid: int | None = None) -> None:
        """Remove the state file (only if it names `pid`, when given)."""
        info = self.read()
        if pid is None or (info is not None and info.pid == pid):
            self.state.unlink(missing_ok=True)

    @contextmanager
    def starting(self) -> Iterator[None]:
        """Hold the start lock (waits for another starter or a stopping server)."""
        fd = lock_file(self.start_lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)

    def hold_client(self) -> None:
        """Hold the clients' lock shared until this process exits."""
        fd = lock_file(self.clients_lock, fcntl.LOCK_SH)
        if fd is not None:
            _held.append(fd)

    def clients_active(self) -> bool:
        fd = lock_file(self.clients_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if fd is None:
            return True
        os.close(fd)
        return False

    def retire(self, pid: int) -> bool:
        """Called by the idle server `pid`: unless a command is starting or using it,
        remove the state file and keep the start lock until this process exits, so the next
        command waits for it to be gone and starts a new one."""
        start = lock_file(self.start_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if start is None:
            return False
        if self.clients_active():
            os.close(start)
            return False
        self.clear(pid)
        _held.append(start)  # released when the process exits
        return True


def _healthy(info: ServerInfo, *, tries: int = 1, timeout: float = 5.0) -> bool:
    for _ in range(tries):
        try:
            with urllib.request.urlopen(f"{info.api_url}/health", timeout=timeout) as reply:
                if reply.status == 200:
                    return True
        except (OSError, urllib.error.URLError):
            time.sleep(0.2)
    return False


def live_server(files: ServerFiles) -> ServerInfo | None:
    """The server the state file names, if it runs this Prefect and this judgeline code,
    holds its port and answers."""
    info = files.read()
    if info is None or not process_alive(info.pid) or not serves_port(info.pid, info.port):
        return None
    if info.prefect_version != prefect_version() or info.code != code_stamp():
        return None
    # A busy machine can be slow to answer: a live server is never replaced on one miss.
    if not _healthy(info, tries=3):
        return None
    return info


def _terminate(pid: int, timeout: float = 15.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if process_alive(pid):
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
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _spawn(files: ServerFiles, idle_s: float, port: int) -> subprocess.Popen[bytes]:
    """Start a server process for this home on `port` (returns at once): isolated from the
    command's Python settings and folder (`python -I`, cwd `/`), with only the environment
    it needs (`server_environment`) and a umask that keeps what it writes private."""
    fd = os.open(files.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-m",
                "flows.serverd",
                str(files.home),
                str(idle_s),
                str(port),
            ],  # fmt: skip
            env=server_environment(files.home, files.auth_string(), dict(os.environ)),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C never reaches it
            cwd="/",
            umask=0o077,
        )


def _wait_started(files: ServerFiles, proc: subprocess.Popen[bytes]) -> ServerInfo:
    """Wait until the server `proc` has published itself and its API answers."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(
                f"the local Prefect server for {files.home} exited with code "
                f"{proc.returncode} while starting; the end of {files.log}:\n"
                + _log_tail(files.log)
            )
        info = files.read()
        if (
            info is not None
            and info.pid == proc.pid
            and serves_port(info.pid, info.port)
            and _healthy(info, timeout=2.0)
        ):
            return info
        time.sleep(0.1)
    _terminate(proc.pid)
    raise ServerError(
        f"the local Prefect server for {files.home} did not answer within "
        f"{START_TIMEOUT_S:.0f} s; the end of {files.log}:\n" + _log_tail(files.log)
    )


def start_server(files: ServerFiles, idle_s: float) -> ServerInfo:
    """Start a server for this home on a port it binds itself (never one a server had
    before, which another process may hold now) and wait until its API answers."""
    return _wait_started(files, _spawn(files, idle_s, 0))


class ServerStart:
    """The home's server found, or started without waiting for it; `ready()` waits until it
    answers. Between the two the start lock is held, so two commands starting at once still
    start one server; the caller imports its flows meanwhile (the server's start and
    Prefect's import use a core each)."""

    def __init__(self, home: Path, *, idle_s: float | None = None) -> None:
        _check_home(home)
        self.files = ServerFiles(home)
        self._lock = lock_file(self.files.start_lock, fcntl.LOCK_EX)
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            self.info = live_server(self.files)
            if self.info is None:
                stale = self.files.read()
                if stale is not None and process_alive(stale.pid):
                    _terminate(stale.pid)
                self.files.clear()
                idle = idle_seconds() if idle_s is None else idle_s
                self._proc = _spawn(self.files, idle, 0)
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def ready(self) -> ServerInfo:
        """The live server, once it answers; this process holds it as a client."""
        try:
            if self.info is None:
                assert self._proc is not None
                self.info = _wait_started(self.files, self._proc)
            self.files.hold_client()
        finally:
            self._release()
        return self.info


def ensure_server(home: Path, *, idle_s: float | None = None) -> ServerInfo:
    """The home's live server, started if none runs (or the one running is stale: dead,
    not answering, or another Prefect version); this process holds it as a client."""
    return ServerStart(home, idle_s=idle_s).ready()


def stop_server(home: Path) -> ServerInfo | None:
    """Stop the home's server (SIGTERM, then SIGKILL after 15 s); the one stopped, if any.
    Runs using it at the time lose their connection to Prefect, not their records."""
    files = ServerFiles(home)
    if not files.state.exists():
        return None
    with files.starting():
        info = files.read()
        if info is None:
            return None
        files.stopped.write_text(str(info.pid))
        STOPPED_HERE.add(info.pid)
        if process_alive(info.pid):
            _terminate(info.pid)
        files.clear()
    return info
