"""Subcommand leaderboard: a run's systems ranked against a baseline, per judge config."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from flows.cli.app import app, console, fits, run_id_given, state
from tasks.errors import InputError
from tasks.leaderboard.notes import board_notes

_RULES = ("reference", "drop-conflicts", "per-order")


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"  # None: never met the baseline


def _interval(low: float | None, high: float | None, digits: int) -> str:
    if low is None and high is None:
        return "-"
    if low is None:  # an open end: a bound, or a replicate without a finite estimate
        return f"below {high:.{digits}f}"
    if high is None:
        return f"above {low:.{digits}f}"
    return f"{low:.{digits}f} to {high:.{digits}f}"


def _bounded(value: float | None, side: str | None, digits: int) -> str:
    """A value, or the bound standing in for one: `<= 812.3` (no win), `>= 1187.7`."""
    if value is None:
        return "-"
    mark = {"upper": "<= ", "lower": ">= "}.get(side or "", "")
    return f"{mark}{value:.{digits}f}"


def _print_board(board: dict[str, Any]) -> None:
    say = console.print
    title = (
        f"{board['judge']} · {board['config']}: {len(board['systems'])} systems, baseline "
        f"{board['baseline']}, rule {board['rule']}, {board['questions']} questions"
    )
    others = [r for r in _RULES if r != board["rule"]]
    ranks = {
        rule: {row["system"]: row["rank"] for row in board["rules"][rule]["systems"]}
        for rule in others
    }
    lc = board.get("length_control", False)
    headers = [
        "rank", "system", "score", f"{board['confidence']:.0%} interval", "BT win %",
        "win % vs baseline", *(["LC win %"] if lc else []), "W/T/L", "conflicts",
        *(f"rank {r}" for r in others),
    ]  # fmt: skip
    rows = []
    for row in board["systems"]:
        lc_cell = (
            [f"{_bounded(row['lc_win_rate'], row['lc_bound'], 1)} "
             f"({_interval(row['lc_lower'], row['lc_upper'], 1)})"]
            if lc else []
        )  # fmt: skip
        rows.append(
            [
                _number(row["rank"], 0) if row["rank"] is not None else "n.i.",
                row["system"] + (" (baseline)" if row["baseline"] else ""),
                _bounded(row["score"], row["bound"], 1),
                _interval(row["lower"], row["upper"], 1),
                _bounded(row["bt_win_rate"], row["bound"], 1),
                f"{_bounded(row['win_rate'], row['win_rate_bound'], 1)} "
                f"({_interval(row['win_rate_lower'], row['win_rate_upper'], 1)})",
                *lc_cell,
                f"{row['wins']}/{row['ties']}/{row['losses']}",
                str(row["conflicts"]),
                *(str(ranks[r][row["system"]] or "n.i.") for r in others),
            ]
        )
    table = Table(title=escape(title))
    for header in headers:
        table.add_column(header, justify="left" if header == "system" else "right")
    for cells in rows:
        table.add_row(*(escape(c) for c in cells))
    if fits(table):
        say(table)
    else:
        say(escape(title), style="bold", highlight=False)
        for cells in rows:
            pairs = "; ".join(f"{h} {c}" for h, c in zip(headers[2:], cells[2:], strict=True))
            say(f"{cells[0]}. {escape(cells[1])}: {escape(pairs)}", highlight=False)
    for line in board_notes(board):
        say(f"  [yellow]{escape(line)}[/yellow]", highlight=False, soft_wrap=True)
    check = board.get("style_check")
    if check:
        say(
            f"  style covariates {check['set']}: {check['definition']}; scores read at equal "
            "style (every covariate 0)",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    for name, coef in board["style"].items():
        say(
            f"  style {name}: {coef['coefficient']:+.3f} "
            f"({_interval(coef['lower'], coef['upper'], 3)})",
            highlight=False,
        )
    length = board.get("length")
    if length:
        terms = ", ".join(f"{n} {b:+.3f}" for n, b in length["coefficients"].items())
        say(
            f"  length control: LC win % = the fit's win rate against the baseline at equal "
            f"length; length terms {terms} (sd of the length difference "
            f"{length['sd_length_difference']:.0f} characters)",
            highlight=False,
            soft_wrap=True,
        )
    for effect in board.get("stopping", []):
        likeliest = max(effect["adjacent"], key=lambda a: a["p_swap"], default=None)
        swap = (
            f"; likeliest swap {likeliest['higher']} / {likeliest['lower']} "
            f"{likeliest['p_swap']:.1%}"
            if likeliest is not None
            else ""
        )
        # Two lines, each wrapped between words at the terminal's width.
        say(
            f"  stopping {effect['design']} · {effect['policy']}: saves "
            f"{effect['savings']:.1%} of calls ({effect['calls_saved']:.0f}, over all "
            f"{effect['pairs']} pairs)",
            highlight=False,
        )
        say(
            f"    expected adjacent swaps {effect['expected_swaps']:.3f} over the "
            f"{effect['pairs_with_baseline']} pairs with the baseline{escape(swap)}",
            highlight=False,
        )
    for flag in board["rank_flags"]:
        per_rule = ", ".join(f"{rule} {rank}" for rule, rank in flag["ranks"].items())
        swaps = ", ".join(
            f"{s['system']} ({'intervals overlap' if s['intervals_overlap'] else 'apart'})"
            for s in flag["swapped_with"]
        )
        say(
            f"  [yellow]rank differs between rules[/yellow]: {escape(flag['system'])} "
            f"({escape(per_rule)}); swaps with {escape(swaps)}",
            highlight=False,
        )


@app.command("leaderboard")
def leaderboard(
    run_id: Annotated[str, typer.Argument(help="The run to rank.", callback=run_id_given)],
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Fix this system's score (default: the manifest's)."),
    ] = None,
    style_control: Annotated[
        bool,
        typer.Option(
            "--style-control", help="Answer length and markdown as covariates, read at equal style."
        ),
    ] = False,
    style: Annotated[
        str,
        typer.Option(
            "--style-covariates",
            help="Arena-Hard-Auto's covariates: v2 (markdown densities) or v0.1 (counts).",
        ),
    ] = "v2",
    length_control: Annotated[
        bool,
        typer.Option(
            "--length-control",
            help="Length-controlled win rate against the baseline (AlpacaEval 2-style GLM).",
        ),
    ] = False,
    rule: Annotated[
        str,
        typer.Option("--rule", help="Counting rule shown first: " + ", ".join(_RULES) + "."),
    ] = "reference",
    replicates: Annotated[
        int, typer.Option("--replicates", help="Bootstrap replicates (questions resampled).")
    ] = 1000,
    confidence: Annotated[
        float, typer.Option("--confidence", help="Interval coverage, e.g. 0.95.")
    ] = 0.95,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap draws.")] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the leaderboards as JSON.")
    ] = False,
) -> None:
    """Rank a run's systems against a baseline per judge config: Bradley-Terry scores (Elo
    scale, baseline 1000) with bootstrap intervals over questions, win rates against the
    baseline (length-controlled too, with --length-control), and ranks under each counting
    rule (docs/design.md#leaderboards)."""
    if rule not in _RULES:
        raise InputError(f"--rule must be one of {', '.join(_RULES)}, got {rule!r}")
    if replicates < 10:
        raise InputError(f"--replicates must be at least 10, got {replicates}")
    if not 0 < confidence < 1:
        raise InputError(f"--confidence must be between 0 and 1, got {confidence}")
    if style not in ("v2", "v0.1"):
        raise InputError(f"--style-covariates must be v2 or v0.1, got {style!r}")
    from tasks.leaderboard import BoardOptions, run_leaderboard

    options = BoardOptions(
        baseline=baseline, style_control=style_control, style=style,  # type: ignore[arg-type]
        length_control=length_control, replicates=replicates, confidence=confidence, seed=seed,
    )  # fmt: skip
    result = run_leaderboard(state.work, run_id, options, rule)  # type: ignore[arg-type]
    if as_json:
        typer.echo(json.dumps(result, indent=2, allow_nan=False))
        return
    for board in result["boards"]:
        _print_board(board)
