"""Inline SVG charts for the HTML report, drawn from plain numbers (no plotting library)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from tasks.replay.matching import upper_envelope

POLICY_COLORS: Mapping[str, str] = {
    "full": "#6b7280",
    "nonstrict": "#d55e00",
    "strict": "#0072b2",
    "paired_unanimity": "#009e73",
}
DESIGN_COLORS: Mapping[str, str] = {
    "common": "#cc79a7",
    "independent": "#e69f00",
    "balanced": "#0072b2",
}
CHANGE_COLORS: Mapping[str, str] = {
    "p_neutral_to_decisive": "#e69f00",
    "p_decisive_to_neutral": "#56b4e9",
    "p_reversal": "#d55e00",
}
SLOT_COLORS: Mapping[str, str] = {"left_left": "#0072b2", "right_right": "#d55e00"}
OTHER_COLOR = "#d1d5db"
MUTED = "#6b7280"
GRID = "#e5e7eb"
INK = "#1f2937"

_LABEL_CHARS = 30


def esc(value: object) -> str:
    """Escape any data-derived text for HTML or SVG text and attributes."""
    return escape(str(value), quote=True)


def pct(value: float, digits: int = 1) -> str:
    """A share as a percentage, or an em dash when unknown."""
    if value is None or math.isnan(value):
        return "—"
    return f"{100 * value:.{digits}f}%"


def signed_pct(value: float, digits: int = 1) -> str:
    """A relative change with its sign, e.g. `+23.4%`; a rounding residue reads `+0.0%`."""
    if value is None or math.isnan(value):
        return "—"
    rounded = round(100 * value, digits)
    return f"{'-' if rounded < 0 else '+'}{abs(rounded):.{digits}f}%"


def _n(value: float) -> str:
    """A coordinate, rounded so output is compact and byte-for-byte deterministic."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def _clip(text: str, limit: int = _LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] with about `count` steps (1, 2, 2.5 or 5 x 10^n)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = magnitude
    for mult in (1.0, 2.0, 2.5, 5.0, 10.0):
        step = mult * magnitude
        if (hi - lo) / step <= count:
            break
    first = math.floor(lo / step + 1e-9)
    last = max(math.ceil(hi / step - 1e-9), first + 1)
    return [round(i * step, 10) for i in range(first, last + 1)]


def _tick_label(value: float, as_pct: bool) -> str:
    if as_pct:
        return f"{100 * value:.0f}%" if abs(100 * value - round(100 * value)) < 1e-6 else pct(value)
    return f"{value:g}"


@dataclass(frozen=True)
class Scale:
    """Linear map from data values onto pixels."""

    lo: float
    hi: float
    px0: float
    px1: float

    def __call__(self, value: float) -> float:
        span = self.hi - self.lo or 1.0
        value = min(max(value, self.lo), self.hi)
        return self.px0 + (value - self.lo) / span * (self.px1 - self.px0)


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {_n(width)} {_n(height)}" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{esc(label)}" '
        f'style="max-width:{_n(width)}px">' + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, *, cls: str = "", anchor: str = "start") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}"{attr}>{esc(text)}</text>'


def _x_axis(scale: Scale, ticks: list[float], top: float, bottom: float, as_pct: bool) -> str:
    parts = []
    for tick in ticks:
        x = scale(tick)
        parts.append(
            f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{_n(top)}" y2="{_n(bottom)}" class="grid"/>'
        )
        parts.append(_text(x, bottom + 14, _tick_label(tick, as_pct), cls="tick", anchor="middle"))
    return "".join(parts)


