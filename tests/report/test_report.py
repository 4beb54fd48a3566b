"""The HTML report: sections, numbers, escaping, self-containment and determinism."""

from __future__ import annotations

import html as html_module
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tasks.errors import InputError
from tasks.replay.matching import cost_to_match
from tasks.report.render import ReportData, render_report, validate_report_data, write_report

JUDGES = {
    # name: (accuracy of stable, consistency, share of conflicts won by Left, noise)
    "strong": (0.92, 0.95, 0.5, 0.02),
    "left-biased": (0.80, 0.55, 0.9, 0.05),
    "noisy": (0.70, 0.60, 0.5, 0.20),
}
CONFIGS = ("low", "high")
DATASET = "judgebench"
PAIRS = 100
K = 4
BASE_CALLS = {"full": 4.0, "nonstrict": 2.6, "strict": 3.2, "paired_unanimity": 2.9}
BASE_CHANGE = {"full": 0.0, "nonstrict": 0.04, "strict": 0.0, "paired_unanimity": 0.012}


def _disclosure(key: dict[str, Any], g: int, acc: float, cons: float) -> dict[str, Any]:
    pair_seeds = PAIRS * K
    missing, invalid, abstained = 3 + g, 2, 1
    stable = round(pair_seeds * cons * 0.9)
    conflicting = round((pair_seeds - stable) * 0.7)
    mixed = pair_seeds - stable - conflicting - 6
    correct = round(stable * acc)
    return key | {
        "planned": 2 * pair_seeds,
        "valid": 2 * pair_seeds - missing - invalid - abstained,
        "missing": missing,
        "invalid": invalid,
        "abstained": abstained,
        "tied": 10 + g,
        "conflicting": conflicting,
        "mixed": mixed,
        "stable": stable,
        "stable_tie": 2,
        "incomplete": 4,
        "stable_correct": correct,
        "stable_wrong": stable - correct,
        "consistency": stable / (stable + conflicting + mixed),
        "accuracy_of_stable": correct / stable,
    }


def _components(key: dict[str, Any], design: str, noise: float) -> list[dict[str, Any]]:
    rows = [
        key
        | {
            "design": design,
            "component": f"k={k}",
            "cost": float(k),
            "agreement": 1.0 - (0.3 - noise / 2) * (K - k) / K,
        }
        for k in range(1, K + 1)
    ]
    if design == "balanced":
        rows.append(
            key
            | {
                "design": design,
                "component": "balanced pair",
                "cost": 2.0,
                "agreement": 0.9 - noise,
            }
        )
    return rows


def _policy(
    key: dict[str, Any], design: str, policy: str, score: float, noise: float, comps: list[dict]
) -> dict[str, Any]:
    adaptive = policy != "full"
    calls = BASE_CALLS[policy] + (noise if adaptive else 0.0)
    change = BASE_CHANGE[policy] + (noise / 10 if adaptive else 0.0)
    match = cost_to_match([c["cost"] for c in comps], [c["agreement"] for c in comps], 1 - change)
    return key | {
        "design": design,
        "policy": policy,
        "pairs": PAIRS,
        "expected_calls": calls,
        "p_change": change,
        "p_neutral_to_decisive": change * 0.5,
        "p_decisive_to_neutral": change * 0.3,
        "p_reversal": change * 0.2,
        "expected_score": score,
        "reference_score": score,
        "added_variance": change / 4 / PAIRS,
        "savings": 1 - calls / K,
        "match_cost": match if adaptive else None,
        "match_extra": match / calls - 1 if adaptive else None,
    }


