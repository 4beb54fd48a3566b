"""The report's HTML sections: run header, at-a-glance tiles and one renderer per section."""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from schemas.vocabulary import DESIGNS, POLICIES
from tasks.report.charts import (
    CHANGE_COLORS,
    DESIGN_COLORS,
    POLICY_COLORS,
    SLOT_COLORS,
    PolicyPoint,
    Row,
    change_chart,
    cost_agreement_chart,
    dot_rows_chart,
    esc,
    interval_chart,
    pct,
    share_bar_chart,
)
from tasks.report.tables import (
    GROUP,
    KEY_COLS,
    Col,
    empty,
    group_rows,
    legend,
    ordered,
    present,
    row_title,
    section,
    table,
)

__all__ = [
    "bias_section",
    "changes_section",
    "cost_section",
    "designs_section",
    "disclosure_section",
    "glance",
    "realised_section",
    "run_header",
    "scores_section",
]


_MONO_WORDS = {"hash", "commit", "version", "id", "manifest", "plan"}
"""Header keys naming identifiers: their values are set in a monospace font."""


def run_header(header: dict[str, str]) -> str:
    """The page header: run title and every header field, identifiers in monospace."""
    run = next((header[k] for k in ("run_id", "run id", "run") if k in header), None)
    items = "".join(
        f'<div class="{"wide" if len(str(v)) > 36 else ""}"><dt>{esc(k.replace("_", " "))}</dt>'
        '<dd class="'
        f"{'mono' if _MONO_WORDS & set(re.split(r'[^a-z]+', k.lower())) else ''}"
        f'">{esc(v)}</dd></div>'
        for k, v in header.items()
    )
    title = f"Run {esc(run)}" if run is not None else "judgeline run"
    return (
        f'<header id="header"><p class="kicker">judgeline report</p><h1>{title}</h1>'
        f'<dl class="meta">{items}</dl></header>'
    )


def glance(disclosure: pd.DataFrame, summary: pd.DataFrame) -> str:
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
    if not tiles:
        return ""
    cells = "".join(
        f'<div class="tile"><b>{esc(v)}</b><span>{esc(lbl)}</span>'
        + (f"<small>{esc(note)}</small>" if note else "")
        + "</div>"
        for v, lbl, note in tiles
    )
    return f'<div class="tiles" id="glance">{cells}</div>'


def disclosure_section(frame: pd.DataFrame) -> str:
    """Every planned call counted: slot outcomes, dispositions and correctness."""
    lead = (
        "Every planned call is counted; nothing leaves a denominator. Slots are single calls; "
        "dispositions are (pair, seed) judged in both orders. <b>Consistency</b> (stable "
        "among decisive-or-tied pairs) and <b>accuracy of stable</b> (stable decisions "
        "matching the key) are separate columns: a judge can be consistent and wrong."
    )
    if frame.empty:
        return section("disclosure", "Disclosure", lead, empty("disclosure rows"))
    calls, disp, right = "Calls (slots)", "Two-order dispositions", "Correctness"
    cols = [
        *KEY_COLS,
        Col("planned", "planned", "int", calls),
        Col("valid", "valid", "int", calls, tip="A, B or T"),
        Col("missing", "missing", "int", calls),
        Col("invalid", "invalid", "int", calls),
        Col("abstained", "abstained", "int", calls),
        Col("tied", "tied", "int", calls),
        Col("conflicting", "conflicting", "int", disp, tip="order_conflict"),
        Col("mixed", "mixed", "int", disp),
        Col("stable", "stable", "int", disp, tip="stable_A or stable_B"),
        Col("stable_tie", "stable tie", "int", disp),
        Col("incomplete", "incomplete", "int", disp),
        Col("consistency", "consistency", "pct", disp, bar=True),
        Col("stable_correct", "stable correct", "int", right),
        Col("stable_wrong", "stable wrong", "int", right, tip="consistent but wrong"),
        Col("accuracy_of_stable", "accuracy of stable", "pct", right, bar=True),
    ]
    return section("disclosure", "Disclosure", lead, table(frame, cols, table_id="t-disclosure"))


def scores_section(frame: pd.DataFrame) -> str:
    """Decision scores with 95% intervals per design and policy."""
    lead = (
        "Mean decision score against the key (1 correct, ½ neutral, 0 wrong) with its 95% "
        "interval, per reference design and stopping policy."
    )
    if frame.empty:
        return section("scores", "Scores", lead, empty("scores"))
    designs = present(frame, "design", DESIGNS)
    policies = present(frame, "policy", POLICIES)
    rows = []
    for key, records in group_rows(frame).items():
        row = Row(*row_title(key))
        for rec in records:
            row.values.setdefault(str(rec["design"]), {})[str(rec["policy"])] = (
                float(rec["score"]),
                _float(rec["ci_low"]),
                _float(rec["ci_high"]),
            )
        rows.append(row)
    chart = interval_chart(rows, designs, policies, "decision score (95% interval)")
    cols = [
        *KEY_COLS,
        Col("design", "Design"),
        Col("policy", "Policy"),
        Col("pairs", "pairs", "int"),
        Col("score", "score", "score"),
        Col("ci_low", "95% low", "score"),
        Col("ci_high", "95% high", "score"),
    ]
    key_html = legend([(p, POLICY_COLORS.get(p, "#333")) for p in policies])
    body = f"<figure>{key_html}{chart}</figure>{table(frame, cols, table_id='t-scores')}"
    return section("scores", "Scores", lead, body)


