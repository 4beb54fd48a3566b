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

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel

from schemas.arrow import arrow_schema, conform, rows_to_table
from schemas.calls import AttemptRecord, ReplyRecord
from tasks.judging.journal import SUFFIX, DeadSegment, dead_lines, dead_segments, parse
from tasks.storage import read_parquet, write_parquet_atomic
from tasks.store import provide
from tasks.store.workdir import WorkDir, cannot_write

__all__ = [
    "check_schema",
    "compact",
    "fold_dead_journals",
    "kept_keys",
    "read_attempts",
    "read_replies",
    "recover",
    "stored_keys",
    "write_attempts",
    "write_replies",
]

log = logging.getLogger(__name__)

# --- files ------------------------------------------------------------------------------


def new_file_name() -> str:
    """A fresh name for a reply or attempts file."""
    return f"{uuid.uuid4().hex}.parquet"


def _write(
    rows: Sequence[BaseModel], model: type[BaseModel], folder: Path, name: str | None = None
) -> Path | None:
    if not rows:
        return None
    path = folder / (name or new_file_name())
    write_parquet_atomic(rows_to_table(rows, model), path)
    return path


def write_replies(
    work: WorkDir, records: Sequence[ReplyRecord], name: str | None = None
) -> Path | None:
    """Store successful replies in a new immutable file (`name`: one of `new_file_name`);
    returns its path (None if empty)."""
    return _write(records, ReplyRecord, work.replies, name)


def write_attempts(work: WorkDir, records: Sequence[AttemptRecord]) -> Path | None:
    """Append attempts to the log as a new file; returns its path (None if empty)."""
    return _write(records, AttemptRecord, work.attempts)


def _dead_writers(work: WorkDir) -> Iterator[DeadSegment]:
    """What writers that died before publishing left in their journals: locked files no
    process holds, and in a store the journals of writers whose lease ran out (this
    machine's own journal files first: they hold what an outage of the store kept from it)."""
    yield from dead_segments(work.journal)
    yield from work.store.made("dead journals", work)


def _dead_store_segments(work: WorkDir) -> Iterator[DeadSegment]:
    from tasks.judging.store_journal import dead_store_segments

    yield from dead_store_segments(work)


provide("dead journals", local=lambda work: iter(()), objects=_dead_store_segments)


def fold_dead_journals(work: WorkDir) -> int:
    """Publish the journal lines of writers that died before their flush; returns replies
    published. Journals of live writers are left to them."""
    published = 0
    for segment in _dead_writers(work):
        try:
            write_replies(work, segment.replies)
            write_attempts(work, segment.attempts)
        except OSError as exc:
            if not cannot_write(exc):
                raise
            # A reader of a work dir it may not write: the lines wait for a writer.
            log.warning(
                "journal %s not published (%s); its replies are not read", segment.path, exc
            )
            continue
        segment.delete()
        n = len(segment.replies)
        published += n
        log.info("published %d replies a dead writer left in %s", n, segment.path)
    return published


def kept_keys(work: WorkDir, keys: Iterable[str], *, store_answers: bool = True) -> set[str]:
    """Of `keys`, those whose reply is stored or waits in a journal this machine reads, found
    without writing anything: what a judge stage that a full disk or an absent store stopped
    kept, as the next run finds it (which publishes the journals first). Unless the store
    `store_answers`, only the files this machine has are read."""
    wanted = set(keys)
    found: set[str] = set()
    if store_answers:
        work.store.refresh(work.replies, "*.parquet")
    for path in sorted(work.replies.glob("*.parquet")):
        try:
            found.update(read_parquet(path, ["call_key"]).column("call_key").to_pylist())
        except (OSError, ValueError, pa.ArrowException):
            continue  # the cache's readers set it aside; its calls count as not stored
    for path in sorted(work.journal.glob(f"*{SUFFIX}")):
        try:
            found.update(r.call_key for r in parse(path, path.read_bytes()).replies)
        except FileNotFoundError:
            continue  # published meanwhile: its replies are in the files read above
    return wanted & found


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
    try:
        moved = work.store.move(path, target)
    except OSError as exc:
        if not cannot_write(exc):
            raise
        moved = False
    if not moved:
        if path.exists():  # this process may only read the work dir: no quarantine folder
            log.warning(
                "cache file %s could not be read (%s); left in place: it cannot be moved to %s",
                path,
                why,
                work.quarantine,
            )
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
                # Only what a full read accepts counts: a reply file remap cannot read, or
                # a row without its text, must not make its calls look stored.
                if columns is None:
                    table = conform(
                        _complete(pq.read_table(path), full, path), model, where=str(path)
                    )
                else:
                    check_schema(path, model)
                    table = _read_complete(path, columns, full).cast(schema)
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


