"""The warehouse's views: every stage table, its parquet files (listed and checked) and the
DuckDB views over them, in `warehouse.duckdb` or, for a read of some runs, in memory over
those runs' files (`tasks.warehouse`)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import duckdb
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
from tasks.runs.check import RUN_TABLES, json_damage, skip
from tasks.runs.folder import TABLE_FILES, RunFolder, is_run_id
from tasks.store.tablefiles import TableFile, list_table_files
from tasks.store.workdir import WorkDir

__all__ = [
    "VIEWS",
    "RunScope",
    "View",
    "check_root",
    "create_views",
    "foreign",
    "listing",
    "refresh_tables",
    "sql_text",
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

log = logging.getLogger("tasks.warehouse")  # the warehouse's warnings

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
    text = sql_text(template.removesuffix(".sql"))
    return text.replace("{{name}}", view.name).replace(_SOURCE, source)


def sql_text(name: str) -> str:
    return resources.files("tasks.sql").joinpath(f"{name}.sql").read_text("utf-8")


def _quote(text: str) -> str:
    """A SQL string literal; paths are the one thing placed into SQL text (views take no
    bound parameters), so quotes are doubled and control characters refused."""
    if any(ord(ch) < 32 for ch in text):
        raise InputError(f"path {text!r} holds control characters; cannot use it in a view")
    return "'" + text.replace("'", "''") + "'"


def foreign(view: View, path: Path) -> bool:
    """A file no command has published, skipped: one under a name starting with a dot (a
    folder being staged, which its publisher renames away at any moment, or an atomic
    write's temporary file), or a run table in a folder whose name is not a run id."""
    if any(part.startswith(".") for part in path.parts[-len(view.pattern) :]):
        return True
    return view.pattern[0] == "runs" and not is_run_id(path.parent.name)


def refresh_tables(work: WorkDir, runs: RunScope = None) -> None:
    """Bring every view's files (or only those of `runs`) into the local copy of an object
    store (each folder listed once; nothing to do on a local disk)."""
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


def listing(work: WorkDir, runs: RunScope = None) -> dict[View, list[TableFile]]:
    """Every view's files as they are now (or the files of `runs` in their tables), each
    checked (footers only). Every file of a run that cannot be read (`tasks.runs.check`)
    counts as damaged, with one warning naming the run; another damaged file, with a warning
    naming it. Damaged files are left out, and so are the files of foreign folders
    (`foreign`)."""
    if runs is not None:  # a name that is no run id has no run folder: never a glob
        runs = frozenset(r for r in runs if is_run_id(r))
    refresh_tables(work, runs)
    found = {
        view: [f for f in _view_files(work, view, runs) if not foreign(view, f.path)]
        for view in _views(runs)
    }
    damaged: dict[str, list[str]] = {}
    for view, files in found.items():
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
        for view, files in found.items()
    }


def _source(files: list[TableFile]) -> str | None:
    """The read_parquet list of a view's readable files; None when it has none."""
    good = [_quote(str(f.path)) for f in files if f.problem is None]
    return f"[{', '.join(good)}]" if good else None


def _empty(view: View) -> pa.Table:
    """A typed empty table for a stage with no files yet, so report queries still bind."""
    schema = arrow_schema(view.model)
    if view.run_from_path:
        schema = pa.schema([pa.field("run_id", pa.string()), *schema])
    return schema.empty_table()


def check_root(work: WorkDir) -> None:
    if _GLOB_CHARS.search(str(work.root)):
        # DuckDB expands glob characters in every parquet path, even a listed file, and has
        # no escape: such a folder would silently read its neighbours' files.
        raise InputError(
            f"work dir {work.root} contains a glob character (*, ? or [); DuckDB would read "
            "other folders' files through it. Use a work dir path without them."
        )


def create_views(con: duckdb.DuckDBPyConnection, files_of: dict[View, list[TableFile]]) -> None:
    """One view per stage table over its readable files; a stage with none becomes an empty
    table of its schema."""
    for view, files in files_of.items():
        source = _source(files)
        if source is None:
            con.register("empty_stage", _empty(view))
            con.execute(f'CREATE TABLE "{view.name}" AS SELECT * FROM empty_stage')
            con.unregister("empty_stage")
        else:
            con.execute(_view_sql(view, source))
