"""How judge runs share a work dir: one process per run id, and a live view of stored keys.

Two processes judging the SAME run id would race on the run's `calls.parquet` and
`run.json` and pay for every call twice, so the judge stage holds an exclusive `flock` on
`runs/<run_id>/.lock` while it runs; a second process refuses (or waits, if asked) and
names the holder. The kernel drops the lock when its holder dies, even by SIGKILL, so a
crashed run never blocks its resume.

DIFFERENT runs may share the cache at once: each checks a `StoredKeyView`, refreshed from
the reply files other processes publish, just before it sends a call, and skips calls
stored meanwhile. A call two runs send while neither has stored it yet is paid twice;
that is bounded by what is in flight plus about one flush interval of the other run.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import functools
import json
import os
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.errors import InputError
from tasks.workdir import WorkDir

__all__ = ["LOCK_FILE", "RunLock", "StoredKeyView", "holding_run_lock"]

LOCK_FILE = ".lock"


class RunLock:
    """An exclusive lock on one run id, held by this process; a context manager.

        with RunLock(work, "nightly-2026-01-01"):
            ...  # judge the run

    `wait_s` > 0 polls for that long before refusing; the error names the holder's pid,
    host and start time, read from the lock file the holder wrote.
    """

    def __init__(self, work: WorkDir, run_id: str, *, wait_s: float = 0.0) -> None:
        self.path = work.run_dir(run_id) / LOCK_FILE
        self.run_id = run_id
        self.wait_s = wait_s
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _describe_holder(fd)
                    os.close(fd)
                    waited = f" after waiting {self.wait_s:g} s" if self.wait_s > 0 else ""
                    raise InputError(
                        f"run {self.run_id!r} is being judged by another process ({holder})"
                        f"{waited}; wait for it to finish or use another --run-id "
                        f"(lock file {self.path})"
                    ) from None
                time.sleep(0.1)
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(me) + "\n").encode("utf-8"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            # The file stays: deleting it would let a third process lock a fresh inode
            # while a second one still waits on the old one.
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _describe_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"pid {info['pid']} on {info['host']}, started {info['started_at']}"
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return "holder unknown: it is still starting"


P = ParamSpec("P")
R = TypeVar("R")


def holding_run_lock(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Run an async stage `fn(work, run_id, ...)` under the run's `RunLock`."""

    @functools.wraps(fn)
    async def locked(*args: P.args, **kwargs: P.kwargs) -> R:
        work = kwargs["work"] if "work" in kwargs else args[0]
        run_id = kwargs["run_id"] if "run_id" in kwargs else args[1]
        assert isinstance(work, WorkDir) and isinstance(run_id, str)
        with RunLock(work, run_id):
            return await fn(*args, **kwargs)

    return locked


class StoredKeyView:
    """The call keys with a stored reply, kept fresh by reading only new reply files.

    `in` refreshes when the replies folder changed (its mtime) or `interval_s` passed: a
    listing of the folder plus the key column of the files not seen before (other
    processes' flushes, about one a second each).
    Unreadable files are left to the cache's readers, which quarantine them.
    """

    def __init__(
        self, work: WorkDir, load: Callable[[], set[str]], *, interval_s: float = 0.05
    ) -> None:
        """`load` reads every stored key (e.g. `tasks.cache.stored_keys`); files listed
        before it ran count as seen, later ones are read at the next refresh."""
        self.folder = work.replies
        self.interval_s = interval_s
        self._folder_mtime = os.stat(self.folder).st_mtime_ns
        self._seen = set(self._listing())
        self.keys = set(load())
        self._checked = time.monotonic()

    def _listing(self) -> list[str]:
        with os.scandir(self.folder) as entries:
            return [e.name for e in entries if e.name.endswith(".parquet")]

    def refresh(self) -> int:
        """Read reply files published since the last refresh; returns keys added."""
        self._checked = time.monotonic()
        self._folder_mtime = os.stat(self.folder).st_mtime_ns  # before listing: no gap
        before = len(self.keys)
        for name in self._listing():
            if name in self._seen:
                continue
            self._seen.add(name)
            try:
                column = pq.read_table(Path(self.folder, name), columns=["call_key"])
            except FileNotFoundError:
                continue  # compacted away; its rows live on in the merged file
            except (OSError, ValueError, pa.ArrowException):
                continue
            self.keys.update(column.column("call_key").to_pylist())
        return len(self.keys) - before

    def __contains__(self, call_key: object) -> bool:
        if call_key in self.keys:
            return True
        # A new file changes the folder's mtime (a stat costs microseconds); the interval
        # covers two publications within one tick of the file system's clock.
        changed = os.stat(self.folder).st_mtime_ns != self._folder_mtime
        if changed or time.monotonic() - self._checked >= self.interval_s:
            self.refresh()
        return call_key in self.keys

    def stored(self, call_key: str) -> bool:
        """Whether `call_key` has a stored reply by now (for `JudgeClient(skip=...)`)."""
        return call_key in self
