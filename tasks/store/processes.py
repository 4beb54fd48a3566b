"""This user's processes, told apart with psutil (Linux, macOS, the BSDs; no /proc read here):
whether a pid is still the process that started at a given time, and whether it listens on a
loopback port. A client of the local Prefect server sends its auth string only to a port
`listens` vouches for."""

from __future__ import annotations

import os

from tasks.errors import JudgelineError


class CannotCheck(JudgelineError):
    """psutil cannot tell which process listens where on this system: not bad input, but
    the local server cannot be used as configured (exit 78, EX_CONFIG)."""

    exit_code = 78


NO_CHECK = (
    "judgeline sends its local Prefect server's auth string only to a process it has checked "
    "is that server (its own process, listening on the port), and it cannot check that on this "
    "system ({why}). Start a Prefect server yourself (`prefect server start`, with "
    "PREFECT_SERVER_API_AUTH_STRING set) and point judgeline at it with PREFECT_API_URL and "
    "PREFECT_API_AUTH_STRING"
)


def check_listeners_visible() -> None:
    """Refuse at once where psutil cannot list this process's own sockets (no /proc on
    Linux, a sandbox): a server's identity could not be checked either."""
    import psutil

    try:
        psutil.Process(os.getpid()).net_connections("tcp")
    except (psutil.Error, OSError, NotImplementedError) as exc:
        why = f"psutil cannot list this process's sockets: {type(exc).__name__}"
        raise CannotCheck(NO_CHECK.format(why=why)) from None


def start_time(pid: int) -> float | None:
    """When process `pid` started (psutil's create time), or None if it is gone."""
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def same_process(pid: int, started: float) -> bool:
    """Whether `pid` is a live process of this user's that started at `started`."""
    import psutil

    try:
        process = psutil.Process(pid)
        mine = process.uids().real == os.getuid() if hasattr(process, "uids") else True
        alive = process.status() != psutil.STATUS_ZOMBIE
        return alive and mine and abs(process.create_time() - started) < 0.01
    except psutil.Error:
        return False


def listens(pid: int, started: float, port: int) -> bool:
    """Whether process `pid` (this user's, started at `started`) listens on 127.0.0.1:`port`:
    the server a client may send its auth string to, not a process that took its port."""
    import psutil

    if not same_process(pid, started):
        return False
    try:
        sockets = psutil.Process(pid).net_connections("tcp")
    except psutil.Error:
        return False
    here = ("127.0.0.1", port)
    return any(s.status == psutil.CONN_LISTEN and tuple(s.laddr)[:2] == here for s in sockets)
