"""What each report section shows, as data for its template: tables, charts and legends."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from markupsafe import Markup

from schemas.report import (
    DESIGN_METRICS,
    BiasTableRow,
    DesignsTableRow,
    DisclosureTableRow,
    PolicyTableRow,
    RealisedTableRow,
    ScoresTableRow,
    Show,
)
from schemas.vocabulary import DESIGNS, POLICIES
from tasks.replay.scope import scope_sentence
from tasks.report.charts import PolicyPoint, cost_agreement_chart, dot_rows_chart, share_bar_chart
from tasks.report.filters import pct
from tasks.report.panels import change_chart, interval_chart, panel_rows
from tasks.report.svg import CHANGE_COLORS, DESIGN_COLORS, POLICY_COLORS, SLOT_COLORS
from tasks.report.tables import (
    GROUP,
    Col,
    Table,
    columns,
    group_rows,
    ordered,
    present,
    row_title,
    table,
)

__all__ = [
    "Header",
    "Section",
    "bias_section",
    "changes_section",
    "cost_section",
    "designs_section",
    "disclosure_section",
    "header_view",
    "realised_section",
    "scores_section",
]


@dataclass
class Section:
    """One section for its template `<sid>.html.j2`; `missing` names what an empty one lacks."""

    sid: str
    label: str
    title: str
    missing: str = ""
    table: Table | None = None
    charts: list[Markup] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)
    hollow: list[str] = field(default_factory=list)
    shown: str = ""
    """The reference design the cost charts show."""
    note: str = ""
    """A sentence of the lead that depends on the run (designs: its K)."""
    why: str = ""
    """Why the section is empty, when the run says (an imported run that was not replayed)."""


@dataclass(frozen=True)
class HeaderField:
    """One run header field; long values span two columns, identifiers are monospace."""

    key: str
    value: str
    wide: bool
    mono: bool


@dataclass(frozen=True)
class Header:
    """The page header: the run's id (if the header names one), its fields and the tiles."""

    run: str | None
    fields: list[HeaderField]
    tiles: list[tuple[str, str, str]]
    """(value, label, note) of each at-a-glance tile."""
    alerts: list[str] = field(default_factory=list)
    """Why the run is degraded or failed, first line the status (`tasks.runs.health.reasons`)."""


_MONO_WORDS = {"hash", "commit", "version", "id", "manifest", "plan"}
"""Header keys naming identifiers: their values are set in a monospace font."""


def header_view(
    header: dict[str, str],
    disclosure: pd.DataFrame,
    summary: pd.DataFrame,
    alerts: list[str] | None = None,
) -> Header:
    """The page header (run title, why the run is degraded or failed, every header field)
    and the at-a-glance tiles."""
    run = next((header[k] for k in ("run_id", "run id", "run") if k in header), None)
    fields = [
        HeaderField(
            key=k.replace("_", " "),
            value=v,
            wide=len(str(v)) > 36,
            mono=bool(_MONO_WORDS & set(re.split(r"[^a-z]+", k.lower()))),
        )
        for k, v in header.items()
    ]
    return Header(run=run, fields=fields, tiles=_tiles(disclosure, summary), alerts=alerts or [])


def _tiles(disclosure: pd.DataFrame, summary: pd.DataFrame) -> list[tuple[str, str, str]]:
    """At-a-glance tiles: groups, planned calls and what paired unanimity saves and changes."""
    tiles: list[tuple[str, str, str]] = []
    if not disclosure.empty:
        planned = float(disclosure["planned"].sum())
        valid = float(disclosure["valid"].sum())
        groups = len(disclosure.groupby(list(GROUP)))
        tiles.append((f"{groups}", "judge × config × dataset groups", ""))
        tiles.append((f"{round(planned):,}", "planned calls", f"{pct(valid / planned)} valid"))
    pu = summary[(summary["policy"] == "paired_unanimity") & (summary["design"] == "balanced")]
    if not pu.empty:
        lo, hi = float(pu["savings"].min()), float(pu["savings"].max())
        tiles.append((f"{pct(lo, 0)}–{pct(hi, 0)}", "expected calls saved by paired unanimity", ""))
        tiles.append(
            (f"≤ {pct(float(pu['p_change'].max()), 2)}", "of reference decisions it changes", "")
        )
        extra = pd.to_numeric(pu["match_extra"], errors="coerce").dropna()
        if not extra.empty:
            tiles.append(
                (
                    f"{pct(float(extra.min()), 0)}–{pct(float(extra.max()), 0)}",
                    "more calls for the best nonadaptive mixture to match it",
                    "",
                )
            )
    return tiles