def _float(value: Any) -> float:
    return math.nan if value is None or pd.isna(value) else float(value)


def cost_section(summary: pd.DataFrame, components: pd.DataFrame) -> str:
    """Adaptive policies against the nonadaptive baselines' cost-agreement envelope."""
    lead = (
        "Each adaptive policy against nonadaptive baselines that decide from a fixed random "
        "subset of the reference calls (grey: k calls, or one order-balanced pair). The dashed "
        "line is their upper concave envelope: the best agreement any mixture of them reaches "
        "at that expected cost. A policy's horizontal line ends where a mixture first matches "
        "its agreement; the label is the extra calls that mixture needs."
    )
    adaptive = summary[summary["policy"] != "full"]
    designs = present(pd.concat([adaptive, components]), "design", DESIGNS)
    if not designs or components.empty:
        return section("cost", "Cost versus agreement", lead, empty("baseline components"))
    shown = "balanced" if "balanced" in designs else designs[0]
    charts = []
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
        charts.append(cost_agreement_chart(judge, f"{config} · {dataset}", comps, points, k))
    policies = present(adaptive, "policy", POLICIES)
    key_html = legend(
        [(p, POLICY_COLORS.get(p, "#333")) for p in policies] + [("nonadaptive", "#6b7280")],
        hollow=["nonadaptive"],
    )
    note = f'<p class="note">Charts show the <b>{esc(shown)}</b> reference design; the table '
    note += "below lists every design.</p>"
    cols = [
        *KEY_COLS,
        Col("design", "Design"),
        Col("policy", "Policy"),
        Col("pairs", "pairs", "int"),
        Col("expected_calls", "expected calls", "calls"),
        Col("savings", "savings", "pct", bar=True),
        Col("p_change", "decisions changed", "pct2"),
        Col("match_cost", "cost to match", "calls"),
        Col("match_extra", "extra to match", "extra"),
        Col("expected_score", "expected score", "score"),
        Col("reference_score", "reference score", "score"),
        Col("added_variance", "added variance", "var"),
    ]
    body = f"{key_html}{note}<div class='grid-charts'>{''.join(charts)}</div>" + table(
        summary, cols, table_id="t-policies"
    )
    return section("cost", "Cost versus agreement", lead, body)


