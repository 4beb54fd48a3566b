"""Subcommand advise: the cheapest stopping policy certified within a change budget."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from flows.cli.app import app, console, run_id_given, state
from flows.cli.tables import print_json, print_table


def _share(text: str, option: str, example: str) -> float:
    """`1%` or `0.01` as a share."""
    from tasks.errors import InputError

    raw = text.strip()
    try:
        return float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise InputError(f"{option} {text!r} is not a share such as {example}") from None


@app.command("advise")
def advise_command(
    run_id: Annotated[
        str, typer.Argument(help="A full-grid run with outcomes.parquet.", callback=run_id_given)
    ],
    max_change: Annotated[
        str, typer.Option("--max-change", help="Budget on changed decisions: 1% or 0.01.")
    ] = "1%",
    level: Annotated[
        str, typer.Option("--level", help="Confidence of the certificates: 95% or 0.95.")
    ] = "95%",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the advice rows as JSON (for scripts).")
    ] = False,
) -> None:
    """Advise the cheapest stopping policy certified within a change budget
    (docs/design.md#advice). Writes nothing: a live run follows the advice its own
    configuration asks for (`live: {policy: advised, advised_by: RUN, max_change: 1%}`)."""
    from tasks.live.advice import run_advice
    from tasks.replay.advisor import shown

    budget = _share(max_change, "--max-change", "1% or 0.01")
    confidence = _share(level, "--level", "95% or 0.95")
    table = run_advice(state.work, run_id, max_change=budget, level=confidence)
    frame = shown(table.to_pandas())
    if as_json:
        print_json({"max_change": budget, "level": confidence, "advice": frame.to_dict("records")})
        return
    _print_advice(frame, budget, confidence)
    level_part = "" if confidence == 0.95 else f", level: {confidence * 100:g}%"
    console.print(
        "Nothing is written: a live run follows this advice when its configuration says "
        f"`live: {{policy: advised, advised_by: {run_id}, max_change: {budget * 100:g}%"
        f"{level_part}, rng_seed: N}}`.",
        highlight=False,
    )


def _print_advice(frame: Any, budget: float, confidence: float) -> None:
    """The advice as a table (turned or a block per row where it does not fit), then the
    advised policy's note per judge config."""
    headers = ["judge · config", "rank", "policy", "pairs", "savings", "change", "bound",
               "certificate", "pairs to certify"]  # fmt: skip
    rows = []
    for r in frame.to_dict("records"):
        needed = r["pairs_needed"]
        rows.append(
            [
                f"{r['judge']} · {r['config']}",
                r["rank"],
                r["policy"],
                str(r["pairs"]),
                f"{r['savings']:.1%}",
                f"{r['change']:.2%}",
                f"{r['change_bound']:.2%}",
                r["certificate"],
                "-" if needed is None or needed != needed else str(int(needed)),
            ]
        )
    title = (
        f"advice within {budget:.2%} changed decisions, certified at {confidence:.0%} "
        "(balanced design)"
    )
    print_table(console, title, headers, rows, left=3, turn=False)
    for r in frame.to_dict("records"):
        if r["rank"] == "advised":
            console.print(f"{r['judge']}/{r['config']}: {r['note']}", highlight=False)