def synthetic_report_data(*, realised: bool = True) -> ReportData:
    """Three judges x two configs, like the demo: strong, left-biased and noisy."""
    disclosure, scores, summary, components, design, bias, live = [], [], [], [], [], [], []
    groups = [(j, c) for j in JUDGES for c in CONFIGS]
    for g, (judge, config) in enumerate(groups):
        acc, cons, left_share, noise = JUDGES[judge]
        key: dict[str, Any] = {"judge": judge, "config": config, "dataset": DATASET}
        row = _disclosure(key, g, acc, cons + (0.02 if config == "high" else 0.0))
        disclosure.append(row)
        left = round(row["conflicting"] * left_share)
        conflicts = row["conflicting"]
        bias.append(
            key | {"conflicts": conflicts, "left_left": left, "right_right": conflicts - left}
        )
        for d_i, dsg in enumerate(("common", "independent", "balanced")):
            comps = _components(key, dsg, noise)
            components += comps
            policies = ["full", "nonstrict", "strict"]
            policies += ["paired_unanimity"] if dsg == "balanced" else []
            for p_i, pol in enumerate(policies):
                score = acc - 0.1 * noise - 0.01 * d_i - 0.003 * p_i
                scores.append(
                    key
                    | {"design": dsg, "policy": pol, "score": score, "ci_low": score - 0.05,
                       "ci_high": score + 0.05, "pairs": PAIRS}
                )  # fmt: skip
                summary.append(_policy(key, dsg, pol, score, noise, comps))
        calls = round(PAIRS * (BASE_CALLS["paired_unanimity"] + noise)) + 3
        live.append(
            key
            | {"policy": "paired_unanimity", "planned_calls": PAIRS * K, "realised_calls": calls,
               "realised_savings": 1 - calls / (PAIRS * K)}
        )  # fmt: skip
        for n in range(8):
            common_agree = 0.45 + 0.04 * n
            gap = 0.2 - noise / 2
            for dsg, agree in (
                ("common", common_agree),
                ("independent", common_agree + 0.75 * gap),
                ("balanced", common_agree + gap),
            ):
                design.append(
                    key
                    | {"pair_id": f"p{n:03d}", "design": dsg, "expected_score": acc - 0.01 * n,
                       "p_neutral": 0.05 + 0.01 * n, "expected_agreement": agree}
                )  # fmt: skip
    return ReportData(
        header={
            "run_id": "run-2026-11-29-demo",
            "date": "2026-11-29",
            "config": "demo.yaml (sha256 3f2a…)",
            "manifest_hash": "a" * 64,
            "plan_hash": "b" * 64,
            "code_version": "9738a06 (dirty)",
        },
        disclosure=pd.DataFrame(disclosure),
        scores=pd.DataFrame(scores),
        summary=pd.DataFrame(summary),
        components=pd.DataFrame(components),
        design=pd.DataFrame(design),
        position_bias=pd.DataFrame(bias),
        realised=pd.DataFrame(live) if realised else None,
    )


@pytest.fixture(scope="module")
def data() -> ReportData:
    return synthetic_report_data()


@pytest.fixture(scope="module")
def html(data: ReportData) -> str:
    return render_report(data)


def _section(html: str, sid: str) -> str:
    match = re.search(rf'<section id="{sid}">(.*?)</section>', html, re.S)
    assert match, f"section {sid} missing"
    return match.group(1)


def test_every_section_present(html: str) -> None:
    assert html.startswith("<!DOCTYPE html>")
    assert "run-2026-11-29-demo" in html and "a" * 64 in html and "9738a06 (dirty)" in html
    for sid, title in [
        ("disclosure", "Disclosure"),
        ("scores", "Scores"),
        ("cost", "Cost versus agreement"),
        ("bias", "Position bias"),
        ("changes", "Decision changes"),
        ("designs", "Reference designs"),
        ("realised", "Realised savings"),
    ]:
        assert f"<h2>{title}</h2>" in _section(html, sid)
        assert f'href="#{sid}"' in html


def test_disclosure_numbers_and_separate_rates(html: str, data: ReportData) -> None:
    part = _section(html, "disclosure")
    rows = re.findall(r"<tbody>(.*?)</tbody>", part, re.S)[0].split("</tr>")[:-1]
    assert len(rows) == 6
    first = data.disclosure.sort_values(["judge", "config"]).iloc[0]
    assert first["judge"] == "left-biased" and first["config"] == "high"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", rows[0])
    # one dataset: the column is dropped and named once above the table
    assert "Every row: dataset judgebench." in part
    assert cells[:2] == ["left-biased", "high"]
    assert cells[2] == f"{first['planned']:,}" == "800"
    # consistency and accuracy of stable are separate, never merged into one number
    assert cells[13] == f"{100 * first['consistency']:.1f}%"
    assert cells[16] == f"{100 * first['accuracy_of_stable']:.1f}%"
    assert "consistency" in part and "accuracy of stable" in part


