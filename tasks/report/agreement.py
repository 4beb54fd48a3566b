"""The report's agreement section (docs/design.md#agreement): per judge config its
self-agreement across seeds and orders, a heatmap and table of judge-vs-judge kappa, and its
decisions against the key."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
from markupsafe import Markup

from schemas.report import AgreementTableRow, ConfusionTableRow, JudgeAgreementTableRow
from tasks.agreement.tables import (
    DECISION_CLASSES,
    config_counts,
    judge_agreement,
    key_confusion,
    self_agreement,
)
from tasks.report.filters import esc
from tasks.report.sections import Section
from tasks.report.svg import INK, clip, num, svg_doc, svg_text
from tasks.report.tables import Table, columns, table

__all__ = [
    "AGREEMENT_COLUMNS",
    "AgreementTables",
    "agreement_section",
    "agreement_tables",
    "interval_text",
    "judge_numbers",
    "judge_rows",
    "self_numbers",
    "self_rows",
]


AGREEMENT_COLUMNS = ["judge", "config", "dataset", "pair_id", "order", "outcome", "key"]
"""The outcome columns the agreement tables read."""


@dataclass(frozen=True)
class AgreementTables:
    """A run's agreement tables (`tasks.agreement.tables`)."""

    self: pd.DataFrame
    judges: pd.DataFrame
    confusion: pd.DataFrame


def agreement_tables(outcomes: pd.DataFrame) -> AgreementTables:
    """Every agreement table of a run from its outcomes (the replay input's columns)."""
    counts = config_counts(outcomes)
    return AgreementTables(self_agreement(counts), judge_agreement(counts), key_confusion(counts))


@dataclass
class AgreementSection(Section):
    """The agreement section: the self-agreement table, the kappa heatmap and tables."""

    judges: Table | None = None
    confusion: Table | None = None


def interval_text(value: float, low: float, high: float) -> str:
    """`0.712 (0.64–0.78)`; `–` when undefined; the value alone without an interval."""
    if not math.isfinite(value):
        return "–"
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{value:.3f} (no interval)"
    return f"{value:.3f} ({low:.2f}–{high:.2f})"


def self_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """`self_agreement` as the table shows it (AgreementTableRow): one row per judge config,
    each statistic and scope as `value (low–high)`."""
    rows = []
    for (judge, config), group in frame.groupby(["judge", "config"], sort=True):
        at = {(r["statistic"], r["scope"]): r for r in group.to_dict("records")}
        row: dict[str, object] = {
            "judge": judge,
            "config": config,
            "pairs": int(at[("alpha", "all")]["pairs"]),
        }
        for name, short in (("alpha", "alpha"), ("fleiss_kappa", "fleiss")):
            for scope in ("all", "within", "across"):
                r = at[(name, scope)]
                row[f"{short}_{scope}"] = interval_text(
                    float(r["value"]), float(r["low"]), float(r["high"])
                )
        rows.append(row)
    return pd.DataFrame(rows)


