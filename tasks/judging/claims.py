"""How judge runs share a work dir: one process per run id, and a live view of stored keys.

Two processes judging the SAME run id would race on the run's `calls.parquet` and
`run.json` and pay for every call twice, so the judge stage holds an exclusive `flock` on
`runs/<run_id>/.lock` while it runs; a second process refuses (or waits, if asked) and
names the holder. The kernel drops the lock when its holder dies, even by SIGKILL, so a
crashed run never blocks its resume.

DIFFERENT runs may share the cache at once, and never pay for one call twice: before a
call's first attempt its sender takes the call's claim (`CallClaims`: a lock on the call
key's byte of `cache/claims.lock`) and checks a `StoredKeyView` of the published reply
files. A call claimed by another live process waits until that claim is released, which
happens once the reply is published (or the call failed); then the waiter finds it stored
and skips it, or sends it itself. A dead holder's claims are free at once (the kernel
drops its locks); what the dead process received is in its journal, which the next
claimant publishes before it decides. Only calls in flight when a process died are paid
again.

On an object store (`tasks.store`) there are no such locks: the run lock is a lock object
held by a lease, and call claims are objects created with conditional writes
(`tasks.judging.store_claims`); `tasks.judging.sharing.call_claims` picks the kind the work
dir needs.
"""

from __future__ import annotations

import datetime as dt
import enum
import fcntl
import hashlib
import json
import os
import socket
import struct
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.calls import ReplyRecord
from tasks.errors import InputError
from tasks.judging.cache import check_schema, fold_dead_journals, stored_keys
from tasks.judging.journal import DeadWriterWatch
from tasks.runs.folder import RunFolder
from tasks.storage import FolderChanges
from tasks.store import provide
from tasks.store.workdir import WorkDir

if TYPE_CHECKING:
    from tasks.store.leases import LeaseLock

__all__ = [
    "CallClaims",
    "Claim",
    "RunLock",
    "StoredKeyView",
    "run_lock_is_free",
]


class RunLock:
    """An exclusive lock on one run id, held by this process; a context manager.

        with RunLock(work, "nightly-2026-01-01"):
            ...  # judge the run

    `wait_s` > 0 polls for that long before refusing; the error names the holder's pid,
    host and start time, read from the lock file the holder wrote. A lock taken with
    `nestable=True` may be taken again by this process (a flow holds it around its stages,
    which take it too); it is let go when that outer holder releases it.
    """

    _nestable: ClassVar[dict[str, int]] = {}
    """Lock files this process holds as nestable, with how many inner holders each has."""

    def __init__(
        self, work: WorkDir, run_id: str, *, wait_s: float = 0.0, nestable: bool = False
    ) -> None:
        self.path = RunFolder(work, run_id).create().lock
        self.run_id = run_id
        self.wait_s = wait_s
        self.nestable = nestable
        self._fd: int | None = None
        self._nested = False
        self._object: LeaseLock | None = work.store.made("lease lock", work.store, self.path)
        self._key = work.store.lock_key(self.path)

    def acquire(self) -> RunLock:
        key = self._key
        if key in RunLock._nestable:
            RunLock._nestable[key] += 1
            self._nested = True
            return self
        if self._object is not None:
            self._acquire_object()
        else:
            self._acquire_file()
        if self.nestable:
            RunLock._nestable[key] = 0
        return self

    def _refuse(self, holder: str) -> InputError:
        waited = f" after waiting {self.wait_s:g} s" if self.wait_s > 0 else ""
        return InputError(
            f"run {self.run_id!r} is being judged by another process ({holder})"
            f"{waited}; wait for it to finish or use another --run-id "
            f"(lock file {self._key})"
        )

    def _acquire_object(self) -> None:
        assert self._object is not None
        deadline = time.monotonic() + self.wait_s
        while True:
            holder = self._object.take()
            if holder is None:
                return
            if time.monotonic() >= deadline:
                raise self._refuse(_describe(holder)) from None
            time.sleep(0.1)

    def _acquire_file(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _describe_holder(fd)
                    os.close(fd)
                    raise self._refuse(holder) from None
                time.sleep(0.1)
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(me) + "\n").encode("utf-8"), 0)
        self._fd = fd

    def release(self) -> None:
        key = self._key
        if self._nested:
            RunLock._nestable[key] -= 1
            self._nested = False
            return
        if self._object is not None and self._object.held:
            if self.nestable:
                RunLock._nestable.pop(key, None)
            self._object.release()
        if self._fd is not None:
            if self.nestable:
                RunLock._nestable.pop(key, None)
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
        return _describe(json.loads(os.pread(fd, 4096, 0).decode("utf-8")))
    except (ValueError, UnicodeDecodeError):
        return _describe({})


def _describe(info: dict[str, Any]) -> str:
    try:
        return f"pid {info['pid']} on {info['host']}, started {info['started_at']}"
    except (KeyError, TypeError):
        return "holder unknown: it is still starting"


def _lease_lock(store: Any, path: Path) -> LeaseLock:
    """On an object store the run lock is a lease on the lock file's key."""
    from tasks.store.leases import LeaseLock

    return LeaseLock(store, store.key(path))


provide("lease lock", local=lambda store, path: None, objects=_lease_lock)


def run_lock_is_free(work: WorkDir, run_id: str) -> bool:
    """True if no live process holds the run's lock (a missing lock is free)."""
    path = RunFolder(work, run_id).lock
    lock: LeaseLock | None = work.store.made("lease lock", work.store, path)
    if lock is not None:
        return lock.is_free()
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the probe's lock
    return True


