"""The report's input (ReportData and its validation) and rendering it as one HTML page."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from schemas import (
    ComponentRow,
    DesignRow,
    DisclosureRow,
    PositionBiasRow,
    RealisedRow,
    ScoreRow,
    SummaryRow,
    arrow_schema,
)
from tasks.errors import InputError
from tasks.report.advice import advice_section
from tasks.report.agreement import AgreementTables, agreement_section
from tasks.report.disagreements import disagreements_section
from tasks.report.leaderboard import leaderboard_section
from tasks.report.money import money_section
from tasks.report.page import render_page
from tasks.report.pairs import PairView
from tasks.report.sections import (
    bias_section,
    changes_section,
    cost_section,
    designs_section,
    disclosure_section,
    header_view,
    realised_section,
    scores_section,
)
from tasks.report.since import SinceSection
from tasks.report.tables import GROUP, ordered
from tasks.storage import report_mode, write_text_atomic

__all__ = ["ReportData", "render_report", "validate_report_data", "write_report"]


@dataclass
class ReportData:
    """Everything the report shows; each frame comes from one warehouse query."""

    header: dict[str, str]
    disclosure: pd.DataFrame
    scores: pd.DataFrame
    summary: pd.DataFrame
    components: pd.DataFrame
    design: pd.DataFrame
    position_bias: pd.DataFrame
    realised: pd.DataFrame | None = None
    alerts: list[str] = field(default_factory=list)
    """Why the run is degraded or failed (`tasks.runs.health.reasons`); empty if completed."""
    pairs: list[PairView] | None = None
    """The run's unsettled (pair, seed) views for the disagreements section (None: none)."""
    since: SinceSection | None = None
    """What changed since the previous run of this configuration (None: no such section)."""
    spend: pd.DataFrame | None = None
    """Tokens and USD per judge config (`tasks.report.money.spend_frame`; None: not known)."""
    advice: pd.DataFrame | None = None
    """The run's stopping-policy advice (`AdviceRow`s) for the advice section (None: none)."""
    agreement: AgreementTables | None = None
    """The run's agreement tables (`tasks.report.agreement`; None: not computed)."""
    leaderboard: list[dict[str, Any]] | None = None
    """The run's leaderboards per judge config (`tasks.leaderboard`; None: its pairs name no
    systems)."""
    no_replay: str = ""
    """Why the run has no replay (an imported run of K = 1), said where a section built from
    the replay is empty; empty if it was replayed."""


_COLUMNS: dict[str, tuple[str, ...]] = {
    name: tuple(arrow_schema(model, added=False).names)  # added columns may be absent
    for name, model in (
        ("disclosure", DisclosureRow),
        ("scores", ScoreRow),
        ("summary", SummaryRow),
        ("components", ComponentRow),
        ("design", DesignRow),
        ("position_bias", PositionBiasRow),
        ("realised", RealisedRow),
    )
}
_TEXT = {"judge", "config", "dataset", "pair_id", "design", "policy", "component"}
# Shares must lie in [0, 1]: a chart would silently clip anything else.
_SHARES = {
    "consistency",
    "accuracy_of_stable",
    "p_change",
    "p_neutral_to_decisive",
    "p_decisive_to_neutral",
    "p_reversal",
    "p_neutral",
    "agreement",
    "expected_agreement",
    "expected_score",
    "reference_score",
    "score",
    "ci_low",
    "ci_high",
}
_COUNTS = {
    "planned", "valid", "missing", "invalid", "abstained", "tied", "conflicting", "mixed",
    "stable", "stable_tie", "incomplete", "stable_correct", "stable_wrong", "pairs",
    "conflicts", "left_left", "right_right", "realised_calls", "planned_calls",
}  # fmt: skip
_NULLABLE = {
    "consistency", "accuracy_of_stable", "match_cost", "match_extra", "ci_low", "ci_high",
    "score",  # a judge config with no valid outcome has no score
}  # fmt: skip


