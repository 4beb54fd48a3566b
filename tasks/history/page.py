"""The trends page: one self-contained HTML file (inline CSS and SVG, no script, no URL) with
a chart per figure (one line per judge config over the runs) and the table behind them."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from tasks.history.trends import TrendPoint
from tasks.storage import write_text_atomic
from tasks.workdir import WorkDir

__all__ = ["CHARTS", "TRENDS_FILE", "render_trends", "write_trends"]

TRENDS_FILE = "trends.html"
"""Written at the top of the work directory, beside the runs it summarises."""

PALETTE = ("#1b6ca8", "#d1495b", "#2a9d8f", "#e9a23b", "#6d597a", "#5c946e", "#8d6a9f", "#b56576")
CHARTS: tuple[tuple[str, str, bool], ...] = (
    ("score", "reference score (balanced design), 95% interval", True),
    ("consistency", "consistency: stable / (stable + conflicts + mixed)", False),
    ("left_share", "position bias: left slot's share of order conflicts", False),
    ("valid_share", "valid share of planned calls", False),
    ("pu_savings", "expected calls saved by paired unanimity", False),
)
WIDTH, HEIGHT, PAD = 560, 200, 36


def _series(points: Sequence[TrendPoint]) -> dict[tuple[str, str], list[TrendPoint]]:
    out: dict[tuple[str, str], list[TrendPoint]] = {}
    for p in points:
        out.setdefault((p.judge, p.config), []).append(p)
    return out


def _chart(
    runs: list[str], series: dict[tuple[str, str], list[TrendPoint]], field: str, band: bool
) -> Markup:
    """An SVG line chart of `field` (0 to 1) over the runs, one line per judge config; for the
    score, its interval as a band. Built here from numbers and escaped names only."""
    span = max(1, len(runs) - 1)

    def x(run: str) -> float:
        return PAD + (WIDTH - 2 * PAD) * runs.index(run) / span

    def y(value: float) -> float:
        return HEIGHT - PAD + (2 * PAD - HEIGHT) * min(1.0, max(0.0, value))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img">'
    ]
    for tick in (0.0, 0.5, 1.0):
        parts.append(
            f'<line x1="{PAD}" x2="{WIDTH - PAD}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            f'stroke="#ddd"/><text x="4" y="{y(tick) + 4:.1f}" font-size="10">{tick:g}</text>'
        )
    every = max(1, math.ceil(len(runs) / 8))
    for i, run in enumerate(runs):
        if i % every == 0 or i == len(runs) - 1:
            parts.append(
                f'<text x="{x(run):.1f}" y="{HEIGHT - PAD + 16}" font-size="10" '
                f'text-anchor="middle">{escape(run[:13])}</text>'
            )
    for i, ((judge, config), pts) in enumerate(sorted(series.items())):
        colour = PALETTE[i % len(PALETTE)]
        shown = [p for p in pts if not math.isnan(getattr(p, field))]
        if band and shown:
            upper = " ".join(f"{x(p.run_id):.1f},{y(p.score_high):.1f}" for p in shown)
            lower = " ".join(f"{x(p.run_id):.1f},{y(p.score_low):.1f}" for p in reversed(shown))
            parts.append(f'<polygon points="{upper} {lower}" fill="{colour}" opacity="0.15"/>')
        line = " ".join(f"{x(p.run_id):.1f},{y(getattr(p, field)):.1f}" for p in shown)
        title = escape(f"{judge} · {config}")
        parts.append(
            f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2">'
            f"<title>{title}</title></polyline>"
        )
        for p in shown:
            value = getattr(p, field)
            parts.append(
                f'<circle cx="{x(p.run_id):.1f}" cy="{y(value):.1f}" r="3" fill="{colour}">'
                f"<title>{title}, {escape(p.run_id)}: {value:.3f}</title></circle>"
            )
    parts.append("</svg>")
    return Markup("".join(parts))  # our own SVG: numbers, colours and escaped names


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda v: "-" if v != v else f"{v:.1%}"
    env.filters["num"] = lambda v: "-" if v != v else f"{v:.3f}"
    return env


def render_trends(
    points: Sequence[TrendPoint], *, now: Callable[[], dt.datetime] | None = None
) -> str:
    """The trends page for these points (any order)."""
    ordered = sorted(points, key=lambda p: (p.started_at, p.run_id))
    runs = list(dict.fromkeys(p.run_id for p in ordered))
    series = _series(ordered)
    colours = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(sorted(series))}
    charts = [
        {"title": title, "svg": _chart(runs, series, field, band)} for field, title, band in CHARTS
    ]
    made = (now or (lambda: dt.datetime.now(dt.UTC)))()
    return (
        _environment()
        .get_template("trends.html.j2")
        .render(
            runs=runs,
            points=ordered,
            charts=charts,
            colours=colours,
            made=made.strftime("%Y-%m-%d %H:%M UTC"),
        )
    )


def write_trends(work: WorkDir, points: Sequence[TrendPoint]) -> Path:
    """Write `trends.html` in the work directory; returns its path."""
    path = work.root / TRENDS_FILE
    write_text_atomic(render_trends(points), path, overwrite=True)
    return path
