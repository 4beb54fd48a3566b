"""The cache writer: replies and attempts journaled as they arrive, published as parquet in
batches, and a full disk met without losing a reply (`CacheWriter`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from schemas.calls import AttemptRecord, ReplyRecord
from tasks.errors import StoreUnreachable
from tasks.judging.cache import new_file_name, write_attempts, write_replies
from tasks.judging.journal import Entry, JournalSegment, ReplyJournal
from tasks.store import provide
from tasks.store.workdir import WorkDir, disk_full

__all__ = ["CacheWriter", "PublishListener"]

log = logging.getLogger(__name__)


def _mirrored_journal(work: WorkDir, reserve_bytes: int) -> ReplyJournal:
    """On an object store: the local journal mirrored by objects in the store."""
    from tasks.judging.store_journal import MirroredJournal, StoreJournal

    mirror = StoreJournal(work)
    try:
        return MirroredJournal(work.journal, reserve_bytes, mirror=mirror)
    except BaseException:
        mirror.close()  # no room for the reserve: no thread or lease left behind
        raise


provide(
    "journal",
    local=lambda work, reserve_bytes: ReplyJournal(work.journal, reserve_bytes),
    objects=_mirrored_journal,
)
"""A writer's journal in a work dir: a locked local file (with its reserve of space), on an
object store mirrored by objects in the store."""


class PublishListener(Protocol):
    """Told of every flush (the call claims: `tasks.judging.claims.CallClaims`)."""

    def publishing(self, name: str) -> None:
        """A reply file of this name is about to be published (its keys come with
        `published`): nothing needs to read it back."""

    def published(self, path: Path | None, stored: list[str], settled: set[str]) -> None:
        """`path` (None: no replies) now holds the replies of `stored`; the calls of
        `settled` are stored or failed for good in this flush."""


class CacheWriter:
    """Journals replies and attempts as they arrive and publishes them as parquet in batches.

    Each `add` goes to this writer's journal at once (see `tasks.judging.journal`), so a process
    killed at any moment loses only the calls still in flight. A flush publishes the
    buffered rows as parquet when `max_rows` replies are waiting or the oldest waiting row
    is `max_age_s` old, and at `close()`; then it deletes the journal segment and releases
    the published calls' claims (`tasks.judging.claims.CallClaims`), so another run that waits
    for one of them finds its reply stored. Files are written in a worker thread so sending
    never waits.

    With `reserve_bytes`, the journal holds that much space (`tasks.judging.journal.Reserve`):
    at the first write refused for want of space, it goes to the journal, `on_full` is told
    (the judge stage stops sending) and nothing is published after: the replies received
    wait in the journal for the next reader, who publishes them once there is space. An
    object store that leaves a publish unanswered for its whole patience
    (`tasks.errors.StoreUnreachable`) is met the same way: the replies wait in this
    machine's journal. From then on the rows not published stay in `unpublished` too, and
    those not even journaled in `unkept`: a writer in a Dask worker hands them back.

        async with CacheWriter(work, claims=claims) as writer:
            writer.add(reply, attempts)
    """

    def __init__(
        self,
        work: WorkDir,
        *,
        max_rows: int = 200,
        max_age_s: float = 1.0,
        claims: PublishListener | None = None,
        reserve_bytes: int = 0,
        on_full: Callable[[Exception], None] | None = None,
    ) -> None:
        self.work = work
        self.max_rows = max_rows
        self.max_age_s = max_age_s
        self.claims = claims
        self.on_full = on_full
        self.full: Exception | None = None
        """The first write refused for want of space, or the store's unanswered publish:
        nothing is published after it."""
        self.unpublished: tuple[list[ReplyRecord], list[AttemptRecord]] = ([], [])
        """The rows not published since `full` (journaled, unless in `unkept` too)."""
        self.unkept: list[Entry] = []
        """The outcomes that could not be journaled even in the reserve's space."""
        self.published: set[str] = set()
        """The call keys whose replies this writer published."""
        self._kept: list[JournalSegment] = []
        self.journal: ReplyJournal = work.store.made("journal", work, reserve_bytes)
        self._unjournaled: list[Entry] = []
        self._replies: list[ReplyRecord] = []
        self._attempts: list[AttemptRecord] = []
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self._scheduled = False
        self.files_written = 0
        self.last_flush = time.monotonic()

    async def __aenter__(self) -> CacheWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def add(self, reply: ReplyRecord | None, attempts: Sequence[AttemptRecord]) -> None:
        """Queue one call's outcome; journals it within this turn of the event loop, and
        schedules a flush when one is due."""
        if reply is None and not attempts:
            return
        if not self._unjournaled:
            # Outcomes that arrive in the same turn of the loop share one write.
            asyncio.get_running_loop().call_soon(self._journal)
        self._unjournaled.append((reply, attempts))
        if reply is not None:
            self._replies.append(reply)
        self._attempts.extend(attempts)
        if len(self._replies) >= self.max_rows or len(self._attempts) >= 4 * self.max_rows:
            self._schedule()
        elif self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.max_age_s, self._schedule)

    def _journal(self) -> None:
        entries, self._unjournaled = self._unjournaled, []
        try:
            self.journal.write(entries)
        except OSError as exc:
            if not disk_full(exc):
                raise
            self.unkept.extend(entries)
            if self.on_full is None:  # else the caller says it, once
                log.warning(
                    "%d replies received could not be kept (%s); they are sent again",
                    sum(1 for reply, _ in entries if reply is not None),
                    exc,
                )
        if self.journal.full is not None:
            self.filled(self.journal.full)

    @property
    def lost(self) -> int:
        """Replies that could not be journaled even in the reserve's space."""
        return sum(1 for reply, _ in self.unkept if reply is not None)

    def filled(self, exc: Exception) -> None:
        """The file system is full (or the store stopped answering), found here or told by
        the caller: the reserve goes to the journal, the caller is told once (the judge
        stage stops sending), and nothing is published any more."""
        if isinstance(exc, OSError):
            self.journal.release_reserve(exc)
        else:
            self.work.store.went_away(exc)
        if self.full is None:
            self.full = exc
            if self.on_full is not None:
                self.on_full(exc)

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._scheduled:
            return  # the flush already queued takes everything buffered when it runs
        self._scheduled = True
        task = asyncio.get_running_loop().create_task(self.flush())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Publish everything queued so far (one reply file and one attempts file at most).
        Once the file system is full nothing is published: the lines stay in the journal."""
        async with self._lock:
            self._scheduled = False
            self._journal()
            replies, self._replies = self._replies, []
            attempts, self._attempts = self._attempts, []
            if self.full is not None:
                self._keep(replies, attempts)
                return
            segment = self.journal.cut()
            if not replies and not attempts:
                return
            name = new_file_name()
            if replies and self.claims is not None:
                self.claims.publishing(name)
            try:
                # Replies first: a reply on disk with no attempt row is harmless; the
                # reverse would show a success in the log that the cache cannot serve.
                path = await asyncio.to_thread(self._write_both, replies, attempts, name)
            except (OSError, StoreUnreachable) as exc:
                if not (disk_full(exc) or isinstance(exc, StoreUnreachable)):
                    raise
                self.filled(exc)
                self._keep(replies, attempts)
                if segment is not None:
                    self._kept.append(segment)  # for the next reader to publish
                return
            if segment is not None:
                segment.retire()
            keys = [r.call_key for r in replies]
            self.published.update(keys)
            if self.claims is not None:
                self.claims.published(path, keys, {a.call_key for a in attempts}.union(keys))
            self.last_flush = time.monotonic()

    def _keep(self, replies: list[ReplyRecord], attempts: list[AttemptRecord]) -> None:
        self.unpublished[0].extend(replies)
        self.unpublished[1].extend(attempts)

    def _write_both(
        self, replies: list[ReplyRecord], attempts: list[AttemptRecord], name: str
    ) -> Path | None:
        """Write both files, the replies' as `name`; returns the reply file's path (None if
        no replies)."""
        path = write_replies(self.work, replies, name)
        if path is not None:
            self.files_written += 1
        if write_attempts(self.work, attempts) is not None:
            self.files_written += 1
        return path

    async def close(self) -> None:
        """Flush what is left and wait for scheduled flushes."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        try:
            if self._pending:
                await asyncio.gather(*list(self._pending))
            await self.flush()
        finally:
            self.journal.close()
            segment = self.journal.cut()
            left = [segment] if segment is not None else []
            for kept in [*self._kept, *left]:
                kept.release()  # unpublished (the disk filled up): for the next reader
