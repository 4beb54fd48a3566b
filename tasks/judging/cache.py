"""The content-addressed judge-call cache: stored replies and the attempts log.

Replies are stored under their call key (`tasks.judging.callkey`).

Replies and attempts live in immutable parquet files with unique names under
`work.replies` and `work.attempts`; writers never touch each other's files, so any number
of processes may write at once. Readers union the files; a file that fails to read is moved
to `work.quarantine` with a warning and the others are still read. Before reading, they
publish what dead writers left in their journals (`tasks.judging.journal`), so a reply received by
a process that was killed before its flush is still served.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel

from schemas.arrow import arrow_schema, conform, rows_to_table
from schemas.calls import AttemptRecord, ReplyRecord
from tasks.judging.journal import DeadSegment, Entry, ReplyJournal, dead_segments
from tasks.storage import write_parquet_atomic
from tasks.workdir import WorkDir

if TYPE_CHECKING:
    from tasks.judging.store_journal import StoreJournal


class PublishListener(Protocol):
    """Told of every flush (the call claims: `tasks.judging.claims.CallClaims`)."""

    def published(self, path: Path | None, stored: list[str], settled: set[str]) -> None:
        """`path` (None: no replies) now holds the replies of `stored`; the calls of
        `settled` are stored or failed for good in this flush."""


__all__ = [
    "CacheWriter",
    "check_schema",
    "compact",
    "fold_dead_journals",
    "read_attempts",
    "read_replies",
    "recover",
    "stored_keys",
    "write_attempts",
    "write_replies",
]

log = logging.getLogger(__name__)

# --- files ------------------------------------------------------------------------------


def _write(rows: Sequence[BaseModel], model: type[BaseModel], folder: Path) -> Path | None:
    if not rows:
        return None
    path = folder / f"{uuid.uuid4().hex}.parquet"
    write_parquet_atomic(rows_to_table(rows, model), path)
    return path


def write_replies(work: WorkDir, records: Sequence[ReplyRecord]) -> Path | None:
    """Store successful replies in a new immutable file; returns its path (None if empty)."""
    return _write(records, ReplyRecord, work.replies)


def write_attempts(work: WorkDir, records: Sequence[AttemptRecord]) -> Path | None:
    """Append attempts to the log as a new file; returns its path (None if empty)."""
    return _write(records, AttemptRecord, work.attempts)


def _journal_for(work: WorkDir) -> ReplyJournal | StoreJournal:
    """This writer's journal in `work`: a locked local file, or objects in the store."""
    if work.store.remote:
        from tasks.judging.store_journal import StoreJournal

        return StoreJournal(work)
    return ReplyJournal(work.journal)


def _dead_writers(work: WorkDir) -> Iterator[DeadSegment]:
    """What writers that died before publishing left in their journals: locked files no
    process holds, or in a store the journals of writers whose lease ran out."""
    if work.store.remote:
        from tasks.judging.store_journal import dead_store_segments

        yield from dead_store_segments(work)
    else:
        yield from dead_segments(work.journal)


def fold_dead_journals(work: WorkDir) -> int:
    """Publish the journal lines of writers that died before their flush; returns replies
    published. Journals of live writers are left to them."""
    published = 0
    for segment in _dead_writers(work):
        write_replies(work, segment.replies)
        write_attempts(work, segment.attempts)
        segment.delete()
        n = len(segment.replies)
        published += n
        log.info("published %d replies a dead writer left in %s", n, segment.path)
    return published


STALE_TEMP_S = 3600.0
"""Age after which a temporary file in the cache is a killed writer's leftover (a live
writer publishes its file within seconds of creating it)."""


def recover(work: WorkDir) -> int:
    """Clean up after killed writers; returns the replies published from their journals.

    Folds dead writers' journals and deletes their half-written temporary files. Run at the
    start of a judge stage.
    """
    published = fold_dead_journals(work)
    cutoff = time.time() - STALE_TEMP_S
    for folder in (work.replies, work.attempts):
        for tmp in folder.glob(".*.tmp"):
            try:
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
            except FileNotFoundError:
                continue
    return published


def _quarantine(work: WorkDir, path: Path, why: str) -> None:
    target = work.quarantine / f"{path.parent.name}-{path.name}"
    if not work.store.move(path, target):
        return
    log.warning("cache file %s could not be read (%s); moved to %s", path, why, target)


def check_schema(path: Path, model: type[BaseModel]) -> None:
    """Raise ValueError (naming the file) unless the parquet file's footer holds exactly
    the model's columns in types that cast to it; reads the footer only."""
    conform(pq.read_schema(path).empty_table(), model, where=str(path))


def _read_folder(
    work: WorkDir, folder: Path, model: type[BaseModel], columns: list[str] | None
) -> tuple[list[pa.Table], list[Path]]:
    """Read every file of a cache folder, quarantining unreadable ones.

    Retries the listing while files vanish under it: a compaction writes its merged file
    before deleting the small ones, so a fresh listing never misses a row.
    """
    full = arrow_schema(model)
    schema = full if columns is None else pa.schema([full.field(c) for c in columns])
    work.store.refresh(folder, "*.parquet")
    fast = _read_fast(folder, full, columns)
    if fast is not None:
        return fast
    for _ in range(10):
        tables: list[pa.Table] = []
        paths: list[Path] = []
        vanished = False
        for path in sorted(folder.glob("*.parquet")):
            try:
                if columns is None:
                    table = conform(pq.read_table(path), model, where=str(path))
                else:
                    # Only what a full read accepts counts: a reply file remap cannot read
                    # must not make its calls look stored.
                    check_schema(path, model)
                    table = pq.read_table(path, columns=columns).cast(schema)
            except FileNotFoundError:
                vanished = True
                continue
            except (OSError, ValueError, pa.ArrowException) as exc:
                _quarantine(work, path, f"{type(exc).__name__}: {exc}"[:300])
                continue
            tables.append(table)
            paths.append(path)
        if not vanished:
            return tables, paths
    return tables, paths


