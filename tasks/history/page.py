"""The trends page: one self-contained HTML file (inline CSS and SVG, no script, no URL) with
a chart per figure (one line per judge config over the runs) and the table behind them."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from tasks.history.trends import TrendPoint
from tasks.report.filters import usd
from tasks.storage import report_mode, write_text_atomic
from tasks.store.workdir import WorkDir

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
    ("usd", "USD the run spent (calls it sent; priced judges only)", False),
)
"""(field, title, band): every field is a share in [0, 1] except `usd`, scaled to its largest."""
WIDTH, HEIGHT, PAD = 560, 200, 36


def _series(points: Sequence[TrendPoint]) -> dict[tuple[str, str], list[TrendPoint]]:
    out: dict[tuple[str, str], list[TrendPoint]] = {}
    for p in points:
        out.setdefault((p.judge, p.config), []).append(p)
    return out


def _top(values: list[float]) -> float:
    """The chart's upper value: 1 for shares; for USD a round figure above the largest."""
    largest = max((v for v in values if not math.isnan(v)), default=0.0)
    if largest <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(largest))
    return next(step * m for m in (1, 2, 2.5, 5, 10) if step * m >= largest)


def _chart(
    runs: dict[str, str],
    series: dict[tuple[str, str], list[TrendPoint]],
    field: str,
    band: bool,
) -> Markup:
    """An SVG line chart of `field` over the runs (`runs`: run id -> axis label), one line per
    judge config; for the score, its interval as a band. Shares run 0 to 1, USD from 0 to a
    round figure. Built here from numbers and escaped names only."""
    order = list(runs)
    span = max(1, len(order) - 1)
    usd = field == "usd"
    top = _top([getattr(p, field) for pts in series.values() for p in pts]) if usd else 1.0

    def x(run: str) -> float:
        return PAD + (WIDTH - 2 * PAD) * order.index(run) / span

    def y(value: float) -> float:
        return HEIGHT - PAD + (2 * PAD - HEIGHT) * min(1.0, max(0.0, value / top))

    def tick_text(value: float) -> str:
        return f"${value:g}" if usd else f"{value:g}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img">'
    ]
    for tick in (0.0, top / 2, top):
        parts.append(
            f'<line x1="{PAD}" x2="{WIDTH - PAD}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            f'stroke="#ddd"/><text x="2" y="{y(tick) + 4:.1f}" font-size="10">'
            f"{tick_text(tick)}</text>"
        )
    every = max(1, math.ceil(len(order) / 8))
    for i, (run, label) in enumerate(runs.items()):
        if i % every == 0 or i == len(order) - 1:
            # The first and last labels stay inside the chart.
            ends = {0: "start", len(order) - 1: "end"} if len(order) > 1 else {}
            anchor = ends.get(i, "middle")
            parts.append(
                f'<text x="{x(run):.1f}" y="{HEIGHT - PAD + 16}" font-size="10" '
                f'text-anchor="{anchor}">{escape(label)}</text>'
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
                f"<title>{title}, {escape(p.run_id)}: {value:.4g}</title></circle>"
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
    env.filters["usd"] = lambda v: "not priced" if v != v else usd(v)
    return env


def render_trends(
    points: Sequence[TrendPoint],
    *,
    now: Callable[[], dt.datetime] | None = None,
    systems: Sequence[dict[str, Any]] = (),
) -> str:
    """The trends page for these points (any order), and a table per judge config of each
    system's leaderboard score per run (`tasks.leaderboard.history.system_trends`)."""
    ordered = sorted(points, key=lambda p: (p.started_at, p.run_id))
    starts = {p.run_id: p.started_at for p in ordered}
    minutes = {t.strftime("%m-%d %H:%M") for t in starts.values()}
    form = "%m-%d %H:%M" if len(minutes) == len(starts) else "%m-%d %H:%M:%S"
    runs = {run: t.strftime(form) for run, t in starts.items()}  # axis labels, distinct
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
            boards=_boards(systems),
        )
    )


def _boards(systems: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (judge, config, baseline): the runs in order and, per system, its (score, rank)
    in each run (None where it was not ranked)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in systems:
        groups.setdefault((row["judge"], row["config"], row["baseline"]), []).append(row)
    boards = []
    for (judge, config, baseline), rows in sorted(groups.items()):
        runs = list(dict.fromkeys(r["run_id"] for r in rows))
        cells = {(r["system"], r["run_id"]): (r["score"], r["rank"]) for r in rows}
        names = sorted(
            {r["system"] for r in rows}, key=lambda s: (cells.get((s, runs[-1]), (0.0, 1e9))[1], s)
        )
        table = [(name, [cells.get((name, run)) for run in runs]) for name in names]
        boards.append({"judge": judge, "config": config, "baseline": baseline, "runs": runs,
                       "rows": table})  # fmt: skip
    return boards


def write_trends(
    work: WorkDir, points: Sequence[TrendPoint], systems: Sequence[dict[str, Any]] = ()
) -> Path:
    """Write `trends.html` in the work directory (unless it holds this page already);
    returns its path."""
    path = work.root / TRENDS_FILE
    page = render_trends(points, systems=systems)
    write_text_atomic(page, path, overwrite=True, mode=report_mode(), unless_same=True)
    return path