@dataclass
class Row:
    """One labelled row of a panel chart: a (judge, config, dataset) group."""

    title: str
    subtitle: str
    # values[panel][series] -> the numbers the mark needs
    values: dict[str, dict[str, tuple[float, ...]]] = field(default_factory=dict)


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
                f'<rect x="0" y="{_n(y0)}" width="{_n(width)}" height="{_n(row_h)}" class="band"/>'
            )
        mid = y0 + row_h / 2
        parts.append(
            f"<g><title>{esc(row.title)} · {esc(row.subtitle)}</title>"
            + _text(6, mid - 3, _clip(row.title), cls="row-title")
            + _text(6, mid + 11, _clip(row.subtitle, 36), cls="row-sub")
            + "</g>"
        )
        for j, name in enumerate(series):
            sy = y0 + pad + (j + 0.5) * sub_h
            color = POLICY_COLORS.get(name, INK)
            parts.append(
                f'<text x="{_n(label_w + series_w - 8)}" y="{_n(sy + 3.5)}" text-anchor="end" '
                f'class="series" style="fill:{color}">{esc(name.replace("_", " "))}</text>'
            )
    for k, panel in enumerate(panels):
        px0 = label_w + series_w + k * (panel_w + gap)
        scale = Scale(lo, hi, px0 + 6, px0 + panel_w - 6)
        scales[panel] = scale
        parts.append(_x_axis(scale, ticks, body_top, body_bottom, as_pct))
        parts.append(_text(px0 + panel_w / 2, top + 12, panel, cls="panel-title", anchor="middle"))
        parts.append(
            f'<line x1="{_n(px0)}" x2="{_n(px0 + panel_w)}" y1="{_n(body_bottom)}" '
            f'y2="{_n(body_bottom)}" class="axis"/>'
        )
    parts.append(
        _text(
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
) -> str:
    """Dot-with-whisker chart: values[panel][series] = (score, ci_low, ci_high)."""
    lows = [v[1] for r in rows for p in r.values.values() for v in p.values() if _ok(v[1])]
    highs = [v[2] for r in rows for p in r.values.values() for v in p.values() if _ok(v[2])]
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
                if not _ok(score):
                    continue
                y = body_top + i * row_h + pad + (j + 0.5) * sub_h
                color = POLICY_COLORS.get(name, INK)
                tip = f"{row.title} · {row.subtitle} · {panel} · {name}: {score:.3f}"
                mark = ""
                if _ok(low) and _ok(high):
                    tip += f" [{low:.3f}, {high:.3f}]"
                    mark += (
                        f'<line x1="{_n(scale(low))}" x2="{_n(scale(high))}" y1="{_n(y)}" '
                        f'y2="{_n(y)}" stroke="{color}" class="whisker"/>'
                    )
                mark += f'<circle cx="{_n(scale(score))}" cy="{_n(y)}" r="3.6" fill="{color}"/>'
                parts.append(f"<g><title>{esc(tip)}</title>{mark}</g>")
    return _svg(width, height, parts, "Scores with 95% intervals")


def change_chart(rows: Sequence[Row], panels: Sequence[str], series: Sequence[str]) -> str:
    """Stacked bars: values[panel][policy] = (neutral->decisive, decisive->neutral, reversal)."""
    totals = [sum(v) for r in rows for p in r.values.values() for v in p.values()]
    top = max([t for t in totals if _ok(t)], default=0.0)
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
                    if not _ok(share) or share <= 0:
                        continue
                    w = scale(share) - scale(0.0)
                    bars.append(
                        f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0.6))}" '
                        f'height="{_n(sub_h - 4)}" fill="{CHANGE_COLORS[kind]}"/>'
                    )
                    x += w
                total = sum(s for s in shares if _ok(s))
                tip = (
                    f"{row.title} · {row.subtitle} · {panel} · {name}: {pct(total, 2)} changed "
                    f"(neutral→decisive {pct(shares[0], 2)}, decisive→neutral "
                    f"{pct(shares[1], 2)}, reversal {pct(shares[2], 2)})"
                )
                label = _text(x + 4, y + sub_h - 5, pct(total, 2), cls="value")
                parts.append(f"<g><title>{esc(tip)}</title>{''.join(bars)}{label}</g>")
    return _svg(width, height, parts, "Decision changes by kind")