def disclosure_section(frame: pd.DataFrame) -> Section:
    """Every planned call counted: slot outcomes, dispositions and correctness."""
    out = Section("disclosure", "Disclosure", "Disclosure")
    if frame.empty:
        out.missing = "disclosure rows"
        return out
    out.table = table(frame, columns(DisclosureTableRow), table_id="t-disclosure")
    return out


def scores_section(frame: pd.DataFrame) -> Section:
    """Decision scores with 95% intervals per design and policy."""
    out = Section("scores", "Scores", "Scores")
    if frame.empty:
        out.missing = "scores"
        return out
    designs = present(frame, "design", DESIGNS)
    policies = present(frame, "policy", POLICIES)
    rows = panel_rows(
        frame,
        lambda rec: (float(rec["score"]), _float(rec["ci_low"]), _float(rec["ci_high"])),
    )
    out.charts = [interval_chart(rows, designs, policies, "decision score (95% interval)")]
    out.legend = [(p, POLICY_COLORS.get(p, "#333")) for p in policies]
    out.table = table(frame, columns(ScoresTableRow), table_id="t-scores")
    return out


def _float(value: Any) -> float:
    return math.nan if value is None or pd.isna(value) else float(value)


def cost_section(summary: pd.DataFrame, components: pd.DataFrame) -> Section:
    """Adaptive policies against the nonadaptive baselines' cost-agreement envelope."""
    out = Section("cost", "Cost vs agreement", "Cost versus agreement")
    adaptive = summary[summary["policy"] != "full"]
    designs = present([adaptive, components], "design", DESIGNS)
    if not designs or components.empty:
        out.missing = "baseline components"
        return out
    shown = "balanced" if "balanced" in designs else designs[0]
    pols_by_group = group_rows(adaptive[adaptive["design"] == shown])
    for key, part in group_rows(components[components["design"] == shown]).items():
        judge, config, dataset = key
        points = [
            PolicyPoint(
                policy=str(r["policy"]),
                cost=float(r["expected_calls"]),
                agreement=1.0 - float(r["p_change"]),
                match_cost=_opt(r["match_cost"]),
                match_extra=_opt(r["match_extra"]),
            )
            for r in pols_by_group.get(key, [])
        ]
        comps = [
            (str(r["component"]), float(r["cost"]), float(r["agreement"]))
            for r in sorted(part, key=lambda r: (float(r["cost"]), str(r["component"])))
        ]
        k = max(round(max(c for _, c, _ in comps)), 2)
        out.charts.append(cost_agreement_chart(judge, f"{config} · {dataset}", comps, points, k))
    policies = present(adaptive, "policy", POLICIES)
    out.legend = [(p, POLICY_COLORS.get(p, "#333")) for p in policies]
    out.legend.append(("nonadaptive", "#6b7280"))
    out.hollow = ["nonadaptive"]
    out.shown = shown
    out.table = table(summary, columns(PolicyTableRow), table_id="t-policies")
    return out


