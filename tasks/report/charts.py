"""Charts of the report's own shape: cost versus agreement, position bias and dot rows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from tasks.replay.matching import upper_envelope
from tasks.report.filters import esc, pct, signed_pct
from tasks.report.svg import (
    INK,
    OTHER_COLOR,
    POLICY_COLORS,
    SLOT_COLORS,
    Scale,
    clip,
    nice_ticks,
    num,
    ok,
    svg_doc,
    svg_text,
    tick_label,
    x_axis,
)


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
) -> Markup:
    """Components (grey), their upper concave envelope and each policy with its cost to match."""
    width, height = 372.0, 290.0
    left, right, top, bottom = 48.0, 14.0, 40.0, 40.0
    ys = [a for _, _, a in components if ok(a)] + [p.agreement for p in policies]
    # Headroom below the lowest point keeps it (and its label) off the x axis.
    y_ticks = nice_ticks(min(ys, default=0.5) - 0.03, 1.0, 5)
    y_ticks = [t for t in y_ticks if t <= 1.0 + 1e-9]
    reach = [p.match_cost for p in policies if p.match_cost is not None and ok(p.match_cost)]
    xs = Scale(0.0, max([float(k), *reach]) + 0.25, left, width - right)
    ys_scale = Scale(y_ticks[0], 1.0, height - bottom, top)
    parts = [
        svg_text(8, 16, clip(title, 44), cls="row-title"),
        svg_text(8, 30, clip(subtitle, 56), cls="row-sub"),
    ]
    for tick in y_ticks:
        y = ys_scale(tick)
        parts.append(
            f'<line x1="{num(left)}" x2="{num(width - right)}" y1="{num(y)}" y2="{num(y)}" '
            'class="grid"/>'
        )
        parts.append(svg_text(left - 5, y + 4, tick_label(tick, True), cls="tick", anchor="end"))
    for calls in range(0, k + 1):
        x = xs(calls)
        parts.append(svg_text(x, height - bottom + 15, str(calls), cls="tick", anchor="middle"))
    parts.append(
        f'<line x1="{num(left)}" x2="{num(width - right)}" y1="{num(height - bottom)}" '
        f'y2="{num(height - bottom)}" class="axis"/>'
    )
    parts.append(
        svg_text(
            (left + width - right) / 2,
            height - 6,
            "expected calls",
            cls="axis-label",
            anchor="middle",
        )
    )
    parts.append(
        f'<text transform="translate(12 {num((top + height - bottom) / 2)}) rotate(-90)" '
        'text-anchor="middle" class="axis-label">agreement with reference</text>'
    )
    hull = upper_envelope([c for _, c, _ in components], [a for _, _, a in components])
    if hull:
        peak = max(range(len(hull)), key=lambda i: (hull[i][1], -i))
        path = " ".join(f"{num(xs(c))},{num(ys_scale(a))}" for c, a in hull[: peak + 1])
        parts.append(f'<polyline points="{path}" class="envelope"/>')
    # Points on one spot share one mark and one label: at K = 2, k=2 and the balanced pair
    # are the full reference, and the policies that never stop early sit on it too.
    spots: dict[tuple[int, int], list[tuple[str, float, float]]] = {}
    for name, cost, agreement in components:
        if ok(cost) and ok(agreement):
            spots.setdefault(_spot(xs(cost), ys_scale(agreement)), []).append(
                (name, cost, agreement)
            )
    for here in spots.values():
        x, y = xs(here[0][1]), ys_scale(here[0][2])
        label = " · ".join(name for name, _, _ in here)
        # k-subsets are labelled on the right (unless that runs off the plot); the balanced
        # pair shares k=2's cost, so its own label goes on the left, clear of k=2's.
        right = label != "balanced pair" and x + 6 + _CHAR_PX * len(label) <= width - 2
        tip = "; ".join(f"{n}: {c:g} calls, agreement {pct(a, 2)}" for n, c, a in here)
        parts.append(
            f"<g><title>{esc(tip)}</title>"
            f'<circle cx="{num(x)}" cy="{num(y)}" r="3.4" class="component"/>'
            + svg_text(
                x + 6 if right else x - 6, y + 4, label, cls="note",
                anchor="start" if right else "end",
            )
            + "</g>"
        )  # fmt: skip
    groups: dict[tuple[int, int], list[PolicyPoint]] = {}
    for point in policies:
        groups.setdefault(_spot(xs(point.cost), ys_scale(point.agreement)), []).append(point)
    for spot, members in groups.items():
        parts.append(_policy_mark(members, xs, ys_scale, on_component=spot in spots))
    return svg_doc(width, height, parts, f"Cost versus agreement: {title} {subtitle}")


_CHAR_PX = 5.8
"""About the width of one character of a 10.5 px chart label."""


def _spot(x: float, y: float) -> tuple[int, int]:
    """Points closer than a couple of pixels are drawn as one."""
    return round(x / 2), round(y / 2)


def _policy_mark(
    members: Sequence[PolicyPoint], xs: Scale, ys: Scale, *, on_component: bool
) -> str:
    """The policies on one spot: a dot cut into their colours, each one's line to where a
    mixture matches it, and one label of their extra calls (none where they all tie with the
    baseline they sit on: `+0%` there says nothing the dot does not)."""
    x, y = xs(members[0].cost), ys(members[0].agreement)
    tips, mark, extras = [], "", []
    for point in members:
        color = POLICY_COLORS.get(point.policy, INK)
        tip = f"{point.policy}: {point.cost:.3f} calls, agreement {pct(point.agreement, 2)}"
        if point.match_cost is not None and ok(point.match_cost):
            mx = xs(point.match_cost)
            tip += f"; a nonadaptive mixture needs {point.match_cost:.3f} calls"
            mark += (
                f'<line x1="{num(x)}" x2="{num(mx)}" y1="{num(y)}" y2="{num(y)}" stroke="{color}" '
                'class="match"/>'
                f'<circle cx="{num(mx)}" cy="{num(y)}" r="2.2" fill="{color}"/>'
            )
            if point.match_extra is not None and ok(point.match_extra):
                tip += f" ({signed_pct(point.match_extra)} calls)"
                extras.append((signed_pct(point.match_extra, 0), point, color))
        tips.append(tip)
    shown = list(dict.fromkeys(text for text, _, _ in extras))
    if shown and not (on_component and shown == [signed_pct(0.0, 0)]):
        _, point, color = extras[0]
        # On the side away from the match line: left of the dot is empty when the policy
        # beats the envelope; a policy below it has its line on the left.
        ahead = point.match_cost is not None and point.match_cost >= point.cost
        fill = color if len({c for _, _, c in extras}) == 1 else INK
        mark += (
            f'<text x="{num(x - 8 if ahead else x + 8)}" y="{num(y + 3.5)}" '
            f'text-anchor="{"end" if ahead else "start"}" class="value" '
            f'style="fill:{fill}">{esc(" / ".join(shown))}</text>'
        )
    colors = [POLICY_COLORS.get(p.policy, INK) for p in members]
    mark += _pie(x, y, 4.6, colors)
    return f"<g><title>{esc('; '.join(tips))}</title>{mark}</g>"


def _pie(x: float, y: float, r: float, colors: Sequence[str]) -> str:
    """A dot of one colour, or cut into equal wedges of several, clockwise from the top."""
    edge = 'stroke="#fff" stroke-width="1.2"'
    if len(colors) == 1:
        return f'<circle cx="{num(x)}" cy="{num(y)}" r="{num(r)}" fill="{colors[0]}" {edge}/>'
    wedges = []
    for i, color in enumerate(colors):
        a0, a1 = (2 * math.pi * j / len(colors) - math.pi / 2 for j in (i, i + 1))
        large = 1 if a1 - a0 > math.pi else 0
        wedges.append(
            f'<path d="M{num(x)},{num(y)} L{num(x + r * math.cos(a0))},{num(y + r * math.sin(a0))} '
            f"A{num(r)},{num(r)} 0 {large} 1 {num(x + r * math.cos(a1))},"
            f'{num(y + r * math.sin(a1))} Z" fill="{color}"/>'
        )
    ring = f'<circle cx="{num(x)}" cy="{num(y)}" r="{num(r)}" fill="none" {edge}/>'
    return "".join(wedges) + ring


def share_bar_chart(rows: Sequence[tuple[str, str, float, float, int]]) -> Markup:
    """Position bias: per row (title, subtitle, left_left, right_right, conflicts), a 100% bar
    of the order conflicts won by the left slot both times, by the right slot, and the rest."""
    label_w, width, bar_h, row_h = 260.0, 1160.0, 16.0, 34.0
    bar_x0, bar_x1 = label_w, width - 150
    height = 10 + row_h * len(rows) + 26
    scale = Scale(0.0, 1.0, bar_x0, bar_x1)
    parts = [
        f'<rect x="0" y="{num(10 + i * row_h)}" width="{num(width)}" height="{num(row_h)}" '
        'class="band"/>'
        for i in range(0, len(rows), 2)
    ]
    parts.append(x_axis(scale, [0.0, 0.25, 0.5, 0.75, 1.0], 10, 10 + row_h * len(rows), True))
    for i, (title, subtitle, left, right, conflicts) in enumerate(rows):
        y0 = 10 + i * row_h
        mid = y0 + row_h / 2
        parts.append(svg_text(6, mid - 2, clip(title), cls="row-title"))
        parts.append(svg_text(6, mid + 11, clip(subtitle, 40), cls="row-sub"))
        by = mid - bar_h / 2
        if conflicts <= 0:
            parts.append(svg_text(bar_x0, mid + 4, "no order conflicts", cls="note"))
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
                    f'<text x="{num(x + w / 2)}" y="{num(mid + 4)}" text-anchor="middle" '
                    f'class="inbar" style="fill:{fill}">{esc(word + pct(share, 0))}</text>'
                )
            parts.append(
                f"<g><title>{esc(title)} · {esc(subtitle)}: {esc(meaning)} in "
                f"{pct(share)} of {conflicts} order conflicts</title>"
                f'<rect x="{num(x)}" y="{num(by)}" width="{num(w)}" height="{num(bar_h)}" '
                f'fill="{color}"/>{text}</g>'
            )
            x += w
        parts.append(svg_text(bar_x1 + 10, mid + 4, f"{conflicts:,} conflicts", cls="value"))
    return svg_doc(width, height, parts, "Position bias among order conflicts")


def dot_rows_chart(
    rows: Sequence[tuple[str, str, Mapping[str, float]]],
    colors: Mapping[str, str],
    x_label: str,
    *,
    as_pct: bool = True,
    hollow: Sequence[str] = (),
    from_zero: bool = False,
) -> Markup:
    """One row per group with a dot per series on a shared axis, joined by a thin range line.

    `from_zero` starts the axis at 0 so differences are not magnified (for savings)."""
    label_w, width, row_h = 260.0, 1160.0, 36.0
    values = [v for _, _, d in rows for v in d.values() if ok(v)]
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
                f'<rect x="0" y="{num(y0)}" width="{num(width)}" height="{num(row_h)}" '
                'class="band"/>'
            )
    parts.append(x_axis(scale, ticks, 10, bottom, as_pct))
    for i, (title, subtitle, by_series) in enumerate(rows):
        mid = 10 + i * row_h + row_h / 2
        parts.append(svg_text(6, mid - 2, clip(title), cls="row-title"))
        parts.append(svg_text(6, mid + 11, clip(subtitle, 40), cls="row-sub"))
        present = [(s, v) for s, v in by_series.items() if ok(v)]
        if len(present) >= 2:
            xs_ = [scale(v) for _, v in present]
            parts.append(
                f'<line x1="{num(min(xs_))}" x2="{num(max(xs_))}" y1="{num(mid)}" y2="{num(mid)}" '
                'class="range"/>'
            )
        for name, value in present:
            color = colors.get(name, INK)
            fill = "#fff" if name in hollow else color
            shown = pct(value, 2) if as_pct else f"{value:.3f}"
            parts.append(
                f"<g><title>{esc(title)} · {esc(subtitle)} · {esc(name)}: {shown}</title>"
                f'<circle cx="{num(scale(value))}" cy="{num(mid)}" r="5" fill="{fill}" '
                f'stroke="{color}" stroke-width="2"/></g>'
            )
    parts.append(
        svg_text((label_w + width) / 2, height - 4, x_label, cls="axis-label", anchor="middle")
    )
    return svg_doc(width, height, parts, x_label)