def _ok(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


@dataclass(frozen=True)
class PolicyPoint:
    """An adaptive policy on the cost-agreement plane, with its cost to match."""

    policy: str
    cost: float
    agreement: float
    match_cost: float | None
    match_extra: float | None


def cost_agreement_chart(
    title: str,
    subtitle: str,
    components: Sequence[tuple[str, float, float]],
    policies: Sequence[PolicyPoint],
    k: int,
) -> str:
    """Components (grey), their upper concave envelope and each policy with its cost to match."""
    width, height = 372.0, 290.0
    left, right, top, bottom = 48.0, 14.0, 40.0, 40.0
    ys = [a for _, _, a in components if _ok(a)] + [p.agreement for p in policies]
    # Headroom below the lowest point keeps it (and its label) off the x axis.
    y_ticks = nice_ticks(min(ys, default=0.5) - 0.03, 1.0, 5)
    y_ticks = [t for t in y_ticks if t <= 1.0 + 1e-9]
    reach = [p.match_cost for p in policies if p.match_cost is not None and _ok(p.match_cost)]
    xs = Scale(0.0, max([float(k), *reach]) + 0.25, left, width - right)
    ys_scale = Scale(y_ticks[0], 1.0, height - bottom, top)
    parts = [
        _text(8, 16, _clip(title, 44), cls="row-title"),
        _text(8, 30, _clip(subtitle, 56), cls="row-sub"),
    ]
    for tick in y_ticks:
        y = ys_scale(tick)
        parts.append(
            f'<line x1="{_n(left)}" x2="{_n(width - right)}" y1="{_n(y)}" y2="{_n(y)}" '
            'class="grid"/>'
        )
        parts.append(_text(left - 5, y + 4, _tick_label(tick, True), cls="tick", anchor="end"))
    for calls in range(0, k + 1):
        x = xs(calls)
        parts.append(_text(x, height - bottom + 15, str(calls), cls="tick", anchor="middle"))
    parts.append(
        f'<line x1="{_n(left)}" x2="{_n(width - right)}" y1="{_n(height - bottom)}" '
        f'y2="{_n(height - bottom)}" class="axis"/>'
    )
    parts.append(
        _text(
            (left + width - right) / 2,
            height - 6,
            "expected calls",
            cls="axis-label",
            anchor="middle",
        )
    )
    parts.append(
        f'<text transform="translate(12 {_n((top + height - bottom) / 2)}) rotate(-90)" '
        'text-anchor="middle" class="axis-label">agreement with reference</text>'
    )
    hull = upper_envelope([c for _, c, _ in components], [a for _, _, a in components])
    if hull:
        peak = max(range(len(hull)), key=lambda i: (hull[i][1], -i))
        path = " ".join(f"{_n(xs(c))},{_n(ys_scale(a))}" for c, a in hull[: peak + 1])
        parts.append(f'<polyline points="{path}" class="envelope"/>')
    for name, cost, agreement in components:
        if not (_ok(cost) and _ok(agreement)):
            continue
        x, y = xs(cost), ys_scale(agreement)
        # k-subsets are labelled on the right; the balanced pair shares k=2's cost, so its
        # label goes on the left where it cannot collide with k=2's.
        left = name == "balanced pair"
        parts.append(
            f"<g><title>{esc(name)}: {cost:g} calls, agreement {pct(agreement, 2)}</title>"
            f'<circle cx="{_n(x)}" cy="{_n(y)}" r="3.4" class="component"/>'
            + _text(
                x - 6 if left else x + 6, y + 4, name, cls="note", anchor="end" if left else "start"
            )
            + "</g>"
        )
    for point in policies:
        color = POLICY_COLORS.get(point.policy, INK)
        x, y = xs(point.cost), ys_scale(point.agreement)
        tip = f"{point.policy}: {point.cost:.3f} calls, agreement {pct(point.agreement, 2)}"
        mark = ""
        if point.match_cost is not None and _ok(point.match_cost):
            mx = xs(point.match_cost)
            tip += f"; a nonadaptive mixture needs {point.match_cost:.3f} calls"
            mark += (
                f'<line x1="{_n(x)}" x2="{_n(mx)}" y1="{_n(y)}" y2="{_n(y)}" stroke="{color}" '
                'class="match"/>'
                f'<circle cx="{_n(mx)}" cy="{_n(y)}" r="2.2" fill="{color}"/>'
            )
            if point.match_extra is not None and _ok(point.match_extra):
                tip += f" ({signed_pct(point.match_extra)} calls)"
                # On the side away from the match line: left of the dot is empty when the
                # policy beats the envelope; a policy below it has its line on the left.
                ahead = point.match_cost >= point.cost
                mark += (
                    f'<text x="{_n(x - 8 if ahead else x + 8)}" y="{_n(y + 3.5)}" '
                    f'text-anchor="{"end" if ahead else "start"}" class="value" '
                    f'style="fill:{color}">{signed_pct(point.match_extra, 0)}</text>'
                )
        mark += (
            f'<circle cx="{_n(x)}" cy="{_n(y)}" r="4.6" fill="{color}" stroke="#fff" '
            'stroke-width="1.2"/>'
        )
        parts.append(f"<g><title>{esc(tip)}</title>{mark}</g>")
    return _svg(width, height, parts, f"Cost versus agreement: {title} {subtitle}")


def share_bar_chart(rows: Sequence[tuple[str, str, float, float, int]]) -> str:
    """Position bias: per row (title, subtitle, left_left, right_right, conflicts), a 100% bar
    of the order conflicts won by the left slot both times, by the right slot, and the rest."""
    label_w, width, bar_h, row_h = 260.0, 1160.0, 16.0, 34.0
    bar_x0, bar_x1 = label_w, width - 150
    height = 10 + row_h * len(rows) + 26
    scale = Scale(0.0, 1.0, bar_x0, bar_x1)
    parts = [
        f'<rect x="0" y="{_n(10 + i * row_h)}" width="{_n(width)}" height="{_n(row_h)}" '
        'class="band"/>'
        for i in range(0, len(rows), 2)
    ]
    parts.append(_x_axis(scale, [0.0, 0.25, 0.5, 0.75, 1.0], 10, 10 + row_h * len(rows), True))
    for i, (title, subtitle, left, right, conflicts) in enumerate(rows):
        y0 = 10 + i * row_h
        mid = y0 + row_h / 2
        parts.append(_text(6, mid - 2, _clip(title), cls="row-title"))
        parts.append(_text(6, mid + 11, _clip(subtitle, 40), cls="row-sub"))
        by = mid - bar_h / 2
        if conflicts <= 0:
            parts.append(_text(bar_x0, mid + 4, "no order conflicts", cls="note"))
            continue
        shares = [
            ("left_left", left / conflicts, "left slot won both orders"),
            ("right_right", right / conflicts, "right slot won both orders"),
            ("other", max(conflicts - left - right, 0) / conflicts, "not attributed"),
        ]
        x = bar_x0
        for kind, share, meaning in shares:
            if share <= 0:
                continue
            w = scale(share) - scale(0.0)
            color = SLOT_COLORS.get(kind, OTHER_COLOR)
            text = ""
            if share >= 0.09:
                fill = "#fff" if kind in SLOT_COLORS else INK
                word = {"left_left": "Left ", "right_right": "Right "}.get(kind, "")
                text = (
                    f'<text x="{_n(x + w / 2)}" y="{_n(mid + 4)}" text-anchor="middle" '
                    f'class="inbar" style="fill:{fill}">{esc(word + pct(share, 0))}</text>'
                )
            parts.append(
                f"<g><title>{esc(title)} · {esc(subtitle)}: {esc(meaning)} in "
                f"{pct(share)} of {conflicts} order conflicts</title>"
                f'<rect x="{_n(x)}" y="{_n(by)}" width="{_n(w)}" height="{_n(bar_h)}" '
                f'fill="{color}"/>{text}</g>'
            )
            x += w
        parts.append(_text(bar_x1 + 10, mid + 4, f"{conflicts:,} conflicts", cls="value"))
    return _svg(width, height, parts, "Position bias among order conflicts")


def dot_rows_chart(
    rows: Sequence[tuple[str, str, Mapping[str, float]]],
    colors: Mapping[str, str],
    x_label: str,
    *,
    as_pct: bool = True,
    hollow: Sequence[str] = (),
    from_zero: bool = False,
) -> str:
    """One row per group with a dot per series on a shared axis, joined by a thin range line.

    `from_zero` starts the axis at 0 so differences are not magnified (for savings)."""
    label_w, width, row_h = 260.0, 1160.0, 36.0
    values = [v for _, _, d in rows for v in d.values() if _ok(v)]
    lo, hi = min(values, default=0.0), max(values, default=1.0)
    if from_zero:
        lo = min(lo, 0.0)
    margin = max((hi - lo) * 0.08, 0.005)
    ticks = nice_ticks(lo if from_zero else lo - margin, hi + margin, 6)
    height = 10 + row_h * len(rows) + 38
    scale = Scale(ticks[0], ticks[-1], label_w + 10, width - 30)
    parts: list[str] = []
    bottom = 10 + row_h * len(rows)
    for i in range(len(rows)):
        y0 = 10 + i * row_h
        if i % 2 == 0:
            parts.append(
                f'<rect x="0" y="{_n(y0)}" width="{_n(width)}" height="{_n(row_h)}" class="band"/>'
            )
    parts.append(_x_axis(scale, ticks, 10, bottom, as_pct))
    for i, (title, subtitle, by_series) in enumerate(rows):
        mid = 10 + i * row_h + row_h / 2
        parts.append(_text(6, mid - 2, _clip(title), cls="row-title"))
        parts.append(_text(6, mid + 11, _clip(subtitle, 40), cls="row-sub"))
        present = [(s, v) for s, v in by_series.items() if _ok(v)]
        if len(present) >= 2:
            xs_ = [scale(v) for _, v in present]
            parts.append(
                f'<line x1="{_n(min(xs_))}" x2="{_n(max(xs_))}" y1="{_n(mid)}" y2="{_n(mid)}" '
                'class="range"/>'
            )
        for name, value in present:
            color = colors.get(name, INK)
            fill = "#fff" if name in hollow else color
            shown = pct(value, 2) if as_pct else f"{value:.3f}"
            parts.append(
                f"<g><title>{esc(title)} · {esc(subtitle)} · {esc(name)}: {shown}</title>"
                f'<circle cx="{_n(scale(value))}" cy="{_n(mid)}" r="5" fill="{fill}" '
                f'stroke="{color}" stroke-width="2"/></g>'
            )
    parts.append(
        _text((label_w + width) / 2, height - 4, x_label, cls="axis-label", anchor="middle")
    )
    return _svg(width, height, parts, x_label)
