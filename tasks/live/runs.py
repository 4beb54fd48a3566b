"""Live runs' bookkeeping: which runs are live, their reference run, summary and run.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas import LiveSummaryRow, conform
from tasks.live.outcomes import SUMMARY_FILE
from tasks.storage import write_json_atomic
from tasks.workdir import WorkDir

__all__ = ["find_reference_run", "is_live_run", "read_live_summary", "record_live_info"]

_TRANSPORT = (
    "base_url", "api_key_env", "api_key_secret", "timeout_s", "max_concurrency",
    "requests_per_minute", "max_retries",
)  # fmt: skip


def _judge_identity(judges: Any) -> list[dict[str, Any]]:
    """The judge fields that decide replies (and the names tables use), not the transport."""
    if not isinstance(judges, list):
        return []
    return [
        {k: v for k, v in j.items() if k not in _TRANSPORT} for j in judges if isinstance(j, dict)
    ]


def _run_info(folder: Path) -> dict[str, Any] | None:
    try:
        info = json.loads((folder / "run.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def is_live_run(work: WorkDir, run_id: str) -> bool:
    """True if the run executed a live policy (it has live tables)."""
    return (work.root / "runs" / run_id / SUMMARY_FILE).is_file()


def find_reference_run(work: WorkDir, run_id: str) -> str | None:
    """The most recent full-grid run with replay tables of the same plan, template and judges.

    Judges match on what decides replies (model, decoding, configs, names); transport
    settings such as the base URL may differ. None if there is no such run.
    """
    runs = work.root / "runs"
    own = _run_info(runs / run_id)
    if own is None:
        return None
    fields = ("plan_id", "template_id", "template_hash")
    best: tuple[str, str] | None = None
    for folder in runs.iterdir() if runs.is_dir() else []:
        if folder.name == run_id or not (folder / "summary.parquet").is_file():
            continue
        if is_live_run(work, folder.name):
            continue
        info = _run_info(folder)
        if info is None or "live" in info or any(info.get(f) != own.get(f) for f in fields):
            continue
        if _judge_identity(info.get("judges")) != _judge_identity(own.get("judges")):
            continue
        stamp = (str(info.get("updated_at", "")), folder.name)
        best = stamp if best is None or stamp > best else best
    return None if best is None else best[1]


def read_live_summary(work: WorkDir, run_id: str) -> pa.Table | None:
    """A live run's summary table; None for a run that did not run live."""
    path = work.root / "runs" / run_id / SUMMARY_FILE
    if not path.is_file():
        return None
    return conform(pq.read_table(path), LiveSummaryRow, where=str(path))


def record_live_info(work: WorkDir, run_id: str, live: dict[str, Any]) -> None:
    """Add the live figures to the run's `run.json` (it also marks the run as live)."""
    path = work.run_dir(run_id) / "run.json"
    info = _run_info(path.parent) or {}
    info["live"] = live
    write_json_atomic(info, path, overwrite=True)
