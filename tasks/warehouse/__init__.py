"""The DuckDB warehouse: views over every stage's parquet files and the report queries.

The database file is a rebuildable artifact: `build_warehouse` writes it from scratch from
the `view_*.sql` files in `tasks/sql/` (the views and their files: `tasks.warehouse.views`);
a read of some runs holds the same views over those runs' files in memory. For a work dir
on an object store the views read the local copy of the store's tables (`refresh_tables`
brings it up to date first) and the database lives in this machine's scratch dir. Report
queries are the `report_*.sql` files, run by `query(work, name, **params)` with parameters
bound, never formatted into the SQL.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, cast

import duckdb
import numpy as np
import pandas as pd

from tasks.bootstrap import bootstrap_interval
from tasks.errors import InputError
from tasks.runs.check import check_readable
from tasks.runs.folder import RunFolder
from tasks.store.tablefiles import TableFile
from tasks.store.workdir import WorkDir, cannot_write
from tasks.warehouse.views import (
    VIEWS,
    View,
    check_root,
    create_views,
    foreign,
    listing,
    refresh_tables,
    sql_text,
)

__all__ = [
    "VIEWS",
    "build_warehouse",
    "check_run_tables",
    "query",
    "refresh_tables",
    "report_names",
    "warehouse_reads",
]


def report_names() -> list[str]:
    """The report queries available to `query`."""
    folder = resources.files("tasks.sql")
    names = (p.name for p in folder.iterdir() if p.name.endswith(".sql"))
    return sorted(n.removesuffix(".sql") for n in names if n.startswith("report_"))


def check_run_tables(work: WorkDir, run_id: str) -> None:
    """Raise an InputError if a run has no outcomes yet (it was judged only), and an
    IntegrityError naming every damaged file of a run and the command that rewrites it (the
    warehouse leaves such files out, so the run's figures would be silently incomplete)."""
    outcomes = RunFolder(work, run_id).outcomes
    if not outcomes.exists():
        raise InputError(
            f"run {run_id!r} has no outcomes yet ({outcomes} does not exist): it was judged "
            f"only. `judgeline remap {run_id}` makes them from its stored replies."
        )
    check_readable(RunFolder(work, run_id))


def build_warehouse(work: WorkDir) -> Path:
    """(Re)build the warehouse from scratch: one view per stage table; returns its path
    (`work.warehouse`: a private one for a work dir this process cannot write).

    It is written beside the old file and renamed into place, so a reader never sees a
    half-built database. A stage with no files yet becomes an empty table of its schema
    (rebuild after the stage has run to see its rows). A damaged file (`tasks.store.tablefiles`)
    is left out with a warning naming it: one damaged run never hides the others.
    """
    check_root(work)
    target = work.warehouse
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".warehouse.", suffix=".duckdb", dir=target.parent)
    except OSError as exc:
        if not cannot_write(exc):
            raise
        target = work.private_warehouse()
        fd, name = tempfile.mkstemp(prefix=".warehouse.", suffix=".duckdb", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    tmp.unlink()  # duckdb refuses to open an empty non-database file
    files_of = listing(work)
    try:
        con = duckdb.connect(str(tmp))
        try:
            con.execute(_FILES_TABLE)
            signatures = [_signature(f) for files in files_of.values() for f in files]
            if signatures:  # one statement: executemany inserts a row at a time (~0.5 ms)
                con.execute(_INSERT_FILES, [list(c) for c in zip(*signatures, strict=True)])
            create_views(con, files_of)
        finally:
            con.close()
        os.replace(tmp, target)
    except duckdb.IOException as exc:
        if "No space left" not in str(exc):
            raise
        # As every other write a full disk refuses: an OSError naming the file.
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target)) from exc
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    return target


def _views_connection(files_of: dict[View, list[TableFile]]) -> duckdb.DuckDBPyConnection:
    """An in-memory database with the views of the run tables over these files only: what a
    read of some runs needs, without listing, checking and binding every run's files (or
    writing the warehouse)."""
    con = duckdb.connect()
    try:
        create_views(con, files_of)
    except BaseException:
        con.close()
        raise
    return con


GROUP_KEYS = ["judge", "config", "dataset", "design", "policy"]


def _with_bootstrap(
    con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, params: dict[str, Any]
) -> pd.DataFrame:
    pairs = con.execute(sql_text("report_score_pairs"), params).df()
    scores = pairs["expected_score"].to_numpy(dtype=float)
    groups = cast(dict[tuple[Any, ...], np.ndarray], pairs.groupby(GROUP_KEYS).indices)
    bounds = {
        tuple(key): bootstrap_interval(scores[rows], seed_parts=tuple(key))
        for key, rows in groups.items()  # each group's rows in the query's order
    }
    keys = list(frame[GROUP_KEYS].itertuples(index=False, name=None))
    frame = frame.copy()
    frame["ci_low"] = [bounds.get(k, (np.nan, np.nan))[0] for k in keys]
    frame["ci_high"] = [bounds.get(k, (np.nan, np.nan))[1] for k in keys]
    # No score (no valid outcome), no interval around it.
    frame.loc[frame["score"].isna(), ["ci_low", "ci_high"]] = np.nan
    return frame


_POST: dict[
    str, Callable[[duckdb.DuckDBPyConnection, pd.DataFrame, dict[str, Any]], pd.DataFrame]
] = {
    "report_scores": _with_bootstrap,
}


