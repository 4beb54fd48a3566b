"""The DuckDB warehouse: views over every stage's parquet files and the report queries.

The database file is a rebuildable artifact: `build_warehouse` writes it from scratch from
the `view_*.sql` files in `tasks/sql/`. For a work dir on an object store the views read the
local copy of the store's tables (`refresh_tables` brings it up to date first) and the
database lives in this machine's scratch dir. Report queries are the `report_*.sql` files, run by
`query(work, name, **params)` with parameters bound, never formatted into the SQL.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import BaseModel

from schemas import (
    AttemptRecord,
    CallRecord,
    ComponentRow,
    DesignRow,
    DisclosureRow,
    DispositionRow,
    LabelRecord,
    ManifestRow,
    OutcomeRow,
    PresentationRow,
    ReplayRow,
    ReplyRecord,
    SummaryRow,
    arrow_schema,
)
from schemas.advice import AdviceRow
from tasks.bootstrap import bootstrap_interval
from tasks.errors import InputError
from tasks.runcheck import RUN_TABLES, check_readable, json_damage, skip
from tasks.runfolder import TABLE_FILES, RunFolder, is_run_id
from tasks.tablefiles import TableFile, list_table_files
from tasks.workdir import WorkDir, cannot_write

__all__ = [
    "VIEWS",
    "build_warehouse",
    "check_run_tables",
    "query",
    "refresh_tables",
    "report_names",
    "warehouse_reads",
]


@dataclass(frozen=True)
class View:
    """One stage table: where its parquet files live (a glob under the work dir) and its rows."""

    name: str
    pattern: tuple[str, ...]
    model: type[BaseModel]
    run_from_path: bool


VIEWS: tuple[View, ...] = (
    View("manifest", ("manifests", "*", "manifest.parquet"), ManifestRow, False),
    View("presentations", ("plans", "*", "presentations.parquet"), PresentationRow, False),
    View("replies", ("cache", "replies", "*.parquet"), ReplyRecord, False),
    View("attempts", ("cache", "attempts", "*.parquet"), AttemptRecord, False),
    View("calls", ("runs", "*", TABLE_FILES["calls"]), CallRecord, False),
    View("labels", ("runs", "*", TABLE_FILES["labels"]), LabelRecord, True),
    View("outcomes", ("runs", "*", TABLE_FILES["outcomes"]), OutcomeRow, True),
    View("dispositions", ("runs", "*", TABLE_FILES["dispositions"]), DispositionRow, True),
    View("disclosure", ("runs", "*", TABLE_FILES["disclosure"]), DisclosureRow, True),
    View("replay", ("runs", "*", TABLE_FILES["replay"]), ReplayRow, True),
    View("summary", ("runs", "*", TABLE_FILES["summary"]), SummaryRow, True),
    View("design", ("runs", "*", TABLE_FILES["design"]), DesignRow, True),
    View("components", ("runs", "*", TABLE_FILES["components"]), ComponentRow, True),
    View("advice", ("runs", "*", TABLE_FILES["advice"]), AdviceRow, True),
)

log = logging.getLogger(__name__)

RunScope = frozenset[str] | None
"""The runs a read holds (None: every run, the warehouse)."""

_GLOB_CHARS = re.compile(r"[*?\[]")
_SOURCE = "{{source}}"


def _view_sql(view: View, source: str) -> str:
    """A stage's view: its own file if it has one (replies), else the shared template for
    tables that name their run (`view_stage.sql`) or take it from the path
    (`view_run_table.sql`). The view name is one of ours, never user input."""
    own = resources.files("tasks.sql").joinpath(f"view_{view.name}.sql")
    template = (
        own.name
        if own.is_file()
        else ("view_run_table.sql" if view.run_from_path else "view_stage.sql")
    )
    text = _sql(template.removesuffix(".sql"))
    return text.replace("{{name}}", view.name).replace(_SOURCE, source)


def _sql(name: str) -> str:
    return resources.files("tasks.sql").joinpath(f"{name}.sql").read_text("utf-8")


def report_names() -> list[str]:
    """The report queries available to `query`."""
    folder = resources.files("tasks.sql")
    names = (p.name for p in folder.iterdir() if p.name.endswith(".sql"))
    return sorted(n.removesuffix(".sql") for n in names if n.startswith("report_"))


def _quote(text: str) -> str:
    """A SQL string literal; paths are the one thing placed into SQL text (views take no
    bound parameters), so quotes are doubled and control characters refused."""
    if any(ord(ch) < 32 for ch in text):
        raise InputError(f"path {text!r} holds control characters; cannot use it in a view")
    return "'" + text.replace("'", "''") + "'"


def _foreign(view: View, path: Path) -> bool:
    """A file no command has published, skipped: one under a name starting with a dot (a
    folder being staged, which its publisher renames away at any moment, or an atomic
    write's temporary file), or a run table in a folder whose name is not a run id."""
    if any(part.startswith(".") for part in path.parts[-len(view.pattern) :]):
        return True
    return view.pattern[0] == "runs" and not is_run_id(path.parent.name)


def refresh_tables(work: WorkDir, runs: RunScope = None) -> None:
    """Bring every view's files (or only those of `runs`) into the local copy of an object
    store (each folder listed once; nothing to do on a local disk)."""
    if not work.store.remote:
        return
    if runs is not None:
        for run_id in runs:
            work.fresh("runs", run_id)
        return
    folders: dict[tuple[str, ...], None] = {}
    for view in VIEWS:
        fixed = []
        for part in view.pattern:
            if _GLOB_CHARS.search(part):
                break
            fixed.append(part)
        folders[tuple(fixed)] = None
    for folder in folders:
        work.fresh(*folder)


def _views(runs: RunScope) -> tuple[View, ...]:
    """Every view, or for a read of some runs only the tables of runs."""
    return VIEWS if runs is None else tuple(v for v in VIEWS if v.pattern[0] == "runs")


def _view_files(work: WorkDir, view: View, runs: RunScope) -> list[TableFile]:
    if runs is None:
        return list_table_files(work.root, view.pattern, view.model)
    # the runs' own folders: ("runs", "*", file) with each run id in place of the glob
    found = (list_table_files(work.root, (view.pattern[0], r, *view.pattern[2:]), view.model)
             for r in sorted(runs))  # fmt: skip
    return [f for files in found for f in files]


def _listing(work: WorkDir, runs: RunScope = None) -> dict[View, list[TableFile]]:
    """Every view's files as they are now (or the files of `runs` in their tables), each
    checked (footers only). Every file of a run that cannot be read (`tasks.runcheck`)
    counts as damaged, with one warning naming the run; another damaged file, with a warning
    naming it. Damaged files are left out, and so are the files of foreign folders
    (`_foreign`)."""
    refresh_tables(work, runs)
    listing = {
        view: [f for f in _view_files(work, view, runs) if not _foreign(view, f.path)]
        for view in _views(runs)
    }
    damaged: dict[str, list[str]] = {}
    for view, files in listing.items():
        for f in files:
            if f.problem is None:
                continue
            if view.pattern[0] == "runs" and RUN_TABLES[view.name].results:
                damaged.setdefault(f.path.parent.name, []).append(f"{f.path} ({f.problem})")
            else:
                log.warning("%s is damaged and left out of the warehouse: %s", f.path, f.problem)
    folder = work.root / "runs"
    paths = sorted(folder.iterdir()) if folder.is_dir() else []
    for path in paths if runs is None else [folder / r for r in sorted(runs)]:
        ok = path.is_dir() and is_run_id(path.name)  # a foreign folder is not read at all
        problems = json_damage(RunFolder(work, path.name)) if ok else []
        if problems:
            damaged.setdefault(path.name, []).extend(problems)
    for run_id, problems in damaged.items():
        skip(RunFolder(work, run_id), problems)
    return {
        view: [
            replace(f, problem=f.problem or f"run {f.path.parent.name} cannot be read")
            if view.pattern[0] == "runs" and f.path.parent.name in damaged
            else f
            for f in files
        ]
        for view, files in listing.items()
    }


def _source(files: list[TableFile]) -> str | None:
    """The read_parquet list of a view's readable files; None when it has none."""
    good = [_quote(str(f.path)) for f in files if f.problem is None]
    return f"[{', '.join(good)}]" if good else None


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


def _empty(view: View) -> pa.Table:
    """A typed empty table for a stage with no files yet, so report queries still bind."""
    schema = arrow_schema(view.model)
    if view.run_from_path:
        schema = pa.schema([pa.field("run_id", pa.string()), *schema])
    return schema.empty_table()


def _check_root(work: WorkDir) -> None:
    if _GLOB_CHARS.search(str(work.root)):
        # DuckDB expands glob characters in every parquet path, even a listed file, and has
        # no escape: such a folder would silently read its neighbours' files.
        raise InputError(
            f"work dir {work.root} contains a glob character (*, ? or [); DuckDB would read "
            "other folders' files through it. Use a work dir path without them."
        )


def _create_views(con: duckdb.DuckDBPyConnection, listing: dict[View, list[TableFile]]) -> None:
    """One view per stage table over its readable files; a stage with none becomes an empty
    table of its schema."""
    for view, files in listing.items():
        source = _source(files)
        if source is None:
            con.register("empty_stage", _empty(view))
            con.execute(f'CREATE TABLE "{view.name}" AS SELECT * FROM empty_stage')
            con.unregister("empty_stage")
        else:
            con.execute(_view_sql(view, source))


def build_warehouse(work: WorkDir) -> Path:
    """(Re)build the warehouse from scratch: one view per stage table; returns its path
    (`work.warehouse`: a private one for a work dir this process cannot write).

    It is written beside the old file and renamed into place, so a reader never sees a
    half-built database. A stage with no files yet becomes an empty table of its schema
    (rebuild after the stage has run to see its rows). A damaged file (`tasks.tablefiles`)
    is left out with a warning naming it: one damaged run never hides the others.
    """
    _check_root(work)
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
    listing = _listing(work)
    try:
        con = duckdb.connect(str(tmp))
        try:
            con.execute(_FILES_TABLE)
            signatures = [_signature(f) for files in listing.values() for f in files]
            if signatures:  # one statement: executemany inserts a row at a time (~0.5 ms)
                con.execute(_INSERT_FILES, [list(c) for c in zip(*signatures, strict=True)])
            _create_views(con, listing)
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    return target


def _runs_connection(work: WorkDir, runs: frozenset[str]) -> duckdb.DuckDBPyConnection:
    """An in-memory database with the views of the run tables over the files of `runs`
    only, checked as the warehouse checks them: what a read of these runs needs, without
    listing, checking and binding every run's files (or writing the warehouse)."""
    _check_root(work)
    con = duckdb.connect()
    try:
        _create_views(con, _listing(work, runs))
    except BaseException:
        con.close()
        raise
    return con


GROUP_KEYS = ["judge", "config", "dataset", "design", "policy"]


def _with_bootstrap(
    con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, params: dict[str, Any]
) -> pd.DataFrame:
    pairs = con.execute(_sql("report_score_pairs"), params).df()
    bounds: dict[tuple[Any, ...], tuple[float, float]] = {}
    for key, group in pairs.groupby(GROUP_KEYS, sort=False):
        values = group["expected_score"].to_numpy(dtype=float)
        bounds[tuple(key)] = bootstrap_interval(values, seed_parts=tuple(key))
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
            if _foreign(view, file):
                continue
            try:
                stat = file.stat()
            except FileNotFoundError:
                continue
            now.add((str(file), stat.st_size, stat.st_mtime_ns))
    return now != built


def _fresh(work: WorkDir) -> Path:
    """The warehouse, built first if it is missing or any stage's files changed since."""
    refresh_tables(work)
    path = work.warehouse
    return build_warehouse(work) if not path.is_file() or _stale(work, path) else path


@dataclass
class _Read:
    """One read of the warehouse: its work dir, the runs it holds (None: all), connection,
    and the answers given so far."""

    root: Path
    runs: frozenset[str] | None
    con: duckdb.DuckDBPyConnection
    answers: dict[str, pd.DataFrame]

    def covers(self, work: WorkDir, runs: frozenset[str] | None) -> bool:
        if self.root != work.root:
            return False
        return self.runs is None or (runs is not None and runs <= self.runs)


_reading: ContextVar[_Read | None] = ContextVar("warehouse_reading", default=None)


@contextmanager
def warehouse_reads(work: WorkDir, runs: Iterable[str] | None = None) -> Iterator[None]:
    """Queries inside read the warehouse as checked once on entry, over one connection, and
    the same query with the same parameters is answered once (a report and its artifacts
    ask for the scores twice; their bootstrap is not drawn again). Nested reads the outer
    read holds are the outer read.

    With `runs`, queries inside ask about those runs only (a run's report and summary): they
    read the views of the run tables over those runs' files alone (`_runs_connection`), as
    the warehouse would answer them, and the warehouse is neither checked nor rebuilt."""
    scope = None if runs is None else frozenset(runs)
    outer = _reading.get()
    if outer is not None and outer.covers(work, scope):
        yield
        return
    if scope is None:
        con = duckdb.connect(str(_fresh(work)), read_only=True)
    else:
        con = _runs_connection(work, scope)
    token = _reading.set(_Read(work.root, scope, con, {}))
    try:
        yield
    finally:
        _reading.reset(token)
        con.close()


def query(work: WorkDir, name: str, **params: Any) -> pd.DataFrame:
    """Run the report query `name` (e.g. `report_scores`) with bound parameters, over the
    warehouse as `_fresh` finds it (inside `warehouse_reads` that holds the run it asks
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
    con = duckdb.connect(str(_fresh(work)), read_only=True)
    try:
        return _run_query(con, name, params)
    finally:
        con.close()


def _run_query(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]) -> pd.DataFrame:
    try:
        frame = con.execute(_sql(name), params).df()
    except duckdb.Error as exc:
        raise InputError(f"report query {name} with parameters {params}: {exc}") from exc
    post = _POST.get(name)
    return post(con, frame, params) if post else frame