def _where(name: str, frame: pd.DataFrame, pos: int) -> str:
    row = frame.iloc[pos]
    keys = [f"{c}={row[c]!s}" for c in (*GROUP, "design", "policy", "pair_id") if c in frame]
    return f"row {pos + 1} ({', '.join(keys)})"


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds, so messages read `1.7`, not `np.float64`."""
    return value.item() if hasattr(value, "item") else value


def _numbers(column: pd.Series, col: str) -> tuple[np.ndarray, list[tuple[np.ndarray, str]]]:
    """The column's values as floats (NaN: missing or not a number), and the masks of those
    that are not numbers or are missing, each with what it finds. A column of a numeric
    dtype holds only numbers and NaN: it is read without pandas' per-value conversion."""
    if column.dtype.kind in "iuf":
        values = column.to_numpy(dtype=float, na_value=np.nan)
        return values, [(np.isnan(values) & (col not in _NULLABLE), "is missing")]
    numbers = pd.to_numeric(column, errors="coerce")
    unread = (numbers.isna() & column.notna()).to_numpy(dtype=bool)
    missing = (numbers.isna() & column.isna()).to_numpy(dtype=bool)
    return numbers.to_numpy(dtype=float, na_value=np.nan), [
        (unread, "is not a number"),
        (missing & (col not in _NULLABLE), "is missing"),
    ]


def _check_frame(name: str, frame: object) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(frame).__name__}", file=name)
    missing = [c for c in _COLUMNS[name] if c not in frame.columns]
    if missing:
        raise InputError(f"missing columns {missing}", file=f"report input `{name}`")
    for col in _COLUMNS[name]:
        if col in _TEXT:
            bad = frame[col].isna()
            if bad.any():
                pos = int(bad.to_numpy().nonzero()[0][0])
                raise InputError(f"`{col}` is empty", file=f"report input `{name}`", row=pos + 1)
            continue
        values, problems = _numbers(frame[col], col)
        if col in _SHARES:
            problems.append(((values < -1e-9) | (values > 1 + 1e-9), "is outside [0, 1]"))
        if col in _COUNTS:
            problems.append((values < 0, "is negative"))
        for mask, what in problems:
            found = mask.nonzero()[0]
            if len(found):
                pos = int(found[0])
                value = _plain(frame[col].iloc[pos])
                raise InputError(
                    f"{_where(name, frame, pos)}: `{col}` = {value!r} {what}",
                    file=f"report input `{name}`",
                )


def validate_report_data(data: ReportData) -> None:
    """Raise InputError naming the frame, row and column of the first bad value."""
    if not isinstance(data.header, dict):
        raise InputError("header must be a dict of str to str", file="report input `header`")
    for name in _COLUMNS:
        frame = getattr(data, name)
        if frame is None and name == "realised":
            continue
        _check_frame(name, frame)


def run_ks(summary: pd.DataFrame) -> list[int]:
    """The K values of a run's groups: the full reference executes K calls per pair."""
    if summary.empty:
        return []
    full = summary.loc[summary["policy"] == "full", "expected_calls"]
    return sorted({round(float(c)) for c in full})


_FROM_REPLAY = frozenset({"scores", "cost", "changes", "designs"})
"""Sections built from the replay's tables."""


def render_report(data: ReportData) -> str:
    """The report as one self-contained HTML document (same input, same bytes)."""
    validate_report_data(data)
    summary = ordered(data.summary)
    sections: list[Any] = [] if data.since is None else [data.since]
    sections += [
        disclosure_section(ordered(data.disclosure)),
        scores_section(ordered(data.scores)),
        cost_section(summary, ordered(data.components)),
        bias_section(ordered(data.position_bias)),
        changes_section(summary, run_ks(summary)),
        designs_section(ordered(data.design), run_ks(summary)),
    ]
    for section in sections:
        if section.sid in _FROM_REPLAY and section.missing:
            section.why = data.no_replay
    if data.agreement is not None:
        sections.insert(
            sections.index(next(s for s in sections if s.sid == "bias")) + 1,
            agreement_section(data.agreement),
        )
    money = money_section(data.spend, summary)
    if money is not None:
        sections.insert(3, money)
    if data.realised is not None:
        sections.append(realised_section(data.realised, summary))
    if data.advice is not None:
        sections.append(advice_section(data.advice))
    if data.leaderboard is not None:
        sections.append(leaderboard_section(data.leaderboard))
    if data.pairs is not None:
        sections.append(disagreements_section(data.pairs))
    run = next((data.header[k] for k in ("run_id", "run id", "run") if k in data.header), "")
    return render_page(
        title=f"judgeline report {run}".strip(),
        head=header_view(data.header, data.disclosure, data.summary, data.alerts),
        sections=sections,
    )


def write_report(data: ReportData, path: Path) -> Path:
    """Render and write the report atomically (a re-run replaces the previous report); a
    report that would be the same as the one there is not written again (rebuilding the
    report of a run that did not change writes nothing)."""
    html = render_report(data)
    write_text_atomic(html, path, overwrite=True, mode=report_mode(), unless_same=True)
    return path
