"""Whether a run's folder can be read: its record, its run.json and every table it holds.

A run that cannot be read (a table cut short, a record that is not JSON) is skipped wherever
another run reads it: the previous run of a report, of alarms and of a drift probe; the
warehouse behind trends, `show` and `advise`; an estimate's newest replay; a live run's
reference. Each skip logs one warning line naming the run and its damaged files, once per
process (a run's report, alarms and warehouse all look at the previous run). Reading the
run itself (`show`, `report`, `diff` naming it) is an IntegrityError naming the same files.
Only parquet footers and the JSON files are read, never the rows.
"""

from __future__ import annotations

import logging
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
from tasks.runfolder import TABLE_FILES, RunFolder
from tasks.tablefiles import damage_of

__all__ = ["TABLE_MODELS", "check_readable", "json_damage", "readable", "run_damage", "skip"]

log = logging.getLogger(__name__)

TABLE_MODELS: Final[dict[str, type[BaseModel]]] = {
    "calls": CallRecord,
    "labels": LabelRecord,
    "outcomes": OutcomeRow,
    "dispositions": DispositionRow,
    "disclosure": DisclosureRow,
    "replay": ReplayRow,
    "summary": SummaryRow,
    "design": DesignRow,
    "components": ComponentRow,
    "live": LivePairRow,
    "live_summary": LiveSummaryRow,
    "live_draws": LiveDrawRow,
    "advice": AdviceRow,
    "imported": ImportedReplyRecord,
}
"""The row model of every table a run folder can hold (`tasks.runfolder.TABLE_FILES`)."""
assert set(TABLE_MODELS) == set(TABLE_FILES)

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


def run_damage(folder: RunFolder) -> list[str]:
    """Every damaged file of the run, with what is wrong (empty: the run can be read)."""
    problems = json_damage(folder)
    for name, model in TABLE_MODELS.items():
        path = folder.table(name)
        problem = damage_of(path, model) if path.exists() else None
        if problem is not None:
            problems.append(f"{path} ({problem})")
    return problems


def skip(folder: RunFolder, problems: list[str]) -> None:
    """Say, once per process, that the run is skipped because of `problems`."""
    if str(folder.path) in _skipped:
        return
    _skipped.add(str(folder.path))
    log.warning(
        "run %s cannot be read and is skipped: %s. The other runs are not affected; "
        "`judgeline remap %s` rewrites its outcome tables from the cached replies, or delete "
        "its folder.",
        folder.run_id,
        "; ".join(problems),
        folder.run_id,
    )


def readable(folder: RunFolder) -> bool:
    """True if the run can be read; else False, after saying once that it is skipped."""
    problems = run_damage(folder)
    if problems:
        skip(folder, problems)
    return not problems


def check_readable(folder: RunFolder) -> None:
    """An IntegrityError naming every damaged file of a run that is about to be read."""
    problems = run_damage(folder)
    if problems:
        raise IntegrityError(
            f"run {folder.run_id!r} is damaged: {'; '.join(problems)}. Its figures cannot be "
            "shown; the other runs are not affected. Rewrite the damaged tables (`judgeline "
            f"remap {folder.run_id}` rewrites its outcome tables from the cached replies) or "
            "delete the run's folder."
        )
