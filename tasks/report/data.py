"""Gathering a run's report from the warehouse: header from the run record, frames from SQL."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tasks.errors import InputError
from tasks.report.agreement import AGREEMENT_COLUMNS, AgreementTables, agreement_tables
from tasks.report.disagreements import write_pairs_page
from tasks.report.leaderboard import run_boards
from tasks.report.money import run_spend_rows, spend_frame
from tasks.report.pairs import pair_views
from tasks.report.render import ReportData, write_report
from tasks.report.since import since_section
from tasks.runs.folder import RunFolder
from tasks.runs.health import reasons, run_health, run_status
from tasks.runs.record import read_record
from tasks.storage import read_parquet
from tasks.store.workdir import WorkDir
from tasks.warehouse import check_run_tables, query, warehouse_reads


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
    return (
        {
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
        | _imported_header(record.imported)
        | _advice_header(record.config.get("live"))
    )


def _advice_header(live: object) -> dict[str, str]:
    """For a live run that followed advice: whose, at which budget (the advice section)."""
    if not isinstance(live, dict) or live.get("policy") != "advised":
        return {}
    budget, level = live.get("max_change"), live.get("level") or 0.95
    within = (
        f"within {budget * 100:g}% changed decisions at {level * 100:g}%"
        if isinstance(budget, int | float) and isinstance(level, int | float)
        else "as its advice.parquet then said"  # configured before advice took a budget
    )
    return {"advice followed": f"run {live.get('advised_by')}'s, {within} (Advice below)"}


def _imported_header(imported: dict[str, object] | None) -> dict[str, str]:
    """For an imported run: where its judgments came from, the parser's agreement with
    them, and why there is no replay when there is none."""
    if not imported:
        return {}
    files = imported.get("files")
    paths = (
        [str(f.get("path")) for f in files if isinstance(f, dict)]
        if isinstance(files, list)
        else []
    )
    agree = imported.get("agreement")
    header = {
        "imported from": f"{imported.get('tool')}: {', '.join(paths)} (nothing sent or paid)",
        "order convention": str(imported.get("convention")),
    }
    if isinstance(agree, dict):
        header["parser vs file"] = (
            f"agrees on {agree.get('agree')} of {agree.get('compared')} replies"
        )
    if imported.get("replay"):
        header["stopping policies"] = str(imported["replay"])
    return header


def _live_side(
    work: WorkDir, run_id: str, header: dict[str, str]
) -> tuple[str, pd.DataFrame | None]:
    """For a live run: its realised savings and the run whose replay gives the expected side.

    A live run has no full-grid replay of its own (it executed part of the grid), so the
    replay sections and the expected savings come from the most recent full-grid run of the
    same plan, template and judges; without one they stay empty. Other runs: themselves.
    """
    from tasks.live.runs import find_reference_run, read_live_summary

    live = read_live_summary(work, run_id)
    if live is None:
        return run_id, None
    reference = find_reference_run(work, run_id)
    header["live policy"] = "paired_unanimity (balanced reference, executed live)"
    header["replay from"] = (
        f"run {reference} (full grid)"
        if reference
        else "none: no full-grid run of this plan, template and judges"
    )
    return reference or run_id, live.to_pandas()


def load_report_data(work: WorkDir, run_id: str) -> ReportData:
    """Everything the report shows for one run: its tables (and a live run's reference
    run's) read through DuckDB views over those runs' files (`warehouse_reads`)."""
    header = _header(work, run_id)
    check_run_tables(work, run_id)
    replayed, realised = _live_side(work, run_id, header)
    with warehouse_reads(work, runs={run_id, replayed}):
        return _report_data(work, run_id, replayed, realised, header)


def _report_data(
    work: WorkDir,
    run_id: str,
    replayed: str,
    realised: pd.DataFrame | None,
    header: dict[str, str],
) -> ReportData:
    advice = query(work, "report_advice", run_id=run_id)
    spend = run_spend_rows(work, run_id)  # the money section's and the since section's
    return ReportData(
        header=header,
        disclosure=query(work, "report_disclosure", run_id=run_id),
        scores=query(work, "report_scores", run_id=replayed),
        summary=query(work, "report_summary", run_id=replayed),
        components=query(work, "report_components", run_id=replayed),
        design=query(work, "report_design", run_id=replayed),
        position_bias=query(work, "report_position_bias", run_id=replayed),
        realised=realised,
        alerts=_alerts(work, run_id),
        pairs=pair_views(work, run_id),
        since=since_section(work, run_id, spend=spend),
        spend=spend_frame(spend),
        advice=None if advice.empty else advice,
        agreement=run_agreement(work, run_id),
        leaderboard=run_boards(work, run_id),
        no_replay=_no_replay(work, run_id),
    )


def run_agreement(work: WorkDir, run_id: str) -> AgreementTables | None:
    """The run's agreement tables from its outcomes (None when it has none yet)."""
    path = RunFolder(work, run_id).outcomes
    if not path.is_file():
        return None
    return agreement_tables(read_parquet(path, AGREEMENT_COLUMNS).to_pandas())


def _no_replay(work: WorkDir, run_id: str) -> str:
    """Why an imported run was not replayed, as its record says (empty otherwise)."""
    imported = read_record(work, run_id).imported or {}
    return str(imported.get("replay") or "")


def _alerts(work: WorkDir, run_id: str) -> list[str]:
    """Why the run is degraded or failed, from its calls and outcomes (none if completed)."""
    folder = RunFolder(work, run_id)
    if not folder.calls.is_file():
        return []
    health = run_health(folder)
    return reasons(run_id, run_status(health), health)


def _check_outcomes(work: WorkDir, run_id: str) -> None:
    """Refuse to report a run with no outcomes yet: the report would be empty."""
    record = read_record(work, run_id)
    if RunFolder(work, run_id).outcomes.is_file():
        return
    why = f": {record.error}" if record.error else ""
    raise InputError(
        f"run {run_id!r} has no outcomes to report (status {record.status}{why}); a report "
        f"needs the run's judge and remap stages done: run it again with --run-id {run_id}, "
        f"or `judgeline failures {run_id}` to see which calls failed"
    )


def build_report(work: WorkDir, run_id: str) -> Path:
    """Write `runs/<run_id>/report.html` from the warehouse; no judge is called."""
    _check_outcomes(work, run_id)
    data = load_report_data(work, run_id)
    folder = RunFolder(work, run_id).create()
    if data.pairs is not None:
        write_pairs_page(data.pairs, folder.path, run_id)
    return write_report(data, folder.report)
