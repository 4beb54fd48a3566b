"""The reply journal: what a judge process received but has not yet published as parquet.

A `CacheWriter` buffers replies for about a second before it writes them as one parquet
file. So that a process killed in that second (SIGKILL, OOM, a lost node) loses nothing it
paid for, every reply and attempt is first appended to the process's own journal, one JSON
line per call, written straight to the file (no userspace buffer: a process kill cannot
lose a line the kernel accepted) within the same turn of the event loop. Once the parquet
files holding a segment's lines are published, the segment is deleted.

Each segment is held with an exclusive `flock` while its writer lives; the kernel drops it
when the writer dies, however it dies. `dead_segments` yields the segments nobody holds
(their writer died before publishing them); `tasks.judging.cache.fold_dead_journals` publishes
their lines as parquet and deletes them. Lines may then be stored twice (if the writer died
between publishing and deleting): harmless, readers keep one row per call key.

A writer holds a `Reserve` on the journal's file system: when it fills up (the first
ENOSPC), the reserve is freed and the replies still in flight are journaled in its space, so
a full disk loses no reply that was paid for (the judge stage stops sending at once:
`tasks.judging.stopping`). A write the full disk cut short is cut off again: whole lines
only.

What it does not cover: a machine that loses power before the kernel writes its page cache
to disk (there is no fsync per reply; that would cost a disk flush per call).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pydantic import ValidationError

from schemas.calls import AttemptRecord, ReplyRecord
from tasks.storage import FolderChanges
from tasks.store.workdir import disk_full

__all__ = [
    "DeadWriterWatch",
    "Entry",
    "JournalSegment",
    "ReplyJournal",
    "Reserve",
    "dead_segments",
    "encode",
    "parse",
]

log = logging.getLogger(__name__)

SUFFIX = ".jsonl"

Entry = tuple[ReplyRecord | None, Sequence[AttemptRecord]]
"""One call's outcome: its reply (None if it failed) and its attempts."""


def same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open as `fd` (it was not deleted or replaced)."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def encode(entries: Sequence[Entry]) -> bytes:
    """One JSON line per entry: its reply (or null) and its attempts."""
    return "".join(
        '{"reply":'
        + (reply.model_dump_json() if reply is not None else "null")
        + ',"attempts":['
        + ",".join(a.model_dump_json() for a in attempts)
        + "]}\n"
        for reply, attempts in entries
    ).encode("utf-8")


@dataclass
class JournalSegment:
    """One journal file: open, locked, and appended to by one writer."""

    path: Path
    fd: int
    size: int = 0
    """Bytes written (only this writer appends to the file)."""

    def write(self, entries: Sequence[Entry]) -> None:
        """Append one line per entry, in one write. A write that fails part way (the disk
        filled up) is cut off again: the file keeps whole lines only."""
        data = encode(entries)
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError:
            if len(view) < len(data):
                os.ftruncate(self.fd, self.size)  # shrinking needs no space
            raise
        self.size += len(data)

    def release(self) -> None:
        """Drop the lock, keeping the file: its lines wait for the next reader to publish."""
        os.close(self.fd)

    def retire(self) -> None:
        """Delete the segment (its lines are published) and drop its lock."""
        self.path.unlink(missing_ok=True)  # while still locked: nobody folds it meanwhile
        os.close(self.fd)


RESERVE_SUFFIX = ".reserve"


@dataclass
class Reserve:
    """Space held on the journal's file system, freed when it fills up so that the replies
    still in flight can be journaled. A locked file `.<id>.reserve`; `dead_segments`
    deletes a dead writer's."""

    path: Path
    fd: int

    @classmethod
    def take(cls, folder: Path, size: int) -> Reserve:
        """Allocate `size` bytes (an OSError, ENOSPC if there is not that much space)."""
        path = folder / f".{uuid.uuid4().hex}{RESERVE_SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            _allocate(fd, size)
        except BaseException:
            path.unlink(missing_ok=True)
            os.close(fd)
            raise
        return cls(path, fd)

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
        os.close(self.fd)