def test_score_and_policy_numbers(html: str, data: ReportData) -> None:
    row = data.scores.iloc[0]
    scores = _section(html, "scores")
    assert f">{row['score']:.3f}<" in scores and f">{row['ci_low']:.3f}<" in scores
    cost = _section(html, "cost")
    adaptive = data.summary[data.summary["policy"] != "full"]
    assert len(adaptive) == 6 * 7
    for rec in adaptive.to_dict("records"):
        # noisy's nonstrict sits on the envelope: its extra is a -4e-16 residue, shown as +0.0%
        extra = abs(rec["match_extra"]) if abs(rec["match_extra"]) < 1e-12 else rec["match_extra"]
        assert f">+{100 * extra:.1f}%</td>" in cost  # the policy table
        if rec["design"] == "balanced":  # the charts show the balanced design
            assert f">+{100 * extra:.0f}%</text>" in cost
    assert "-0.0%" not in cost
    assert cost.count('class="envelope"') == 6
    savings = _section(html, "realised")
    pu = data.summary[
        (data.summary["judge"] == "strong")
        & (data.summary["config"] == "low")
        & (data.summary["policy"] == "paired_unanimity")
    ].iloc[0]
    assert data.realised is not None
    live = data.realised.set_index(["judge", "config"]).loc[("strong", "low")]
    assert f">{100 * pu['savings']:.1f}%<" in savings
    assert f">{100 * (live['realised_savings'] - pu['savings']):.1f}%<" in savings


def test_design_comparison_shows_three_quarters(html: str) -> None:
    part = _section(html, "designs")
    rows = re.findall(r"<tbody>(.*?)</tbody>", part, re.S)[0].split("</tr>")[:-1]
    assert len(rows) == 6
    for row in rows:
        assert re.findall(r"<td[^>]*>(.*?)</td>", row)[-1] == "75.0%"


def test_design_lead_states_the_captured_share_for_the_run_k(data: ReportData) -> None:
    def lead(report: ReportData) -> str:
        part = _section(render_report(report), "designs")
        return " ".join(part.split("<figure>")[0].split())

    assert "With K = 4 and decisive outcomes" in lead(data) and "exactly 3/4 " in lead(data)
    summary = data.summary.copy()
    summary.loc[summary["policy"] == "full", "expected_calls"] = 2.0  # a K = 2 run
    two = lead(replace(data, summary=summary))
    assert "With K = 2 and decisive outcomes" in two and "exactly 1/2 " in two
    assert "K = 4" not in two and "3/4" not in two


def test_position_bias_shares(html: str, data: ReportData) -> None:
    part = _section(html, "bias")
    biased = data.position_bias[data.position_bias["judge"] == "left-biased"].iloc[0]
    share = biased["left_left"] / biased["conflicts"]
    assert f"Left {100 * share:.0f}%" in part
    assert f"{biased['conflicts']:,} conflicts" in part


def test_self_contained(html: str) -> None:
    without_ns = re.sub(r'xmlns="[^"]*"', "", html)
    for needle in ("http://", "https://", "//cdn", "<link", "@import", "url("):
        assert needle not in without_ns, needle
    assert not re.search(r"<(img|iframe)\b", html)
    assert not re.search(r"<script[^>]+src=", html)


def test_svg_count(html: str) -> None:
    # scores, 6 cost charts (one per judge x config), bias, changes, designs, realised
    assert html.count("<svg") == 11
    assert html.count("</svg>") == 11
    assert len(re.findall(r"<table class=\"sortable\"", html)) == 6


