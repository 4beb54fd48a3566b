"""A command's side of the warm worker (`flows.worker`): the commands that run flows hand
their argv, environment, working directory and standard streams to a process that has
already imported everything a flow needs, and wait for its exit status.

This module imports the standard library only: it runs before anything else in the
`judgeline` console script, so a command that finds a worker spends about 50 ms of its own
before the worker's fork of itself starts on the job.

- Which commands: those that run flows (`FLOW_COMMANDS`); the others start no Prefect and
  gain nothing from it.
- Which worker: one per user and installation (`address`), whatever the work dir or Prefect
  home, on a Linux abstract Unix socket: no file is left behind, and a dead worker frees its
  name at once. Both ends check that the other is the same user.
- The command forwards the signals it gets (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT, Ctrl-Z) to the
  job's process, and ends as the job ended: the same exit code, or killed by the same signal.
  If the command dies, the worker kills the job's process group, as a SIGKILL of the
  command's group did when the job ran in the command.
- No worker, or one that refuses (its code changed on disk): the command runs the job
  itself, as before, and starts a worker for the next command (`spawn_wanted`).
- The worker leaves after JUDGELINE_WORKER_IDLE_SECONDS (default 600) with no command, or on
  SIGTERM, once its running jobs end. It serves every work dir, so `judgeline server stop`
  (one work dir's server) leaves it running; `judgeline server status` shows it.
- JUDGELINE_WORKER=0 turns this off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import signal
import socket
import struct
import sys
from pathlib import Path
from typing import Any

from tasks.usercache import user_cache_dir

WORKER_ENV = "JUDGELINE_WORKER"
IDLE_ENV = "JUDGELINE_WORKER_IDLE_SECONDS"
IDLE_SECONDS = 600.0
"""How long the worker waits for a command before it leaves (IDLE_ENV)."""
FLOW_COMMANDS = frozenset({"run", "judge", "rerun-failed", "import", "reparse", "remap", "demo"})
"""The subcommands that run Prefect flows (`serve` and `live` stay in their own process: a
long-lived server, and a job a user may watch with process tools)."""
_GLOBAL_WITH_VALUE = ("--work-dir", "--scratch-dir")
_GLOBAL_FLAGS = ("--debug",)
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
HEADER = struct.Struct("!I")
LIMITS = ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE",
          "RLIMIT_MEMLOCK", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_STACK")  # fmt: skip
"""The resource limits a job takes from its command (`ulimit`), with its umask."""

spawn_wanted = False
"""Set when this command found no worker to take it (or a stale one): it starts one as it
exits (`flows.runtime.start_prefect`), for the commands after it."""


def address() -> bytes:
    """The worker's abstract socket name for this user and installation (its jobs take
    their Prefect home and everything else from the command's environment)."""
    key = "\0".join((str(os.getuid()), sys.prefix, str(Path(__file__).resolve().parent)))
    return b"\0judgeline-worker-" + hashlib.sha256(key.encode()).hexdigest()[:24].encode()


def flow_command(argv: list[str]) -> bool:
    """Whether `argv` (without the program name) runs one of `FLOW_COMMANDS`: its first word
    after the global options."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in _GLOBAL_WITH_VALUE:
            i += 2
        elif word.startswith(tuple(f"{o}=" for o in _GLOBAL_WITH_VALUE)) or word in _GLOBAL_FLAGS:
            i += 1
        else:
            return word in FLOW_COMMANDS
    return False


def same_user(sock: socket.socket) -> bool:
    """Whether the process at the other end of `sock` runs as this user (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def send_message(
    sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None
) -> None:
    """One length-prefixed JSON message, with `fds` passed alongside its header."""
    body = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [HEADER.pack(len(body))], list(fds))
    else:
        sock.sendall(HEADER.pack(len(body)))
    sock.sendall(body)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def recv_message(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    """The next message from `sock` and the descriptors (up to `max_fds`) passed with its
    header; EOFError if it closed first. The caller owns (closes) the descriptors."""
    fds: list[int] = []
    if max_fds:
        header, fds, _flags, _addr = socket.recv_fds(sock, HEADER.size, max_fds)
        if not header:
            raise EOFError
    else:
        header = b""
    try:
        header += _recv_exactly(sock, HEADER.size - len(header))
        (size,) = HEADER.unpack(header)
        message: dict[str, Any] = json.loads(_recv_exactly(sock, size))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return message, fds


def _stream_spec(stream: Any) -> dict[str, Any]:
    """How this process's text stream encodes and buffers, for the job's copy of it."""
    return {
        "encoding": getattr(stream, "encoding", None) or "utf-8",
        "errors": getattr(stream, "errors", None) or "strict",
        "line_buffering": bool(getattr(stream, "line_buffering", False)),
        "write_through": bool(getattr(stream, "write_through", False)),
    }


def _standard_descriptors() -> tuple[list[int], list[int], list[int]]:
    """Descriptors 0, 1 and 2 to pass (/dev/null for one that is closed here: the job then
    closes its copy), the /dev/null ones this opened, and which were closed."""
    fds, extra, closed = [], [], []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            fds.append(null)
            extra.append(null)
            closed.append(fd)
    return fds, extra, closed


def _connect() -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address())
        if same_user(sock):
            return sock
    except OSError:
        pass
    sock.close()
    return None