def _complete(table: pa.Table, full: pa.Schema, path: Path) -> pa.Table:
    """The rows of a file holding every value its model requires (a column not null in
    `full` may be nullable in a file another tool wrote); the others are left out, with a
    warning: their calls are not stored, and are sent again."""
    required = [f.name for f in full if not f.nullable and f.name in table.column_names]
    holes = [table.column(n).is_valid() for n in required if table.column(n).null_count]
    if not holes:
        return table
    keep = holes[0]
    for more in holes[1:]:
        keep = pc.and_(keep, more)
    kept = table.filter(keep)
    log.warning(
        "cache file %s: %d rows lack a required value (e.g. raw_reply is null) and are left "
        "out; their calls count as not stored",
        path,
        table.num_rows - kept.num_rows,
    )
    return kept


def _read_complete(path: Path, columns: list[str], full: pa.Schema) -> pa.Table:
    """`columns` of a file's complete rows (`_complete`): reads the required columns the
    file could hold nulls in as well, only for such a file."""
    fields = pq.read_schema(path)
    nullable = [
        f.name
        for f in full
        if not f.nullable and f.name in fields.names and fields.field(f.name).nullable
    ]
    wanted = list(dict.fromkeys([*columns, *nullable]))
    return _complete(pq.read_table(path, columns=wanted), full, path).select(columns)


def _read_fast(
    folder: Path, full: pa.Schema, columns: list[str] | None
) -> tuple[list[pa.Table], list[Path]] | None:
    """All files at once, on a thread each (parquet decoding releases the GIL); None if any
    file is odd (then they are read one by one, each checked).

    Every file's own schema must equal the table's: a missing column must fail, not read
    as nulls. Faster than a `pyarrow.dataset` scan of the same files, small or many.
    """
    paths = sorted(folder.glob("*.parquet"))
    if not paths:
        return [], []

    def read(path: Path) -> pa.Table | None:
        with pq.ParquetFile(path) as file:
            return file.read(columns=columns) if file.schema_arrow.equals(full) else None

    try:
        if len(paths) == 1:
            tables = [read(paths[0])]
        else:
            with ThreadPoolExecutor(min(len(paths), pa.cpu_count())) as pool:
                tables = list(pool.map(read, paths))
    except (OSError, ValueError, pa.ArrowException):
        return None
    if any(table is None for table in tables):
        return None
    fields = full if columns is None else [full.field(c) for c in columns]
    return [pa.concat_tables(tables).cast(pa.schema(fields, metadata=full.metadata))], paths


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


def _journaled(work: WorkDir, model: type[BaseModel]) -> list[pa.Table]:
    """The replies (or attempts) dead writers left in this machine's journals, read in memory:
    a read sees them and writes nothing (the next judge stage publishes them: `recover`)."""
    rows: list[BaseModel] = []
    for segment in dead_lines(work.journal):
        rows.extend(segment.replies if model is ReplyRecord else segment.attempts)
    return [rows_to_table(rows, model)] if rows else []


def read_replies(work: WorkDir, call_keys: Iterable[str] | None = None) -> pa.Table:
    """Stored replies (ReplyRecord schema), one row per call_key, optionally only `call_keys`
    (those in dead writers' journals included)."""
    tables, _ = _read_folder(work, work.replies, ReplyRecord, None)
    table = _concat([*tables, *_journaled(work, ReplyRecord)], arrow_schema(ReplyRecord))
    if call_keys is not None:
        wanted = pa.array(sorted(set(call_keys)), type=pa.string())
        table = table.filter(pc.is_in(table.column("call_key"), value_set=wanted))
    return _earliest_per_key(table)


def stored_keys(work: WorkDir) -> set[str]:
    """Call keys with a stored reply (reads only the key column; those in dead writers'
    journals included)."""
    tables, _ = _read_folder(work, work.replies, ReplyRecord, ["call_key"])
    keys: set[str] = set()
    for t in [*tables, *_journaled(work, ReplyRecord)]:
        keys.update(t.column("call_key").to_pylist())
    return keys


def read_attempts(work: WorkDir) -> pa.Table:
    """The whole attempts log (AttemptRecord schema), in no particular order (with those in
    dead writers' journals)."""
    tables, _ = _read_folder(work, work.attempts, AttemptRecord, None)
    return _concat([*tables, *_journaled(work, AttemptRecord)], arrow_schema(AttemptRecord))


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
