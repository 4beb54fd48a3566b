"""The report's leaderboard section: per judge config, a forest plot of each system's score
and interval under every counting rule side by side, and the table of the chosen rule
(docs/design.md#leaderboards). Shown for runs whose pairs name their systems."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from tasks.errors import InputError
from tasks.leaderboard.notes import board_notes
from tasks.report.filters import esc
from tasks.report.sections import Section
from tasks.report.svg import INK, Scale, clip, nice_ticks, num, svg_doc, svg_text, x_axis
from tasks.store.workdir import WorkDir

__all__ = ["RULE_COLORS", "LeaderboardSection", "forest_plot", "leaderboard_section", "run_boards"]

RULE_COLORS: Mapping[str, str] = {
    "reference": "#0072b2",
    "drop-conflicts": "#e69f00",
    "per-order": "#009e73",
}


@dataclass
class LeaderboardSection(Section):
    """The section with its boards (one per judge config) for the template."""

    boards: list[dict[str, Any]] = field(default_factory=list)


def forest_plot(board: dict[str, Any]) -> Markup:
    """Score and interval per system (rows, best first under the board's rule), one marker
    and whisker per rule, offset within the row; a line at the baseline's 1000."""
    systems = [row["system"] for row in board["systems"]]
    rules = list(board["rules"])
    rows = {rule: {r["system"]: r for r in board["rules"][rule]["systems"]} for rule in rules}
    values = [
        v
        for rule in rules
        for r in rows[rule].values()
        for v in (r["lower"], r["upper"], r["score"])
        if v is not None
    ]
    inf = float("inf")
    label_w, width, row_h = 220.0, 1160.0, 30.0
    ticks = nice_ticks(min(values, default=900.0) - 10, max(values, default=1100.0) + 10, 6)
    scale = Scale(ticks[0], ticks[-1], label_w + 10, width - 30)
    bottom = 10 + row_h * len(systems)
    height = bottom + 38
    parts = [x_axis(scale, ticks, 10, bottom, as_pct=False)]
    x_base = scale(1000.0)
    parts.append(
        f'<line x1="{num(x_base)}" x2="{num(x_base)}" y1="10" y2="{num(bottom)}" '
        f'stroke="{INK}" stroke-dasharray="4 3"/>'
    )
    for i, system in enumerate(systems):
        mid = 10 + i * row_h + row_h / 2
        parts.append(svg_text(6, mid + 4, clip(system), cls="row-title"))
        for j, rule in enumerate(rules):
            row = rows[rule].get(system)
            if row is None or row["score"] is None:
                continue
            y = mid + (j - (len(rules) - 1) / 2) * 7
            color = RULE_COLORS.get(rule, INK)
            # An open end (a bound, or replicates without a finite score) runs to the edge.
            lower = ticks[0] if row["lower"] is None else row["lower"]
            upper = ticks[-1] if row["upper"] is None else row["upper"]
            low, high = scale(max(lower, ticks[0])), scale(min(upper, ticks[-1]))
            mark = {"upper": "at most ", "lower": "at least "}.get(row.get("bound") or "", "")
            ends = f"{_end(row['lower'], -inf)} to {_end(row['upper'], inf)}"
            parts.append(
                f"<g><title>{esc(system)} · {esc(rule)}: {mark}{row['score']:.1f} "
                f"({ends}), rank {row['rank']}</title>"
                f'<line x1="{num(low)}" x2="{num(high)}" y1="{num(y)}" y2="{num(y)}" '
                f'stroke="{color}" stroke-width="2"/>'
                f'<circle cx="{num(scale(row["score"]))}" cy="{num(y)}" r="3.5" fill="{color}"/>'
                "</g>"
            )
    parts.append(
        svg_text(
            (label_w + width) / 2,
            height - 4,
            "score (Elo scale, baseline 1000)",
            cls="axis-label",
            anchor="middle",
        )
    )
    return svg_doc(width, height, parts, f"Leaderboard of {board['judge']} · {board['config']}")


def _end(value: float | None, open_end: float) -> str:
    return f"{value:.1f}" if value is not None else ("below" if open_end < 0 else "above")


def leaderboard_section(boards: list[dict[str, Any]]) -> LeaderboardSection:
    """The section for a run's leaderboards (`tasks.leaderboard.run_leaderboard`)."""
    out = LeaderboardSection("leaderboard", "Leaderboard", "Leaderboard", boards=boards)
    if not boards:
        out.missing = "leaderboard"
        return out
    out.charts = [forest_plot(board) for board in boards]
    for board in boards:
        board["notes"] = board_notes(board)
    out.legend = [(rule, RULE_COLORS[rule]) for rule in RULE_COLORS]
    return out


def run_boards(work: WorkDir, run_id: str) -> list[dict[str, Any]] | None:
    """The run's leaderboards with the length-controlled win rate, or None when its pairs
    name no systems or no baseline."""
    from tasks.leaderboard import BoardOptions, run_leaderboard

    try:
        options = BoardOptions(length_control=True)
        boards: list[dict[str, Any]] = run_leaderboard(work, run_id, options)["boards"]
    except InputError:
        return None
    return boards