def _opt(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def bias_section(frame: pd.DataFrame) -> Section:
    """Which slot won both orders among two-order conflicts."""
    out = Section("bias", "Position bias", "Position bias")
    if frame.empty:
        out.missing = "position-bias rows"
        return out
    rows = [
        (
            *row_title((str(r["judge"]), str(r["config"]), str(r["dataset"]))),
            float(r["left_left"]),
            float(r["right_right"]),
            round(float(r["conflicts"])),
        )
        for r in frame.to_dict("records")
    ]
    shares = frame.assign(
        left_share=frame["left_left"] / frame["conflicts"].where(frame["conflicts"] > 0),
        right_share=frame["right_right"] / frame["conflicts"].where(frame["conflicts"] > 0),
    )
    out.legend = [
        ("Left slot won both orders", SLOT_COLORS["left_left"]),
        ("Right slot won both orders", SLOT_COLORS["right_right"]),
    ]
    out.charts = [share_bar_chart(rows)]
    # left_share_of_decisive: the warehouse query adds it; optional here
    out.table = table(shares, columns(BiasTableRow, frame), table_id="t-bias")
    return out


def reversal_note(summary: pd.DataFrame, ks: list[int]) -> str:
    """The half bound at its scope, what the run's K makes false for its paired policies, and
    those that reverse decisions in this run (docs/design.md#scope-of-the-half-bound)."""
    note = (
        "Per pair, paired unanimity changes at most half as many decisions as nonstrict when "
        "K ≤ 4; the bound fails beyond (at K = 6, seeds AA AA AA AA AB BA: nonstrict changes "
        "nothing, paired unanimity 1/30, all of it reversal), and from K = 6 a paired policy "
        "can reverse a decision, which nonstrict never does."
    ) + (f" This run has K = {', '.join(str(k) for k in ks)}." if ks else "")
    note += scope_sentence(ks, set(summary["policy"].astype(str)))
    paired = summary[summary["policy"].astype(str).str.startswith("paired")]
    parts = [
        f"{policy} in {len(rows)} group{'s' * (len(rows) > 1)} "
        f"(up to {pct(float(rows['p_reversal'].max()), 2)})"
        for policy, rows in paired[paired["p_reversal"] > 0].groupby("policy", observed=True)
    ]
    return f"{note} Reversals above zero in this run: {'; '.join(parts)}." if parts else note


def changes_section(summary: pd.DataFrame, ks: list[int] | None = None) -> Section:
    """How often each adaptive policy changes the reference decision, by kind; `ks` are the
    run's K values (the lead states the half bound's scope and flags paired reversals)."""
    out = Section("changes", "Decision changes", "Decision changes")
    out.note = reversal_note(summary, ks or [])
    adaptive = summary[summary["policy"] != "full"]
    if adaptive.empty:
        out.missing = "adaptive policies"
        return out
    designs = present(adaptive, "design", DESIGNS)
    policies = present(adaptive, "policy", POLICIES)
    names = {
        "p_neutral_to_decisive": "neutral → decisive",
        "p_decisive_to_neutral": "decisive → neutral",
        "p_reversal": "reversal",
    }
    rows = panel_rows(adaptive, lambda rec: tuple(float(rec[k]) for k in names))
    out.legend = [(names[k], c) for k, c in CHANGE_COLORS.items()]
    out.charts = [change_chart(rows, designs, policies)]
    return out


def captured_share_note(ks: list[int]) -> str:
    """What share of the agreement gap between common and balanced independent orders
    capture, exactly: (K - 1)/K with decisive outcomes (3/4 at K = 4, 1/2 at K = 2)."""
    if not ks:
        return ""
    parts = [f"K = {k}" for k in ks]
    shares = [f"{k - 1}/{k}" for k in ks]
    if len(ks) == 1:
        return (
            f"With {parts[0]} and decisive outcomes, independent orders capture exactly "
            f"{shares[0]} of the agreement gap between common and balanced."
        )
    each = "; ".join(f"{s} at {p}" for s, p in zip(shares, parts, strict=True))
    return (
        "With decisive outcomes, independent orders capture exactly (K - 1)/K of the "
        f"agreement gap between common and balanced: {each}."
    )


def designs_section(frame: pd.DataFrame, ks: list[int] | None = None) -> Section:
    """The three reference designs side by side, averaged over pairs; `ks` are the run's K
    values (the lead states the share independent orders capture at each)."""
    out = Section("designs", "Reference designs", "Reference designs")
    out.note = captured_share_note(ks or [])
    if frame.empty:
        out.missing = "design rows"
        return out
    metrics = ["expected_score", "p_neutral", "expected_agreement"]
    grouped = frame.groupby([*GROUP, "design"], sort=True)
    means = grouped[metrics].mean().assign(pairs=grouped["pair_id"].nunique()).reset_index()
    # One row per group: `metric:design` columns, and its most pairs in any design.
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in means.to_dict("records"):
        key = tuple(r[k] for k in GROUP)
        row = groups.setdefault(key, {**dict(zip(GROUP, key, strict=True)), "pairs": r["pairs"]})
        row["pairs"] = max(row["pairs"], r["pairs"])
        for metric in metrics:
            row[f"{metric}:{r['design']}"] = r[metric]
    wide = ordered(pd.DataFrame(list(groups.values())))
    designs = present(means, "design", DESIGNS)
    if {"common", "independent", "balanced"} <= set(designs):
        gap = wide["expected_agreement:balanced"] - wide["expected_agreement:common"]
        wide["captured"] = (
            wide["expected_agreement:independent"] - wide["expected_agreement:common"]
        ) / gap.where(gap.abs() > 1e-12)
    cols = columns(DesignsTableRow, wide)
    per_design = [
        Col(f"{metric}:{d}", Show(d, show.kind, show.label))
        for metric, show in DESIGN_METRICS
        for d in designs
    ]
    cols[len(GROUP) + 1 : len(GROUP) + 1] = per_design  # after the keys and `pairs`
    rows = [
        (
            *row_title((str(r["judge"]), str(r["config"]), str(r["dataset"]))),
            {d: _float(r.get(f"expected_agreement:{d}")) for d in designs},
        )
        for r in wide.to_dict("records")
    ]
    out.charts = [dot_rows_chart(rows, DESIGN_COLORS, "expected pairwise call agreement")]
    out.legend = [(d, DESIGN_COLORS.get(d, "#333")) for d in designs]
    out.table = table(wide, cols, table_id="t-designs")
    return out


def realised_section(realised: pd.DataFrame, summary: pd.DataFrame) -> Section:
    """A live run's realised savings against the savings replay expects."""
    out = Section("realised", "Realised savings", "Realised savings")
    if realised.empty:
        out.missing = "live-run rows"
        return out
    if "design" in realised:
        expected = summary[[*GROUP, "design", "policy", "savings"]]
        joined = realised.merge(expected, on=[*GROUP, "design", "policy"], how="left")
    else:
        rank = {d: i for i, d in enumerate(("balanced", "independent", "common"))}
        best = summary.assign(_r=summary["design"].map(rank).fillna(9))
        best = best.sort_values([*GROUP, "policy", "_r"], kind="mergesort")
        best = best.drop_duplicates([*GROUP, "policy"])[[*GROUP, "policy", "design", "savings"]]
        joined = realised.merge(best, on=[*GROUP, "policy"], how="left")
    joined = ordered(joined)
    joined["gap"] = joined["realised_savings"] - joined["savings"]
    rows = [
        (
            str(r["judge"]),
            f"{r['config']} · {r['dataset']} · {r['policy']}",
            {"expected": _float(r["savings"]), "realised": _float(r["realised_savings"])},
        )
        for r in joined.to_dict("records")
    ]
    colors = {"expected": "#6b7280", "realised": "#009e73"}
    out.charts = [
        dot_rows_chart(
            rows, colors, "share of planned calls saved", hollow=["expected"], from_zero=True
        )
    ]
    out.legend = list(colors.items())
    out.hollow = ["expected"]
    out.table = table(joined, columns(RealisedTableRow), table_id="t-realised")
    return out
