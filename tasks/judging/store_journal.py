"""The reply journal on an object store: what a judge process received and has not yet
published as parquet, as small objects under `cache/journal/<writer>/`.

The local journal (`tasks.judging.journal`) appends each reply to a locked file the moment it
arrives. A store has neither appends nor locks, so a thread of the writer puts the lines
received since its last put as one new object, and at once again when more arrived
meanwhile: a process killed at any moment loses the replies received during its last put (a
few hundredths of a second), like the calls still in flight. Once the parquet files holding a
segment's lines are published, the segment's objects are deleted.

The same lines also go to this machine's own journal (`MirroredJournal`, a local journal
file in the scratch dir's copy of `cache/journal/`), which is what keeps them through an
outage of the store: the store's journal cannot be written then, and if the store stays away
for the whole patience the judge stage stops with the lines kept there; the next judge stage
on this machine publishes them (`tasks.judging.cache.fold_dead_journals`).

A writer's lease (`tasks.store.leases`) says whether it lives. `dead_store_segments` yields
the journals of writers whose lease ran out; `tasks.judging.cache.fold_dead_journals`
publishes their lines as parquet and deletes them. Two readers may fold the same journal at
once: its replies are then stored twice, which is harmless (readers keep one row per key).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tasks.errors import StoreUnreachable
from tasks.judging.journal import (
    DeadSegment,
    Entry,
    JournalSegment,
    ReplyJournal,
    encode,
    parse,
)
from tasks.store.leases import writer_lease
from tasks.store.objects import ObjectStore
from tasks.store.workdir import WorkDir

__all__ = ["JOURNAL_PREFIX", "MirroredJournal", "StoreJournal", "dead_store_segments"]

log = logging.getLogger(__name__)

JOURNAL_PREFIX = "cache/journal/"


@dataclass
class StoreSegment:
    """The lines one writer journaled between two cuts."""

    journal: StoreJournal
    number: int

    def retire(self) -> None:
        """Delete the segment's objects (their lines are published), after its last put."""
        self.journal._retire(self.number)


@dataclass
class MirroredSegment(JournalSegment):
    """A segment of this machine's journal file and its lines' objects in the store."""

    mirror: StoreSegment | None = None

    def retire(self) -> None:
        super().retire()
        if self.mirror is not None:
            self.mirror.retire()


@dataclass
class MirroredJournal(ReplyJournal):
    """This writer's journal on a store: a local journal file (with its reserve of space)
    and the store's journal objects, each line written to both."""

    seen_by_every_process = False  # this machine's file is no other machine's

    mirror: StoreJournal | None = None

    def write(self, entries: Sequence[Entry]) -> None:
        if self.mirror is not None:
            self.mirror.write(entries)  # queued for its thread: never fails here
        super().write(entries)

    def cut(self) -> MirroredSegment | None:
        local = super().cut()
        remote = self.mirror.cut() if self.mirror is not None else None
        if local is None:
            return None
        return MirroredSegment(local.path, local.fd, local.size, remote)

    def close(self) -> None:
        super().close()
        if self.mirror is not None:
            self.mirror.close()


class StoreJournal:
    """This writer's journal in a store: lines are put by a thread, segment by segment."""

    def __init__(self, work: WorkDir) -> None:
        assert isinstance(work.store, ObjectStore)
        self.store = work.store
        self.lease = writer_lease(self.store)
        self.lease.hold()
        self.prefix = f"{JOURNAL_PREFIX}{self.lease.id}/"
        self._segment = 0
        self._lines_in_segment = False
        self._count = 0
        self._queue: list[tuple[int, bytes]] = []
        self._retired: list[int] = []
        self._written: dict[int, list[str]] = defaultdict(list)
        self._wake = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="judgeline-journal", daemon=True)
        self._thread.start()

    def write(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        data = encode(entries)
        with self._wake:
            self._queue.append((self._segment, data))
            self._lines_in_segment = True
            self._wake.notify()

    def cut(self) -> StoreSegment | None:
        """End the current segment (a flush is about to publish its lines) and return it."""
        with self._wake:
            if not self._lines_in_segment:
                return None
            segment = StoreSegment(self, self._segment)
            self._segment += 1
            self._lines_in_segment = False
        return segment

    def _retire(self, number: int) -> None:
        with self._wake:
            self._retired.append(number)
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not (self._queue or self._retired or self._closing):
                    self._wake.wait()
                queued, self._queue = self._queue, []
                retired, self._retired = self._retired, []
                closing = self._closing
            # Puts first: a segment is retired only after every line of it was queued.
            by_segment: dict[int, list[bytes]] = defaultdict(list)
            for number, data in queued:
                by_segment[number].append(data)
            for number, parts in sorted(by_segment.items()):
                self._put(number, b"".join(parts))
            for number in retired:
                self.store.delete(self._written.pop(number, []))
            if closing and not queued and not retired:
                return

    def _put(self, number: int, data: bytes) -> None:
        self._count += 1
        key = f"{self.prefix}{number:08d}-{self._count:08d}.jsonl"
        try:
            self.store.replace(key, data)
        except Exception as exc:  # noqa: BLE001 - the lines are still published by the flush
            # A store that does not answer stops the stage, which says so once; meanwhile
            # the lines are in this machine's journal.
            say = log.info if isinstance(exc, StoreUnreachable) else log.warning
            say("journal %s could not be written to %s: %s", key, self.store.url, exc)
            return
        self._written[number].append(key)

    def close(self) -> None:
        """Wait until every line is put and every retired segment deleted."""
        with self._wake:
            if self._closing:
                return
            self._closing = True
            self._wake.notify()
        self._thread.join()
        self.lease.let_go()


def dead_store_segments(work: WorkDir) -> Iterator[DeadSegment]:
    """The journals of writers whose lease ran out, one segment per writer."""
    assert isinstance(work.store, ObjectStore)
    store = work.store
    lease = writer_lease(store)
    by_writer: dict[str, list[str]] = defaultdict(list)
    for meta in store.list_objects(JOURNAL_PREFIX):
        parts = meta["path"][len(JOURNAL_PREFIX) :].split("/")
        if len(parts) == 2:
            by_writer[parts[0]].append(meta["path"])
    for writer, keys in sorted(by_writer.items()):
        if lease.alive(writer):
            continue
        found = [store.read(key) for key in sorted(keys)]
        data = b"".join(f.data for f in found if f is not None)
        segment = parse(f"{store.url}/{JOURNAL_PREFIX}{writer}/", data)
        yield _StoreDeadSegment(segment, store, sorted(keys))


class _StoreDeadSegment(DeadSegment):
    def __init__(self, segment: DeadSegment, store: ObjectStore, keys: list[str]) -> None:
        super().__init__(segment.path, segment.replies, segment.attempts, segment.bad_lines)
        self._store = store
        self._keys = keys

    def delete(self) -> None:
        self._store.delete(self._keys)