def _read_fast(
    folder: Path, full: pa.Schema, columns: list[str] | None
) -> tuple[list[pa.Table], list[Path]] | None:
    """All files in one multi-threaded scan; None if any file is odd (then read one by one).

    Every file's own schema must equal the table's: a dataset scan would otherwise fill a
    missing column with nulls instead of failing.
    """
    import pyarrow.dataset as ds

    paths = sorted(folder.glob("*.parquet"))
    if not paths:
        return [], []
    try:
        dataset = ds.dataset([str(p) for p in paths], format="parquet", schema=full)
        if not all(f.physical_schema.equals(full) for f in dataset.get_fragments()):
            return None
        return [dataset.to_table(columns=columns)], paths
    except (OSError, ValueError, pa.ArrowException):
        return None


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def _earliest_per_key(table: pa.Table) -> pa.Table:
    """One row per call_key: the earliest received (duplicates are harmless re-stores)."""
    if table.num_rows == 0:
        return table
    table = table.sort_by([("call_key", "ascending"), ("received_at", "ascending")])
    keys = table.column("call_key").combine_chunks()
    first = pc.not_equal(keys[1:], keys[:-1])
    mask = pa.concat_arrays([pa.array([True]), first])
    return table.filter(mask)


def read_replies(work: WorkDir, call_keys: Iterable[str] | None = None) -> pa.Table:
    """Stored replies (ReplyRecord schema), one row per call_key, optionally only `call_keys`."""
    fold_dead_journals(work)
    tables, _ = _read_folder(work, work.replies, ReplyRecord, None)
    table = _concat(tables, arrow_schema(ReplyRecord))
    if call_keys is not None:
        wanted = pa.array(sorted(set(call_keys)), type=pa.string())
        table = table.filter(pc.is_in(table.column("call_key"), value_set=wanted))
    return _earliest_per_key(table)


def stored_keys(work: WorkDir) -> set[str]:
    """Call keys with a stored reply (reads only the key column)."""
    fold_dead_journals(work)
    tables, _ = _read_folder(work, work.replies, ReplyRecord, ["call_key"])
    keys: set[str] = set()
    for t in tables:
        keys.update(t.column("call_key").to_pylist())
    return keys


def read_attempts(work: WorkDir) -> pa.Table:
    """The whole attempts log (AttemptRecord schema), in no particular order."""
    fold_dead_journals(work)
    tables, _ = _read_folder(work, work.attempts, AttemptRecord, None)
    return _concat(tables, arrow_schema(AttemptRecord))


def compact(work: WorkDir) -> tuple[int, int]:
    """Merge the reply files into one; returns (files merged, rows kept).

    Safe next to writers and readers: the merged file is published before any small file
    is deleted, and a key stored twice is harmless (readers keep the earliest).
    """
    tables, paths = _read_folder(work, work.replies, ReplyRecord, None)
    if len(paths) < 2:
        return 0, sum(t.num_rows for t in tables)
    merged = _earliest_per_key(pa.concat_tables(tables))
    write_parquet_atomic(merged, work.replies / f"{uuid.uuid4().hex}.parquet")
    for path in paths:
        work.store.remove(path)
    return len(paths), merged.num_rows


# --- buffered writer --------------------------------------------------------------------


class CacheWriter:
    """Journals replies and attempts as they arrive and publishes them as parquet in batches.

    Each `add` goes to this writer's journal at once (see `tasks.judging.journal`), so a process
    killed at any moment loses only the calls still in flight. A flush publishes the
    buffered rows as parquet when `max_rows` replies are waiting or the oldest waiting row
    is `max_age_s` old, and at `close()`; then it deletes the journal segment and releases
    the published calls' claims (`tasks.judging.claims.CallClaims`), so another run that waits
    for one of them finds its reply stored. Files are written in a worker thread so sending
    never waits.

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
    ) -> None:
        self.work = work
        self.max_rows = max_rows
        self.max_age_s = max_age_s
        self.claims = claims
        self.journal = _journal_for(work)
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
        self.journal.write(entries)

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
        """Publish everything queued so far (one reply file and one attempts file at most)."""
        async with self._lock:
            self._scheduled = False
            self._journal()
            replies, self._replies = self._replies, []
            attempts, self._attempts = self._attempts, []
            segment = self.journal.cut()
            if not replies and not attempts:
                return
            # Replies first: a reply on disk with no attempt row is harmless; the reverse
            # would show a success in the log that the cache cannot serve.
            path = await asyncio.to_thread(self._write_both, replies, attempts)
            if segment is not None:
                segment.retire()
            if self.claims is not None:
                keys = [r.call_key for r in replies]
                self.claims.published(path, keys, {a.call_key for a in attempts}.union(keys))
            self.last_flush = time.monotonic()

    def _write_both(self, replies: list[ReplyRecord], attempts: list[AttemptRecord]) -> Path | None:
        """Write both files; returns the reply file's path (None if no replies)."""
        path = write_replies(self.work, replies)
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
