"""Gathering a run's report from the warehouse: header from the run record, frames from SQL."""

from __future__ import annotations

from pathlib import Path

from tasks.report import ReportData, write_report
from tasks.runrecord import read_record
from tasks.warehouse import build_warehouse, query
from tasks.workdir import WorkDir

REPORT_FILE = "report.html"


def _header(work: WorkDir, run_id: str) -> dict[str, str]:
    record = read_record(work, run_id)
    code = record.code
    version = (code.commit or "unknown")[:12] + (" (dirty tree)" if code.dirty else "")
    judges = record.config.get("judges")
    judge_names = ", ".join(
        str(j.get("name"))
        for j in (judges if isinstance(judges, list) else [])
        if isinstance(j, dict)
    )
    return {
        "run id": record.run_id,
        "benchmark": record.name,
        "date": record.started_at.strftime("%Y-%m-%d %H:%M UTC"),
        "judges": judge_names,
        "K": str(record.config.get("k")),
        "template": str(record.config.get("template")),
        "config hash": record.config_hash[:16],
        "manifest": (record.manifest_hash or "")[:16],
        "plan": (record.plan_id or "")[:16],
        "code version": version,
        "packages": ", ".join(f"{k} {v}" for k, v in sorted(code.packages.items())),
    }


def load_report_data(work: WorkDir, run_id: str) -> ReportData:
    """Everything the report shows for one run, from the (rebuilt) warehouse."""
    build_warehouse(work)
    return ReportData(
        header=_header(work, run_id),
        disclosure=query(work, "report_disclosure", run_id=run_id),
        scores=query(work, "report_scores", run_id=run_id),
        summary=query(work, "report_summary", run_id=run_id),
        components=query(work, "report_components", run_id=run_id),
        design=query(work, "report_design", run_id=run_id),
        position_bias=query(work, "report_position_bias", run_id=run_id),
    )


def build_report(work: WorkDir, run_id: str) -> Path:
    """Write `runs/<run_id>/report.html` from the warehouse; no judge is called."""
    data = load_report_data(work, run_id)
    return write_report(data, work.run_dir(run_id) / REPORT_FILE)
