"""The previous run of a run's configuration: the run its report, alarms and diff-by-default
compare it with.

Two runs are of the same configuration when they share the benchmark name, K, the template,
the set of judge · config names, and whether they ran a policy live. A K = 2 run is not
compared with a K = 4 run of the same name (new seeds flip decisions that did not change),
nor an import of one file with an import of two; a changed model or decoding under the same
judge · config names is compared (that is what a diff is for). The previous run is the
latest such run started earlier that completed and can be read; a run that cannot be read is
skipped with one warning line (`tasks.runs.check`).
"""

from __future__ import annotations

from typing import Any

from schemas.plan import PlanInfo
from schemas.run import RunRecord
from tasks.errors import JudgelineError
from tasks.history.view import RunView, read_run_view
from tasks.plan.files import PLAN_INFO_FILE
from tasks.runs.check import json_damage, readable, skip
from tasks.runs.folder import RunFolder
from tasks.runs.jobs import scan_records
from tasks.store.workdir import WorkDir

__all__ = ["comparable", "configuration", "previous_view"]


def _k(work: WorkDir, record: RunRecord) -> int | None:
    """K from the record's configuration, else from its plan (a judge or live run's)."""
    k = record.config.get("k")
    if isinstance(k, int):
        return k
    if record.plan_id is None:
        return None
    try:
        path = work.plan_dir(record.plan_id) / PLAN_INFO_FILE
        return PlanInfo.model_validate_json(path.read_bytes()).k
    except (OSError, ValueError):
        return None


def _config_names(judges: Any) -> tuple[tuple[str, str], ...]:
    """Every (judge, config) name of a record's judges (a config as a spec or as a name)."""
    names = set()
    for judge in judges if isinstance(judges, list) else []:
        if not isinstance(judge, dict):
            continue
        configs = judge.get("configs") or [{"name": "default"}]
        for config in configs:
            name = config.get("name") if isinstance(config, dict) else config
            names.add((str(judge.get("name")), str(name)))
    return tuple(sorted(names))


def configuration(work: WorkDir, record: RunRecord) -> tuple[Any, ...]:
    """What makes two runs runs of the same configuration (see the module's docstring)."""
    config = record.config
    live = config.get("live") is not None or record.live is not None
    return (
        record.name,
        _k(work, record),
        config.get("template"),
        live,
        _config_names(config.get("judges")),
    )


def comparable(work: WorkDir, record: RunRecord) -> bool:
    """Whether the run can be compared with another: its manifest is known and its outcomes
    hold the full grid (a live run executed part of it)."""
    folder = RunFolder(work, record.run_id)
    live = record.live is not None or folder.live_summary.is_file()
    return record.manifest_hash is not None and folder.outcomes.is_file() and not live


def previous_view(work: WorkDir, record: RunRecord) -> RunView | None:
    """The previous run of `record`'s configuration, loaded; None if there is none."""
    shape = configuration(work, record)
    entries = scan_records(work)  # newest first, damaged records (then foreign folders) last
    for entry in entries:
        if entry.status == "damaged":  # it may have been the previous run: say it is skipped
            folder = RunFolder(work, entry.run_id)
            skip(folder, json_damage(folder) or [str(entry.problem)])
    for other in (e.record for e in entries if e.record is not None):
        if (
            other.run_id == record.run_id
            or other.status != "completed"
            or other.started_at >= record.started_at
            or configuration(work, other) != shape
        ):
            continue
        folder = RunFolder(work, other.run_id)
        if not readable(folder):
            continue
        try:
            return read_run_view(work, other.run_id)
        except JudgelineError as exc:
            skip(folder, [str(exc)])
    return None
