"""Subcommands diff and trends: what changed between runs, and every judge config's history."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from flows.cli.app import app, console, print_diff, state


@app.command("diff")
def diff(
    run_a: Annotated[str, typer.Argument(help="The earlier run.")],
    run_b: Annotated[str, typer.Argument(help="The later run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
) -> None:
    """What changed from RUN_A to RUN_B: pairs, judge configs, calls, scores, flipped pairs."""
    from tasks.history.diff import diff_runs

    result = diff_runs(state.work, run_a, run_b)
    if as_json:
        typer.echo(json.dumps(asdict(result), indent=2, default=str))
    else:
        print_diff(result)


@app.command("trends")
def trends() -> None:
    """Rebuild the trends page: every judge config's figures across all runs (warehouse)."""
    from tasks.history.page import write_trends
    from tasks.history.trends import trend_points

    points = trend_points(state.work)
    path = write_trends(state.work, points)
    runs = len({p.run_id for p in points})
    configs = len({(p.judge, p.config) for p in points})
    where = state.work.location(path)
    console.print(f"trends of {configs} judge configs over {runs} runs: {where}", highlight=False)
