"""Files only their user can read: private folders, files written and read without following
a link, and locks whose wait is bounded and names the holder (the local server's home, its
state and secret; anything under a folder another user might write)."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import sys
import time
from pathlib import Path

from tasks.errors import InputError, JudgelineError

LOCK_WAIT_S = 180.0
"""The longest a blocking `lock_file` waits before it names the holder and gives up."""


class LockTimeout(JudgelineError):
    """A lock stayed held past its wait: not the input's fault, so exit 75 (try again)."""

    exit_code = 75


def private_folder(path: Path, *, what: str = "this folder") -> Path:
    """`path` made (0700) or found as a folder of this user's, closed to others if it was
    open; refused (InputError) if it is a link, not a folder, or another user's."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise InputError(
            f"{what} must be a folder of your own; this one belongs to another user or is not "
            "a folder",
            file=str(path),
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        path.chmod(0o700)
    return path


def private_home(home: Path) -> None:
    """`private_folder(home)` with every entry of this user's in it closed to others too."""
    private_folder(home, what="Prefect's home (the local server's database, secret and locks)")
    for entry in home.iterdir():
        try:
            est = entry.lstat()
            if est.st_uid == os.getuid() and stat.S_IMODE(est.st_mode) & 0o077:
                entry.chmod(0o700 if stat.S_ISDIR(est.st_mode) else 0o600)
        except OSError:
            continue


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` (0600) through a new file of this process's, renamed into
    place: a link planted at either name is never followed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def read_private(path: Path) -> str | None:
    """The text of a file of this user's (never read through a link), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as file:
        return file.read() if os.fstat(file.fileno()).st_uid == os.getuid() else None


def lock_file(path: Path, mode: int, *, wait_s: float = LOCK_WAIT_S) -> int | None:
    """An open descriptor holding `mode` on `path` (0600, never followed through a link);
    None if `mode` has LOCK_NB and it is held. A holder of an exclusive lock writes who it
    is into the file; a blocking wait past `wait_s` raises LockTimeout naming the holder."""
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
                raise LockTimeout(
                    f"{path} has been locked for {wait_s:.0f} s by {lock_holder(fd)}; stop that "
                    "process, or wait until it ends"
                )
            time.sleep(0.1)
        if mode & fcntl.LOCK_EX:
            os.ftruncate(fd, 0)
            me = {"pid": os.getpid(), "command": " ".join(sys.argv)[:200]}
            os.pwrite(fd, json.dumps(me).encode(), 0)
        return fd
    except BaseException:
        os.close(fd)
        raise


def lock_holder(fd: int) -> str:
    """Who holds the exclusive lock on the file open at `fd`, as `pid N (command)`, from
    what the holder wrote there."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"pid {int(info['pid'])} ({str(info['command'])[:120]})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


_held: list[int] = []
"""Descriptors of the locks this process holds until it exits."""


def register(folder: Path) -> None:
    """Register this process in `folder` until it exits: a file named by its pid, locked by
    it and naming its command (a lock dies with its process, even by SIGKILL)."""
    private_folder(folder)
    fd = lock_file(folder / str(os.getpid()), fcntl.LOCK_EX)
    if fd is not None:
        _held.append(fd)


def hold_until_exit(fd: int) -> None:
    """Keep the lock open at `fd` until this process exits."""
    _held.append(fd)


def registered(folder: Path) -> list[str]:
    """The other live processes `register`ed in `folder` (`pid N (command)`); the files of
    those that ended are removed."""
    found: list[str] = []
    try:
        entries = sorted(folder.iterdir())
    except FileNotFoundError:
        return found
    for entry in entries:
        if entry.name == str(os.getpid()):
            continue
        try:
            fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            entry.unlink(missing_ok=True)  # nobody holds it: its process ended
        except BlockingIOError:
            found.append(lock_holder(fd))
        finally:
            os.close(fd)
    return found
