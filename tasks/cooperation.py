"""How judge runs share a work dir: one process per run id, and a live view of stored keys.

Two processes judging the SAME run id would race on the run's `calls.parquet` and
`run.json` and pay for every call twice, so the judge stage holds an exclusive `flock` on
`runs/<run_id>/.lock` while it runs; a second process refuses (or waits, if asked) and
names the holder. The kernel drops the lock when its holder dies, even by SIGKILL, so a
crashed run never blocks its resume.

DIFFERENT runs may share the cache at once, and never pay for one call twice: before a
call's first attempt its sender takes the call's claim (`CallClaims`: a lock file per call
key under `cache/claims/`) and checks a `StoredKeyView` of the published reply files. A
call claimed by another live process waits until that claim is released, which happens
once the reply is published (or the call failed); then the waiter finds it stored and
skips it, or sends it itself. A dead holder's claim is free at once (the kernel drops its
lock); what the dead process received is in its journal, which the next claimant publishes
before it decides. Only calls that were in flight when a process died are paid again.
"""

from __future__ import annotations

import datetime as dt
import enum
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.cache import fold_dead_journals, stored_keys
from tasks.errors import InputError
from tasks.journal import held_by_someone, same_file
from tasks.workdir import WorkDir

__all__ = ["LOCK_FILE", "CallClaims", "Claim", "RunLock", "StoredKeyView"]

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


SETTLE_NS = 50_000_000
"""A folder whose mtime is older than this (50 ms) at a listing cannot hide a later file
behind an unchanged mtime: file systems stamp times from a clock with a tick of a few ms."""


class StoredKeyView:
    """The call keys with a stored reply, kept exact by reading only new reply files.

    `in` answers from memory while the replies folder is unchanged since the last listing
    (its mtime, a stat of microseconds). Publishing a file changes the folder's mtime,
    except a second file published within the same clock tick as the mtime the last
    listing saw; so until the folder has been quiet for `SETTLE_NS` at a listing, every
    miss lists again. Unreadable files are left to the cache's readers, which quarantine
    them.
    """

    def __init__(self, work: WorkDir) -> None:
        self.folder = work.replies
        self._listed_mtime = 0
        self._settled = False
        self._seen: set[str] = set()
        self.keys: set[str] = set()
        self._listing()  # files listed now count as seen: stored_keys reads them next
        self.keys = stored_keys(work)

    def _listing(self) -> list[str]:
        """Names of reply files not seen before; records the folder's state first."""
        now = time.time_ns()
        self._listed_mtime = os.stat(self.folder).st_mtime_ns  # before listing: no gap
        self._settled = now - self._listed_mtime > SETTLE_NS
        with os.scandir(self.folder) as entries:
            names = [e.name for e in entries if e.name.endswith(".parquet")]
        new = [n for n in names if n not in self._seen]
        self._seen.update(new)
        return new

    def refresh(self) -> int:
        """Read reply files published since the last refresh; returns keys added."""
        before = len(self.keys)
        for name in self._listing():
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
        if not self._settled or os.stat(self.folder).st_mtime_ns != self._listed_mtime:
            self.refresh()
        return call_key in self.keys


class Claim(enum.Enum):
    """What `CallClaims.take` found."""

    MINE = "mine"
    """This process holds the claim now and must send the call."""
    STORED = "stored"
    """The call's reply is stored: do not send it."""
    BUSY = "busy"
    """Another live process is sending it: ask again later."""


class CallClaims:
    """Claims on the calls this process is sending: one lock file per call key.

    `take(key)` opens `cache/claims/<key>` and takes its exclusive `flock` without waiting.
    A claim stays held from just before a call's first attempt until its reply is
    published (`CacheWriter` releases it after the flush) or it failed; `release` deletes
    the file while still holding the lock, so a process that opened the old file sees it
    was deleted and starts again. The holder writes its pid and host into the file: a file
    that is there, unlocked and not empty was left by a process that died holding it, so
    the taker first publishes dead writers' journals and re-reads the stored keys.
    """

    def __init__(self, work: WorkDir, view: StoredKeyView | None = None) -> None:
        self.work = work
        self.folder = work.claims
        self.view = view if view is not None else StoredKeyView(work)
        self._held: dict[str, int] = {}
        self._me = f"{os.getpid()} {socket.gethostname()}\n".encode()
        self.waited: set[str] = set()
        """Call keys found claimed by another live process at least once."""

    def take(self, call_key: str) -> Claim:
        if call_key in self._held:
            return Claim.MINE
        if call_key in self.view:
            return Claim.STORED
        path = self.folder / call_key
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if held_by_someone(fd):
                os.close(fd)
                self.waited.add(call_key)
                return Claim.BUSY
            if same_file(fd, path):
                break
            os.close(fd)  # released and deleted while we opened it: open the new one
        left_by_dead = os.fstat(fd).st_size > 0
        os.ftruncate(fd, 0)
        os.pwrite(fd, self._me, 0)
        self._held[call_key] = fd
        if left_by_dead:
            fold_dead_journals(self.work)
        if call_key in self.view:
            self.release([call_key])
            return Claim.STORED
        return Claim.MINE

    def release(self, call_keys: Iterable[str]) -> None:
        """Give up these claims (keys not held here are ignored)."""
        for key in call_keys:
            fd = self._held.pop(key, None)
            if fd is not None:
                (self.folder / key).unlink(missing_ok=True)
                os.close(fd)

    def release_all(self) -> None:
        self.release(list(self._held))

    @property
    def held(self) -> int:
        return len(self._held)
