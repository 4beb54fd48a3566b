"""Live runs' bookkeeping: which runs are live, their reference run, summary and run.json."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas import LiveSummaryRow, conform
from schemas.run import RunInfo
from tasks.runs.check import readable
from tasks.runs.folder import RunFolder, is_run_id
from tasks.store.workdir import WorkDir

__all__ = ["find_reference_run", "is_live_run", "read_live_summary", "record_live_info"]

_TRANSPORT = (
    "base_url", "api_key_env", "api_key_secret", "timeout_s", "max_concurrency",
    "requests_per_minute", "max_retries",
)  # fmt: skip


def _judge_identity(judges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The judge fields that decide replies (and the names tables use), not the transport."""
    return [{k: v for k, v in j.items() if k not in _TRANSPORT} for j in judges]


def _origin(info: RunInfo) -> tuple[str | None, ...]:
    """What a run's calls were made from, apart from its judges: plan and template."""
    return info.plan_id, info.template_id, info.template_hash


def is_live_run(work: WorkDir, run_id: str) -> bool:
    """True if the run executed a live policy (it has live tables)."""
    return RunFolder(work, run_id).live_summary.is_file()


def find_reference_run(work: WorkDir, run_id: str) -> str | None:
    """The most recent full-grid run with replay tables of the same plan, template and judges
    that can be read (`tasks.runs.check`).

    Judges match on what decides replies (model, decoding, configs, names); transport
    settings such as the base URL may differ. None if there is no such run.
    """
    own_folder = RunFolder(work, run_id)
    own = own_folder.find_info()
    runs = work.fresh("runs", pattern="*/run.json")
    if own is None:
        return None
    best: tuple[str, str] | None = None
    for path in runs.iterdir() if runs.is_dir() else []:
        if not is_run_id(path.name):
            continue  # a foreign folder
        folder = RunFolder(work, path.name)
        if folder.run_id == run_id or not folder.summary.is_file():
            continue
        if folder.live_summary.is_file():
            continue
        info = folder.find_info()
        if info is None or "live" in info.model_fields_set or _origin(info) != _origin(own):
            continue
        if _judge_identity(info.judges) != _judge_identity(own.judges):
            continue
        if not readable(folder):
            continue  # skipped with a warning
        stamp = (info.updated_at or "", folder.run_id)
        best = stamp if best is None or stamp > best else best
    return None if best is None else best[1]


def read_live_summary(work: WorkDir, run_id: str) -> pa.Table | None:
    """A live run's summary table; None for a run that did not run live."""
    path = RunFolder(work, run_id).live_summary
    if not path.is_file():
        return None
    return conform(pq.read_table(path), LiveSummaryRow, where=str(path))


def record_live_info(work: WorkDir, run_id: str, live: dict[str, Any]) -> None:
    """Add the live figures to the run's `run.json` (it also marks the run as live)."""
    folder = RunFolder(work, run_id)
    info = folder.read_info()
    info.live = live
    folder.write_info(info)