_FILES_TABLE = "CREATE TABLE warehouse_files (path VARCHAR, size BIGINT, mtime_ns BIGINT)"
"""The files every view was built over (readable or not), to tell when it is stale."""
_INSERT_FILES = "INSERT INTO warehouse_files SELECT unnest($1), unnest($2), unnest($3)"


def _signature(f: TableFile) -> tuple[str, int, int]:
    return (str(f.path), f.size, f.mtime_ns)


def _stale(work: WorkDir, path: Path) -> bool:
    """True if any stage's files were added, removed or rewritten since `path` was built."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        built = set(con.execute("SELECT * FROM warehouse_files").fetchall())
    except duckdb.Error:
        return True  # built before the warehouse listed its files
    finally:
        con.close()
    now = set()
    for view in VIEWS:
        for file in sorted(work.root.glob("/".join(view.pattern))):
            if foreign(view, file):
                continue
            try:
                stat = file.stat()
            except FileNotFoundError:
                continue
            now.add((str(file), stat.st_size, stat.st_mtime_ns))
    return now != built


def _every_run(work: WorkDir) -> duckdb.DuckDBPyConnection:
    """A connection to every run's tables: the warehouse file if it is current, else the same
    views in memory (a read writes nothing: the file is rebuilt by `build_warehouse`)."""
    refresh_tables(work)
    path = work.warehouse
    if path.is_file() and not _stale(work, path):
        return duckdb.connect(str(path), read_only=True)
    return _views_connection(listing(work))


@dataclass
class _Read:
    """One read of the warehouse: its work dir, the runs it holds (None: all), the answers
    given so far, and its connection, opened at the first query that needs it."""

    root: Path
    runs: frozenset[str] | None
    answers: dict[str, pd.DataFrame]
    opener: Callable[[], duckdb.DuckDBPyConnection]
    opened: duckdb.DuckDBPyConnection | None = None

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self.opened is None:
            self.opened = self.opener()
        return self.opened

    def covers(self, work: WorkDir, runs: frozenset[str] | None) -> bool:
        if self.root != work.root:
            return False
        return self.runs is None or (runs is not None and runs <= self.runs)


_KEPT: dict[tuple[Path, frozenset[str]], tuple[list[tuple[str, int, int]], dict[str, Any]]] = {}
"""The answers of the last read of some runs, with the files it read: the next read of the
same runs gives them again while those files are unchanged (a run's summary after its
report asks what the report asked)."""


_reading: ContextVar[_Read | None] = ContextVar("warehouse_reading", default=None)


@contextmanager
def warehouse_reads(work: WorkDir, runs: Iterable[str] | None = None) -> Iterator[None]:
    """Queries inside read the warehouse as checked once on entry, over one connection, and
    the same query with the same parameters is answered once (a report and its artifacts
    ask for the scores twice; their bootstrap is not drawn again). Nested reads the outer
    read holds are the outer read.

    With `runs`, queries inside ask about those runs only (a run's report and summary): they
    read the views of the run tables over those runs' files alone (`_views_connection`), as
    the warehouse would answer them, and the warehouse is neither checked nor rebuilt. The
    answers of the last such read are given again to the next read of the same runs while
    their files are unchanged (`_KEPT`); a connection is opened only for a query that is
    not answered so."""
    scope = None if runs is None else frozenset(runs)
    outer = _reading.get()
    if outer is not None and outer.covers(work, scope):
        yield
        return
    if scope is None:
        check_root(work)
        read = _Read(work.root, None, {}, lambda: _every_run(work))
    else:
        check_root(work)
        files_of = listing(work, scope)
        files = sorted(_signature(f) for found in files_of.values() for f in found)
        signed, kept = _KEPT.get((work.root, scope), (None, {}))
        read = _Read(work.root, scope, dict(kept) if signed == files else {},
                     lambda: _views_connection(files_of))  # fmt: skip
    token = _reading.set(read)
    try:
        yield
    finally:
        _reading.reset(token)
        if read.opened is not None:
            read.opened.close()
        if scope is not None:
            _KEPT.clear()
            _KEPT[(work.root, scope)] = (files, read.answers)


def query(work: WorkDir, name: str, **params: Any) -> pd.DataFrame:
    """Run the report query `name` (e.g. `report_scores`) with bound parameters, over the
    warehouse as `_every_run` finds it (inside `warehouse_reads` that holds the run it asks
    about, or every run: as read there)."""
    if name not in report_names():
        raise InputError(f"no report query {name!r}; known: {', '.join(report_names())}")
    read = _reading.get()
    asked = None if params.get("run_id") is None else frozenset([str(params["run_id"])])
    if read is not None and read.covers(work, asked):  # a read of some runs: about those
        key = json.dumps([name, params], sort_keys=True, default=str)
        if key not in read.answers:
            read.answers[key] = _run_query(read.con, name, params)
        return read.answers[key].copy()
    check_root(work)
    con = _every_run(work)
    try:
        return _run_query(con, name, params)
    finally:
        con.close()


def _run_query(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]) -> pd.DataFrame:
    try:
        frame = con.execute(sql_text(name), params).df()
    except duckdb.Error as exc:
        raise InputError(f"report query {name} with parameters {params}: {exc}") from exc
    post = _POST.get(name)
    return post(con, frame, params) if post else frame
