"""Subcommand advise: the cheapest stopping policy within a change budget, checked held out."""

from __future__ import annotations

from typing import Annotated

import typer

from flows.cli.app import app, console, run_id_given, state


def _budget(text: str) -> float:
    """`1%` or `0.01` as a share."""
    from tasks.errors import InputError

    raw = text.strip()
    try:
        return float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise InputError(f"--max-change {text!r} is not a share such as 1% or 0.01") from None


def _span(low: float | None, high: float | None, fmt: str) -> str:
    return "-" if low is None or high is None else f"[{fmt.format(low)}, {fmt.format(high)}]"


@app.command("advise")
def advise_command(
    run_id: Annotated[
        str, typer.Argument(help="A full-grid run with outcomes.parquet.", callback=run_id_given)
    ],
    max_change: Annotated[
        str, typer.Option("--max-change", help="Budget on changed decisions: 1% or 0.01.")
    ] = "1%",
    rng_seed: Annotated[int, typer.Option("--rng-seed", help="Seed of halves and bootstrap.")] = 0,
) -> None:
    """Advise the cheapest stopping policy within a change budget (docs/design.md#advice)."""
    from rich.table import Table

    from tasks.errors import InputError
    from tasks.replay.advisor import advise
    from tasks.replay.grid import read_replay_input
    from tasks.runfolder import RunFolder
    from tasks.storage import write_parquet_atomic

    budget = _budget(max_change)
    folder = RunFolder(state.work, run_id)
    if not folder.outcomes.is_file():
        raise InputError(f"run {run_id!r} has no outcomes ({folder.outcomes}); remap it first")
    table = advise(
        read_replay_input(folder.outcomes),
        max_change=budget,
        rng_seed=rng_seed,
        where=str(folder.outcomes),
    )
    view = Table(title=f"advice within {budget:.2%} changed decisions (balanced design)")
    for name in ("judge", "config", "rank", "policy"):
        view.add_column(name)
    for name in ("savings (choice)", "change (choice)", "predicted change", "held-out savings"):
        view.add_column(name, justify="right")
    view.add_column("held-out change", justify="right")
    for r in table.to_pylist():
        if r["policy"] is None:
            view.add_row(r["judge"], r["config"], r["rank"], "none: keep full", *["-"] * 5)
            continue
        view.add_row(
            r["judge"],
            r["config"],
            r["rank"],
            r["policy"],
            f"{r['selection_savings']:.1%} "
            + _span(r["selection_savings_low"], r["selection_savings_high"], "{:.1%}"),
            f"{r['selection_change']:.2%} "
            + _span(r["selection_change_low"], r["selection_change_high"], "{:.2%}"),
            _span(r["predicted_change_low"], r["predicted_change_high"], "{:.2%}"),
            f"{r['holdout_savings']:.1%} "
            + _span(r["holdout_savings_low"], r["holdout_savings_high"], "{:.1%}"),
            f"{r['holdout_change']:.2%} "
            + _span(r["holdout_change_low"], r["holdout_change_high"], "{:.2%}"),
        )
    console.print(view)
    for r in table.to_pylist():
        if r["rank"] == "advised":
            console.print(f"{r['judge']}/{r['config']}: {r['note']}", highlight=False)
    # Written after it is shown: a work dir that cannot be written still gets the advice.
    path = folder.table("advice")
    write_parquet_atomic(table, path, overwrite=True)
    console.print(f"advice: {path}", highlight=False)
