"""Row-by-panel charts: one row per (judge, config, dataset) group, one panel per design."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from markupsafe import Markup

from tasks.report.filters import esc, pct
from tasks.report.svg import (
    CHANGE_COLORS,
    INK,
    POLICY_COLORS,
    Scale,
    clip,
    nice_ticks,
    num,
    ok,
    svg_doc,
    svg_text,
    x_axis,
)
from tasks.report.tables import group_rows, row_title


@dataclass
class Row:
    """One labelled row of a panel chart: a (judge, config, dataset) group."""

    title: str
    subtitle: str
    # values[panel][series] -> the numbers the mark needs
    values: dict[str, dict[str, tuple[float, ...]]] = field(default_factory=dict)


def panel_rows(
    frame: pd.DataFrame, marks: Callable[[dict[str, Any]], tuple[float, ...]]
) -> list[Row]:
    """One row per (judge, config, dataset) group of `frame`, in the frame's order; each
    record's `marks` go under its design (the panel) and policy (the series)."""
    rows = []
    for key, records in group_rows(frame).items():
        row = Row(*row_title(key))
        for rec in records:
            row.values.setdefault(str(rec["design"]), {})[str(rec["policy"])] = marks(rec)
        rows.append(row)
    return rows


def _panel_frame(
    rows: Sequence[Row],
    panels: Sequence[str],
    series: Sequence[str],
    domain: tuple[float, float],
    x_label: str,
    as_pct: bool,
) -> tuple[list[str], dict[str, Scale], list[float], float, float]:
    """Labels, grid and axes shared by the row-by-panel charts; returns the pieces to draw on.

    Rows are (judge, config, dataset) groups; each row has one sub-row per series (policy),
    and each panel is a reference design, so designs are compared at a glance.
    """
    label_w, series_w, gap, width = 170.0, 100.0, 22.0, 1160.0
    sub_h, pad = 13.0, 9.0
    row_h = max(len(series) * sub_h + 2 * pad, 40.0)
    top, head = 8.0, 24.0
    body_top = top + head
    height = body_top + row_h * len(rows) + 36
    panel_w = (width - label_w - series_w - gap * (len(panels) - 1) - 8) / max(len(panels), 1)
    ticks = nice_ticks(*domain)
    lo, hi = ticks[0], ticks[-1]
    scales: dict[str, Scale] = {}
    parts: list[str] = []
    body_bottom = body_top + row_h * len(rows)
    for i, row in enumerate(rows):
        y0 = body_top + i * row_h
        if i % 2 == 0:
            parts.append(
                f'<rect x="0" y="{num(y0)}" width="{num(width)}" height="{num(row_h)}" '
                'class="band"/>'
            )
        mid = y0 + row_h / 2
        parts.append(
            f"<g><title>{esc(row.title)} · {esc(row.subtitle)}</title>"
            + svg_text(6, mid - 3, clip(row.title), cls="row-title")
            + svg_text(6, mid + 11, clip(row.subtitle, 36), cls="row-sub")
            + "</g>"
        )
        for j, name in enumerate(series):
            sy = y0 + pad + (j + 0.5) * sub_h
            color = POLICY_COLORS.get(name, INK)
            parts.append(
                f'<text x="{num(label_w + series_w - 8)}" y="{num(sy + 3.5)}" text-anchor="end" '
                f'class="series" style="fill:{color}">{esc(name.replace("_", " "))}</text>'
            )
    for k, panel in enumerate(panels):
        px0 = label_w + series_w + k * (panel_w + gap)
        scale = Scale(lo, hi, px0 + 6, px0 + panel_w - 6)
        scales[panel] = scale
        parts.append(x_axis(scale, ticks, body_top, body_bottom, as_pct))
        title_x = px0 + panel_w / 2
        parts.append(svg_text(title_x, top + 12, panel, cls="panel-title", anchor="middle"))
        parts.append(
            f'<line x1="{num(px0)}" x2="{num(px0 + panel_w)}" y1="{num(body_bottom)}" '
            f'y2="{num(body_bottom)}" class="axis"/>'
        )
    parts.append(
        svg_text(
            label_w + series_w + (width - label_w - series_w) / 2,
            height - 4,
            x_label,
            cls="axis-label",
            anchor="middle",
        )
    )
    return parts, scales, [body_top, row_h, pad, sub_h], width, height