def _opt(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def bias_section(frame: pd.DataFrame) -> str:
    """Which slot won both orders among two-order conflicts."""
    lead = (
        "Among two-order conflicts (the same seed judged in both orders gave opposite "
        "identities), which slot won both times. A judge without position bias splits "
        "evenly; a left-biased judge shows mostly <b>Left</b>."
    )
    if frame.empty:
        return section("bias", "Position bias", lead, empty("position-bias rows"))
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
    cols = [
        *KEY_COLS,
        Col("conflicts", "order conflicts", "int"),
        Col("left_left", "Left won both", "int"),
        Col("right_right", "Right won both", "int"),
        Col("left_share", "Left share", "pct", bar=True),
        Col("right_share", "Right share", "pct", bar=True),
    ]
    if "left_share_of_decisive" in frame:  # the warehouse query adds it; optional here
        cols.append(
            Col("left_share_of_decisive", "Left among all decisive", "pct",
                tip="share of all decisive calls won by the left slot")
        )  # fmt: skip
    key_html = legend(
        [("Left slot won both orders", SLOT_COLORS["left_left"]),
         ("Right slot won both orders", SLOT_COLORS["right_right"])]
    )  # fmt: skip
    body = f"<figure>{key_html}{share_bar_chart(rows)}</figure>" + table(
        shares, cols, table_id="t-bias"
    )
    return section("bias", "Position bias", lead, body)


def changes_section(summary: pd.DataFrame) -> str:
    """How often each adaptive policy changes the reference decision, by kind."""
    lead = (
        "How often a stopping policy's decision differs from the full reference decision on "
        "the same assignment, by kind. A neutral→decisive change keeps the expected score "
        "but adds variance; a reversal flips the winner."
    )
    adaptive = summary[summary["policy"] != "full"]
    if adaptive.empty:
        return section("changes", "Decision changes", lead, empty("adaptive policies"))
    designs = present(adaptive, "design", DESIGNS)
    policies = present(adaptive, "policy", POLICIES)
    rows = []
    for key, records in group_rows(adaptive).items():
        row = Row(*row_title(key))
        for rec in records:
            row.values.setdefault(str(rec["design"]), {})[str(rec["policy"])] = (
                float(rec["p_neutral_to_decisive"]),
                float(rec["p_decisive_to_neutral"]),
                float(rec["p_reversal"]),
            )
        rows.append(row)
    names = {
        "p_neutral_to_decisive": "neutral → decisive",
        "p_decisive_to_neutral": "decisive → neutral",
        "p_reversal": "reversal",
    }
    key_html = legend([(names[k], c) for k, c in CHANGE_COLORS.items()])
    chart = change_chart(rows, designs, policies)
    return section("changes", "Decision changes", lead, f"<figure>{key_html}{chart}</figure>")


def designs_section(frame: pd.DataFrame) -> str:
    """The three reference designs side by side, averaged over pairs."""
    lead = (
        "The three reference designs spend the same expected calls but differ in the joint "
        "assignment of orders to seeds. Expected score, P(neutral) and expected pairwise call "
        "agreement, averaged over pairs. With K = 4 and decisive outcomes, independent orders "
        "capture exactly ¾ of the agreement gap between common and balanced."
    )
    if frame.empty:
        return section("designs", "Reference designs", lead, empty("design rows"))
    means = (
        frame.groupby([*GROUP, "design"], sort=True)
        .agg(
            pairs=("pair_id", "nunique"),
            expected_score=("expected_score", "mean"),
            p_neutral=("p_neutral", "mean"),
            expected_agreement=("expected_agreement", "mean"),
        )
        .reset_index()
    )
    wide = means.pivot_table(
        index=list(GROUP),
        columns="design",
        values=["expected_score", "p_neutral", "expected_agreement"],
        aggfunc="first",
    )
    wide.columns = [f"{pair[0]}:{pair[1]}" for pair in wide.columns.to_flat_index()]
    wide = wide.reset_index()
    pairs = means.groupby(list(GROUP), sort=True)["pairs"].max().reset_index()
    wide = ordered(wide.merge(pairs, on=list(GROUP)))
    designs = present(means, "design", DESIGNS)
    if {"common", "independent", "balanced"} <= set(designs):
        gap = wide["expected_agreement:balanced"] - wide["expected_agreement:common"]
        wide["captured"] = (
            wide["expected_agreement:independent"] - wide["expected_agreement:common"]
        ) / gap.where(gap.abs() > 1e-12)
    cols: list[Col] = [*KEY_COLS, Col("pairs", "pairs", "int")]
    for metric, label, kind in (
        ("expected_score", "Expected score", "score"),
        ("p_neutral", "P(neutral)", "pct"),
        ("expected_agreement", "Expected agreement", "pct"),
    ):
        cols += [Col(f"{metric}:{d}", d, kind, label) for d in designs]  # type: ignore[arg-type]
    if "captured" in wide:
        cols.append(
            Col("captured", "share captured", "pct", "Independent",
                tip="(independent − common) / (balanced − common) agreement")
        )  # fmt: skip
    rows = [
        (
            *row_title((str(r["judge"]), str(r["config"]), str(r["dataset"]))),
            {d: _float(r.get(f"expected_agreement:{d}")) for d in designs},
        )
        for r in wide.to_dict("records")
    ]
    chart = dot_rows_chart(rows, DESIGN_COLORS, "expected pairwise call agreement")
    key_html = legend([(d, DESIGN_COLORS.get(d, "#333")) for d in designs])
    body = f"<figure>{key_html}{chart}</figure>" + table(wide, cols, table_id="t-designs")
    return section("designs", "Reference designs", lead, body)


def realised_section(realised: pd.DataFrame, summary: pd.DataFrame) -> str:
    """A live run's realised savings against the savings replay expects."""
    lead = (
        "Savings the live run realised against the savings replay expects for the same "
        "policy (balanced design where the summary has several)."
    )
    if realised.empty:
        return section("realised", "Realised savings", lead, empty("live-run rows"))
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
    chart = dot_rows_chart(
        rows, colors, "share of planned calls saved", hollow=["expected"], from_zero=True
    )
    key_html = legend(list(colors.items()), hollow=["expected"])
    cols = [
        *KEY_COLS,
        Col("policy", "Policy"),
        Col("design", "Design"),
        Col("planned_calls", "planned calls", "int"),
        Col("realised_calls", "realised calls", "int"),
        Col("realised_savings", "realised savings", "pct", bar=True),
        Col("savings", "expected savings", "pct", bar=True),
        Col("gap", "realised − expected", "extra"),
    ]
    body = f"<figure>{key_html}{chart}</figure>" + table(joined, cols, table_id="t-realised")
    return section("realised", "Realised savings", lead, body)