def _end_like(status: dict[str, Any]) -> int:
    """The exit code to leave with; a job killed by a signal kills this process with it."""
    if "signal" in status:
        signum = int(status["signal"])
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return 128 + signum
    return int(status["exit"])


def hand_off(argv: list[str]) -> int | None:
    """Run `argv` in the warm worker and return its exit code; None if this process must run
    it itself (not a flow command, no worker, or the worker declined)."""
    global spawn_wanted
    if os.environ.get(WORKER_ENV) == "0" or not flow_command(argv):
        return None
    sock = _connect()
    if sock is None:
        spawn_wanted = True
        return None
    with sock:
        umask = os.umask(0o022)
        os.umask(umask)
        try:
            cwd = os.getcwd()
        except OSError:
            return None  # a working directory that was removed: the command says so itself
        request = {
            "argv": [sys.argv[0], *argv],
            "env": dict(os.environ),
            "cwd": cwd,
            "stdio": [_stream_spec(s) for s in (sys.stdin, sys.stdout, sys.stderr)],
            "umask": umask,
            "limits": {n: resource.getrlimit(getattr(resource, n)) for n in LIMITS},
        }
        fds, opened, closed = _standard_descriptors()
        request["closed"] = closed
        try:
            send_message(sock, request, fds)
            reply, _ = recv_message(sock)
        except (OSError, EOFError):
            spawn_wanted = True
            return None
        finally:
            for fd in opened:
                os.close(fd)
        if "pid" not in reply:
            # Declined: a stale worker (its code changed on disk) leaves, and this command
            # starts the next; a command whose limits it cannot take runs here.
            spawn_wanted = reply.get("declined") == "stale"
            return None
        return _wait(sock, int(reply["pid"]))


def _wait(sock: socket.socket, pid: int) -> int:
    """Forward signals to the job (`pid` leads its process group) until the worker reports
    how it ended."""

    def forward(signum: int, _frame: Any) -> None:
        # To the job's whole process group, as a terminal signals its foreground group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signum)

    def stop(_signum: int, _frame: Any) -> None:
        # Ctrl-Z: stop the job, then this process; `fg` continues both.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGSTOP)
        os.kill(os.getpid(), signal.SIGSTOP)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGCONT)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    signal.signal(signal.SIGTSTP, stop)
    try:
        status, _ = recv_message(sock)
    except (OSError, EOFError):
        print(
            f"judgeline: the worker running this command (job pid {pid}) went away before "
            "the job ended; its exit status is unknown (`judgeline runs` shows the run)",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return _end_like(status)


def spawn() -> None:
    """Start a worker for this user and installation, detached (returns at once; a worker
    that finds its name taken leaves at once). A cache folder that cannot be written only
    means no worker: the commands run their jobs themselves."""
    import subprocess

    cache = user_cache_dir()
    env = {**os.environ}
    for name in ("PREFECT_API_URL", "JUDGELINE_GATE_URL"):
        env.pop(name, None)
    # Prefect makes its home when imported: the worker, for no particular home, has its own.
    env["PREFECT_HOME"] = str(cache / "worker-prefect-home")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / "worker.log", "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "flows.worker", address().hex()],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=cache,
            )
    except OSError:
        return


def ask(question: str, name: bytes | None = None) -> dict[str, Any] | None:
    """The answer of the worker (this installation's, or the one listening on `name`) to
    `question` ("status", "stop"); None if none answered."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with sock:
        try:
            sock.settimeout(5)
            sock.connect(name or address())
            send_message(sock, {"ask": question})
            return recv_message(sock)[0]
        except (OSError, EOFError, ValueError):
            return None


def worker_status() -> dict[str, Any] | None:
    """The worker's pid, start time, and the commands it took and runs now; None if none."""
    return ask("status")


def stop_worker() -> int | None:
    """Ask the worker to stop once its jobs end; its pid, or None if none answered."""
    answer = ask("stop")
    return None if answer is None else int(answer["pid"])