def _allocate(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        # No fallocate here (ZFS): written blocks, of random bytes so that a compressing
        # file system cannot store them in nothing.
        chunk = os.urandom(1 << 16)
        done = 0
        while done < size:
            done += os.write(fd, chunk[: size - done])


@dataclass
class ReplyJournal:
    """This writer's journal: a current segment, started on the first line after a cut, and
    a `Reserve` of `reserve_bytes` (none if 0) for when the file system fills up."""

    seen_by_every_process: ClassVar[bool] = True
    """Whether a line kept here is found by every process of the work dir (a dead writer's
    journal in the work dir's folder is folded by the next reader)."""

    folder: Path
    reserve_bytes: int = 0
    current: JournalSegment | None = field(default=None, init=False)
    reserve: Reserve | None = field(default=None, init=False)
    full: OSError | None = field(default=None, init=False)
    """The first write refused for want of space (ENOSPC), if any."""

    def __post_init__(self) -> None:
        if self.reserve_bytes:
            self.reserve = Reserve.take(self.folder, self.reserve_bytes)

    def write(self, entries: Sequence[Entry]) -> None:
        """Append the entries; a full file system frees the reserve, and they are written
        into its space (an OSError if even that fails)."""
        if not entries:
            return
        try:
            self._write(entries)
        except OSError as exc:
            if not (disk_full(exc) and self.release_reserve(exc)):
                raise
            self._write(entries)

    def _write(self, entries: Sequence[Entry]) -> None:
        if self.current is None:
            self.current = self._start()
        self.current.write(entries)

    def release_reserve(self, exc: OSError) -> bool:
        """The file system is full (`exc`): free the reserve for the lines still to come;
        False if it was freed before (or there was none)."""
        self.full = self.full or exc
        reserve, self.reserve = self.reserve, None
        if reserve is None:
            return False
        reserve.release()
        return True

    def close(self) -> None:
        """Free the reserve (the writer is done)."""
        if self.reserve is not None:
            self.reserve.release()
            self.reserve = None

    def cut(self) -> JournalSegment | None:
        """End the current segment (a flush is about to publish its lines) and return it."""
        segment, self.current = self.current, None
        return segment

    def _start(self) -> JournalSegment:
        # Locked before it gets its visible name, so no reader ever sees it unlocked.
        name = uuid.uuid4().hex
        tmp = self.folder / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = self.folder / f"{name}{SUFFIX}"
        os.rename(tmp, path)
        return JournalSegment(path, fd)


def held_by_someone(fd: int) -> bool:
    """Take `fd`'s exclusive lock if free; True if a live process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    return False


@contextmanager
def _locked_if_dead(path: Path) -> Iterator[int | None]:
    """The open, locked fd of `path` if its writer is dead and it still exists, else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield None
        return
    try:
        yield None if held_by_someone(fd) or not same_file(fd, path) else fd
    finally:
        os.close(fd)


def _remove_if_dead(path: Path) -> bool:
    """Delete a lock-held file if no live process holds it."""
    with _locked_if_dead(path) as fd:
        if fd is None:
            return False
        path.unlink(missing_ok=True)
        return True


class DeadWriterWatch:
    """Tells whether any journal segment's writer has died, cheaply enough to ask before
    every call: at most every `interval_s`, one non-blocking lock attempt per segment, on
    files kept open between looks; the folder is listed again only when it may have
    changed (`FolderChanges`). A writer's death changes no folder, but its segment's lock
    is free from then on."""

    def __init__(self, folder: Path, interval_s: float = 0.02) -> None:
        self.folder = folder
        self.interval_s = interval_s
        self._changes = FolderChanges(folder)
        self._open: dict[str, int] = {}
        self._next = 0.0

    def _relist(self) -> None:
        self._changes.looking()
        with os.scandir(self.folder) as entries:
            names = {e.name for e in entries if e.name.endswith(SUFFIX)}
        for gone in self._open.keys() - names:
            os.close(self._open.pop(gone))
        for name in names - self._open.keys():
            try:
                self._open[name] = os.open(self.folder / name, os.O_RDONLY)
            except FileNotFoundError:
                continue

    def any_dead(self) -> bool:
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.interval_s
        if self._changes.changed():
            self._relist()
        dead = False
        for fd in self._open.values():
            if not held_by_someone(fd):
                fcntl.flock(fd, fcntl.LOCK_UN)  # leave it to the folder's reader
                dead = True
        return dead

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()


@dataclass
class DeadSegment:
    """What a dead writer journaled: `path` names the file (or the store's objects)."""

    path: Path | str
    replies: list[ReplyRecord]
    attempts: list[AttemptRecord]
    bad_lines: list[int]

    def delete(self) -> None:
        assert isinstance(self.path, Path)
        self.path.unlink(missing_ok=True)


def dead_segments(folder: Path) -> Iterator[DeadSegment]:
    """The segments whose writers died, each read and still locked while the caller uses it.

    A line that does not parse (a torn last line) is named in `bad_lines` and skipped.
    Half-started segments (`.*.tmp`, killed before their first line) and dead writers'
    reserves are deleted.
    """
    for tmp in [*folder.glob(".*.tmp"), *folder.glob(f".*{RESERVE_SUFFIX}")]:
        _remove_if_dead(tmp)
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        with _locked_if_dead(path) as fd:
            if fd is None:
                continue
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = handle.read()
            yield parse(path, data)


def dead_lines(folder: Path) -> Iterator[DeadSegment]:
    """What the segments of dead writers hold, read without changing a file (a reader's
    view; `dead_segments` is the publisher's, which also clears what dead writers left)."""
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        with _locked_if_dead(path) as fd:
            if fd is not None:
                with os.fdopen(os.dup(fd), "rb") as handle:
                    yield parse(path, handle.read())


def parse(path: Path | str, data: bytes) -> DeadSegment:
    segment = DeadSegment(path, [], [], [])
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            entry = json.loads(raw)
            reply = None if entry["reply"] is None else ReplyRecord.model_validate(entry["reply"])
            attempts = [AttemptRecord.model_validate(a) for a in entry["attempts"]]
        except (ValueError, KeyError, TypeError, ValidationError):
            segment.bad_lines.append(number)
            continue
        if reply is not None:
            segment.replies.append(reply)
        segment.attempts.extend(attempts)
    if segment.bad_lines:
        log.warning(
            "journal %s: lines %s do not parse (a write cut short by a crash); skipped",
            path,
            segment.bad_lines,
        )
    return segment
