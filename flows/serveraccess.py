"""Who may use the local Prefect server's files and sockets (`flows.localserver`): a home
only its user can enter, the processes holding a lock named, the listening socket checked
to be the server's own, the secret's header, the server's reduced environment, and the stamp
of the code it runs.

Nothing here imports Prefect."""

from __future__ import annotations

import base64
import fcntl
import hmac
import os
import secrets
import stat
import time
from pathlib import Path

from tasks.errors import InputError, JudgelineError

LOCK_WAIT_S = 180.0
"""The longest a command waits for the start lock (another command starting the server holds
it for at most its start timeout, 120 s); beyond this the command stops and names the
holder."""


class ServerError(JudgelineError):
    """The local Prefect server could not be started or reached."""


def lock_file(path: Path, mode: int, *, wait_s: float = LOCK_WAIT_S) -> int | None:
    """An open descriptor holding `mode` on `path` (a file only its user can open); None if
    `mode` has LOCK_NB and it is held. A blocking wait is bounded: past `wait_s` a
    ServerError names the processes holding it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if mode & fcntl.LOCK_NB:
                    os.close(fd)
                    return None
            if time.monotonic() >= deadline:
                raise ServerError(
                    f"{path} has been locked for {wait_s:.0f} s by {lock_holders(fd)}; "
                    "stop that process, or wait until it ends"
                )
            time.sleep(0.1)
    except BaseException:
        os.close(fd)
        raise


def read_or_make_secret(path: Path) -> str:
    """The secret in `path`, made (32 random bytes, 0600) if there is none; two processes
    making it at once agree on the first one linked into place."""
    try:
        value = path.read_text().strip()
        if value:
            return value
    except FileNotFoundError:
        pass
    value = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(value + "\n")
    try:
        os.link(tmp, path)  # the first writer's secret wins
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text().strip()


def lock_holders(fd: int) -> str:
    """The processes holding a lock on the file open at `fd`, as `pid N (command)` (from
    /proc/locks), or "another process" if they cannot be told."""
    st = os.fstat(fd)
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    holders = []
    try:
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[5] == ident and fields[4].isdigit():
                pid = int(fields[4])
                try:
                    name = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                    who = f"pid {pid} ({name.decode(errors='replace').strip()[:80]})"
                except OSError:
                    who = f"pid {pid}"
                if who not in holders:
                    holders.append(who)
    except OSError:
        pass
    return ", ".join(holders) or "another process"


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


def serves_port(pid: int, port: int) -> bool:
    """Whether the socket listening on 127.0.0.1:`port` is one of process `pid`'s own
    descriptors: the server this client trusts, not a process that took its port."""
    needle = f"0100007F:{port:04X}"
    inodes = set()
    try:
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[1] == needle and fields[3] == "0A":  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
        if not inodes:
            return False
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in os.listdir(fd_dir):
            with_link = fd_dir / fd
            try:
                if os.readlink(with_link) in inodes:
                    return True
            except OSError:
                continue
    except OSError:
        return False
    return False


def basic_auth(auth_string: str) -> str:
    """The `Authorization` header's value for an auth string."""
    return "Basic " + base64.b64encode(auth_string.encode()).decode()


def authorized(header: bytes | None, auth_string: str) -> bool:
    """Whether an `Authorization` header carries `auth_string` (compared in constant time)."""
    return header is not None and hmac.compare_digest(header, basic_auth(auth_string).encode())


_SERVER_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
               "XDG_CACHE_HOME", "XDG_STATE_HOME", "SQLITE_TMPDIR")  # fmt: skip
"""What the server keeps of the starting command's environment (besides `LC_*`, Prefect's
server and database settings and judgeline's own): never a judge's key, a store's
credentials or a token it has no use for."""
_SERVER_DROPS = ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_API_AUTH_STRING")


def server_environment(home: Path, auth_string: str, environ: dict[str, str]) -> dict[str, str]:
    """The environment of the server process of Prefect home `home` (`_SERVER_ENV`)."""
    keep = {
        name: value
        for name, value in environ.items()
        if name in _SERVER_ENV
        or name.startswith("LC_")
        or (name.startswith("PREFECT_") and name not in _SERVER_DROPS)
        or (name.startswith("JUDGELINE_SERVER_"))
    }
    keep["PREFECT_HOME"] = str(home)
    keep.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    keep["PREFECT_LOGGING_LEVEL"] = "WARNING"
    keep["PREFECT_SERVER_API_AUTH_STRING"] = auth_string
    return keep


SERVER_CODE = ("flows/serverd.py", "flows/serveraccess.py", "flows/localserver.py",
               "tasks/gates.py", "tasks/gate_allowlist.py")  # fmt: skip
"""The modules whose code the server runs for judgeline (its process and the gate route)."""


def code_stamp() -> str:
    """The size and modification time of each SERVER_CODE module, hashed: it changes when
    judgeline is upgraded or edited. Taken by the server before it imports anything heavy,
    so an edit made while it starts makes it stale, never current."""
    import hashlib

    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for name in SERVER_CODE:
        try:
            st = (root / name).stat()
            digest.update(f"{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        except OSError:
            digest.update(f"{name}:-;".encode())
    return digest.hexdigest()[:16]