def test_strings_from_data_are_escaped(data: ReportData) -> None:
    evil = '<script>alert("x")</script>'
    frames = {}
    for name in ("disclosure", "scores", "summary", "components", "design", "position_bias"):
        frame = getattr(data, name).copy()
        frame["judge"] = frame["judge"].replace("noisy", evil)
        frame["config"] = frame["config"].replace("low", 'a&b"<c>')
        frames[name] = frame
    assert data.realised is not None
    live = data.realised.copy()
    live["judge"] = live["judge"].replace("noisy", evil)
    hostile = ReportData(
        header={"run_id": "<b>run</b>", "note": "<img src=x onerror=alert(1)>"},
        realised=live,
        **frames,
    )
    html = render_report(hostile)
    assert evil not in html
    assert "<img" not in html and "<b>run</b>" not in html
    assert html.count("<script>") == 1  # only the report's own sorting script
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "a&amp;b&quot;&lt;c&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_deterministic_and_independent_of_row_order(data: ReportData, html: str) -> None:
    assert render_report(data) == html
    assert data.realised is not None
    shuffled = ReportData(
        header=dict(data.header),
        **{
            name: getattr(data, name).sample(frac=1.0, random_state=7).reset_index(drop=True)
            for name in ("disclosure", "scores", "summary", "components", "design",
                         "position_bias", "realised")
        },
    )  # fmt: skip
    assert render_report(shuffled) == html


def test_realised_section_is_optional() -> None:
    html = render_report(synthetic_report_data(realised=False))
    assert 'id="realised"' not in html
    assert html.count("<svg") == 10


def test_empty_frames_say_so(data: ReportData) -> None:
    empty = ReportData(
        header={"run_id": "r"},
        disclosure=data.disclosure.iloc[0:0],
        scores=data.scores.iloc[0:0],
        summary=data.summary.iloc[0:0],
        components=data.components.iloc[0:0],
        design=data.design.iloc[0:0],
        position_bias=data.position_bias.iloc[0:0],
    )
    html = render_report(empty)
    assert html.count('class="empty"') == 6
    assert "<svg" not in html


@pytest.mark.parametrize(
    ("frame", "column", "value", "message"),
    [
        ("scores", "ci_high", 1.7,
         r"report input `scores`: row 3 \(judge=strong.*`ci_high` = 1.7 is outside \[0, 1\]"),
        ("disclosure", "planned", "many", r"row 2 .*`planned` = 'many' is not a number"),
        ("position_bias", "conflicts", -1, r"`conflicts` = -1 is negative"),
        ("summary", "p_change", None, r"`p_change` = None is missing"),
    ],
)  # fmt: skip
def test_bad_values_are_named(
    data: ReportData, frame: str, column: str, value: object, message: str
) -> None:
    bad = getattr(data, frame).copy()
    bad[column] = bad[column].astype(object)
    pos = 2 if frame == "scores" else 1
    if frame == "scores":
        bad.loc[:, "judge"] = "strong"
    bad.loc[pos, column] = value
    broken = ReportData(**{**data.__dict__, frame: bad})
    with pytest.raises(InputError, match=message):
        validate_report_data(broken)
    with pytest.raises(InputError):
        render_report(broken)


def test_missing_columns_are_named(data: ReportData) -> None:
    broken = ReportData(**{**data.__dict__, "components": data.components.drop(columns="cost")})
    with pytest.raises(InputError, match=r"report input `components`: missing columns \['cost'\]"):
        render_report(broken)


def test_write_report_is_atomic_and_replaces(tmp_path: Path, data: ReportData, html: str) -> None:
    target = tmp_path / "runs" / "r1" / "report.html"
    assert write_report(data, target) == target
    assert target.read_text("utf-8") == html
    target.write_text("stale", "utf-8")
    write_report(data, target)
    assert target.read_text("utf-8") == html
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.html"]


def test_optional_left_share_of_decisive_column(data: ReportData) -> None:
    bias = data.position_bias.assign(left_share_of_decisive=0.6125)
    html = render_report(ReportData(**{**data.__dict__, "position_bias": bias}))
    part = _section(html, "bias")
    assert "Left among all decisive" in part
    assert part.count(">61.3%</td>") == 6
    assert "Left among all decisive" not in _section(render_report(data), "bias")