def interval_chart(
    rows: Sequence[Row], panels: Sequence[str], series: Sequence[str], x_label: str
) -> Markup:
    """Dot-with-whisker chart: values[panel][series] = (score, ci_low, ci_high); a missing
    score reads "no valid outcome"."""
    lows = [v[1] for r in rows for p in r.values.values() for v in p.values() if ok(v[1])]
    highs = [v[2] for r in rows for p in r.values.values() for v in p.values() if ok(v[2])]
    domain = (min(lows, default=0.0), max(highs, default=1.0))
    parts, scales, (body_top, row_h, pad, sub_h), width, height = _panel_frame(
        rows, panels, series, domain, x_label, as_pct=False
    )
    for i, row in enumerate(rows):
        for panel, by_series in row.values.items():
            scale = scales[panel]
            for j, name in enumerate(series):
                if name not in by_series:
                    continue
                score, low, high = by_series[name]
                y = body_top + i * row_h + pad + (j + 0.5) * sub_h
                if not ok(score):
                    # No valid outcome: no score at all (never the neutral 0.5).
                    parts.append(svg_text(scale(domain[0]), y + 3.5, "no valid outcome"))
                    continue
                color = POLICY_COLORS.get(name, INK)
                tip = f"{row.title} · {row.subtitle} · {panel} · {name}: {score:.3f}"
                mark = ""
                if ok(low) and ok(high):
                    tip += f" [{low:.3f}, {high:.3f}]"
                    mark += (
                        f'<line x1="{num(scale(low))}" x2="{num(scale(high))}" y1="{num(y)}" '
                        f'y2="{num(y)}" stroke="{color}" class="whisker"/>'
                    )
                mark += f'<circle cx="{num(scale(score))}" cy="{num(y)}" r="3.6" fill="{color}"/>'
                parts.append(f"<g><title>{esc(tip)}</title>{mark}</g>")
    return svg_doc(width, height, parts, "Scores with 95% intervals")


def change_chart(rows: Sequence[Row], panels: Sequence[str], series: Sequence[str]) -> Markup:
    """Stacked bars: values[panel][policy] = (neutral->decisive, decisive->neutral, reversal)."""
    totals = [sum(v) for r in rows for p in r.values.values() for v in p.values()]
    top = max([t for t in totals if ok(t)], default=0.0)
    domain = (0.0, max(top * 1.18, 0.005))
    parts, scales, (body_top, row_h, pad, sub_h), width, height = _panel_frame(
        rows, panels, series, domain, "share of reference decisions changed", as_pct=True
    )
    kinds = list(CHANGE_COLORS)
    for i, row in enumerate(rows):
        for panel, by_series in row.values.items():
            scale = scales[panel]
            for j, name in enumerate(series):
                if name not in by_series:
                    continue
                shares = by_series[name]
                y = body_top + i * row_h + pad + j * sub_h + 2
                x = scale(0.0)
                bars = []
                for kind, share in zip(kinds, shares, strict=True):
                    if not ok(share) or share <= 0:
                        continue
                    w = scale(share) - scale(0.0)
                    bars.append(
                        f'<rect x="{num(x)}" y="{num(y)}" width="{num(max(w, 0.6))}" '
                        f'height="{num(sub_h - 4)}" fill="{CHANGE_COLORS[kind]}"/>'
                    )
                    x += w
                total = sum(s for s in shares if ok(s))
                tip = (
                    f"{row.title} · {row.subtitle} · {panel} · {name}: {pct(total, 2)} changed "
                    f"(neutral→decisive {pct(shares[0], 2)}, decisive→neutral "
                    f"{pct(shares[1], 2)}, reversal {pct(shares[2], 2)})"
                )
                label = svg_text(x + 4, y + sub_h - 5, pct(total, 2), cls="value")
                parts.append(f"<g><title>{esc(tip)}</title>{''.join(bars)}{label}</g>")
    return svg_doc(width, height, parts, "Decision changes by kind")