class StoredKeyView:
    """The call keys with a stored reply, kept exact by reading only new reply files.

    A miss lists the replies folder only if it may have changed (`FolderChanges`), and
    reads the key column of files not seen before. A writer in this process hands its own
    files over with `add_file`, so they are not read back. Unreadable files are left to
    the cache's readers, which quarantine them.
    """

    def __init__(self, work: WorkDir) -> None:
        self.folder = work.replies
        self.store = work.store
        self.store.refresh(self.folder, "*.parquet", force=True)
        self._changes = FolderChanges(self.folder)
        self._seen: set[str] = set()
        self._listing()  # files listed now count as seen: stored_keys reads them next
        self.keys = stored_keys(work)

    def _listing(self) -> list[str]:
        """Names of reply files not seen before."""
        self._changes.looking()
        with os.scandir(self.folder) as entries:
            names = [e.name for e in entries if e.name.endswith(".parquet")]
        new = [n for n in names if n not in self._seen]
        self._seen.update(new)
        return new

    def refresh(self, *, newest: bool = False) -> int:
        """Read reply files published since the last refresh; returns keys added. On an
        object store the copy is listed again at most once a second, or now if `newest`."""
        self.store.refresh(self.folder, "*.parquet", force=newest)
        before = len(self.keys)
        for name in self._listing():
            path = Path(self.folder, name)
            try:
                check_schema(path, ReplyRecord)
                column = pq.read_table(path, columns=["call_key"])
            except FileNotFoundError:
                continue  # compacted away; its rows live on in the merged file
            except (OSError, ValueError, pa.ArrowException):
                continue
            self.keys.update(column.column("call_key").to_pylist())
        return len(self.keys) - before

    def expect(self, name: str) -> None:
        """A reply file this process is about to publish: not to be read when it appears
        (its keys come with `add_file`; reading it back cost the judge stage's event loop
        a parquet read per flush)."""
        self._seen.add(name)

    def add_file(self, path: Path, call_keys: Iterable[str]) -> None:
        """Count a reply file this process just published, without reading it back."""
        self._seen.add(path.name)
        self.keys.update(call_keys)

    def __contains__(self, call_key: object) -> bool:
        if call_key in self.keys:
            return True
        self.store.refresh(self.folder, "*.parquet")
        if self._changes.changed():
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


_FLOCK = struct.Struct("@hhqqi4x")
"""Linux's `struct flock`: type, whence, start, length, pid (0 for open-file locks)."""


def _lock_byte(fd: int, offset: int, kind: int) -> bool:
    """Set (F_WRLCK) or clear (F_UNLCK) an open-file-description lock on one byte; False if
    another open file holds it. Like `flock`, such a lock belongs to this open file, not to
    the process, and the kernel drops it when its holder dies."""
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(kind, os.SEEK_SET, offset, 1, 0))
    except (BlockingIOError, PermissionError):
        return False
    return True


def _byte_of(call_key: str) -> int:
    """Where a call key's lock lives in the claims file (62 bits of its hash)."""
    digest = hashlib.blake2b(call_key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


class CallClaims:
    """Claims on the calls this process is sending: a lock on one byte per call key.

    `take(key)` locks the key's byte of `cache/claims.lock` without waiting (no file is
    created per call: creating and deleting files costs about a millisecond each on a
    journaled filesystem). A claim is held from just before a call's first attempt until
    its reply is published (`CacheWriter` releases it after the flush) or it failed. A
    process that dies holding claims loses them at once; what it received is in its
    journal, so after taking a claim, and before the last look at the stored keys, the
    taker publishes the journals of dead writers if there are any (`DeadWriterWatch`,
    which looks at most every 20 ms: a reply whose receiver died in the last 20 ms may be
    paid for again, like a call in flight).
    """

    def __init__(self, work: WorkDir, view: StoredKeyView | None = None) -> None:
        self.work = work
        # The view first: reading it may fail (no room to publish a dead writer's journal),
        # and a long-lived process (a Dask worker) must not keep the claims file open then.
        self.view = view if view is not None else StoredKeyView(work)
        self._fd = os.open(work.claims_file, os.O_RDWR | os.O_CREAT, 0o600)
        self._dead_writers = DeadWriterWatch(work.journal)
        self._held: set[str] = set()
        self.waited: set[str] = set()
        """Call keys found claimed by another live process at least once."""

    async def claim(self, call_key: str) -> Claim:
        """`take`, as the judge client awaits it (a lock on a local file never waits)."""
        return self.take(call_key)

    def take(self, call_key: str) -> Claim:
        if call_key in self._held:
            return Claim.MINE
        if not _lock_byte(self._fd, _byte_of(call_key), fcntl.F_WRLCK):
            self.waited.add(call_key)
            return Claim.BUSY
        self._held.add(call_key)
        if self._dead_writers.any_dead():
            fold_dead_journals(self.work)
        if call_key in self.view:
            self.release([call_key])
            return Claim.STORED
        return Claim.MINE

    def publishing(self, name: str) -> None:
        """A writer is about to publish a reply file of this name."""
        self.view.expect(name)

    def published(self, path: Path | None, stored: list[str], settled: set[str]) -> None:
        """A writer published `path` holding the replies of `stored`: let the view see them,
        then give up the claims of every call `settled` (stored or failed)."""
        if path is not None:
            self.view.add_file(path, stored)
        self.release(settled)

    def release(self, call_keys: Iterable[str]) -> None:
        """Give up these claims (keys not held here are ignored)."""
        for key in call_keys:
            if key in self._held:
                self._held.discard(key)
                _lock_byte(self._fd, _byte_of(key), fcntl.F_UNLCK)

    @property
    def held(self) -> int:
        return len(self._held)

    def close(self) -> None:
        """Release every claim and close the claims file."""
        if self._fd >= 0:
            self.release(list(self._held))
            os.close(self._fd)
            self._fd = -1
            self._dead_writers.close()