def _number(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _estimate(value: Any, low: Any, high: Any) -> dict[str, float | None]:
    return {"estimate": _number(value), "lower": _number(low), "upper": _number(high)}


def self_numbers(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """`self_agreement` for `--json`: per judge config its pairs and, per statistic and
    scope (`alpha_all`, ..., `fleiss_across`), the estimate and its 95% interval as numbers
    (null where undefined)."""
    out = []
    for (judge, config), group in frame.groupby(["judge", "config"], sort=True):
        at = {(r["statistic"], r["scope"]): r for r in group.to_dict("records")}
        row: dict[str, Any] = {"judge": judge, "config": config,
                               "pairs": int(at[("alpha", "all")]["pairs"])}  # fmt: skip
        for name, short in (("alpha", "alpha"), ("fleiss_kappa", "fleiss")):
            for scope in ("all", "within", "across"):
                r = at[(name, scope)]
                row[f"{short}_{scope}"] = _estimate(r["value"], r["low"], r["high"])
        out.append(row)
    return out


def judge_numbers(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """`judge_agreement` for `--json`: each two judge configs' pairs, Cohen's kappa and raw
    agreement, each as estimate, lower, upper."""
    return [
        {"first": f"{r['judge_1']} · {r['config_1']}",
         "second": f"{r['judge_2']} · {r['config_2']}", "pairs": int(r["pairs"]),
         "kappa": _estimate(r["kappa"], r["kappa_low"], r["kappa_high"]),
         "raw": _estimate(r["raw"], r["raw_low"], r["raw_high"])}
        for r in frame.to_dict("records")
    ]  # fmt: skip


def judge_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """`judge_agreement` as the table shows it (JudgeAgreementTableRow)."""
    return pd.DataFrame(
        {
            "first": frame["judge_1"] + " · " + frame["config_1"],
            "second": frame["judge_2"] + " · " + frame["config_2"],
            "pairs": frame["pairs"],
            "kappa": [
                interval_text(*v)
                for v in frame[["kappa", "kappa_low", "kappa_high"]].itertuples(index=False)
            ],
            "raw": [
                interval_text(*v)
                for v in frame[["raw", "raw_low", "raw_high"]].itertuples(index=False)
            ],
        }
    )


def _confusion_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """`key_confusion` as the table shows it (ConfusionTableRow): per (judge, config, key)
    with pairs, in sorted order, its pairs of each decision class."""
    wide: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in frame.to_dict("records"):
        at = (r["judge"], r["config"], r["key"])
        row = wide.setdefault(at, {"judge": at[0], "config": at[1], "key": at[2]})
        row[r["decision"]] = row.get(r["decision"], 0) + r["pairs"]
    rows = [wide[at] for at in sorted(wide)]
    return pd.DataFrame([r for r in rows if sum(r.get(c, 0) for c in DECISION_CLASSES) > 0])


def kappa_heatmap(frame: pd.DataFrame) -> Markup:
    """Judge-vs-judge Cohen's kappa as a symmetric grid of cells, darker for higher kappa."""
    names = sorted(
        set(frame["judge_1"] + " · " + frame["config_1"])
        | set(frame["judge_2"] + " · " + frame["config_2"])
    )
    at = {n: i for i, n in enumerate(names)}
    cell, label_w, top = 74.0, 230.0, 16.0
    width = label_w + cell * len(names) + 170  # the last rotated label runs past the grid
    height = top + cell * len(names) + 130
    parts = []
    values: dict[tuple[int, int], tuple[float, float, float, int]] = {}
    for r in frame.to_dict("records"):
        i, j = at[f"{r['judge_1']} · {r['config_1']}"], at[f"{r['judge_2']} · {r['config_2']}"]
        values[(i, j)] = values[(j, i)] = (
            float(r["kappa"]),
            float(r["kappa_low"]),
            float(r["kappa_high"]),
            int(r["pairs"]),
        )
    for i, name in enumerate(names):
        y = top + i * cell
        parts.append(
            svg_text(label_w - 8, y + cell / 2 + 4, clip(name), cls="row-title", anchor="end")
        )
        x_label = label_w + i * cell + cell / 2
        parts.append(
            f'<text x="{num(x_label)}" y="{num(top + len(names) * cell + 12)}" '
            f'transform="rotate(40 {num(x_label)} {num(top + len(names) * cell + 12)})" '
            f'class="row-sub">{esc(clip(name))}</text>'
        )
        for j in range(len(names)):
            x = label_w + j * cell
            kappa, low, high, pairs = values.get((i, j), (math.nan, math.nan, math.nan, 0))
            if i == j:
                fill, text, title = "#f3f4f6", "", f"{name}"
            elif not math.isfinite(kappa):
                fill, text, title = "#fff", "–", f"{name} · {names[j]}: kappa undefined"
            else:
                shade = max(0.0, min(1.0, kappa))
                fill = _blend(shade)
                text = f"{kappa:.2f}"
                title = (
                    f"{name} against {names[j]}: kappa {interval_text(kappa, low, high)} "
                    f"on {pairs} pairs"
                )
            ink = "#fff" if text and text != "–" and kappa > 0.55 else INK
            parts.append(
                f"<g><title>{esc(title)}</title>"
                f'<rect x="{num(x)}" y="{num(y)}" width="{num(cell - 2)}" height="{num(cell - 2)}" '
                f'fill="{fill}"/>'
                f'<text x="{num(x + cell / 2 - 1)}" y="{num(y + cell / 2 + 4)}" '
                f'text-anchor="middle" class="inbar" style="fill:{ink}">{esc(text)}</text></g>'
            )
    parts.append(_kappa_scale(label_w + cell * len(names) + 18, top, min(cell * len(names), 150)))
    return svg_doc(width, height, parts, "Cohen's kappa of every two judge configs")


def _kappa_scale(x: float, top: float, height: float) -> str:
    """The heatmap's colour legend: a bar from 1 (top) to 0 (bottom), in the cells' colours;
    kappa at or below 0 is white."""
    steps = 20
    slices = [
        f'<rect x="{num(x)}" y="{num(top + height * i / steps)}" width="12" '
        f'height="{num(height / steps + 0.5)}" fill="{_blend(1 - (i + 0.5) / steps)}"/>'
        for i in range(steps)
    ]
    frame = (
        f'<rect x="{num(x)}" y="{num(top)}" width="12" height="{num(height)}" fill="none" '
        'stroke="#d1d5db"/>'
    )
    ticks = [
        svg_text(x + 17, top + height * (1 - value) + 4, text, cls="tick")
        for value, text in ((1.0, "1"), (0.5, "0.5"), (0.0, "0 or less"))
    ]
    return (
        "<g><title>Cohen's kappa: the darker the cell, the more the two configs agree beyond "
        "chance</title>" + "".join(slices) + frame + "".join(ticks)
        + svg_text(x, top - 4, "kappa", cls="row-sub") + "</g>"
    )  # fmt: skip


def _blend(share: float) -> str:
    """White at 0 to the strict policy's blue (#0072b2) at 1."""
    r, g, b = (round(255 + (c - 255) * share) for c in (0x00, 0x72, 0xB2))
    return f"#{r:02x}{g:02x}{b:02x}"


def agreement_section(tables: AgreementTables | None) -> AgreementSection:
    """The section for a run's agreement tables (None or empty: nothing to show)."""
    out = AgreementSection("agreement", "Agreement", "Agreement across seeds, orders and judges")
    if tables is None or tables.self.empty:
        out.missing = "outcomes to compare"
        return out
    out.table = table(self_rows(tables.self), columns(AgreementTableRow), table_id="t-agree")
    if not tables.judges.empty:
        out.charts.append(kappa_heatmap(tables.judges))
        out.judges = table(
            judge_rows(tables.judges), columns(JudgeAgreementTableRow), table_id="t-agree-judges"
        )
    out.confusion = table(
        _confusion_rows(tables.confusion), columns(ConfusionTableRow), table_id="t-agree-key"
    )
    return out
