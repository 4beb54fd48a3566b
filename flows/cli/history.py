"""Subcommands diff and trends: what changed between runs (and how the terminal shows a diff),
and every judge config's history."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from flows.cli.app import app, console, run_id_given, state
from flows.cli.tables import print_json, print_table

if TYPE_CHECKING:
    from tasks.history.diff import RunDiff
    from tasks.history.trends import TrendPoint


FLIPS_SHOWN = 20
"""Flipped pairs listed in the terminal (all of them with --json)."""


def _pct(value: float) -> str:
    return "-" if value != value else f"{value:.1%}"  # NaN: no order conflict, no decided pair


def _signed(value: float) -> str:
    return "-" if value != value else f"{value:+.3f}"


def _fixed(value: float) -> str:
    return "-" if value != value else f"{value:.3f}"


def _calls(counts: dict[str, object]) -> str:
    return f"{counts.get('sent', 0)} sent, {counts.get('cached', 0)} reused from the cache"


def print_diff(diff: RunDiff) -> None:
    """The diff as the terminal shows it: pairs and configs, calls, one row per judge config."""
    say = console.print
    say(f"[bold]{diff.run_a}[/bold] -> [bold]{diff.run_b}[/bold]", highlight=False)
    say(
        f"pairs: {diff.pairs_shared} shared, {diff.pairs_added} added, "
        f"{diff.pairs_removed} removed",
        highlight=False,
    )
    for label, configs in (("added", diff.configs_added), ("removed", diff.configs_removed)):
        if configs:
            names = ", ".join(f"{j} · {c}" for j, c in configs)
            say(f"judge configs {label}: {escape(names)}", highlight=False, soft_wrap=True)
    say(f"calls before: {_calls(diff.calls_a)}; after: {_calls(diff.calls_b)}", highlight=False)
    flips: dict[tuple[str, str], int] = {}
    for flip in diff.flips:
        flips[(flip.judge, flip.config)] = flips.get((flip.judge, flip.config), 0) + 1
    print_table(
        console,
        "per judge config (before -> after)",
        ["judge · config", "pairs", "score", "change (95% CI)", "consistency",
         "left wins conflicts", "valid", "flips"],
        [
            [
                f"{c.judge} · {c.config}",
                str(c.shared_pairs),
                f"{c.score_before:.3f} -> {c.score_after:.3f}"
                if c.score_before == c.score_before and c.score_after == c.score_after
                else "- (not replayed)",
                f"{_signed(c.score_change)} ({_signed(c.change_low)} to "
                f"{_signed(c.change_high)})",
                f"{_pct(c.before['consistency'])} -> {_pct(c.after['consistency'])}",
                f"{_pct(c.before['left_share'])} -> {_pct(c.after['left_share'])}",
                f"{_pct(c.before['valid_share'])} -> {_pct(c.after['valid_share'])}",
                str(flips.get((c.judge, c.config), 0)),
            ]
            for c in diff.changes
        ],
        "score and flips: over the shared pairs; consistency, left wins and valid: over each "
        "run's pairs",
    )  # fmt: skip
    print_table(
        console,
        "agreement with itself (before -> after)",
        ["judge · config", "alpha", "change (95% CI)"],
        [
            [
                f"{c.judge} · {c.config}",
                f"{_fixed(c.alpha_before)} -> {_fixed(c.alpha_after)}",
                f"{_signed(c.alpha_after - c.alpha_before)} "
                f"({_signed(c.alpha_change_low)} to {_signed(c.alpha_change_high)})",
            ]
            for c in diff.changes
        ],
        "Krippendorff's alpha over all calls of the shared pairs; paired interval",
    )
    print_table(
        console,
        "decisions, judge against judge (before -> after)",
        ["before", "after", "pairs", "kappa (95% CI)", "raw (95% CI)"],
        [
            [
                j.before,
                j.after,
                str(j.pairs),
                f"{_fixed(j.kappa)} ({_fixed(j.kappa_low)}-{_fixed(j.kappa_high)})",
                f"{_fixed(j.raw)} ({_fixed(j.raw_low)}-{_fixed(j.raw_high)})",
            ]
            for j in diff.judges
        ],
        "Cohen's kappa and raw agreement of the decisions over all 2K calls on the shared "
        "pairs; 95% intervals",
        left=2,
    )
    if diff.systems:
        say(
            "systems (leaderboard, reference rule; score, rank and length-controlled win % "
            "before -> after):",
            highlight=False,
        )
        for s in diff.systems:
            say(
                escape(
                    f"  {s['judge']} · {s['config']}  {s['system']}: "
                    f"{_score(s['score_before'], s['bound_before'])} -> "
                    f"{_score(s['score_after'], s['bound_after'])}, rank {s['rank_before']} -> "
                    f"{s['rank_after']}, LC {_score(s['lc_win_rate_before'], None)} -> "
                    f"{_score(s['lc_win_rate_after'], None)}"
                ),
                highlight=False,
                soft_wrap=True,
            )
    if diff.flips:
        say(f"reference decisions that flipped ({len(diff.flips)}):", highlight=False)
        for f in diff.flips[:FLIPS_SHOWN]:
            say(
                escape(
                    f"  {f.judge} · {f.config}  {f.dataset}/{f.pair_id}: {f.before} -> {f.after}"
                ),
                highlight=False,
                soft_wrap=True,
            )
        if len(diff.flips) > FLIPS_SHOWN:
            say(f"  ... and {len(diff.flips) - FLIPS_SHOWN} more (--json lists all)")


@app.command("diff")
def diff(
    run_a: Annotated[str, typer.Argument(help="The earlier run.", callback=run_id_given)],
    run_b: Annotated[str, typer.Argument(help="The later run.", callback=run_id_given)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
) -> None:
    """What changed from RUN_A to RUN_B: pairs, judge configs, calls, scores, flipped pairs."""
    from tasks.history.diff import diff_runs

    result = diff_runs(state.work, run_a, run_b)
    if as_json:
        print_json(asdict(result))  # strict JSON: NaN (a run not replayed) as null
    else:
        print_diff(result)


@app.command("trends")
def trends(
    page: Annotated[
        bool,
        typer.Option("--page", help="Also write the trends page, trends.html in the work dir."),
    ] = False,
) -> None:
    """Every judge config's figures across all runs: its latest score and agreement, and the
    change since its first run; with --page, the HTML page with every run's figures (written
    only when it changed: without --page nothing is written)."""
    from tasks.history.page import write_trends
    from tasks.history.trends import trend_points
    from tasks.leaderboard.history import system_trends

    points = trend_points(state.work)
    by_config: dict[tuple[str, str], list[TrendPoint]] = {}
    for point in points:
        by_config.setdefault((point.judge, point.config), []).append(point)
    rows = [
        [f"{judge} · {config}", str(len(seen)), f"{seen[-1].score:.3f}",
         f"{seen[-1].score - seen[0].score:+.3f}", f"{seen[-1].alpha:.2f}", seen[-1].run_id]
        for (judge, config), seen in sorted(by_config.items())
    ]  # fmt: skip
    runs = len({p.run_id for p in points})
    title = f"trends of {len(by_config)} judge configs over {runs} runs"
    headers = ["judge · config", "runs", "score", "since first", "alpha", "latest run"]
    print_table(console, title, headers, rows)
    if page:
        path = write_trends(state.work, points, system_trends(state.work))
        console.print(f"trends page: {state.work.location(path)}", highlight=False)


def _score(value: float | None, bound: str | None) -> str:
    """A score, `<= x` / `>= x` for a bound, `-` for none."""
    if value is None:
        return "-"
    return {"upper": "<= ", "lower": ">= "}.get(bound or "", "") + f"{value:.1f}"
