"""Who may use the local Prefect server's files and sockets (`flows.localserver`): a home only
its user can enter, bounded lock waits that name the holder, the listening socket checked to
be the server process's own (psutil, on Linux, macOS and the BSDs), and the server's reduced
environment.

Nothing here imports Prefect."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import stat
import sys
import time
from importlib import metadata
from pathlib import Path

from tasks.errors import InputError, JudgelineError

LOCK_WAIT_S = 180.0
"""The longest a command waits for the start lock (another command starting the server holds
it for at most its start timeout); beyond this the command stops and names the holder."""


class ServerError(JudgelineError):
    """The local Prefect server could not be started, checked or reached: not the input's
    fault, so the command exits 75 (try again later), not 2."""

    exit_code = 75


def lock_file(path: Path, mode: int, *, wait_s: float = LOCK_WAIT_S) -> int | None:
    """An open descriptor holding `mode` on `path` (a file only its user can open, never
    followed through a link); None if `mode` has LOCK_NB and it is held. A holder of an
    exclusive lock writes who it is into the file; a blocking wait is bounded, and past
    `wait_s` a ServerError names that holder."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if mode & fcntl.LOCK_NB:
                    os.close(fd)
                    return None
            if time.monotonic() >= deadline:
                raise ServerError(
                    f"{path} has been locked for {wait_s:.0f} s by {lock_holder(fd)}; "
                    "stop that process, or wait until it ends"
                )
            time.sleep(0.1)
        if mode & fcntl.LOCK_EX:
            me = {"pid": os.getpid(), "command": " ".join(sys.argv)[:200]}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(me).encode(), 0)
        return fd
    except BaseException:
        os.close(fd)
        raise


def lock_holder(fd: int) -> str:
    """Who holds the exclusive lock on the file open at `fd`, as `pid N (command)`, from what
    the holder wrote there."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"pid {int(info['pid'])} ({str(info['command'])[:120]})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` (0600) through a new file of this process, then rename it into
    place: a link planted at either name is never followed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def read_private(path: Path) -> str | None:
    """The text of a file of this user's in the home (never through a link), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as file:
        if os.fstat(file.fileno()).st_uid != os.getuid():
            return None
        return file.read()


def private_home(home: Path) -> None:
    """Make `home` a folder only its user can enter (0700) with files only its user can
    read (0600), or refuse one that belongs to someone else."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = home.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise InputError(
            "Prefect's home (the local server's database, secret and locks) must be a folder "
            "of your own; this one belongs to another user or is not a folder. Set "
            "PREFECT_HOME to a folder of yours",
            file=str(home),
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        home.chmod(0o700)
    for entry in home.iterdir():
        try:
            est = entry.lstat()
            if est.st_uid == os.getuid() and stat.S_IMODE(est.st_mode) & 0o077:
                entry.chmod(0o700 if stat.S_ISDIR(est.st_mode) else 0o600)
        except OSError:
            continue


def private_folder(path: Path) -> Path:
    """`path` made (0700) or found as a folder of this user's that nobody else can enter."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise InputError("must be a folder of your own", file=str(path))
    if stat.S_IMODE(st.st_mode) & 0o077:
        path.chmod(0o700)
    return path


def free_port() -> int:
    """A loopback port nobody listens on now (the server binds it itself a moment later; if
    another process took it meanwhile, the server fails to start and another port is tried)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


NO_CHECK = (
    "judgeline sends its local Prefect server's secret only to a process it has checked is "
    "that server (its own process, listening on the port), and it cannot check that on this "
    "system ({why}). Start a Prefect server yourself (`prefect server start`, with "
    "PREFECT_SERVER_API_AUTH_STRING set) and point judgeline at it with PREFECT_API_URL and "
    "PREFECT_API_AUTH_STRING"
)


def check_listeners_visible() -> None:
    """Refuse at once (ServerError) where psutil cannot list this process's own sockets (no
    /proc on Linux, a sandbox): the server's identity could not be checked either."""
    import psutil

    try:
        psutil.Process(os.getpid()).net_connections("tcp")
    except (psutil.Error, OSError, NotImplementedError) as exc:
        why = f"psutil cannot list this process's sockets: {type(exc).__name__}"
        raise ServerError(NO_CHECK.format(why=why)) from None


def server_process(pid: int, started: float) -> bool:
    """Whether `pid` is a live process of this user that started at `started` (a pid the
    system reused for another process, or a zombie, is not)."""
    import psutil

    try:
        process = psutil.Process(pid)
        alive = process.status() != psutil.STATUS_ZOMBIE
        return alive and abs(process.create_time() - started) < 0.01 and _mine(process)
    except psutil.Error:
        return False


def _mine(process: object) -> bool:
    uids = getattr(process, "uids", None)
    return uids is None or uids().real == os.getuid()


def listens(pid: int, started: float, port: int) -> bool:
    """Whether process `pid` (started at `started`, this user's) has a socket listening on
    127.0.0.1:`port`: the server a client may send its secret to, not a process that took a
    dead server's port."""
    import psutil

    if not server_process(pid, started):
        return False
    try:
        sockets = psutil.Process(pid).net_connections("tcp")
    except psutil.Error:
        return False
    return any(
        s.status == psutil.CONN_LISTEN and s.laddr and tuple(s.laddr)[:2] == ("127.0.0.1", port)
        for s in sockets
    )


def start_time(pid: int) -> float | None:
    """When process `pid` started (psutil's create time), or None if it is gone."""
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


_SERVER_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
               "XDG_CACHE_HOME", "XDG_STATE_HOME", "SQLITE_TMPDIR", "LD_LIBRARY_PATH")  # fmt: skip
"""What the server keeps of the starting command's environment (besides `LC_*`, Prefect's
server and database settings and judgeline's own; LD_LIBRARY_PATH, where an interpreter's
own library lies elsewhere): never a judge's key, a store's credentials or a token it has no
use for."""
_SERVER_DROPS = ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_API_AUTH_STRING")


def server_environment(
    home: Path, auth_string: str, port: int, environ: dict[str, str]
) -> dict[str, str]:
    """The environment of the server of Prefect home `home` on `port`: `_SERVER_ENV`, its
    auth string, and its UI told its own address and given a folder of the home to build in
    (Prefect writes the UI's files there, never into the installation)."""
    keep = {
        name: value
        for name, value in environ.items()
        if name in _SERVER_ENV
        or name.startswith("LC_")
        or (name.startswith("PREFECT_") and name not in _SERVER_DROPS)
        or name.startswith("JUDGELINE_SERVER_")
    }
    keep["PREFECT_HOME"] = str(home)
    keep.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    keep["PREFECT_SERVER_API_AUTH_STRING"] = auth_string
    keep["PREFECT_UI_API_URL"] = f"http://127.0.0.1:{port}/api"
    # Prefect copies its UI there once per version (a copy of an older Prefect is not reused).
    keep["PREFECT_UI_STATIC_DIRECTORY"] = str(home / "ui" / metadata.version("prefect"))
    keep["PREFECT_SERVER_LOGGING_LEVEL"] = "WARNING"
    keep["PREFECT_LOGGING_LEVEL"] = "WARNING"
    # Its umask is 077: bytecode it wrote into a shared installation would be its own only.
    keep["PYTHONDONTWRITEBYTECODE"] = "1"
    return keep
