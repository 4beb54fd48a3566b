"""The DuckDB warehouse: views over every stage's parquet files and the report queries.

The database file is a rebuildable artifact: `build_warehouse` writes it from scratch from
the `view_*.sql` files in `tasks/sql/`. For a work dir on an object store the views read the
local copy of the store's tables (`refresh_tables` brings it up to date first) and the
database lives in this machine's scratch dir. Report queries are the `report_*.sql` files, run by
`query(work, name, **params)` with parameters bound, never formatted into the SQL.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Callable
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
from tasks.errors import InputError
from tasks.hashing import digest, sha256_bytes
from tasks.runcheck import RUN_TABLES, check_readable, json_damage, skip
from tasks.runfolder import TABLE_FILES, RunFolder
from tasks.tablefiles import TableFile, list_table_files
from tasks.workdir import WorkDir

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "VIEWS",
    "bootstrap_interval",
    "build_warehouse",
    "check_run_tables",
    "query",
    "refresh_tables",
    "report_names",
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

_GLOB_CHARS = re.compile(r"[*?\[]")
_SOURCE = "{{source}}"

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240917
"""Fixed so a report shows the same interval every time it is rebuilt."""


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


def refresh_tables(work: WorkDir) -> None:
    """Bring every view's files into the local copy of an object store (each folder listed
    once; nothing to do on a local disk)."""
    if not work.store.remote:
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


def _listing(work: WorkDir) -> dict[View, list[TableFile]]:
    """Every view's files as they are now, each checked (footers only). Every file of a run
    that cannot be read (`tasks.runcheck`) counts as damaged, with one warning naming the
    run; another damaged file, with a warning naming it. Damaged files are left out."""
    refresh_tables(work)
    listing = {view: list_table_files(work.root, view.pattern, view.model) for view in VIEWS}
    damaged: dict[str, list[str]] = {}
    for view, files in listing.items():
        for f in files:
            if f.problem is None:
                continue
            if view.pattern[0] == "runs" and RUN_TABLES[view.name].results:
                damaged.setdefault(f.path.parent.name, []).append(f"{f.path} ({f.problem})")
            else:
                log.warning("%s is damaged and left out of the warehouse: %s", f.path, f.problem)
    runs = work.root / "runs"
    for path in sorted(runs.iterdir()) if runs.is_dir() else []:
        problems = json_damage(RunFolder(work, path.name)) if path.is_dir() else []
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


def build_warehouse(work: WorkDir) -> Path:
    """(Re)build `work.warehouse` from scratch: one view per stage table; returns its path.

    It is written beside the old file and renamed into place, so a reader never sees a
    half-built database. A stage with no files yet becomes an empty table of its schema
    (rebuild after the stage has run to see its rows). A damaged file (`tasks.tablefiles`)
    is left out with a warning naming it: one damaged run never hides the others.
    """
    if _GLOB_CHARS.search(str(work.root)):
        # DuckDB expands glob characters in every parquet path, even a listed file, and has
        # no escape: such a folder would silently read its neighbours' files.
        raise InputError(
            f"work dir {work.root} contains a glob character (*, ? or [); DuckDB would read "
            "other folders' files through it. Use a work dir path without them."
        )
    target = work.warehouse
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
            if signatures:
                con.executemany("INSERT INTO warehouse_files VALUES (?, ?, ?)", signatures)
            for view, files in listing.items():
                source = _source(files)
                if source is None:
                    con.register("empty_stage", _empty(view))
                    con.execute(f'CREATE TABLE "{view.name}" AS SELECT * FROM empty_stage')
                    con.unregister("empty_stage")
                else:
                    con.execute(_view_sql(view, source))
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    return target


def bootstrap_interval(
    values: np.ndarray, *, seed_parts: tuple[Any, ...], resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of `values`, resampling pairs.

    The generator is seeded from BOOTSTRAP_SEED, `seed_parts` (the group's key) and the
    bytes of `values`: each group's interval depends on its data only, so it is reproducible,
    independent of which other groups exist, and the same for the same outcomes under
    another run id.
    """
    n = len(values)
    if n == 0:
        return (float("nan"), float("nan"))
    data = sha256_bytes(np.ascontiguousarray(values, dtype="<f8").tobytes())
    seed = int(digest(BOOTSTRAP_SEED, *seed_parts, data)[:16], 16)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    # Bound the index matrix to a few million cells however many pairs there are.
    chunk = max(1, min(resamples, 4_000_000 // n))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[idx].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


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


def _signature(f: TableFile) -> tuple[str, int, int]:
    return (str(f.path), f.size, f.mtime_ns)


def _stale(work: WorkDir) -> bool:
    """True if any stage's files were added, removed or rewritten since the last build."""
    con = duckdb.connect(str(work.warehouse), read_only=True)
    try:
        built = set(con.execute("SELECT * FROM warehouse_files").fetchall())
    except duckdb.Error:
        return True  # built before the warehouse listed its files
    finally:
        con.close()
    now = set()
    for view in VIEWS:
        for path in sorted(work.root.glob("/".join(view.pattern))):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            now.add((str(path), stat.st_size, stat.st_mtime_ns))
    return now != built


def query(work: WorkDir, name: str, **params: Any) -> pd.DataFrame:
    """Run the report query `name` (e.g. `report_scores`) with bound parameters.

    Builds the warehouse first if it is missing or any stage's files changed since it was
    built (views list the files that were readable then).
    """
    if name not in report_names():
        raise InputError(f"no report query {name!r}; known: {', '.join(report_names())}")
    refresh_tables(work)
    if not work.warehouse.is_file() or _stale(work):
        build_warehouse(work)
    con = duckdb.connect(str(work.warehouse), read_only=True)
    try:
        try:
            frame = con.execute(_sql(name), params).df()
        except duckdb.Error as exc:
            raise InputError(f"report query {name} with parameters {params}: {exc}") from exc
        post = _POST.get(name)
        return post(con, frame, params) if post else frame
    finally:
        con.close()
