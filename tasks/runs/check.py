"""Whether a run's folder can be read: its record, its run.json and every table it holds.

A run that cannot be read (its record or run.json not JSON, a table of its results cut
short) is skipped wherever another run reads it: the previous run of a report, of alarms and
of a drift probe; the warehouse behind trends, `show` and `advise`; an estimate's newest
replay; a live run's reference. Each skip logs one warning line naming the run and its
damaged files, once per process (a run's report, alarms and warehouse all look at the
previous run). A damaged table that holds no results (its advice, where its imported replies
came from) leaves the run readable: only that file is left out. Reading the run itself
(`show`, `report`, `diff` naming it) is an IntegrityError naming every damaged file and the
command that rewrites it. Only parquet footers and the JSON files are read, never the rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel

from schemas import (
    CallRecord,
    ComponentRow,
    DesignRow,
    DisclosureRow,
    DispositionRow,
    LabelRecord,
    LiveDrawRow,
    LivePairRow,
    LiveSummaryRow,
    OutcomeRow,
    ReplayRow,
    SummaryRow,
)
from schemas.advice import AdviceRow
from schemas.imports import ImportedReplyRecord
from schemas.run import RunInfo, RunRecord
from tasks.errors import IntegrityError, describe_validation
from tasks.runs.folder import TABLE_FILES, RunFolder
from tasks.store.tablefiles import damage_of

__all__ = ["RUN_TABLES", "RunTable", "check_readable", "json_damage", "readable", "run_damage",
           "skip"]  # fmt: skip

log = logging.getLogger(__name__)

REMAP = "`judgeline remap {run}` rewrites its outcome tables from the cached replies"


@dataclass(frozen=True)
class RunTable:
    """A table a run folder can hold: its rows, whether it holds the run's results (a
    damaged one makes the run unreadable), and the command that rewrites a damaged copy
    (`{run}`: the run id)."""

    model: type[BaseModel]
    results: bool = True
    rewrite: str = REMAP


RUN_TABLES: Final[dict[str, RunTable]] = {
    "calls": RunTable(CallRecord),
    "labels": RunTable(LabelRecord),
    "outcomes": RunTable(OutcomeRow),
    "dispositions": RunTable(DispositionRow),
    "disclosure": RunTable(DisclosureRow),
    "replay": RunTable(ReplayRow),
    "summary": RunTable(SummaryRow),
    "design": RunTable(DesignRow),
    "components": RunTable(ComponentRow),
    "live": RunTable(LivePairRow),
    "live_summary": RunTable(LiveSummaryRow),
    "live_draws": RunTable(LiveDrawRow),
    "advice": RunTable(
        AdviceRow,
        results=False,
        rewrite="its advice.parquet holds no result (advice a live run followed, or an older "
        "`judgeline advise`'s, without certificate columns if written before advice was "
        "certified): delete it; `judgeline advise` prints advice again",
    ),
    "imported": RunTable(
        ImportedReplyRecord,
        results=False,
        rewrite="importing its files again under run id {run} rewrites where its replies came from",
    ),
}
"""Every table a run folder can hold (`tasks.runs.folder.TABLE_FILES`), by name."""
assert set(RUN_TABLES) == set(TABLE_FILES)

_skipped: set[str] = set()
"""Run folders this process has said it skips."""


def json_damage(folder: RunFolder) -> list[str]:
    """The run's record.json and run.json, each that exists but cannot be read, with why."""
    problems = []
    for path, model in ((folder.record, RunRecord), (folder.info, RunInfo)):
        try:
            model.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            problems.append(f"{path} ({describe_validation(exc)})")
    return problems


def _table_damage(folder: RunFolder, *, results_only: bool) -> list[tuple[str, RunTable]]:
    """The run's damaged tables (of its results only, or all), with what is wrong."""
    damaged = []
    for name, table in RUN_TABLES.items():
        path = folder.table(name)
        if (table.results or not results_only) and path.exists():
            problem = damage_of(path, table.model)
            if problem is not None:
                damaged.append((f"{path} ({problem})", table))
    return damaged


def run_damage(folder: RunFolder) -> list[str]:
    """What makes the run unreadable to another run: its damaged record or run.json and
    tables of its results, each with what is wrong (empty: it can be read)."""
    return json_damage(folder) + [p for p, _ in _table_damage(folder, results_only=True)]


def skip(folder: RunFolder, problems: list[str]) -> None:
    """Say, once per process, that the run is skipped because of `problems`."""
    if str(folder.path) in _skipped:
        return
    _skipped.add(str(folder.path))
    log.warning(
        "run %s cannot be read and is skipped: %s. The other runs are not affected; %s, or "
        "delete its folder.",
        folder.run_id,
        "; ".join(problems),
        REMAP.format(run=folder.run_id),
    )


def readable(folder: RunFolder) -> bool:
    """True if the run can be read; else False, after saying once that it is skipped."""
    problems = run_damage(folder)
    if problems:
        skip(folder, problems)
    return not problems


def check_readable(folder: RunFolder, *, results_only: bool = False) -> None:
    """An IntegrityError naming every damaged file of a run that is about to be read (its
    record, run.json and tables: all of them, or those of its results) and the commands that
    rewrite them."""
    tables = _table_damage(folder, results_only=results_only)
    problems = json_damage(folder) + [p for p, _ in tables]
    if not problems:
        return
    rewrites = dict.fromkeys(t.rewrite.format(run=folder.run_id) for _, t in tables) or {
        REMAP.format(run=folder.run_id): None
    }
    raise IntegrityError(
        f"run {folder.run_id!r} is damaged: {'; '.join(problems)}. Its figures cannot be "
        "shown; the other runs are not affected. Rewrite the damaged tables "
        f"({'; '.join(rewrites)}) or delete the run's folder."
    )