def test_rows_follow_natural_order(data: ReportData) -> None:
    # configs "r2" and "r10": numbers inside names sort as numbers in every table and chart
    def rename(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.assign(config=frame["config"].map({"low": "r10", "high": "r2"}))

    frames = {
        name: rename(getattr(data, name))
        for name in ("disclosure", "scores", "summary", "components", "design", "position_bias")
    }
    html = render_report(ReportData(header=data.header, **frames))
    for sid in ("disclosure", "scores", "cost", "bias", "changes", "designs"):
        part = _section(html, sid)
        assert 0 < part.index("r2") < part.index("r10"), sid


def test_changes_section_states_the_half_bound_at_its_scope_and_flags_reversals() -> None:
    """docs/design.md#scope-of-the-half-bound: the bound is stated for K <= 4 with the K = 6
    counterexample; a paired policy reversing decisions in the run is flagged."""
    data = synthetic_report_data()
    summary = data.summary.assign(
        p_reversal=data.summary["p_reversal"].where(
            data.summary["policy"] != "paired_unanimity", 0.0
        )
    )
    quiet = _section(render_report(replace(data, summary=summary)), "changes")
    assert "K ≤ 4" in quiet
    assert "AA AA AA AA AB BA" in quiet and "This run has K = 4." in quiet
    assert "Reversals above zero" not in quiet
    flagged = _section(render_report(data), "changes")  # synthetic: paired reversals above zero
    most = data.summary.query("policy == 'paired_unanimity'")["p_reversal"].max()
    assert f"paired_unanimity in 6 groups (up to {100 * most:.2f}%)" in flagged


def test_changes_section_says_what_the_run_k_makes_false() -> None:
    """At K = 4 every statement holds; at K = 8 paired unanimity can change more decisions
    than nonstrict and reverse them, and the section says so beside the policy."""
    data = synthetic_report_data()
    at_4 = _section(render_report(data), "changes")
    assert "At this run's K" not in at_4
    at_8 = data.summary.assign(expected_calls=data.summary["expected_calls"] * 2)
    section = _section(render_report(replace(data, summary=at_8)), "changes")
    assert "This run has K = 8." in section
    assert "paired_unanimity can change more decisions than nonstrict" in section
    assert "paired_unanimity_2 can reverse" not in section  # from K = 10


def _label_boxes(svg: str) -> list[tuple[str, float, float, float, float]]:
    """(text, x0, x1, y0, y1) of each point label of a chart: 5.8 px a character."""
    boxes = []
    for x, y, anchor, _cls, text in re.findall(
        r'<text x="([\d.-]+)" y="([\d.-]+)" text-anchor="(\w+)" class="(note|value)"[^>]*>'
        r"([^<]*)</text>",
        svg,
    ):
        width = 5.8 * len(html_module.unescape(text))
        x0 = {"start": float(x), "end": float(x) - width}.get(anchor, float(x) - width / 2)
        boxes.append((text, x0, x0 + width, float(y) - 9, float(y) + 2))
    return boxes


def test_cost_chart_at_k_2_puts_each_label_apart() -> None:
    """At K = 2 the balanced pair is k=2 (the full reference), and strict and paired
    unanimity never stop early: their labels and dots were drawn on one spot."""
    from tasks.report.charts import PolicyPoint, cost_agreement_chart
    from tasks.report.svg import POLICY_COLORS

    components = [("k=1", 1.0, 0.81), ("balanced pair", 2.0, 1.0), ("k=2", 2.0, 1.0)]
    policies = [
        PolicyPoint("nonstrict", 1.2, 0.86, 1.25, 0.04),
        *(PolicyPoint(p, 2.0, 1.0, 2.0, 0.0) for p in ("strict", "paired_unanimity")),
    ]
    svg = str(cost_agreement_chart("strong", "low · demo", components, policies, 2))
    boxes = _label_boxes(svg)
    texts = [b[0] for b in boxes]
    assert sorted(texts) == sorted(["k=1", "balanced pair · k=2", "+4%"]), texts
    for i, a in enumerate(boxes):
        assert a[1] >= 0 and a[2] <= 372, a  # inside the chart
        for b in boxes[i + 1 :]:
            apart = a[2] <= b[1] or b[2] <= a[1] or a[4] <= b[3] or b[4] <= a[3]
            assert apart, (a, b)
    assert svg.count('class="component"') == 2  # k=2 and the balanced pair: one mark
    # Both policies on the reference show their colour, in one dot cut in two.
    for policy in ("strict", "paired_unanimity"):
        assert f'fill="{POLICY_COLORS[policy]}"/>' in svg, policy
    assert svg.count("<path d=") == 2
